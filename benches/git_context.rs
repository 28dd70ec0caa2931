//! The git working context on a big worktree: what every turn pays before the model is called.
//!
//! The bench builds, once, a repository of 100,000 committed files under
//! `<target>/bench-repos/`, then leaves a few files staged, modified and untracked. It measures
//! `tern::context::snapshot` two ways:
//! - a plain run that alternates `snapshot()` with `git status --porcelain` on the same
//!   repository and prints both medians and their ratio, the figures docs/performance.md quotes;
//! - criterion's `git_context` group, for comparisons between runs.
//!
//! Run with `cargo bench --bench git_context`. Under `cargo test` (no `--bench` flag) it runs
//! once against a repository of 1,000 files in a temp dir, as a smoke test.

use criterion::Criterion;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tern::context::{StatusCounts, snapshot};

/// Files in the benchmark repository.
const FILES: usize = 100_000;
/// Files per directory, about what a source tree holds.
const FILES_PER_DIR: usize = 100;
/// Alternating rounds in the plain measurement.
const ROUNDS: usize = 21;
/// The budget a turn gives the git working context.
const BUDGET: Duration = tern::context::GIT_BUDGET;

/// Runs git in `dir` with a fixed identity and no system or user configuration, so the
/// comparison does not depend on the machine's settings.
fn git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "user.name=Tern Bench",
            "-c",
            "user.email=bench@tern.invalid",
            "-c",
            "commit.gpgsign=false",
        ]);
    command
}

fn run_git(dir: &Path, args: &[&str]) {
    let output = git(dir).args(args).output().expect("running git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `git status --porcelain`, the comparison point; returns its output size so the work is
/// not optimised away.
fn git_status(dir: &Path) -> usize {
    let output = git(dir)
        .args(["status", "--porcelain"])
        .output()
        .expect("running git status");
    assert!(output.status.success(), "git status failed");
    output.stdout.len()
}

/// The target directory: `CARGO_TARGET_DIR` when set, else the one holding this binary
/// (`<target>/release/deps/git_context-…`).
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("locating the bench binary");
    exe.ancestors()
        .nth(3)
        .expect("the bench binary sits three levels below the target dir")
        .to_path_buf()
}

/// Writes `files` small files in directories of [`FILES_PER_DIR`] and commits them all.
fn build_repo(dir: &Path, files: usize) {
    std::fs::create_dir_all(dir).expect("creating the bench repository");
    run_git(dir, &["init", "--quiet", "--initial-branch=main"]);
    for i in 0..files {
        let (group, sub, file) = (
            i / (FILES_PER_DIR * 10),
            i / FILES_PER_DIR % 10,
            i % FILES_PER_DIR,
        );
        let subdir = dir.join(format!("m{group:03}/s{sub}"));
        if file == 0 {
            std::fs::create_dir_all(&subdir).expect("creating a bench dir");
        }
        let contents = format!("// file {i}\npub fn f{i}() -> usize {{ {i} }}\n");
        std::fs::write(subdir.join(format!("f{file:03}.rs")), contents)
            .expect("writing a bench file");
    }
    run_git(dir, &["add", "--all"]);
    run_git(dir, &["commit", "--quiet", "-m", "Add the benchmark files"]);
}

/// The shared 100,000-file repository, built on first use. A marker beside it (not inside,
/// where it would show as untracked) records that the build finished.
fn shared_repo() -> PathBuf {
    let root = target_dir().join("bench-repos");
    let dir = root.join(format!("files-{FILES}"));
    let ready = root.join(format!("files-{FILES}.ready"));
    if !ready.exists() {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).expect("removing a half-built bench repository");
        }
        println!(
            "git_context: building {} ({FILES} files, once)",
            dir.display()
        );
        let start = Instant::now();
        build_repo(&dir, FILES);
        std::fs::write(&ready, "").expect("marking the bench repository ready");
        println!(
            "git_context: built in {:.1} s",
            start.elapsed().as_secs_f64()
        );
    }
    dir
}

/// Leaves 2 files staged, 3 modified and 4 untracked entries (one a directory of 50 files),
/// starting from a clean worktree so the state is the same whether the repository is new or
/// reused.
fn make_changes(dir: &Path) -> StatusCounts {
    run_git(dir, &["reset", "--quiet", "--hard"]);
    run_git(dir, &["clean", "--quiet", "--force", "-d"]);
    for file in ["m000/s0/f000.rs", "m000/s0/f001.rs"] {
        std::fs::write(dir.join(file), "// staged for the benchmark\n").expect("editing");
        run_git(dir, &["add", file]);
    }
    for file in ["m000/s1/f010.rs", "m000/s2/f020.rs", "m000/s3/f030.rs"] {
        std::fs::write(dir.join(file), "// modified for the benchmark\n").expect("editing");
    }
    for file in ["notes.txt", "m000/scratch.rs", "m000/s5/todo.md"] {
        std::fs::write(dir.join(file), "untracked\n").expect("writing an untracked file");
    }
    let scratch = dir.join("scratch-dir");
    std::fs::create_dir_all(&scratch).expect("creating an untracked dir");
    for i in 0..50 {
        std::fs::write(scratch.join(format!("s{i}.txt")), "untracked\n").expect("writing");
    }
    StatusCounts {
        staged: 2,
        modified: 3,
        untracked: 4,
        conflicted: 0,
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Alternates `snapshot()` and `git status --porcelain` for `rounds` rounds and prints both
/// medians and their ratio.
fn plain_comparison(dir: &Path, files: usize, rounds: usize) {
    let mut ours = Vec::with_capacity(rounds);
    let mut theirs = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        black_box(snapshot(dir).expect("reading the snapshot"));
        ours.push(start.elapsed());
        let start = Instant::now();
        black_box(git_status(dir));
        theirs.push(start.elapsed());
    }
    let worst = ours.iter().max().copied().unwrap_or_default();
    let (ours, theirs) = (median(&mut ours), median(&mut theirs));
    println!(
        "git_context/plain: {files} files, {rounds} rounds: snapshot() median {:.1} ms \
         (max {:.1} ms), git status --porcelain median {:.1} ms, ratio {:.2}x; budget {} s",
        ms(ours),
        ms(worst),
        ms(theirs),
        ours.as_secs_f64() / theirs.as_secs_f64(),
        BUDGET.as_secs(),
    );
}

fn criterion_group(c: &mut Criterion, dir: &Path) {
    let mut group = c.benchmark_group("git_context");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("snapshot_100k_files", |b| {
        b.iter(|| black_box(snapshot(dir).expect("reading the snapshot")))
    });
    group.bench_function("git_status_porcelain_100k_files", |b| {
        b.iter(|| black_box(git_status(dir)))
    });
    group.finish();
}

fn main() {
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    if !benchmarking {
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().join("repo");
        build_repo(&dir, 1_000);
        let expected = make_changes(&dir);
        assert_eq!(snapshot(&dir).expect("snapshot").counts, expected);
        plain_comparison(&dir, 1_000, 3);
        return;
    }

    let dir = shared_repo();
    let expected = make_changes(&dir);
    // A first `git status` refreshes the index, as any recent git command in a real worktree
    // would have; both sides then start from the same index.
    git_status(&dir);
    let counts = snapshot(&dir).expect("reading the snapshot").counts;
    assert_eq!(counts, expected, "the snapshot counts what was changed");
    plain_comparison(&dir, FILES, ROUNDS);

    let mut criterion = Criterion::default().configure_from_args();
    criterion_group(&mut criterion, &dir);
    criterion.final_summary();
}
