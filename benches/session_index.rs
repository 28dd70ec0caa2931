//! Listing the session index with 100,000 sessions: the first page of the most recently used
//! (what `tern sessions list` and the resume picker show first) against decoding the whole
//! index.
//!
//! The first run builds the database under `target/bench-data/` (100,000 durable commits,
//! about a minute); later runs reuse it. Run with `cargo bench --bench session_index`.

use criterion::Criterion;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tern::domain::{SessionId, SessionKey};
use tern::store::{SessionMeta, Store};

const SESSIONS: usize = 100_000;
const PAGE: usize = 50;

fn build(path: &Path) {
    let store = Store::open(path).expect("open store");
    for i in 0..SESSIONS {
        let id = SessionId::from_string(format!("session-{i:06}"));
        store
            .create_session(&SessionMeta {
                title: format!("Fix the flaky test number {i} in the scheduler"),
                updated_at_ms: i as i64 * 1000 + (i as i64 % 7) * 60_000,
                event_count: 40,
                input_count: 6,
                message_count: 12,
                transcript_bytes: 48_000,
                provider: "anthropic".into(),
                model: "claude-sonnet-4-5".into(),
                ..SessionMeta::new(
                    id.clone(),
                    SessionKey::cli(&id),
                    PathBuf::from(format!("/home/dev/project-{}", i % 40)),
                    i as i64 * 1000,
                )
            })
            .expect("create session");
    }
}

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/sessions-100000");
    let path = dir.join("tern.redb");
    let ready = dir.join("ready");
    if !ready.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("bench dir");
        eprintln!(
            "building a {SESSIONS}-session index under {} (once)",
            dir.display()
        );
        build(&path);
        std::fs::write(&ready, "").expect("mark ready");
    }
    let store = Store::open(&path).expect("open store");
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    let mut group = c.benchmark_group("session_index");
    group.bench_function("first_page_of_100k", |b| {
        b.iter(|| black_box(store.recent(PAGE, |_| true).expect("recent")))
    });
    group.bench_function("latest_for_a_project_of_100k", |b| {
        let project = PathBuf::from("/home/dev/project-3");
        b.iter(|| black_box(store.latest_for_project(&project).expect("latest")))
    });
    group.bench_function("whole_index_of_100k", |b| {
        b.iter(|| black_box(store.list().expect("list")))
    });
    group.finish();
    c.final_summary();
}
