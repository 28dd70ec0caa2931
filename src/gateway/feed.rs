//! A subscription that starts from a journal position: the records after it, read on a
//! blocking thread, then the live events, with nothing missed or told twice at the seam.
//!
//! The live subscriber is attached first; it knows the position the session had published
//! up to (`attached_at`). The journal is read from the subscriber's position up to there, and
//! a live event that stands for a record already read is left out. Whoever reads the feed
//! more slowly than the session runs is dropped by the session ([`Dropped`], with a position
//! to resubscribe from); a feed never slows the session.

use crate::domain::SessionId;
use crate::session::{Dropped, Stamped, Subscription};
use crate::store::{JournalRecord, Store};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Records sent together in one [`FeedItem::Replay`].
const REPLAY_CHUNK: usize = 256;

/// What a feed delivers, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "feed", rename_all = "snake_case")]
pub enum FeedItem {
    /// Journal records after the position subscribed from, oldest first.
    Replay { records: Vec<JournalRecord> },
    /// The replay is over; live events follow, from this position on.
    Live { at: u64 },
    /// A live event with its journal position.
    Event(Stamped),
    /// The session stopped (it went to rest, or closed); subscribe again to wake it.
    Ended,
    /// The session dropped this feed for falling behind: subscribe again from `last_at`.
    Dropped(Dropped),
}

/// The receiving end of a subscription from a journal position.
pub struct Feed {
    rx: mpsc::Receiver<FeedItem>,
    last_at: u64,
}

impl Feed {
    pub(crate) fn new(rx: mpsc::Receiver<FeedItem>, from: u64) -> Self {
        Self { rx, last_at: from }
    }

    /// The next item; `None` after `Ended` or `Dropped`.
    pub async fn next(&mut self) -> Option<FeedItem> {
        let item = self.rx.recv().await?;
        match &item {
            FeedItem::Replay { records } => {
                if let Some(last) = records.last() {
                    self.last_at = self.last_at.max(last.seq);
                }
            }
            FeedItem::Live { at } => self.last_at = self.last_at.max(*at),
            FeedItem::Event(stamped) => self.last_at = self.last_at.max(stamped.at),
            FeedItem::Ended | FeedItem::Dropped(_) => {}
        }
        Some(item)
    }

    /// The journal position of what was received last: where to subscribe again from.
    pub fn last_at(&self) -> u64 {
        self.last_at
    }
}

/// Starts the task that turns `live` into a feed from position `from` (`None`: from where
/// the subscriber attached, nothing replayed).
pub(crate) fn start(
    store: Arc<Store>,
    id: SessionId,
    from: Option<u64>,
    mut live: Subscription,
    backlog: usize,
) -> Feed {
    let (tx, rx) = mpsc::channel(backlog.max(1));
    let attached = live.attached_at();
    let from_seq = from.unwrap_or(attached);
    tokio::spawn(async move {
        if from_seq < attached {
            let read = tokio::task::spawn_blocking(move || store.load_after(&id, from_seq)).await;
            let records = match read {
                Ok(Ok(records)) => records,
                Ok(Err(err)) => {
                    tracing::warn!(%err, "a feed could not read the journal");
                    return;
                }
                Err(err) => {
                    tracing::warn!(%err, "a feed's journal read stopped");
                    return;
                }
            };
            let wanted: Vec<JournalRecord> = records
                .into_iter()
                .take_while(|record| record.seq <= attached)
                .collect();
            for chunk in wanted.chunks(REPLAY_CHUNK) {
                let item = FeedItem::Replay {
                    records: chunk.to_vec(),
                };
                if tx.send(item).await.is_err() {
                    return;
                }
            }
        }
        if tx.send(FeedItem::Live { at: attached }).await.is_err() {
            return;
        }
        while let Some(stamped) = live.next().await {
            // Read already from the journal.
            if stamped.event.is_journaled() && stamped.at <= attached {
                continue;
            }
            if tx.send(FeedItem::Event(stamped)).await.is_err() {
                return;
            }
        }
        let end = match live.dropped() {
            Some(dropped) => FeedItem::Dropped(dropped.clone()),
            None => FeedItem::Ended,
        };
        let _ = tx.send(end).await;
    });
    Feed::new(rx, from_seq)
}
