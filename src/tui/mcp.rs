//! `/mcp`: the project's MCP servers as the session service runs them (each started as a
//! turn would start it, with its tools, prompts and resources, or why it failed), and
//! `/mcp approve NAME`, which lets a server of the project's `.mcp.json` run; shown as a
//! notice.

use super::app::AppEvent;
use crate::gateway::SessionService;
use std::path::PathBuf;
use tokio::sync::mpsc::UnboundedSender;

/// Asks for the servers of `project_dir` (approving `approve` first, if named) and shows
/// them when the answer comes.
pub fn show(
    service: SessionService,
    project_dir: PathBuf,
    approve: Option<String>,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        let text = match service.mcp(&project_dir, approve.as_deref()).await {
            Ok(lines) => lines.join("\n"),
            Err(err) => format!("MCP servers: {err}"),
        };
        let _ = tx.send(AppEvent::Notice(text));
    });
}
