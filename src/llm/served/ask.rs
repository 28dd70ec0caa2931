//! Asking a server which model it serves and how large its window is, over HTTP, each
//! request bounded by [`ASK_TIMEOUT`] and each body by [`MAX_BODY`].
//!
//! An OpenAI-compatible server is asked in two rounds. The first, `GET /v1/models` and
//! llama.cpp's `GET /props` at once, settles llama.cpp, vLLM and gateways that list windows.
//! Only when neither said a window comes the second, LM Studio's `GET /api/v0/models` and
//! Ollama's `POST /api/show` at once, so a server of the first kind sees two requests at each
//! start and never the others. Ollama's own API is asked for its model list (when the profile
//! names no model) and then `/api/show`.

use super::ServerAnswer;
use super::answers::{self, OllamaRoute, Window};
use crate::config::{ProviderKind, ProviderProfile};
use crate::llm::http::{client, join_url, secret_header};
use serde_json::{Value, json};
use std::time::Duration;

/// How long one request may take: a server that answers at all answers this in milliseconds.
const ASK_TIMEOUT: Duration = Duration::from_millis(1500);

/// The most of a body read. A gateway's model list (hundreds of models) fits; a server
/// that streams something else is cut off here.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// What one request got.
enum Reply {
    /// A JSON body with a success status.
    Json(Value),
    /// The server answered, but not with JSON it could mean (a 404, an HTML page).
    Other,
    /// No answer: refused, timed out, cut off.
    Silent(String),
}

impl Reply {
    fn json(&self) -> Option<&Value> {
        match self {
            Self::Json(value) => Some(value),
            _ => None,
        }
    }
}

/// Asks the profile's server; `chosen` is the model the person named, if any. `Err` says
/// why nothing was learned when the server did not answer at all.
pub(super) async fn ask(
    profile: &ProviderProfile,
    chosen: Option<&str>,
) -> Result<ServerAnswer, String> {
    // The TLS client loads the platform's certificates when first built, which takes long
    // enough to hold up the interface's first frame on tern's one runtime thread: build it
    // on a blocking thread instead. (The plain client for `http://` costs nothing.)
    if !profile.base_url.starts_with("http://") {
        let url = profile.base_url.clone();
        let _ = tokio::task::spawn_blocking(move || client(&url).is_ok()).await;
    }
    match profile.kind {
        ProviderKind::Ollama => ask_ollama(profile, chosen).await,
        ProviderKind::OpenAi => ask_openai_compatible(profile, chosen).await,
        ProviderKind::Anthropic => ask_anthropic_compatible(profile).await,
    }
}

/// An Anthropic-compatible server on this machine or the local network: llama.cpp's says its
/// window at `/props`. Only the window is learned; the model named stays.
async fn ask_anthropic_compatible(profile: &ProviderProfile) -> Result<ServerAnswer, String> {
    let root = server_root(&profile.base_url);
    let window = match get(profile, format!("{root}/props")).await {
        Reply::Json(props) => answers::props_window(&props),
        Reply::Other => None,
        Reply::Silent(why) => return Err(why),
    };
    Ok(answer(None, window))
}

async fn ask_openai_compatible(
    profile: &ProviderProfile,
    chosen: Option<&str>,
) -> Result<ServerAnswer, String> {
    let models_url = join_url(&profile.base_url, &["/chat/completions"], "/models");
    let root = server_root(&profile.base_url);
    let (models, props) = tokio::join!(
        get(profile, models_url),
        get(profile, format!("{root}/props"))
    );
    if let (Reply::Silent(why), Reply::Silent(_)) = (&models, &props) {
        return Err(why.clone());
    }
    let entries = models
        .json()
        .map(answers::model_entries)
        .unwrap_or_default();
    let ids: Vec<&str> = entries.iter().filter_map(|e| answers::id(e)).collect();
    let mut served = match chosen {
        Some(_) => None,
        None => adopted(profile, &ids),
    };
    // The window listed for the model tern will call, not for whichever is listed first.
    let calling = chosen
        .or(served.as_deref())
        .unwrap_or(&profile.default_model);
    let entry = answers::entry_for(&entries, calling);
    let mut window = props
        .json()
        .and_then(answers::props_window)
        .or_else(|| entry.and_then(answers::entry_window));
    if window.is_none() {
        let name = calling.to_owned();
        let (lm_studio, ollama) = tokio::join!(
            get(profile, format!("{root}/api/v0/models")),
            post(
                profile,
                format!("{root}/api/show"),
                json!({ "model": name })
            )
        );
        let listed = lm_studio
            .json()
            .map(answers::lm_studio_models)
            .unwrap_or_default();
        if !listed.is_empty() {
            let model = match chosen {
                Some(model) => listed.iter().find(|m| m.id == model),
                None => answers::lm_studio_pick(&listed),
            };
            if chosen.is_none() {
                served = model.map(|m| m.id.clone()).or(served);
            }
            window = model.and_then(|m| m.window.clone());
        } else if let Some(show) = ollama.json() {
            window = answers::ollama_window(show, OllamaRoute::OpenAiCompatible);
        }
    }
    Ok(answer(served, window))
}

async fn ask_ollama(
    profile: &ProviderProfile,
    chosen: Option<&str>,
) -> Result<ServerAnswer, String> {
    // As the provider does: a base URL pasted with `/v1` or `/api` is the same server.
    let url = |path| join_url(&profile.base_url, &["/v1", "/api"], path);
    let served = match chosen {
        Some(_) => None,
        None => match get(profile, url("/api/tags")).await {
            Reply::Json(tags) => adopted(profile, &answers::ollama_tags(&tags)),
            Reply::Other => None,
            Reply::Silent(why) => return Err(why),
        },
    };
    let name = chosen
        .or(served.as_deref())
        .unwrap_or(&profile.default_model)
        .to_owned();
    let route = OllamaRoute::Native {
        cap: profile.context_window,
    };
    let window = match post(profile, url("/api/show"), json!({ "model": name })).await {
        Reply::Json(show) => answers::ollama_window(&show, route),
        Reply::Other => None,
        Reply::Silent(why) if chosen.is_some() => return Err(why),
        Reply::Silent(_) => None,
    };
    Ok(answer(served, window))
}

