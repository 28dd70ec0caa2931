//! One connection to an MCP server, on the official SDK (`rmcp`): a child process spoken
//! to over its stdin and stdout (in a process group of its own, so it and whatever it
//! starts are stopped together), or a streamable HTTP endpoint. The SDK does the protocol's
//! handshake (the version both sides speak), pagination and the JSON-RPC framing; this
//! module turns its answers into plain JSON and its failures into sentences.

use crate::config::{McpServer, McpTransport};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, GetPromptRequestParams, GetPromptResponse, Implementation,
    JsonObject, ServerCapabilities, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

/// How many of a server's last stderr lines are kept to say why it failed, and how much of
/// each.
const STDERR_LINES: usize = 20;
const STDERR_LINE_BYTES: usize = 1024;

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A prompt as the server lists it: the slash command `/mcp__<server>__<prompt>` in a
/// session.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerPrompt {
    pub name: String,
    pub description: String,
    /// Its arguments in order, each with whether it is required.
    pub arguments: Vec<(String, bool)>,
}

/// What a server tells the client between requests, kept for whoever asks next.
#[derive(Default)]
pub struct Heard {
    /// Set by `notifications/tools/list_changed`, cleared when the tools are listed again.
    pub tools_changed: AtomicBool,
    /// The last lines the server wrote to stderr.
    stderr: Mutex<VecDeque<String>>,
    /// Set once the server's stderr ended (it exited, or closed it).
    stderr_ended: AtomicBool,
    ended: tokio::sync::Notify,
}

impl Heard {
    /// The server's last stderr lines, oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        let lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().cloned().collect()
    }

    /// The server's last stderr lines once it has closed stderr (as an exiting process
    /// does), waiting for that at most `within`.
    pub async fn last_words(&self, within: Duration) -> Vec<String> {
        let ended = self.ended.notified();
        if !self.stderr_ended.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(within, ended).await;
        }
        self.stderr_tail()
    }

    fn push_stderr(&self, line: String) {
        let mut lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }
}

/// The client side's handler: names tern in the handshake and notes list changes.
struct Handler {
    info: ClientConfig,
    heard: Arc<Heard>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.heard.tools_changed.store(true, Ordering::Release);
        std::future::ready(())
    }
}

/// A running connection.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    pub heard: Arc<Heard>,
    /// A stdio server's process group (its id is the server's pid), stopped with it.
    group: Option<i32>,
}

