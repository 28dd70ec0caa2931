//! `tern run` and subagents: a headless run waits for the subagents its turn sent and for the
//! turn their notice starts, and prints that turn's answer too.

use super::*;

#[test]
fn tern_run_waits_for_its_subagents_and_prints_the_turn_their_notice_starts() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-RUN: list the files.", "agent": "explorer"}),
    ));
    cli.mock.push(Reply::text("An explorer is on it."));
    cli.mock.push_for_input(
        "MARKER-RUN",
        Reply::text("There are two files.").delay_before(Duration::from_millis(300)),
    );
    cli.mock.push(Reply::text("The explorer found two files."));
    let output = cli.run(&["run", "what files are there?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = stdout(&output);
    assert!(printed.contains("An explorer is on it."), "{printed}");
    assert!(
        printed.contains("The explorer found two files."),
        "{printed}"
    );
    // Parent: the spawn, the answer, the notice's answer; the child: its one call.
    assert_eq!(cli.mock.model_requests().len(), 4);
}
