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

use super::client::{CallError, Connection, ServerPrompt, ServerTool};
use super::prompt;
use super::tool::McpTool;
use crate::config::{Environment, McpServer, McpSettings, project_servers};
use crate::domain::Audience;
use crate::tools::Tool;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(300);

/// How long a server whose connection closed is given to finish writing its last words.
const LAST_WORDS: Duration = Duration::from_millis(500);

/// One server as a project runs it.
pub struct Running {
    server: McpServer,
    env: Vec<(OsString, OsString)>,
    state: Mutex<State>,
    changed: tokio::sync::Notify,
    /// How long it runs unused before it is stopped.
    idle_stop: Duration,
    /// When a turn last needed its tools or a call last ended.
    used_at: Mutex<Instant>,
    /// Calls under way: a server answering one is never idle.
    calls: AtomicUsize,
    /// Calls in a row that ended with the server gone, since the last one answered.
    crashes: AtomicU32,
}

#[derive(Clone)]
enum State {
    Idle,
    /// Starting, with what it offered before, if it ran: a server started again keeps its
    /// tools offered meanwhile.
    Starting {
        last: Option<Listing>,
    },
    /// Stopped after going unused for `idle_stop`: its tools are still offered, and a call
    /// of one starts it again.
    Resting(Listing),
    Ready {
        connection: Arc<Connection>,
        tools: Arc<Vec<ServerTool>>,
        listed: Arc<Listed>,
    },
    Failed {
        reason: String,
        failures: u32,
        retry_at: Instant,
    },
}

/// What a server offered when it last ran.
#[derive(Clone)]
struct Listing {
    tools: Arc<Vec<ServerTool>>,
}

/// A server's prompts and resources, as listed after it started.
#[derive(Debug, Default)]
struct Listed {
    prompts: Vec<ServerPrompt>,
    resources: Vec<String>,
    /// Not listed yet: asked right after the start.
    pending: bool,
}

/// What `tern mcp list` and `/mcp` show of a server.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerState {
    /// Configured, not started yet (no session of the project has needed it).
    NotStarted,
    Starting,
    /// Stopped after going unused for `idle_stop`; its `tools` are still offered, and a
    /// call of one starts it again.
    Resting {
        tools: usize,
    },
    Ready {
        tools: Vec<String>,
        /// Each prompt as its slash command's arguments are written (`NAME [OTHER]`).
        prompts: Vec<(String, String)>,
        resources: Vec<String>,
    },
    Failed {
        reason: String,
    },
    /// In the project's `.mcp.json`, not approved (or changed since).
    NeedsApproval,
    Disabled,
}

impl Running {
    pub(super) fn new(
        server: McpServer,
        env: Vec<(OsString, OsString)>,
        idle_stop: Duration,
    ) -> Self {
        Self {
            server,
            env,
            state: Mutex::new(State::Idle),
            changed: tokio::sync::Notify::new(),
            idle_stop,
            used_at: Mutex::new(Instant::now()),
            calls: AtomicUsize::new(0),
            crashes: AtomicU32::new(0),
        }
    }

