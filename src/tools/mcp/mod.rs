//! Tools from MCP servers (the Model Context Protocol): servers named in `[mcp.servers.*]`
//! or a project's `.mcp.json`, run by the tern process that owns the store and shared by
//! the sessions of a project (`hub`), spoken to through the official SDK (`client`), their
//! tools offered beside tern's own under the same approvals and audiences (`tool`), with
//! schemas every provider takes (`schema`); their prompts are slash commands (`prompt`), and
//! what `tern mcp list` and `/mcp` show is written once (`listing`).

pub mod client;
pub mod hub;
mod legacy_sse;
pub mod listing;
pub mod prompt;
pub mod schema;
mod server;
pub mod tool;

#[cfg(test)]
mod tests;

pub use hub::McpHub;
pub use server::ServerState;
pub use tool::tool_name;
