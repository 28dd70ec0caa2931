//! Subagent runs through the session service: a parent sends a child with `spawn_agent`, the
//! child works in a session of its own (its role's thin prompt, its definition's tools), and
//! the parent hears of the end in a notice turn naming `result.md`. The mock answers the
//! parent from its main script and each child by a marker in its task.

use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{InputKind, RunId, SessionKey};
use tern::gateway::{SendUserMessage, SessionManager};
use tern::store::SessionMeta;
use tern::tools::agents::AgentRuns;

fn manager(world: &World) -> Arc<SessionManager> {
    let manager = Arc::new(SessionManager::new(world.deps()));
    manager.enable_subagents();
    manager
}

/// Sends `text` to the parent key and waits until `turns` turns of the parent ended.
async fn parent_turns(
    manager: &SessionManager,
    world: &World,
    key: &str,
    text: &str,
    turns: usize,
) -> (SessionId, Vec<SessionEvent>) {
    let message = SendUserMessage {
        key: key.to_owned(),
        input: UserInput::local(text),
        project_dir: world.home.project().canonicalize().unwrap(),
    };
    let (delivered, mut events) = manager
        .send_watched(message, OutputFilter::ALL)
        .await
        .expect("delivered");
    let seen = until_turns_end(&mut events, turns).await;
    (delivered.session, seen)
}

/// The run ids the parent's `spawn_agent` calls returned, in order.
fn run_ids(world: &World, parent: &SessionId) -> Vec<RunId> {
    tool_results(world, parent)
        .into_iter()
        .filter_map(|(failed, content)| {
            let value: Value = serde_json::from_str(&content).ok().filter(|_| !failed)?;
            RunId::parse(value["run_id"].as_str()?)
        })
        .collect()
}

/// Waits until `done` holds, failing with `what` after 20 s.
async fn wait_until(what: &str, done: &dyn Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn child_meta(world: &World, run: &RunId) -> SessionMeta {
    world
        .store
        .session_for_key(&SessionKey::subagent(run))
        .unwrap()
        .expect("the run's session is stored")
}

fn run_dir(world: &World, parent: &SessionId, run: &RunId) -> std::path::PathBuf {
    let meta = world.store.meta(parent).unwrap().unwrap();
    meta.session_dir
        .unwrap()
        .join("subagents")
        .join(run.as_str())
}

/// The notices the parent was given, as journaled.
fn notices(world: &World, parent: &SessionId) -> Vec<String> {
    world
        .store
        .load(parent)
        .unwrap()
        .into_iter()
        .filter_map(|record| match record.event {
            JournalEvent::InputAccepted {
                kind: InputKind::ChildNotice,
                text,
                ..
            } => Some(text),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_subagent_runs_its_task_and_the_parent_hears_of_it_in_a_turn_of_its_own() {
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "Find where MARKER-ALPHA is defined.", "agent": "explorer"}),
    ));
    world.mock.push(Reply::text("I sent an explorer."));
    world.mock.push_for_input(
        "MARKER-ALPHA",
        Reply::text("MARKER-ALPHA is defined in src/lib.rs, line 1."),
    );
    world
        .mock
        .push(Reply::text("The explorer says: src/lib.rs, line 1."));
    let manager = manager(&world);
    let (parent, events) =
        parent_turns(&manager, &world, "cli:parent-1", "where is it defined?", 2).await;

    let texts: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            SessionEvent::TurnCompleted { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "I sent an explorer.",
            "The explorer says: src/lib.rs, line 1."
        ]
    );
    let runs = run_ids(&world, &parent);
    assert_eq!(runs.len(), 1, "spawn_agent answered with a run id at once");
    let run = &runs[0];
    let dir = run_dir(&world, &parent, run);
    let task = std::fs::read_to_string(dir.join("task.md")).unwrap();
    assert!(
        task.contains("Find where MARKER-ALPHA is defined."),
        "{task}"
    );
    let result = std::fs::read_to_string(dir.join("result.md")).unwrap();
    assert!(result.contains("State: completed"), "{result}");
    assert!(result.contains("MARKER-ALPHA is defined in src/lib.rs, line 1."));
    assert!(dir.join("artifacts").is_dir() && dir.join("logs").is_dir());

    let notices = notices(&world, &parent);
    assert_eq!(notices.len(), 1);
    assert!(notices[0].contains(&format!("[subagent run {run} (explorer) ended: completed]")));
    assert!(notices[0].contains(&dir.join("result.md").display().to_string()));
    assert_eq!(manager.runs().pending(&parent), 0);

    // The child: a session of its own with its parent named, the explorer's thin stack and
    // tools, and its task as its first message.
    let child = child_meta(&world, run);
    let link = child.parent.expect("the child names its parent");
    assert_eq!(
        (link.session, &link.run_id, link.agent.as_str()),
        (parent.clone(), run, "explorer")
    );
    let requests = world.mock.model_requests();
    let child_request = requests
        .iter()
        .find(|request| {
            request
                .texts()
                .first()
                .is_some_and(|t| t.contains("MARKER-ALPHA"))
        })
        .expect("the child called the model");
    let first = &child_request.texts()[0];
    assert!(
        first.starts_with("Context: You are subagent run"),
        "{first}"
    );
    assert!(
        first.contains("Task: Find where MARKER-ALPHA is defined."),
        "{first}"
    );
    let system = child_request.body["system"].to_string();
    assert!(system.contains("Your role: explorer"), "{system}");
    assert!(system.contains("You are a subagent"), "{system}");
    assert_eq!(
        offered_tools(&child_request.body),
        ["file_read", "glob", "grep", "set_working_directory"]
    );
    // The parent was offered the subagent tools and told which definitions there are.
    let parent_request = &requests[0];
    assert!(offered_tools(&parent_request.body).contains(&"spawn_agent".to_owned()));
    let nudge = parent_request.nudges().join("\n");
    assert!(nudge.contains("[available-subagents]"), "{nudge}");
    assert!(
        nudge.contains("- explorer: Reads the repository"),
        "{nudge}"
    );
}