    fn touch(&self) {
        *self.used_at.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn unused_for(&self) -> Duration {
        self.used_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    pub fn name(&self) -> &str {
        &self.server.name
    }

    fn state(&self) -> State {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.changed.notify_waiters();
    }

    /// Starts the server in the background unless it runs, is starting, or failed too
    /// recently to try again.
    fn start_if_due(self: &Arc<Self>) {
        let failures = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let (failures, last) = match &*state {
                State::Idle => (0, None),
                State::Resting(listing) => (0, Some(listing.clone())),
                State::Failed {
                    failures, retry_at, ..
                } if Instant::now() >= *retry_at => (*failures, None),
                // A connection that closed (an HTTP server gone away, a child that exited
                // between calls) keeps its tools offered while it starts again.
                State::Ready {
                    connection, tools, ..
                } if connection.is_closed() => (
                    1,
                    Some(Listing {
                        tools: tools.clone(),
                    }),
                ),
                _ => return,
            };
            *state = State::Starting { last };
            failures
        };
        let running = self.clone();
        tokio::spawn(async move {
            let started = async {
                let connection = Connection::open(&running.server, running.env.clone()).await?;
                let tools = connection.list_tools().await?;
                Ok::<_, String>((connection, tools))
            };
            // A server that never answers the handshake is given as long as a call.
            let limit = running.server.timeout;
            let started = tokio::time::timeout(limit, started)
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "no answer to the handshake within {} s",
                        limit.as_secs_f64()
                    ))
                });
            match started {
                Ok((connection, tools)) => {
                    tracing::info!(server = %running.server.name, tools = tools.len(), "MCP server ready");
                    let connection = Arc::new(connection);
                    running.touch();
                    running.set(State::Ready {
                        connection: connection.clone(),
                        tools: Arc::new(sanitized(tools)),
                        listed: Arc::new(Listed {
                            pending: true,
                            ..Listed::default()
                        }),
                    });
                    stop_when_idle(Arc::downgrade(&running), Arc::downgrade(&connection));
                    // Prompts and resources are for showing: listed after, within a limit
                    // of their own, so a long list never costs the server its tools.
                    let listed =
                        tokio::time::timeout(limit, listed(&running.server.name, &connection));
                    // Not listed in time: none shown, and no longer waited for.
                    let listed = listed.await.unwrap_or_default();
                    running.update(&connection, |tools, _| (tools, Arc::new(listed)));
                }
                Err(reason) => {
                    let pause = pause_after(failures);
                    tracing::warn!(server = %running.server.name, %reason, "MCP server did not start");
                    running.set(State::Failed {
                        reason,
                        failures: failures + 1,
                        retry_at: Instant::now() + pause,
                    });
                }
            }
        });
    }

    /// Lists the tools again when the server said they changed.
    async fn refresh(&self) {
        let State::Ready { connection, .. } = self.state() else {
            return;
        };
        if !connection
            .heard
            .tools_changed
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        if let Ok(tools) = connection.list_tools().await {
            let tools = Arc::new(sanitized(tools));
            // The prompts and resources as they are by now, not as they were before the call.
            self.update(&connection, |_, listed| (tools, listed));
        }
    }

    /// Replaces the listing of `connection`, if the server still runs it (not stopped or
    /// started again meanwhile).
    fn update(
        &self,
        connection: &Arc<Connection>,
        change: impl FnOnce(Arc<Vec<ServerTool>>, Arc<Listed>) -> (Arc<Vec<ServerTool>>, Arc<Listed>),
    ) {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let State::Ready {
                connection: now,
                tools,
                listed,
            } = &*state
            else {
                return;
            };
            if !Arc::ptr_eq(now, connection) {
                return;
            }
            let (tools, listed) = change(tools.clone(), listed.clone());
            *state = State::Ready {
                connection: connection.clone(),
                tools,
                listed,
            };
        }
        self.changed.notify_waiters();
    }

    /// The connection, starting the server again first if it was stopped (idle, or exited
    /// and due for another try), within its `timeout`.
    async fn connection(self: &Arc<Self>) -> Result<Arc<Connection>, CallError> {
        let deadline = tokio::time::Instant::now() + self.server.timeout;
        loop {
            let waiting = self.changed.notified();
            self.start_if_due();
            match self.state() {
                State::Ready { connection, .. } if !connection.is_closed() => {
                    return Ok(connection);
                }
                State::Failed { reason, .. } => return Err(CallError::Closed(reason)),
                // Starting (or closed and started again at the next look).
                _ => {}
            }
            if tokio::time::timeout_at(deadline, waiting).await.is_err() {
                return Err(CallError::Closed(format!(
                    "it did not start within {} s",
                    self.server.timeout.as_secs_f64()
                )));
            }
        }
    }

    /// Calls `tool` on the server, within its `timeout`.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        // Counted before the state is read, so the server cannot be stopped as idle under it.
        let _call = CallUnderWay::new(self);
        let connection = self.connection().await?;
        let answer = connection
            .call(tool, arguments, self.server.timeout, cancel)
            .await;
        let Err(CallError::Closed(why)) = &answer else {
            if answer.is_ok() {
                self.crashes.store(0, Ordering::Relaxed);
            }
            return answer;
        };
        let said = connection.heard.last_words(LAST_WORDS).await;
        let reason = match said.last() {
            Some(line) => format!("{why}; it said: {line}"),
            None => why.clone(),
        };
        // Only if it still runs this connection: another call or turn may have seen the
        // crash first, or started it again meanwhile. A server that keeps dying under calls
        // waits longer each time before the next start.
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(&*state, State::Ready { connection: now, .. } if Arc::ptr_eq(now, &connection))
            {
                let crashes = self.crashes.fetch_add(1, Ordering::Relaxed) + 1;
                *state = State::Failed {
                    reason: reason.clone(),
                    failures: crashes,
                    retry_at: Instant::now() + pause_after(crashes - 1),
                };
            }
        }
        self.changed.notify_waiters();
        Err(CallError::Closed(reason))
    }

    /// Stops the server if it still runs `connection` and no session has used it for
    /// `idle_stop`; otherwise how long to wait before asking again (none: nothing to watch).
    fn stop_if_idle(&self, connection: &Arc<Connection>) -> Option<Duration> {
        let stopped = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            match &*state {
                State::Ready {
                    connection: now, ..
                } if Arc::ptr_eq(now, connection) => {}
                _ => return None,
            }
            let unused = self.unused_for();
            if self.calls.load(Ordering::SeqCst) > 0 || unused < self.idle_stop {
                return Some(self.idle_stop.saturating_sub(unused).max(MIN_IDLE_CHECK));
            }
            let State::Ready { tools, .. } = &*state else {
                return None;
            };
            let listing = Listing {
                tools: tools.clone(),
            };
            std::mem::replace(&mut *state, State::Resting(listing))
        };
        self.changed.notify_waiters();
        tracing::info!(server = %self.server.name, "MCP server stopped after {} s unused", self.idle_stop.as_secs());
        drop(stopped);
        None
    }

    fn shown(&self) -> ServerState {
        match self.state() {
            State::Idle => ServerState::NotStarted,
            State::Starting { .. } => ServerState::Starting,
            State::Resting(listing) => ServerState::Resting {
                tools: listing.tools.len(),
            },
            State::Ready { tools, listed, .. } => ServerState::Ready {
                tools: tools
                    .iter()
                    .filter(|tool| self.server.allows(&tool.name))
                    .map(|tool| tool.name.clone())
                    .collect(),
                prompts: listed
                    .prompts
                    .iter()
                    .map(|p| (p.name.clone(), prompt::usage(&p.arguments)))
                    .collect(),
                resources: listed.resources.clone(),
            },
            State::Failed { reason, .. } => ServerState::Failed { reason },
        }
    }
}

