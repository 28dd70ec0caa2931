//! The interface's side of a session's background jobs: how many run, in the status line, kept
//! current while any does, and a key that shows what each has printed.

use super::app::AppEvent;
use crate::domain::SessionId;
use crate::gateway::SessionService;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// How often the count is asked again while a job runs.
const POLL: Duration = Duration::from_secs(2);

/// The chain of questions that keeps the status line's count current: one at a time, a newer
/// chain (begun by a tool's result, a turn's end, another session) replacing the one before.
#[derive(Debug, Default)]
pub struct JobPolls {
    chain: u64,
}

impl JobPolls {
    /// Asks again now how many jobs of `session` run, the earlier chain dropped.
    pub fn renew(
        &mut self,
        service: &SessionService,
        session: SessionId,
        tx: &UnboundedSender<AppEvent>,
    ) {
        self.chain += 1;
        ask(
            service.clone(),
            session,
            self.chain,
            Duration::ZERO,
            tx.clone(),
        );
    }

    /// An answer of chain `chain`: whether it is current, for the app to take; while jobs
    /// run (or the count could not be had: `usize::MAX`), the chain asks again after
    /// [`POLL`].
    pub fn answered(
        &self,
        service: &SessionService,
        session: &SessionId,
        (chain, running): (u64, usize),
        tx: &UnboundedSender<AppEvent>,
    ) -> bool {
        if chain != self.chain {
            return false;
        }
        if running > 0 {
            ask(service.clone(), session.clone(), chain, POLL, tx.clone());
        }
        true
    }
}

fn ask(
    service: SessionService,
    session: SessionId,
    chain: u64,
    after: Duration,
    tx: UnboundedSender<AppEvent>,
) {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        // An owner that cannot answer now (it is busy handing over) is asked again later,
        // the count left as it was meanwhile.
        let running = match service.jobs(&session, false).await {
            Ok(jobs) => jobs.iter().filter(|job| job.running).count(),
            Err(_) => usize::MAX,
        };
        let _ = tx.send(AppEvent::Jobs {
            session,
            chain,
            running,
        });
    });
}

/// Shows the jobs of `session`, each with the ends of its log, as a notice.
pub fn show(service: SessionService, session: SessionId, tx: UnboundedSender<AppEvent>) {
    tokio::spawn(async move {
        let text = match service.jobs(&session, true).await {
            Ok(jobs) if jobs.is_empty() => "this session has no background jobs".to_owned(),
            Ok(jobs) => jobs
                .iter()
                .map(|job| {
                    format!(
                        "job {} · {} · {}\nlog: {}\n{}",
                        job.id,
                        job.command.lines().next().unwrap_or(""),
                        job.state,
                        job.log.display(),
                        job.output.as_deref().unwrap_or("").trim_end()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n\n"),
            Err(err) => format!("could not read the background jobs: {err}"),
        };
        let _ = tx.send(AppEvent::Notice(text));
    });
}
