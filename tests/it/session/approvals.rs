//! Approval mode `ask`: calls that need approval wait for a person's answer; "always" is
//! remembered for the session (and after reopening it), a denial reaches the model with its
//! reason, and a cancel, a drain or a crash while asking still leave every call answered.

use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{Answer, ApprovalDetail, Grant, TurnStop};
use tern::session::approvals::{
    CANCEL_REASON, CANCELLED_WAITING, STOP_REASON, STOPPED_BEFORE, STOPPED_WAITING,
};

/// An approval request as a subscriber receives it.
#[derive(Debug)]
pub(super) struct Asked {
    pub call_id: String,
    pub tool: String,
    pub summary: String,
    pub detail: ApprovalDetail,
    pub always: Option<Grant>,
}

/// A world whose sessions ask.
pub(super) fn asking_world() -> World {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Ask;
    world
}

/// Collects events until the next approval request; returns what came before it and the
/// request. Panics if a turn ends first.
async fn until_asked(events: &mut Subscription) -> (Vec<SessionEvent>, Asked) {
    let mut seen = Vec::new();
    let wait = async {
        loop {
            match events.recv().await.expect("the session runs") {
                SessionEvent::ApprovalRequested {
                    call_id,
                    tool,
                    summary,
                    detail,
                    always,
                } => {
                    return Asked {
                        call_id,
                        tool,
                        summary,
                        detail,
                        always,
                    };
                }
                end @ (SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }) => {
                    panic!("the turn ended without asking: {end:?}; before: {seen:?}")
                }
                event => seen.push(event),
            }
        }
    };
    let asked = tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("asked in time");
    (seen, asked)
}

/// Starts a turn with `text` and waits for its first approval request.
pub(super) async fn ask(handle: &SessionHandle, text: &str) -> (Subscription, Asked) {
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle.send(UserInput::local(text)).await.unwrap();
    let (_, asked) = until_asked(&mut events).await;
    (events, asked)
}

fn shell(command: &str) -> Reply {
    Reply::tool_call("shell_execute", json!({ "command": command }))
}

/// Whether the turn's events hold an approval request.
pub(super) fn was_asked(events: &[SessionEvent]) -> bool {
    events
        .iter()
        .any(|e| matches!(e, SessionEvent::ApprovalRequested { .. }))
}

