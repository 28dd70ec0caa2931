//! The session manager under load, and what its maintenance check adds to each write.
//!
//! - `check`: `BudgetWatch::check` alone, the comparison every commit makes (goal ≤ 50 µs).
//! - `append+check`: durable single appends with and without the manager's store observer
//!   installed (lifecycle events plus the check), p50 and p99: the observer's whole cost.
//! - `20 appenders`: the store alone, 20 threads each appending durably to a session of its
//!   own as fast as it can: the floor the sessions' acknowledgements stand on.
//! - `20 sessions`: 20 sessions under one manager, each a task sending inputs one after the
//!   other through `SessionManager::send` against the mock provider on 127.0.0.1 (a text reply
//!   per input), so every acknowledgement waits for its durable append while the other
//!   sessions' turns append too. The inputs are what a webhook delivers (automated, so their
//!   turns run ten nice steps lower on the runtime of work no person waits for); with
//!   `-- --people`, inputs typed by a person, whose turns run at tern's own priority on the
//!   runtime of turns, apart from the acknowledgements (whose threads ask for a short time
//!   slice, as in `tern`). A
//!   session's first input opens it (its store entry, its actor, its prompt's layers) and is
//!   reported on its own line. Reported: p50 and p99 of the acknowledgement of every later
//!   input, once with each session sending its next input the moment its turn ends (the disk saturated: every
//!   commit is an fsync, and redb commits one at a time) and once with 500 ms between a
//!   turn's end and the next input, as people type.
//!
//! With `-- --repo-files N`, the sessions work in a git repository of N committed files
//! (one of them changed), whose status each turn reads; the CPU time per turn is reported.
//!
//! Run with `cargo bench --bench manager` (`-- --inputs N` per session, default 50).

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

#[path = "common/mod.rs"]
mod common;

use common::{deps, quantile_us};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{MockProvider, Reply, TernHome};
use tern::config::{MaintenanceMode, MaintenanceSettings};
use tern::domain::{Audience, InputKind, Sender, SessionId, SessionKey};
use tern::gateway::maintenance::BudgetWatch;
use tern::gateway::{SendUserMessage, SessionManager};
use tern::session::UserInput;
use tern::store::{JournalEvent, SessionMeta, Store, Totals};

const SESSIONS: usize = 20;

fn limits() -> MaintenanceSettings {
    MaintenanceSettings {
        mode: MaintenanceMode::Warn,
        max_disk_bytes: Some(10 << 30),
        high_water_bytes: Some(8 << 30),
        ..MaintenanceSettings::default()
    }
}

fn check_alone() {
    let watch = BudgetWatch::new(limits());
    let rounds = 1_000_000u64;
    let start = Instant::now();
    for i in 0..rounds {
        black_box(watch.check(black_box(Totals {
            sessions: 400,
            transcript_bytes: 1 << 30 | i,
        })));
    }
    let ns = start.elapsed().as_nanos() as f64 / rounds as f64;
    println!("manager/check: BudgetWatch::check {ns:.1} ns per write (goal ≤ 50 µs)");
}

fn input(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender::local_user(),
        audience: Audience::Personal,
        kind: InputKind::Person,
        text: text.into(),
    }
}

/// p50 and p99 of `n` durable appends of ~1 KB on `store`.
fn appends(store: &Store, n: usize) -> (f64, f64) {
    let id = SessionId::generate();
    let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), PathBuf::from("/p"), 0);
    store.create_session(&meta).expect("a session");
    let event = input(&"the session list shows the newest first. ".repeat(25));
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            black_box(store.append(&id, &event).expect("append"));
            start.elapsed()
        })
        .collect();
    times.sort();
    (quantile_us(&times, 0.5), quantile_us(&times, 0.99))
}

async fn with_and_without_observer(n: usize) {
    let home = TernHome::new();
    let mock = MockProvider::start().await;
    let deps = deps(&home, &mock, limits());
    let (bare50, bare99) = appends(&deps.store, n);
    let manager = SessionManager::new(deps.clone());
    let (seen50, seen99) = appends(&deps.store, n);
    println!(
        "manager/append+check: {n} durable appends: without the observer p50 {bare50:.0} µs, \
         p99 {bare99:.0} µs; with it p50 {seen50:.0} µs, p99 {seen99:.0} µs"
    );
    drop(manager);
}

