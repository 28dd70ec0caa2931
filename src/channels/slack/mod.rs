//! Slack over Socket Mode: a WebSocket the app opens with its app token (no public URL),
//! every envelope acknowledged at once and handled after; a fresh URL for every new
//! connection, asked again on every disconnect but `link_disabled`; messages from the people
//! and channels allowed become inputs under `slack:<team>/<channel>/<thread_ts>`, replies are
//! posted in the thread and streamed by `chat.update`, approvals are buttons.

mod api;
pub mod events;

use super::Start;
use super::deliver::{Conversations, Inbound};
use super::pace::{Pace, Paces};
use super::recent::Recent;
use super::status::{ChannelState, Status};
use crate::config::SlackSettings;
use crate::domain::{Answer, ApprovalMode, Audience, InputKind, Sender};
use api::{Api, CallError, Place};
use events::{Frame, Me, SEEN_MAX};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as Ws;
use tokio_util::sync::CancellationToken;

/// How often the socket is pinged.
const PING_EVERY: Duration = Duration::from_secs(10);
/// A socket that said nothing for this long is taken for dead.
const DEAD_AFTER: Duration = Duration::from_secs(30);
/// A connection that lasted this long was a working one: the next waits no longer.
const STEADY: Duration = Duration::from_secs(10);
/// Longest wait between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Runs the Slack channel until `stop`.
pub async fn run(settings: SlackSettings, start: Start) {
    let Start {
        default_dir,
        status,
        stop,
        ..
    } = start.clone();
    let (Some(app_token), Some(bot_token)) = (
        start.token(&settings.app_token),
        start.token(&settings.bot_token),
    ) else {
        return;
    };
    let api = Api::new(&settings.api_url, &bot_token, &app_token);
    let Some(me) = whoami(&api, &status, &stop).await else {
        return;
    };
    let conversations = Conversations::new(
        &start,
        api.clone(),
        // `chat.update` is counted per workspace, about 50 a minute; new messages apart,
        // several hundred a minute (and about one a second per channel).
        Paces {
            posts: Arc::new(Pace::new(10, 300)),
            edits: Arc::new(Pace::new(20, 50)),
        },
        settings.access.edit_interval,
    );
    let mut slack = Slack {
        project_dir: settings.access.project_dir.clone().unwrap_or(default_dir),
        settings,
        api,
        me,
        conversations,
        status: status.clone(),
        stop: stop.clone(),
        events: Recent::new(SEEN_MAX),
        messages: Recent::new(SEEN_MAX),
    };
    slack.connect_again_and_again().await;
}

