//! What trust under faults costs and how fast a damaged store comes back, measured on the real
//! binary (plain timing; medians of several runs):
//!
//! - fsyncs and wall time of one tool turn (a read, a write and a command, as `tern run
//!   --approve all` does them), counted with `strace -f -c` when it is installed: the start
//!   of each call that can change things is one more durable commit;
//! - `tern doctor`'s check of a store of 500 sessions (about 20,000 journal records): the
//!   quick check (every page's checksum) and `--deep` (every record decoded);
//! - the same check beside a running tern, which copies the store for it (the time its
//!   writes are held off: `Store::copy_to` alone), and the whole command then;
//! - `tern doctor --repair` of that store with one page damaged, and with its header ruined so
//!   that everything must come from the scan of its bytes; the records recovered of those
//!   written.
//!
//! `cargo bench --bench faults` (builds the store under target/bench-data/ on its first run).
//! `TERN_BIN=/path/to/tern` measures another build of tern instead (an older one, to compare
//! the turn's fsyncs).

#[allow(dead_code, unused_imports)]
#[path = "../tests/support/mock_provider/mod.rs"]
mod mock_provider;

use mock_provider::{MockProvider, Reply};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tern::domain::ToolResult;
use tern::domain::{Audience, ContentBlock, InputKind, Sender, SessionId, SessionKey, ToolCall};
use tern::store::{JournalEvent, SessionMeta, Store};

/// The binary measured: this build's, or `TERN_BIN`.
fn tern_bin() -> String {
    std::env::var("TERN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tern").to_owned())
}
const RUNS: usize = 5;
const SESSIONS: usize = 500;
const TURNS: usize = 6;

fn main() {
    turn_fsyncs();
    let store = bench_store();
    doctor(&store);
    doctor_beside_an_owner(&store);
    repairs(&store);
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A throwaway TERN_HOME with a project folder.
fn home() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("tern");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&project).expect("project");
    std::fs::write(project.join("a.txt"), "a line\n".repeat(100)).expect("file");
    (dir, home, project)
}

/// One tool turn: fsyncs (with strace) and wall time (without).
fn turn_fsyncs() {
    let mock = MockProvider::start_blocking();
    mock.disable_recording();
    let turn = |mock: &MockProvider| {
        mock.push(Reply::tool_calls([
            ("file_read", json!({"path": "a.txt"})),
            (
                "file_write",
                json!({"path": "b.txt", "content": "written\n"}),
            ),
            ("shell_execute", json!({"command": "echo ran"})),
        ]));
        mock.push(Reply::text("Done."));
    };
    let tern = |home: &Path, project: &Path, mock: &MockProvider| {
        let mut command = Command::new(tern_bin());
        command
            .args(["run", "--approve", "all", "read, write and run"])
            .current_dir(project)
            .env("TERN_HOME", home)
            .env("ANTHROPIC_API_KEY", "bench-key")
            .env("ANTHROPIC_BASE_URL", mock.base_url())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    };
    let mut walls = Vec::new();
    for _ in 0..RUNS {
        let (_dir, home, project) = home();
        turn(&mock);
        let started = Instant::now();
        let status = tern(&home, &project, &mock).status().expect("tern");
        walls.push(started.elapsed());
        assert!(status.success());
    }
    println!(
        "one tool turn (read, write, command), whole process: median {:.1} ms",
        median(walls).as_secs_f64() * 1000.0
    );
    let strace = Command::new("strace").arg("-V").output();
    if strace.is_err() {
        println!("fsyncs per turn: strace is not installed (apt-get install strace)");
        return;
    }
    let (dir, home, project) = home();
    turn(&mock);
    let summary = dir.path().join("strace.txt");
    let command = tern(&home, &project, &mock);
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let status = Command::new("strace")
        .args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&summary)
        .arg(program)
        .args(args)
        .current_dir(&project)
        .envs(
            command
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("strace");
    assert!(status.success());
    let text = std::fs::read_to_string(&summary).unwrap_or_default();
    let count = |name: &str| {
        text.lines()
            .find(|line| line.split_whitespace().last() == Some(name))
            .and_then(|line| line.split_whitespace().nth(3))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    println!(
        "fsyncs in that turn (a new session, two model calls): fsync {}, fdatasync {}",
        count("fsync"),
        count("fdatasync")
    );
}

/// A store of SESSIONS sessions of TURNS tool turns each, built once.
fn bench_store() -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/faults");
    let path = dir.join("tern.redb");
    if let Ok(bytes) = std::fs::read(&path) {
        return bytes;
    }
    std::fs::create_dir_all(&dir).expect("bench dir");
    let store = Store::open(&path).expect("open");
    for s in 0..SESSIONS {
        let id = SessionId::from_string(format!("0198bbbb-0000-7000-8000-{s:012}"));
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/work/p".into(), s as i64);
        store.create_session(&meta).expect("create");
        for t in 0..TURNS {
            let call = format!("call-{s}-{t}");
            let output: String = (0..60)
                .map(|i| format!("line {i} of output {t}\n"))
                .collect();
            store
                .append_batch(
                    &id,
                    &[
                        JournalEvent::InputAccepted {
                            sender: Sender::local_user(),
                            audience: Audience::Personal,
                            kind: InputKind::Person,
                            text: format!("question {t} of session {s}"),
                        },
                        JournalEvent::AssistantMessage {
                            model: "m".into(),
                            content: vec![ContentBlock::ToolUse(ToolCall {
                                id: call.clone(),
                                name: "file_read".into(),
                                input: json!({"path": format!("f{t}.rs")}),
                            })],
                        },
                        JournalEvent::ToolResults {
                            results: vec![ToolResult::ok(call, output)],
                            took_ms: None,
                        },
                        JournalEvent::AssistantMessage {
                            model: "m".into(),
                            content: vec![ContentBlock::Text {
                                text: format!("Answer {t}."),
                            }],
                        },
                        JournalEvent::completed(),
                    ],
                )
                .expect("append");
        }
    }
    drop(store);
    std::fs::read(&path).expect("read")
}

