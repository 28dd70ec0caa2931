//! From a chat thread to its session and back: what a platform's adapter implements
//! ([`Poster`]) and what it calls ([`Conversations`]). Each thread's inputs go through the
//! session service under the thread's key, and one follower per thread (`follow.rs`) turns
//! the session's events into the platform's messages. A post the platform refuses for now (a
//! 429, an outage) is tried again after the wait it names, so nothing of a reply is lost; the
//! text stands in the journal whatever happens to delivery.

use super::Start;
use super::pace::Paces;
use super::pending::Pending;
use super::status::Status;
use crate::domain::{Answer, ApprovalMode, Audience, InputKind, Sender, SessionId};
use crate::gateway::{Delivered, ServiceError, SessionService};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Why a platform call did not land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// Not now: rate limited or unreachable; try again after this long.
    Later(Duration),
    /// Refused for good (the message or channel is gone, the token lacks a scope).
    Failed(String),
}

/// A tool call waiting for a person, as a channel shows it: buttons that carry `token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub session: SessionId,
    pub call_id: String,
    pub tool: String,
    pub summary: String,
}

impl Ask {
    /// What a button carries: the session and the call, read back by [`Ask::parse_token`].
    pub fn token(&self) -> String {
        format!("{} {}", self.session, self.call_id)
    }

    /// The session and call a button's token names.
    pub fn parse_token(token: &str) -> Option<(SessionId, String)> {
        let (session, call) = token.split_once(' ')?;
        let valid = uuid::Uuid::parse_str(session).is_ok() && !call.is_empty();
        valid.then(|| (SessionId::from_string(session), call.to_owned()))
    }

    /// The question as text, for platforms and fallbacks without buttons.
    pub fn text(&self) -> String {
        format!("Approve `{}`: {}?", self.tool, self.summary)
    }
}

/// What a channel's platform does for delivery.
pub trait Poster: Send + Sync + 'static {
    /// Where a thread's messages go (a channel and thread).
    type Place: Clone + Send + Sync + 'static;
    /// A message posted, to edit later.
    type Posted: Clone + Send + Sync + 'static;

    /// Longest text a message holds, as [`Poster::measure`] counts.
    fn limit(&self) -> usize;

    /// How the platform counts a message's length.
    fn measure(&self) -> fn(&str) -> usize {
        super::split::chars
    }

    /// Whether messages can be edited (a reply streamed); without, only the finished reply
    /// is posted.
    fn edits(&self) -> bool {
        true
    }

    /// How often the platform's typing indicator must be renewed while a turn works, if it
    /// has one.
    fn typing_every(&self) -> Option<Duration> {
        None
    }

    fn post(
        &self,
        place: &Self::Place,
        text: &str,
    ) -> impl Future<Output = Result<Self::Posted, PostError>> + Send;

    fn edit(
        &self,
        place: &Self::Place,
        posted: &Self::Posted,
        text: &str,
    ) -> impl Future<Output = Result<(), PostError>> + Send;

    /// Posts an approval question with approve and deny buttons carrying [`Ask::token`].
    fn ask(
        &self,
        place: &Self::Place,
        ask: &Ask,
    ) -> impl Future<Output = Result<Self::Posted, PostError>> + Send;

    /// Replaces an answered question (buttons gone) with `text`.
    fn settle(
        &self,
        place: &Self::Place,
        posted: &Self::Posted,
        text: &str,
    ) -> impl Future<Output = Result<(), PostError>> + Send;

    /// Where the replies of the thread `key` go, read back from the key alone: how a reply
    /// a stop cut off is delivered by the next tern. `None` when the key does not say.
    fn place_of(&self, key: &str) -> Option<Self::Place>;

    /// The thread at `place` talks to `session` now; for a platform whose replies name it.
    fn bind(&self, _place: &Self::Place, _session: &SessionId) {}

    /// Shows that tern is working; best effort.
    fn typing(&self, _place: &Self::Place) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The parts of a thread key of `channel` after its `channel:` (`slack:T/C/1.2` → `T`, `C`,
/// `1.2`), for [`Poster::place_of`].
pub fn key_parts<'a>(key: &'a str, channel: &str) -> Option<Vec<&'a str>> {
    let rest = key.strip_prefix(channel)?.strip_prefix(':')?;
    Some(rest.split('/').collect())
}

/// An input from a thread.
#[derive(Debug, Clone)]
pub struct Inbound<Place> {
    /// The thread's session key (`slack:<team>/<channel>/<thread_ts>`, …).
    pub key: String,
    /// Where the replies go.
    pub place: Place,
    pub sender: Sender,
    pub audience: Audience,
    pub kind: InputKind,
    pub text: String,
    /// Where the session works.
    pub project_dir: PathBuf,
    /// How its turn treats calls that need approval: `Ask` where buttons answer.
    pub approval: ApprovalMode,
}

