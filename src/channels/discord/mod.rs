//! Discord: a bot on the Gateway takes messages in, the REST API posts replies. A mention
//! in a listed channel starts a thread from the message, and that thread is one session
//! (`discord:<channel>/<thread>`); a DM from a listed person is their own session. Replies
//! stream as edits, approvals are Approve and Deny buttons that only the listed people can
//! press; chat text never approves anything.
//!
//! `gateway.rs` keeps the connection, `rest.rs` speaks the REST API and posts for
//! [`Conversations`], `inbound.rs` decides which messages are inputs.

mod capped;
mod gateway;
mod inbound;
mod rest;

use super::Start;
use super::deliver::{Conversations, Inbound, PostError};
use super::pace::{Pace, Paces};
use super::recent::Recent;
use super::status::Status;
use crate::config::{ChatAccess, DiscordSettings};
use crate::domain::{Answer, ApprovalMode, InputKind, Sender};
use capped::Capped;
use gateway::Gateway;
use inbound::{Message, Room, SEEN_MAX, Verdict};
use rest::{Choice, Rest};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a channel's worker waits for another message before it lets the channel go.
const WORKER_IDLE: Duration = Duration::from_secs(60);
/// Tries of a call a message needs (a thread started, a channel looked up) through 429s.
const TRIES: u32 = 3;
/// Longest wait between those tries.
const LONGEST_TRY_WAIT: Duration = Duration::from_secs(10);
/// Channels remembered as threads or not at most; forgotten all at once past it.
const ROOMS_MAX: usize = 50_000;
/// Threads remembered as tern's at most; the one made tern's longest ago is forgotten past
/// it (a message there then needs a mention again).
const TALKING_MAX: usize = 10_000;
/// How long a click waits for its answer to land before it is acknowledged without one.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// What a click from someone not listed is told.
const NOT_YOURS: &str = "Only the people this tern is set up for may answer";

/// Runs the Discord channel until `stop`.
pub async fn run(settings: DiscordSettings, start: Start) {
    let Start {
        default_dir,
        status,
        stop,
        ..
    } = start.clone();
    let Some(token) = start.token(&settings.token) else {
        return;
    };
    // Five at once, five a second after: within Discord's per-channel message limits and
    // far below its global 50 a second.
    let pace = Arc::new(Pace::new(5, 300));
    let rest = Rest::new(&settings.api_url, &token, &settings.token.var, pace.clone());
    let conversations = Conversations::new(
        &start,
        rest,
        Paces {
            posts: pace.clone(),
            edits: pace,
        },
        settings.access.edit_interval,
    );
    let project_dir = settings.access.project_dir.clone().unwrap_or(default_dir);
    let adapter = Arc::new(Adapter {
        conversations: conversations.clone(),
        access: settings.access,
        project_dir,
        status: status.clone(),
        stop: stop.clone(),
        state: Mutex::new(State::new()),
    });
    let mut gateway = Gateway::new(
        conversations.poster(),
        &token,
        &settings.token.var,
        status,
        stop,
    );
    let dispatch = |name: &str, d: &Value| adapter.on_dispatch(name, d);
    gateway.run(&dispatch).await;
}

/// What the adapter knows while it runs.
struct State {
    /// The bot's own user id, from READY.
    me: Option<String>,
    /// Server channels known: a thread's parent, or `None` for a channel that is not one.
    rooms: HashMap<String, Option<String>>,
    /// Threads tern talks in: started by it, or delivered from; bounded, and taken out when
    /// Discord deletes the thread.
    talking: Capped<()>,
    /// Message ids taken (a resume may replay them).
    seen: Recent,
    /// One worker per channel, taking its messages in order.
    workers: HashMap<String, mpsc::UnboundedSender<Message>>,
}

impl State {
    fn new() -> Self {
        Self {
            me: None,
            rooms: HashMap::new(),
            talking: Capped::new(TALKING_MAX),
            seen: Recent::new(SEEN_MAX),
            workers: HashMap::new(),
        }
    }

