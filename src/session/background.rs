//! Where work no person waits for at a keyboard runs: a runtime of its own, on one thread
//! of lower priority. Subagent sessions run there whole; a session of the main runtime sends
//! there the turns of its automated inputs (a webhook's, a reminder's), while it keeps
//! acknowledging inputs itself.
//!
//! However many runs stream at once, their tasks (their model streams, their journal writes,
//! their events and those who follow them) then never queue ahead of the session the person
//! talks to, nor of the acknowledgement of an input, whose tasks keep the process's main
//! runtime, and when both want a core the kernel gives it to the person's session first. What crosses between the two is channels, which work across runtimes; the
//! runs' model requests go over HTTP connections of their own (a connection's work is done
//! on the runtime that opened it). The
//! processes a run's tools and jobs start inherit its lower priority.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// How much lower the runs' thread runs than the rest of tern, in nice steps.
const NICER_BY: i32 = 10;

/// The runtime, once started; taken out at the process's end.
static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

/// The runtime for subagent sessions, started the first time one is asked for; `None` when
/// no thread could be started or the process is ending, and the caller's runtime serves
/// instead.
pub fn runtime() -> Option<Handle> {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let built = Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tern-runs")
            .on_thread_start(|| {
                lower_priority();
                crate::llm::keep_connections_apart();
            })
            .enable_all()
            .build();
        match built {
            Ok(runtime) => *lock() = Some(runtime),
            Err(err) => tracing::warn!(%err, "no runtime of their own for subagent runs"),
        }
    });
    lock().as_ref().map(|runtime| runtime.handle().clone())
}

/// Runs `task` on the runs' runtime (on the caller's when there is none): work for runs
/// that wakes with each of their events.
pub fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    drop(spawn_joined(task));
}

/// Runs `task` on the runs' runtime (on the caller's when there is none) and hands back
/// its outcome.
pub fn spawn_joined<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<T> {
    match runtime() {
        Some(runtime) => runtime.spawn(task),
        None => tokio::spawn(task),
    }
}

/// Set once the process is ending: a run's session that stops then was stopped by that,
/// not by anything of its own.
static ENDING: AtomicBool = AtomicBool::new(false);

/// Whether the process is ending (see [`shutdown`]).
pub fn ending() -> bool {
    ENDING.load(Ordering::Acquire)
}

/// Stops the runtime at the process's end: its tasks are dropped, so what they hold (the
/// store above all, whose drop makes its lazy commits durable) is let go, and blocking work
/// still running is waited for up to `bound`. Those who watch a run's session from the main
/// runtime, still running then, see it stop with [`ending`] set.
pub fn shutdown(bound: Duration) {
    ENDING.store(true, Ordering::Release);
    let taken = lock().take();
    if let Some(runtime) = taken {
        runtime.shutdown_timeout(bound);
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Runtime>> {
    RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Lowers the calling thread's priority (on Linux a thread's nice value is its own).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: getpriority and setpriority only read and change the scheduling priority of
    // the calling thread (`who` 0); no memory is passed.
    unsafe {
        let now = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, now + NICER_BY);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn runs_work_on_a_thread_of_their_own_that_yields_to_the_rest() {
        // SAFETY: reads the calling thread's own priority.
        let priority = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let ours = priority();
        let runtime = runtime().expect("the runs' runtime starts");
        let asked = runtime.spawn(async move {
            let name = std::thread::current().name().map(str::to_owned);
            (name, priority())
        });
        let (name, theirs) = runtime.block_on(asked).expect("the task ran");
        assert_eq!(name.as_deref(), Some("tern-runs"));
        // Nice values stop at 19.
        assert_eq!(theirs, (ours + NICER_BY).min(19));
    }
}
