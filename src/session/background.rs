//! Where turns and runs do their work, apart from the threads a person waits on: two
//! runtimes of their own, one worker each. The turns of a person's inputs run on one at
//! tern's own priority; subagent sessions run whole on the other, at a lower priority,
//! and a session of the main runtime sends there the turns of its automated inputs (a
//! webhook's, a reminder's). The sessions' actors keep the main runtime, whose threads ask
//! the kernel for a short time slice ([`crate::priority`]), so an input is acknowledged at
//! once however many turns keep the cores busy; the threads here keep the default slice,
//! and the processes their tools start inherit it.
//!
//! However many runs stream at once, their tasks (their model streams, their events and
//! those who follow them) then never queue ahead of the session the person talks to, nor of
//! the acknowledgement of an input, and when both want a core the kernel gives it to the
//! person's session first. What crosses between the runtimes is channels, which work
//! across them; each runtime's model requests go over HTTP connections of its own
//! (`llm::Side`: a connection's work is done on the runtime that opened it). The runs'
//! turns' journal appends, their actors' inputs and the flushes they schedule go to threads
//! at tern's own priority, since every session's appends wait for a group's commit. The
//! processes a run's tools and jobs start inherit its lower priority.

use crate::llm::Side;
use crate::priority::{favour_latency, nice, ordinary_slice, set_nice};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::time::{Duration, Instant};
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// How much lower the runs' thread runs than the rest of tern, in nice steps.
const NICER_BY: i32 = 10;

/// The runs' runtime, once started; taken out at the process's end.
static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
/// The runtime of a person's turns, once started; taken out at the process's end.
static TURNS: Mutex<Option<Runtime>> = Mutex::new(None);

/// The runtime for subagent sessions, started the first time one is asked for; `None` when
/// no thread could be started or the process is ending, and the caller's runtime serves
/// instead.
pub fn runtime() -> Option<Handle> {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        // Started from a thread of tern's own priority (no lowered thread exists before
        // this), so the committers keep it, and every thread of the runtime is set to one
        // value: a thread started by a lowered one (a worker handing its tasks on, the
        // blocking pool) would otherwise be lowered twice.
        start_full_priority_threads();
        let lowered = (nice() + NICER_BY).min(19);
        start(&RUNTIME, "tern-runs", Side::Runs, move || {
            // Marked only where the priority did change: elsewhere commits stay here.
            if set_nice(lowered) {
                LOWERED.with(|flag| flag.set(true));
            }
        });
    });
    handle(&RUNTIME)
}

/// The runtime for the turns of a person's inputs, started the first time one is asked
/// for: tern's own priority and the default slice, on one worker (a turn's own work is
/// short steps between its waits, what runs long goes to blocking threads or the tools'
/// processes), which leaves the other core to the actors; `None` when no thread could be
/// started or the process is ending.
pub fn turns() -> Option<Handle> {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        // Asked from a thread of tern's own priority (see `spawn_turn`); its threads are set
        // to it whichever thread starts them.
        let ours = nice();
        start(&TURNS, "tern-turns", Side::Turns, move || {
            set_nice(ours);
        });
    });
    handle(&TURNS)
}

/// Starts a runtime of one worker into `slot`, its threads named `name` and set up by
/// `setup`; each keeps the default slice (it may be started from a thread that asked for a
/// short one, which is inherited) and the HTTP connections of `side`.
fn start(
    slot: &'static Mutex<Option<Runtime>>,
    name: &str,
    side: Side,
    setup: impl Fn() + Send + Sync + 'static,
) {
    let built = Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .on_thread_start(move || {
            setup();
            ordinary_slice();
            crate::llm::keep_connections_apart(side);
        })
        .enable_all()
        .build();
    match built {
        Ok(runtime) => *lock(slot) = Some(runtime),
        Err(err) => tracing::warn!(%err, name, "no runtime of its own"),
    }
}

