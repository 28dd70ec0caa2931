//! Configuration: where tern keeps its files ([`Paths`]), the TOML config file with its
//! defaults and validation, the providers available without any config file (from the
//! ecosystem's conventional environment variables), and the MCP servers a project asks for in
//! its `.mcp.json` ([`project_servers`]).
//!
//! Loading happens in two stages, as in ripgrep: [`load`] parses and validates into plain
//! data with errors that name the file, line and key; building providers from that data is
//! left to the caller. Loading is a pure function of the file text and an [`Environment`]
//! snapshot, so tests never touch the process environment.

mod channels;
mod env;
mod error;
mod example;
mod expand;
mod load;
mod location;
mod mcp;
mod mcp_config;
mod mcp_file;
mod paths;
mod profile;
mod providers;
mod raw;
mod render;
mod resolve;
mod settings;
mod tools;
mod units;

pub use channels::{
    ChannelSettings, ChatAccess, DiscordSettings, EndpointSettings, MattermostSettings,
    SlackSettings, Token, WebhookSettings,
};
pub use env::Environment;
pub use error::ConfigError;
pub use example::EXAMPLE_CONFIG;
pub use load::{load, load_from_str};
pub use mcp::{McpApprove, McpOrigin, McpServer, McpSettings, McpTransport, shown_arg, shown_url};
pub use mcp_file::{McpFileError, PROJECT_FILE as MCP_PROJECT_FILE, project_servers};
pub use paths::Paths;
pub use providers::fitted_output;
pub use settings::{
    Config, MaintenanceMode, MaintenanceSettings, ModelRef, ModelRoles, ProviderKind,
    ProviderProfile, ResetSettings, RetrySettings, SessionSettings, SubagentSettings, ToolSettings,
    UiSettings, Written,
};