/// The journal's approval events and tool results, in order, as short labels.
fn approval_trail(world: &World, id: &SessionId) -> Vec<String> {
    journal(world, id)
        .into_iter()
        .filter_map(|event| match event {
            JournalEvent::ApprovalRequested { tool, prompt, .. } => {
                Some(format!("asked {tool}: {prompt}"))
            }
            JournalEvent::ApprovalDecided { answer, grant, .. } => {
                Some(format!("decided {answer:?} {grant:?}"))
            }
            JournalEvent::ToolResults { results, .. } => Some(format!("results {}", results.len())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn once_runs_the_call_and_the_next_one_is_asked_again() {
    let world = asking_world();
    world.mock.push(shell("echo approved-once"));
    world.mock.push(Reply::text("It ran."));
    world.mock.push(shell("echo approved-once"));
    world.mock.push(Reply::text("Not this time."));
    let handle = world.create();
    let project = world.home.project().canonicalize().unwrap();

    let (mut events, asked) = ask(&handle, "say it").await;
    assert_eq!(asked.tool, "shell_execute");
    assert_eq!(asked.summary, "Run `echo approved-once`");
    assert_eq!(
        asked.detail,
        ApprovalDetail::Command {
            command: "echo approved-once".into(),
            cwd: project,
        }
    );
    assert_eq!(
        asked.always,
        Some(Grant::Command {
            prefix: "echo".into()
        })
    );
    // Nothing runs before the answer.
    handle.answer(&asked.call_id, Answer::Once).await.unwrap();
    let rest = until_turns_end(&mut events, 1).await;
    assert_eq!(completed(&rest).as_deref(), Some("It ran."));
    assert!(rest.iter().any(|e| matches!(
        e,
        SessionEvent::ApprovalDecided { answer: Answer::Once, call_id } if *call_id == asked.call_id
    )));
    let results = tool_result_texts(&world.mock.model_requests()[1].body);
    assert!(results[0].contains("approved-once"), "{results:?}");
    // The call is answered: a second answer, or one for a call nobody asked about, is an
    // error, not a panic.
    for id in [asked.call_id.as_str(), "toolu_unknown"] {
        let again = handle.answer(id, Answer::Once).await;
        assert!(
            matches!(again, Err(SessionError::NotWaiting { .. })),
            "{again:?}"
        );
    }

    // Once is not remembered: the same command is asked about again.
    let (mut events, again) = ask(&handle, "again").await;
    handle
        .answer(&again.call_id, Answer::Deny { reason: None })
        .await
        .unwrap();
    until_turns_end(&mut events, 1).await;
    assert_eq!(
        approval_trail(&world, handle.id()),
        [
            "asked shell_execute: Run `echo approved-once`",
            "decided Once None",
            "results 1",
            "asked shell_execute: Run `echo approved-once`",
            "decided Deny { reason: None } None",
            "results 1",
        ]
    );
}

#[tokio::test]
async fn always_covers_the_command_prefix_for_the_session_and_after_reopening() {
    let world = asking_world();
    world.mock.push(shell("git status"));
    world.mock.push(Reply::text("one"));
    world.mock.push(shell("git status --short"));
    world.mock.push(Reply::text("two"));
    world.mock.push(shell("ls"));
    world.mock.push(Reply::text("three"));
    world.mock.push(shell("git status --porcelain"));
    world.mock.push(Reply::text("four"));
    let handle = world.create();

    let (mut events, asked) = ask(&handle, "status").await;
    let grant = Grant::Command {
        prefix: "git status".into(),
    };
    assert_eq!(asked.always.as_ref(), Some(&grant));
    handle.answer(&asked.call_id, Answer::Always).await.unwrap();
    until_turns_end(&mut events, 1).await;

    // The same prefix runs without asking.
    let events = turn(&handle, "status again").await;
    assert!(!was_asked(&events), "{events:?}");
    assert_eq!(completed(&events).as_deref(), Some("two"));
    // Another prefix is asked about.
    let (mut events, other) = ask(&handle, "list").await;
    assert_eq!(other.summary, "Run `ls`");
    handle.answer(&other.call_id, Answer::Once).await.unwrap();
    until_turns_end(&mut events, 1).await;
    let state = handle.state().await.unwrap();
    assert_eq!(state.grants.iter().collect::<Vec<_>>(), [&grant]);
    let id = handle.id().clone();
    handle.close().await;

    // Reopened, the session still holds the grant.
    let handle = world.resume(&id);
    let events = turn(&handle, "status once more").await;
    assert!(!was_asked(&events), "{events:?}");
    assert_eq!(completed(&events).as_deref(), Some("four"));
    let decided: Vec<_> = journal(&world, &id)
        .into_iter()
        .filter_map(|e| match e {
            JournalEvent::ApprovalDecided { answer, grant, .. } => Some((answer, grant)),
            _ => None,
        })
        .collect();
    assert_eq!(
        decided,
        [(Answer::Always, Some(grant)), (Answer::Once, None)]
    );
}

#[tokio::test]
async fn a_denial_reaches_the_model_with_the_reason_and_the_turn_goes_on() {
    let world = asking_world();
    world.mock.push(Reply::tool_call(
        "file_write",
        json!({"path": "notes/todo.txt", "content": "one\ntwo\n"}),
    ));
    world.mock.push(Reply::text("I will put it elsewhere."));
    let handle = world.create();

    let (mut events, asked) = ask(&handle, "write the todo").await;
    assert_eq!(asked.summary, "Create notes/todo.txt (+2 -0 lines)");
    let ApprovalDetail::Edit { path, diff } = &asked.detail else {
        panic!("{asked:?}")
    };
    assert!(path.ends_with("notes/todo.txt"), "{path:?}");
    assert_eq!(
        diff,
        "--- /dev/null\n+++ b/notes/todo.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
    );
    let reason = "keep todos in TODO.md at the root";
    handle
        .answer(
            &asked.call_id,
            Answer::Deny {
                reason: Some(reason.into()),
            },
        )
        .await
        .unwrap();
    let rest = until_turns_end(&mut events, 1).await;
    assert_eq!(
        completed(&rest).as_deref(),
        Some("I will put it elsewhere.")
    );
    assert!(
        !world.home.project().join("notes").exists(),
        "nothing written"
    );
    let results = tool_result_texts(&world.mock.model_requests()[1].body);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("declined"), "{results:?}");
    assert!(results[0].contains(reason), "{results:?}");
}

#[tokio::test]
async fn an_edit_is_shown_as_the_diff_it_would_make_and_written_only_once_allowed() {
    let world = asking_world();
    world
        .home
        .write_file("src/lib.rs", "fn a() {}\nfn b() {}\n");
    world.mock.push(Reply::tool_call(
        "file_edit",
        json!({"path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() -> u8 { 1 }"}),
    ));
    world.mock.push(Reply::text("Edited."));
    let handle = world.create();
    let (mut events, asked) = ask(&handle, "change b").await;
    assert_eq!(asked.summary, "Edit src/lib.rs (+1 -1 lines)");
    let ApprovalDetail::Edit { diff, .. } = &asked.detail else {
        panic!("{asked:?}")
    };
    assert_eq!(
        diff,
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn b() -> u8 { 1 }\n"
    );
    assert_eq!(
        world.home.read_file("src/lib.rs"),
        "fn a() {}\nfn b() {}\n",
        "the preview writes nothing"
    );
    handle.answer(&asked.call_id, Answer::Once).await.unwrap();
    until_turns_end(&mut events, 1).await;
    assert_eq!(
        world.home.read_file("src/lib.rs"),
        "fn a() {}\nfn b() -> u8 { 1 }\n"
    );
}

#[tokio::test]
async fn results_keep_call_order_when_the_middle_call_is_asked() {
    let world = asking_world();
    world.home.write_file("a.txt", "AAA\n");
    world.mock.push(Reply::tool_calls([
        ("glob", json!({"pattern": "*.txt"})),
        ("shell_execute", json!({"command": "echo middle"})),
        ("file_read", json!({"path": "a.txt"})),
    ]));
    world.mock.push(Reply::text("All three."));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle.send(UserInput::local("go")).await.unwrap();
    let (before, asked) = until_asked(&mut events).await;
    // The call before the asked one has run, and its result came first; the one after
    // waits.
    let results_before: Vec<&str> = before
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results_before, ["glob"]);
    assert_eq!(asked.tool, "shell_execute");
    handle.answer(&asked.call_id, Answer::Once).await.unwrap();
    let rest = until_turns_end(&mut events, 1).await;
    assert_eq!(completed(&rest).as_deref(), Some("All three."));

    let request = &world.mock.model_requests()[1];
    assert_eq!(request.tool_use_ids(), request.tool_result_ids());
    let results = tool_result_texts(&request.body);
    assert!(results[0].contains("a.txt"), "{results:?}");
    assert!(results[1].contains("middle"), "{results:?}");
    assert!(results[2].contains("AAA"), "{results:?}");
    // One message holds the batch's results, as without asking.
    let state = handle.state().await.unwrap();
    let batch: Vec<_> = state
        .messages
        .iter()
        .filter(|m| m.tool_results().count() > 0)
        .collect();
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].tool_results().count(), 3);
    assert_eq!(
        approval_trail(&world, handle.id()),
        [
            "results 1",
            "asked shell_execute: Run `echo middle`",
            "decided Once None",
            "results 2",
        ]
    );
}

