//! The resolved configuration as plain data, with every default in one place.

use super::channels::ChannelSettings;
use super::mcp::McpSettings;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// The whole configuration after defaults and environment variables were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it was read from, if any.
    pub source: Option<PathBuf>,
    /// Where the config file is read from, whether or not it exists; messages that tell the
    /// user to write one name it.
    pub config_file: PathBuf,
    /// Provider profiles by name, including the built-in ones found in the environment.
    pub providers: BTreeMap<String, ProviderProfile>,
    /// `[models]`: which model plays which role.
    pub models: ModelRoles,
    /// `[session]`: timeouts, compaction and storage limits.
    pub session: SessionSettings,
    /// `[retry]`: how failed model calls are retried.
    pub retry: RetrySettings,
    /// `[ui]`: the terminal interface.
    pub ui: UiSettings,
    /// `[tools]`: what commands run with and for how long.
    pub tools: ToolSettings,
    /// `[channels]`: the chat platforms and webhooks the owner of the store listens to.
    pub channels: ChannelSettings,
    /// `[mcp]`: the MCP servers whose tools sessions get.
    pub mcp: McpSettings,
    /// The variables `[mcp.servers.*]` header and env values name: credentials, kept here
    /// rather than on each server so that servers stay the same whichever file they came from.
    pub(super) mcp_credential_vars: Vec<String>,
    /// The profiles the config file or the environment set up (a `[providers.NAME]`, the
    /// variables of a built-in one, a profile `[models]` uses); the other built-in profiles
    /// exist only to be named with `--provider`.
    pub(super) configured: BTreeSet<String>,
}

impl Config {
    /// The environment variables credentials are read from, each once: the provider profiles'
    /// keys, the channels' tokens and what `[mcp.servers.*]` header and env values name.
    pub fn credential_vars(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .providers
            .values()
            .filter_map(|profile| profile.api_key_env.clone())
            .chain(self.channels.credential_vars())
            .chain(self.mcp_credential_vars.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The profiles the config file or the environment set up, by name: the ones worth
    /// trying. The other built-in ones are there only for `--provider NAME`.
    pub fn configured_providers(&self) -> impl Iterator<Item = &ProviderProfile> {
        self.providers
            .values()
            .filter(|profile| self.configured.contains(&profile.name))
    }
}

/// `[tools]`: what the commands tern runs get to see, and how long they may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSettings {
    /// Variables commands get even though they look secret (exact names). This holds even for
    /// a provider's own key variable: the person named it.
    pub pass_env: Vec<String>,
    /// Variables commands never get, though they look harmless: names, or patterns where `*`
    /// matches any run of characters (`AWS_*`).
    pub strip_env: Vec<String>,
    /// How long one command may run in all, output or not, unless the model asks for another
    /// limit with `timeout_secs`.
    pub shell_max_duration: Duration,
    /// The longest limit the model may ask for; a longer `timeout_secs` is lowered to it.
    pub shell_max_duration_ceiling: Duration,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            pass_env: Vec::new(),
            strip_env: Vec::new(),
            shell_max_duration: Duration::from_secs(10 * 60),
            shell_max_duration_ceiling: Duration::from_secs(60 * 60),
        }
    }
}

/// `[ui]`: the terminal interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSettings {
    /// A built-in theme (`dark`, `light`, `high-contrast`) or one in `<config>/themes/`.
    pub theme: String,
}

impl Default for UiSettings {
    fn default() -> Self {
        Self {
            theme: "dark".to_owned(),
        }
    }
}

/// The wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions (also OpenRouter, llama.cpp's server, vLLM, Ollama's `/v1`).
    OpenAi,
    /// Ollama's native `/api/chat`.
    Ollama,
}

impl ProviderKind {
    /// The name used in the config file's `kind` key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Ollama => "ollama",
        }
    }
}

/// One configured endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderProfile {
    /// The profile's name: `anthropic`, `openai`, `ollama` or a `[providers.NAME]` key.
    pub name: String,
    /// The wire format it speaks.
    pub kind: ProviderKind,
    /// Base URL without the endpoint path (`https://api.anthropic.com`,
    /// `https://api.openai.com/v1`, `http://127.0.0.1:11434`).
    pub base_url: String,
    /// Name of the environment variable holding the key; `None` for keyless local servers.
    pub api_key_env: Option<String>,
    /// The key read from that variable at load time; `None` when unset.
    pub api_key: Option<String>,
    /// The model used when a request names none (the profile's `model` key).
    pub default_model: String,
    /// Context window in tokens: as written, or assumed until the server says (see
    /// [`ProviderProfile::asks_server`]).
    pub context_window: u64,
    /// Largest reply requested, in tokens: as written, or a share of `context_window`.
    pub max_output_tokens: u32,
    /// Whether the model takes images (`images`): tool results' images are sent with them.
    /// Yes by default for Anthropic's and OpenAI's own APIs, no for servers that are asked
    /// for their model (local ones and other OpenAI-compatible servers).
    pub images: bool,
    /// Which of the model and the limits the person wrote; the rest are tern's assumptions,
    /// which what the server says may replace.
    pub written: Written,
}

/// Which of a profile's model and limits were written in the config file. Only what was
/// written is held against the person: an assumed value gives way to the server's answer,
/// and two values can only conflict when both were written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Written {
    /// The profile's `model`.
    pub model: bool,
    /// The profile's `context_window`.
    pub context_window: bool,
    /// The profile's `max_output_tokens`.
    pub max_output_tokens: bool,
}

/// A model named as `profile/model` or just `model` (meaning the default profile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// The profile name before the first `/`, if any.
    pub provider: Option<String>,
    /// The model name as the provider knows it.
    pub model: String,
}

