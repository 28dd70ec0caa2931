//! The MCP servers of the tern process that owns the store, shared by the sessions of a
//! project: one connection per (project, server), started the first time a session of the
//! project needs its tools list, in the background. A turn waits for servers still starting
//! (or restarting) at most `[mcp] startup_timeout`; a slower one joins a later turn. A server
//! that fails or exits is started again at a later turn, after a pause that doubles with
//! each failure (from 1 s to 5 min), and says why meanwhile. A server no session has used
//! for `[mcp] idle_stop` (no turn needing its tools, no call) is stopped; it starts again
//! when a turn needs its tools or the model calls one of them.
//!
//! A server of a project's `.mcp.json` runs only once a person has approved it for that
//! project (`tern mcp approve`); the approval is remembered with what it runs, so a changed
//! entry is asked about again.

use super::prompt;
use super::server::{CallUnderWay, Running, ServerState, State};
use super::tool::McpTool;
use crate::config::{Environment, McpServer, McpSettings, project_servers};
use crate::domain::Audience;
use crate::tools::Tool;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Every MCP server of this process.
pub struct McpHub {
    settings: McpSettings,
    env: Vec<(OsString, OsString)>,
    /// The variables `.mcp.json` files may name, as tern started with them.
    environment: Environment,
    /// `<data>/mcp/approved.json`: per project, the servers of its `.mcp.json` a person
    /// approved, with what they run.
    approvals: PathBuf,
    running: Mutex<HashMap<(PathBuf, String), Arc<Running>>>,
}

