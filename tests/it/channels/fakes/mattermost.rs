//! A fake Mattermost server: it answers `users/me`, posts and patches, and its WebSocket
//! takes the authentication challenge, says `hello`, pushes `posted` and `reaction_added`
//! events (the post a JSON string, as the real server sends it) and records what the client
//! sends.
//!
//! Like the real server it numbers the events of a connection (`seq`, the `hello` at 0) and
//! keeps them: a socket opened with `?connection_id=<id>&sequence_number=<n>` for the
//! connection it has resumes it, replaying the events from `n` on without a new `hello`;
//! any other socket (or any socket once `forget` is set) starts a fresh connection with a
//! new id and a `hello`. Events made while no socket is open wait for the next.

use super::server::{Fake, HttpRequest, HttpResponse};
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

pub const TOKEN: &str = "mm-test-token";
pub const BOT: &str = "bot1";
pub const WITHIN: Duration = Duration::from_secs(20);

/// What the test tells the open socket.
pub enum Push {
    Frame(String),
    Drop,
}

/// The events of the fake's connection, kept across its sockets.
#[derive(Default)]
pub struct Stream {
    pub connection_id: String,
    /// Every event of the connection; its index is its `seq`.
    pub sent: Vec<String>,
}

/// What the fake server saw and is told to do.
#[derive(Default)]
pub struct State {
    /// The open socket, once authenticated.
    pub socket: Mutex<Option<mpsc::UnboundedSender<Push>>>,
    /// The connection its sockets resume; taken before `socket` when both are.
    pub stream: Mutex<Stream>,
    /// Connections started so far (each fresh `hello`).
    pub connections: AtomicUsize,
    /// Whether a socket asking to resume starts afresh anyway (a restarted server).
    pub forget: AtomicBool,
    /// The query string each socket was opened with (empty for none), in order.
    pub queries: Mutex<Vec<String>>,
    /// Every action a client sent over a socket.
    pub actions: Mutex<Vec<Value>>,
    /// Sockets authenticated so far.
    pub logins: AtomicUsize,
    /// Posts made: their id and body.
    pub posts: Mutex<Vec<(String, Value)>>,
    /// Patches still to refuse with a 429, and those refused.
    pub refuse_patches: AtomicUsize,
    pub refused: AtomicUsize,
    /// Whether the socket refuses the token `users/me` takes (a token revoked meanwhile).
    pub refuse_socket: AtomicBool,
}

/// The fake Mattermost server.
pub struct Chat {
    pub fake: Fake,
    pub state: Arc<State>,
}

pub fn answer_http(state: &State, request: &HttpRequest) -> HttpResponse {
    if request.header("authorization") != Some(&format!("Bearer {TOKEN}")) {
        return HttpResponse::json(
            401,
            json!({"id": "api.context.session_expired.app_error",
                   "message": "Invalid or expired session, please login again.",
                   "status_code": 401}),
        );
    }
    let path = request.path.as_str();
    match request.method.as_str() {
        "GET" if path == "/api/v4/users/me" => {
            HttpResponse::json(200, json!({"id": BOT, "username": "tern", "is_bot": true}))
        }
        "POST" if path == "/api/v4/posts" => {
            let mut posts = state.posts.lock().unwrap();
            let id = format!("bp{}", posts.len() + 1);
            let body = request.json();
            posts.push((id.clone(), body.clone()));
            HttpResponse::json(
                201,
                json!({"id": id, "channel_id": body["channel_id"], "root_id": body["root_id"],
                       "message": body["message"], "user_id": BOT, "type": ""}),
            )
        }
        "PUT" if path.starts_with("/api/v4/posts/") && path.ends_with("/patch") => {
            let refuse = state
                .refuse_patches
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if refuse {
                state.refused.fetch_add(1, Ordering::SeqCst);
                return HttpResponse::json(
                    429,
                    json!({"id": "api.context.rate_limit", "message": "slow down", "status_code": 429}),
                )
                .with_header("x-ratelimit-reset", "1");
            }
            HttpResponse::json(200, json!({"id": path.split('/').nth(4)}))
        }
        "POST" if path == "/api/v4/reactions" => HttpResponse::json(200, json!({})),
        _ => HttpResponse::json(404, json!({"message": "no such route"})),
    }
}

impl Chat {
    pub fn start() -> Self {
        let state = Arc::new(State::default());
        let http = state.clone();
        let ws = state.clone();
        let fake = Fake::start(
            Arc::new(move |request| answer_http(&http, request)),
            Some(Arc::new(move |socket, path: String| {
                serve_socket(ws.clone(), socket, path).boxed()
            })),
        );
        Self { fake, state }
    }

