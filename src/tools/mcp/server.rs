//! One MCP server as a project runs it: its state (starting, ready, failed, resting), its
//! connection started in the background, started again after a pause that doubles with
//! each failure, its listing refreshed when the server says its tools changed, its calls
//! counted, and its stop once no session has used it for a while.

use super::client::{CallError, Connection, ServerPrompt, ServerTool};
use super::prompt;
use crate::config::McpServer;
use serde_json::Value;
use std::ffi::OsString;
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
    pub(super) server: McpServer,
    env: Vec<(OsString, OsString)>,
    state: Mutex<State>,
    pub(super) changed: tokio::sync::Notify,
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
pub(super) enum State {
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
pub(super) struct Listing {
    pub(super) tools: Arc<Vec<ServerTool>>,
}

/// A server's prompts and resources, as listed after it started.
#[derive(Debug, Default)]
pub(super) struct Listed {
    prompts: Vec<ServerPrompt>,
    resources: Vec<String>,
    /// Not listed yet: asked right after the start.
    pub(super) pending: bool,
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

    pub(super) fn touch(&self) {
        *self.used_at.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    pub(super) fn unused_for(&self) -> Duration {
        self.used_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    pub fn name(&self) -> &str {
        &self.server.name
    }

    pub(super) fn state(&self) -> State {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn set(&self, state: State) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.changed.notify_waiters();
    }

    /// Starts the server in the background unless it runs, is starting, or failed too
    /// recently to try again.
    pub(super) fn start_if_due(self: &Arc<Self>) {
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
    pub(super) async fn refresh(&self) {
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
    pub(super) fn update(
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
    pub(super) async fn connection(self: &Arc<Self>) -> Result<Arc<Connection>, CallError> {
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
    pub(super) fn stop_if_idle(&self, connection: &Arc<Connection>) -> Option<Duration> {
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

    pub(super) fn shown(&self) -> ServerState {
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
pub(super) fn pause_after(failures: u32) -> Duration {
    FIRST_PAUSE
        .saturating_mul(1 << failures.min(16))
        .min(LONGEST_PAUSE)
}

/// The shortest pause between two looks at whether a server is idle.
const MIN_IDLE_CHECK: Duration = Duration::from_millis(50);

/// Watches a server that just started and stops it once it has gone unused for its
/// `idle_stop`. Holds neither: a server replaced or dropped ends the watch.
pub(super) fn stop_when_idle(running: Weak<Running>, connection: Weak<Connection>) {
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
pub(super) struct CallUnderWay<'a>(&'a Running);

impl<'a> CallUnderWay<'a> {
    pub(super) fn new(running: &'a Running) -> Self {
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

/// The tools with their schemas cut to what providers take, once per listing rather than
/// at every turn.
pub(super) fn sanitized(mut tools: Vec<ServerTool>) -> Vec<ServerTool> {
    for tool in &mut tools {
        tool.input_schema = super::schema::sanitize(&tool.input_schema);
    }
    tools
}
