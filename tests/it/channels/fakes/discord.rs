//! A fake Discord: the Gateway (Hello, Identify, READY, heartbeats, resumes, close codes) and
//! the REST API on one port, written from Discord's documented protocol.

use super::server::{Fake, HttpRequest, HttpResponse};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

pub const TOKEN: &str = "test-token";
pub const BOT: &str = "999";
pub const JANE: &str = "111";
pub const STRANGER: &str = "333";
pub const CHANNEL: &str = "222";
pub const WAIT: Duration = Duration::from_secs(20);

/// One frame tern sent the fake gateway.
#[derive(Debug, Clone)]
pub struct Got {
    /// Which connection: 1 for the first.
    pub conn: usize,
    pub path: String,
    /// The frame, or `{"close": code}` for a close.
    pub frame: Value,
}

/// A message as the fake holds it after posts and edits.
#[derive(Debug, Clone)]
pub struct Posted {
    pub channel: String,
    pub content: String,
    pub components: Value,
    pub edits: usize,
}

pub enum Command {
    Frame(Value),
    Close(u16),
}

/// What the fake Discord knows and the test switches.
#[derive(Default)]
pub struct State {
    pub ws_base: OnceLock<String>,
    pub got: Mutex<Vec<Got>>,
    pub conns: AtomicUsize,
    pub seq: AtomicU64,
    /// The connection that never acks heartbeats (0: none).
    pub silent_conn: AtomicUsize,
    /// A close code Identify is answered with.
    pub refuse_identify: Mutex<Option<u16>>,
    pub control: Mutex<Option<mpsc::UnboundedSender<Command>>>,
    pub next_id: AtomicU64,
    pub messages: Mutex<BTreeMap<u64, Posted>>,
    /// Edits still to be answered with a 429.
    pub edit_429s: AtomicUsize,
    pub served_429: AtomicBool,
    /// The heartbeat interval Hello asks for, in ms (0: 100, quick for tests).
    pub heartbeat_ms: AtomicU64,
}

/// The fake Discord: REST and Gateway on one port.
pub struct Discord {
    pub fake: Fake,
    pub state: Arc<State>,
}

impl Discord {
    pub fn start() -> Self {
        let state = Arc::new(State {
            next_id: AtomicU64::new(10_000),
            ..State::default()
        });
        let http = state.clone();
        let ws = state.clone();
        let fake = Fake::start(
            Arc::new(move |request| rest(&http, request)),
            Some(Arc::new(move |socket, path| {
                Box::pin(gateway(ws.clone(), socket, path))
            })),
        );
        let _ = state.ws_base.set(fake.ws_url(""));
        Self { fake, state }
    }

    /// The environment `tern serve` needs besides the config.
    pub fn env() -> [(&'static str, &'static str); 1] {
        [("DISCORD_BOT_TOKEN", TOKEN)]
    }

    pub fn config(&self) -> String {
        format!("[session]\nsidecar_titles = false\n{}", self.section())
    }

    /// `[channels.discord]` alone, for a config with other channels.
    pub fn section(&self) -> String {
        format!(
            "[channels.discord]\napi_url = \"{}/api/v10\"\nallow_users = [\"{JANE}\"]\n\
             allow_channels = [\"{CHANNEL}\"]\nedit_interval = \"200ms\"\n",
            self.fake.base_url()
        )
    }

    pub fn send(&self, command: Command) {
        let control = self.state.control.lock().unwrap();
        control.as_ref().expect("a connection").send(command).ok();
    }

    /// A dispatch on the current connection, with the next sequence number.
    pub fn dispatch(&self, name: &str, d: Value) -> u64 {
        let s = self.state.seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.send(Command::Frame(
            json!({ "op": 0, "t": name, "s": s, "d": d }),
        ));
        s
    }

    /// A message by `author` in `channel` (a server's unless `dm`).
    pub fn message(&self, id: &str, author: &str, channel: &str, content: &str, dm: bool) {
        let mut d = json!({
            "id": id,
            "channel_id": channel,
            "author": { "id": author, "username": format!("user{author}"), "global_name": format!("User {author}") },
            "content": content,
            "mentions": [],
        });
        if !dm {
            d["guild_id"] = json!("1");
        }
        if content.contains(&format!("<@{BOT}>")) {
            d["mentions"] = json!([{ "id": BOT, "username": "ternbot", "bot": true }]);
        }
        if author == BOT {
            d["author"]["bot"] = json!(true);
        }
        self.dispatch("MESSAGE_CREATE", d);
    }