    /// The environment `tern serve` needs besides the config.
    pub fn env() -> [(&'static str, &'static str); 1] {
        [("MATTERMOST_TOKEN", TOKEN)]
    }

    pub fn config(&self) -> String {
        format!("[session]\nsidecar_titles = false\n{}", self.section())
    }

    /// `[channels.mattermost]` alone, for a config with other channels.
    pub fn section(&self) -> String {
        format!(
            "[channels.mattermost]\nurl = \"{}\"\nallow_users = [\"u1\"]\n\
             allow_channels = [\"c1\"]\nedit_interval = \"200ms\"\n",
            self.fake.base_url()
        )
    }

    pub fn wait_logins(&self, n: usize) {
        wait(WITHIN, &format!("login {n}"), || {
            self.state.logins.load(Ordering::SeqCst) >= n
        });
    }

    /// A raw frame to the open socket, or its drop: the socket is gone at once, and events
    /// from now on wait for the next socket.
    pub fn push(&self, push: Push) {
        let mut socket = self.state.socket.lock().unwrap();
        let open = match push {
            Push::Drop => socket.take(),
            Push::Frame(_) => socket.clone(),
        };
        let _ = open.expect("a socket is open").send(push);
    }

    /// An event of the connection: numbered with the next `seq`, kept for a resume, and sent
    /// when a socket is open.
    pub fn event(&self, mut frame: Value) {
        let mut stream = self.state.stream.lock().unwrap();
        frame["seq"] = json!(stream.sent.len());
        let text = frame.to_string();
        stream.sent.push(text.clone());
        if let Some(socket) = self.state.socket.lock().unwrap().as_ref() {
            let _ = socket.send(Push::Frame(text));
        }
    }

    /// The id of the connection the fake has now.
    pub fn connection_id(&self) -> String {
        self.state.stream.lock().unwrap().connection_id.clone()
    }

    /// The query strings of the sockets opened so far.
    pub fn queries(&self) -> Vec<String> {
        self.state.queries.lock().unwrap().clone()
    }

    /// Sends a `posted` event the way the server does.
    pub fn post(&self, post: &Post) {
        let data = json!({
            "channel_type": post.channel_type,
            "channel_name": "town-square",
            "sender_name": format!("@{}", post.user),
            "team_id": "t1",
            "post": json!({
                "id": post.id, "create_at": 1_700_000_000_000_i64, "update_at": 1_700_000_000_000_i64,
                "user_id": post.user, "channel_id": post.channel, "root_id": post.root,
                "message": post.message, "type": post.kind, "props": post.props,
            }).to_string(),
            "mentions": serde_json::to_string(&post.mentions).unwrap(),
        });
        let frame = json!({"event": post.event, "data": data,
                           "broadcast": {"channel_id": post.channel}});
        self.event(frame);
    }

    pub fn react(&self, user: &str, post_id: &str, emoji: &str) {
        let reaction = json!({"user_id": user, "post_id": post_id, "emoji_name": emoji,
                              "create_at": 1_700_000_000_000_i64});
        let frame = json!({"event": "reaction_added",
                           "data": {"reaction": reaction.to_string()}});
        self.event(frame);
    }

    pub fn posts(&self) -> Vec<(String, Value)> {
        self.state.posts.lock().unwrap().clone()
    }

