//! The actor's order of things while the disk is slow: an input's turn asks the model while
//! the input is synced, and nothing is acknowledged or shown before it is durable.

use super::*;
use crate::config::{RetrySettings, SessionSettings};
use crate::llm::{
    BoxFuture, ChatRequest, EventStream, LlmError, ModelClient, ModelRoute, Provider, RetryPolicy,
    StopReason, StreamEvent,
};
use crate::session::events::OutputFilter;
use crate::store::Store;
use crate::tools::ToolRegistry;
use futures_util::stream;
use std::sync::Mutex;
use std::sync::mpsc as std_mpsc;

/// A model that says it was asked, then answers "hello".
struct Told(Mutex<std_mpsc::Sender<()>>);

impl Provider for Told {
    fn name(&self) -> &str {
        "told"
    }

    fn stream<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        let _ = self.0.lock().map(|told| told.send(()));
        let events = [
            StreamEvent::TextDelta("hello".to_owned()),
            StreamEvent::Stop(StopReason::EndTurn),
        ];
        Box::pin(
            async move { Ok(Box::pin(stream::iter(events.into_iter().map(Ok))) as EventStream) },
        )
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async { Ok("told".to_owned()) })
    }

    fn wire_body(&self, request: &ChatRequest) -> serde_json::Value {
        serde_json::json!({ "model": request.model })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_asks_the_model_while_its_input_is_synced_and_shows_nothing_before() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = Arc::new(Store::open(&dir.path().join("tern.redb")).expect("a store"));
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("a project");
    let (told, asked) = std_mpsc::channel();
    let route = ModelRoute::new(Arc::new(Told(Mutex::new(told))), "m", 1000, 100_000);
    let settings = SessionSettings {
        sidecar_titles: false,
        ..SessionSettings::default()
    };
    let retry = RetrySettings::default();
    let deps = Arc::new(SessionDeps {
        store: store.clone(),
        client: ModelClient::new(route, None, RetryPolicy::new(&retry, &settings)),
        tools: ToolRegistry::builtin(),
        settings,
        approval: ApprovalMode::Never,
        data_dir: dir.path().join("data"),
        identity_dir: dir.path().join("identity"),
        notes_client: None,
        overrides: Default::default(),
        redactor: Default::default(),
        child_env: Default::default(),
        agents: Default::default(),
        jobs: Default::default(),
        mcp: None,
    });
    let handle = SessionHandle::create(deps, project).expect("a session");
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribed");

    let held = store.hold_syncs();
    let sender = handle.clone();
    let sent = tokio::spawn(async move { sender.send(UserInput::local("hi")).await });
    // The model is asked while the disk has not synced the input...
    let asked = tokio::task::spawn_blocking(move || asked.recv_timeout(Duration::from_secs(20)));
    assert!(
        asked.await.expect("waited").is_ok(),
        "the model was asked only once the input was durable"
    );
    // ...but the input is not acknowledged, and nothing of its turn shown.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!sent.is_finished(), "acknowledged before it was durable");
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_millis(10), events.recv()).await
    {
        assert!(
            matches!(event, SessionEvent::PhaseChanged { .. }),
            "shown before the input was durable: {event:?}"
        );
    }
    let syncs = store.durable_commits();
    drop(held);
    let seq = sent.await.expect("sent").expect("acknowledged");
    assert!(seq > 0);
    assert!(store.durable_commits() > syncs, "acknowledged after a sync");
    let mut seen = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(20), events.recv()).await {
        let ended = matches!(event, SessionEvent::TurnCompleted { .. });
        seen.push(event);
        if ended {
            break;
        }
    }
    let accepted = seen
        .iter()
        .position(|event| matches!(event, SessionEvent::InputAccepted { .. }));
    let words = seen
        .iter()
        .position(|event| matches!(event, SessionEvent::TextDelta { .. }));
    assert!(
        matches!((accepted, words), (Some(a), Some(w)) if a < w),
        "the input's acknowledgement first, then the answer: {seen:?}"
    );
}
