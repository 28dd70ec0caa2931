//! Rest: an idle session is passivated (phase Passivating for a grace, then a journaled
//! checkpoint and a snapshot), and its actor stops until the next input wakes it.

use super::{PASSIVATION_GRACE, SessionActor};
use crate::session::phase::Phase;
use crate::session::snapshot;
use crate::store::JournalEvent;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

impl SessionActor {
    /// Whether the session may go to rest: idle, nothing running or waiting (a title call
    /// included, which `sidecar_llm_timeout` bounds), not closing, and `idle_timeout` not
    /// zero. Subscribers do not keep it up.
    pub(super) fn may_rest(&self) -> bool {
        !self.deps.settings.idle_timeout.is_zero()
            && self.awake.load(Ordering::Acquire) == 0
            && self.accepting
            && self.turn.is_none()
            && !self.titles.running()
            && self.queue.is_empty()
            && self.state.is_some()
            && matches!(self.phase, Phase::Ready | Phase::Passivating)
    }

    /// When the next step toward rest is due.
    pub(super) fn rest_at(&self) -> Instant {
        let idle_until = self.active_at + self.deps.settings.idle_timeout;
        match self.phase {
            Phase::Passivating => idle_until + PASSIVATION_GRACE,
            _ => idle_until,
        }
    }

    /// After `idle_timeout`: phase Passivating for the grace; after the grace: the checkpoint
    /// is journaled, a snapshot saved, and the actor stops. The next input starts it again from
    /// the snapshot (see the session manager).
    pub(super) fn rest(&mut self) {
        if self.phase == Phase::Ready {
            if let Err(err) = self.set_phase(Phase::Passivating) {
                tracing::error!(%err, "could not begin to rest");
            }
            return;
        }
        let Some(state) = self.state.as_mut() else {
            return;
        };
        let idle_secs = self.deps.settings.idle_timeout.as_secs();
        let every = self.deps.settings.snapshot_every;
        let checkpoint = [JournalEvent::Passivated { idle_secs }];
        match snapshot::commit(&self.deps.store, every, state, &checkpoint) {
            Ok(_) => snapshot::snapshot(&self.deps.store, state),
            Err(err) => tracing::warn!(%err, "could not journal the rest checkpoint"),
        }
        // Its background jobs do not outlive it.
        self.deps.jobs.kill_session(&self.id);
        tracing::info!(session = %self.id, "session put to rest after {idle_secs} s idle");
        self.accepting = false;
    }
}
