//! Mattermost: one server's WebSocket in, its REST API out. tern asks `GET /api/v4/users/me`
//! who it is, opens `/api/v4/websocket`, authenticates with an `authentication_challenge`
//! and waits for `hello`; then each `posted` event that `event::admit` lets in becomes an
//! input to the session `mattermost:<channel>/<root post>`, and the reply goes into that
//! thread. Approval questions are answered by a 👍 or 👎 reaction from an allowed user; chat
//! text never approves anything. A lost or silent socket is opened again with a capped
//! backoff; a refused token stops the channel with what to fix.

mod event;
mod lanes;
mod rest;

use self::event::{Frame, Me, Posted, Reaction};
use self::lanes::Lanes;
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
        service,
        default_dir,
        status,
        stop,
        pending,
    } = start;
    let token = match settings.token.value() {
        Ok(token) => token.to_owned(),
        Err(err) => {
            status.set(ChannelState::Stopped, err);
            return;
        }
    };
    let http = match reqwest::Client::builder()
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
        service,
        rest,
        status.clone(),
        Paces::one(Pace::new(PACE_BURST, PACE_PER_MINUTE)),
        settings.access.edit_interval,
        stop.clone(),
        pending,
    );
    let mut adapter = Adapter {
        lanes: Lanes::new(conversations.clone(), status.clone()),
        conversations,
        shared,
        token,
        project_dir: settings.access.project_dir.clone().unwrap_or(default_dir),
        settings,
        status: status.clone(),
        seen: Recent::new(REMEMBERED),
        threads: Recent::new(REMEMBERED),
        names: HashMap::new(),
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

/// The WebSocket address of a server: `http` becomes `ws`, `https` becomes `wss`.
fn socket_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some(("http", rest)) => format!("ws://{rest}"),
        _ => base.to_owned(),
    };
    format!("{base}/api/v4/websocket")
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

/// Where a connection's opening stands: the challenge answered, `hello` heard (in either
/// order).
#[derive(Debug, Default)]
struct Handshake {
    authenticated: bool,
    hello: bool,
}

impl Handshake {
    fn up(&self) -> bool {
        self.authenticated && self.hello
    }
}

/// The channel across its connections.
struct Adapter {
    settings: MattermostSettings,
    token: String,
    project_dir: PathBuf,
    status: Status,
    conversations: Conversations<Rest>,
    lanes: Arc<Lanes>,
    /// Shared with the poster: the bot's account, the socket's outbox, open questions.
    shared: Arc<rest::Shared>,
    /// Post ids taken already.
    seen: Recent,
    /// Threads tern talks in (by session key): a post there needs no mention.
    threads: Recent,
    /// People's names by user id, from their posts, for the answers they give.
    names: HashMap<String, String>,
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
        let url = socket_url(&self.settings.url);
        let opened = tokio::select! {
            () = stop.cancelled() => return Ended::Stopped,
            opened = tokio::time::timeout(
                HANDSHAKE_WITHIN,
                tokio_tungstenite::connect_async_with_config(url.as_str(), None, true),
            ) => opened,
        };
        let mut socket = match opened {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(err)) => return Ended::lost(format!("could not open {url}: {err}"), false),
            Err(_) => {
                return Ended::lost(
                    format!("{url} did not open within {} s", HANDSHAKE_WITHIN.as_secs()),
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
        let (outbox, mut actions) = mpsc::unbounded_channel::<Value>();
        let mut seq: u64 = 1;
        let mut shake = Handshake::default();
        let handshake = tokio::time::sleep(HANDSHAKE_WITHIN);
        tokio::pin!(handshake);
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        let mut unanswered = false;
        let ended = loop {
            let up = shake.up();
            let broke = |err: tokio_tungstenite::tungstenite::Error| {
                Ended::lost(format!("the socket broke: {err}"), up)
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
                        break Ended::lost(reason, up);
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
                            break Ended::lost("the server closed the socket", up);
                        }
                        Some(Ok(_)) => {
                            self.status.heard();
                            unanswered = false;
                            continue;
                        }
                        Some(Err(err)) => break broke(err),
                    };
                    self.status.heard();
                    unanswered = false;
                    if let Err(ended) = self.on_text(text.as_str(), &me, &mut shake) {
                        break ended;
                    }
                    if shake.up() && !up {
                        *lock(&self.shared.socket) = Some(outbox.clone());
                        self.status.set(
                            ChannelState::Connected,
                            format!("as @{} on {}", me.username, self.settings.url),
                        );
                    }
                }
            }
        };
        *lock(&self.shared.socket) = None;
        ended
    }

    /// One text frame; `Err` when it ends the connection (the token refused).
    fn on_text(&mut self, text: &str, me: &Me, shake: &mut Handshake) -> Result<(), Ended> {
        match event::frame(text) {
            Frame::Reply {
                seq_reply: 1,
                ok,
                error,
            } if !shake.authenticated => {
                if !ok {
                    let var = &self.settings.token.var;
                    let said = if error.is_empty() {
                        String::new()
                    } else {
                        format!(" ({error})")
                    };
                    return Err(Ended::Refused(format!(
                        "the server at {} refused the token in {var} on its WebSocket{said}; put \
                         a valid bot or personal access token in {var} and start tern again",
                        self.settings.url,
                    )));
                }
                shake.authenticated = true;
            }
            Frame::Hello => shake.hello = true,
            Frame::Posted(post) if shake.authenticated => self.on_post(post, me),
            Frame::Reaction(reaction) if shake.authenticated => self.on_reaction(reaction, me),
            _ => {}
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
        self.lanes.push(inbound);
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
        assert_eq!(
            socket_url("https://chat.example.com"),
            "wss://chat.example.com/api/v4/websocket"
        );
        assert_eq!(
            socket_url("http://127.0.0.1:8065/"),
            "ws://127.0.0.1:8065/api/v4/websocket"
        );
        assert_eq!(
            socket_url("https://example.com/mattermost"),
            "wss://example.com/mattermost/api/v4/websocket"
        );
    }

    #[test]
    fn backoff_is_jittered_around_its_wait() {
        for _ in 0..100 {
            let wait = jitter(Duration::from_secs(10));
            assert!(wait >= Duration::from_secs(8) && wait <= Duration::from_secs(12));
        }
    }
}