impl McpHub {
    /// `env` is what a server's process starts with (the commands' environment, secrets
    /// left out) before its own `env`; `environment` what a project's `.mcp.json` may name
    /// (tern's credentials left out, so a repository cannot hand them to its servers).
    pub fn new(
        settings: McpSettings,
        env: Vec<(OsString, OsString)>,
        environment: Environment,
        data_dir: &Path,
    ) -> Self {
        Self {
            settings,
            env,
            environment,
            approvals: data_dir.join("mcp").join("approved.json"),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The servers of `project`: the config's and its `.mcp.json`'s (an unreadable file is
    /// an error naming it), each with whether it may run.
    pub fn servers_for(&self, project: &Path) -> Result<Vec<(McpServer, bool)>, String> {
        let mut servers: Vec<(McpServer, bool)> = self
            .settings
            .servers
            .iter()
            .map(|server| (server.clone(), true))
            .collect();
        let approved = read_approvals(&self.approvals);
        let theirs = project_servers(project, &self.environment).map_err(|err| err.to_string())?;
        for server in theirs {
            if servers.iter().any(|(known, _)| known.name == server.name) {
                continue;
            }
            let ok = approved
                .get(&project_key(project))
                .and_then(|names| names.get(&server.name))
                .is_some_and(|print| *print == server.fingerprint());
            servers.push((server, ok));
        }
        Ok(servers)
    }

    /// Remembers that a person approved `server` of `project`'s `.mcp.json`.
    pub fn approve(&self, project: &Path, server: &McpServer) -> std::io::Result<()> {
        let mut approved = read_approvals(&self.approvals);
        approved
            .entry(project_key(project))
            .or_default()
            .insert(server.name.clone(), server.fingerprint());
        if let Some(dir) = self.approvals.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let json = serde_json::to_vec_pretty(&approved).map_err(std::io::Error::other)?;
        let temp = self.approvals.with_extension("json.tmp");
        std::fs::write(&temp, json)?;
        std::fs::rename(temp, &self.approvals)
    }

    fn running(&self, project: &Path, server: &McpServer) -> Arc<Running> {
        let mut server = server.clone();
        if let crate::config::McpTransport::Stdio { cwd, .. } = &mut server.transport {
            cwd.get_or_insert_with(|| project.to_path_buf());
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (project.to_path_buf(), server.name.clone());
        if let Some(found) = running.get(&key)
            && found.server == server
        {
            return found.clone();
        }
        // New, or changed since it started: the old one stops when its last call ends.
        let made = Arc::new(Running::new(
            server,
            self.env.clone(),
            self.settings.idle_stop,
        ));
        running.insert(key, made.clone());
        made
    }

    /// The tools of `project`'s servers that run, starting those that do not yet. Waits at
    /// most `startup_timeout` for servers still starting.
    pub async fn tools_for(&self, project: &Path) -> Vec<Arc<dyn Tool>> {
        let wanted: Vec<(McpServer, Arc<Running>)> = self
            .servers_or_config(project)
            .into_iter()
            .filter(|(server, ok)| *ok && server.enabled)
            .map(|(server, _)| {
                let running = self.running(project, &server);
                running.touch();
                // A resting server's tools are offered as they were; a call starts it.
                if !matches!(running.state(), State::Resting(_)) {
                    running.start_if_due();
                }
                (server, running)
            })
            .collect();
        let deadline = tokio::time::Instant::now() + self.settings.startup_timeout;
        for (_, running) in &wanted {
            loop {
                let waiting = running.changed.notified();
                // One started again offers what it did before meanwhile.
                if !matches!(running.state(), State::Starting { last: None }) {
                    break;
                }
                if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                    break;
                }
            }
            // A server slow to list its tools again keeps the list it had.
            let _ = tokio::time::timeout_at(deadline, running.refresh()).await;
        }
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for (server, running) in wanted {
            let listed = match running.state() {
                State::Ready { tools, .. } => tools,
                State::Resting(listing)
                | State::Starting {
                    last: Some(listing),
                } => listing.tools,
                _ => continue,
            };
            for tool in listed.iter().filter(|tool| server.allows(&tool.name)) {
                tools.push(Arc::new(McpTool::new(&server, tool, running.clone())));
            }
        }
        // In one order whatever order servers list them in, so tier B's index holds still.
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        tools
    }

    /// The servers of `project` with whether each may run, read off the async workers; the
    /// config's alone when the project's `.mcp.json` cannot be read (said in the log, and
    /// by `tern mcp list`).
    fn servers_or_config(&self, project: &Path) -> Vec<(McpServer, bool)> {
        let servers = crate::tools::off_async_threads(|| self.servers_for(project));
        servers.unwrap_or_else(|err| {
            tracing::warn!(%err, "a project's MCP servers cannot be read");
            self.settings
                .servers
                .iter()
                .map(|server| (server.clone(), true))
                .collect()
        })
    }

    /// The text of the prompt an input names (`/mcp__server__prompt ARGS`), from `project`'s
    /// server (started if it is not running), or why it cannot be had. A prompt of a server
    /// not offered to the `audience` (see `public`) cannot be had either.
    pub async fn prompt(
        &self,
        project: &Path,
        line: &str,
        audience: Audience,
    ) -> Result<String, String> {
        let Some((name, wanted, rest)) = prompt::named(line) else {
            return Err("not an MCP prompt: write /mcp__SERVER__PROMPT".to_owned());
        };
        let command = format!("/mcp__{name}__{wanted}");
        let found = self
            .servers_or_config(project)
            .into_iter()
            .find(|(server, _)| {
                server.name == name && (audience != Audience::Public || server.public)
            });
        let server = match found {
            None => {
                return Err(format!(
                    "{command}: no MCP server {name} in this project; /mcp lists them"
                ));
            }
            Some((server, _)) if !server.enabled => {
                return Err(format!("{command}: {name} is disabled (enabled = false)"));
            }
            Some((_, false)) => {
                return Err(format!(
                    "{command}: {name} is not approved for this project; /mcp approve {name} \
                     lets it run"
                ));
            }
            Some((server, true)) => server,
        };
        let running = self.running(project, &server);
        // Counted as a call, so the server is not stopped as idle under it.
        let _asking = CallUnderWay::new(&running);
        let connection = running
            .connection()
            .await
            .map_err(|err| format!("{command}: {name} is not running: {err}"))?;
        // Asked now: the listing kept for showing may still be coming.
        let prompts = tokio::time::timeout(server.timeout, connection.list_prompts())
            .await
            .unwrap_or_else(|_| Err("no answer to prompts/list".to_owned()))
            .map_err(|err| format!("{command}: {err}"))?;
        let Some(found) = prompts.iter().find(|p| p.name == wanted) else {
            let known: Vec<String> = prompts
                .iter()
                .map(|p| format!("/mcp__{name}__{}", p.name))
                .collect();
            return Err(match known.is_empty() {
                true => format!("{command}: {name} offers no prompts"),
                false => format!(
                    "{command}: {name} has no such prompt; it has {}",
                    known.join(", ")
                ),
            });
        };
        let arguments = prompt::arguments(&command, &found.arguments, rest)?;
        let result = connection
            .get_prompt(wanted, arguments, server.timeout)
            .await
            .map_err(|err| format!("{command}: {err}"))?;
        let text = prompt::text_of(&result);
        if text.trim().is_empty() {
            return Err(format!("{command}: {name} gave an empty prompt"));
        }
        Ok(text)
    }

    /// Waits, at most `startup_timeout`, for the servers of `project` that run to have
    /// listed their prompts and resources (asked right after each starts), for showing.
    pub async fn listings_of(&self, project: &Path) {
        let running: Vec<Arc<Running>> = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|((dir, _), _)| dir == project)
            .map(|(_, running)| running.clone())
            .collect();
        let deadline = tokio::time::Instant::now() + self.settings.startup_timeout;
        for running in running {
            loop {
                let waiting = running.changed.notified();
                match running.state() {
                    State::Ready { listed, .. } if listed.pending => {}
                    _ => break,
                }
                if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                    break;
                }
            }
        }
    }

    /// Every server of `project` with its state.
    pub fn states(&self, project: &Path) -> Result<Vec<(McpServer, ServerState)>, String> {
        let servers = self.servers_for(project)?;
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(servers
            .into_iter()
            .map(|(server, ok)| {
                let state = if !server.enabled {
                    ServerState::Disabled
                } else if !ok {
                    ServerState::NeedsApproval
                } else {
                    running
                        .get(&(project.to_path_buf(), server.name.clone()))
                        .map_or(ServerState::NotStarted, |running| running.shown())
                };
                (server, state)
            })
            .collect())
    }

    /// Stops every server.
    pub async fn stop_all(&self) {
        let all: Vec<Arc<Running>> = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, running)| running)
            .collect();
        for running in all {
            let state = running.state();
            running.set(State::Idle);
            if let State::Ready { connection, .. } = state
                && let Ok(connection) = Arc::try_unwrap(connection)
            {
                connection.close().await;
            }
        }
    }
}

fn project_key(project: &Path) -> String {
    project.to_string_lossy().into_owned()
}

type Approvals = BTreeMap<String, BTreeMap<String, String>>;

fn read_approvals(path: &Path) -> Approvals {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
