//! One read of a repository shared by the turns that ask for it before it starts.
//!
//! A read shows the repository as it is when the read starts, so a turn may take the result
//! of any read that starts after the turn asked. When many sessions work in one repository
//! (subagents beside their parent, sessions of chat threads) and their turns ask while a
//! read still waits to start (for its thread, or for a place among the reads that may run at
//! once), they take that read's result instead of each queueing a read of their own: under
//! load the reads, and their threads, do not pile up. A lone turn starts its read at once.

use super::git::{GitContext, GitSnapshot, GitUnavailable, read_within, timed_out};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Per directory, the read that has not started yet, which a turn asking now may join.
static WAITING: LazyLock<Mutex<HashMap<PathBuf, Arc<SharedRead>>>> = LazyLock::new(Mutex::default);

struct SharedRead {
    dir: PathBuf,
    result: watch::Sender<Option<GitContext>>,
}

impl SharedRead {
    /// The read starts: from now on a turn that asks gets a read of its own.
    fn started(self: &Arc<Self>) {
        let mut waiting = lock();
        if waiting
            .get(&self.dir)
            .is_some_and(|read| Arc::ptr_eq(read, self))
        {
            waiting.remove(&self.dir);
        }
    }

    /// Gives the result to every turn that joined (the first result given stands).
    fn finished(self: &Arc<Self>, context: &GitContext) {
        // A read that never started (skipped) must not take later turns with it.
        self.started();
        self.result.send_if_modified(|result| {
            let first = result.is_none();
            if first {
                *result = Some(context.clone());
            }
            first
        });
    }
}

fn lock() -> MutexGuard<'static, HashMap<PathBuf, Arc<SharedRead>>> {
    WAITING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// [`working_git_with`](super::git::working_git_with), the read shared with the turns that
/// ask for `dir` before it starts: `read` runs only for the turn that starts it, so every
/// caller for one directory must pass the same kind of read. Each turn waits at most its own
/// `budget`; one whose read overran does not hand the timeout on to those that joined it,
/// who wait for the read's result within their own budgets.
pub async fn shared_git_with<F>(dir: &Path, budget: Duration, read: F) -> GitContext
where
    F: FnOnce(&Path) -> Result<GitSnapshot, GitUnavailable> + Send + 'static,
{
    let asked = Instant::now();
    let joined = {
        let mut waiting = lock();
        match waiting.get(dir) {
            Some(shared) => Err(shared.result.subscribe()),
            None => {
                let shared = Arc::new(SharedRead {
                    dir: dir.to_path_buf(),
                    result: watch::channel(None).0,
                });
                waiting.insert(dir.to_path_buf(), shared.clone());
                Ok(shared)
            }
        }
    };
    match joined {
        Ok(shared) => {
            let reading = shared.clone();
            let read = read_within(dir, budget, move |dir| {
                reading.started();
                let read = read(dir);
                reading.finished(&GitContext::from(read.clone()));
                read
            })
            .await;
            match read {
                // What the turns that joined get, also when the read did not run (skipped,
                // no thread) or panicked.
                Ok(context) => {
                    shared.finished(&context);
                    context
                }
                // Later turns get a read of their own; those that joined wait on.
                Err(_) => {
                    shared.started();
                    timed_out(budget)
                }
            }
        }
        Err(mut result) => {
            let shared = match tokio::time::timeout(budget, result.wait_for(Option::is_some)).await
            {
                Ok(Ok(context)) => context.clone(),
                // The read went without a result (its turn went on without it, or stopped).
                Ok(Err(_)) => None,
                Err(_) => return timed_out(budget),
            };
            match shared {
                Some(context) => context,
                // Shared again with those who ask meanwhile, within what is left.
                None => match budget.checked_sub(asked.elapsed()) {
                    Some(left) if !left.is_zero() => {
                        Box::pin(shared_git_with(dir, left, read)).await
                    }
                    _ => timed_out(budget),
                },
            }
        }
    }
}