#[tokio::test]
async fn reads_inside_the_project_run_without_asking() {
    let world = asking_world();
    world.home.write_file("a.txt", "AAA\n");
    world
        .mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    world.mock.push(Reply::text("AAA."));
    let handle = world.create();
    let events = turn(&handle, "read a").await;
    assert!(!was_asked(&events), "{events:?}");
    assert_eq!(completed(&events).as_deref(), Some("AAA."));
}

#[tokio::test]
async fn cancelling_while_asking_answers_the_call_and_ends_the_turn() {
    let world = asking_world();
    world.mock.push(Reply::tool_calls([
        ("shell_execute", json!({"command": "touch first"})),
        ("file_write", json!({"path": "second.txt", "content": "x"})),
    ]));
    let handle = world.create();
    let (mut events, asked) = ask(&handle, "do both").await;
    handle.cancel().await.unwrap();
    let rest = until_turns_end(&mut events, 1).await;
    assert_eq!(
        failure(&rest).map(|f| f.0),
        Some(ErrorCategory::Cancelled),
        "{rest:?}"
    );
    assert!(rest.iter().any(|e| matches!(
        e,
        SessionEvent::ApprovalDecided { answer: Answer::Deny { reason: Some(r) }, .. } if r == CANCEL_REASON
    )));
    let state = handle.state().await.unwrap();
    assert!(state.unanswered_calls().is_empty());
    let results: Vec<_> = state
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| r.content.clone())
        .collect();
    assert_eq!(results[0], CANCELLED_WAITING);
    assert!(
        results[1].contains("cancelled before this call started"),
        "{results:?}"
    );
    assert!(!world.home.project().join("first").exists());
    assert!(!world.home.project().join("second.txt").exists());
    let late = handle.answer(&asked.call_id, Answer::Once).await;
    assert!(
        matches!(late, Err(SessionError::NotWaiting { .. })),
        "{late:?}"
    );
}

