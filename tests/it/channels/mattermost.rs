//! Mattermost into `tern serve`: a fake server that answers `users/me`, posts and patches,
//! and whose WebSocket takes the authentication challenge, says `hello`, pushes `posted` and
//! `reaction_added` events (the post a JSON string, as the real server sends it) and records
//! what the client sends. Who is let in, threads, reconnects, a refused token, approvals by
//! reaction, a 429 and the typing indicator, all through the real binary.

use super::Served;
use super::fake::{Fake, HttpRequest, HttpResponse};
use super::text;
use crate::support::Reply;
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "mm-test-token";
const BOT: &str = "bot1";
const WITHIN: Duration = Duration::from_secs(20);

/// What the test tells the open socket.
enum Push {
    Frame(String),
    Drop,
}

/// What the fake server saw and is told to do.
#[derive(Default)]
struct State {
    /// The open socket, once authenticated.
    socket: Mutex<Option<mpsc::UnboundedSender<Push>>>,
    /// Every action a client sent over a socket.
    actions: Mutex<Vec<Value>>,
    /// Sockets authenticated so far.
    logins: AtomicUsize,
    /// Posts made: their id and body.
    posts: Mutex<Vec<(String, Value)>>,
    /// Patches still to refuse with a 429, and those refused.
    refuse_patches: AtomicUsize,
    refused: AtomicUsize,
    /// Whether the socket refuses the token `users/me` takes (a token revoked meanwhile).
    refuse_socket: AtomicBool,
}

/// The fake Mattermost server.
struct Chat {
    fake: Fake,
    state: Arc<State>,
}