/// Which model plays which role.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRoles {
    /// The provider profile used when no `--provider` is given, as chosen at load (see
    /// [`Config::default_provider`]); `None` when nothing is configured.
    pub default_provider: Option<String>,
    /// The conversation model; `None` means the default profile's `default_model`.
    pub default: Option<ModelRef>,
    /// Writes compaction notes; `None` means the conversation model.
    pub compaction: Option<ModelRef>,
    /// Tried when the primary model keeps failing.
    pub fallback: Option<ModelRef>,
}

/// `[session]`: timeouts, compaction and storage limits. Seconds unless named otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSettings {
    /// From sending the request to the response headers.
    pub prefill_timeout: Duration,
    /// From the response headers to the first streamed event.
    pub first_token_timeout: Duration,
    /// Longest silence between streamed events; thinking-only streams stop at 3x this.
    pub no_progress_timeout: Duration,
    /// A tool without progress for this long is stopped; each streamed item resets it.
    pub tool_execution_timeout: Duration,
    /// Side calls (titles, compaction notes).
    pub sidecar_llm_timeout: Duration,
    /// Whether a session's first completed turn is followed by a side call naming it.
    pub sidecar_titles: bool,
    /// Idle time before a session passivates; zero disables passivation.
    pub idle_timeout: Duration,
    /// Fraction of the context window at which compaction starts.
    pub compaction_threshold: f64,
    /// Tool results a compaction keeps whole, most recent first; older ones are cleared.
    pub keep_recent_tool_results: usize,
    /// Messages a compaction keeps before halving down to two while still too large.
    pub keep_recent_messages: usize,
    /// Journal events between snapshots.
    pub snapshot_every: u32,
    /// A single message larger than this is replaced by a placeholder naming its size.
    pub max_message_bytes: usize,
    /// A tool call whose arguments are larger than this has its largest ones replaced in the
    /// history, once it has its result, by a placeholder naming the tool, the path and the
    /// size; the full text is in the file written or saved as an artifact.
    pub max_argument_bytes: usize,
    /// The most rounds of tool calls one turn runs; the loop guard ends it quietly there.
    pub max_rounds: u32,
    /// `[session.maintenance]`.
    pub maintenance: MaintenanceSettings,
    /// `[session.reset]`.
    pub reset: ResetSettings,
    /// `[subagents]`.
    pub subagents: SubagentSettings,
    /// `[context] repo_map_tokens`: the repository map's budget in tier B; 0 leaves it out.
    pub repo_map_tokens: u64,
}

/// `[subagents]`: the background runs a session sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentSettings {
    /// Runs working at once across the owner's sessions; more wait their turn.
    pub max_concurrent: usize,
}

impl Default for SubagentSettings {
    fn default() -> Self {
        Self { max_concurrent: 4 }
    }
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            prefill_timeout: Duration::from_secs(1800),
            first_token_timeout: Duration::from_secs(600),
            no_progress_timeout: Duration::from_secs(1200),
            tool_execution_timeout: Duration::from_secs(90),
            sidecar_llm_timeout: Duration::from_secs(90),
            sidecar_titles: true,
            idle_timeout: Duration::from_secs(3600),
            compaction_threshold: 0.75,
            keep_recent_tool_results: 3,
            keep_recent_messages: 6,
            snapshot_every: 20,
            max_message_bytes: 128 * 1024,
            max_argument_bytes: 32 * 1024,
            max_rounds: 60,
            maintenance: MaintenanceSettings::default(),
            reset: ResetSettings::default(),
            subagents: SubagentSettings::default(),
            repo_map_tokens: 1_024,
        }
    }
}

/// `[session.reset]`: when a session key starts afresh by itself, on the first message after
/// a boundary. Only a person's messages keep a session fresh; automation does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetSettings {
    /// A new session on the first message after `daily_at` each day.
    pub daily: bool,
    /// Local time of the daily boundary.
    pub daily_at: jiff::civil::Time,
    /// A new session on the first message after this long without a person writing;
    /// `None` turns the idle reset off.
    pub idle: Option<Duration>,
}

impl Default for ResetSettings {
    fn default() -> Self {
        Self {
            daily: false,
            daily_at: jiff::civil::time(4, 0, 0, 0),
            idle: None,
        }
    }
}

/// Whether maintenance only reports or also deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaintenanceMode {
    /// Report what would be removed, remove nothing.
    Warn,
    /// Remove what is over the limits.
    Enforce,
}

/// `[session.maintenance]`: the disk budget for stored sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct MaintenanceSettings {
    /// Whether to only report or also delete.
    pub mode: MaintenanceMode,
    /// Archived sessions older than this are removed.
    pub prune_after: Duration,
    /// Most sessions kept.
    pub max_entries: u64,
    /// `None` means no byte budget.
    pub max_disk_bytes: Option<u64>,
    /// Defaults to 80% of `max_disk_bytes`.
    pub high_water_bytes: Option<u64>,
}

impl Default for MaintenanceSettings {
    fn default() -> Self {
        Self {
            mode: MaintenanceMode::Warn,
            prune_after: Duration::from_secs(30 * 24 * 3600),
            max_entries: 500,
            max_disk_bytes: None,
            high_water_bytes: None,
        }
    }
}

/// `[retry]`: how failed model calls are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrySettings {
    /// Attempts per model, the first included.
    pub max_attempts: u32,
    /// Delay before the first retry; later ones back off exponentially from it.
    pub base_delay: Duration,
    /// Longest delay between attempts.
    pub max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(60),
        }
    }
}