/// Why a call did not give a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The turn was cancelled; the server was told.
    Cancelled,
    TimedOut(Duration),
    /// The connection is gone (the server exited or the stream closed).
    Closed(String),
    /// The server answered with a protocol error.
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cancelled => write!(f, "cancelled"),
            Self::TimedOut(after) => write!(f, "no answer within {} s", after.as_secs()),
            Self::Closed(why) => write!(f, "the server's connection closed ({why})"),
            Self::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl Connection {
    /// Starts `server` (for a stdio server, its process, with `env` as its whole environment
    /// besides what its config adds) and completes the handshake.
    pub async fn open(
        server: &McpServer,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    ) -> Result<Self, String> {
        let heard = Arc::new(Heard::default());
        let handler = Handler {
            info: ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("tern", env!("CARGO_PKG_VERSION")),
            ),
            heard: heard.clone(),
        };
        let mut group = None;
        let service = match &server.transport {
            McpTransport::Stdio {
                command,
                args,
                env: own,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).env_clear().envs(env).envs(own);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                // SAFETY: the closure runs in the forked child before exec and only makes
                // system calls (the scheduling slice), which are async-signal-safe and touch
                // no memory of the parent.
                unsafe {
                    cmd.pre_exec(|| {
                        // A server runs long: the default slice, whichever thread started it.
                        crate::priority::ordinary_slice();
                        Ok(())
                    });
                }
                // Its own group, killed whole when the connection is dropped: stopping the
                // server stops what it started too (`npx` and the node it runs).
                let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
                wrapped
                    .wrap(process_wrap::tokio::ProcessGroup::leader())
                    .wrap(process_wrap::tokio::KillOnDrop);
                let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(wrapped)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|err| format!("could not start `{command}`: {err}"))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(keep_stderr(server.name.clone(), stderr, heard.clone()));
                }
                group = transport.id().and_then(|pid| i32::try_from(pid).ok());
                handler
                    .serve(transport)
                    .await
                    .map_err(|err| handshake_failed(&err, &heard))?
            }
            McpTransport::Http {
                url,
                headers,
                legacy_sse,
            } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let client = crate::llm::http::client_sending(url, headers)
                    .map_err(|err| format!("could not set up HTTP: {err}"))?;
                let served = if *legacy_sse {
                    let halves = super::legacy_sse::connect(client, url, server.timeout).await?;
                    handler.serve(halves).await
                } else {
                    let config = StreamableHttpClientTransportConfig::with_uri(url.clone());
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve(transport).await
                };
                served.map_err(|err| handshake_failed(&err, &heard))?
            }
        };
        Ok(Self {
            service,
            heard,
            group,
        })
    }

    /// Every tool the server offers, all pages.
    pub async fn list_tools(&self) -> Result<Vec<ServerTool>, String> {
        self.heard.tools_changed.store(false, Ordering::Release);
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|err| format!("tools/list failed: {err}"))?;
        Ok(tools
            .into_iter()
            .map(|tool| ServerTool {
                name: tool.name.to_string(),
                description: tool
                    .description
                    .map(|d| d.to_string())
                    .or(tool.title)
                    .unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            })
            .collect())
    }

    fn offers(&self, what: impl Fn(&ServerCapabilities) -> bool) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|info| what(&info.capabilities))
    }

    /// Every prompt the server offers, all pages (none when it offers no prompts).
    pub async fn list_prompts(&self) -> Result<Vec<ServerPrompt>, String> {
        if !self.offers(|offered| offered.prompts.is_some()) {
            return Ok(Vec::new());
        }
        let prompts = self
            .service
            .peer()
            .list_all_prompts()
            .await
            .map_err(|err| format!("prompts/list failed: {err}"))?;
        Ok(prompts
            .into_iter()
            .map(|prompt| ServerPrompt {
                name: prompt.name,
                description: prompt.description.or(prompt.title).unwrap_or_default(),
                arguments: prompt
                    .arguments
                    .unwrap_or_default()
                    .into_iter()
                    .map(|argument| (argument.name, argument.required.unwrap_or(false)))
                    .collect(),
            })
            .collect())
    }

    /// The address of every resource the server offers, all pages (none when it offers no
    /// resources).
    pub async fn list_resources(&self) -> Result<Vec<String>, String> {
        if !self.offers(|offered| offered.resources.is_some()) {
            return Ok(Vec::new());
        }
        let resources = self
            .service
            .peer()
            .list_all_resources()
            .await
            .map_err(|err| format!("resources/list failed: {err}"))?;
        Ok(resources
            .into_iter()
            .map(|resource| resource.uri.clone())
            .collect())
    }

    /// The prompt `name` with `arguments`, as the protocol's JSON (`messages`), within
    /// `timeout`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<Value, String> {
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = Some(arguments);
        let asked = self.service.peer().get_prompt_once(params);
        match tokio::time::timeout(timeout, asked).await {
            Err(_) => Err(format!(
                "no answer to prompts/get within {} s",
                timeout.as_secs_f64()
            )),
            Ok(Err(rmcp::ServiceError::McpError(err))) => Err(err.message.to_string()),
            Ok(Err(err)) => Err(err.to_string()),
            Ok(Ok(GetPromptResponse::Complete(result))) => serde_json::to_value(result)
                .map_err(|err| format!("an answer that could not be read: {err}")),
            // More input asked for (or a kind of answer newer than tern).
            Ok(Ok(_)) => {
                Err("the server asks for more input, which tern cannot give it".to_owned())
            }
        }
    }

    /// Calls `tool` with `arguments`; the result as the protocol's JSON (`content`,
    /// `structuredContent`, `isError`). A cancelled call is cancelled at the server too.
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // Progress from the server keeps a long call alive.
        let options = PeerRequestOptions::with_timeout(timeout).reset_timeout_on_progress();
        let peer = self.service.peer().clone();
        let handle = peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|err| CallError::Closed(err.to_string()))?;
        let id = handle.id.clone();
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            () = cancel.cancelled() => {
                let reason = Some("the turn was cancelled".to_owned());
                let notice = CancelledNotificationParam::new(Some(id), reason);
                let told = peer.notify_cancelled(notice);
                let _ = tokio::time::timeout(Duration::from_secs(1), told).await;
                return Err(CallError::Cancelled);
            }
        };
        match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                serde_json::to_value(result).map_err(|err| {
                    CallError::Failed(format!("an answer that could not be read: {err}"))
                })
            }
            Ok(other) => Err(CallError::Failed(format!(
                "an answer of the wrong kind: {}",
                serde_json::to_string(&other).unwrap_or_default()
            ))),
            Err(rmcp::ServiceError::Timeout { timeout }) => Err(CallError::TimedOut(timeout)),
            Err(rmcp::ServiceError::McpError(err)) => {
                Err(CallError::Failed(err.message.to_string()))
            }
            Err(err @ rmcp::ServiceError::TransportClosed) => {
                Err(CallError::Closed(err.to_string()))
            }
            Err(err) if self.is_closed() => Err(CallError::Closed(err.to_string())),
            Err(err) => Err(CallError::Failed(err.to_string())),
        }
    }

    /// Whether the connection is gone: closed by tern, or its transport ended (the server
    /// exited, or its stream closed), which the service alone does not say.
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Ends the connection; a stdio server's process group is stopped with it.
    pub async fn close(mut self) {
        self.stop_group();
        // The group is gone: nothing is left for the drop to stop.
        self.group = None;
    }

    /// Kills a stdio server's whole process group (what it started too), unless its
    /// connection already ended, when the group's id may since belong to another process.
    fn stop_group(&self) {
        if let Some(group) = self.group
            && group > 0
            && !self.is_closed()
        {
            // SAFETY: killpg takes plain integers and touches no memory of this process.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop_group();
    }
}

