//! The interface's side of the subagent runs its session sends: each run followed
//! (`gateway::follow_run`) and its news handed to the app; cancelling a run, and showing a
//! run's result.

use super::app::AppEvent;
use crate::domain::{RunId, SessionId};
use crate::gateway::{RunNews, SessionService, follow_run};
use crate::session::SessionEvent;
use std::path::PathBuf;
use tokio::sync::mpsc::UnboundedSender;

/// The longest `result.md` shown, in bytes; the rest is in the file.
const RESULT_SHOWN: usize = 16 * 1024;

/// Follows run `run` of session `parent` for its pane.
pub fn watch(
    service: SessionService,
    parent: SessionId,
    run: RunId,
    tx: UnboundedSender<AppEvent>,
) {
    let (news_tx, mut news) = tokio::sync::mpsc::unbounded_channel();
    follow_run(service, parent, run, true, news_tx);
    crate::session::background::spawn(async move {
        let mut held: Option<(RunId, RunNews)> = None;
        loop {
            let next = match held.take() {
                Some(news) => news,
                None => match news.recv().await {
                    Some(news) => news,
                    None => return,
                },
            };
            let (run, news) = match next {
                // What streamed while the app was busy goes to it as one piece: a run writing
                // fast costs the interface one event per wakeup, not one per token.
                (run, RunNews::Event(SessionEvent::TextDelta { mut text })) => {
                    while let Ok(more) = news.try_recv() {
                        match more {
                            (_, RunNews::Event(SessionEvent::TextDelta { text: next })) => {
                                text.push_str(&next);
                            }
                            other => {
                                held = Some(other);
                                break;
                            }
                        }
                    }
                    (run, RunNews::Event(SessionEvent::TextDelta { text }))
                }
                other => other,
            };
            let event = match news {
                RunNews::Status(status) => AppEvent::RunStatus { run, status },
                RunNews::History(records) => AppEvent::RunHistory { run, records },
                RunNews::Event(event) => AppEvent::RunEvent { run, event },
            };
            if tx.send(event).is_err() {
                return;
            }
        }
    });
}

/// Asks which runs of `parent` are queued or working, for panes of those the interface did
/// not see start (sent before it opened the session, or from another terminal).
pub fn find_live(service: SessionService, parent: SessionId, tx: UnboundedSender<AppEvent>) {
    tokio::spawn(async move {
        if let Ok(runs) = service.live_runs(&parent).await
            && !runs.is_empty()
        {
            let _ = tx.send(AppEvent::LiveRuns {
                session: parent,
                runs,
            });
        }
    });
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