#[tokio::test]
async fn runs_beyond_max_concurrent_wait_and_a_cancelled_one_reports_so() {
    let mut world = World::anthropic();
    world.settings.subagents.max_concurrent = 1;
    world.mock.push(Reply::tool_calls([
        (
            "spawn_agent",
            json!({"task": "MARKER-SLOW: take your time."}),
        ),
        ("spawn_agent", json!({"task": "MARKER-QUEUED: then this."})),
    ]));
    world.mock.push(Reply::text("Both sent."));
    world.mock.push_for_input(
        "MARKER-SLOW",
        Reply::text("never seen").delay_before(Duration::from_secs(20)),
    );
    world
        .mock
        .push_for_input("MARKER-QUEUED", Reply::text("The queued one is done."));
    world.mock.repeat(Reply::text("Noted."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-2", "send two", 1).await;
    let runs = run_ids(&world, &parent);
    assert_eq!(runs.len(), 2);
    let status = |run: &RunId| {
        manager
            .runs()
            .check(&parent, run, false)
            .expect("a run of this parent")["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The first holds the one place; the second waits for it.
    world
        .mock
        .wait_for_requests(3, Duration::from_secs(10))
        .await;
    assert_eq!(
        (status(&runs[0]), status(&runs[1])),
        ("running".into(), "queued".into())
    );
    assert_eq!(manager.runs().pending(&parent), 2);

    let cancelled = manager.runs().check(&parent, &runs[0], true).unwrap();
    assert_eq!(cancelled["state"], "cancelling");
    wait_until("the runs never ended", &|| {
        manager.runs().pending(&parent) == 0
    })
    .await;
    assert_eq!(
        (status(&runs[0]), status(&runs[1])),
        ("cancelled".into(), "completed".into())
    );
    let first = std::fs::read_to_string(run_dir(&world, &parent, &runs[0]).join("result.md"));
    assert!(first.unwrap().contains("State: cancelled"));
    let second = std::fs::read_to_string(run_dir(&world, &parent, &runs[1]).join("result.md"));
    assert!(second.unwrap().contains("The queued one is done."));
    // Each end reached the parent, each in a notice of its own.
    wait_until("the notices never came", &|| {
        notices(&world, &parent).len() >= 2
    })
    .await;
    let notices = notices(&world, &parent);
    assert!(
        notices
            .iter()
            .any(|n| n.contains(&format!("{} (general) ended: cancelled", runs[0])))
    );
    assert!(
        notices
            .iter()
            .any(|n| n.contains(&format!("{} (general) ended: completed", runs[1])))
    );
    // A run of another session is not this one's to see.
    let stranger = SessionId::generate();
    assert!(manager.runs().check(&stranger, &runs[1], false).is_err());
}

#[tokio::test]
async fn a_spawn_that_cannot_be_done_says_why_and_a_child_cannot_send_its_own() {
    let world = World::anthropic();
    world.mock.push(Reply::tool_calls([
        ("spawn_agent", json!({"task": "x", "agent": "astronaut"})),
        ("spawn_agent", json!({"task": "MARKER-NESTED: go."})),
    ]));
    world.mock.push(Reply::text("Done."));
    // The child tries to send one of its own: the tool is not there for it.
    world.mock.push_for_input(
        "MARKER-NESTED",
        Reply::tool_call("spawn_agent", json!({"task": "deeper"})),
    );
    world
        .mock
        .push_for_input("MARKER-NESTED", Reply::text("I worked alone."));
    world.mock.repeat(Reply::text("Noted."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-3", "go", 2).await;
    let results = tool_results(&world, &parent);
    assert!(results[0].0, "an unknown definition is refused");
    assert!(
        results[0]
            .1
            .contains("no subagent definition \"astronaut\"")
            && results[0].1.contains("explorer, reviewer, test-runner"),
        "{}",
        results[0].1
    );
    let runs = run_ids(&world, &parent);
    assert_eq!(runs.len(), 1);
    let child = child_meta(&world, &runs[0]);
    let child_results = tool_results(&world, &child.id);
    assert_eq!(child_results.len(), 1);
    assert!(child_results[0].0, "{:?}", child_results);
    let offered: Vec<Vec<String>> = world
        .mock
        .model_requests()
        .iter()
        .filter(|r| {
            r.texts()
                .first()
                .is_some_and(|t| t.contains("MARKER-NESTED"))
        })
        .map(|r| offered_tools(&r.body))
        .collect();
    assert!(!offered.is_empty());
    assert!(offered.iter().all(|tools| {
        !tools
            .iter()
            .any(|t| t == "spawn_agent" || t == "check_agent_run")
    }));
}

#[tokio::test]
async fn a_run_in_a_worktree_changes_only_its_branch_until_the_parent_brings_it_in() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Edits;
    std::fs::write(world.home.project().join("README.md"), "# project\n").unwrap();
    world.home.commit_all("start");
    let project = world.home.project().canonicalize().unwrap();
    world.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-WT: write notes.txt.", "isolation": "worktree"}),
    ));
    world.mock.push(Reply::text("It works in a worktree."));
    // Held a moment, so the parent's answer to the notice can name the run.
    world.mock.push_for_input(
        "MARKER-WT",
        Reply::tool_call(
            "file_write",
            json!({"path": "notes.txt", "content": "from the run\n"}),
        )
        .delay_before(Duration::from_millis(500)),
    );
    world
        .mock
        .push_for_input("MARKER-WT", Reply::text("I wrote notes.txt."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-4", "isolate it", 1).await;
    let run = run_ids(&world, &parent).remove(0);
    world.mock.push(Reply::tool_call(
        "check_agent_run",
        json!({"run_id": run.as_str(), "action": "merge"}),
    ));
    world.mock.push(Reply::text("Brought in."));
    wait_until("the merge never came", &|| {
        manager.runs().pending(&parent) == 0 && tool_results(&world, &parent).len() >= 2
    })
    .await;
    let branch = format!("tern/{run}");
    let result = std::fs::read_to_string(run_dir(&world, &parent, &run).join("result.md")).unwrap();
    assert!(result.contains(&format!("Branch: {branch}")), "{result}");
    assert!(result.contains("notes.txt"), "{result}");
    let notice = notices(&world, &parent).remove(0);
    assert!(
        notice.contains(&format!("Its changes are on branch {branch}")),
        "{notice}"
    );
    assert!(notice.contains("\"action\": \"merge\""), "{notice}");
    // The branch holds the child's commit; the working tree got the file only by the merge.
    let log = world.home.git(&["log", "--format=%s", &branch]);
    assert!(
        log.lines().next().unwrap().starts_with(run.as_str()),
        "{log}"
    );
    let merged = tool_results(&world, &parent).remove(1);
    assert!(!merged.0, "{}", merged.1);
    assert!(merged.1.contains("notes.txt"), "{}", merged.1);
    let notes = std::fs::read_to_string(project.join("notes.txt")).unwrap();
    assert_eq!(notes, "from the run\n");
    let status = world.home.git(&["status", "--porcelain"]);
    assert!(status.contains("?? notes.txt"), "{status}");
}

#[tokio::test]
async fn two_runs_in_one_folder_never_write_the_same_file() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Edits;
    world.mock.push(Reply::tool_calls([
        (
            "spawn_agent",
            json!({"task": "MARKER-FIRST: write shared.txt."}),
        ),
        (
            "spawn_agent",
            json!({"task": "MARKER-SECOND: write shared.txt too."}),
        ),
    ]));
    world.mock.push(Reply::text("Both sent."));
    let write =
        |text: &str| Reply::tool_call("file_write", json!({"path": "shared.txt", "content": text}));
    world.mock.push_for_input("MARKER-FIRST", write("first\n"));
    world.mock.push_for_input(
        "MARKER-FIRST",
        Reply::text("First done.").delay_before(Duration::from_millis(1500)),
    );
    world.mock.push_for_input(
        "MARKER-SECOND",
        write("second\n").delay_before(Duration::from_millis(500)),
    );
    world
        .mock
        .push_for_input("MARKER-SECOND", Reply::text("Second could not write it."));
    world.mock.repeat(Reply::text("Noted."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-5", "both", 1).await;
    let runs = run_ids(&world, &parent);
    wait_until("the runs never ended", &|| {
        manager.runs().pending(&parent) == 0
    })
    .await;
    let project = world.home.project().canonicalize().unwrap();
    assert_eq!(
        std::fs::read_to_string(project.join("shared.txt")).unwrap(),
        "first\n"
    );
    let second = tool_results(&world, &child_meta(&world, &runs[1]).id).remove(0);
    assert!(second.0, "the second write is refused");
    assert!(
        second
            .1
            .contains(&format!("being written by subagent run {}", runs[0])),
        "{}",
        second.1
    );
    // What the first wrote joined the parent's recent files with its notice; the second
    // wrote nothing.
    wait_until("the notices never came", &|| {
        notices(&world, &parent).len() >= 2
    })
    .await;
    let touched: Vec<std::path::PathBuf> = world
        .store
        .load(&parent)
        .unwrap()
        .into_iter()
        .filter_map(|record| match record.event {
            JournalEvent::FileTouched { path } => Some(path),
            _ => None,
        })
        .collect();
    assert_eq!(touched, [project.join("shared.txt")]);
    // Once the first has ended, the file is free again.
    assert!(
        manager
            .runs()
            .claim_write(&runs[1], &project.join("shared.txt"))
            .is_ok()
    );
}

#[tokio::test]
async fn a_run_drained_with_its_owner_ends_owner_restarted_at_the_next_start_and_runs_nothing_twice()
 {
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-DRAIN: list the text files."}),
    ));
    world.mock.push(Reply::text("Sent."));
    world.mock.push_for_input(
        "MARKER-DRAIN",
        Reply::tool_call("glob", json!({"pattern": "*.txt"}))
            .delay_before(Duration::from_millis(500)),
    );
    let first = manager(&world);
    let (parent, _) = parent_turns(&first, &world, "cli:parent-6", "list them", 1).await;
    let run = run_ids(&world, &parent).remove(0);
    // Drained while the child's model call is on its way (its reply waits 500 ms), however
    // slowly the machine got the child going.
    wait_until("the child never asked its model", &|| {
        world.mock.model_requests().iter().any(|request| {
            request.raw_body.contains("MARKER-DRAIN") && !request.raw_body.contains("list them")
        })
    })
    .await;
    first.drain(Duration::from_secs(30)).await.expect("drained");
    let child = child_meta(&world, &run);
    let calls_before = tool_results(&world, &child.id).len();
    assert_eq!(calls_before, 1, "the call in flight finished its batch");

    world.mock.push(Reply::text("I will send it again later."));
    let next = manager(&world);
    let warmed = next.warm_up().await.expect("warmed up");
    assert!(
        warmed.iter().all(|one| one.id != child.id),
        "a run's session is not taken up with nobody following it"
    );
    wait_until("the parent never heard", &|| {
        !notices(&world, &parent).is_empty()
    })
    .await;
    let notice = notices(&world, &parent).remove(0);
    assert!(
        notice.contains(&format!(
            "[subagent run {run} (general) ended: owner_restarted]"
        )),
        "{notice}"
    );
    let result = std::fs::read_to_string(run_dir(&world, &parent, &run).join("result.md"));
    assert!(result.unwrap().contains("State: owner_restarted"));
    // The parent's notice turn ran; the child called nothing again.
    let handle = next
        .handle(
            &SessionKey::parse("cli:parent-6").unwrap(),
            &world.home.project().canonicalize().unwrap(),
        )
        .await
        .unwrap();
    handle.state().await.unwrap();
    assert_eq!(tool_results(&world, &child.id).len(), calls_before);
}

#[tokio::test]
async fn runs_that_fail_loop_or_are_cut_off_end_failed_and_keep_what_they_said() {
    let mut world = World::anthropic();
    world.settings.max_rounds = 2;
    world.mock.push(Reply::tool_calls([
        ("spawn_agent", json!({"task": "MARKER-CUT: write a lot."})),
        ("spawn_agent", json!({"task": "MARKER-LOOP: keep going."})),
        ("spawn_agent", json!({"task": "MARKER-ERR: fail."})),
    ]));
    world.mock.push(Reply::text("Three sent."));
    world.mock.push_for_input(
        "MARKER-CUT",
        Reply::text("The list goes on: one, two, thr").stop_reason_max_tokens(),
    );
    for _ in 0..3 {
        world.mock.push_for_input(
            "MARKER-LOOP",
            Reply::tool_call("glob", json!({"pattern": "*.rs"})),
        );
    }
    world.mock.push_for_input(
        "MARKER-ERR",
        Reply::error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}"#,
        ),
    );
    world.mock.repeat(Reply::text("Noted."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-7", "three", 1).await;
    let runs = run_ids(&world, &parent);
    wait_until("the runs never ended", &|| {
        manager.runs().pending(&parent) == 0
    })
    .await;
    let state = |run: &RunId| {
        manager.runs().check(&parent, run, false).unwrap()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        [state(&runs[0]), state(&runs[1]), state(&runs[2])],
        ["failed", "failed", "failed"]
    );
    let dir = run_dir(&world, &parent, &runs[0]);
    let kept = std::fs::read_to_string(dir.join("artifacts/truncated-output.md")).unwrap();
    assert_eq!(kept, "The list goes on: one, two, thr");
    let result = std::fs::read_to_string(dir.join("result.md")).unwrap();
    assert!(result.contains("truncated-output.md"), "{result}");
    let notices = notices(&world, &parent);
    assert_eq!(notices.len(), 3);
    assert!(
        notices
            .iter()
            .all(|notice| notice.contains("ended: failed")),
        "{notices:?}"
    );
}

#[tokio::test]
async fn a_parent_with_a_run_working_does_not_rest_until_it_has_heard_of_it() {
    let mut world = World::anthropic();
    // Rest would come 1 s after the turn, plus the 5 s grace.
    world.settings.idle_timeout = Duration::from_secs(1);
    world.mock.push(Reply::tool_call(
        "spawn_agent",
        json!({"task": "MARKER-AWAKE: take a while."}),
    ));
    world.mock.push(Reply::text("Sent."));
    world.mock.push_for_input(
        "MARKER-AWAKE",
        Reply::text("Done at last.").delay_before(Duration::from_secs(8)),
    );
    world.mock.repeat(Reply::text("Heard."));
    let manager = manager(&world);
    let (parent, _) = parent_turns(&manager, &world, "cli:parent-8", "take a while", 1).await;
    wait_until("the run never reported", &|| {
        !notices(&world, &parent).is_empty()
    })
    .await;
    let journal = world.store.load(&parent).unwrap();
    let notice_at = journal
        .iter()
        .position(|record| {
            matches!(
                &record.event,
                JournalEvent::InputAccepted {
                    kind: InputKind::ChildNotice,
                    ..
                }
            )
        })
        .unwrap();
    assert!(
        !journal[..notice_at]
            .iter()
            .any(|record| matches!(record.event, JournalEvent::Passivated { .. })),
        "the parent rested while its run worked"
    );
}
