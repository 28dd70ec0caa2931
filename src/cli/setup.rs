//! What every subcommand that talks to a model needs: configuration, logging, the store, the
//! model client with its fallback, and the session dependencies built from them.

use crate::config::{self, Config, ModelRef, Paths, ProviderProfile};
use crate::llm::served::{self, Asking, ServedCache};
use crate::llm::{self, ModelClient, ModelRoute, RetryPolicy};
use crate::session::{Redactor, SessionDeps};
use crate::store::{Overrides, SessionMeta, Store};
use crate::tools::mcp::McpHub;
use crate::tools::{ApprovalMode, ChildEnv, ShellLimits, ToolRegistry};
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;

/// Which provider profile and model to use.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelArgs {
    /// The provider profile to use: one of the config file's, or a built-in one (anthropic,
    /// openai, ollama).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The model to use instead of the profile's default one.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
}

impl ModelArgs {
    /// What a new session records as asked for on purpose.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
        }
    }

    /// These flags, or when neither is given, what a resumed session was started with.
    pub fn or_session(&self, meta: Option<&SessionMeta>) -> ModelArgs {
        match meta {
            Some(meta) if self.provider.is_none() && self.model.is_none() => ModelArgs {
                provider: meta.overrides.provider.clone(),
                model: meta.overrides.model.clone(),
            },
            _ => self.clone(),
        }
    }
}

/// Configuration and paths, loaded once per process.
pub struct Loaded {
    pub paths: Paths,
    pub config: Config,
}

/// Reads the configuration (from the environment as tern started, keys included) and starts
/// logging to the log file.
pub fn load() -> anyhow::Result<Loaded> {
    let (paths, config) = config::load(super::startup::environment())?;
    init_logging(&paths.log_dir);
    Ok(Loaded { paths, config })
}

/// Where tern keeps its files, without reading the config file (which may be what is
/// broken), and logging started there.
pub fn load_paths() -> anyhow::Result<config::Paths> {
    let paths = Paths::from_env(super::startup::environment())?;
    init_logging(&paths.log_dir);
    Ok(paths)
}

/// Opens the session database, creating it on first use.
pub fn open_store(paths: &Paths) -> anyhow::Result<Arc<Store>> {
    Ok(Arc::new(Store::open(&paths.db_file)?))
}

/// The client a stored session calls: `flags_client` (built from the flags), unless the
/// flags name no model and the session asked for one of its own when it started.
pub fn session_client(
    loaded: &Loaded,
    flags: &ModelArgs,
    found: Option<&SessionMeta>,
    flags_client: ModelClient,
) -> anyhow::Result<ModelClient> {
    match found {
        Some(meta) if flags.overrides().is_empty() && !meta.overrides.is_empty() => {
            model_client(loaded, &flags.or_session(found), KeyCheck::Required)
        }
        _ => Ok(flags_client),
    }
}

/// Builds the client of a session that asked for its own provider or model.
pub fn models(loaded: Arc<Loaded>) -> crate::gateway::Models {
    Arc::new(move |overrides: &Overrides| {
        let args = ModelArgs {
            provider: overrides.provider.clone(),
            model: overrides.model.clone(),
        };
        model_client(&loaded, &args, KeyCheck::Required).map_err(|err| format!("{err:#}"))
    })
}

/// Whether building a model client insists on the provider's key being set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// The client will call the model.
    Required,
    /// The client only names the model (showing a prompt); no call is made.
    NotNeeded,
}

