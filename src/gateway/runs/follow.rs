//! Following a subagent run from a front end: a task asks the session service where the run
//! stands, follows the run's session from its start once it has one (when asked to), and
//! sends both on, until the run has ended and its session's turn with it (or the receiver
//! is gone).

use crate::domain::{RunId, SessionId};
use crate::gateway::catalog::JournalRecord;
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::{OutputFilter, SessionEvent};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often a run's status is asked for while it works.
const POLL: Duration = Duration::from_millis(400);

/// Items a run's feed may leave unread before the session drops it.
const RUN_BACKLOG: usize = 4096;

/// What a followed run brings.
#[derive(Debug, Clone, PartialEq)]
pub enum RunNews {
    /// Where it stands, as `check_agent_run` says it.
    Status(Value),
    /// Its session as journaled when it was first followed.
    History(Vec<JournalRecord>),
    /// A live event of its session.
    Event(SessionEvent),
}

/// Whether a run's status says it ended.
pub fn has_ended(status: &Value) -> bool {
    !matches!(
        status["state"].as_str(),
        Some("queued" | "running" | "cancelling")
    )
}

/// Follows run `run` of session `parent`, sending its news to `tx`; its session's too when
/// `with_session`.
pub fn follow_run(
    service: SessionService,
    parent: SessionId,
    run: RunId,
    with_session: bool,
    tx: UnboundedSender<(RunId, RunNews)>,
) {
    // It wakes with every event of the run: it goes with the runs' sessions.
    crate::session::background::spawn(async move {
        let mut feed: Option<Feed> = None;
        // The run's session's turn has ended: nothing more comes on its feed.
        let mut turn_over = !with_session;
        let mut ended = false;
        // The feed's replay is over: what it brings now is live.
        let mut live = false;
        let mut poll = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                _ = poll.tick(), if !ended => {
                    let status = match service.run_status(&parent, &run, false).await {
                        Ok(status) => status,
                        // Its owner is gone (a new one keeps no runs of the last), or it
                        // refuses: the run is lost to this follower, which says so.
                        Err(err) => {
                            let lost = serde_json::json!({"state": "lost", "error": err.to_string()});
                            let _ = tx.send((run.clone(), RunNews::Status(lost)));
                            return;
                        }
                    };
                    ended = has_ended(&status);
                    // A run ends after its session's turn: once live, nothing more comes.
                    if ended && live {
                        feed = None;
                        turn_over = true;
                    }
                    let session = status["session"].as_str().map(SessionId::from_string);
                    if tx.send((run.clone(), RunNews::Status(status))).is_err() {
                        return;
                    }
                    if feed.is_none() && !turn_over && let Some(session) = session {
                        feed = service
                            .subscribe(&session, Some(0), OutputFilter::ALL, RUN_BACKLOG)
                            .await
                            .ok();
                    }
                }
                item = next(&mut feed) => {
                    let news = match item {
                        Some(FeedItem::Replay { records }) => Some(RunNews::History(records)),
                        Some(FeedItem::Event(stamped)) => {
                            turn_over |= matches!(
                                stamped.event,
                                SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
                            );
                            Some(RunNews::Event(stamped.event))
                        }
                        Some(FeedItem::Live { .. }) => {
                            live = true;
                            None
                        }
                        // Dropped for falling behind, or ended: a follower does without the
                        // rest; the journal keeps it.
                        _ => {
                            turn_over = true;
                            None
                        }
                    };
                    if let Some(news) = news
                        && tx.send((run.clone(), news)).is_err()
                    {
                        return;
                    }
                    // A run ends after its session's turn: once live, nothing more comes.
                    if ended && live {
                        turn_over = true;
                    }
                    if turn_over {
                        feed = None;
                    }
                }
            }
            if ended && feed.is_none() {
                return;
            }
        }
    });
}

async fn next(feed: &mut Option<Feed>) -> Option<FeedItem> {
    match feed {
        Some(feed) => feed.next().await,
        None => std::future::pending().await,
    }
}
