//! A scripted model provider on 127.0.0.1 that speaks the real wire formats.
//!
//! Tests queue [`Reply`]s; each model request consumes one and gets it rendered in the format
//! its path asks for: Anthropic Messages SSE (`/v1/messages`), OpenAI Chat Completions SSE
//! (`/chat/completions`, `/v1/chat/completions`) or Ollama NDJSON (`/api/chat`). So one script
//! drives every provider kind. The HTTP/1.1 is written by hand on purpose: streams use chunked
//! encoding and, by default, every connection closes after its response, so a scripted cut is
//! a genuine unexpected EOF inside a chunked body, exactly what a flaky network gives a real
//! client. [`KeepAlive`] modes keep connections open instead, or close them the ways servers
//! do (llama.cpp right after a streamed reply), and the mock counts connections and the
//! requests it dropped unanswered.
//!
//! The server runs on its own thread and runtime, so it behaves the same under any test
//! runtime (current-thread, multi-thread, none at all) and keeps answering while a test blocks
//! on a child process.
//!
//! Questions about the model it serves (the model lists, llama.cpp's `/props`, Ollama's
//! `/api/show`, LM Studio's `/api/v0/models`) are answered as the [`Identity`] set with
//! [`MockProvider::serve_as`] says, after an optional delay.

mod http;
mod reply;
mod served;
mod wire;

pub use http::KeepAlive;
pub use reply::{Reply, Stop};
pub use served::Identity;

use http::{Incoming, Outgoing};
use serde_json::{Value, json};
use served::Question;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};
use wire::{Ctx, Wire, error_body, render};

/// The model name echoed back when a request names none, and listed by the model probes.
pub const DEFAULT_MODEL: &str = "mock-model";

/// A request as the mock received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    pub query: Option<String>,
    /// Header names lowercased; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON, `Value::Null` when it is not JSON.
    pub body: Value,
    pub raw_body: String,
    /// The status the mock answered with.
    pub status: u16,
    /// Ids of the tool calls in the reply this request got, in order (empty for Ollama).
    pub tool_ids: Vec<String>,
    /// Which connection it came on: 1 for the first the mock accepted, and so on.
    pub connection: usize,
}

impl RecordedRequest {
    /// A header by name, case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The `model` field of the JSON body.
    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }

    /// The text of every message in order (Anthropic text blocks, the string content of the
    /// chat formats), leaving out tern's per-turn `[system: …]` notes.
    pub fn texts(&self) -> Vec<String> {
        texts_of(&self.body)
    }

    /// tern's per-turn `[system: …]` notes in the request, in order.
    pub fn nudges(&self) -> Vec<String> {
        let mut nudges = Vec::new();
        for message in array(&self.body, "messages") {
            if let Some(text) = message["content"].as_str() {
                nudges.extend(nudge_of(text).map(str::to_owned));
            }
            let blocks = array(message, "content").filter(|block| block["type"] == "text");
            let texts = blocks.filter_map(|block| block["text"].as_str());
            nudges.extend(texts.filter_map(nudge_of).map(str::to_owned));
        }
        nudges
    }

    /// Ids of the tool calls in the request's history (Anthropic `tool_use` blocks, OpenAI
    /// assistant `tool_calls`), in order.
    pub fn tool_use_ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for message in array(&self.body, "messages") {
            ids.extend(array(message, "tool_calls").filter_map(|call| string(call, "id")));
            let blocks = array(message, "content").filter(|block| block["type"] == "tool_use");
            ids.extend(blocks.filter_map(|block| string(block, "id")));
        }
        ids
    }

    /// Ids the request's tool results answer (Anthropic `tool_result.tool_use_id`, OpenAI
    /// `role: tool` messages' `tool_call_id`), in order: with [`tool_use_ids`] it shows
    /// whether every call in the history is paired with its result.
    ///
    /// [`tool_use_ids`]: Self::tool_use_ids
    pub fn tool_result_ids(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for message in array(&self.body, "messages") {
            if message["role"] == "tool" {
                ids.extend(string(message, "tool_call_id"));
            }
            let blocks = array(message, "content").filter(|block| block["type"] == "tool_result");
            ids.extend(blocks.filter_map(|block| string(block, "tool_use_id")));
        }
        ids
    }
}

/// How every per-turn note tern sends begins.
pub const NUDGE_OPENING: &str = "[system: turn context from tern, not written by the person]";

