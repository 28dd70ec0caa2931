//! A session over time: reopening, crash repair, queued inputs, cancel and close.

use super::*;
use pretty_assertions::assert_eq;

#[tokio::test]
async fn a_reopened_session_continues_with_its_whole_history() {
    let world = World::anthropic();
    world.home.write_file("a.txt", "AAA\n");
    world
        .mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    world.mock.push(Reply::text("It says AAA."));
    world.mock.push(Reply::text("You asked about a.txt."));
    let id = {
        let handle = world.create();
        turn(&handle, "what is in a.txt?").await;
        let id = handle.id().clone();
        handle.close().await;
        id
    };
    // Close everything: handle, actor and database.
    let World {
        home, mock, store, ..
    } = world;
    drop(store);
    let world = World {
        store: Arc::new(Store::open(&home.home().join("data/tern.redb")).unwrap()),
        home,
        mock,
        ..World::anthropic()
    };

    let handle = world.resume(&id);
    let before: SessionState = handle.state().await.unwrap();
    // The turn's note, the input, the call, its result and the answer.
    assert_eq!(before.messages.len(), 5);
    let events = turn(&handle, "what did I ask?").await;
    assert_eq!(
        completed(&events).as_deref(),
        Some("You asked about a.txt.")
    );

    let request = &world.mock.model_requests()[2];
    let messages = request.body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(request.tool_use_ids(), request.tool_result_ids());
    assert_eq!(request.tool_use_ids().len(), 1);
    assert_eq!(request.texts().last().unwrap(), "what did I ask?");
    assert_eq!(request.nudges().len(), 2);
}

#[tokio::test]
async fn a_crash_in_the_middle_of_a_batch_is_repaired_on_reopen() {
    let world = World::anthropic();
    let handle = world.create();
    let id = handle.id().clone();
    drop(handle);
    // What the journal holds when the process dies after the model asked for a tool.
    world
        .store
        .append(
            &id,
            &JournalEvent::InputAccepted {
                sender: tern::domain::Sender::local_user(),
                audience: tern::domain::Audience::Personal,
                kind: tern::domain::InputKind::Person,
                text: "list files".into(),
            },
        )
        .unwrap();
    world
        .store
        .append(
            &id,
            &JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![ContentBlock::ToolUse(tern::domain::ToolCall {
                    id: "toolu_lost".into(),
                    name: "glob".into(),
                    input: json!({"pattern": "*"}),
                })],
            },
        )
        .unwrap();

    world.mock.push(Reply::text("Let me try again."));
    let handle = world.resume(&id);
    let events = turn(&handle, "are you there?").await;
    assert!(completed(&events).is_some());
    let request = &world.mock.model_requests()[0];
    assert_eq!(request.tool_use_ids(), ["toolu_lost"]);
    assert_eq!(request.tool_result_ids(), ["toolu_lost"]);
    assert!(journal(&world, &id).iter().any(|e| matches!(
        e,
        JournalEvent::TurnFailed {
            category: ErrorCategory::Cancelled,
            ..
        }
    )));
}

#[tokio::test]
async fn inputs_sent_during_a_turn_wait_for_their_own_turn() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("first").delay_before(Duration::from_millis(200)));
    world.mock.push(Reply::text("second"));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    let one = handle.send(UserInput::local("one")).await.unwrap();
    // The first turn is now waiting on the model; this input must wait for it to end.
    world
        .mock
        .wait_for_requests(1, Duration::from_secs(20))
        .await;
    let two = handle.send(UserInput::local("two")).await.unwrap();
    let mut completed_turns = Vec::new();
    while completed_turns.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
        {
            Some(SessionEvent::TurnCompleted { text, .. }) => completed_turns.push(text),
            Some(_) => {}
            None => break,
        }
    }
    assert_eq!(completed_turns, ["first", "second"]);
    // The second input was journaled after the whole first turn: title, tier A, tier B,
    // nudge, usage, reply, end.
    assert_eq!((one, two), (1, 9));
    let state = handle.state().await.unwrap();
    assert_eq!(conversation(&state), ["one", "first", "two", "second"]);
}