/// A channel's threads: the inputs sent, the replies delivered.
pub struct Conversations<P: Poster> {
    pub(super) inner: Arc<Inner<P>>,
}

impl<P: Poster> Clone for Conversations<P> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

pub(super) struct Inner<P: Poster> {
    pub service: SessionService,
    pub poster: P,
    pub status: Status,
    /// The platform's budgets for new messages and for edits.
    pub paces: Paces,
    pub edit_interval: Duration,
    /// Each thread with a follower, by key: where its inputs go.
    pub threads: Mutex<HashMap<String, mpsc::UnboundedSender<Queued<P::Place>>>>,
    pub stop: CancellationToken,
    /// Replies under way, kept for the next tern should this one stop first.
    pub pending: Arc<Pending>,
}

/// An input waiting for its thread's follower to send it, and where its acknowledgement goes.
pub(super) struct Queued<Place> {
    pub inbound: Inbound<Place>,
    pub ack: oneshot::Sender<Result<Delivered, ServiceError>>,
}

impl<P: Poster> Conversations<P> {
    /// The conversations of channel `channel`; the replies an earlier tern left undelivered
    /// in its threads are taken up at once.
    pub fn new(start: &Start, poster: P, paces: Paces, edit_interval: Duration) -> Self {
        let channel = start.status.get().name;
        let conversations = Self {
            inner: Arc::new(Inner {
                service: start.service.clone(),
                poster,
                status: start.status.clone(),
                paces,
                edit_interval,
                threads: Mutex::new(HashMap::new()),
                stop: start.stop.clone(),
                pending: start.pending.clone(),
            }),
        };
        conversations.resume(&channel);
        conversations
    }

    /// Follows again each thread of `channel` whose reply was not delivered, from where it
    /// stood.
    fn resume(&self, channel: &str) {
        for (key, entry) in self.inner.pending.of(channel) {
            let Some(place) = self.inner.poster.place_of(&key) else {
                self.inner.pending.delivered(&key);
                continue;
            };
            let (inbox, rx) = mpsc::unbounded_channel();
            self.lock().insert(key.clone(), inbox);
            let follower = super::follow::Follower::new(self.clone(), key, rx);
            tokio::spawn(follower.resume(place, entry.session, entry.from));
        }
    }

    pub fn poster(&self) -> &P {
        &self.inner.poster
    }

    pub fn service(&self) -> &SessionService {
        &self.inner.service
    }

    /// Whether the thread `key` has a conversation going in this process.
    pub fn active(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }

    pub(super) fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Queued<P::Place>>>> {
        self.inner
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `inbound` to its thread's session; answers once the session journaled it (its
    /// acknowledgement). The reply follows in the thread.
    pub async fn deliver(&self, inbound: Inbound<P::Place>) -> Result<Delivered, ServiceError> {
        self.queue(inbound).await
    }

    /// Queues `inbound` in its thread (see [`Conversations::queue`]) and lets it go: a
    /// failure to deliver it is reported on the channel's status.
    pub fn hand(&self, inbound: Inbound<P::Place>) {
        let acked = self.queue(inbound);
        let status = self.inner.status.clone();
        tokio::spawn(async move {
            if let Err(err) = acked.await {
                status.error(format!("an input was not delivered: {err}"));
            }
        });
    }

    /// [`Conversations::deliver`], queued in its thread now (so inputs of one thread keep
    /// the order they were queued in), acknowledged when the returned future is awaited.
    pub fn queue(
        &self,
        inbound: Inbound<P::Place>,
    ) -> impl Future<Output = Result<Delivered, ServiceError>> + Send + 'static {
        let (ack, acked) = oneshot::channel();
        let key = inbound.key.clone();
        let queued = Queued { inbound, ack };
        {
            let mut threads = self.lock();
            let unsent = match threads.get(&key) {
                Some(inbox) => inbox.send(queued).err().map(|back| back.0),
                None => Some(queued),
            };
            // No follower yet, or one gone without taking itself out: start one.
            if let Some(queued) = unsent {
                let (inbox, rx) = mpsc::unbounded_channel();
                let _ = inbox.send(queued);
                threads.insert(key.clone(), inbox);
                tokio::spawn(super::follow::Follower::new(self.clone(), key, rx).run());
            }
        }
        let status = self.inner.status.clone();
        async move {
            let delivered = acked.await.map_err(|_| {
                ServiceError::new("the channel stopped before the input was sent")
            })??;
            status.input();
            Ok(delivered)
        }
    }

    /// A person's click on an approval button: `token` names the call. The caller checked
    /// the clicker may answer.
    pub async fn answer(&self, token: &str, answer: Answer) -> Result<(), ServiceError> {
        let Some((session, call_id)) = Ask::parse_token(token) else {
            return Err(ServiceError::new(format!(
                "the button's value \"{token}\" names no session and call"
            )));
        };
        self.inner.service.answer(&session, &call_id, answer).await
    }
}