/// A server's prompts and resources; a server that fails to list them has none (said in
/// the log), its tools still used.
async fn listed(server: &str, connection: &Connection) -> Listed {
    let prompts = connection.list_prompts().await.unwrap_or_else(|err| {
        tracing::warn!(server, %err, "MCP server's prompts not listed");
        Vec::new()
    });
    let resources = connection.list_resources().await.unwrap_or_else(|err| {
        tracing::warn!(server, %err, "MCP server's resources not listed");
        Vec::new()
    });
    Listed {
        prompts,
        resources,
        pending: false,
    }
}

/// The pause before starting a server again after `failures` failures before this one:
/// 1 s, doubling, at most 5 min.
fn pause_after(failures: u32) -> Duration {
    FIRST_PAUSE
        .saturating_mul(1 << failures.min(16))
        .min(LONGEST_PAUSE)
}

/// The shortest pause between two looks at whether a server is idle.
const MIN_IDLE_CHECK: Duration = Duration::from_millis(50);

/// Watches a server that just started and stops it once it has gone unused for its
/// `idle_stop`. Holds neither: a server replaced or dropped ends the watch.
fn stop_when_idle(running: Weak<Running>, connection: Weak<Connection>) {
    tokio::spawn(async move {
        let mut wait = match running.upgrade() {
            // Zero: kept running while tern runs.
            Some(running) if !running.idle_stop.is_zero() => running.idle_stop,
            _ => return,
        };
        loop {
            tokio::time::sleep(wait).await;
            let (Some(running), Some(connection)) = (running.upgrade(), connection.upgrade())
            else {
                return;
            };
            match running.stop_if_idle(&connection) {
                Some(next) => wait = next,
                None => {
                    // The last reference but a call's: closing it stops the process group.
                    if let Ok(connection) = Arc::try_unwrap(connection) {
                        connection.close().await;
                    }
                    return;
                }
            }
        }
    });
}

/// A call under way on a server; when it ends, the server counts as used then.
struct CallUnderWay<'a>(&'a Running);

impl<'a> CallUnderWay<'a> {
    fn new(running: &'a Running) -> Self {
        running.calls.fetch_add(1, Ordering::SeqCst);
        Self(running)
    }
}

impl Drop for CallUnderWay<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

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

/// The tools with their schemas cut to what providers take, once per listing rather than
/// at every turn.
fn sanitized(mut tools: Vec<ServerTool>) -> Vec<ServerTool> {
    for tool in &mut tools {
        tool.input_schema = super::schema::sanitize(&tool.input_schema);
    }
    tools
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
