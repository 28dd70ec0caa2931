//! The session through its public handle: a real redb store in a temp dir, the mock provider
//! on 127.0.0.1, real tools on a real project directory.

use crate::support::{MockProvider, Reply, TernHome};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tern::config::{ProviderKind, ProviderProfile, RetrySettings, SessionSettings};
use tern::domain::{ContentBlock, ErrorCategory, Role, SessionId};
use tern::llm::{self, ModelClient, ModelRoute, RetryPolicy};
use tern::session::{
    OutputFilter, SessionDeps, SessionError, SessionEvent, SessionHandle, SessionState, UserInput,
};
use tern::store::{JournalEvent, Store};
use tern::tools::{ApprovalMode, ToolRegistry};

/// A session world: an isolated home, a mock provider and a store.
struct World {
    home: TernHome,
    mock: MockProvider,
    store: Arc<Store>,
    kind: ProviderKind,
    approval: ApprovalMode,
    settings: SessionSettings,
    fallback: Option<&'static str>,
    tools: ToolRegistry,
}

impl World {
    fn new(kind: ProviderKind) -> Self {
        let home = TernHome::new();
        let store = Arc::new(Store::open(&home.home().join("data/tern.redb")).expect("open store"));
        Self {
            home,
            mock: MockProvider::start_blocking(),
            store,
            kind,
            approval: ApprovalMode::Never,
            settings: SessionSettings::default(),
            fallback: None,
            tools: ToolRegistry::builtin(),
        }
    }

    fn anthropic() -> Self {
        Self::new(ProviderKind::Anthropic)
    }

    fn profile(&self) -> ProviderProfile {
        ProviderProfile {
            name: "mock".into(),
            kind: self.kind,
            base_url: self.mock.base_url(),
            api_key_env: Some("MOCK_KEY".into()),
            api_key: Some("test-key".into()),
            default_model: "primary-model".into(),
            context_window: 100_000,
            max_output_tokens: 1000,
        }
    }

    fn deps(&self) -> Arc<SessionDeps> {
        let profile = self.profile();
        let route = |model: &str| ModelRoute {
            provider: llm::provider_for(&profile),
            model: model.to_owned(),
            max_output_tokens: 1000,
        };
        let retry = RetrySettings {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(200),
        };
        let policy = RetryPolicy::new(&retry, &self.settings);
        Arc::new(SessionDeps {
            store: self.store.clone(),
            client: ModelClient::new(route("primary-model"), self.fallback.map(route), policy),
            tools: self.tools.clone(),
            settings: self.settings.clone(),
            approval: self.approval,
            data_dir: self.home.home().join("data"),
        })
    }

    fn create(&self) -> SessionHandle {
        let project = self.home.project().canonicalize().expect("project dir");
        SessionHandle::create(self.deps(), project).expect("create session")
    }

    fn resume(&self, id: &SessionId) -> SessionHandle {
        let meta = self
            .store
            .meta(id)
            .expect("read meta")
            .expect("session exists");
        SessionHandle::resume(self.deps(), &meta).expect("resume session")
    }
}

