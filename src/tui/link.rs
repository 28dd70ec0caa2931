//! The interface's link to its sessions, all through the [`SessionService`]: which key and
//! session it shows, the feed it follows, and the slow requests, each in a task that reports
//! back, so no keystroke waits on the store, a model or a command.
//!
//! A session is opened by subscribing to it from position 0: its journal comes first (the
//! transcript), then its live events. A feed the session dropped for falling behind is
//! resubscribed from its last position by itself; one that ended (the session went to rest)
//! is taken up again at the next message.

use super::app::AppEvent;
use super::popup::FileIndex;
use crate::channels::{ChannelState, ChannelStatus};
use crate::domain::{Answer, SessionId, SessionKey};
use crate::gateway::catalog::{JournalRecord, Overrides, SessionMeta};
use crate::gateway::remote::OWNER_LEFT;
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::{InputText, OutputFilter, UserInput};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

/// Items a feed may leave unread before the session drops it: far more than a frame's worth
/// of a fast stream.
const FEED_BACKLOG: usize = 8192;

/// What a task tells the link.
pub enum Linked {
    /// A feed of session `id`; `meta` when the session was opened (its transcript follows in
    /// the feed's replay), `None` when it was only followed or taken up again.
    Feed {
        id: SessionId,
        feed: Feed,
        meta: Option<Box<SessionMeta>>,
    },
    /// A session could not be followed.
    Failed(String),
}

/// What one item of the feed asks of the interface.
pub enum Fed {
    /// The transcript read from the journal, to go above what is shown.
    History(Vec<JournalRecord>),
    /// Records missed while the feed was away, to go after what is shown.
    Missed(Vec<JournalRecord>),
    /// A live event.
    Event(crate::session::SessionEvent),
    /// The owner left: what the round streamed is gone with its model call, asked again.
    Lost,
    Nothing,
}

pub struct Link {
    pub service: SessionService,
    pub key: SessionKey,
    pub project_dir: PathBuf,
    /// The session shown, once known.
    pub session: Option<SessionId>,
    pub feed: Option<Feed>,
    /// Set while a task is getting a feed, so two messages in a row ask once.
    linking: bool,
    /// The records of a replay being read, while an opened session's replay runs.
    replay: Option<Vec<JournalRecord>>,
    pub tx: mpsc::UnboundedSender<AppEvent>,
    linked: mpsc::UnboundedSender<Linked>,
}

impl Link {
    pub fn new(
        service: SessionService,
        key: SessionKey,
        project_dir: PathBuf,
        tx: mpsc::UnboundedSender<AppEvent>,
    ) -> (Self, mpsc::UnboundedReceiver<Linked>) {
        let (linked, news) = mpsc::unbounded_channel();
        let link = Self {
            service,
            key,
            project_dir,
            session: None,
            feed: None,
            linking: false,
            replay: None,
            tx,
            linked,
        };
        (link, news)
    }

    /// Opens stored session `id`: made the one its key talks to, its transcript and then its
    /// events fed.
    pub fn open(&mut self, id: SessionId) {
        self.feed = None;
        self.linking = true;
        let (service, linked) = (self.service.clone(), self.linked.clone());
        tokio::spawn(async move {
            let opened = async {
                let meta = service.open(&id).await?;
                let feed = service
                    .subscribe(&id, Some(0), OutputFilter::ALL, FEED_BACKLOG)
                    .await?;
                Ok::<_, crate::gateway::ServiceError>((meta, feed))
            };
            let _ = linked.send(match opened.await {
                Ok((meta, feed)) => Linked::Feed {
                    id,
                    feed,
                    meta: Some(Box::new(meta)),
                },
                Err(err) => Linked::Failed(format!("could not open session {}: {err}", id.short())),
            });
        });
    }

    /// Follows the session the key talks to from now on (starting it when needed).
    pub fn follow(&mut self) {
        if let Some(following) = self.following() {
            tokio::spawn(following.run());
        }
    }

    /// What follows the key's session, when nothing follows it yet nor is about to: to run
    /// before a request whose events must be seen.
    fn following(&mut self) -> Option<Following> {
        if self.feed.is_some() || self.linking {
            return None;
        }
        self.linking = true;
        Some(Following {
            service: self.service.clone(),
            linked: self.linked.clone(),
            key: self.key.clone(),
            dir: self.project_dir.clone(),
        })
    }

    /// Takes a task's news in; the meta of an opened session, for the status line.
    pub fn linked(&mut self, news: Linked) -> Result<Option<SessionMeta>, String> {
        self.linking = false;
        match news {
            Linked::Feed { id, feed, meta } => {
                // A feed for a session no longer shown (the person moved on) is let go.
                if meta.is_none() && self.session.as_ref().is_some_and(|shown| *shown != id) {
                    return Ok(None);
                }
                if meta.is_some() {
                    self.replay = Some(Vec::new());
                }
                self.session = Some(id);
                self.feed = Some(feed);
                Ok(meta.map(|meta| *meta))
            }
            Linked::Failed(err) => Err(err),
        }
    }

