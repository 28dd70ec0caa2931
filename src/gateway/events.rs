//! Lifecycle events of the stored sessions, for every front end that lists sessions (the
//! picker, a channel's status) and for the log: `session.created`, `session.updated`,
//! `session.reset`, `session.archived`, `session.deleted` and `disk_budget.exceeded`.
//!
//! The store tells of each committed change (see [`crate::store::Observer`]); the bus turns
//! those into events, writes each to the log and hands it to whoever subscribed. A
//! subscriber that falls behind loses the oldest events, never slows a session down.

use super::reset::ResetReason;
use crate::config::MaintenanceMode;
use crate::domain::SessionId;
use crate::store::{JournalEvent, StoreChange};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

/// Events kept for a subscriber that is behind.
const BACKLOG: usize = 256;

/// Something that happened to a stored session, or to the store as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event")]
pub enum LifecycleEvent {
    #[serde(rename = "session.created")]
    Created { id: SessionId, key: String },
    /// A turn ended, the title changed, the history was compacted or the session went to
    /// rest: what a listing shows has changed.
    #[serde(rename = "session.updated")]
    Updated { id: SessionId },
    /// A key was given a new session.
    #[serde(rename = "session.reset")]
    Reset {
        key: String,
        from: SessionId,
        to: SessionId,
        reason: String,
    },
    #[serde(rename = "session.archived")]
    Archived { id: SessionId },
    #[serde(rename = "session.deleted")]
    Deleted { id: SessionId },
    /// Stored sessions take more than `max_disk_bytes`.
    #[serde(rename = "disk_budget.exceeded")]
    DiskBudgetExceeded {
        bytes: u64,
        max_bytes: u64,
        /// `warn`: only reported; `enforce`: the oldest are being removed.
        mode: String,
    },
}

impl LifecycleEvent {
    /// The event's name, as in the log and in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "session.created",
            Self::Updated { .. } => "session.updated",
            Self::Reset { .. } => "session.reset",
            Self::Archived { .. } => "session.archived",
            Self::Deleted { .. } => "session.deleted",
            Self::DiskBudgetExceeded { .. } => "disk_budget.exceeded",
        }
    }

    /// The event a committed store change makes, if it makes one.
    pub fn from_change(change: &StoreChange<'_>) -> Option<Self> {
        Some(match change {
            StoreChange::Created(meta) => Self::Created {
                id: meta.id.clone(),
                key: meta.key.as_str().to_owned(),
            },
            StoreChange::Appended { id, events } if events.iter().any(changes_listing) => {
                Self::Updated { id: (*id).clone() }
            }
            StoreChange::Appended { .. } => return None,
            StoreChange::Archived(id) => Self::Archived { id: (*id).clone() },
            StoreChange::Deleted(id) => Self::Deleted { id: (*id).clone() },
        })
    }

    pub(super) fn reset(key: &str, from: SessionId, to: SessionId, why: ResetReason) -> Self {
        Self::Reset {
            key: key.to_owned(),
            from,
            to,
            reason: why.as_str().to_owned(),
        }
    }

    pub(super) fn over_budget(bytes: u64, max_bytes: u64, mode: MaintenanceMode) -> Self {
        Self::DiskBudgetExceeded {
            bytes,
            max_bytes,
            mode: match mode {
                MaintenanceMode::Warn => "warn",
                MaintenanceMode::Enforce => "enforce",
            }
            .to_owned(),
        }
    }
}

/// Whether an appended event changes what a session listing shows.
fn changes_listing(event: &JournalEvent) -> bool {
    event.turn_stop().is_some()
        || matches!(
            event,
            JournalEvent::TitleChanged { .. }
                | JournalEvent::Compacted { .. }
                | JournalEvent::Passivated { .. }
        )
}

/// Hands lifecycle events to the log and to subscribers.
#[derive(Debug)]
pub struct LifecycleBus {
    tx: broadcast::Sender<LifecycleEvent>,
}

impl Default for LifecycleBus {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(BACKLOG).0,
        }
    }
}

impl LifecycleBus {
    /// Logs `event` and hands it to the subscribers, if any.
    pub fn emit(&self, event: LifecycleEvent) {
        match &event {
            LifecycleEvent::DiskBudgetExceeded {
                bytes,
                max_bytes,
                mode,
            } => tracing::warn!(
                event = event.name(),
                bytes,
                max_bytes,
                mode,
                "stored sessions are over max_disk_bytes"
            ),
            LifecycleEvent::Updated { id } => tracing::debug!(event = event.name(), %id),
            other => tracing::info!(event = other.name(), detail = ?other),
        }
        let _ = self.tx.send(event);
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<LifecycleEvent> {
        self.tx.subscribe()
    }
}