/// Sends `text` and collects every event until the turn ends.
async fn turn(handle: &SessionHandle, text: &str) -> Vec<SessionEvent> {
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");
    handle.send(UserInput::local(text)).await.expect("send");
    let mut seen = Vec::new();
    let collect = async {
        while let Some(event) = events.recv().await {
            let end = matches!(
                event,
                SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
            );
            seen.push(event);
            if end {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("turn ended in time");
    handle.state().await.expect("session idle");
    seen
}

fn streamed_text(events: &[SessionEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn failure(events: &[SessionEvent]) -> Option<(ErrorCategory, String)> {
    events.iter().find_map(|e| match e {
        SessionEvent::TurnFailed { category, message } => Some((*category, message.clone())),
        _ => None,
    })
}

fn completed(events: &[SessionEvent]) -> Option<String> {
    events.iter().find_map(|e| match e {
        SessionEvent::TurnCompleted { text, .. } => Some(text.clone()),
        _ => None,
    })
}

fn journal(world: &World, id: &SessionId) -> Vec<JournalEvent> {
    world
        .store
        .load(id)
        .expect("load journal")
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// The text of every tool result the request carries, in order (Anthropic shape).
fn tool_result_texts(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                let content = &block["content"];
                let text = match content {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => {
                        parts.iter().filter_map(|p| p["text"].as_str()).collect()
                    }
                    _ => String::new(),
                };
                out.push(text);
            }
        }
    }
    out
}

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
            JournalEvent::TurnCompleted => "completed",
            JournalEvent::TitleChanged { .. } => "title",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["input", "title", "usage", "assistant", "completed"]);
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
async fn an_auth_error_fails_at_once_without_retrying() {
    let world = World::anthropic();
    world.mock.push(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::Auth);
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert_eq!(world.mock.model_requests().len(), 1);
}

#[tokio::test]
async fn server_and_overload_errors_are_retried() {
    for status in [500, 529, 503] {
        let world = World::anthropic();
        world.mock.push(Reply::error(
            status,
            r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#,
        ));
        world.mock.push(Reply::text("recovered"));
        let handle = world.create();
        let events = turn(&handle, "hi").await;

        assert_eq!(
            completed(&events).as_deref(),
            Some("recovered"),
            "status {status}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, SessionEvent::Retry { .. })),
            "status {status}"
        );
        assert_eq!(world.mock.model_requests().len(), 2);
    }
}

#[tokio::test]
async fn rate_limits_wait_as_long_as_the_provider_asks() {
    let world = World::anthropic();
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    world
        .mock
        .push(Reply::error(429, body).header("retry-after-ms", "40"));
    world
        .mock
        .push(Reply::error(429, body).header("retry-after", "0"));
    world.mock.push(Reply::text("ok"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let delays: Vec<(ErrorCategory, Duration)> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Retry {
                category, delay, ..
            } => Some((*category, *delay)),
            _ => None,
        })
        .collect();
    assert_eq!(
        delays,
        [
            (ErrorCategory::RateLimit, Duration::from_millis(40)),
            (ErrorCategory::RateLimit, Duration::ZERO)
        ]
    );
    assert_eq!(completed(&events).as_deref(), Some("ok"));
}

#[tokio::test]
async fn a_stream_cut_mid_reply_is_retried_and_nothing_partial_is_kept() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("this reply will be cut somewhere in the middle").cut_after_events(4));
    world.mock.push(Reply::text("complete answer"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    assert_eq!(completed(&events).as_deref(), Some("complete answer"));
    let retry = events.iter().find_map(|e| match e {
        SessionEvent::Retry { category, .. } => Some(*category),
        _ => None,
    });
    assert_eq!(retry, Some(ErrorCategory::Network));
    let state = handle.state().await.unwrap();
    assert_eq!(state.messages.len(), 2);
    assert_eq!(state.messages[1].text(), "complete answer");
}

#[tokio::test]
async fn a_line_that_is_not_json_gives_a_clear_error_and_the_session_stays_usable() {
    let world = World::anthropic();
    for _ in 0..3 {
        world.mock.push(Reply::raw_sse(
            "event: message_start\ndata: {not json at all\n\n",
        ));
    }
    world.mock.push(Reply::text("fine now"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;
    let (_, message) = failure(&events).expect("turn failed");
    assert!(
        message.contains("not json at all") || message.contains("JSON"),
        "{message}"
    );

    let events = turn(&handle, "again").await;
    assert_eq!(completed(&events).as_deref(), Some("fine now"));
}

#[tokio::test]
async fn the_fallback_model_takes_over_when_the_primary_keeps_failing() {
    let mut world = World::anthropic();
    world.fallback = Some("fallback-model");
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    for _ in 0..3 {
        world
            .mock
            .push_for_model("primary-model", Reply::error(529, overloaded));
    }
    world
        .mock
        .push_for_model("fallback-model", Reply::text("from the fallback"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    assert_eq!(completed(&events).as_deref(), Some("from the fallback"));
    assert!(
        events.iter().any(
            |e| matches!(e, SessionEvent::Fallback { model, .. } if model == "fallback-model")
        )
    );
    let models: Vec<_> = world
        .mock
        .model_requests()
        .iter()
        .map(|r| r.model().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        models,
        [
            "primary-model",
            "primary-model",
            "primary-model",
            "fallback-model"
        ]
    );
}

#[tokio::test]
async fn a_reply_cut_at_the_output_limit_fails_and_is_not_kept() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("The answer is a long list: one, two, thr").stop_reason_max_tokens());
    let handle = world.create();
    let events = turn(&handle, "list").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::ModelBehavior);
    assert!(message.contains("output limit"), "{message}");
    let state = handle.state().await.unwrap();
    assert!(
        state.messages.iter().all(|m| m.role == Role::User),
        "{:?}",
        state.messages
    );
    assert!(
        !journal(&world, handle.id())
            .iter()
            .any(|e| matches!(e, JournalEvent::AssistantMessage { .. }))
    );
}

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
    assert_eq!(before.messages.len(), 4);
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
    assert_eq!(messages[4]["content"][0]["text"], "what did I ask?");
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
async fn an_oversized_input_is_replaced_by_a_placeholder_and_saved() {
    let world = World::anthropic();
    world.mock.push(Reply::text("noted"));
    let handle = world.create();
    let big = "x".repeat(200 * 1024);
    turn(&handle, &big).await;

    let request = &world.mock.model_requests()[0];
    let sent = request.body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        sent.contains("200.0 KiB") && sent.contains("128 KiB"),
        "{sent}"
    );
    let saved = world
        .home
        .home()
        .join("data/sessions")
        .join(handle.id().as_str())
        .join("artifacts");
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
    // The second input was journaled after the whole first turn: title, usage, reply, end.
    assert_eq!((one, two), (1, 6));
    let state = handle.state().await.unwrap();
    let texts: Vec<String> = state.messages.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["one", "first", "two", "second"]);
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
        matches!(journal.last(), Some(JournalEvent::TurnCompleted)),
        "{journal:?}"
    );
    assert!(matches!(
        other.send(UserInput::local("two")).await,
        Err(SessionError::Closed)
    ));
}

#[tokio::test]
async fn a_provider_that_stops_answering_times_out_and_is_retried() {
    let mut world = World::anthropic();
    world.settings.first_token_timeout = Duration::from_millis(300);
    world
        .mock
        .push(Reply::text("too late").delay_after_headers(Duration::from_secs(5)));
    world.mock.push(Reply::text("on time"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let retry = events.iter().find_map(|e| match e {
        SessionEvent::Retry { category, .. } => Some(*category),
        _ => None,
    });
    assert_eq!(retry, Some(ErrorCategory::Timeout));
    assert_eq!(completed(&events).as_deref(), Some("on time"));
}

#[tokio::test]
async fn a_context_overflow_is_reported_as_such_without_retrying() {
    let world = World::anthropic();
    world.mock.push(Reply::error(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    ));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::ContextOverflow);
    assert!(message.contains("prompt is too long"), "{message}");
    assert_eq!(world.mock.model_requests().len(), 1);
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