    /// A thread created or changed (`d` its channel object): remembered, and tern's when
    /// the bot owns it.
    fn on_thread(&mut self, d: &Value) {
        let Some(id) = d["id"].as_str() else {
            return;
        };
        remember(self, id, rest::thread_parent_of(d));
        let ours = self.me.as_deref().is_some_and(|me| d["owner_id"] == me);
        if ours {
            self.talking.insert(id, ());
        }
    }

    /// A thread deleted: forgotten.
    fn on_thread_deleted(&mut self, id: &str) {
        self.rooms.remove(id);
        self.talking.remove(id);
    }
}

/// The channel's inbound side.
struct Adapter {
    conversations: Conversations<Rest>,
    access: ChatAccess,
    project_dir: PathBuf,
    status: Status,
    stop: CancellationToken,
    state: Mutex<State>,
}

impl Adapter {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn rest(&self) -> &Rest {
        self.conversations.poster()
    }

    /// One dispatch from the gateway; never waits.
    fn on_dispatch(self: &Arc<Self>, name: &str, d: &Value) {
        match name {
            "READY" => {
                self.state().me = d["user"]["id"].as_str().map(str::to_owned);
            }
            "GUILD_CREATE" => {
                let mut state = self.state();
                for thread in d["threads"].as_array().into_iter().flatten() {
                    if let Some(id) = thread["id"].as_str() {
                        let parent = thread["parent_id"].as_str().map(str::to_owned);
                        remember(&mut state, id, parent);
                    }
                }
            }
            "THREAD_CREATE" | "THREAD_UPDATE" => self.state().on_thread(d),
            "THREAD_DELETE" => {
                if let Some(id) = d["id"].as_str() {
                    self.state().on_thread_deleted(id);
                }
            }
            "MESSAGE_CREATE" => {
                let Some(message) = Message::parse(d) else {
                    return;
                };
                if !self.state().seen.insert(&message.id) {
                    return;
                }
                self.queue(message);
            }
            "INTERACTION_CREATE" if d["type"].as_u64() == Some(3) => {
                tokio::spawn(self.clone().on_click(d.clone()));
            }
            _ => {}
        }
    }

    /// Hands `message` to its channel's worker, starting one when there is none.
    fn queue(self: &Arc<Self>, message: Message) {
        let channel = message.channel_id.clone();
        let mut state = self.state();
        let unsent = match state.workers.get(&channel) {
            Some(worker) => worker.send(message).err().map(|back| back.0),
            None => Some(message),
        };
        if let Some(message) = unsent {
            let (worker, inbox) = mpsc::unbounded_channel();
            let _ = worker.send(message);
            state.workers.insert(channel.clone(), worker);
            tokio::spawn(self.clone().work(channel, inbox));
        }
    }

    /// One channel's worker: its messages one after the other, so a thread's inputs keep
    /// their order.
    async fn work(self: Arc<Self>, channel: String, mut inbox: mpsc::UnboundedReceiver<Message>) {
        loop {
            let next = tokio::select! {
                () = self.stop.cancelled() => break,
                next = tokio::time::timeout(WORKER_IDLE, inbox.recv()) => next,
            };
            match next {
                Ok(Some(message)) => self.take(message).await,
                Ok(None) => break,
                Err(_) => {
                    let mut state = self.state();
                    if inbox.is_empty() {
                        state.workers.remove(&channel);
                        return;
                    }
                }
            }
        }
        self.state().workers.remove(&channel);
    }

