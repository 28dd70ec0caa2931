//! A long session against a small context window: how compaction holds the prompt in.
//!
//! A scripted 300-turn session runs through the real session (redb journal in a temp dir,
//! real tools on a real project directory) against the mock provider on 127.0.0.1 with a
//! 32k-token window. Every turn reads one file of 2 to 20 KB and answers; compaction notes come
//! from a separate notes model on the same mock. The mock counts a request's input tokens as
//! its body size / 4.
//!
//! Reported: the number of compactions; the peak request size as a fraction of the window
//! (goal: never above 0.80); each compaction's estimated size after, and the size of the
//! request right after it (goal: at most 0.5 of the window); the time each compaction spent
//! deciding what to keep, the notes call excluded (goal: at most 5 ms).
//!
//! Run with `cargo bench --bench long_session` (add `-- --turns N` for another length, and
//! `-- --window N` for another window: at 4096 the prompt is the compact one and most files
//! are larger than what a result may keep whole, so their middle is cut).

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "common/mod.rs"]
mod common;

use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use support::{MockProvider, Reply, TernHome};
use tern::config::{RetrySettings, SessionSettings};
use tern::llm::{self, ModelClient, ModelRoute, RetryPolicy};
use tern::session::{OutputFilter, SessionDeps, SessionEvent, SessionHandle, UserInput};
use tern::store::Store;
use tern::tools::{ApprovalMode, ToolRegistry};

/// The window unless `--window` names another.
const WINDOW: u64 = 32_000;

/// The number after `flag` on the command line.
fn arg<T: std::str::FromStr>(flag: &str) -> Option<T> {
    std::env::args()
        .skip_while(|arg| arg != flag)
        .nth(1)
        .and_then(|n| n.parse().ok())
}

fn main() {
    let turns = arg("--turns").unwrap_or(300);
    let window = arg("--window").unwrap_or(WINDOW);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mock = MockProvider::start_blocking();
    runtime.block_on(run(turns, window, mock));
}

async fn run(turns: usize, window: u64, mock: MockProvider) {
    let home = TernHome::new();
    // Files of 2 to 20 KB in 60-byte lines, so file_read shows them whole.
    let mut sizes = Vec::with_capacity(turns);
    for i in 0..turns {
        let kb = 2 + (i * 7919) % 19;
        let line = format!("{:059}\n", i);
        home.write_file(&format!("f{i}.txt"), &line.repeat(kb * 1024 / 60));
        sizes.push(kb);
        let read = Reply::tool_call("file_read", json!({"path": format!("f{i}.txt")}));
        mock.push_for_model("primary-model", read);
        let answer = Reply::text(format!("File {i} holds {kb} KB of numbers."));
        mock.push_for_model("primary-model", answer);
    }
    // Every request left unscripted is a notes call (the conversation's are scripted above).
    mock.repeat(Reply::text(
        "NOTES: the person had files read one by one; each answer said the file's size.",
    ));

    let profile = common::mock_profile(&mock, window);
    let route = |model: &str| ModelRoute::new(llm::provider_for(&profile), model, 1000, window);
    let settings = SessionSettings::default();
    let policy = RetryPolicy::new(&RetrySettings::default(), &settings);
    let store = Arc::new(Store::open(&home.home().join("data/tern.redb")).expect("a store"));
    let deps = Arc::new(SessionDeps {
        store,
        client: ModelClient::new(route("primary-model"), None, policy.clone()),
        tools: ToolRegistry::builtin(),
        settings,
        approval: ApprovalMode::Never,
        data_dir: home.home().join("data"),
        identity_dir: home.home().join("identity"),
        notes_client: Some(ModelClient::new(route("notes-model"), None, policy)),
        overrides: Default::default(),
        redactor: Default::default(),
        child_env: Default::default(),
        agents: Default::default(),
        jobs: Default::default(),
        mcp: None,
    });
    let project = home.project().canonicalize().expect("the project");
    let handle = SessionHandle::create(deps, project).expect("a session");
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");

    let started = Instant::now();
    let mut compactions = Vec::new();
    let mut failed = 0;
    for i in 0..turns {
        handle
            .send(UserInput::local(format!("How big is f{i}.txt?")))
            .await
            .expect("accepted");
        loop {
            let event = events.recv().await.expect("the session runs");
            match event {
                SessionEvent::Compacted {
                    tokens_before,
                    tokens_after,
                    work_micros,
                    notes,
                    ..
                } => compactions.push((tokens_before, tokens_after, work_micros, notes)),
                SessionEvent::TurnCompleted { .. } => break,
                SessionEvent::TurnFailed { message, .. } => {
                    failed += 1;
                    eprintln!("turn {i} failed: {message}");
                    break;
                }
                _ => {}
            }
        }
    }
    let elapsed = started.elapsed();
    handle.close().await;

    let requests: Vec<_> = mock
        .model_requests()
        .into_iter()
        .filter(|r| r.model() == Some("primary-model"))
        .collect();
    let tokens: Vec<u64> = requests
        .iter()
        .map(|r| r.raw_body.len() as u64 / 4)
        .collect();
    let peak = tokens.iter().copied().max().unwrap_or(0);
    // The first request after each compaction: the first whose history opens with new notes
    // (or a new marker).
    let mut after = Vec::new();
    let mut previous_first = String::new();
    for (request, tokens) in requests.iter().zip(&tokens) {
        let first = request.texts().first().cloned().unwrap_or_default();
        if first.starts_with("[compaction") && first != previous_first {
            after.push(*tokens);
        }
        previous_first = first;
    }
    let works: Vec<f64> = compactions.iter().map(|c| c.2 as f64 / 1000.0).collect();
    let max_work = works.iter().copied().fold(0.0, f64::max);
    let mut sorted = works.clone();
    sorted.sort_by(f64::total_cmp);
    let median_work = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    let worst_after = compactions.iter().map(|c| c.1).max().unwrap_or(0);
    let with_notes = compactions.iter().filter(|c| c.3).count();

    println!(
        "long session: {turns} turns, {} model requests, {failed} failed turns, {:.1} s",
        requests.len(),
        elapsed.as_secs_f64()
    );
    println!(
        "  files read: 2–20 KB (mean {:.1} KB)",
        sizes.iter().sum::<usize>() as f64 / turns as f64
    );
    println!(
        "  compactions: {} ({with_notes} with notes)",
        compactions.len()
    );
    println!(
        "  peak request: {peak} tokens = {:.3} of the {window}-token window (goal ≤ 0.80)",
        peak as f64 / window as f64
    );
    println!(
        "  after compaction (estimate): worst {worst_after} tokens = {:.3} of the window (goal ≤ 0.50)",
        worst_after as f64 / window as f64
    );
    if let Some(worst) = after.iter().max() {
        println!(
            "  first request after a compaction (as sent): worst {worst} tokens = {:.3} of the window",
            *worst as f64 / window as f64
        );
    }
    println!(
        "  compaction work, notes call excluded: median {median_work:.2} ms, max {max_work:.2} ms (goal ≤ 5 ms)"
    );
}
