//! `/mcp`: the project's MCP servers as the session service runs them (each started as a
//! turn would start it, with its tools, prompts and resources, or why it failed), and
//! `/mcp approve NAME`, which lets a server of the project's `.mcp.json` run; shown as a
//! notice. At the start, a notice names the servers of the project's `.mcp.json` that wait
//! for that approval.

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

/// Tells, once the answer comes, which servers of `project_dir`'s `.mcp.json` wait for an
/// approval (nothing when none does).
pub fn tell_unapproved(
    service: SessionService,
    project_dir: PathBuf,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        match service.mcp_unapproved(&project_dir).await {
            Ok(lines) if !lines.is_empty() => {
                let _ = tx.send(AppEvent::Notice(lines.join("\n")));
            }
            Ok(_) => {}
            Err(err) => {
                let _ = tx.send(AppEvent::Notice(format!("MCP servers: {err}")));
            }
        }
    });
}
