//! Turns that go right: streaming, tool loops and batches, refusals, tools that misbehave.

use super::*;
use pretty_assertions::assert_eq;

#[tokio::test]
async fn streams_text_and_journals_the_turn() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("Hello there!").usage(12, 5, 0, 0));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    assert_eq!(streamed_text(&events), "Hello there!");
    assert_eq!(completed(&events).as_deref(), Some("Hello there!"));
    let first = events
        .iter()
        .find(|e| !matches!(e, SessionEvent::PhaseChanged { .. }));
    assert!(
        matches!(first, Some(SessionEvent::InputAccepted { seq: 1, .. })),
        "{events:?}"
    );
    let kinds: Vec<&str> = journal(&world, handle.id())
        .iter()
        .map(|e| match e {
            JournalEvent::InputAccepted { .. } => "input",
            JournalEvent::AssistantMessage { .. } => "assistant",
            JournalEvent::Usage { .. } => "usage",
            JournalEvent::TurnCompleted { .. } => "completed",
            JournalEvent::TitleChanged { .. } => "title",
            JournalEvent::SystemPromptSet { .. } => "tier a",
            JournalEvent::StaticContextSet { .. } => "tier b",
            JournalEvent::NudgeAdded { .. } => "nudge",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "input",
            "title",
            "tier a",
            "tier b",
            "nudge",
            "usage",
            "assistant",
            "completed"
        ]
    );
    let request = &world.mock.model_requests()[0];
    assert_eq!(request.model(), Some("primary-model"));
    assert_eq!(request.body["messages"][0]["role"], "user");
}

#[tokio::test]
async fn runs_a_tool_loop_over_several_rounds() {
    let world = World::anthropic();
    world.home.write_file("notes.txt", "alpha\nbeta\n");
    world
        .mock
        .push(Reply::tool_call("file_read", json!({"path": "notes.txt"})).with_text("Reading."));
    world
        .mock
        .push(Reply::tool_call("grep", json!({"pattern": "beta"})));
    world.mock.push(Reply::text("beta is on line 2."));
    let handle = world.create();
    let events = turn(&handle, "where is beta?").await;

    assert_eq!(completed(&events).as_deref(), Some("beta is on line 2."));
    let requests = world.mock.model_requests();
    assert_eq!(requests.len(), 3);
    // Each request carries every earlier call, each paired with its result.
    assert_eq!(requests[2].tool_use_ids(), requests[2].tool_result_ids());
    assert_eq!(requests[2].tool_use_ids().len(), 2);
    let results = tool_result_texts(&requests[2].body);
    assert!(
        results[0].contains("alpha") && results[0].contains("beta"),
        "{results:?}"
    );
    assert!(results[1].contains("notes.txt"), "{results:?}");
    let state = handle.state().await.unwrap();
    assert_eq!(
        state.recent_files.front().map(|p| p.ends_with("notes.txt")),
        Some(true)
    );
}

#[tokio::test]
async fn a_parallel_batch_returns_results_in_call_order() {
    let world = World::anthropic();
    world.home.write_file("a.txt", "AAA\n");
    world.home.write_file("b.txt", "BBB\n");
    world.mock.push(Reply::tool_calls([
        ("file_read", json!({"path": "b.txt"})),
        ("file_read", json!({"path": "a.txt"})),
        ("glob", json!({"pattern": "*.txt"})),
    ]));
    world.mock.push(Reply::text("done"));
    let handle = world.create();
    let events = turn(&handle, "read both").await;

    assert_eq!(completed(&events).as_deref(), Some("done"));
    let request = &world.mock.model_requests()[1];
    assert_eq!(request.tool_result_ids(), request.tool_use_ids());
    let results = tool_result_texts(&request.body);
    assert!(results[0].contains("BBB"), "{results:?}");
    assert!(results[1].contains("AAA"), "{results:?}");
    let result_events: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(result_events, ["file_read", "file_read", "glob"]);
}