    /// What the feed's next item asks of the interface; a feed that ended is let go, one
    /// the session dropped is taken up again from where it stopped.
    pub fn fed(&mut self, item: Option<FeedItem>) -> Fed {
        match item {
            Some(FeedItem::Replay { mut records }) => match &mut self.replay {
                Some(gathered) => {
                    gathered.append(&mut records);
                    Fed::Nothing
                }
                None => Fed::Missed(records),
            },
            Some(FeedItem::Live { .. }) => match self.replay.take() {
                Some(records) => Fed::History(records),
                None => Fed::Nothing,
            },
            Some(FeedItem::Event(stamped)) => Fed::Event(stamped.event),
            Some(FeedItem::Dropped(dropped)) => {
                self.resubscribe(dropped.last_at);
                if dropped.reason == OWNER_LEFT {
                    return Fed::Lost;
                }
                tracing::warn!(reason = %dropped.reason, "the interface fell behind its session; following it again");
                Fed::Nothing
            }
            Some(FeedItem::Ended) | None => {
                self.feed = None;
                Fed::Nothing
            }
        }
    }

    /// Follows the shown session again from position `from`.
    fn resubscribe(&mut self, from: u64) {
        self.feed = None;
        let Some(id) = self.session.clone() else {
            return;
        };
        self.linking = true;
        let (service, linked) = (self.service.clone(), self.linked.clone());
        tokio::spawn(async move {
            let feed = service
                .subscribe(&id, Some(from), OutputFilter::ALL, FEED_BACKLOG)
                .await;
            let _ = linked.send(followed(feed.map(|feed| (id, feed))));
        });
    }

    /// Moves to another conversation: its key and project; the session comes with `open`.
    pub fn switch(&mut self, key: SessionKey, project_dir: PathBuf) {
        self.feed = None;
        self.linking = false;
        self.replay = None;
        self.session = None;
        self.key = key;
        self.project_dir = project_dir;
    }

    /// Sends a message to the key's session, following it first.
    pub fn send(&mut self, text: String) {
        let following = self.following();
        let (service, tx) = (self.service.clone(), self.tx.clone());
        let (key, dir) = (self.key.clone(), self.project_dir.clone());
        // Kept to give back if the send fails: the same text the session journals, shared,
        // not a copy of a paste of megabytes.
        let text = InputText::from(text);
        let kept = text.clone();
        tokio::spawn(async move {
            if let Some(following) = following {
                following.run().await;
            }
            match service
                .send(key.as_str(), &dir, UserInput::asking(text))
                .await
            {
                Ok(delivered) => {
                    if let Some((old, _)) = delivered.reset {
                        let _ = tx.send(AppEvent::Renewed {
                            old: Some(old),
                            new: delivered.session,
                        });
                    }
                }
                Err(err) => {
                    let _ = tx.send(AppEvent::NotSent {
                        text: kept.into_string(),
                        error: err.to_string(),
                    });
                }
            }
        });
    }

    /// Runs a `!` line in the project through the session service.
    pub fn shell(&self, command: String) {
        let (service, tx, dir) = (
            self.service.clone(),
            self.tx.clone(),
            self.project_dir.clone(),
        );
        tokio::spawn(async move {
            let (output, ok) = match service.shell(&dir, &command).await {
                Ok(run) => (run.output, run.ok),
                Err(err) => (err.to_string(), false),
            };
            let _ = tx.send(AppEvent::ShellDone {
                command,
                output,
                ok,
            });
        });
    }

    /// Compacts the shown session.
    pub fn compact(&mut self) {
        let following = self.following();
        let (service, tx) = (self.service.clone(), self.tx.clone());
        let (key, dir) = (self.key.clone(), self.project_dir.clone());
        tokio::spawn(async move {
            if let Some(following) = following {
                following.run().await;
            }
            let done = async {
                let id = service.open_key(key.as_str(), &dir).await?;
                service.compact(&id).await
            };
            let _ = tx.send(AppEvent::Compacted(
                done.await.map_err(|err| err.to_string()),
            ));
        });
    }

    /// Stops the shown session's turn.
    pub fn cancel(&self) {
        if let Some(id) = self.session.clone() {
            let service = self.service.clone();
            tokio::spawn(async move {
                let _ = service.cancel(&id).await;
            });
        }
    }