/// The store's own floor: 20 threads each appending durably to a session of its own as fast
/// as it can, with nothing else running: p50 and p99 of an append.
fn twenty_appenders(n: usize) {
    let home = TernHome::new();
    let store = Arc::new(Store::open(&home.home().join("floor.redb")).expect("a store"));
    let event = input(&"a typical message of a person to the model. ".repeat(4));
    let threads: Vec<_> = (0..SESSIONS)
        .map(|_| {
            let store = store.clone();
            let event = event.clone();
            std::thread::spawn(move || {
                let id = SessionId::generate();
                let meta =
                    SessionMeta::new(id.clone(), SessionKey::cli(&id), PathBuf::from("/p"), 0);
                store.create_session(&meta).expect("a session");
                (0..n)
                    .map(|_| {
                        let start = Instant::now();
                        black_box(store.append(&id, &event).expect("append"));
                        start.elapsed()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut times: Vec<Duration> = threads
        .into_iter()
        .flat_map(|thread| thread.join().expect("a thread"))
        .collect();
    times.sort();
    println!(
        "manager/20 appenders: {} durable appends from 20 threads at once, nothing else \
         running: p50 {:.0} µs, p99 {:.0} µs; {} fsyncs",
        times.len(),
        quantile_us(&times, 0.5),
        quantile_us(&times, 0.99),
        store.durable_commits()
    );
}

/// Makes the project a git repository of `files` committed files, one of them changed since.
fn make_repository(home: &TernHome, files: usize) {
    home.git(&["init", "--quiet"]);
    for n in 0..files {
        home.write_file(&format!("src/m{}/f{n}.rs", n % 40), "fn main() {}\n");
    }
    home.commit_all("files");
    home.write_file("src/m0/f0.rs", "fn main() { changed() }\n");
}

/// CPU time of the whole process so far (user and system), in milliseconds.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid starting value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

/// An input of session `s`: what a webhook delivers, or with `people` what a person types.
fn input_of(s: usize, i: usize, people: bool) -> UserInput {
    let text = format!("input {i} of session {s}");
    if people {
        return UserInput::local(text);
    }
    UserInput {
        sender: Sender {
            id: "webhook:bench".into(),
            name: "bench".into(),
            automated: true,
            trusted: false,
        },
        kind: InputKind::Webhook,
        ..UserInput::local(text)
    }
}

async fn twenty_sessions(inputs: usize, pause: Duration, repo_files: usize, people: bool) {
    let home = TernHome::new();
    if repo_files > 0 {
        make_repository(&home, repo_files);
    }
    let mock = MockProvider::start().await;
    mock.repeat(Reply::text("ok"));
    mock.disable_recording();
    let manager = Arc::new(SessionManager::new(deps(&home, &mock, limits())));
    let project = home.project().canonicalize().expect("the project");
    let started = Instant::now();
    let cpu_before = cpu_ms();
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let manager = manager.clone();
            let project = project.clone();
            tokio::spawn(async move {
                let key = format!("webhook:bench/{s}");
                let mut acks = Vec::with_capacity(inputs);
                for i in 0..inputs {
                    let message = SendUserMessage {
                        key: key.clone(),
                        input: input_of(s, i, people),
                        project_dir: project.clone(),
                    };
                    let start = Instant::now();
                    manager.send(message).await.expect("delivered");
                    acks.push(start.elapsed());
                    // The next input waits for this turn, as a person would.
                    let key = SessionKey::parse(&key).expect("a key");
                    let handle = manager.handle(&key, &project).await.expect("a session");
                    handle.state().await.expect("idle");
                    tokio::time::sleep(pause).await;
                }
                acks
            })
        })
        .collect();
    let (mut firsts, mut acks) = (Vec::new(), Vec::new());
    for task in tasks {
        let mut times = task.await.expect("a task").into_iter();
        firsts.extend(times.next());
        acks.extend(times);
    }
    let elapsed = started.elapsed();
    let cpu_per_turn = (cpu_ms() - cpu_before) / (SESSIONS * inputs) as f64;
    acks.sort();
    firsts.sort();
    println!(
        "manager/20 sessions, {} ms between turns: first inputs (each opens its session): \
         p50 {:.0} µs, max {:.0} µs",
        pause.as_millis(),
        quantile_us(&firsts, 0.5),
        quantile_us(&firsts, 1.0),
    );
    println!(
        "manager/20 sessions, {} ms between turns: {} inputs acknowledged after their durable \
         append: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs; {:.1} s in all, CPU {:.2} ms a turn \
         (the mock's included){}",
        pause.as_millis(),
        acks.len(),
        quantile_us(&acks, 0.5),
        quantile_us(&acks, 0.99),
        quantile_us(&acks, 1.0),
        elapsed.as_secs_f64(),
        cpu_per_turn,
        if repo_files > 0 {
            format!("; in a git repository of {repo_files} files")
        } else {
            String::new()
        } + if people {
            "; inputs typed by people"
        } else {
            "; webhook inputs"
        }
    );
    manager.close_all().await;
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let inputs = std::env::args()
        .skip_while(|arg| arg != "--inputs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benchmarking { 50 } else { 2 });
    let repo_files = std::env::args()
        .skip_while(|arg| arg != "--repo-files")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let people = std::env::args().any(|arg| arg == "--people");
    // The threads of tern's main runtime ask for a short time slice, as in `tern`; the
    // mock's own runtime, standing for a provider's servers, keeps the default.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(|| {
            tern::priority::favour_latency();
        })
        .enable_all()
        .build()
        .expect("a runtime");
    check_alone();
    runtime.block_on(with_and_without_observer(if benchmarking {
        2000
    } else {
        20
    }));
    twenty_appenders(inputs * 4);
    runtime.block_on(twenty_sessions(inputs, Duration::ZERO, repo_files, people));
    runtime.block_on(twenty_sessions(
        inputs.min(20),
        Duration::from_millis(500),
        repo_files,
        people,
    ));
}