/// `auth.test`, tried until it answers; `None` when the token is refused or tern stops.
async fn whoami(api: &Api, status: &Status, stop: &CancellationToken) -> Option<Me> {
    let mut backoff = Duration::from_secs(1);
    loop {
        match api.whoami().await {
            Ok(me) => return Some(me),
            Err(CallError::Fatal(err) | CallError::Failed(err)) => {
                status.set(ChannelState::Stopped, err);
                return None;
            }
            Err(CallError::Later(wait)) => {
                status.set(
                    ChannelState::Reconnecting,
                    "Slack does not answer auth.test yet",
                );
                if !pause(stop, wait.max(backoff)).await {
                    return None;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Sleeps `wait`; false when tern stops meanwhile.
async fn pause(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => true,
        () = stop.cancelled() => false,
    }
}

/// How a connection ended.
enum Ended {
    /// Slack asked for a new connection: made at once.
    Asked,
    /// The connection failed: connect again with a fresh URL.
    Again,
    /// Slack switched Socket Mode off, or tern stops: no more connections.
    Done,
}

struct Slack {
    settings: SlackSettings,
    project_dir: PathBuf,
    api: Api,
    me: Me,
    conversations: Conversations<Api>,
    status: Status,
    stop: CancellationToken,
    /// Event ids handled (Slack retries an envelope it thinks was missed).
    events: Recent,
    /// Messages handled, by channel and ts.
    messages: Recent,
}

impl Slack {
    async fn connect_again_and_again(&mut self) {
        let mut backoff = Duration::from_secs(1);
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            let url = match self.api.socket_url().await {
                Ok(url) => url,
                Err(CallError::Fatal(err)) => return self.status.set(ChannelState::Stopped, err),
                Err(CallError::Later(_) | CallError::Failed(_)) => {
                    self.status.set(
                        ChannelState::Reconnecting,
                        "apps.connections.open did not answer",
                    );
                    if !pause(&self.stop, backoff).await {
                        break;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            // Frames are small and answered at once: no waiting to gather them (Nagle).
            match tokio_tungstenite::connect_async_with_config(url.as_str(), None, true).await {
                Ok((socket, _)) => {
                    let began = Instant::now();
                    let ended = self.connection(socket).await;
                    if let Ended::Done = ended {
                        return;
                    }
                    self.status.set(
                        ChannelState::Reconnecting,
                        "connecting again with a fresh URL",
                    );
                    // A connection that ends at once is not tried again at once.
                    if matches!(ended, Ended::Again) && began.elapsed() < STEADY {
                        if !pause(&self.stop, backoff).await {
                            break;
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    } else {
                        backoff = Duration::from_secs(1);
                    }
                }
                Err(err) => {
                    self.status
                        .error(format!("the Socket Mode connection failed: {err}"));
                    if !pause(&self.stop, backoff).await {
                        break;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        self.status.set(ChannelState::Stopped, "stopped");
    }

    async fn connection<S>(&mut self, mut socket: tokio_tungstenite::WebSocketStream<S>) -> Ended
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut heard = Instant::now();
        loop {
            let frame = tokio::select! {
                () = self.stop.cancelled() => {
                    let _ = socket.close(None).await;
                    self.status.set(ChannelState::Stopped, "stopped");
                    return Ended::Done;
                }
                _ = ping.tick() => {
                    if heard.elapsed() > DEAD_AFTER {
                        self.status.error("the socket went quiet; connecting again");
                        return Ended::Again;
                    }
                    let _ = socket.send(Ws::Ping(Vec::new().into())).await;
                    continue;
                }
                frame = socket.next() => frame,
            };
            let text = match frame {
                Some(Ok(Ws::Text(text))) => text,
                Some(Ok(Ws::Close(_))) | None => return Ended::Again,
                Some(Err(err)) => {
                    self.status.error(format!("the socket failed: {err}"));
                    return Ended::Again;
                }
                Some(Ok(_)) => {
                    heard = Instant::now();
                    continue;
                }
            };
            heard = Instant::now();
            self.status.heard();
            match events::frame(&text) {
                Some(Frame::Hello) => self.status.set(
                    ChannelState::Connected,
                    format!("workspace {} as @{}", self.me.team, self.me.name),
                ),
                Some(Frame::Disconnect { reason }) if events::final_disconnect(&reason) => {
                    self.status.set(
                        ChannelState::Stopped,
                        "Socket Mode was switched off for the app (link_disabled); switch it \
                         on in the app's settings and start tern again",
                    );
                    return Ended::Done;
                }
                Some(Frame::Disconnect { .. }) => return Ended::Asked,
                Some(Frame::Envelope { id, kind, payload }) => {
                    // Acknowledged before anything is done, well within Slack's 3 s.
                    let ack = serde_json::json!({ "envelope_id": id }).to_string();
                    if socket.send(Ws::Text(ack.into())).await.is_err() {
                        return Ended::Again;
                    }
                    self.envelope(&kind, &payload);
                }
                Some(Frame::Other) | None => {}
            }
        }
    }

    fn envelope(&mut self, kind: &str, payload: &Value) {
        match kind {
            "events_api" => {
                let event_id = payload.get("event_id").and_then(Value::as_str);
                if event_id.is_some_and(|id| !self.events.insert(id)) {
                    return;
                }
                self.message(payload);
            }
            "interactive" => {
                if let Some(click) = events::click(payload) {
                    self.click(click);
                }
            }
            _ => {}
        }
    }

    fn message(&mut self, payload: &Value) {
        let conversations = &self.conversations;
        let decided = events::message(
            payload,
            &self.me,
            &self.settings.access,
            &mut self.messages,
            |key| conversations.active(key),
        );
        let message = match decided {
            Ok(message) => message,
            Err(skip) => {
                tracing::debug!(?skip, "a Slack event is not an input");
                return;
            }
        };
        let inbound = Inbound {
            key: message.key,
            place: Place {
                channel: message.channel,
                thread_ts: message.thread_ts,
            },
            sender: Sender {
                id: message.user.clone(),
                name: message.user,
                automated: false,
                trusted: message.audience >= Audience::Team,
            },
            audience: message.audience,
            kind: InputKind::Person,
            text: message.text,
            project_dir: self.project_dir.clone(),
            approval: ApprovalMode::Ask,
        };
        self.conversations.hand(inbound);
    }

    fn click(&self, click: events::Click) {
        let place = Place {
            channel: click.channel.clone(),
            thread_ts: click.thread_ts.clone().unwrap_or(click.message_ts.clone()),
        };
        let allowed = self.settings.access.allow_users.contains(&click.user);
        let (api, conversations) = (self.api.clone(), self.conversations.clone());
        tokio::spawn(async move {
            if !allowed {
                let note = "Only the people this tern is set up for may answer its questions.";
                let _ = api.ephemeral(&place, &click.user, note).await;
                return;
            }
            let answer = if click.approve {
                Answer::Once
            } else {
                Answer::Deny {
                    reason: Some(format!("denied in Slack by <@{}>", click.user)),
                }
            };
            if let Err(err) = conversations.answer(&click.token, answer).await {
                let _ = api.ephemeral(&place, &click.user, &err.to_string()).await;
            }
        });
    }
}