#[tokio::test]
async fn a_refused_tool_tells_the_model_why_and_the_turn_goes_on() {
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "touch hacked"}),
    ));
    world.mock.push(Reply::text("I could not run it."));
    let handle = world.create();
    let events = turn(&handle, "run it").await;

    assert_eq!(completed(&events).as_deref(), Some("I could not run it."));
    let results = tool_result_texts(&world.mock.model_requests()[1].body);
    assert!(results[0].contains("--approve"), "{results:?}");
    assert!(!world.home.project().join("hacked").exists());
}

#[tokio::test]
async fn malformed_tool_arguments_come_back_as_a_tool_error() {
    let world = World::anthropic();
    let sse = [
        r#"{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","usage":{"input_tokens":1,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_bad","name":"file_read","input":{}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": nope"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}"#,
        r#"{"type":"message_stop"}"#,
    ]
    .iter()
    .map(|data| format!("data: {data}\n\n"))
    .collect::<String>();
    world.mock.push(Reply::raw_sse(sse));
    world
        .mock
        .push(Reply::text("Sorry, retrying properly later."));
    let handle = world.create();
    let events = turn(&handle, "read").await;

    assert!(completed(&events).is_some(), "{events:?}");
    let request = &world.mock.model_requests()[1];
    assert_eq!(request.tool_result_ids(), ["toolu_bad"]);
    assert!(tool_result_texts(&request.body)[0].contains("not valid JSON"));
}

#[tokio::test]
async fn an_oversized_input_is_replaced_by_a_placeholder_and_saved() {
    let world = World::anthropic();
    world.mock.push(Reply::text("noted"));
    let handle = world.create();
    let big = "x".repeat(200 * 1024);
    turn(&handle, &big).await;

    let request = &world.mock.model_requests()[0];
    let sent = request.texts().concat();
    assert!(
        sent.contains("200.0 KiB") && sent.contains("128 KiB"),
        "{sent}"
    );
    let saved = super::session_dir(&world, handle.id()).join("artifacts");
    let files: Vec<_> = std::fs::read_dir(saved).unwrap().collect();
    assert_eq!(files.len(), 1);
}

#[tokio::test]
async fn every_wire_format_runs_a_tool_loop() {
    for kind in [ProviderKind::OpenAi, ProviderKind::Ollama] {
        let world = World::new(kind);
        world.home.write_file("a.txt", "AAA\n");
        world
            .mock
            .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
        world.mock.push(Reply::text("It says AAA."));
        let handle = world.create();
        let events = turn(&handle, "read a.txt").await;
        assert_eq!(
            completed(&events).as_deref(),
            Some("It says AAA."),
            "{kind:?}: {events:?}"
        );
        let request = &world.mock.model_requests()[1];
        let text = request.raw_body.clone();
        assert!(
            text.contains("AAA"),
            "{kind:?}: the tool result reached the model: {text}"
        );
    }
}

/// A tool whose behaviour the test gives: one that panics, one that never finishes.
struct TestTool {
    name: &'static str,
    run: fn() -> tern::tools::ToolFuture<'static>,
}

impl tern::tools::Tool for TestTool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        "A tool for tests."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn min_audience(&self) -> tern::domain::Audience {
        tern::domain::Audience::Public
    }
    fn is_read_only(&self) -> bool {
        true
    }
    fn approval_need(&self, _: &Value, _: &tern::tools::ToolContext) -> tern::tools::ApprovalNeed {
        tern::tools::ApprovalNeed::None
    }
    fn execute<'a>(
        &'a self,
        _: Value,
        _: &'a tern::tools::ToolContext,
        _: tokio_util::sync::CancellationToken,
    ) -> tern::tools::ToolFuture<'a> {
        (self.run)()
    }
}

#[tokio::test]
async fn a_tool_that_panics_gives_an_error_result_and_the_turn_goes_on() {
    let mut world = World::anthropic();
    world.tools.register(Arc::new(TestTool {
        name: "explode",
        run: || Box::pin(async { panic!("a bug in a tool") }),
    }));
    world.home.write_file("a.txt", "AAA\n");
    world.mock.push(Reply::tool_calls([
        ("explode", json!({})),
        ("file_read", json!({"path": "a.txt"})),
    ]));
    world.mock.push(Reply::text("still here"));
    let handle = world.create();
    let events = turn(&handle, "boom").await;
    assert_eq!(completed(&events).as_deref(), Some("still here"));

    let request = &world.mock.model_requests()[1];
    assert_eq!(request.tool_use_ids(), request.tool_result_ids());
    let results = tool_result_texts(&request.body);
    assert!(
        results[0].contains("crashed") && results[0].contains("a bug in a tool"),
        "{results:?}"
    );
    assert!(
        results[1].contains("AAA"),
        "the neighbour's result is kept: {results:?}"
    );
}

