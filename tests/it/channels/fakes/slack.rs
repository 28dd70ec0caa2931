//! A fake Slack: the Web API methods tern calls and a Socket Mode WebSocket that says hello,
//! pushes envelopes, records the acks and disconnects on demand. With [`Limits`] set it
//! enforces Slack's documented rate limits and answers 429 with `Retry-After` past them.

use super::server::{Fake, HttpRequest, HttpResponse};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Ws;

pub const WAIT: Duration = Duration::from_secs(20);

/// A token bucket: `capacity` calls at once, then `per_minute` a minute.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    capacity: f64,
    per_sec: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(capacity: u32, per_minute: u32) -> Self {
        Self {
            tokens: f64::from(capacity),
            capacity: f64::from(capacity),
            per_sec: f64::from(per_minute) / 60.0,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let gained = now.saturating_duration_since(self.last).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + gained).min(self.capacity);
        self.last = now;
    }

    /// How long until a call is free; zero when one is free now.
    fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec)
        }
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }
}

/// Slack's documented limits on posting, as the fake enforces them.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `chat.update`, Tier 3, per workspace.
    pub updates: Bucket,
    /// `chat.postMessage` per workspace.
    pub posts: Bucket,
    /// `chat.postMessage` per channel, each a copy of this one.
    pub per_channel: Bucket,
    /// Each channel's bucket, once it posted.
    pub channels: HashMap<String, Bucket>,
}

impl Limits {
    /// `chat.update` 20 at once refilling 60 a minute; `chat.postMessage` 20 at once refilling
    /// 300 a minute per workspace and one a second per channel with a burst of 3.
    pub fn documented() -> Self {
        Self {
            updates: Bucket::new(20, 60),
            posts: Bucket::new(20, 300),
            per_channel: Bucket::new(3, 60),
            channels: HashMap::new(),
        }
    }

    /// Takes a call of `method` in `channel` from the buckets, or the wait to name in
    /// `Retry-After`.
    fn take(&mut self, method: &str, channel: &str) -> Result<(), Duration> {
        let now = Instant::now();
        match method {
            "chat.update" => match self.updates.wait(now) {
                Duration::ZERO => {
                    self.updates.take();
                    Ok(())
                }
                wait => Err(wait),
            },
            "chat.postMessage" => {
                let per_channel = self.per_channel.clone();
                let mine = self
                    .channels
                    .entry(channel.to_owned())
                    .or_insert(per_channel);
                let wait = mine.wait(now).max(self.posts.wait(now));
                if wait.is_zero() {
                    mine.take();
                    self.posts.take();
                    Ok(())
                } else {
                    Err(wait)
                }
            }
            _ => Ok(()),
        }
    }
}

/// What the fake Slack holds between requests.
#[derive(Default)]
pub struct State {
    /// Frames sent to tern on the current connection.
    pub outbox: Option<mpsc::UnboundedSender<Ws>>,
    /// Socket connections made.
    pub connections: usize,
    /// Envelope ids tern acknowledged, and when.
    pub acks: Vec<(String, Instant)>,
    /// `auth.test` answers `invalid_auth`.
    pub refuse_auth: bool,
    /// `chat.update` answers 429 this many more times.
    pub updates_limited: usize,
    /// Rate limits enforced, when set.
    pub limits: Option<Limits>,
    /// 429s answered, by method.
    pub limited: BTreeMap<String, usize>,
    /// Messages as they show now, by `ts`: their channel and text.
    pub messages: BTreeMap<String, (String, String)>,
}

pub struct SlackFake {
    pub fake: Fake,
    pub state: Arc<Mutex<State>>,
    pub ts: Arc<AtomicUsize>,
}

fn ok(extra: Value) -> HttpResponse {
    let mut body = json!({"ok": true});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    HttpResponse::json(200, body)
}

