//! Mattermost: one server's WebSocket in, its REST API out. tern asks `GET /api/v4/users/me`
//! who it is, opens `/api/v4/websocket`, authenticates with an `authentication_challenge`
//! and waits for `hello`; then each `posted` event that `event::admit` lets in becomes an
//! input to the session `mattermost:<channel>/<root post>`, and the reply goes into that
//! thread. Approval questions are answered by a 👍 or 👎 reaction from an allowed user; chat
//! text never approves anything. A lost or silent socket is opened again with a capped
//! backoff; a refused token stops the channel with what to fix.
//!
//! Nothing is missed across a reconnect: tern keeps the `connection_id` of the server's
//! `hello` and the `seq` of the last event heard, and opens the next socket with
//! `?connection_id=…&sequence_number=<next seq>` and its token in the `Authorization`
//! header (the server resumes only a connection authenticated by its upgrade). The server
//! then replays the events sent since, or, when it cannot, starts a fresh connection with a
//! new `hello`; posts heard twice are taken once.

mod event;
mod rest;

use self::event::{Frame, Me, Posted, Reaction};
use self::rest::{MeError, Place, Rest, lock};
use super::Start;
use super::deliver::{Conversations, Inbound};
use super::pace::{Pace, Paces};
use super::recent::Recent;
use super::status::{ChannelState, Status};
use crate::config::MattermostSettings;
use crate::domain::{Answer, ApprovalMode, InputKind, Sender};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_util::sync::CancellationToken;

/// How long a connection may take to open and to authenticate.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(30);
/// How long a closing socket is given to say goodbye when tern stops.
const CLOSE_WITHIN: Duration = Duration::from_secs(1);
/// How often the socket is pinged; a ping with nothing heard back until the next one means
/// the socket is dead.
const PING_EVERY: Duration = Duration::from_secs(30);
/// The first wait before connecting again, doubled after each failure up to [`BACKOFF_MOST`].
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MOST: Duration = Duration::from_secs(60);
/// Post ids remembered against replays, and threads remembered as tern's.
const REMEMBERED: usize = 10_000;
/// Mattermost's default budget is 10 requests a second per user with bursts of 100; tern
/// keeps to the rate with smaller bursts, which leaves room for a person using the same
/// account.
const PACE_BURST: u32 = 10;
const PACE_PER_MINUTE: u32 = 600;
/// Longest a single request may take.
const REQUEST_WITHIN: Duration = Duration::from_secs(30);

/// Runs the Mattermost channel until `stop`.
pub async fn run(settings: MattermostSettings, start: Start) {
    let Start {
        default_dir,
        status,
        stop,
        ..
    } = start.clone();
    let Some(token) = start.token(&settings.token) else {
        return;
    };
    let http = match crate::channels::http_client()
        .timeout(REQUEST_WITHIN)
        .connect_timeout(Duration::from_secs(10))
        .build()
    {
        Ok(http) => http,
        Err(err) => {
            status.set(
                ChannelState::Stopped,
                format!("could not set up HTTP for Mattermost: {err}"),
            );
            return;
        }
    };
    let rest = Rest::new(http, &settings.url, &token, &settings.token.var);
    let shared = rest.shared.clone();
    let conversations = Conversations::new(
        &start,
        rest,
        Paces::one(Pace::new(PACE_BURST, PACE_PER_MINUTE)),
        settings.access.edit_interval,
    );
    let mut adapter = Adapter {
        conversations,
        shared,
        token,
        project_dir: settings.access.project_dir.clone().unwrap_or(default_dir),
        settings,
        status: status.clone(),
        seen: Recent::new(REMEMBERED),
        threads: Recent::new(REMEMBERED),
        names: HashMap::new(),
        stream: Stream::default(),
    };
    let mut backoff = BACKOFF_FIRST;
    loop {
        match adapter.connection(&stop).await {
            Ended::Stopped => break,
            Ended::Refused(reason) => {
                status.error(reason.clone());
                status.set(ChannelState::Stopped, reason);
                return;
            }
            Ended::Lost { reason, was_up } => {
                if was_up {
                    backoff = BACKOFF_FIRST;
                }
                let wait = jitter(backoff);
                status.error(reason.clone());
                status.set(
                    ChannelState::Reconnecting,
                    format!(
                        "{reason}; connecting again in {} s",
                        wait.as_secs_f64().ceil()
                    ),
                );
                backoff = (backoff * 2).min(BACKOFF_MOST);
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.cancelled() => break,
                }
            }
        }
    }
    status.set(ChannelState::Stopped, "stopped");
}