    /// Answers the approval request `call_id` of session `session`, or of the one shown.
    pub fn answer(&self, session: Option<SessionId>, call_id: String, answer: Answer) {
        let Some(id) = session.or_else(|| self.session.clone()) else {
            return;
        };
        let (service, tx) = (self.service.clone(), self.tx.clone());
        tokio::spawn(async move {
            if let Err(err) = service.answer(&id, &call_id, answer).await {
                let _ = tx.send(AppEvent::Notice(format!(
                    "the answer did not reach the session: {err}"
                )));
            }
        });
    }

    /// Gives the key a new session (`/new`).
    pub fn reset(&mut self, old: Option<SessionId>) {
        self.feed = None;
        let (service, tx) = (self.service.clone(), self.tx.clone());
        let (key, dir) = (self.key.clone(), self.project_dir.clone());
        tokio::spawn(async move {
            let _ = tx.send(match service.reset(key.as_str(), &dir).await {
                Ok(new) => AppEvent::Renewed { old, new },
                Err(err) => AppEvent::Notice(format!("could not start a new session: {err}")),
            });
        });
    }

    /// Has the shown session (the key's, started when none is shown yet) call `model` from
    /// its next turn on.
    pub fn switch_model(&self, model: String) {
        let (service, tx) = (self.service.clone(), self.tx.clone());
        let (key, dir, shown) = (
            self.key.clone(),
            self.project_dir.clone(),
            self.session.clone(),
        );
        tokio::spawn(async move {
            let switched = async {
                let id = match shown {
                    Some(id) => id,
                    None => service.open_key(key.as_str(), &dir).await?,
                };
                super::model_name::check_listed(&service, &id, &model)
                    .await
                    .map_err(crate::gateway::ServiceError::new)?;
                let overrides = Overrides {
                    provider: None,
                    model: Some(model),
                };
                service.set_model(&id, overrides).await
            };
            let _ = tx.send(match switched.await {
                Ok(shown) => AppEvent::Switched(shown),
                Err(err) => AppEvent::Notice(format!("the model was not changed: {err}")),
            });
        });
    }

    /// Reads the project's git branch.
    pub fn read_branch(&self) {
        let (service, tx, dir) = (
            self.service.clone(),
            self.tx.clone(),
            self.project_dir.clone(),
        );
        tokio::spawn(async move {
            let branch = service.git_branch(&dir).await;
            let _ = tx.send(AppEvent::Branch(branch));
        });
    }

    /// Follows the chat channels of the tern that owns the sessions, for the status line:
    /// asked now and every few seconds, told to the app when what it shows changes.
    pub fn watch_channels(&self) {
        let (service, tx) = (self.service.clone(), self.tx.clone());
        tokio::spawn(async move {
            let mut shown = String::new();
            let mut every = tokio::time::interval(CHANNELS_EVERY);
            loop {
                every.tick().await;
                let line = match service.channels().await {
                    Ok(channels) => channels_line(&channels),
                    Err(_) => String::new(),
                };
                if line != shown {
                    shown = line.clone();
                    if tx.send(AppEvent::Channels(line)).is_err() {
                        return;
                    }
                }
                if tx.is_closed() {
                    return;
                }
            }
        });
    }

    /// The project's files for completion, gathered in the background.
    pub fn files(&self) -> FileIndex {
        let index = FileIndex::pending();
        let (service, filling, dir) = (
            self.service.clone(),
            index.clone(),
            self.project_dir.clone(),
        );
        tokio::spawn(async move {
            filling.fill(service.files(dir).await);
        });
        index
    }
}

/// How often the status line's channels are asked for.
const CHANNELS_EVERY: Duration = Duration::from_secs(5);

/// `slack ✓ webhook ✗`: each channel, and whether it is connected.
fn channels_line(channels: &[ChannelStatus]) -> String {
    channels
        .iter()
        .map(|status| {
            let mark = match status.state {
                ChannelState::Connected => "✓",
                ChannelState::Starting | ChannelState::Reconnecting => "…",
                ChannelState::Stopped => "✗",
            };
            format!("{} {mark}", status.name)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Following a key's session, as a task runs it.
struct Following {
    service: SessionService,
    linked: mpsc::UnboundedSender<Linked>,
    key: SessionKey,
    dir: PathBuf,
}

impl Following {
    async fn run(self) {
        let following = async {
            let id = self.service.open_key(self.key.as_str(), &self.dir).await?;
            let feed = self
                .service
                .subscribe(&id, None, OutputFilter::ALL, FEED_BACKLOG)
                .await?;
            Ok::<_, crate::gateway::ServiceError>((id, feed))
        };
        let _ = self.linked.send(followed(following.await));
    }
}

/// The news of a session followed, or of why it could not be.
fn followed(result: Result<(SessionId, Feed), crate::gateway::ServiceError>) -> Linked {
    match result {
        Ok((id, feed)) => Linked::Feed {
            id,
            feed,
            meta: None,
        },
        Err(err) => Linked::Failed(format!("could not follow the session: {err}")),
    }
}