fn answer(
    state: &Mutex<State>,
    ts: &AtomicUsize,
    addr: &str,
    request: &HttpRequest,
) -> HttpResponse {
    let mut state = state.lock().unwrap();
    let method = request.path.strip_prefix("/api/").unwrap_or_default();
    let body = request.json();
    let channel = body["channel"].as_str().unwrap_or_default().to_owned();
    if let Some(limits) = state.limits.as_mut()
        && let Err(wait) = limits.take(method, &channel)
    {
        *state.limited.entry(method.to_owned()).or_default() += 1;
        let secs = wait.as_secs_f64().ceil().max(1.0);
        return HttpResponse::json(429, json!({"ok": false, "error": "ratelimited"}))
            .with_header("retry-after", &format!("{secs}"));
    }
    match request.path.as_str() {
        "/api/auth.test" if state.refuse_auth => {
            HttpResponse::json(200, json!({"ok": false, "error": "invalid_auth"}))
        }
        "/api/auth.test" => {
            ok(json!({"team_id": "T1", "user_id": "UBOT", "bot_id": "BBOT", "user": "tern"}))
        }
        "/api/apps.connections.open" => {
            assert_eq!(request.header("authorization"), Some("Bearer xapp-test"));
            let n = state.connections;
            ok(json!({"url": format!("ws://{addr}/link/?n={n}")}))
        }
        "/api/chat.postMessage" => {
            assert_eq!(request.header("authorization"), Some("Bearer xoxb-test"));
            let ts = format!("9.{}", ts.fetch_add(1, Ordering::SeqCst));
            let text = body["text"].as_str().unwrap_or_default().to_owned();
            state.messages.insert(ts.clone(), (channel, text));
            ok(json!({"channel": body["channel"], "ts": ts}))
        }
        "/api/chat.update" if state.updates_limited > 0 => {
            state.updates_limited -= 1;
            *state.limited.entry(method.to_owned()).or_default() += 1;
            HttpResponse::json(429, json!({"ok": false, "error": "ratelimited"}))
                .with_header("retry-after", "1")
        }
        "/api/chat.update" => {
            if let (Some(ts), Some(text)) = (body["ts"].as_str(), body["text"].as_str())
                && let Some(message) = state.messages.get_mut(ts)
            {
                message.1 = text.to_owned();
            }
            ok(json!({}))
        }
        "/api/chat.postEphemeral" => ok(json!({})),
        _ => HttpResponse::json(404, json!({"ok": false, "error": "unknown_method"})),
    }
}

/// One Socket Mode connection: hello, then the frames sent, recording the acks.
async fn socket(
    state: Arc<Mutex<State>>,
    socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut state = state.lock().unwrap();
        state.connections += 1;
        state.outbox = Some(tx.clone());
    }
    let hello = json!({"type": "hello", "num_connections": 1,
    "debug_info": {"host": "fake", "approximate_connection_time": 18060},
    "connection_info": {"app_id": "A1"}});
    let _ = tx.send(Ws::Text(hello.to_string().into()));
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(frame) => {
                    let closing = matches!(frame, Ws::Close(_));
                    if sink.send(frame).await.is_err() || closing {
                        break;
                    }
                }
                None => break,
            },
            heard = stream.next() => match heard {
                Some(Ok(Ws::Text(text))) => {
                    if let Ok(value) = serde_json::from_str::<Value>(&text)
                        && let Some(id) = value["envelope_id"].as_str()
                    {
                        state.lock().unwrap().acks.push((id.to_owned(), Instant::now()));
                    }
                }
                Some(Ok(_)) => {}
                _ => break,
            },
        }
    }
}

