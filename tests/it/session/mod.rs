//! The session through its public handle: a real redb store in a temp dir, the mock provider
//! on 127.0.0.1, real tools on a real project directory.

use crate::support::{MockProvider, Reply, TernHome};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tern::config::{ProviderKind, ProviderProfile, RetrySettings, SessionSettings};
use tern::domain::{ContentBlock, ErrorCategory, Role, SessionId};
use tern::llm::{self, ModelClient, ModelRoute, RetryPolicy};
use tern::session::{
    OutputFilter, SessionDeps, SessionError, SessionEvent, SessionHandle, SessionState,
    Subscription, UserInput,
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
    /// The model's context window in tokens.
    context_window: u64,
    /// A separate model for compaction notes (on the same mock), when set.
    notes_model: Option<&'static str>,
    /// Attempts per model call, the first included (`[retry] max_attempts`).
    max_attempts: u32,
}

impl World {
    fn new(kind: ProviderKind) -> Self {
        let home = TernHome::new();
        let store = Arc::new(Store::open(&home.home().join("data/tern.redb")).expect("open store"));
        // No title call after the first turn, so each script holds only the conversation;
        // the title tests turn it on.
        let settings = SessionSettings {
            sidecar_titles: false,
            ..SessionSettings::default()
        };
        Self {
            home,
            mock: MockProvider::start_blocking(),
            store,
            kind,
            approval: ApprovalMode::Never,
            settings,
            fallback: None,
            tools: ToolRegistry::builtin(),
            context_window: 100_000,
            notes_model: None,
            max_attempts: 3,
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
            context_window: self.context_window,
            max_output_tokens: 1000,
            written: Default::default(),
            images: false,
        }
    }

    fn deps(&self) -> Arc<SessionDeps> {
        let profile = self.profile();
        let route = |model: &str| {
            ModelRoute::new(
                llm::provider_for(&profile),
                model.to_owned(),
                1000,
                profile.context_window,
            )
        };
        let retry = RetrySettings {
            max_attempts: self.max_attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(200),
        };
        let policy = RetryPolicy::new(&retry, &self.settings);
        Arc::new(SessionDeps {
            store: self.store.clone(),
            client: ModelClient::new(
                route("primary-model"),
                self.fallback.map(route),
                policy.clone(),
            ),
            tools: self.tools.clone(),
            settings: self.settings.clone(),
            approval: self.approval,
            data_dir: self.home.home().join("data"),
            identity_dir: self.home.home().join("identity"),
            notes_client: self.notes_model.map(|model| {
                ModelClient::new(route(model), self.fallback.map(route), policy.clone())
            }),
            overrides: Default::default(),
            redactor: Default::default(),
            child_env: Default::default(),
            agents: Default::default(),
            jobs: Default::default(),
            mcp: None,
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
    turn_with(handle, UserInput::local(text)).await
}

/// Sends `input` and collects every event until the turn ends.
async fn turn_with(handle: &SessionHandle, input: UserInput) -> Vec<SessionEvent> {
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");
    handle.send(input).await.expect("send");
    let seen = until_turns_end(&mut events, 1).await;
    handle.state().await.expect("session idle");
    seen
}

/// Collects events until `turns` turns have ended, for at most 30 s.
async fn until_turns_end(events: &mut Subscription, turns: usize) -> Vec<SessionEvent> {
    until_turns_end_within(events, turns, Duration::from_secs(30)).await
}

/// Collects events until `turns` turns have ended, for at most `limit`.
async fn until_turns_end_within(
    events: &mut Subscription,
    turns: usize,
    limit: Duration,
) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    let mut ended = 0;
    let collect = async {
        while let Some(event) = events.recv().await {
            let end = matches!(
                event,
                SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
            );
            seen.push(event);
            if end {
                ended += 1;
                if ended == turns {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(limit, collect)
        .await
        .expect("turns ended in time");
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
        SessionEvent::TurnFailed {
            category, message, ..
        } => Some((*category, message.clone())),
        _ => None,
    })
}

/// The tool results among `events`, with whether each is an error.
fn results(events: &[SessionEvent]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

fn completed(events: &[SessionEvent]) -> Option<String> {
    events.iter().find_map(|e| match e {
        SessionEvent::TurnCompleted { text, .. } => Some(text.clone()),
        _ => None,
    })
}

/// How each turn among `events` ended, with its text (or its error's message).
fn stops(events: &[SessionEvent]) -> Vec<(tern::domain::TurnStop, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TurnCompleted { stop, text, .. } => Some((*stop, text.clone())),
            SessionEvent::TurnFailed { stop, message, .. } => Some((*stop, message.clone())),
            _ => None,
        })
        .collect()
}

/// The texts of the history's messages, without tern's per-turn `[system: …]` notes.
fn conversation(state: &SessionState) -> Vec<String> {
    state
        .messages
        .iter()
        .map(|m| m.text())
        .filter(|text| !text.starts_with(tern::prompt::NUDGE_OPENING))
        .collect()
}

/// The session's own log, `logs/session.log` in its folder.
fn session_log(world: &World, id: &SessionId) -> std::path::PathBuf {
    session_dir(world, id).join("logs/session.log")
}

/// The session's folder, as the index records it.
fn session_dir(world: &World, id: &SessionId) -> std::path::PathBuf {
    let meta = world.store.meta(id).expect("read meta").expect("a session");
    meta.session_dir.expect("new sessions record their folder")
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
pub(crate) fn tool_result_texts(request: &Value) -> Vec<String> {
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

/// The names of the tools a request `body` offered the model.
pub(crate) fn offered_tools(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether each tool call of session `id` failed, and what it returned, as journaled.
fn tool_results(world: &World, id: &SessionId) -> Vec<(bool, String)> {
    world
        .store
        .load(id)
        .unwrap()
        .iter()
        .filter_map(|record| match &record.event {
            JournalEvent::ToolResults { results, .. } => Some(results.clone()),
            _ => None,
        })
        .flatten()
        .map(|result| (result.is_error, result.content))
        .collect()
}

mod approvals;
mod connections;
mod errors;
mod gateway;
mod guard;
mod jobs;
mod joins;
mod large_arguments;
mod layers;
mod lifecycle;
mod long;
mod prechecks;
mod prefix;
mod resets;
mod service;
mod small_window;
mod snapshots;
mod subagents;
mod titles;
mod turns;
mod upkeep;
mod watchdogs;
