//! What a model server says about itself: which model it serves and how large its context
//! window is, for Ollama and every OpenAI-compatible server that is not OpenAI itself
//! (llama.cpp, vLLM, LM Studio, Ollama's `/v1`, gateways that list windows).
//!
//! The window decides when tern compacts, and the model name what it asks for, so guessing
//! them wrong breaks turns: a 4k llama.cpp server taken for 128k fills up long before tern
//! compacts. So the server is asked, once per start, per base URL and model, in the
//! background with a short bound ([`learn`]): the first frame of the interface never waits,
//! and a turn's first model call waits only for what is already under way
//! ([`crate::llm::ModelRoute::ready`]). What it said is remembered ([`ServedCache`]) and used
//! from the next start on until the server says something else.
//!
//! Written values always win: a configured `context_window` is never replaced, a model the
//! person named is never swapped for the served one. [`ModelLimits`] carries the values in
//! use and [`WindowSource`] where the window came from, for `/status` and `tern doctor`.

mod answers;
mod ask;
mod cache;

pub use cache::{Remembered, ServedCache};

use crate::config::ProviderProfile;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;
use tokio::sync::watch;

/// The most the whole asking may take. A local server answers in milliseconds; this bounds
/// how long a headless turn waits for one that does not.
pub const ASK_BOUND: Duration = Duration::from_secs(2);

/// What a server said about the model it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAnswer {
    /// The model tern should call, when the profile names none and the server made clear
    /// which one it serves.
    pub model: Option<String>,
    /// Its context window in tokens, when the server said.
    pub window: Option<u64>,
    /// Which answer said the window, like `llama.cpp /props`; empty when none did.
    pub said_by: String,
}

/// Where the window in use came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowSource {
    /// `context_window` in the config file.
    Configured,
    /// The server said it. `remembered` holds when, for a window from an earlier start that
    /// the server has not confirmed (it is being asked, or did not answer).
    Server {
        said_by: String,
        remembered: Option<String>,
    },
    /// tern's figure for this kind of provider; `why` says why nothing better is known.
    Assumed { why: String },
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Configured => f.write_str("configured"),
            Self::Server {
                said_by,
                remembered: None,
            } => write!(f, "from the server: {said_by}"),
            Self::Server {
                said_by,
                remembered: Some(when),
            } => write!(f, "from the server: {said_by}, remembered from {when}"),
            Self::Assumed { why } => write!(f, "assumed: {why}"),
        }
    }
}

/// The model a route calls and the limits it calls it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLimits {
    /// The model name as the provider knows it.
    pub model: String,
    /// The context window in tokens: where compaction starts from.
    pub context_window: u64,
    /// The largest reply to ask for.
    pub max_output_tokens: u32,
    /// Where `context_window` came from.
    pub window_source: WindowSource,
}

impl ModelLimits {
    /// Limits fixed in code or by the configuration, asked of no server.
    pub fn fixed(model: impl Into<String>, max_output_tokens: u32, context_window: u64) -> Self {
        Self {
            model: model.into(),
            context_window,
            max_output_tokens,
            window_source: WindowSource::Configured,
        }
    }
}

/// A route's limits as they are now, and whether its server is still being asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteLimits {
    pub limits: ModelLimits,
    pub asking: bool,
}

/// What the server said, and from when if it is remembered rather than fresh.
struct Said<'a> {
    answer: &'a ServerAnswer,
    remembered: Option<&'a str>,
}

/// The limits for `profile` from what is written and what the server said. `chosen` is the
/// model the person named (a flag, `[models]`, the profile's written `model`); `why_assumed`
/// says why the window is only assumed when the server said none.
fn limits(
    profile: &ProviderProfile,
    chosen: Option<&str>,
    said: Option<Said<'_>>,
    why_assumed: &str,
) -> ModelLimits {
    let model = chosen
        .map(str::to_owned)
        .or_else(|| said.as_ref().and_then(|s| s.answer.model.clone()))
        .unwrap_or_else(|| profile.default_model.clone());
    let told = said.and_then(|s| Some((s.answer.window?, s)));
    let (context_window, window_source) = match told {
        _ if profile.written.context_window => (profile.context_window, WindowSource::Configured),
        Some((window, said)) => (
            window,
            WindowSource::Server {
                said_by: said.answer.said_by.clone(),
                remembered: said.remembered.map(str::to_owned),
            },
        ),
        None => (
            profile.context_window,
            WindowSource::Assumed {
                why: why_assumed.to_owned(),
            },
        ),
    };
    ModelLimits {
        model,
        max_output_tokens: profile.output_for(context_window),
        context_window,
        window_source,
    }
}

/// Whether there is anything to ask `profile`'s server: it can say, and the person has not
/// written both the model and the window.
fn worth_asking(profile: &ProviderProfile, chosen: Option<&str>) -> bool {
    profile.asks_server() && !(profile.written.context_window && chosen.is_some())
}

/// The cache key: the kind, the base URL and the model named (`*` for whatever it serves).
fn cache_key(profile: &ProviderProfile, chosen: Option<&str>) -> String {
    format!(
        "{} {} {}",
        profile.kind.as_str(),
        profile.base_url,
        chosen.unwrap_or("*")
    )
}