/// `wait` give or take a fifth, so that many clients do not come back at once.
fn jitter(wait: Duration) -> Duration {
    wait.mul_f64(0.8 + fastrand::f64() * 0.4)
}

/// The WebSocket address of a server: `http` becomes `ws`, `https` becomes `wss`; with the
/// query that resumes `stream` when there is one to resume.
fn socket_url(base: &str, stream: &Stream) -> String {
    let base = base.trim_end_matches('/');
    let base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some(("http", rest)) => format!("ws://{rest}"),
        _ => base.to_owned(),
    };
    match stream.query() {
        Some(query) => format!("{base}/api/v4/websocket?{query}"),
        None => format!("{base}/api/v4/websocket"),
    }
}

/// Longest connection id taken from a `hello` (the server's ids are 26 characters).
const CONNECTION_ID_MOST: usize = 64;

/// Where the server's event stream stood when tern last heard it: what the next socket asks
/// the server to replay.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Stream {
    /// The server's id for tern's connection, from its `hello`; `None` before the first
    /// `hello`, or when the id cannot be sent back as it came.
    connection_id: Option<String>,
    /// The `seq` of the next event: one past the last heard.
    next_seq: u64,
}

impl Stream {
    /// A `hello` starts a stream: `seq` is the hello's own (0 on a fresh connection).
    fn hello(&mut self, connection_id: &str, seq: Option<u64>) {
        let sendable = !connection_id.is_empty()
            && connection_id.len() <= CONNECTION_ID_MOST
            && connection_id.bytes().all(|b| b.is_ascii_alphanumeric());
        self.connection_id = sendable.then(|| connection_id.to_owned());
        self.next_seq = seq.map_or(0, |seq| seq.saturating_add(1));
    }

    /// An event heard with `seq`.
    fn heard(&mut self, seq: u64) {
        self.next_seq = seq.saturating_add(1);
    }

    /// `connection_id=…&sequence_number=…` when there is a connection to resume.
    fn query(&self) -> Option<String> {
        let id = self.connection_id.as_deref()?;
        Some(format!(
            "connection_id={id}&sequence_number={}",
            self.next_seq
        ))
    }
}

/// How a connection ended.
enum Ended {
    /// Asked to stop.
    Stopped,
    /// The token was refused: connecting again would not help.
    Refused(String),
    /// Dropped or never made; `was_up` when it got as far as `hello`.
    Lost { reason: String, was_up: bool },
}

impl Ended {
    fn lost(reason: impl Into<String>, was_up: bool) -> Self {
        Self::Lost {
            reason: reason.into(),
            was_up,
        }
    }
}

/// Where a connection's opening stands.
#[derive(Debug, Default)]
struct Handshake {
    /// The answer to the `authentication_challenge` came. A server that took the token from
    /// the upgrade's header never answers it.
    answered: bool,
    /// Events are taken: `hello` heard, or a stream resumed.
    up: bool,
    /// Anything heard from the server on this socket (a frame or a pong).
    heard: bool,
}

/// The channel across its connections.
struct Adapter {
    settings: MattermostSettings,
    token: String,
    project_dir: PathBuf,
    status: Status,
    conversations: Conversations<Rest>,
    /// Shared with the poster: the bot's account, the socket's outbox, open questions.
    shared: Arc<rest::Shared>,
    /// Post ids taken already.
    seen: Recent,
    /// Threads tern talks in (by session key): a post there needs no mention.
    threads: Recent,
    /// People's names by user id, from their posts, for the answers they give.
    names: HashMap<String, String>,
    /// The server's event stream, resumed by the next socket.
    stream: Stream,
}

