//! A turn's task that ends without handing the state back: dropped as the process ends, or
//! stopped by a bug, after which the session is rebuilt from its journal.

use super::{SessionActor, refuse};
use crate::domain::{ErrorCategory, TurnStop};
use crate::session::background;
use crate::session::events::SessionEvent;
use crate::session::input::SessionError;
use crate::session::phase::Phase;
use crate::session::snapshot;
use crate::store::JournalEvent;

impl SessionActor {
    /// The turn's task ended without the state: one dropped with the turns' or the runs'
    /// runtime as the process ends leaves the journal as a crash leaves it, for the next
    /// open to warm up; any other loss is a bug, recovered from.
    pub(super) async fn turn_task_lost(&mut self, err: &tokio::task::JoinError) {
        if err.is_cancelled() && background::ending() {
            self.accepting = false;
            for queued in self.queue.drain(..) {
                refuse(queued, || SessionError::Closed);
            }
            return;
        }
        self.recover_after_crash(err).await;
    }

    /// The turn's task died, which is a bug. The journal is the truth: rebuild from it, end
    /// the turn there, and go on. If the journal cannot be read either, the session stops.
    async fn recover_after_crash(&mut self, err: &tokio::task::JoinError) {
        tracing::error!(%err, "a turn task stopped unexpectedly; rebuilding from the journal");
        if let Err(err) = self.set_phase(Phase::Recovering) {
            tracing::error!(%err, "could not enter recovery");
        }
        let message = "the turn stopped unexpectedly (a bug in tern); the session was restored \
                       from its journal and can go on";
        let recovered = snapshot::recover(
            &self.deps.store,
            &self.id,
            self.project_dir.clone(),
            &self.dirs.spool_dir,
            &self.deps.redactor,
        );
        let mut replay = match recovered {
            Ok(replay) => replay,
            Err(err) => {
                self.publish(&SessionEvent::TurnFailed {
                    category: ErrorCategory::Storage,
                    stop: TurnStop::Error {
                        category: ErrorCategory::Storage,
                    },
                    message: format!(
                        "the turn stopped unexpectedly and the session journal could not be \
                         read back ({err}); the session has stopped. Open it again with \
                         `tern run --session {}`",
                        self.id
                    ),
                });
                self.accepting = false;
                return;
            }
        };
        for event in &mut replay.repairs {
            if let JournalEvent::TurnFailed {
                category,
                message: text,
                ..
            } = event
            {
                *category = ErrorCategory::Internal;
                *text = message.to_owned();
            }
        }
        if let Err(err) =
            snapshot::store_repairs(&self.deps.store, &mut replay, &self.dirs.spool_dir)
        {
            tracing::error!(%err, "could not repair the journal");
        }
        self.published_at = self.published_at.max(replay.state.last_seq);
        self.publish(&SessionEvent::TurnFailed {
            category: ErrorCategory::Internal,
            message: message.to_owned(),
            stop: TurnStop::Error {
                category: ErrorCategory::Internal,
            },
        });
        self.finish_turn(replay.state).await;
    }
}
