//! The crash harness: the real binary runs tool-using turns against the mock provider and is
//! killed with SIGKILL at random moments (journal writes included), again and again; then
//! every input whose acknowledgement was seen must be in the journal, the session must
//! recover, no tool call may be left without its result (or a result without its call), and
//! the session index must agree with the journal. Every turn also runs a shell command with a
//! side effect (a line appended to a file); a command tern was killed during may well finish
//! after it died, so no command whose effect happened may ever be reported "not run".
//!
//! CI runs 60 kills. `TERN_CRASH_KILLS=1000 cargo test --test it crash -- --nocapture` runs a
//! long one; `TERN_CRASH_SEED` replays a given run.

use crate::support::{MockProvider, Reply, TernHome};
use serde_json::json;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tern::domain::ContentBlock;
use tern::store::{JournalEvent, Store};

/// Kills in a default run.
const KILLS: usize = 60;

/// When a run is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This long after it started.
    After(Duration),
    /// This long after its input was acknowledged (or after 60 s without it).
    AfterAck(Duration),
}

/// One `tern run` killed as `kill` says; returns how long after its start its input was
/// acknowledged (its `input_accepted` line arrived) before the kill, if it was.
fn run_and_kill(
    home: &TernHome,
    mock: &MockProvider,
    text: &str,
    first: bool,
    kill: Kill,
) -> Option<Duration> {
    let mut args = vec!["run", "--output-format", "stream-json", "--approve", "all"];
    if !first {
        args.push("--continue");
    }
    args.push(text);
    let mut child = home
        .tern_process()
        .args(&args)
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting tern");
    let started = Instant::now();
    let acked: Arc<Mutex<Option<Duration>>> = Arc::default();
    let stdout = child.stdout.take().expect("stdout");
    let seen = acked.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("\"type\":\"input_accepted\"") {
                *seen.lock().unwrap() = Some(started.elapsed());
            }
        }
    });
    match kill {
        Kill::After(delay) => std::thread::sleep(delay),
        Kill::AfterAck(delay) => {
            while acked.lock().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(delay);
        }
    }
    // SIGKILL: no chance to clean up, as in a power cut or an OOM kill.
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    *acked.lock().unwrap()
}