#[tokio::test]
async fn a_tool_that_never_finishes_is_stopped_by_the_tool_timeout() {
    let mut world = World::anthropic();
    world.tools.register(Arc::new(TestTool {
        name: "hang",
        run: || Box::pin(std::future::pending()),
    }));
    world.settings.tool_execution_timeout = Duration::from_millis(200);
    world.mock.push(Reply::tool_call("hang", json!({})));
    world.mock.push(Reply::text("moving on"));
    let handle = world.create();
    let events = turn(&handle, "wait").await;
    assert_eq!(completed(&events).as_deref(), Some("moving on"));
    let results = tool_result_texts(&world.mock.model_requests()[1].body);
    assert!(results[0].contains("tool_execution_timeout"), "{results:?}");
}

#[tokio::test]
async fn the_session_log_records_the_turn_with_arguments_redacted() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Edits;
    let secret = "top secret content that must not reach the log ".repeat(3);
    world.mock.push(Reply::tool_call(
        "file_write",
        json!({"path": "notes.txt", "content": secret}),
    ));
    world.mock.push(Reply::text("Written."));
    let handle = world.create();
    turn(&handle, "write it").await;

    let log = session_log(&world, handle.id());
    let text = std::fs::read_to_string(&log).expect("the session log exists");
    for expected in [
        "input #1 accepted",
        "tool call file_write",
        "\"path\":\"notes.txt\"",
        "tool result file_write",
        "turn completed",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(!text.contains("top secret"), "{text}");
    assert_eq!(world.home.read_file("notes.txt"), secret);
}

#[tokio::test]
async fn the_project_instruction_file_reaches_the_model() {
    let world = World::anthropic();
    world
        .home
        .write_file("CLAUDE.md", "Always answer in haiku.\n");
    world.home.write_file("CONTEXT.md", "not this one");
    world.mock.push(Reply::text("ok"));
    let handle = world.create();
    turn(&handle, "hi").await;

    let system = world.mock.model_requests()[0].body["system"].to_string();
    assert!(
        system.contains("Project instructions (from CLAUDE.md)"),
        "{system}"
    );
    assert!(system.contains("Always answer in haiku."), "{system}");
    assert!(!system.contains("not this one"), "{system}");
}

#[tokio::test]
async fn each_call_that_ran_has_its_time_journaled_and_shown() {
    let world = World::anthropic();
    world.home.write_file("notes.txt", "alpha\n");
    world.mock.push(Reply::tool_calls([
        ("file_read", json!({"path": "notes.txt"})),
        ("no_such_tool", json!({})),
    ]));
    world.mock.push(Reply::text("Read."));
    let handle = world.create();
    let events = turn(&handle, "read the notes").await;

    let shown: Vec<(String, Option<u64>)> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult {
                name, duration_ms, ..
            } => Some((name.clone(), *duration_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 2, "{events:?}");
    assert!(shown[0].1.is_some(), "the read ran: {shown:?}");
    assert_eq!(shown[1].1, None, "an unknown tool never started");
    let journaled = journal(&world, handle.id())
        .into_iter()
        .find_map(|e| match e {
            JournalEvent::ToolResults { results, took_ms } => Some((results, took_ms)),
            _ => None,
        });
    let Some((results, Some(took_ms))) = journaled else {
        panic!("no timed results in the journal: {journaled:?}");
    };
    // The same figure the live event carried, under the read's call id only.
    assert_eq!(
        took_ms.into_iter().collect::<Vec<_>>(),
        [(
            results[0].tool_use_id.clone(),
            shown[0].1.unwrap_or(u64::MAX)
        )]
    );
}