/// Whether a route asks its server or only uses what is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// Ask in the background (a front end that will call the model).
    Ask,
    /// Use only the configuration and what is remembered (nothing is sent: a prompt shown).
    RememberedOnly,
}

/// The limits of a route to `chosen` (or the profile's own model) on `profile`, as known now
/// (the configuration, what is remembered), and, when the server can say more and `asking`
/// allows, a task that asks it within [`ASK_BOUND`] and updates the limits when it answers.
/// The task ends there; without a runtime to run it, nothing is asked.
pub fn learn(
    profile: &ProviderProfile,
    chosen: Option<String>,
    cache: Option<ServedCache>,
    asking: Asking,
) -> watch::Receiver<RouteLimits> {
    let worth = worth_asking(profile, chosen.as_deref());
    let key = cache_key(profile, chosen.as_deref());
    let remembered = cache.as_ref().filter(|_| worth).and_then(|c| c.get(&key));
    let runtime = tokio::runtime::Handle::try_current().ok();
    let ask = worth && asking == Asking::Ask && runtime.is_some();
    let why = match (worth, ask) {
        (false, _) => "tern's figure for this provider",
        (true, true) => "asking the server",
        (true, false) => "the server was not asked",
    };
    let since = remembered.as_ref().map(|r| shown_time(&r.learned_at));
    let said = remembered.as_ref().map(|r| Said {
        answer: &r.answer,
        remembered: since.as_deref(),
    });
    let now = limits(profile, chosen.as_deref(), said, why);
    let (tx, rx) = watch::channel(RouteLimits {
        limits: now,
        asking: ask,
    });
    if let (true, Some(runtime)) = (ask, runtime) {
        let profile = profile.clone();
        runtime.spawn(async move {
            let limits = settle(&profile, chosen.as_deref(), remembered, cache.as_ref()).await;
            tx.send_replace(RouteLimits {
                limits,
                asking: false,
            });
        });
    }
    rx
}

/// Asks `profile`'s server now, within [`ASK_BOUND`], and returns the limits that follow
/// (for `tern doctor`); what it says is remembered. A profile whose server cannot say gets
/// its configured or assumed limits without a request.
pub async fn ask_now(
    profile: &ProviderProfile,
    chosen: Option<&str>,
    cache: Option<&ServedCache>,
) -> ModelLimits {
    if !worth_asking(profile, chosen) {
        return limits(profile, chosen, None, "tern's figure for this provider");
    }
    let remembered = cache.and_then(|c| c.get(&cache_key(profile, chosen)));
    settle(profile, chosen, remembered, cache).await
}

/// Asks the server and works out the limits: its fresh answer when it gave one (remembered
/// if it changed), else what was remembered, else the assumed figures, saying why.
async fn settle(
    profile: &ProviderProfile,
    chosen: Option<&str>,
    remembered: Option<Remembered>,
    cache: Option<&ServedCache>,
) -> ModelLimits {
    let asked = tokio::time::timeout(ASK_BOUND, ask::ask(profile, chosen)).await;
    let answer = match asked {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => return unanswered(profile, chosen, remembered, &why),
        Err(_) => {
            let why = format!("no answer within {} s", ASK_BOUND.as_secs());
            return unanswered(profile, chosen, remembered, &why);
        }
    };
    let key = cache_key(profile, chosen);
    let changed = remembered.as_ref().is_none_or(|r| r.answer != answer);
    if let Some(cache) = cache
        && changed
        && (answer.model.is_some() || answer.window.is_some())
        && let Err(err) = cache.put(&key, &answer)
    {
        tracing::warn!(%err, path = %cache.path().display(), "could not remember what the server said");
    }
    tracing::info!(
        profile = %profile.name,
        model = ?answer.model,
        window = ?answer.window,
        said_by = %answer.said_by,
        "asked the server about its model"
    );
    let said = Said {
        answer: &answer,
        remembered: None,
    };
    limits(
        profile,
        chosen,
        Some(said),
        "the server did not say its window",
    )
}

/// The limits when the server gave no answer: what was remembered, else the assumed ones.
fn unanswered(
    profile: &ProviderProfile,
    chosen: Option<&str>,
    remembered: Option<Remembered>,
    why: &str,
) -> ModelLimits {
    tracing::info!(profile = %profile.name, why, "the server did not say which model it serves");
    let since = remembered.as_ref().map(|r| shown_time(&r.learned_at));
    let said = remembered.as_ref().map(|r| Said {
        answer: &r.answer,
        remembered: since.as_deref(),
    });
    limits(
        profile,
        chosen,
        said,
        &format!("the server did not answer: {why}"),
    )
}

/// A remembered time as people read it (`2025-06-01 14:03 UTC`); the stored text when it is
/// not a timestamp.
fn shown_time(stored: &str) -> String {
    match stored.parse::<jiff::Timestamp>() {
        Ok(at) => at.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        Err(_) => stored.to_owned(),
    }
}
