//! Reopening a long session: recovery from its latest snapshot against a full replay.
//!
//! A 10,000-event session (2,000 turns of an input, a tool call, its ~1 KB result, an answer
//! and the turn's end, never compacted) is written once through the same commit path a
//! running session uses, snapshots every 20 events included. Criterion then measures:
//! - `recover_10k_from_snapshot`: `session::snapshot::recover`, what reopening a session
//!   does (latest snapshot decoded, the events after it replayed);
//! - `replay_10k_full`: loading and replaying the whole journal, for comparison.
//!
//! Run with `cargo bench --bench recovery` (the setup takes a few seconds: 2,000 durable
//! commits).

use criterion::Criterion;
use serde_json::json;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;
use tern::domain::{
    Audience, ContentBlock, InputKind, Sender, SessionId, SessionKey, ToolCall, ToolResult,
};
use tern::session::{SessionState, snapshot};
use tern::store::{JournalEvent, SessionMeta, Store};

const TURNS: usize = 2_000;

fn turn_events(i: usize) -> Vec<JournalEvent> {
    let call = ToolCall {
        id: format!("toolu_{i}"),
        name: "file_read".into(),
        input: json!({"path": format!("src/module_{}.rs", i % 50)}),
    };
    vec![
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: format!(
                "Question {i}: what does module {} do, and is it tested?",
                i % 50
            ),
        },
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: vec![ContentBlock::ToolUse(call)],
        },
        JournalEvent::ToolResults {
            results: vec![ToolResult::ok(
                format!("toolu_{i}"),
                format!("{:>6}\tpub fn item_{i}() -> u32 {{ {i} }}\n", i).repeat(24),
            )],
            took_ms: None,
        },
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: vec![ContentBlock::Text {
                text: format!("Module {} defines item_{i}; it has one test.", i % 50),
            }],
        },
        JournalEvent::completed(),
    ]
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store =
        std::sync::Arc::new(Store::open(&dir.path().join("tern.redb")).expect("open store"));
    let id = SessionId::generate();
    let project = PathBuf::from("/home/dev/project");
    store
        .create_session(&SessionMeta::new(
            id.clone(),
            SessionKey::cli(&id),
            project.clone(),
            0,
        ))
        .expect("create session");
    let mut state = SessionState::new(id.clone(), project.clone());
    for i in 0..TURNS {
        snapshot::commit(&store, 20, &mut state, &turn_events(i)).expect("commit");
    }
    let latest = store
        .latest_snapshot(&id)
        .expect("read")
        .expect("a snapshot");
    println!(
        "recovery: {} events, {} messages; latest snapshot at {} ({:.1} MiB)",
        state.last_seq,
        state.messages.len(),
        latest.seq,
        latest.state.len() as f64 / (1024.0 * 1024.0)
    );

    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    let mut group = c.benchmark_group("recovery");
    group.bench_function("recover_10k_from_snapshot", |b| {
        b.iter(|| {
            black_box(
                snapshot::recover(
                    &store,
                    &id,
                    project.clone(),
                    &project.join("no-spool"),
                    &Default::default(),
                )
                .expect("recover"),
            )
        })
    });
    group.bench_function("replay_10k_full", |b| {
        b.iter(|| {
            let records = store.load(&id).expect("load");
            black_box(SessionState::replay(id.clone(), project.clone(), &records))
        })
    });
    group.finish();
    c.final_summary();
}
