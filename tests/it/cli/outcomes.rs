//! A tern killed while a command runs never tells the model the command did not run: the
//! command's start was journaled, so the next start answers it "outcome unknown", with what
//! it had printed before tern stopped (its spool), and the spool goes once that is journaled.

use super::*;
use std::path::{Path, PathBuf};

/// The spool files under the session folders of `home`.
fn spools(home: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(sessions) = std::fs::read_dir(home.join("data/sessions")) else {
        return found;
    };
    for session in sessions.flatten() {
        if let Ok(calls) = std::fs::read_dir(session.path().join("logs/calls")) {
            found.extend(calls.flatten().map(|entry| entry.path()));
        }
    }
    found
}

#[test]
fn a_command_running_when_tern_is_killed_is_reported_as_outcome_unknown_with_its_output() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_calls([(
        "shell_execute",
        json!({"command": "echo $$ > pid.txt; echo migrated table 3 of 9; sleep 30"}),
    )]));
    let mut tern = cli
        .home
        .tern_process()
        .args(["run", "--approve", "all", "migrate the database"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting tern");
    // Wait until the command has printed into its spool, then kill tern as a power cut would.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let spool = loop {
        let printed = spools(cli.home.home()).into_iter().find(|path| {
            std::fs::read_to_string(path).is_ok_and(|text| text.contains("migrated table"))
        });
        if let Some(path) = printed {
            break path;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never printed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    tern.kill().expect("kill");
    tern.wait().expect("wait");
    // The command lives on in its own process group; it is stopped here, not by tern.
    let pid: i32 = std::fs::read_to_string(cli.home.project().join("pid.txt"))
        .expect("the command wrote its pid")
        .trim()
        .parse()
        .expect("a pid");
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
    unsafe { libc::kill(-pid, libc::SIGKILL) };

    cli.mock
        .push(Reply::text("I will check the migration's state first."));
    let output = cli.run(&["run", "--continue", "--approve", "all", "go on"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let request = cli.mock.model_requests().pop().expect("a request");
    let result = request.raw_body;
    assert!(
        result.contains("outcome unknown: tern stopped while this ran; it may have completed"),
        "{result}"
    );
    assert!(result.contains("migrated table 3 of 9"), "{result}");
    assert!(!result.contains("not run"), "{result}");
    assert!(
        !spool.exists(),
        "the spool goes once the result is journaled"
    );
}

#[test]
fn a_finished_command_leaves_no_spool() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_calls([(
        "shell_execute",
        json!({"command": "echo done"}),
    )]));
    cli.mock.push(Reply::text("ok"));
    let output = cli.run(&["run", "--approve", "all", "run it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(spools(cli.home.home()), Vec::<PathBuf>::new());
}

/// What a batch journals, in order: a read's result and the start of a command in one
/// commit before the command runs; nothing started for the read, which changes nothing.
#[test]
fn the_start_of_a_call_that_can_change_things_is_journaled_before_it_runs() {
    use tern::store::JournalEvent;
    let cli = Cli::new();
    cli.home.write_file("a.txt", "hello\n");
    cli.mock.push(Reply::tool_calls([
        ("file_read", json!({"path": "a.txt"})),
        ("shell_execute", json!({"command": "echo ran"})),
    ]));
    cli.mock.push(Reply::text("ok"));
    let output = cli.run(&["run", "--approve", "all", "read then run"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let store = tern::store::Store::open(&cli.db()).expect("open");
    let session = store.list().expect("list").remove(0);
    let records = store.load(&session.id).expect("load");
    let calls: Vec<String> = records
        .iter()
        .find_map(|r| match &r.event {
            JournalEvent::AssistantMessage { content, .. } => Some(
                content
                    .iter()
                    .filter_map(|b| match b {
                        tern::domain::ContentBlock::ToolUse(call) => Some(call.id.clone()),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .expect("the calls");
    let batch: Vec<(u64, String)> = records
        .iter()
        .filter_map(|r| match &r.event {
            JournalEvent::ToolResults { results, .. } => Some((
                r.seq,
                format!(
                    "results {:?}",
                    results.iter().map(|x| &x.tool_use_id).collect::<Vec<_>>()
                ),
            )),
            JournalEvent::ToolCallsStarted { call_ids } => {
                Some((r.seq, format!("started {call_ids:?}")))
            }
            _ => None,
        })
        .collect();
    let shown: Vec<&str> = batch.iter().map(|(_, text)| text.as_str()).collect();
    assert_eq!(
        shown,
        [
            format!("results [{:?}]", calls[0]),
            format!("started [{:?}]", calls[1]),
            format!("results [{:?}]", calls[1]),
        ]
    );
    let at = |i: usize| {
        records
            .iter()
            .find(|r| r.seq == batch[i].0)
            .map(|r| r.at_ms)
    };
    assert_eq!(
        at(0),
        at(1),
        "the read's result and the start share one commit"
    );
}