impl SlackFake {
    pub fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let ts = Arc::new(AtomicUsize::new(100));
        let addr = Arc::new(Mutex::new(String::new()));
        let (http_state, http_ts, http_addr) = (state.clone(), ts.clone(), addr.clone());
        let http = Arc::new(move |request: &HttpRequest| {
            let addr = http_addr.lock().unwrap().clone();
            answer(&http_state, &http_ts, &addr, request)
        });
        let ws_state = state.clone();
        let ws = Arc::new(
            move |ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, _path: String| {
                let run: futures_util::future::BoxFuture<'static, ()> =
                    Box::pin(socket(ws_state.clone(), ws));
                run
            },
        );
        let fake = Fake::start(http, Some(ws));
        *addr.lock().unwrap() = fake.addr.to_string();
        Self { fake, state, ts }
    }

    pub fn config(&self, extra: &str) -> String {
        format!(
            "[session]\nsidecar_titles = false\n{}{extra}",
            self.section(&["C1"], "200ms")
        )
    }

    /// `[channels.slack]` alone letting U1 in in `channels`, for a config with others.
    pub fn section(&self, channels: &[&str], edit_interval: &str) -> String {
        let channels: Vec<String> = channels.iter().map(|c| format!("\"{c}\"")).collect();
        format!(
            "[channels.slack]\napi_url = \"{}/api\"\nallow_users = [\"U1\"]\n\
             allow_channels = [{}]\nedit_interval = \"{edit_interval}\"\n",
            self.fake.base_url(),
            channels.join(", ")
        )
    }

    /// The environment `tern serve` needs besides the config.
    pub fn env() -> [(&'static str, &'static str); 2] {
        [
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_BOT_TOKEN", "xoxb-test"),
        ]
    }

    pub fn wait_connections(&self, n: usize) {
        let deadline = Instant::now() + WAIT;
        while self.state.lock().unwrap().connections < n {
            assert!(Instant::now() < deadline, "tern never made connection {n}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends a frame on the current connection.
    pub fn send(&self, frame: Value) {
        let outbox = self
            .state
            .lock()
            .unwrap()
            .outbox
            .clone()
            .expect("connected");
        outbox
            .send(Ws::Text(frame.to_string().into()))
            .expect("the connection is open");
    }

    /// Pushes an `events_api` envelope carrying `event`; its envelope id.
    pub fn event(&self, event_id: &str, event: Value) -> String {
        let envelope = format!("env-{event_id}-{}", self.ts.fetch_add(1, Ordering::SeqCst));
        self.send(json!({
            "envelope_id": envelope,
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "payload": {"type": "event_callback", "team_id": "T1", "event_id": event_id, "event": event},
        }));
        envelope
    }

    pub fn mention(&self, event_id: &str, user: &str, ts: &str, text: &str) -> String {
        self.mention_in("C1", event_id, user, ts, text)
    }

    /// An `app_mention` in `channel`; its envelope id.
    pub fn mention_in(
        &self,
        channel: &str,
        event_id: &str,
        user: &str,
        ts: &str,
        text: &str,
    ) -> String {
        self.event(
            event_id,
            json!({"type": "app_mention", "user": user, "text": format!("<@UBOT> {text}"),
                   "ts": ts, "channel": channel, "event_ts": ts}),
        )
    }

    /// When `envelope` was acknowledged, if it was.
    pub fn acked_at(&self, envelope: &str) -> Option<Instant> {
        self.state
            .lock()
            .unwrap()
            .acks
            .iter()
            .find(|(id, _)| id == envelope)
            .map(|(_, at)| *at)
    }

    pub fn acked(&self, envelope: &str) -> bool {
        self.acked_at(envelope).is_some()
    }

    pub fn wait_acked(&self, envelope: &str) {
        let deadline = Instant::now() + WAIT;
        while !self.acked(envelope) {
            assert!(
                Instant::now() < deadline,
                "envelope {envelope} never acknowledged"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until `check` holds, or fails naming `what`.
    pub fn wait(&self, what: &str, check: impl Fn() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !check() {
            assert!(
                Instant::now() < deadline,
                "{what} never happened: {:#?}",
                self.updates()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether a message was posted or updated to end with `text`.
    pub fn shown(&self, text: &str) -> bool {
        let posted = self.fake.to("/api/chat.postMessage");
        posted
            .iter()
            .map(|r| r.json())
            .chain(self.updates())
            .any(|b| b["text"].as_str().is_some_and(|t| t.ends_with(text)))
    }

    /// The bodies of every `chat.update` so far.
    pub fn updates(&self) -> Vec<Value> {
        self.fake
            .to("/api/chat.update")
            .iter()
            .map(|r| r.json())
            .collect()
    }

    /// The texts the messages in `channel` show now, oldest first.
    pub fn showing(&self, channel: &str) -> Vec<String> {
        let state = self.state.lock().unwrap();
        let mut messages: Vec<(usize, String)> = state
            .messages
            .iter()
            .filter(|(_, (c, _))| c == channel)
            .map(|(ts, (_, text))| {
                let n = ts.rsplit('.').next().and_then(|n| n.parse().ok());
                (n.unwrap_or(0), text.clone())
            })
            .collect();
        messages.sort();
        messages.into_iter().map(|(_, text)| text).collect()
    }
}
