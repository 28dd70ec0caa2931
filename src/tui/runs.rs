//! The interface's side of the subagent runs its session sends: each run followed in a task
//! of its own, which asks the session service where the run stands, follows the run's
//! session from its start once it has one, and reports both to the app, until the run has
//! ended and its session's turn with it.

use super::app::AppEvent;
use crate::domain::{RunId, SessionId};
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::{OutputFilter, SessionEvent};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often a run's status is asked for while it works.
const POLL: Duration = Duration::from_millis(400);

/// Items a pane's feed may leave unread before the session drops it.
const PANE_BACKLOG: usize = 4096;

/// The longest `result.md` shown, in bytes; the rest is in the file.
const RESULT_SHOWN: usize = 16 * 1024;

/// Follows run `run` of session `parent` for its pane.
pub fn watch(
    service: SessionService,
    parent: SessionId,
    run: RunId,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        let mut feed: Option<Feed> = None;
        // The run's session's turn has ended: nothing more comes on its feed.
        let mut turn_over = false;
        let mut ended = false;
        let mut poll = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                _ = poll.tick(), if !ended => {
                    let Ok(status) = service.run_status(&parent, &run, false).await else {
                        return;
                    };
                    ended = !matches!(
                        status["state"].as_str(),
                        Some("queued" | "running" | "cancelling")
                    );
                    let session = status["session"].as_str().map(SessionId::from_string);
                    if tx.send(AppEvent::RunStatus { run: run.clone(), status }).is_err() {
                        return;
                    }
                    if feed.is_none() && !turn_over && let Some(session) = session {
                        feed = service
                            .subscribe(&session, Some(0), OutputFilter::ALL, PANE_BACKLOG)
                            .await
                            .ok();
                    }
                }
                item = next(&mut feed) => {
                    let event = match item {
                        Some(FeedItem::Replay { records }) => AppEvent::RunHistory { run: run.clone(), records },
                        Some(FeedItem::Event(stamped)) => {
                            turn_over |= matches!(
                                stamped.event,
                                SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
                            );
                            AppEvent::RunEvent { run: run.clone(), event: stamped.event }
                        }
                        Some(FeedItem::Live { .. }) => continue,
                        // Dropped for falling behind, or ended: a pane does without the rest.
                        _ => {
                            feed = None;
                            continue;
                        }
                    };
                    if tx.send(event).is_err() {
                        return;
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

/// Cancels run `run` of session `parent`; a failure is told as a notice.
pub fn cancel(
    service: SessionService,
    parent: SessionId,
    run: RunId,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        let said = match service.run_status(&parent, &run, true).await {
            Ok(_) => format!("cancelling subagent run {run}"),
            Err(err) => format!("could not cancel subagent run {run}: {err}"),
        };
        let _ = tx.send(AppEvent::Notice(said));
    });
}

/// Shows a run's `result.md` as a notice, read off the async threads.
pub fn show_result(path: PathBuf, tx: UnboundedSender<AppEvent>) {
    tokio::spawn(async move {
        let shown = path.clone();
        let read = tokio::task::spawn_blocking(move || std::fs::read(&shown)).await;
        let text = match read {
            Ok(Ok(bytes)) => {
                let cut = bytes.len() > RESULT_SHOWN;
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(RESULT_SHOWN)]);
                let mut text = format!("{}:\n{}", path.display(), text.trim_end());
                if cut {
                    text.push_str("\n… (the rest is in the file)");
                }
                text
            }
            Ok(Err(err)) => format!("could not read {}: {err}", path.display()),
            Err(err) => format!("could not read {}: {err}", path.display()),
        };
        let _ = tx.send(AppEvent::Notice(text));
    });
}