/// Builds the model client: the chosen profile and model, and the configured fallback. The
/// server of a profile that can say which model it serves and how large its window is gets
/// asked in the background ([`served::learn`]) when the client will call the model; what it
/// said at an earlier start is used meanwhile.
pub fn model_client(
    loaded: &Loaded,
    args: &ModelArgs,
    keys: KeyCheck,
) -> anyhow::Result<ModelClient> {
    let config = &loaded.config;
    let profile = match &args.provider {
        Some(name) => config.provider(name)?,
        None => match (&config.models.default, &args.model) {
            (
                Some(ModelRef {
                    provider: Some(name),
                    ..
                }),
                None,
            ) => config.provider(name)?,
            _ => config.default_provider()?,
        },
    };
    if keys == KeyCheck::Required {
        profile.require_key()?;
    }
    // The model the person named, if any: the served one never replaces it.
    let chosen = match (&args.model, &config.models.default) {
        (Some(model), _) => Some(model.clone()),
        (None, Some(default)) if args.provider.is_none() => Some(default.model.clone()),
        _ => profile.written.model.then(|| profile.default_model.clone()),
    };
    let asking = match keys {
        KeyCheck::Required => Asking::Ask,
        KeyCheck::NotNeeded => Asking::RememberedOnly,
    };
    let cache = ServedCache::in_dir(&loaded.paths.data_dir);
    let route = |profile: &ProviderProfile, chosen: Option<String>| {
        let limits = served::learn(profile, chosen, Some(cache.clone()), asking);
        ModelRoute::learned(llm::provider_for(profile), limits)
    };
    let primary = route(profile, chosen);
    let fallback = match &config.models.fallback {
        Some(reference) => {
            let (fallback_profile, model) = config.resolve_model(reference)?;
            let same = fallback_profile.name == profile.name && model == primary.model();
            match (same, fallback_profile.require_key()) {
                (false, Ok(())) => Some(route(fallback_profile, Some(model))),
                (false, Err(err)) => {
                    tracing::warn!(%err, "fallback model unavailable");
                    None
                }
                (true, _) => None,
            }
        }
        None => None,
    };
    let policy = RetryPolicy::new(&config.retry, &config.session);
    Ok(ModelClient::new(primary, fallback, policy))
}

/// Everything a session needs, for one process.
pub fn session_deps(
    loaded: &Loaded,
    store: Arc<Store>,
    client: ModelClient,
    approval: ApprovalMode,
    overrides: Overrides,
) -> Arc<SessionDeps> {
    let notes_client = notes_client(loaded, &client);
    let child_env = child_env(&loaded.config);
    // Every credential tern knows by value: the providers' keys, and the secrets it keeps
    // out of the commands' environment. None of them reaches a log, the journal or a
    // provider in what a tool printed.
    let secrets: Vec<String> = loaded
        .config
        .providers
        .values()
        .filter_map(|profile| profile.api_key.clone())
        .chain(child_env.secret_values(std::env::vars_os()))
        .collect();
    Arc::new(SessionDeps {
        store,
        client,
        tools: ToolRegistry::builtin_with(ShellLimits::from(&loaded.config.tools)),
        settings: loaded.config.session.clone(),
        approval,
        data_dir: loaded.paths.data_dir.clone(),
        identity_dir: loaded.paths.config_dir.join(crate::context::IDENTITY_DIR),
        notes_client,
        overrides,
        redactor: Arc::new(Redactor::new(secrets)),
        mcp: Some(Arc::new(mcp_hub(loaded, &child_env))),
        child_env: Arc::new(child_env),
        agents: Default::default(),
        jobs: Default::default(),
    })
}

/// The MCP servers of this process: started with the commands' environment (secrets left
/// out), a project's `.mcp.json` reading the variables tern started with less its credentials.
pub fn mcp_hub(loaded: &Loaded, child_env: &ChildEnv) -> McpHub {
    McpHub::new(
        loaded.config.mcp.clone(),
        child_env.filter(std::env::vars_os()),
        super::startup::environment().without(&loaded.config.credential_vars()),
        &loaded.paths.data_dir,
    )
}

/// The rules for the environment of commands: every provider's key variable removed, and
/// `[tools] pass_env` and `strip_env` applied.
pub fn child_env(config: &Config) -> ChildEnv {
    ChildEnv::new(
        config.credential_vars(),
        config.tools.pass_env.clone(),
        config.tools.strip_env.clone(),
    )
}

/// The client for compaction notes: `[models] compaction` when set and usable (failing over
/// to the conversation's fallback), else none, and the conversation model writes them.
fn notes_client(loaded: &Loaded, main: &ModelClient) -> Option<ModelClient> {
    let config = &loaded.config;
    let reference = config.models.compaction.as_ref()?;
    let usable = config
        .resolve_model(reference)
        .and_then(|(profile, model)| profile.require_key().map(|()| (profile, model)));
    match usable {
        Ok((profile, model)) => {
            let cache = ServedCache::in_dir(&loaded.paths.data_dir);
            let limits = served::learn(profile, Some(model), Some(cache), Asking::Ask);
            let route = ModelRoute::learned(llm::provider_for(profile), limits);
            Some(ModelClient::new(
                route,
                main.fallback.clone(),
                main.policy.clone(),
            ))
        }
        Err(err) => {
            tracing::warn!(%err, "the compaction model is unavailable; the conversation model writes the notes");
            None
        }
    }
}