#[tokio::test]
async fn cancelling_a_batch_stops_the_calls_not_yet_started() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::All;
    world.mock.push(Reply::tool_calls([
        ("shell_execute", json!({"command": "sleep 20"})),
        (
            "file_write",
            json!({"path": "after-cancel.txt", "content": "no"}),
        ),
    ]));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle.send(UserInput::local("go")).await.unwrap();
    // Cancel once the command is running.
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .unwrap()
        {
            Some(SessionEvent::ToolCall { .. }) => break,
            Some(_) => {}
            None => panic!("session ended"),
        }
    }
    handle.cancel().await.unwrap();
    let mut seen = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .unwrap()
    {
        let end = matches!(
            event,
            SessionEvent::TurnFailed { .. } | SessionEvent::TurnCompleted { .. }
        );
        seen.push(event);
        if end {
            break;
        }
    }
    assert_eq!(
        failure(&seen).map(|f| f.0),
        Some(ErrorCategory::Cancelled),
        "{seen:?}"
    );
    assert!(!world.home.project().join("after-cancel.txt").exists());
    let state = handle.state().await.unwrap();
    assert!(state.unanswered_calls().is_empty());
    let results: Vec<&str> = state
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| r.content.as_str())
        .collect();
    assert_eq!(results.len(), 2);
    assert!(
        results[1].contains("cancelled before this call started"),
        "{results:?}"
    );
}

#[tokio::test]
async fn an_input_queued_behind_a_cancelled_turn_is_refused_not_lost_silently() {
    let world = World::anthropic();
    world.mock.push(Reply::text("slow").stall_after_events(1));
    let handle = world.create();
    handle.send(UserInput::local("one")).await.unwrap();
    world
        .mock
        .wait_for_requests(1, Duration::from_secs(20))
        .await;
    let queued = handle.clone();
    let second = tokio::spawn(async move { queued.send(UserInput::local("two")).await });
    // Let the second input reach the session's queue before the cancel does (the test runs
    // on one thread: yielding runs the spawned send up to its wait for an answer).
    tokio::task::yield_now().await;
    handle.cancel().await.unwrap();
    let refused = second.await.unwrap();
    assert!(
        matches!(refused, Err(SessionError::Cancelled)),
        "{refused:?}"
    );
}

#[tokio::test]
async fn closing_lets_the_running_turn_finish_and_refuses_new_input() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("finished anyway").delay_before(Duration::from_millis(100)));
    let handle = world.create();
    let other = handle.clone();
    handle.send(UserInput::local("one")).await.unwrap();
    handle.close().await;
    let journal = journal(&world, other.id());
    assert!(
        matches!(journal.last(), Some(JournalEvent::TurnCompleted { .. })),
        "{journal:?}"
    );
    assert!(matches!(
        other.send(UserInput::local("two")).await,
        Err(SessionError::Closed)
    ));
}

#[tokio::test]
async fn an_interrupted_reply_keeps_what_was_said_marked_as_interrupted() {
    let world = World::anthropic();
    // message_start, the text block's start, three words, then nothing more.
    world
        .mock
        .push(Reply::text("The fix is to stop ignoring the error from push").stall_after_events(5));
    world.mock.push(Reply::text("Going on."));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle
        .send(UserInput::local("why is the task lost?"))
        .await
        .unwrap();
    // Wait until some text has streamed, then interrupt.
    loop {
        if let SessionEvent::TextDelta { .. } = events.recv().await.expect("events") {
            break;
        }
    }
    handle.cancel().await.unwrap();
    let ended = until_turns_end(&mut events, 1).await;
    assert!(
        ended.iter().any(|e| matches!(
            e,
            SessionEvent::TurnFailed {
                stop: tern::domain::TurnStop::Interrupted,
                ..
            }
        )),
        "{ended:?}"
    );
    let journal = journal(&world, handle.id());
    let kept = journal.iter().rev().find_map(|e| match e {
        JournalEvent::AssistantMessage { content, .. } => Some(content.clone()),
        _ => None,
    });
    let kept = kept.expect("the partial reply is journaled");
    let text: String = kept
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.starts_with("The"), "{text}");
    assert!(!text.contains("push"), "only what had arrived: {text}");
    // The next turn's request carries it, so the model knows what it had said.
    handle.send(UserInput::local("go on")).await.unwrap();
    until_turns_end(&mut events, 1).await;
    let sent = world.mock.model_requests().pop().unwrap().texts();
    assert!(sent.contains(&text), "{sent:?}");
}
