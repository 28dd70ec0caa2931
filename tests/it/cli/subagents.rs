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
    // The child's session, which runs apart from its parent's, let the store go at the exit
    // too: it closed cleanly, and no owner is left named beside it.
    let beside = |suffix: &str| {
        let mut name = cli.db().into_os_string();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    assert!(beside(".clean").exists(), "the store was not closed");
    assert!(
        !beside(".owner").exists(),
        "the store's owner file was left"
    );
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

/// Starts `tern run` with a turn that starts `command` as a job and then stalls; kills tern
/// with SIGKILL once the process marked `marker` runs; the next `tern run --continue` must
/// leave nothing of it running and tell of it.
fn a_killed_tern_leaves(command: &str, marker: &str) {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": command, "background": true}),
    ));
    cli.mock
        .push(Reply::text("never finished").stall_after_events(2));
    let mut run = cli.home.tern_process();
    run.args(["run", "--approve", "all", "start the server"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut run = run.spawn().unwrap();
    cli.mock
        .wait_for_model_requests_blocking(2, Duration::from_secs(20));
    let pgrep = || {
        let out = std::process::Command::new("pgrep")
            .args(["-f", marker])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    // The job runs when tern dies: nothing of tern is left to stop it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pgrep().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pgrep().is_empty(), "the job died with tern by itself");

    cli.mock.push(Reply::text("It was reaped."));
    let output = cli.run(&["run", "--continue", "is the server up?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(pgrep().is_empty(), "the next start left the job running");
    let nudge = cli.mock.model_requests()[2].nudges().pop().unwrap();
    assert!(
        nudge.contains(&format!(
            "job 1: {command} (reaped: the tern that started it stopped without ending it"
        )),
        "{nudge}"
    );
    assert!(nudge.contains("[ended-background-jobs]"), "{nudge}");
    assert!(nudge.contains("logs/jobs/job-1.log"), "{nudge}");
}

#[test]
fn a_job_a_killed_tern_left_running_is_reaped_and_told_at_the_next_start() {
    let marker = format!("tern-reap-marker-{}", std::process::id());
    a_killed_tern_leaves(
        &format!("echo started; exec -a {marker} sleep 300"),
        &marker,
    );
}

#[test]
fn what_a_jobs_shell_left_when_tern_was_killed_is_reaped_at_the_next_start() {
    let marker = format!("tern-orphan-marker-{}", std::process::id());
    a_killed_tern_leaves(
        &format!("(exec -a {marker} sleep 300) & echo started"),
        &marker,
    );
}

/// The session folders' subagent runs: each run's folder.
fn run_dirs(cli: &Cli) -> Vec<std::path::PathBuf> {
    let sessions = cli.home.home().join("data/sessions");
    std::fs::read_dir(sessions)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|session| std::fs::read_dir(session.path().join("subagents")).into_iter())
        .flatten()
        .flatten()
        .map(|run| run.path())
        .collect()
}

#[test]
fn an_explorer_and_a_test_writer_in_its_worktree_run_at_once_and_its_tests_are_brought_in() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.home.write_file(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    cli.home.commit_all("start");
    cli.mock.push(Reply::tool_calls([
        (
            "spawn_agent",
            json!({"task": "MARKER-DONE-A: explain src/lib.rs.", "agent": "explorer"}),
        ),
        (
            "spawn_agent",
            json!({"task": "MARKER-DONE-B: write tests for add.", "isolation": "worktree"}),
        ),
    ]));
    cli.mock.push(Reply::text("Both are on it."));
    let slow = |words: &str| Reply::text(words).delay_between_events(Duration::from_millis(120));
    cli.mock.push_for_input(
        "MARKER-DONE-A",
        slow("the library adds two numbers and nothing else lives in it so far at all"),
    );
    cli.mock.push_for_input(
        "MARKER-DONE-B",
        Reply::tool_call(
            "file_write",
            json!({"path": "tests/add.rs", "content": "#[test]\nfn adds() { assert_eq!(tern_demo::add(2, 2), 4); }\n"}),
        )
        .delay_before(Duration::from_millis(800)),
    );
    cli.mock.push_for_input(
        "MARKER-DONE-B",
        slow("wrote tests/add.rs with one test of add on its own branch for review"),
    );
    cli.mock.repeat(Reply::text("Noted the result."));
    let tmux = Tmux::start(&cli, &[]);
    tmux.resize(160, 40);
    tmux.wait_for("message tern");
    tmux.type_text("explore the code and write tests in a worktree");
    tmux.keys(&["Enter"]);
    // Both panes, side by side with the transcript.
    tmux.wait_for("● explorer");
    tmux.wait_for("general · ");
    // The conversation goes on meanwhile.
    tmux.type_text("meanwhile, hello");
    tmux.keys(&["Enter"]);
    tmux.wait_for("› meanwhile, hello");
    // The writer's edit in its worktree is asked of the person, naming the run.
    tmux.wait_for("approval needed · subagent general (run-");
    tmux.keys(&["y"]);
    tmux.wait_for("(explorer) ended: completed");
    // Both results reach the main session.
    let notices = || {
        cli.mock
            .model_requests()
            .iter()
            .filter(|request| {
                request
                    .texts()
                    .last()
                    .is_some_and(|text| text.contains("[subagent run"))
            })
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while notices() < 2 {
        assert!(std::time::Instant::now() < deadline, "{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !cli.home.project().join("tests/add.rs").exists(),
        "the worktree's change stays on its branch until brought in"
    );
    // The person asks for the tests; the model brings the branch in, as an edit they approve.
    let writer = run_dirs(&cli)
        .into_iter()
        .find(|dir| {
            std::fs::read_to_string(dir.join("task.md"))
                .is_ok_and(|task| task.contains("MARKER-DONE-B"))
        })
        .expect("the writer's run folder");
    let run_id = writer.file_name().unwrap().to_string_lossy().into_owned();
    cli.mock.push(Reply::tool_call(
        "check_agent_run",
        json!({"run_id": run_id, "action": "merge"}),
    ));
    cli.mock.push(Reply::text("The tests are in."));
    tmux.type_text("bring the tests in");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("approval needed");
    assert!(screen.contains(&run_id), "{screen}");
    tmux.keys(&["y"]);
    tmux.wait_for("The tests are in.");
    let brought = std::fs::read_to_string(cli.home.project().join("tests/add.rs")).unwrap();
    assert!(brought.contains("fn adds()"), "{brought}");
}

#[test]
fn the_status_line_counts_running_jobs_and_a_key_shows_their_output() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo watcher-said-$((40 + 2)); sleep 300", "background": true}),
    ));
    cli.mock.push(Reply::text("The watcher runs."));
    cli.mock.repeat(Reply::text("Fine."));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("start the watcher");
    tmux.keys(&["Enter"]);
    tmux.wait_for("approval needed");
    tmux.keys(&["y"]);
    tmux.wait_for("The watcher runs.");
    tmux.wait_for("1 job (ctrl+b)");
    tmux.keys(&["C-b"]);
    let screen = tmux.wait_for("watcher-said-42");
    assert!(screen.contains("job 1 ·"), "{screen}");
    assert!(screen.contains("running for"), "{screen}");
}

#[test]
fn a_second_terminal_opening_the_session_gets_a_pane_for_a_run_already_working() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-LATE: take your time.", "agent": "explorer"}),
    ));
    cli.mock.push(Reply::text("It is working."));
    cli.mock.push_for_input(
        "MARKER-LATE",
        // It works until the test ends.
        Reply::text("slowly looking through every file one at a time before saying much more")
            .delay_between_events(Duration::from_millis(100))
            .stall_after_events(6),
    );
    cli.mock.repeat(Reply::text("Noted."));
    let first = Tmux::start(&cli, &[]);
    first.wait_for("message tern");
    first.type_text("send an explorer");
    first.keys(&["Enter"]);
    first.wait_for("It is working.");
    first.wait_for("● explorer");
    // The second terminal saw none of it start, and shows the run all the same.
    let output = cli.run(&["sessions", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    let parent = listed
        .iter()
        .find(|meta| meta["parent"].is_null())
        .and_then(|meta| meta["id"].as_str())
        .expect("the parent session")
        .to_owned();
    let second = Tmux::start(&cli, &["-r", &parent]);
    second.resize(160, 40);
    second.wait_for("It is working.");
    second.wait_for("● explorer");
    second.wait_for("slowly looking");
}