#[tokio::test]
async fn draining_while_asking_ends_the_turn_with_the_calls_not_run() {
    let world = asking_world();
    world.mock.push(Reply::tool_calls([
        ("shell_execute", json!({"command": "touch first"})),
        ("shell_execute", json!({"command": "touch second"})),
    ]));
    let handle = world.create();
    let (_events, _asked) = ask(&handle, "do both").await;
    let waiting = tokio::time::timeout(Duration::from_secs(30), handle.drain())
        .await
        .expect("the drain does not wait for the person")
        .unwrap();
    assert!(!waiting);
    let journal = journal(&world, handle.id());
    assert_eq!(
        journal.last().and_then(JournalEvent::turn_stop),
        Some(TurnStop::Drained)
    );
    let results: Vec<String> = journal
        .iter()
        .filter_map(|e| match e {
            JournalEvent::ToolResults { results, .. } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|r| r.content)
        .collect();
    assert_eq!(results, [STOPPED_WAITING, STOPPED_BEFORE]);
    assert!(journal.iter().any(|e| matches!(
        e,
        JournalEvent::ApprovalDecided { answer: Answer::Deny { reason: Some(r) }, .. } if r == STOP_REASON
    )));
    assert!(!world.home.project().join("first").exists());
}

#[tokio::test]
async fn a_call_left_waiting_by_a_crash_is_answered_on_reopening() {
    let world = asking_world();
    let handle = world.create();
    let id = handle.id().clone();
    drop(handle);
    // What the journal holds when the process dies while the person is being asked.
    let events = [
        JournalEvent::InputAccepted {
            sender: tern::domain::Sender::local_user(),
            audience: tern::domain::Audience::Personal,
            kind: tern::domain::InputKind::Person,
            text: "build it".into(),
        },
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: vec![ContentBlock::ToolUse(tern::domain::ToolCall {
                id: "toolu_waiting".into(),
                name: "shell_execute".into(),
                input: json!({"command": "make"}),
            })],
        },
        JournalEvent::ApprovalRequested {
            call_id: "toolu_waiting".into(),
            tool: "shell_execute".into(),
            need: tern::domain::ApprovalNeed::Exec,
            prompt: "Run `make`".into(),
        },
    ];
    for event in &events {
        world.store.append(&id, event).unwrap();
    }
    world.mock.push(Reply::text("Shall I try again?"));
    let handle = world.resume(&id);
    turn(&handle, "what happened?").await;
    let request = &world.mock.model_requests()[0];
    assert_eq!(request.tool_result_ids(), ["toolu_waiting"]);
    assert_eq!(tool_result_texts(&request.body), [STOPPED_WAITING]);
    assert_eq!(handle.state().await.unwrap().pending_approval, None);
}

#[tokio::test]
async fn closing_while_asking_does_not_wait_for_an_answer() {
    let world = asking_world();
    world.mock.push(shell("touch never"));
    let handle = world.create();
    let other = handle.clone();
    let (_events, _asked) = ask(&handle, "touch it").await;
    tokio::time::timeout(Duration::from_secs(30), handle.close())
        .await
        .expect("closed without an answer");
    let journal = journal(&world, other.id());
    assert_eq!(
        journal.last().and_then(JournalEvent::turn_stop),
        Some(TurnStop::Drained)
    );
    assert!(!world.home.project().join("never").exists());
}

#[tokio::test]
async fn always_for_reading_outside_the_project_covers_that_tool_only() {
    let world = asking_world();
    let outside = world.home.root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("one.txt"), "ONE\n").unwrap();
    std::fs::write(outside.join("two.txt"), "TWO\n").unwrap();
    let one = outside.join("one.txt").canonicalize().unwrap();
    let two = outside.join("two.txt").canonicalize().unwrap();
    world.mock.push(Reply::tool_call(
        "file_read",
        json!({"path": one.to_str().unwrap()}),
    ));
    world.mock.push(Reply::text("ONE."));
    world.mock.push(Reply::tool_calls([
        ("file_read", json!({"path": two.to_str().unwrap()})),
        (
            "grep",
            json!({"pattern": "TWO", "path": outside.to_str().unwrap()}),
        ),
    ]));
    world.mock.push(Reply::text("TWO."));
    let handle = world.create();

    let (mut events, asked) = ask(&handle, "read one").await;
    assert_eq!(
        asked.summary,
        format!("`file_read`: read {} (outside the project)", one.display())
    );
    assert_eq!(
        asked.detail,
        ApprovalDetail::Outside {
            path: one.clone(),
            access: "read".into()
        }
    );
    handle.answer(&asked.call_id, Answer::Always).await.unwrap();
    until_turns_end(&mut events, 1).await;

    // Another file outside: file_read runs unasked, grep is another tool and is asked.
    let (mut events, asked) = ask(&handle, "read two").await;
    assert_eq!(asked.tool, "grep");
    handle
        .answer(&asked.call_id, Answer::Deny { reason: None })
        .await
        .unwrap();
    until_turns_end(&mut events, 1).await;
    let results = tool_result_texts(&world.mock.model_requests()[3].body);
    assert!(results[1].contains("TWO"), "{results:?}");
    assert!(results[2].contains("declined"), "{results:?}");
}