    pub fn patches(&self, id: &str) -> Vec<String> {
        let path = format!("/api/v4/posts/{id}/patch");
        self.fake
            .to(&path)
            .iter()
            .map(|r| r.json()["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// What post `id` shows now: its last patch that landed, else its first text.
    pub fn shown(&self, id: &str) -> String {
        let posts = self.posts();
        let first = posts
            .iter()
            .find(|(posted, _)| posted == id)
            .map(|(_, body)| body["message"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let landed: Vec<String> = self.patches(id);
        // A refused patch is followed by another with the same or newer text.
        landed.last().cloned().unwrap_or(first)
    }

    /// Waits until some post in channel `channel` shows `text` at its end, done streaming
    /// (tool lines may come before it); its id and body.
    pub fn wait_shown(&self, channel: &str, text: &str) -> (String, Value) {
        let mut found = None;
        wait(WITHIN, &format!("a post showing {text:?}"), || {
            found = self.posts().into_iter().find(|(id, body)| {
                let shown = self.shown(id);
                body["channel_id"] == channel
                    && (shown == text || shown.ends_with(&format!("\n{text}")))
            });
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("{}", self.dump()))
    }

    pub fn typing(&self) -> Vec<Value> {
        let actions = self.state.actions.lock().unwrap();
        actions
            .iter()
            .filter(|a| a["action"] == "user_typing")
            .cloned()
            .collect()
    }

    pub fn dump(&self) -> String {
        format!(
            "posts: {:#?}\nactions: {:#?}",
            self.posts(),
            self.state.actions.lock().unwrap()
        )
    }
}

/// One socket opened at `path`: the challenge, then `hello` on a fresh connection or the
/// missed events on a resumed one, then what the test pushes, recording the client.
pub async fn serve_socket(
    state: Arc<State>,
    mut socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    path: String,
) {
    let query = path.split_once('?').map(|(_, q)| q).unwrap_or_default();
    state.queries.lock().unwrap().push(query.to_owned());
    let first = match socket.next().await {
        Some(Ok(Message::Text(text))) => serde_json::from_str::<Value>(&text).unwrap_or_default(),
        _ => return,
    };
    state.actions.lock().unwrap().push(first.clone());
    if first["action"] != "authentication_challenge"
        || first["data"]["token"] != TOKEN
        || state.refuse_socket.load(Ordering::SeqCst)
    {
        let fail = json!({"status": "FAIL", "seq_reply": first["seq"],
                          "error": {"id": "api.web_socket_router.bad_token", "message": "bad token"}});
        let _ = socket.send(Message::text(fail.to_string())).await;
        return;
    }
    let ok = json!({"status": "OK", "seq_reply": first["seq"]});
    if socket.send(Message::text(ok.to_string())).await.is_err() {
        return;
    }
    let (tx, mut pushed) = mpsc::unbounded_channel();
    {
        // Under the stream's lock, so no event falls between the replay and the socket.
        let mut stream = state.stream.lock().unwrap();
        let asked = |name: &str| {
            query.split('&').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key == name).then(|| value.to_owned())
            })
        };
        let from = asked("sequence_number").and_then(|n| n.parse::<usize>().ok());
        let resumed = match (asked("connection_id"), from) {
            (Some(id), Some(from)) if !state.forget.load(Ordering::SeqCst) => {
                (id == stream.connection_id && from >= 1 && from <= stream.sent.len())
                    .then_some(from)
            }
            _ => None,
        };
        match resumed {
            Some(from) => {
                for frame in &stream.sent[from..] {
                    let _ = tx.send(Push::Frame(frame.clone()));
                }
            }
            None => {
                let n = state.connections.fetch_add(1, Ordering::SeqCst) + 1;
                let id = format!("conn{n:022}");
                let hello = json!({"event": "hello",
                                   "data": {"server_version": "10.5.0", "connection_id": id},
                                   "broadcast": {"user_id": BOT}, "seq": 0});
                *stream = Stream {
                    connection_id: id,
                    sent: vec![hello.to_string()],
                };
                let _ = tx.send(Push::Frame(hello.to_string()));
            }
        }
        *state.socket.lock().unwrap() = Some(tx);
    }
    state.logins.fetch_add(1, Ordering::SeqCst);
    loop {
        tokio::select! {
            push = pushed.recv() => match push {
                Some(Push::Frame(frame)) => {
                    if socket.send(Message::text(frame)).await.is_err() {
                        return;
                    }
                }
                // Gone without a close frame, like a dropped connection.
                Some(Push::Drop) | None => return,
            },
            from = socket.next() => match from {
                Some(Ok(Message::Text(text))) => {
                    let action = serde_json::from_str::<Value>(&text).unwrap_or_default();
                    state.actions.lock().unwrap().push(action);
                }
                Some(Ok(_)) => {}
                _ => return,
            },
        }
    }
}

/// A post as the test writes it.
pub struct Post {
    pub event: &'static str,
    pub id: String,
    pub user: String,
    pub channel: String,
    pub root: String,
    pub message: String,
    pub kind: String,
    pub props: Value,
    pub channel_type: &'static str,
    pub mentions: Vec<String>,
}

impl Post {
    /// A channel post by `user` mentioning the bot.
    pub fn mention(id: &str, user: &str, message: &str) -> Self {
        Self {
            event: "posted",
            id: id.into(),
            user: user.into(),
            channel: "c1".into(),
            root: String::new(),
            message: message.into(),
            kind: String::new(),
            props: json!({}),
            channel_type: "O",
            mentions: vec![BOT.into()],
        }
    }

    /// A direct message from `user`, no mention.
    pub fn direct(id: &str, user: &str, message: &str) -> Self {
        Self {
            channel: "d1".into(),
            channel_type: "D",
            mentions: Vec::new(),
            ..Self::mention(id, user, message)
        }
    }

    pub fn in_thread(mut self, root: &str) -> Self {
        self.root = root.into();
        self
    }
}

pub fn wait(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}
