//! The config file exactly as written, before defaults and validation.
//!
//! Every struct denies unknown keys, so a typo is an error that names the key instead of a
//! setting silently ignored. Fields that accept more than one form (a duration as seconds or
//! as `"30m"`, a size as bytes or as `"2GB"`) are kept as [`toml::Value`] so that validation,
//! not serde, writes the message saying which forms are accepted.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Value;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub models: RawModels,
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub session: RawSession,
    #[serde(default)]
    pub retry: RawRetry,
    #[serde(default)]
    pub ui: RawUi,
    #[serde(default)]
    pub tools: RawTools,
    #[serde(default)]
    pub subagents: RawSubagents,
    #[serde(default)]
    pub context: RawContext,
    #[serde(default)]
    pub channels: RawChannels,
    #[serde(default)]
    pub mcp: RawMcp,
}

/// `[mcp]`: the MCP servers whose tools sessions get.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcp {
    pub startup_timeout: Option<Value>,
    pub idle_stop: Option<Value>,
    #[serde(default)]
    pub servers: BTreeMap<String, RawMcpServer>,
}

/// `[mcp.servers.NAME]`: the keys of both transports; which of them a server takes is
/// checked in validation, once it is known whether it has a `command` or a `url`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub cwd: Option<String>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub transport: Option<String>,
    pub enabled: Option<bool>,
    pub timeout: Option<Value>,
    pub tools: Option<RawMcpTools>,
    pub approve: Option<String>,
    pub approve_tools: Option<BTreeMap<String, String>>,
    pub public: Option<bool>,
}

/// `[mcp.servers.NAME] tools = { allow = [...], deny = [...] }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpTools {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

/// `[channels]`: one table per chat platform, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChannels {
    pub slack: Option<RawChat>,
    pub discord: Option<RawChat>,
    pub mattermost: Option<RawChat>,
    pub webhook: Option<RawWebhook>,
}

/// `[channels.slack]`, `[channels.discord]`, `[channels.mattermost]`: the keys they share;
/// which of them a platform takes is checked in validation.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChat {
    pub api_url: Option<String>,
    pub url: Option<String>,
    pub app_token_env: Option<String>,
    pub bot_token_env: Option<String>,
    pub token_env: Option<String>,
    pub allow_users: Option<Vec<String>>,
    pub allow_channels: Option<Vec<String>>,
    pub project_dir: Option<String>,
    pub edit_interval: Option<Value>,
}

/// `[channels.webhook]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebhook {
    pub listen: Option<String>,
    pub max_body: Option<Value>,
    #[serde(default)]
    pub endpoints: BTreeMap<String, RawEndpoint>,
}

/// `[channels.webhook.endpoints.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndpoint {
    pub secret_env: Option<String>,
    pub reply_url: Option<String>,
    pub project_dir: Option<String>,
    pub audience: Option<String>,
}

/// `[context]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawContext {
    pub repo_map_tokens: Option<i64>,
}

/// `[subagents]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSubagents {
    pub max_concurrent: Option<i64>,
}

/// `[tools]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTools {
    pub pass_env: Option<Vec<String>>,
    pub strip_env: Option<Vec<String>>,
    pub shell_max_duration: Option<Value>,
    pub shell_max_duration_ceiling: Option<Value>,
}

/// `[ui]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUi {
    pub theme: Option<String>,
}

/// `[models]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModels {
    pub provider: Option<String>,
    pub default: Option<String>,
    pub compaction: Option<String>,
    pub fallback: Option<String>,
}

/// `[providers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub kind: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub images: Option<bool>,
}

/// `[session]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSession {
    pub prefill_timeout: Option<Value>,
    pub first_token_timeout: Option<Value>,
    pub no_progress_timeout: Option<Value>,
    pub tool_execution_timeout: Option<Value>,
    pub sidecar_llm_timeout: Option<Value>,
    pub sidecar_titles: Option<bool>,
    pub idle_timeout: Option<Value>,
    pub compaction_threshold: Option<f64>,
    pub keep_recent_tool_results: Option<u64>,
    pub keep_recent_messages: Option<u64>,
    pub snapshot_every: Option<u64>,
    pub max_message_bytes: Option<Value>,
    pub max_argument_bytes: Option<Value>,
    pub max_rounds: Option<u64>,
    #[serde(default)]
    pub maintenance: RawMaintenance,
    #[serde(default)]
    pub reset: RawReset,
}

/// `[session.reset]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReset {
    pub daily: Option<bool>,
    pub daily_at: Option<String>,
    pub idle_minutes: Option<u64>,
}

/// `[session.maintenance]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMaintenance {
    pub mode: Option<String>,
    pub prune_after: Option<Value>,
    pub max_entries: Option<u64>,
    pub max_disk_bytes: Option<Value>,
    pub high_water_bytes: Option<Value>,
}

/// `[retry]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetry {
    pub max_attempts: Option<u64>,
    pub base_delay_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
}