fn handshake_failed(err: &(dyn std::error::Error + 'static), heard: &Heard) -> String {
    let err = root_cause(err);
    let tail = heard.stderr_tail();
    match tail.last() {
        Some(line) => format!("the handshake failed ({err}); it said: {line}"),
        None => format!("the handshake failed ({err})"),
    }
}

/// What an error chain says at its end: the cause itself, without the layers of the SDK's
/// transport naming its own types.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err;
    while let Some(next) = last.source() {
        last = next;
    }
    let said = last.to_string();
    let said = if said.is_empty() {
        err.to_string()
    } else {
        said
    };
    // The SDK names the transport by its Rust type in brackets: no help to a person.
    match (said.find(" ["), said.rfind("] ")) {
        (Some(open), Some(close)) if open < close && said[open..close].contains("::") => {
            format!("{}{}", &said[..open], &said[close + 1..])
        }
        _ => said,
    }
}

/// Keeps a server's stderr: its last lines for errors, every line in the log.
async fn keep_stderr(server: String, stderr: tokio::process::ChildStderr, heard: Arc<Heard>) {
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    // Read to the end whatever it writes (bytes that are not UTF-8 included), or the server
    // would block on a full pipe.
    while let Ok(read) = reader.read_until(b'\n', &mut line).await {
        if read == 0 {
            break;
        }
        line.truncate(STDERR_LINE_BYTES);
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        tracing::debug!(server = %server, "{text}");
        heard.push_stderr(text);
        line.clear();
    }
    heard.stderr_ended.store(true, Ordering::Release);
    heard.ended.notify_waiters();
}