#[test]
fn killing_tern_at_random_moments_loses_no_acknowledged_input() {
    let kills = std::env::var("TERN_CRASH_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(KILLS);
    let seed = std::env::var("TERN_CRASH_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("crash harness: {kills} kills, seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let home = TernHome::new();
    home.write_file("a.txt", &"a line to read\n".repeat(200));
    let mock = MockProvider::start_blocking();
    // Every turn reads, writes and reads again until the loop guard ends it: many journal
    // commits per turn, each a moment to be killed in.
    mock.repeat(
        Reply::tool_calls([
            ("file_read", json!({"path": "a.txt"})),
            (
                "file_write",
                json!({"path": "b.txt", "content": "written\n"}),
            ),
            (
                "shell_execute",
                json!({"command": "echo ran >> effects.log; sleep 0.02"}),
            ),
        ])
        .with_text("Working on it."),
    );

    let mut acknowledged = Vec::new();
    let mut started = false;
    // The kills fall within the time a run takes to acknowledge its input (or 120 ms),
    // measured on the first run, which is killed only after its acknowledgement: a machine
    // slowed by other work stretches the range instead of leaving every kill too early.
    let mut span = Duration::from_millis(120);
    for i in 0..kills {
        let text = format!("message {i}");
        let kill = if i == 0 {
            Kill::AfterAck(Duration::from_millis(rng.u64(0..60)))
        } else {
            Kill::After(Duration::from_millis(rng.u64(0..=span.as_millis() as u64)))
        };
        let acked = run_and_kill(&home, &mock, &text, !started, kill);
        if let Some(after) = acked {
            if i == 0 {
                span = span.max(after);
            }
            acknowledged.push(text);
            started = true;
        } else if !started {
            // The first session may not exist yet; check the store before continuing it.
            started = Store::open(&home.home().join("data/tern.redb"))
                .ok()
                .and_then(|store| store.list().ok())
                .is_some_and(|sessions| !sessions.is_empty());
        }
    }
    assert!(
        !acknowledged.is_empty(),
        "no run got as far as an acknowledgement"
    );

    // The session recovers: one more run completes normally.
    let last = home
        .tern()
        .args(["run", "--continue", "--approve", "all", "and now stop"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .timeout(Duration::from_secs(60))
        .output()
        .expect("running tern");
    // The turn repeats its calls until the loop guard ends it, which `tern run` reports
    // with exit code 3 (a complete run, its work perhaps not).
    assert_eq!(
        last.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );

    let store = Store::open(&home.home().join("data/tern.redb")).expect("the database opens");
    let sessions = store.list().expect("list");
    assert_eq!(sessions.len(), 1, "every run continued the one session");
    let meta = &sessions[0];
    let records = store.load(&meta.id).expect("load");

    // Every acknowledged input is in the journal.
    let inputs: HashSet<String> = records
        .iter()
        .filter_map(|r| match &r.event {
            JournalEvent::InputAccepted { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    for text in &acknowledged {
        assert!(inputs.contains(text), "acknowledged {text:?} is missing");
    }

    // No orphan call or result: each batch's calls are answered by the next results.
    let mut open: Vec<String> = Vec::new();
    for record in &records {
        match &record.event {
            JournalEvent::AssistantMessage { content, .. } => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered at seq {}",
                    record.seq
                );
                open = content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolUse(call) => Some(call.id.clone()),
                        _ => None,
                    })
                    .collect();
            }
            JournalEvent::ToolResults { results, .. } => {
                for result in results {
                    let at = open.iter().position(|id| *id == result.tool_use_id);
                    assert!(
                        at.is_some(),
                        "result {} without its call",
                        result.tool_use_id
                    );
                    open.retain(|id| *id != result.tool_use_id);
                }
            }
            JournalEvent::InputAccepted { .. } => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered at seq {}",
                    record.seq
                );
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");

    // No command whose effect happened is called "not run": each appended one line, so the
    // lines can be at most the commands not reported as never run.
    let mut commands: HashSet<String> = HashSet::new();
    let (mut not_run, mut unknown) = (0, 0);
    for record in &records {
        match &record.event {
            JournalEvent::AssistantMessage { content, .. } => {
                commands.extend(content.iter().filter_map(|b| match b {
                    ContentBlock::ToolUse(call) if call.name == "shell_execute" => {
                        Some(call.id.clone())
                    }
                    _ => None,
                }));
            }
            JournalEvent::ToolResults { results, .. } => {
                for result in results.iter().filter(|r| commands.contains(&r.tool_use_id)) {
                    if result.content.starts_with("not run") {
                        not_run += 1;
                    } else if result.content.starts_with("outcome unknown") {
                        unknown += 1;
                    }
                }
            }
            _ => {}
        }
    }
    // Commands still running when the last kill came finish on their own; give them the
    // time their sleep takes.
    std::thread::sleep(Duration::from_millis(300));
    let effects = std::fs::read_to_string(home.project().join("effects.log"))
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        effects <= commands.len() - not_run,
        "{effects} commands ran, but {not_run} of {} were reported not run",
        commands.len()
    );

    // The index agrees with the journal.
    assert_eq!(meta.event_count as usize, records.len());
    assert_eq!(meta.input_count as usize, inputs.len());
    let last_seq = records.last().map_or(0, |r| r.seq);
    assert_eq!(last_seq as usize, records.len(), "no gaps in the journal");
    let messages = records
        .iter()
        .filter(|r| {
            matches!(
                r.event,
                JournalEvent::InputAccepted { .. } | JournalEvent::AssistantMessage { .. }
            )
        })
        .count();
    assert_eq!(meta.message_count as usize, messages);
    // The running totals agree with the index they summarise.
    let listed = store.list().expect("list");
    let totals = store.totals();
    assert_eq!(totals.sessions as usize, listed.len());
    assert_eq!(
        totals.transcript_bytes,
        listed.iter().map(|m| m.transcript_bytes).sum::<u64>()
    );
    eprintln!(
        "crash harness: {} of {kills} runs acknowledged before the kill (killed within {} ms); \
         {} events; {} commands, {effects} of them ran, {not_run} reported not run, {unknown} \
         outcome unknown",
        acknowledged.len(),
        span.as_millis(),
        records.len(),
        commands.len()
    );
}