/// Runs a person's turn on the turns' runtime, off the threads that acknowledge inputs. A
/// turn asked from the runs' runtime (a subagent session's) stays there, and one asked from
/// a runtime of a single thread (an embedder's, the tests', whose paused clock must drive
/// the turn's timers) stays on it; with no turns' runtime it runs on the caller's.
pub fn spawn_turn<T: Send + 'static>(
    task: impl Future<Output = T> + Send + 'static,
) -> JoinHandle<T> {
    let single = Handle::try_current()
        .is_ok_and(|here| here.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
    // Asked before the runtime is started, which takes the priority of the thread that
    // starts it.
    if lowered() || single {
        return tokio::spawn(task);
    }
    match turns() {
        Some(runtime) => runtime.spawn(task),
        None => tokio::spawn(task),
    }
}

fn handle(runtime: &'static Mutex<Option<Runtime>>) -> Option<Handle> {
    lock(runtime)
        .as_ref()
        .map(|runtime| runtime.handle().clone())
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
    for runtime in [&RUNTIME, &TURNS] {
        let taken = lock(runtime).take();
        if let Some(runtime) = taken {
            runtime.shutdown_timeout(bound);
        }
    }
}

fn lock(
    runtime: &'static Mutex<Option<Runtime>>,
) -> std::sync::MutexGuard<'static, Option<Runtime>> {
    runtime
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

thread_local! {
    /// Whether the calling thread is one of the runs' runtime, at its lower priority.
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Work handed from a lowered thread to one of tern's own priority.
type Job = Box<dyn FnOnce() + Send>;

/// Threads at tern's own priority that commit to the store for the lowered ones.
const COMMITTERS: usize = 4;

/// Where lowered threads hand their commits; `None` until the runtime starts, or when no
/// thread could be started.
static COMMITS: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();

/// Where lowered threads hand work that is due later (a flush of lazy commits), with the
/// instant it is due; served in order by one thread at tern's own priority.
static LATER: OnceLock<Option<mpsc::Sender<(Instant, Job)>>> = OnceLock::new();

/// Starts the committers and the thread for work due later, at the caller's priority.
fn start_full_priority_threads() {
    LATER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<(Instant, Job)>();
        let spawned = std::thread::Builder::new()
            .name("tern-later".to_owned())
            .spawn(move || {
                favour_latency();
                while let Ok((due, job)) = rx.recv() {
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    job();
                }
            });
        spawned.is_ok().then_some(tx)
    });
    COMMITS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut started = 0;
        for _ in 0..COMMITTERS {
            let rx = Arc::clone(&rx);
            let spawned = std::thread::Builder::new()
                .name("tern-commit".to_owned())
                .spawn(move || {
                    favour_latency();
                    loop {
                        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            started += usize::from(spawned.is_ok());
        }
        (started > 0).then_some(tx)
    });
}

/// Runs `work` after `delay` at tern's own priority, when called from a lowered thread;
/// `false` (and nothing done) elsewhere, or when it cannot be, for the caller to see to it.
/// Each call is served in turn, so `delay` is meant to be the same for all.
pub fn later_at_full_priority(delay: Duration, work: impl FnOnce() + Send + 'static) -> bool {
    let later = LATER.get().and_then(Option::as_ref);
    let Some(later) = later.filter(|_| lowered()) else {
        return false;
    };
    later.send((Instant::now() + delay, Box::new(work))).is_ok()
}

/// Whether the calling thread is one of the runs' runtime, whose commits go through
/// [`at_full_priority`].
pub fn lowered() -> bool {
    LOWERED.with(Cell::get)
}

/// Runs `work`, which commits to the store, at tern's own priority: on the calling thread
/// unless it is one of the runs' runtime, whose commits go to a committer while it waits.
/// A commit is a group's: appends of every session wait for the one that writes it, and
/// none may wait on a thread that yields to everything else (an input's acknowledgement
/// least of all). A panic in `work` is raised again here; `None` if the committer stopped
/// without an outcome.
pub fn at_full_priority<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let commits = COMMITS.get().and_then(Option::as_ref);
    let Some(commits) = commits.filter(|_| lowered()) else {
        return Some(crate::tools::off_async_threads(work));
    };
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    });
    if let Err(mpsc::SendError(job)) = commits.send(job) {
        // No committer left: here, then.
        job();
    }
    let done = crate::tools::off_async_threads(|| rx.recv());
    match done {
        Ok(Ok(value)) => Some(value),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => None,
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

    #[test]
    fn commits_asked_from_the_runs_run_at_tern_s_own_priority() {
        let ours = nice();
        let runtime = runtime().expect("the runs' runtime starts");
        let asked = runtime.spawn(async move {
            let here = nice();
            // A thread the lowered one started is lowered once, not twice.
            let blocking = tokio::task::spawn_blocking(nice).await.expect("it ran");
            let committed = tokio::task::block_in_place(|| at_full_priority(nice));
            (lowered(), here, blocking, committed)
        });
        let (lowered, here, blocking, committed) = runtime.block_on(asked).expect("the task ran");
        assert!(lowered);
        assert_eq!(here, (ours + NICER_BY).min(19));
        assert_eq!(blocking, here);
        assert_eq!(committed, Some(ours));
        // Elsewhere the work simply runs where it is asked.
        assert_eq!(at_full_priority(nice), Some(ours));
    }

    #[test]
    fn a_person_s_turn_runs_on_threads_of_its_own_with_the_ordinary_slice() {
        // A thread that asked for a short slice, as the actors' are: what it starts would
        // inherit it.
        std::thread::spawn(|| {
            let ours = nice();
            let favoured = favour_latency();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()
                .expect("a runtime");
            let ran = runtime.block_on(spawn_turn(async {
                let name = std::thread::current().name().map(str::to_owned);
                (name, nice(), crate::priority::slice())
            }));
            let (name, theirs, slice) = ran.expect("the turn ran");
            assert_eq!(name.as_deref(), Some("tern-turns"));
            assert_eq!(theirs, ours);
            if favoured {
                assert_ne!(slice, crate::priority::slice());
            }
        })
        .join()
        .expect("the thread ran");
    }

    #[test]
    fn a_commit_that_panics_panics_where_it_was_asked() {
        let runtime = runtime().expect("the runs' runtime starts");
        let asked =
            runtime.spawn(async { at_full_priority(|| -> u8 { panic!("the commit failed") }) });
        let failed = runtime.block_on(asked).expect_err("the panic comes back");
        assert!(failed.is_panic());
    }
}
