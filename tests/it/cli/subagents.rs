//! `tern run` and subagents: a headless run waits for the subagents its turn sent and for the
//! turn their notice starts, and prints that turn's answer too.

use super::tmux::Tmux;
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

#[test]
fn the_interface_shows_each_run_live_in_a_pane_while_the_conversation_goes_on() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::tool_calls([
        (
            "spawn_agent",
            json!({"task": "MARKER-PANE-A: explore.", "agent": "explorer"}),
        ),
        (
            "spawn_agent",
            json!({"task": "MARKER-PANE-B: review.", "agent": "reviewer"}),
        ),
    ]));
    cli.mock.push(Reply::text("Both are working."));
    let slow = |words: &str| Reply::text(words).delay_between_events(Duration::from_millis(150));
    cli.mock.push_for_input(
        "MARKER-PANE-A",
        slow("exploring the parser module step by step and taking notes as it goes along"),
    );
    cli.mock.push_for_input(
        "MARKER-PANE-B",
        slow("reviewing the diff one hunk at a time with care for every changed line here"),
    );
    cli.mock.repeat(Reply::text("Noted the result."));
    let tmux = Tmux::start(&cli, &[]);
    tmux.resize(160, 40);
    tmux.wait_for("message tern");
    tmux.type_text("send two subagents");
    tmux.keys(&["Enter"]);
    // Both panes stream beside the transcript while the runs work.
    let screen = tmux.wait_for("● explorer");
    assert!(screen.contains("reviewer"), "{screen}");
    tmux.wait_for("exploring the parser");
    tmux.wait_for("Both are working.");
    // The person talks to the main session meanwhile.
    tmux.type_text("meanwhile, hello");
    tmux.keys(&["Enter"]);
    tmux.wait_for("› meanwhile, hello");
    // Each run ends, its pane says so, and its notice reaches the main session.
    tmux.wait_for("✓ explorer");
    tmux.wait_for("[subagent run");
    tmux.wait_for("Noted the result.");
    // The latest result is a key away.
    tmux.keys(&["C-r"]);
    tmux.wait_for("result.md:");
}

#[test]
fn a_runs_approval_is_asked_in_the_interface_naming_the_run() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-ASK: write notes.txt."}),
    ));
    cli.mock.push(Reply::text("It is on its way."));
    cli.mock.push_for_input(
        "MARKER-ASK",
        Reply::tool_call(
            "file_write",
            json!({"path": "notes.txt", "content": "from the run\n"}),
        ),
    );
    cli.mock
        .push_for_input("MARKER-ASK", Reply::text("I wrote notes.txt."));
    cli.mock.repeat(Reply::text("The run wrote the notes."));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("write the notes in the background");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("approval needed · subagent general (run-");
    assert!(screen.contains("notes.txt"), "{screen}");
    assert!(
        !cli.home.project().join("notes.txt").exists(),
        "nothing before the answer"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("The run wrote the notes.");
    assert_eq!(
        std::fs::read_to_string(cli.home.project().join("notes.txt")).unwrap(),
        "from the run\n"
    );
}

#[test]
fn stream_json_says_when_each_run_starts_and_ends_and_can_carry_its_events() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-JSON: look.", "agent": "explorer"}),
    ));
    cli.mock.push(Reply::text("Sent."));
    cli.mock
        .push_for_input("MARKER-JSON", Reply::text("Looked everywhere."));
    cli.mock.push(Reply::text("It looked."));
    let output = cli.run(&[
        "run",
        "--output-format",
        "stream-json",
        "--include-subagents",
        "look around",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let of_type =
        |kind: &str| -> Vec<&Value> { lines.iter().filter(|line| line["type"] == kind).collect() };
    let started = of_type("subagent_started");
    assert_eq!(started.len(), 1, "{lines:?}");
    let run = started[0]["run_id"].as_str().unwrap();
    let finished = of_type("subagent_finished");
    assert_eq!(finished.len(), 1, "{lines:?}");
    assert_eq!(finished[0]["run_id"], run);
    assert_eq!(finished[0]["state"], "completed");
    assert_eq!(finished[0]["agent"], "explorer");
    assert!(
        finished[0]["result_path"]
            .as_str()
            .unwrap()
            .ends_with("result.md")
    );
    // The child's own events, tagged with its run: live, or from its journal when it had
    // worked before it was followed.
    assert!(
        lines.iter().any(|line| line["run_id"] == run
            && (line["type"] == "turn_completed"
                || (line["type"] == "subagent_journal"
                    && line["event"]["type"] == "turn_completed"))),
        "{lines:?}"
    );
    // Both of the parent's turns ended in the stream.
    let ends = lines
        .iter()
        .filter(|line| line["type"] == "turn_completed" && line.get("run_id").is_none())
        .count();
    assert_eq!(ends, 2, "{lines:?}");
}

#[test]
fn a_background_job_does_not_outlive_the_tern_that_started_it() {
    let cli = Cli::new();
    let marker = format!("tern-job-marker-{}", std::process::id());
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": format!("echo {marker} started; sleep 60; echo {marker} done"), "background": true}),
    ));
    cli.mock.push(Reply::text("Started."));
    let output = cli.run(&["run", "--approve", "all", "start a long job"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Started."));
    let running = || {
        std::process::Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .map(|out| out.status.success())
            .unwrap_or(false)
    };
    // It ran: its log says so.
    let logs = cli.home.home().join("data/sessions");
    let log = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|session| session.path().join("logs/jobs/job-1.log"))
        .find(|path| path.exists())
        .expect("the job's log");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log).unwrap().contains("started") {
        assert!(std::time::Instant::now() < deadline, "the job never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while running() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job outlived tern"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