impl Adapter {
    /// One connection, from asking who tern is to the socket's end.
    async fn connection(&mut self, stop: &CancellationToken) -> Ended {
        let me = {
            let rest = self.conversations.poster();
            tokio::select! {
                () = stop.cancelled() => return Ended::Stopped,
                me = rest.me() => match me {
                    Ok(me) => me,
                    Err(MeError::Refused(reason)) => return Ended::Refused(reason),
                    Err(MeError::Unreachable(reason)) => return Ended::lost(reason, false),
                },
            }
        };
        let resuming = self.stream.connection_id.is_some();
        let url = socket_url(&self.settings.url, &self.stream);
        // Named without its query: the server's connection id is no business of the status.
        let shown = url.split('?').next().unwrap_or_default().to_owned();
        let mut request = match url.as_str().into_client_request() {
            Ok(request) => request,
            Err(err) => {
                return Ended::Refused(format!("{shown} is not a WebSocket address: {err}"));
            }
        };
        // The token on the upgrade as well: the server resumes only a connection it
        // authenticated there, and ignores the challenge then.
        if let Ok(value) = HeaderValue::from_str(&format!("Bearer {}", self.token)) {
            request.headers_mut().insert(header::AUTHORIZATION, value);
        }
        let opened = tokio::select! {
            () = stop.cancelled() => return Ended::Stopped,
            opened = tokio::time::timeout(
                HANDSHAKE_WITHIN,
                tokio_tungstenite::connect_async_with_config(request, None, true),
            ) => opened,
        };
        let mut socket = match opened {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response)))
                if response.status() == StatusCode::UNAUTHORIZED =>
            {
                return Ended::Refused(self.refused(" (401 on its upgrade)"));
            }
            Ok(Err(err)) => {
                if matches!(err, tokio_tungstenite::tungstenite::Error::Http(_)) {
                    // The server answered, but not with a socket: perhaps it would not take
                    // the id back. The next socket starts afresh rather than ask again.
                    self.stream = Stream::default();
                }
                return Ended::lost(format!("could not open {shown}: {err}"), false);
            }
            Err(_) => {
                return Ended::lost(
                    format!(
                        "{shown} did not open within {} s",
                        HANDSHAKE_WITHIN.as_secs()
                    ),
                    false,
                );
            }
        };
        let challenge = json!({
            "seq": 1,
            "action": "authentication_challenge",
            "data": { "token": self.token },
        });
        if let Err(err) = socket.send(Message::text(challenge.to_string())).await {
            return Ended::lost(format!("the socket closed at once: {err}"), false);
        }
        // A resumed stream may have nothing to replay: a ping's answer shows the server kept
        // the socket.
        if resuming && let Err(err) = socket.send(Message::Ping(Default::default())).await {
            return Ended::lost(format!("the socket closed at once: {err}"), false);
        }
        let (outbox, mut actions) = mpsc::unbounded_channel::<Value>();
        let mut seq: u64 = 1;
        // A resumed stream takes events at once: the server sends no new `hello` when it
        // can replay what was missed.
        let mut shake = Handshake {
            up: resuming,
            ..Handshake::default()
        };
        let mut announced = false;
        let handshake = tokio::time::sleep(HANDSHAKE_WITHIN);
        tokio::pin!(handshake);
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        let mut unanswered = false;
        let ended = loop {
            if shake.up && !announced {
                announced = true;
                *lock(&self.shared.socket) = Some(outbox.clone());
                self.status.set(
                    ChannelState::Connected,
                    format!("as @{} on {}", me.username, self.settings.url),
                );
            }
            let up = shake.up;
            // Up counts once the server said something: a server that drops each socket
            // at once still backs off.
            let was_up = up && shake.heard;
            let broke = |err: tokio_tungstenite::tungstenite::Error| {
                Ended::lost(format!("the socket broke: {err}"), was_up)
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => {
                    let _ = tokio::time::timeout(CLOSE_WITHIN, socket.close(None)).await;
                    break Ended::Stopped;
                }
                () = &mut handshake, if !up => {
                    let secs = HANDSHAKE_WITHIN.as_secs();
                    let reason = format!("the server did not say hello within {secs} s");
                    break Ended::lost(reason, false);
                }
                _ = ping.tick() => {
                    if unanswered {
                        let secs = PING_EVERY.as_secs();
                        let reason = format!("no answer to a ping in {secs} s");
                        break Ended::lost(reason, was_up);
                    }
                    unanswered = true;
                    if let Err(err) = socket.send(Message::Ping(Default::default())).await {
                        break broke(err);
                    }
                }
                Some(mut action) = actions.recv() => {
                    seq += 1;
                    action["seq"] = json!(seq);
                    if let Err(err) = socket.send(Message::text(action.to_string())).await {
                        break broke(err);
                    }
                }
                frame = socket.next() => {
                    let text = match frame {
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Close(_))) | None => {
                            break Ended::lost("the server closed the socket", was_up);
                        }
                        Some(Ok(_)) => {
                            self.status.heard();
                            shake.heard = true;
                            unanswered = false;
                            continue;
                        }
                        Some(Err(err)) => break broke(err),
                    };
                    self.status.heard();
                    shake.heard = true;
                    unanswered = false;
                    if let Err(ended) = self.on_text(text.as_str(), &me, &mut shake) {
                        break ended;
                    }
                }
            }
        };
        *lock(&self.shared.socket) = None;
        if resuming && !shake.heard && matches!(ended, Ended::Lost { .. }) {
            // Closed before a word: perhaps the server would not take the id back. The next
            // socket starts afresh rather than ask again.
            self.stream = Stream::default();
        }
        ended
    }

    /// What to say when the server refuses the token on its WebSocket; `said` is what it
    /// answered.
    fn refused(&self, said: &str) -> String {
        let var = &self.settings.token.var;
        format!(
            "the server at {} refused the token in {var} on its WebSocket{said}; put a valid \
             bot or personal access token in {var} and start tern again",
            self.settings.url,
        )
    }

    /// One text frame; `Err` when it ends the connection (the token refused).
    fn on_text(&mut self, text: &str, me: &Me, shake: &mut Handshake) -> Result<(), Ended> {
        let (frame, seq) = event::frame(text);
        match frame {
            Frame::Reply {
                seq_reply: 1,
                ok,
                error,
            } if !shake.answered => {
                if !ok {
                    let said = if error.is_empty() {
                        String::new()
                    } else {
                        format!(" ({error})")
                    };
                    return Err(Ended::Refused(self.refused(&said)));
                }
                shake.answered = true;
            }
            Frame::Hello { connection_id } => {
                // A fresh stream (the first socket, or a server that could not replay).
                self.stream.hello(&connection_id, seq);
                shake.up = true;
            }
            frame => {
                if let Some(seq) = seq {
                    self.stream.heard(seq);
                }
                match frame {
                    Frame::Posted(post) if shake.up => self.on_post(post, me),
                    Frame::Reaction(reaction) if shake.up => self.on_reaction(reaction, me),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// A new post: an input for its thread's session, if it is let in.
    fn on_post(&mut self, post: Posted, me: &Me) {
        if !self.seen.insert(&post.id) {
            return;
        }
        let name = post.sender_name.trim_start_matches('@');
        if !post.user_id.is_empty() && !name.is_empty() {
            if self.names.len() >= REMEMBERED && !self.names.contains_key(&post.user_id) {
                self.names.clear();
            }
            self.names.insert(post.user_id.clone(), name.to_owned());
        }
        let threads = &self.threads;
        let conversations = &self.conversations;
        let talking = |key: &str| threads.contains(key) || conversations.active(key);
        let Some(admitted) = event::admit(&post, me, &self.settings.access, talking) else {
            return;
        };
        self.threads.insert(&admitted.key);
        let inbound = Inbound {
            key: admitted.key,
            place: Place {
                channel_id: admitted.channel_id,
                root_id: admitted.root_id,
            },
            sender: Sender {
                id: post.user_id,
                name: admitted.sender_name,
                automated: false,
                trusted: admitted.trusted,
            },
            audience: admitted.audience,
            kind: InputKind::Person,
            text: admitted.text,
            project_dir: self.project_dir.clone(),
            approval: ApprovalMode::Ask,
        };
        // Queued in its thread now, so posts keep their order; the socket reads on while
        // the session takes it.
        self.conversations.hand(inbound);
    }

    /// A reaction: an answer to an approval question when an allowed user gives it.
    fn on_reaction(&mut self, reaction: Reaction, me: &Me) {
        if reaction.user_id == me.id {
            return;
        }
        let Some(approve) = event::vote(&reaction.emoji_name) else {
            return;
        };
        let allowed = self.settings.access.allow_users.contains(&reaction.user_id);
        let mut questions = lock(&self.shared.questions);
        let Some(question) = questions.get_mut(&reaction.post_id) else {
            return;
        };
        if !allowed {
            // Said once per person and question, so reactions cannot make tern spam.
            if !question.told.insert(reaction.user_id.clone()) {
                return;
            }
            let place = question.place.clone();
            let who = self.name_of(&reaction.user_id);
            let conversations = self.conversations.clone();
            tokio::spawn(async move {
                let note = format!(
                    "{who}: only the people allowed to use tern here may answer this question; \
                     your reaction does not count."
                );
                let _ = conversations.poster().note(&place, &note).await;
            });
            return;
        }
        let Some(question) = questions.remove(&reaction.post_id) else {
            return;
        };
        drop(questions);
        let answer = if approve {
            Answer::Once
        } else {
            Answer::Deny {
                reason: Some(format!(
                    "denied in Mattermost by {}",
                    self.name_of(&reaction.user_id)
                )),
            }
        };
        let conversations = self.conversations.clone();
        let status = self.status.clone();
        tokio::spawn(async move {
            if let Err(err) = conversations.answer(&question.token, answer).await {
                status.error(format!("a reaction could not answer its question: {err}"));
            }
        });
    }

    /// `@name` of a user seen posting, else their id.
    fn name_of(&self, user_id: &str) -> String {
        self.names
            .get(user_id)
            .map_or_else(|| user_id.to_owned(), |name| format!("@{name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_on_the_servers_address() {
        let fresh = Stream::default();
        assert_eq!(
            socket_url("https://chat.example.com", &fresh),
            "wss://chat.example.com/api/v4/websocket"
        );
        assert_eq!(
            socket_url("http://127.0.0.1:8065/", &fresh),
            "ws://127.0.0.1:8065/api/v4/websocket"
        );
        assert_eq!(
            socket_url("https://example.com/mattermost", &fresh),
            "wss://example.com/mattermost/api/v4/websocket"
        );
    }

    #[test]
    fn a_new_socket_asks_for_the_events_after_the_last_one_heard() {
        let mut stream = Stream::default();
        assert_eq!(stream.query(), None);
        stream.hello("abcdefghijklmnopqrstuvwxyz", Some(0));
        assert_eq!(
            stream.query().as_deref(),
            Some("connection_id=abcdefghijklmnopqrstuvwxyz&sequence_number=1")
        );
        stream.heard(1);
        stream.heard(7);
        assert_eq!(
            socket_url("https://chat.example.com", &stream),
            "wss://chat.example.com/api/v4/websocket?\
             connection_id=abcdefghijklmnopqrstuvwxyz&sequence_number=8"
        );
        // A fresh hello starts over, under its own id.
        stream.hello("n3w1d", Some(0));
        assert_eq!(
            stream.query().as_deref(),
            Some("connection_id=n3w1d&sequence_number=1")
        );
        // An id that could not be sent back as it came is not kept.
        for odd in ["", "a&b", "a b", &"x".repeat(65)] {
            stream.hello(odd, Some(0));
            assert_eq!(stream.query(), None, "{odd:?}");
        }
        stream.hello("abc", Some(u64::MAX));
        stream.heard(u64::MAX);
        assert_eq!(stream.next_seq, u64::MAX);
    }

    #[test]
    fn backoff_is_jittered_around_its_wait() {
        for _ in 0..100 {
            let wait = jitter(Duration::from_secs(10));
            assert!(wait >= Duration::from_secs(8) && wait <= Duration::from_secs(12));
        }
    }
}