fn answer_http(state: &State, request: &HttpRequest) -> HttpResponse {
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
    fn start() -> Self {
        let state = Arc::new(State::default());
        let http = state.clone();
        let ws = state.clone();
        let fake = Fake::start(
            Arc::new(move |request| answer_http(&http, request)),
            Some(Arc::new(move |socket, _path| {
                serve_socket(ws.clone(), socket).boxed()
            })),
        );
        Self { fake, state }
    }

    fn config(&self) -> String {
        format!(
            "[session]\nsidecar_titles = false\n\
             [channels.mattermost]\nurl = \"{}\"\nallow_users = [\"u1\"]\n\
             allow_channels = [\"c1\"]\nedit_interval = \"200ms\"\n",
            self.fake.base_url()
        )
    }

    /// `tern serve` with this server and `token`, once its socket is authenticated.
    fn serve(&self) -> Served {
        let served = Served::start(&self.config(), &[("MATTERMOST_TOKEN", TOKEN)]);
        self.wait_logins(1);
        served
    }

    fn wait_logins(&self, n: usize) {
        wait(WITHIN, &format!("login {n}"), || {
            self.state.logins.load(Ordering::SeqCst) >= n
        });
    }

    fn push(&self, push: Push) {
        let socket = self.state.socket.lock().unwrap();
        let _ = socket.as_ref().expect("a socket is open").send(push);
    }

    /// Sends a `posted` event the way the server does.
    fn post(&self, post: &Post) {
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
                           "broadcast": {"channel_id": post.channel}, "seq": 2});
        self.push(Push::Frame(frame.to_string()));
    }

    fn react(&self, user: &str, post_id: &str, emoji: &str) {
        let reaction = json!({"user_id": user, "post_id": post_id, "emoji_name": emoji,
                              "create_at": 1_700_000_000_000_i64});
        let frame = json!({"event": "reaction_added",
                           "data": {"reaction": reaction.to_string()}, "seq": 9});
        self.push(Push::Frame(frame.to_string()));
    }

    fn posts(&self) -> Vec<(String, Value)> {
        self.state.posts.lock().unwrap().clone()
    }

    fn patches(&self, id: &str) -> Vec<String> {
        let path = format!("/api/v4/posts/{id}/patch");
        self.fake
            .to(&path)
            .iter()
            .map(|r| r.json()["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// What post `id` shows now: its last patch that landed, else its first text.
    fn shown(&self, id: &str) -> String {
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
    fn wait_shown(&self, channel: &str, text: &str) -> (String, Value) {
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

    fn typing(&self) -> Vec<Value> {
        let actions = self.state.actions.lock().unwrap();
        actions
            .iter()
            .filter(|a| a["action"] == "user_typing")
            .cloned()
            .collect()
    }

    fn dump(&self) -> String {
        format!(
            "posts: {:#?}\nactions: {:#?}",
            self.posts(),
            self.state.actions.lock().unwrap()
        )
    }
}

/// One socket: the challenge, `hello`, then what the test pushes, recording the client.
async fn serve_socket(
    state: Arc<State>,
    mut socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) {
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
    let hello = json!({"event": "hello", "data": {"server_version": "10.5.0"},
                       "broadcast": {"user_id": BOT}, "seq": 0});
    for frame in [ok, hello] {
        if socket.send(Message::text(frame.to_string())).await.is_err() {
            return;
        }
    }
    let (tx, mut pushed) = mpsc::unbounded_channel();
    *state.socket.lock().unwrap() = Some(tx);
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
struct Post {
    event: &'static str,
    id: String,
    user: String,
    channel: String,
    root: String,
    message: String,
    kind: String,
    props: Value,
    channel_type: &'static str,
    mentions: Vec<String>,
}

impl Post {
    /// A channel post by `user` mentioning the bot.
    fn mention(id: &str, user: &str, message: &str) -> Self {
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
    fn direct(id: &str, user: &str, message: &str) -> Self {
        Self {
            channel: "d1".into(),
            channel_type: "D",
            mentions: Vec::new(),
            ..Self::mention(id, user, message)
        }
    }

    fn in_thread(mut self, root: &str) -> Self {
        self.root = root.into();
        self
    }
}

fn wait(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A reply streamed word by word, slowly enough to be posted and then edited.
fn streamed(text: &str) -> Reply {
    Reply::text(text).delay_between_events(Duration::from_millis(120))
}

#[test]
fn a_mention_reaches_the_model_and_the_reply_streams_into_its_thread() {
    let chat = Chat::start();
    let mut served = chat.serve();
    let answer = "The build broke in parse_config because a comma is missing there.";
    served.mock.push(streamed(answer));
    chat.post(&Post::mention("p1", "u1", "@tern why did the build break?"));

    let (id, body) = chat.wait_shown("c1", answer);
    assert_eq!(body["root_id"], "p1", "the reply is in the post's thread");
    let patches = chat.patches(&id);
    assert!(
        !patches.is_empty() && body["message"] != answer,
        "posted while streaming, then patched: {}",
        chat.dump()
    );
    let request = &served.mock.model_requests()[0];
    let texts = request.texts();
    assert!(
        texts.iter().any(|t| t.contains("why did the build break?")),
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("@tern why")),
        "the mention is taken out: {texts:?}"
    );
    // The typing indicator, in that thread, while the turn worked.
    let typing = chat.typing();
    assert!(!typing.is_empty(), "{}", chat.dump());
    assert_eq!(typing[0]["data"]["channel_id"], "c1");
    assert_eq!(typing[0]["data"]["parent_id"], "p1");
    assert!(typing[0]["seq"].as_u64().unwrap() > 1);

    // A reply in that thread needs no mention: tern talks there.
    served.mock.push(Reply::text("Yes, the tests pass."));
    chat.post(&Post::mention("p2", "u1", "and the tests?").in_thread("p1"));
    let (_, body) = chat.wait_shown("c1", "Yes, the tests pass.");
    assert_eq!(body["root_id"], "p1");
    assert_eq!(served.mock.model_requests().len(), 2);

    let status = text(&served.tern(&["channels", "status"]));
    assert!(status.contains("mattermost: connected"), "{status}");
    assert!(status.contains("as @tern on http://127.0.0.1"), "{status}");
    assert!(status.contains("2 inputs"), "{status}");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_direct_message_needs_no_mention_and_strangers_bots_and_itself_start_nothing() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::text("Hello from tern."));

    // None of these may reach the model.
    chat.post(&Post::direct("x1", "u9", "a stranger's direct message"));
    chat.post(&Post::mention("x2", BOT, "@tern my own post"));
    chat.post(&Post {
        props: json!({"from_bot": "true"}),
        ..Post::mention("x3", "u1", "@tern another bot's post")
    });
    chat.post(&Post {
        kind: "system_join_channel".into(),
        ..Post::mention("x4", "u1", "@tern joined the channel")
    });
    chat.post(&Post {
        mentions: Vec::new(),
        ..Post::mention("x5", "u1", "talking among people")
    });
    chat.post(&Post {
        channel: "c2".into(),
        ..Post::mention("x6", "u1", "@tern in a channel not allowed")
    });
    chat.post(&Post {
        event: "post_edited",
        ..Post::mention("x7", "u1", "@tern an edit")
    });
    // Then a direct message from the allowed user, without a mention.
    chat.post(&Post::direct("d-1", "u1", "hello there"));

    let (_, body) = chat.wait_shown("d1", "Hello from tern.");
    assert_eq!(body["root_id"], "d-1");
    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 1, "{}", chat.dump());
    let texts = requests[0].texts().join("\n");
    assert!(texts.contains("hello there"), "{texts}");
    for ignored in [
        "stranger",
        "my own post",
        "another bot",
        "joined",
        "among people",
        "not allowed",
        "an edit",
    ] {
        assert!(!texts.contains(ignored), "{ignored} got in: {texts}");
    }
    assert_eq!(chat.posts().len(), 1, "{}", chat.dump());
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_dropped_socket_is_opened_again_and_replayed_posts_count_once() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::text("First answer."));
    chat.post(&Post::mention("p1", "u1", "@tern first"));
    chat.wait_shown("c1", "First answer.");

    chat.push(Push::Drop);
    chat.wait_logins(2);
    let challenges = chat
        .state
        .actions
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "authentication_challenge" && a["data"]["token"] == TOKEN)
        .count();
    assert_eq!(challenges, 2, "authenticated again");
    // The server replays the first post; then a new one.
    served.mock.push(Reply::text("Second answer."));
    chat.post(&Post::mention("p1", "u1", "@tern first"));
    chat.post(&Post::mention("p3", "u1", "@tern second"));
    let (_, body) = chat.wait_shown("c1", "Second answer.");
    assert_eq!(body["root_id"], "p3");
    let requests = served.mock.model_requests();
    assert_eq!(requests.len(), 2, "the replay started nothing");
    assert!(requests[1].texts().iter().any(|t| t.contains("second")));
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_refused_token_stops_the_channel_with_what_to_fix() {
    let chat = Chat::start();
    let served = Served::start(&chat.config(), &[("MATTERMOST_TOKEN", "wrong")]);
    served.wait_said("mattermost: stopped", WITHIN);
    let status = text(&served.tern(&["channels", "status"]));
    assert!(status.contains("mattermost: stopped"), "{status}");
    assert!(
        status.contains("refused the token in MATTERMOST_TOKEN"),
        "{status}"
    );
    assert!(status.contains("401"), "{status}");
    assert!(
        !status.contains("wrong"),
        "the token is never shown: {status}"
    );
    // Not tried again.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(chat.fake.to("/api/v4/users/me").len(), 1);
    assert_eq!(chat.state.logins.load(Ordering::SeqCst), 0);

    // Taken by `users/me` but refused by the socket's challenge: stopped as well.
    let revoked = Chat::start();
    revoked.state.refuse_socket.store(true, Ordering::SeqCst);
    let served = Served::start(&revoked.config(), &[("MATTERMOST_TOKEN", TOKEN)]);
    served.wait_said("mattermost: stopped", WITHIN);
    let status = text(&served.tern(&["channels", "status"]));
    assert!(
        status.contains("refused the token in MATTERMOST_TOKEN on its WebSocket (bad token)"),
        "{status}"
    );

    let unset = Served::start(&chat.config(), &[]);
    unset.wait_said("mattermost: stopped", WITHIN);
    let status = text(&unset.tern(&["channels", "status"]));
    assert!(status.contains("MATTERMOST_TOKEN is not set"), "{status}");
}

#[test]
fn a_thumbs_up_from_an_allowed_user_approves_and_anyone_elses_answers_nothing() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch ran-after-approval"}),
    ));
    served.mock.push(Reply::text("Done, the file is there."));
    served.mock.push(Reply::text("Noted."));
    chat.post(&Post::direct("d-1", "u1", "make the file"));

    let mut question = None;
    wait(WITHIN, "the approval question", || {
        question = chat.posts().into_iter().find(|(_, body)| {
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("Approve `shell_execute`"))
        });
        question.is_some()
    });
    let (question, body) = question.unwrap();
    assert_eq!(body["root_id"], "d-1");
    assert!(body["message"].as_str().unwrap().contains(":+1:"), "{body}");
    let marker = served.home.project().join("ran-after-approval");

    // Someone not allowed: told so, once; nothing runs.
    chat.react("u9", &question, "+1");
    chat.react("u9", &question, "+1");
    wait(WITHIN, "the note to the stranger", || {
        chat.posts().iter().any(|(_, body)| {
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("your reaction does not count"))
        })
    });
    // Chat text does not approve either.
    chat.post(&Post::direct("d-2", "u1", "yes, approve it").in_thread("d-1"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "ran without approval");
    assert_eq!(served.mock.model_requests().len(), 1);

    chat.react("u1", &question, "+1");
    wait(WITHIN, "the question settled", || {
        chat.shown(&question).contains("Approved once")
    });
    assert!(
        chat.shown(&question).contains("Approve `shell_execute`"),
        "the question stays above its answer: {}",
        chat.shown(&question)
    );
    chat.wait_shown("d1", "Done, the file is there.");
    assert!(marker.exists(), "the approved call ran");
    let notes = chat
        .posts()
        .iter()
        .filter(|(_, b)| {
            b["message"]
                .as_str()
                .unwrap_or_default()
                .contains("does not count")
        })
        .count();
    assert_eq!(notes, 1, "told once");
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_429_on_an_edit_waits_and_the_final_text_still_arrives() {
    let chat = Chat::start();
    let mut served = chat.serve();
    chat.state.refuse_patches.store(2, Ordering::SeqCst);
    let answer = "Every word of this answer arrives in the end despite the rate limit.";
    served.mock.push(streamed(answer));
    chat.post(&Post::mention("p1", "u1", "@tern go"));
    let (id, _) = chat.wait_shown("c1", answer);
    assert_eq!(
        chat.state.refused.load(Ordering::SeqCst),
        2,
        "{}",
        chat.dump()
    );
    assert_eq!(chat.patches(&id).last().map(String::as_str), Some(answer));
    assert!(served.stop().success(), "{}", served.stderr());
}

#[test]
fn a_thumbs_down_denies_the_call_naming_who_denied_it() {
    let chat = Chat::start();
    let mut served = chat.serve();
    served.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch never-made"}),
    ));
    served.mock.push(Reply::text("Understood, I left it."));
    chat.post(&Post::mention("p1", "u1", "@tern make the file"));
    let mut question = None;
    wait(WITHIN, "the approval question", || {
        question = chat
            .posts()
            .into_iter()
            .find(|(_, body)| body["message"].as_str().is_some_and(|m| m.contains(":-1:")));
        question.is_some()
    });
    let (question, _) = question.unwrap();
    chat.react("u1", &question, "-1");
    wait(WITHIN, "the question settled", || {
        chat.shown(&question)
            .contains("❌ Denied: denied in Mattermost by @u1")
    });
    chat.wait_shown("c1", "Understood, I left it.");
    assert!(!served.home.project().join("never-made").exists());
    assert!(served.stop().success(), "{}", served.stderr());
}
