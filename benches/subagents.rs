//! Subagent runs: what a `spawn_agent` call costs the turn that makes it, and how long a run's
//! worktree takes to be ready on a large repository.
//!
//! - `spawn`: `AgentRuns::spawn` through a real manager over a real store, the parent
//!   session stored: the run accepted, its folder and `task.md` written, its task started;
//!   p50 and p99 over N spawns, each run cancelled at once so the queue stays short (goal
//!   ≤ 5 ms).
//! - `worktree`: `agents::worktree::create` on a git repository of 10,000 committed files
//!   (goal ≤ 1 s), median of 5.
//!
//! Run with `cargo bench --bench subagents`.

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

#[path = "common/mod.rs"]
mod common;

use common::{deps, quantile_us};
use std::sync::Arc;
use std::time::Instant;
use support::{MockProvider, Reply, TernHome};
use tern::agents::worktree;
use tern::config::MaintenanceSettings;
use tern::domain::Audience;
use tern::gateway::{SendUserMessage, SessionManager};
use tern::session::UserInput;
use tern::tools::ApprovalMode;
use tern::tools::agents::{AgentRuns, SpawnRequest};

async fn spawns(n: usize) {
    let home = TernHome::new();
    let mock = MockProvider::start().await;
    // The runs are cancelled before they call; the parent's one turn is all the mock sees.
    mock.repeat(Reply::text("ok"));
    let manager = Arc::new(SessionManager::new(deps(
        &home,
        &mock,
        MaintenanceSettings::default(),
    )));
    manager.enable_subagents();
    let project = home.project().canonicalize().expect("the project");
    let delivered = manager
        .send(SendUserMessage {
            key: "cli:bench-parent".into(),
            input: UserInput::local("hello"),
            project_dir: project.clone(),
        })
        .await
        .expect("a parent");
    let parent = delivered.session;
    let runs = manager.runs().clone();
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let request = SpawnRequest {
            parent: parent.clone(),
            task: format!("task {i}: look at the parser"),
            agent: Some("explorer".into()),
            isolation: None,
            project_dir: project.clone(),
            cwd: project.clone(),
            recent_files: Vec::new(),
            audience: Audience::Personal,
            approval: ApprovalMode::Never,
        };
        let start = Instant::now();
        let run = runs.spawn(request).expect("accepted");
        took.push(start.elapsed());
        runs.check(&parent, &run, true).expect("cancelled");
    }
    took.sort();
    println!(
        "subagents/spawn: {n} spawn_agent calls answered: p50 {:.0} µs, p99 {:.0} µs (goal ≤ 5 ms)",
        quantile_us(&took, 0.5),
        quantile_us(&took, 0.99)
    );
    manager.close_all().await;
}

fn worktrees(files: usize, rounds: usize) {
    let home = TernHome::new();
    let project = home.project().to_path_buf();
    for i in 0..files {
        let dir = project.join(format!("src/m{:03}", i / 100));
        std::fs::create_dir_all(&dir).expect("a folder");
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() {{}}\n"),
        )
        .expect("a file");
    }
    home.commit_all("many files");
    let mut took = Vec::new();
    for round in 0..rounds {
        let at = home.home().join(format!("worktrees/run-{round}"));
        let start = Instant::now();
        worktree::create(&project, &project, &at, &format!("run-{round}")).expect("a worktree");
        took.push(start.elapsed());
    }
    took.sort();
    println!(
        "subagents/worktree: a worktree of a {files}-file repository ready: median {:.0} ms \
         (min {:.0}, max {:.0}; goal ≤ 1 s)",
        took[took.len() / 2].as_secs_f64() * 1e3,
        took[0].as_secs_f64() * 1e3,
        took[took.len() - 1].as_secs_f64() * 1e3,
    );
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(spawns(if benchmarking { 500 } else { 5 }));
    let (files, rounds) = if benchmarking { (10_000, 5) } else { (50, 1) };
    worktrees(files, rounds);
}