    /// Turns `message` into an input when the rules let it in.
    async fn take(&self, message: Message) {
        let (me, known, talking) = {
            let state = self.state();
            let known = state.rooms.get(&message.channel_id).cloned();
            let talking = state.talking.contains(&message.channel_id);
            (state.me.clone(), known, talking)
        };
        let Some(me) = me else {
            return;
        };
        let room = inbound::room_of(&self.access, &message, known.as_ref().map(Option::as_deref));
        let mut verdict = inbound::judge(&self.access, &me, &message, &room, talking);
        if verdict == Verdict::Lookup {
            let channel = message.channel_id.clone();
            let looked = self
                .until_done(|| self.rest().thread_parent(&channel))
                .await;
            let Some(parent) = looked else {
                return;
            };
            remember(&mut self.state(), &channel, parent.clone());
            let room = match parent {
                Some(parent) => Room::Thread { parent },
                None => Room::Other,
            };
            verdict = inbound::judge(&self.access, &me, &message, &room, talking);
        }
        let Verdict::Deliver(mut delivery) = verdict else {
            return;
        };
        let text = inbound::strip_mention(&message.content, &me);
        if text.is_empty() {
            return;
        }
        if delivery.start_thread {
            let name = inbound::thread_name(&text);
            let (channel, id) = (&message.channel_id, &message.id);
            match self
                .until_done(|| self.rest().start_thread(channel, id, &name))
                .await
            {
                Some(thread) => {
                    remember(&mut self.state(), &thread, Some(channel.clone()));
                    delivery.key = format!("discord:{channel}/{thread}");
                    delivery.place = thread;
                }
                // No thread (no permission there): the replies go to the channel itself.
                None => delivery.place = channel.clone(),
            }
        }
        if message.guild_id.is_some() {
            self.state().talking.insert(&delivery.place, ());
        }
        let inbound = Inbound {
            key: delivery.key,
            place: delivery.place,
            sender: Sender {
                id: message.author_id,
                name: message.author_name,
                automated: false,
                trusted: delivery.trusted,
            },
            audience: delivery.audience,
            kind: InputKind::Person,
            text,
            project_dir: self.project_dir.clone(),
            approval: ApprovalMode::Ask,
        };
        if let Err(err) = self.conversations.deliver(inbound).await {
            self.status.error(format!(
                "a Discord message did not reach its session: {err}"
            ));
        }
    }

    /// Runs `call` through a few 429s and outages; `None` when it failed (the status says
    /// why) or tern stops.
    async fn until_done<T, F, Fut>(&self, call: F) -> Option<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, PostError>>,
    {
        for _ in 0..TRIES {
            match call().await {
                Ok(value) => return Some(value),
                Err(PostError::Failed(why)) => {
                    self.status.error(why);
                    return None;
                }
                Err(PostError::Later(wait)) => {
                    tokio::select! {
                        () = self.stop.cancelled() => return None,
                        () = tokio::time::sleep(wait.min(LONGEST_TRY_WAIT)) => {}
                    }
                }
            }
        }
        self.status
            .error("Discord kept refusing a call for now; a message was dropped");
        None
    }

    /// A button click (INTERACTION_CREATE of type 3): answered within Discord's 3 s.
    async fn on_click(self: Arc<Self>, d: Value) {
        let (Some(id), Some(token)) = (d["id"].as_str(), d["token"].as_str()) else {
            return;
        };
        let click = Click::parse(&d);
        let rest = self.rest();
        let resolved = click.custom_id.as_deref().and_then(|id| rest.resolve(id));
        let body = match (resolved, &click.user) {
            (Some((choice, ask)), Some(user)) if self.access.allow_users.contains(user) => {
                self.decide(&click, user, choice, ask).await
            }
            (Some(_), _) => ephemeral(NOT_YOURS),
            (None, _) => ephemeral("This button is not one of tern's questions"),
        };
        if let Err(err) = rest.callback(id, token, &body).await {
            self.status
                .error(format!("a button click was not answered: {err:?}"));
        }
    }

    /// Answers the question a listed person's click names; the callback that shows it.
    async fn decide(&self, click: &Click, user: &str, choice: Choice, ask: String) -> Value {
        let (answer, shown) = match choice {
            Choice::Approve => (Answer::Once, format!("✅ Approved by <@{user}>")),
            Choice::Deny => (
                Answer::Deny {
                    reason: Some(format!("denied in Discord by {}", click.name)),
                },
                format!("❌ Denied by <@{user}>"),
            ),
        };
        let rest = self.rest();
        // The click's update takes the buttons away: nothing left to settle after it.
        if let Some(message) = &click.message {
            rest.clicked(message, true);
        }
        let conversations = self.conversations.clone();
        let answering = tokio::spawn(async move { conversations.answer(&ask, answer).await });
        let landed = tokio::time::timeout(ANSWER_WITHIN, answering).await;
        let body = match landed {
            Ok(Ok(Ok(()))) => {
                return json!({
                    "type": 7,
                    "data": {
                        "content": shown,
                        "components": [],
                        "allowed_mentions": { "parse": [] },
                    },
                });
            }
            Ok(Ok(Err(err))) => ephemeral(&format!("Not answered: {err}")),
            Ok(Err(_)) => ephemeral("Not answered: tern is stopping"),
            // Still under way: acknowledged; the message is settled when it lands.
            Err(_) => json!({ "type": 6 }),
        };
        if let Some(message) = &click.message {
            rest.clicked(message, false);
        }
        body
    }
}