fn answer(model: Option<String>, window: Option<Window>) -> ServerAnswer {
    let (window, said_by) = match window {
        Some(window) => (Some(window.tokens), window.said_by),
        None => (None, String::new()),
    };
    ServerAnswer {
        model,
        window,
        said_by,
    }
}

/// The served model tern adopts for a profile that names none: the only one listed, or,
/// from a server on this machine or the local network that does not list the name tern
/// assumed, the first one it lists. A remote gateway's long list keeps the assumed name:
/// picking one of hundreds for the person would be a guess.
fn adopted(profile: &ProviderProfile, listed: &[impl AsRef<str>]) -> Option<String> {
    let first = listed.first()?.as_ref();
    let assumed_listed = listed.iter().any(|m| m.as_ref() == profile.default_model);
    if listed.len() == 1 || (profile.is_local() && !assumed_listed) {
        return Some(first.to_owned());
    }
    None
}

/// The server's root: the base URL without a trailing `/v1`, where llama.cpp, LM Studio
/// and Ollama keep their own endpoints.
fn server_root(base_url: &str) -> String {
    let base = base_url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/chat/completions").unwrap_or(base);
    let lower = base.to_ascii_lowercase();
    match lower.strip_suffix("/v1") {
        Some(root) => base[..root.len()].to_owned(),
        None => base.to_owned(),
    }
}

async fn get(profile: &ProviderProfile, url: String) -> Reply {
    send(profile, &url, None).await
}

async fn post(profile: &ProviderProfile, url: String, body: Value) -> Reply {
    send(profile, &url, Some(body)).await
}

/// One request with the profile's key (servers started with a key want it on every
/// endpoint), within [`ASK_TIMEOUT`].
async fn send(profile: &ProviderProfile, url: &str, body: Option<Value>) -> Reply {
    let client = match client(url) {
        Ok(client) => client,
        Err(err) => return Reply::Silent(err.message),
    };
    let mut request = match &body {
        Some(body) => client.post(url).json(body),
        None => client.get(url),
    };
    if let Some(key) = profile.api_key.as_deref().filter(|k| !k.is_empty()) {
        match secret_header(&format!("Bearer {}", key.trim()), &profile.name) {
            Ok(value) => request = request.header(reqwest::header::AUTHORIZATION, value),
            Err(err) => return Reply::Silent(err.message),
        }
    }
    let exchange = async {
        let mut response = request.send().await.map_err(|err| transport(&err))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|err| transport(&err))? {
            if bytes.len() + chunk.len() > MAX_BODY {
                return Ok(Reply::Other);
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            tracing::debug!(
                url,
                status = status.as_u16(),
                "the server did not answer this question"
            );
            return Ok(Reply::Other);
        }
        Ok(match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => Reply::Json(value),
            Err(_) => Reply::Other,
        })
    };
    match tokio::time::timeout(ASK_TIMEOUT, exchange).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(why)) => Reply::Silent(why),
        Err(_) => Reply::Silent(format!(
            "no answer within {} ms from {}",
            ASK_TIMEOUT.as_millis(),
            crate::llm::error::display_url(url)
        )),
    }
}

/// Why a request got no answer, in a few words, without the URL's secrets.
fn transport(err: &reqwest::Error) -> String {
    let what = if err.is_connect() {
        "nothing answers at"
    } else if err.is_timeout() {
        "no answer in time from"
    } else {
        "the connection failed to"
    };
    let url = err
        .url()
        .map(|url| crate::llm::error::display_url(url.as_str()))
        .unwrap_or_default();
    format!("{what} {url}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Environment, load_from_str};

    fn openai_at(base_url: &str) -> ProviderProfile {
        let env = Environment::from_pairs([("OPENAI_BASE_URL", base_url), ("OPENAI_API_KEY", "k")]);
        let config = load_from_str("", std::path::Path::new("/c.toml"), &env).unwrap();
        config.provider("openai").unwrap().clone()
    }

    #[test]
    fn the_served_model_is_adopted_only_when_it_is_clear_which_one() {
        let local = openai_at("http://127.0.0.1:8080/v1");
        assert_eq!(adopted(&local, &["only"]), Some("only".to_owned()));
        assert_eq!(adopted(&local, &["a", "b"]), Some("a".to_owned()));
        assert_eq!(
            adopted(&local, &["a", "gpt-4.1"]),
            None,
            "the assumed one is there"
        );
        assert_eq!(adopted(&local, &[] as &[&str]), None);
        let gateway = openai_at("https://gw.example.com/v1");
        assert_eq!(
            adopted(&gateway, &["x/a", "x/b"]),
            None,
            "a guess among many"
        );
        assert_eq!(adopted(&gateway, &["x/a"]), Some("x/a".to_owned()));
    }

    #[test]
    fn the_root_drops_v1_and_a_pasted_endpoint() {
        for (base, root) in [
            ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:8080/V1/", "http://127.0.0.1:8080"),
            ("http://h:1234/v1/chat/completions", "http://h:1234"),
            ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
            ("https://openrouter.ai/api/v1", "https://openrouter.ai/api"),
        ] {
            assert_eq!(server_root(base), root, "{base}");
        }
    }
}