/// A TERN_HOME whose database is `bytes`.
fn with_store(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("tern");
    std::fs::create_dir_all(home.join("data")).expect("data");
    std::fs::write(home.join("data/tern.redb"), bytes).expect("write");
    (dir, home)
}

fn doctor_run(home: &Path, args: &[&str]) -> (Duration, String) {
    let started = Instant::now();
    let output = Command::new(tern_bin())
        .arg("doctor")
        .args(args)
        .env("TERN_HOME", home)
        .env("OLLAMA_HOST", "127.0.0.1:9")
        .output()
        .expect("tern doctor");
    (
        started.elapsed(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

fn doctor(store: &[u8]) {
    println!(
        "store: {SESSIONS} sessions, {} journal records, {:.1} MB",
        SESSIONS * TURNS * 5,
        store.len() as f64 / 1e6
    );
    for (name, args) in [("quick", vec![]), ("deep", vec!["--deep"])] {
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let (_dir, home) = with_store(store);
            let (took, said) = doctor_run(&home, &args);
            assert!(said.contains("healthy"), "{said}");
            times.push(took);
        }
        println!(
            "tern doctor, {name} check (whole command, providers probed too): median {:.0} ms",
            median(times).as_secs_f64() * 1000.0
        );
    }
}

/// `tern doctor` while a line-mode tern owns the store: the owner copies the file (its
/// writes held off meanwhile) and the doctor checks the copy.
fn doctor_beside_an_owner(store: &[u8]) {
    let (dir, home) = with_store(store);
    let mut copies = Vec::new();
    {
        let opened = Store::open(&home.join("data/tern.redb")).expect("the store");
        for _ in 0..RUNS {
            let copy = dir.path().join("copy.redb");
            let started = Instant::now();
            opened.copy_to(&copy).expect("a copy");
            copies.push(started.elapsed());
            std::fs::remove_file(&copy).expect("removed");
        }
    }
    let mut owner = Command::new(tern_bin())
        .env("TERN_HOME", &home)
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("an owner");
    let socket = home.join("data/run/tern.sock");
    let waited = Instant::now();
    while !socket.exists() && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let (took, said) = doctor_run(&home, &[]);
        assert!(
            said.contains("healthy") && said.contains("running tern"),
            "{said}"
        );
        times.push(took);
    }
    drop(owner.stdin.take());
    let _ = owner.wait();
    println!(
        "tern doctor beside a running tern: the owner's copy (writes held off) median {:.1} ms; \
         whole command median {:.0} ms",
        median(copies).as_secs_f64() * 1000.0,
        median(times).as_secs_f64() * 1000.0
    );
}

/// A way of damaging a copy of the store.
type Damage = fn(&mut Vec<u8>);

fn repairs(store: &[u8]) {
    let written = (SESSIONS * TURNS * 5) as u64;
    let cases: [(&str, Damage); 2] = [
        ("one page damaged", |bytes| {
            let page = bytes.len() / 4096 / 2;
            for b in &mut bytes[page * 4096..page * 4096 + 256] {
                *b ^= 0x5a;
            }
        }),
        ("header ruined (everything from the scan)", |bytes| {
            bytes[..4096].fill(0xA5);
        }),
    ];
    for (name, damage) in cases {
        let mut times = Vec::new();
        let mut recovered = 0;
        for _ in 0..RUNS {
            let mut bytes = store.to_vec();
            damage(&mut bytes);
            let (_dir, home) = with_store(&bytes);
            let (took, said) = doctor_run(&home, &["--repair"]);
            times.push(took);
            if said.contains("is healthy") {
                // The damage fell on a free page: nothing was lost.
                recovered = written;
                continue;
            }
            recovered = said
                .lines()
                .find(|l| l.starts_with("Recovered "))
                .and_then(|l| l.split(", ").nth(1))
                .and_then(|part| part.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
        println!(
            "tern doctor --repair, {name}: median {:.0} ms; {recovered} of {written} records \
             recovered",
            median(times).as_secs_f64() * 1000.0
        );
    }
}