/// A click as the adapter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Click {
    custom_id: Option<String>,
    /// The clicker's id: `member.user` in a server, `user` in a DM.
    user: Option<String>,
    name: String,
    /// The question's message.
    message: Option<String>,
}

impl Click {
    fn parse(d: &Value) -> Self {
        let user = if d["member"]["user"].is_object() {
            &d["member"]["user"]
        } else {
            &d["user"]
        };
        let id = user["id"].as_str().map(str::to_owned);
        let name = user["global_name"]
            .as_str()
            .or_else(|| user["username"].as_str())
            .or(id.as_deref())
            .unwrap_or("someone")
            .to_owned();
        Self {
            custom_id: d["data"]["custom_id"].as_str().map(str::to_owned),
            user: id,
            name,
            message: d["message"]["id"].as_str().map(str::to_owned),
        }
    }
}

/// A reply to a click only the clicker sees.
fn ephemeral(text: &str) -> Value {
    json!({ "type": 4, "data": { "content": text, "flags": 64 } })
}

/// Remembers whether `channel` is a thread, and under which channel.
fn remember(state: &mut State, channel: &str, parent: Option<String>) {
    if state.rooms.len() >= ROOMS_MAX {
        state.rooms.clear();
    }
    state.rooms.insert(channel.to_owned(), parent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clicker_is_the_member_in_a_server_and_the_user_in_a_dm() {
        let in_server = json!({
            "id": "1", "token": "t", "type": 3,
            "data": {"custom_id": "approve:x"},
            "member": {"user": {"id": "111", "username": "jane", "global_name": "Jane"}},
            "message": {"id": "m1"},
        });
        assert_eq!(
            Click::parse(&in_server),
            Click {
                custom_id: Some("approve:x".into()),
                user: Some("111".into()),
                name: "Jane".into(),
                message: Some("m1".into()),
            }
        );
        let in_dm = json!({"user": {"id": "222", "username": "bob"}, "data": {}});
        let click = Click::parse(&in_dm);
        assert_eq!(click.user.as_deref(), Some("222"));
        assert_eq!(click.name, "bob");
        assert_eq!(click.custom_id, None);
        assert_eq!(Click::parse(&json!(null)).user, None);
    }

    #[test]
    fn threads_tern_talks_in_are_bounded_and_a_deleted_one_is_forgotten() {
        let mut state = State::new();
        state.me = Some("bot".into());
        let thread = |id: usize| json!({"id": id.to_string(), "type": 11, "parent_id": "c1", "owner_id": "bot"});
        for id in 0..=TALKING_MAX {
            state.on_thread(&thread(id));
        }
        assert_eq!(state.talking.len(), TALKING_MAX);
        assert!(!state.talking.contains("0"), "the oldest is forgotten");
        assert!(state.talking.contains(&TALKING_MAX.to_string()));
        state.on_thread_deleted("5");
        assert!(!state.talking.contains("5") && !state.rooms.contains_key("5"));
        assert_eq!(state.talking.len(), TALKING_MAX - 1);
        // Someone else's thread is known but not tern's.
        state.on_thread(&json!({"id": "x", "type": 11, "parent_id": "c1", "owner_id": "u1"}));
        assert!(state.rooms.contains_key("x") && !state.talking.contains("x"));
        state.on_thread(&json!({"type": 11}));
    }

    #[test]
    fn a_refusal_is_seen_by_the_clicker_alone() {
        let body = ephemeral(NOT_YOURS);
        assert_eq!(body["type"], 4);
        assert_eq!(body["data"]["flags"], 64);
    }
}