    pub fn got(&self) -> Vec<Got> {
        self.state.got.lock().unwrap().clone()
    }

    /// Waits until tern sent a frame `check` accepts; that frame.
    pub fn wait_frame(&self, what: &str, check: impl Fn(&Got) -> bool) -> Got {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(got) = self.got().into_iter().find(&check) {
                return got;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never came; the gateway got {:#?}",
                self.got()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The messages in `channel`, oldest first.
    pub fn messages(&self, channel: &str) -> Vec<Posted> {
        let messages = self.state.messages.lock().unwrap();
        messages
            .values()
            .filter(|m| m.channel == channel)
            .cloned()
            .collect()
    }

    /// Waits for the approval question in `channel`: its id and message.
    pub fn question(&self, channel: &str) -> (u64, Posted) {
        self.wait_messages(channel, "the question", |m| {
            m.iter().any(|m| m.components.is_array())
        });
        let messages = self.state.messages.lock().unwrap();
        messages
            .iter()
            .find(|(_, m)| m.channel == channel && m.components.is_array())
            .map(|(id, m)| (*id, m.clone()))
            .unwrap()
    }

    /// `user` presses the button `custom_id` of the question `message` in `channel`: the
    /// interaction `int-<n>` with the token `itok-<n>`.
    pub fn click(&self, n: u32, user: &str, channel: &str, message: u64, custom_id: &str) {
        self.dispatch(
            "INTERACTION_CREATE",
            json!({
                "id": format!("int-{n}"), "token": format!("itok-{n}"), "type": 3,
                "application_id": BOT, "channel_id": channel, "guild_id": "1",
                "data": { "custom_id": custom_id, "component_type": 2 },
                "member": { "user": { "id": user, "username": format!("user{user}"), "global_name": format!("User {user}") } },
                "message": { "id": message.to_string() },
            }),
        );
    }

    /// The answer to the click `int-<n>`, once it came.
    pub fn callback(&self, n: u32) -> Value {
        let path = format!("/api/v10/interactions/int-{n}/itok-{n}/callback");
        self.fake.wait_for(WAIT, "the click's answer", |r| {
            r.iter().any(|r| r.path == path)
        });
        self.fake.to(&path)[0].json()
    }

    pub fn wait_messages(&self, channel: &str, what: &str, check: impl Fn(&[Posted]) -> bool) {
        let deadline = std::time::Instant::now() + WAIT;
        while !check(&self.messages(channel)) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never happened; {channel} holds {:#?}",
                self.messages(channel)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The REST API.
pub fn rest(state: &State, request: &HttpRequest) -> HttpResponse {
    let path = request.path.split('?').next().unwrap_or_default();
    let Some(path) = path.strip_prefix("/api/v10/") else {
        return HttpResponse::json(404, json!({ "message": "404: Not Found", "code": 0 }));
    };
    let parts: Vec<&str> = path.split('/').collect();
    let body = request.json();
    match (request.method.as_str(), parts.as_slice()) {
        ("GET", ["gateway", "bot"]) => HttpResponse::json(
            200,
            json!({
                "url": format!("{}/gateway", state.ws_base.get().unwrap()),
                "shards": 1,
                "session_start_limit": { "total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1 },
            }),
        ),
        ("GET", ["channels", id]) => HttpResponse::json(
            200,
            json!({ "id": id, "type": 0, "guild_id": "1", "name": "general" }),
        ),
        ("POST", ["channels", channel, "messages", message, "threads"]) => HttpResponse::json(
            201,
            json!({ "id": message, "type": 11, "parent_id": channel, "name": body["name"] }),
        ),
        ("POST", ["channels", channel, "messages"]) => {
            let id = state.next_id.fetch_add(1, Ordering::SeqCst);
            state.messages.lock().unwrap().insert(
                id,
                Posted {
                    channel: (*channel).to_owned(),
                    content: body["content"].as_str().unwrap_or_default().to_owned(),
                    components: body["components"].clone(),
                    edits: 0,
                },
            );
            HttpResponse::json(
                200,
                json!({ "id": id.to_string(), "channel_id": channel, "content": body["content"] }),
            )
        }
        ("PATCH", ["channels", _, "messages", message]) => {
            let limited = state
                .edit_429s
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if limited {
                state.served_429.store(true, Ordering::SeqCst);
                return HttpResponse::json(
                    429,
                    json!({ "message": "You are being rate limited.", "retry_after": 0.3, "global": false }),
                )
                .with_header("retry-after", "1");
            }
            let mut messages = state.messages.lock().unwrap();
            let Some(posted) = message
                .parse::<u64>()
                .ok()
                .and_then(|id| messages.get_mut(&id))
            else {
                return HttpResponse::json(
                    404,
                    json!({ "message": "Unknown Message", "code": 10008 }),
                );
            };
            if let Some(content) = body["content"].as_str() {
                posted.content = content.to_owned();
            }
            if !body["components"].is_null() {
                posted.components = body["components"].clone();
            }
            posted.edits += 1;
            HttpResponse::json(200, json!({ "id": message }))
        }
        ("POST", ["channels", _, "typing"]) | ("POST", ["interactions", _, _, "callback"]) => {
            HttpResponse {
                status: 204,
                headers: Vec::new(),
                body: String::new(),
            }
        }
        _ => HttpResponse::json(404, json!({ "message": "404: Not Found", "code": 0 })),
    }
}

/// One Gateway connection.
pub async fn gateway(state: Arc<State>, mut socket: WebSocketStream<TcpStream>, path: String) {
    let conn = state.conns.fetch_add(1, Ordering::SeqCst) + 1;
    let (control, mut commands) = mpsc::unbounded_channel();
    *state.control.lock().unwrap() = Some(control);
    let record = |frame: Value| {
        state.got.lock().unwrap().push(Got {
            conn,
            path: path.clone(),
            frame,
        });
    };
    let every = match state.heartbeat_ms.load(Ordering::SeqCst) {
        0 => 100,
        ms => ms,
    };
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": every }, "s": null, "t": null });
    if send(&mut socket, hello).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Frame(frame)) => {
                    let _ = send(&mut socket, frame).await;
                }
                Some(Command::Close(code)) => {
                    close(&mut socket, code).await;
                    return;
                }
                None => return,
            },
            message = socket.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    let frame: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    record(frame.clone());
                    match frame["op"].as_u64() {
                        Some(1) if state.silent_conn.load(Ordering::SeqCst) != conn => {
                            let _ = send(&mut socket, json!({ "op": 11, "d": null, "s": null, "t": null })).await;
                        }
                        Some(2) => {
                            let refused = *state.refuse_identify.lock().unwrap();
                            if let Some(code) = refused {
                                close(&mut socket, code).await;
                                return;
                            }
                            let s = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
                            let ready = json!({
                                "op": 0, "t": "READY", "s": s,
                                "d": {
                                    "v": 10,
                                    "user": { "id": BOT, "username": "ternbot", "bot": true },
                                    "session_id": format!("sess-{conn}"),
                                    "resume_gateway_url": format!("{}/resume", state.ws_base.get().unwrap()),
                                    "guilds": [],
                                },
                            });
                            let _ = send(&mut socket, ready).await;
                        }
                        Some(6) => {
                            let s = state.seq.fetch_add(1, Ordering::SeqCst) + 1;
                            let _ = send(&mut socket, json!({ "op": 0, "t": "RESUMED", "s": s, "d": {} })).await;
                        }
                        _ => {}
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    record(json!({ "close": frame.map(|f| u16::from(f.code)) }));
                    return;
                }
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}

pub async fn send(socket: &mut WebSocketStream<TcpStream>, frame: Value) -> Result<(), ()> {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .map_err(drop)
}

pub async fn close(socket: &mut WebSocketStream<TcpStream>, code: u16) {
    let frame = CloseFrame {
        code: code.into(),
        reason: "".into(),
    };
    let _ = socket.close(Some(frame)).await;
    // Read out tern's answer to the close.
    while let Some(Ok(_)) = socket.next().await {}
}