/// The nudge at the start of `text`. The chat formats join a nudge and the message after it
/// with a blank line; a nudge's own layers begin with `[`, so the first blank line not
/// followed by `[` ends it (test inputs never begin with `[`).
fn nudge_of(text: &str) -> Option<&str> {
    if !text.starts_with(NUDGE_OPENING) {
        return None;
    }
    let mut at = 0;
    while let Some(found) = text[at..].find("\n\n") {
        let end = at + found;
        if !text[end + 2..].starts_with('[') {
            return Some(&text[..end]);
        }
        at = end + 2;
    }
    Some(text)
}

/// `text` without a leading nudge.
fn without_nudge(text: &str) -> &str {
    match nudge_of(text) {
        Some(nudge) => text[nudge.len()..].trim_start_matches('\n'),
        None => text,
    }
}

/// The elements of `value[key]` when it is an array, none otherwise.
fn array<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A running mock provider; it stops when dropped.
pub struct MockProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    // Dropping the sender ends the server thread, which closes every open connection.
    _stop: oneshot::Sender<()>,
}

struct Shared {
    state: Mutex<State>,
    arrived: Condvar,
    count: watch::Sender<usize>,
    /// Connections accepted so far.
    connections: AtomicUsize,
    /// Requests read and left unanswered by [`KeepAlive::DropNextRequest`].
    dropped: AtomicUsize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Reply>,
    by_model: BTreeMap<String, VecDeque<Reply>>,
    /// Replies for the requests whose first message holds a marker, in the order pushed.
    by_input: Vec<(String, VecDeque<Reply>)>,
    /// Replies for requests whose latest text contains a marker, each taken once.
    by_latest: Vec<(String, Reply)>,
    repeat: Option<Reply>,
    requests: Vec<RecordedRequest>,
    not_recording: bool,
    received: usize,
    /// Of them, the requests to a model endpoint.
    model_received: usize,
    next_tool: u64,
    identity: Identity,
    /// How long model questions wait before their answer.
    questions_delay: Duration,
    keep_alive: KeepAlive,
    counting: Counting,
    /// Where each request's arrival and answer times go, when asked for.
    timings: Option<std::fs::File>,
    /// Where each model request's size and its latest tool results' size go, when asked for.
    sizes: Option<std::fs::File>,
}

/// How the mock counts a request's tokens, and whether it refuses those over a window.
#[derive(Debug, Clone, Copy)]
struct Counting {
    /// Bytes of request body per token.
    bytes_per_token: f64,
    /// The window of a server that refuses larger requests, as llama.cpp's does.
    n_ctx: Option<u64>,
}

impl Default for Counting {
    /// Four bytes a token, no window.
    fn default() -> Self {
        Self {
            bytes_per_token: 4.0,
            n_ctx: None,
        }
    }
}

impl Counting {
    fn count(&self, body_len: usize) -> u64 {
        ((body_len as f64 / self.bytes_per_token) as u64).max(1)
    }