/// Where [`Which`] looks for sessions: the store, when a command reads it itself, or the
/// session service.
pub trait Sessions {
    /// The session an id or a unique prefix of one names.
    async fn resolve(&self, prefix: &str) -> anyhow::Result<SessionMeta>;
    /// The latest session started in `dir`.
    async fn latest(&self, dir: &Path) -> anyhow::Result<Option<SessionMeta>>;
}

impl Sessions for Store {
    async fn resolve(&self, prefix: &str) -> anyhow::Result<SessionMeta> {
        Ok(Store::resolve(self, prefix)?)
    }

    async fn latest(&self, dir: &Path) -> anyhow::Result<Option<SessionMeta>> {
        Ok(self.latest_for_project(dir)?)
    }
}

impl Sessions for crate::gateway::SessionService {
    async fn resolve(&self, prefix: &str) -> anyhow::Result<SessionMeta> {
        Ok(crate::gateway::SessionService::resolve(self, prefix).await?)
    }

    async fn latest(&self, dir: &Path) -> anyhow::Result<Option<SessionMeta>> {
        Ok(crate::gateway::SessionService::latest(self, dir).await?)
    }
}

/// Which stored session a command continues, from `--continue` and `--session`.
#[derive(Debug, Clone, Default)]
pub struct Which {
    pub r#continue: bool,
    pub session: Option<String>,
}

impl Which {
    /// The stored session to continue, or `None` for a new one. `--session` may name a
    /// session of another project (its tools work there, and the user is told); `--continue`
    /// takes the latest of this directory's.
    pub async fn find(&self, sessions: &impl Sessions) -> anyhow::Result<Option<SessionMeta>> {
        if let Some(id) = &self.session {
            let meta = sessions.resolve(id).await?;
            if !meta.project_dir.is_dir() {
                anyhow::bail!(
                    "session {} belongs to {}, which no longer exists; recreate that folder to \
                     continue it, or start a new session here with `tern run \"…\"`",
                    meta.id,
                    meta.project_dir.display()
                );
            }
            let here = project_dir()?;
            if meta.project_dir != here {
                eprintln!(
                    "tern: continuing session {} of {} (you are in {}); its tools work there",
                    meta.id.short(),
                    meta.project_dir.display(),
                    here.display()
                );
            }
            return Ok(Some(meta));
        }
        if !self.r#continue {
            return Ok(None);
        }
        let here = project_dir()?;
        match sessions.latest(&here).await? {
            Some(meta) => Ok(Some(meta)),
            None => anyhow::bail!(
                "there is no earlier session for {} to continue; start one with `tern run \"…\"` \
                 (or pick another with `tern sessions list` and `--session ID`)",
                here.display()
            ),
        }
    }
}

/// The project directory: where tern was started.
pub fn project_dir() -> anyhow::Result<std::path::PathBuf> {
    let cwd = std::env::current_dir().context("the current directory is not accessible")?;
    let cwd = cwd.canonicalize().unwrap_or(cwd);
    if cwd.to_str().is_none() {
        anyhow::bail!(
            "the project folder {} has a name that is not valid UTF-8, which sessions cannot \
             record; run tern from a folder whose path is valid UTF-8",
            cwd.display()
        );
    }
    Ok(cwd)
}

/// Sends tracing output to `<log_dir>/tern.log`; `TERN_LOG` sets the filter (default info).
/// Logging is best effort: a log file that cannot be opened never stops tern.
fn init_logging(log_dir: &Path) {
    use tracing_subscriber::EnvFilter;
    if std::fs::create_dir_all(log_dir).is_err() {
        return;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join("tern.log"))
    else {
        return;
    };
    let filter = EnvFilter::try_from_env("TERN_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}
