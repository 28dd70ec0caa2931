//! Durable journal appends: the latency an input waits for before tern acknowledges it.
//!
//! Two measurements of `Store::append` on a real redb file (each append is one transaction
//! committed with immediate durability, so an fsync):
//! - criterion's `journal` group, for comparisons between runs;
//! - a plain run of 2000 single appends, timed one by one, printing p50 and p99 in
//!   microseconds, the figures docs/performance.md quotes. Criterion reports means, which hide the tail
//!   that a person waiting on an acknowledgement notices.
//!
//! Run with `cargo bench --bench journal`. Under `cargo test` (no `--bench` flag) the plain run
//! shrinks to a smoke test.

use criterion::{BatchSize, Criterion, Throughput};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tern::domain::{Audience, ContentBlock, Sender, SessionId, SessionKey, ToolCall};
use tern::store::{JournalEvent, SessionMeta, Store};

/// Appends timed by the plain measurement.
const TIMED_APPENDS: usize = 2000;

/// A store in a fresh temp dir holding one empty session.
struct Bench {
    _dir: tempfile::TempDir,
    store: Store,
    id: SessionId,
}

impl Bench {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("tern.redb")).expect("open store");
        let id = SessionId::generate();
        store
            .create_session(&SessionMeta::new(
                id.clone(),
                SessionKey::cli(&id),
                PathBuf::from("/home/dev/project"),
                0,
            ))
            .expect("create session");
        Self {
            _dir: dir,
            store,
            id,
        }
    }
}

/// About 1 KB of prose, the size of a typical typed request.
fn prose() -> String {
    let sentence = "The session list should show the newest conversation first, and resuming \
                    one must replay its journal exactly as it was written. ";
    sentence.repeat(1024 / sentence.len() + 1)[..1000].to_owned()
}

/// An accepted input of about 1 KB of JSON.
fn input_event() -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender {
            id: "local".into(),
            name: "dev".into(),
            automated: false,
            trusted: true,
        },
        audience: Audience::Personal,
        kind: tern::domain::InputKind::Person,
        text: prose(),
    }
}

/// An assistant message of about 1 KB of JSON: some text and one tool call.
fn assistant_event() -> JournalEvent {
    let text = prose()[..700].to_owned();
    JournalEvent::AssistantMessage {
        model: "claude-sonnet-4-5".into(),
        content: vec![
            ContentBlock::Text { text },
            ContentBlock::ToolUse(ToolCall {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "read_file".into(),
                input: serde_json::json!({ "path": "src/store/db.rs", "offset": 120, "limit": 80 }),
            }),
        ],
    }
}

fn criterion_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("journal");
    group.throughput(Throughput::Elements(1));
    for (name, event) in [
        ("append_durable_input_1k", input_event()),
        ("append_durable_assistant_1k", assistant_event()),
    ] {
        let bench = Bench::new();
        group.bench_function(name, |b| {
            b.iter(|| black_box(bench.store.append(&bench.id, &event).expect("append")))
        });
    }
    // Opening an existing database: what `tern` pays at startup.
    group.bench_function("open_existing", |b| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tern.redb");
        drop(Store::open(&path).expect("create"));
        b.iter_batched(
            || (),
            |()| black_box(Store::open(&path).expect("reopen")),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// The `q`-quantile of sorted durations, in microseconds.
fn quantile_us(sorted: &[Duration], q: f64) -> f64 {
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index].as_secs_f64() * 1e6
}

/// Times single durable appends one by one and prints p50/p99, alternating input and
/// assistant events as a conversation does.
fn plain_percentiles(appends: usize) {
    let bench = Bench::new();
    let events = [input_event(), assistant_event()];
    let bytes: usize = events
        .iter()
        .map(|e| serde_json::to_vec(e).map_or(0, |v| v.len()))
        .sum::<usize>()
        / events.len();
    let mut times = Vec::with_capacity(appends);
    for i in 0..appends {
        let event = &events[i % events.len()];
        let start = Instant::now();
        black_box(bench.store.append(&bench.id, event).expect("append"));
        times.push(start.elapsed());
    }
    times.sort();
    let file_bytes = std::fs::metadata(bench.store.path()).map_or(0, |m| m.len());
    println!(
        "journal/plain: {appends} durable single-event appends (~{bytes} B of JSON each): \
         p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs; file {:.1} MB",
        quantile_us(&times, 0.50),
        quantile_us(&times, 0.99),
        quantile_us(&times, 1.0),
        file_bytes as f64 / 1e6,
    );
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    plain_percentiles(if benchmarking { TIMED_APPENDS } else { 20 });
    let mut criterion = Criterion::default().configure_from_args();
    criterion_group(&mut criterion);
    criterion.final_summary();
}