    /// llama.cpp's answer to a request over its window.
    fn refusal(&self, counted: u64) -> Option<Outgoing> {
        let n_ctx = self.n_ctx.filter(|&n| counted > n)?;
        let message = format!(
            "request ({counted} tokens) exceeds the available context size ({n_ctx} tokens), \
             try increasing it"
        );
        Some(Outgoing::json(
            400,
            json!({"error": {"code": 400, "message": message, "type": "exceed_context_size_error",
                             "n_prompt_tokens": counted, "n_ctx": n_ctx}}),
        ))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the script from the server or other asserts.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MockProvider {
    /// Starts a server on an ephemeral port; usable from async tests.
    pub async fn start() -> Self {
        Self::start_blocking()
    }

    /// Starts a server on an ephemeral port; usable anywhere.
    pub fn start_blocking() -> Self {
        Self::bind(0).expect("binding 127.0.0.1:0 for the mock provider")
    }

    /// Starts a server on `port` (0 for an ephemeral one).
    pub fn bind(port: u16) -> std::io::Result<Self> {
        Self::bind_with_threads(port, 1)
    }

    /// [`MockProvider::bind`] serving on `threads` threads: a benchmark's mock that streams
    /// to many clients at once answers a new request as soon as one of them is free, as a
    /// provider's servers would, rather than after its other streams' next writes.
    pub fn bind_with_threads(port: u16, threads: usize) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = match threads {
            0 | 1 => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            n => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()?,
        };
        let handle = runtime.handle().clone();
        let (count, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            arrived: Condvar::new(),
            count,
            connections: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let server = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("mock-provider-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .expect("registering a listener inside its own runtime");
                    tokio::select! {
                        _ = http::accept_loop(listener, server) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Self {
            addr,
            shared,
            runtime: handle,
            _stop: stop,
        })
    }

    /// `http://127.0.0.1:PORT`: the base URL for Anthropic, Ollama and OpenAI-compatible
    /// profiles alike (OpenAI's `/v1` prefix is optional here).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL joined with `path` (e.g. `mock.url("/v1")`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply for the next model request that has no model-specific queue.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// Queues a reply for requests naming `model`. Once a model has a queue, its requests
    /// consume only that queue (and get the "script ran out" 500 when it is empty), so a
    /// fallback-model test knows exactly which reply each model saw.
    pub fn push_for_model(&self, model: &str, reply: Reply) {
        self.shared
            .lock()
            .by_model
            .entry(model.to_owned())
            .or_default()
            .push_back(reply);
    }

    /// Queues a reply for requests whose first message contains `marker`: one session's
    /// requests among several (a subagent's task). Checked before the model queues; once a
    /// marker has a queue, its requests consume only that queue.
    pub fn push_for_input(&self, marker: &str, reply: Reply) {
        let mut state = self.shared.lock();
        match state.by_input.iter_mut().find(|(m, _)| m == marker) {
            Some((_, queue)) => queue.push_back(reply),
            None => state
                .by_input
                .push((marker.to_owned(), VecDeque::from([reply]))),
        }
    }

    /// Queues a reply for the first request whose latest text (the message it answers)
    /// contains `marker`; checked before every other queue.
    pub fn push_for_latest(&self, marker: &str, reply: Reply) {
        self.shared
            .lock()
            .by_latest
            .push((marker.to_owned(), reply));
    }

    /// Answers every request whose queue is empty with `reply` instead of the 500.
    pub fn repeat(&self, reply: Reply) {
        self.shared.lock().repeat = Some(reply);
    }

    /// Answers questions about the served model as `identity` from now on.
    pub fn serve_as(&self, identity: Identity) {
        self.shared.lock().identity = identity;
    }

    /// Holds back every answer to a question about the served model by `delay` (a server
    /// too slow to say, or one that does not answer in time).
    pub fn delay_model_questions(&self, delay: Duration) {
        self.shared.lock().questions_delay = delay;
    }

    /// The requests that asked about the served model (model lists, `/props`, `/api/show`,
    /// `/api/v0/models`), as `METHOD /path`, in arrival order.
    pub fn model_questions(&self) -> Vec<String> {
        let state = self.shared.lock();
        let asked = |r: &&RecordedRequest| Question::of(&r.method, &r.path).is_some();
        state
            .requests
            .iter()
            .filter(asked)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// Sets what happens to connections after a response (see [`KeepAlive`]); each
    /// connection reads the mode as each of its requests arrives.
    pub fn keep_alive(&self, mode: KeepAlive) {
        self.shared.lock().keep_alive = mode;
    }

    /// Counts a request's tokens as `bytes_per_token` bytes of its body each, and refuses a
    /// request over `n_ctx` of them as llama.cpp's server does (HTTP 400
    /// `exceed_context_size_error`), without using up a reply.
    pub fn count_like_a_server(&self, bytes_per_token: f64, n_ctx: u64) {
        self.shared.lock().counting = Counting {
            bytes_per_token,
            n_ctx: Some(n_ctx),
        };
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Requests read and closed without an answer ([`KeepAlive::DropNextRequest`]); they are
    /// not among [`requests`](Self::requests) and consume no reply.
    pub fn dropped_requests(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Stops keeping request bodies, for long benchmark runs; counting goes on.
    pub fn disable_recording(&self) {
        self.shared.lock().not_recording = true;
    }

    /// Writes a line to `file` for every request answered: when the mock took it up (the
    /// first on a connection when the connection was accepted, a later one when it had been
    /// read) and when its answer (a stream's head, or all of it when unpaced) had been
    /// written, both in microseconds since the Unix epoch, then its path. A benchmark takes the provider's
    /// share of a latency out with them.
    pub fn log_timings(&self, file: std::fs::File) {
        self.shared.lock().timings = Some(file);
    }

    /// Writes a line to `file` for every model request: its body's bytes, then the bytes of
    /// the tool results in its last message (0 when it ends with none). A benchmark sees with
    /// them what a large tool output costs the model.
    pub fn log_sizes(&self, file: std::fs::File) {
        self.shared.lock().sizes = Some(file);
    }

    /// Replies still queued, over all queues.
    pub fn remaining(&self) -> usize {
        let state = self.shared.lock();
        state.queue.len() + state.by_model.values().map(VecDeque::len).sum::<usize>()
    }

    /// Every request received so far, model calls and probes alike, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Only the requests to a model endpoint.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        let state = self.shared.lock();
        let model = |r: &&RecordedRequest| matches!(route(&r.method, &r.path), Route::Model(_));
        state.requests.iter().filter(model).cloned().collect()
    }

    /// Waits until at least `n` requests arrived and returns them all; panics naming what did
    /// arrive when `timeout` passes first. The timer runs on the mock's own runtime, so a
    /// paused clock in the test cannot fire it early.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let mut seen = self.shared.count.subscribe();
        let waited = self.runtime.spawn(async move {
            tokio::time::timeout(timeout, seen.wait_for(|count| *count >= n))
                .await
                .is_ok()
        });
        let arrived = waited.await.unwrap_or(false);
        self.requests_or_panic(arrived, n, timeout)
    }

    /// [`wait_for_requests`](Self::wait_for_requests) for code outside a runtime.
    pub fn wait_for_requests_blocking(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let arrived = self.block_until(timeout, |state| state.received >= n);
        self.requests_or_panic(arrived, n, timeout)
    }

    /// Waits until at least `n` requests to a model endpoint arrived (questions about the
    /// served model aside) and returns those; panics naming what did arrive when `timeout`
    /// passes first.
    pub fn wait_for_model_requests_blocking(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Vec<RecordedRequest> {
        let arrived = self.block_until(timeout, |state| state.model_received >= n);
        self.requests_or_panic(arrived, n, timeout);
        self.model_requests()
    }

    /// Blocks until `done` holds of the state or `timeout` passes; returns whether it held.
    fn block_until(&self, timeout: Duration, done: impl Fn(&State) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while !done(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .shared
                .arrived
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        done(&state)
    }

    fn requests_or_panic(
        &self,
        arrived: bool,
        n: usize,
        timeout: Duration,
    ) -> Vec<RecordedRequest> {
        let requests = self.requests();
        if !arrived {
            let seen: Vec<String> = requests
                .iter()
                .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
                .collect();
            panic!("mock provider: expected {n} requests within {timeout:?}, got {seen:?}");
        }
        requests
    }
}

enum Route {
    Model(Wire),
    Question(Question),
    Root,
    NotFound,
}

fn route(method: &str, path: &str) -> Route {
    if let Some(question) = Question::of(method, path) {
        return Route::Question(question);
    }
    match (method, path) {
        ("POST", "/v1/messages") => Route::Model(Wire::Anthropic),
        ("POST", "/chat/completions" | "/v1/chat/completions") => Route::Model(Wire::OpenAi),
        ("POST", "/api/chat") => Route::Model(Wire::Ollama),
        ("GET", "/") => Route::Root,
        _ => Route::NotFound,
    }
}

/// Records the request and decides the response, all under one lock so that concurrent
/// requests consume the script in arrival order.
fn answer(shared: &Shared, incoming: Incoming, connection: usize) -> Outgoing {
    let (path, query) = match incoming.target.split_once('?') {
        Some((path, query)) => (path.to_owned(), Some(query.to_owned())),
        None => (incoming.target.clone(), None),
    };
    let raw_body = String::from_utf8_lossy(&incoming.body).into_owned();
    let body: Value = serde_json::from_slice(&incoming.body).unwrap_or(Value::Null);
    let model = body.get("model").and_then(Value::as_str).map(str::to_owned);

    let mut state = shared.lock();
    state.received += 1;
    let seq = state.received;
    let mut tool_ids = Vec::new();
    if matches!(route(&incoming.method, &path), Route::Model(_)) {
        state.model_received += 1;
        if let Some(file) = &mut state.sizes {
            use std::io::Write;
            let _ = writeln!(file, "{} {}", raw_body.len(), latest_results_len(&body));
        }
    }
    let mut outgoing = match route(&incoming.method, &path) {
        Route::Model(wire) => {
            let counted = state.counting.count(raw_body.len());
            match state.counting.refusal(counted) {
                Some(refused) => refused,
                None => match state.next_reply(model.as_deref(), &body) {
                    Ok(reply) => {
                        let ctx = Ctx::new(wire, seq, &body, counted);
                        render(&ctx, reply, &mut state.next_tool, &mut tool_ids)
                    }
                    Err(why) => {
                        let why = format!(
                            "mock provider: {why} (request #{seq}, {} {path}); push more replies",
                            incoming.method
                        );
                        Outgoing::json(500, error_body(wire, "api_error", &why))
                    }
                },
            }
        }
        Route::Question(question) => {
            let names = state.model_names();
            let said = state.identity.answer(question, &names, model.as_deref());
            let mut outgoing = match said {
                Some(body) => Outgoing::json(200, body),
                None => not_found(&incoming.method, &path),
            };
            outgoing.pacing.before = state.questions_delay;
            outgoing
        }
        Route::Root => Outgoing::full(200, "text/plain", "mock provider is running".to_owned()),
        Route::NotFound => not_found(&incoming.method, &path),
    };
    outgoing
        .headers
        .push(("request-id".to_owned(), format!("req_mock_{seq}")));
    if !state.not_recording {
        state.requests.push(RecordedRequest {
            method: incoming.method,
            path,
            query,
            headers: incoming.headers,
            body,
            raw_body,
            status: outgoing.status,
            tool_ids,
            connection,
        });
    }
    drop(state);
    shared.arrived.notify_all();
    shared.count.send_replace(seq);
    outgoing
}

/// The bytes of the tool results in a request's last message: Anthropic `tool_result` blocks
/// (their text, whether a string or text blocks), or the trailing OpenAI `role: tool` messages.
fn latest_results_len(body: &Value) -> usize {
    let messages: Vec<&Value> = array(body, "messages").collect();
    let text_len = |content: &Value| match content {
        Value::String(text) => text.len(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .map(str::len)
            .sum(),
        _ => 0,
    };
    let tool_messages = messages.iter().rev().take_while(|m| m["role"] == "tool");
    let chat: usize = tool_messages.map(|m| text_len(&m["content"])).sum();
    let Some(last) = messages.last() else {
        return chat;
    };
    let blocks = array(last, "content").filter(|block| block["type"] == "tool_result");
    chat + blocks
        .map(|block| text_len(&block["content"]))
        .sum::<usize>()
}

/// The 404 for a path the mock (as its current identity) does not serve.
fn not_found(method: &str, path: &str) -> Outgoing {
    let why = format!(
        "mock provider: no route for {method} {path} (model endpoints: POST /v1/messages, \
         /chat/completions, /v1/chat/completions, /api/chat)"
    );
    Outgoing::json(404, json!({ "error": why }))
}

/// The text of every message of a request body in order, tern's per-turn notes left out.
fn texts_of(body: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    for message in array(body, "messages") {
        if message["role"] == "system" {
            continue;
        }
        if let Some(text) = message["content"].as_str() {
            texts.push(without_nudge(text).to_owned());
        }
        let blocks = array(message, "content").filter(|block| block["type"] == "text");
        texts.extend(blocks.filter_map(|block| string(block, "text")));
    }
    texts.retain(|text| !text.is_empty() && !text.starts_with(NUDGE_OPENING));
    texts
}

impl State {
    fn next_reply(&mut self, model: Option<&str>, body: &Value) -> Result<Reply, String> {
        let texts = texts_of(body);
        if let Some(latest) = texts.last()
            && let Some(at) = self
                .by_latest
                .iter()
                .position(|(marker, _)| latest.contains(marker.as_str()))
        {
            return Ok(self.by_latest.remove(at).1);
        }
        let first = texts.into_iter().next().unwrap_or_default();
        let by_input = self
            .by_input
            .iter_mut()
            .find(|(marker, _)| first.contains(marker.as_str()));
        let (queue, which) = match (by_input, model.and_then(|m| self.by_model.get_mut(m))) {
            (Some((marker, queue)), _) => (queue, format!("the script for input {marker:?}")),
            (None, Some(queue)) => (
                queue,
                format!("the script for model {:?}", model.unwrap_or("")),
            ),
            (None, None) => (&mut self.queue, "the script".to_owned()),
        };
        match queue.pop_front().or_else(|| self.repeat.clone()) {
            Some(reply) => Ok(reply),
            None => Err(format!("{which} ran out of replies")),
        }
    }

    fn model_names(&self) -> Vec<String> {
        let mut names = vec![DEFAULT_MODEL.to_owned()];
        names.extend(
            self.by_model
                .keys()
                .filter(|m| m.as_str() != DEFAULT_MODEL)
                .cloned(),
        );
        names
    }
}
