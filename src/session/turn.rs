//! One turn: model call, tool batch, results, model call … until the model ends the turn or
//! something fails. Every step is journaled before the state moves on.

use super::actor::SessionDeps;
use super::batch::{BatchEnv, run_batch};
use super::envelope::SessionDirs;
use super::events::SessionEvent;
use super::layers;
use super::state::{SessionState, oversize_placeholder};
use crate::context::CurrentTime;
use crate::domain::{Audience, ContentBlock, ErrorCategory, Message, Role, ToolCall, Usage};
use crate::llm::{LlmError, StreamEvent, StreamObserver};
use crate::prompt;
use crate::store::JournalEvent;
use crate::tools::{ToolContext, ToolEffect};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// A running turn's view of the session: its dependencies and where its events go.
pub struct Turn<'a> {
    pub deps: &'a SessionDeps,
    pub dirs: &'a SessionDirs,
    pub audience: Audience,
    pub cancel: CancellationToken,
    pub events: UnboundedSender<SessionEvent>,
}

impl Turn<'_> {
    /// Runs the turn to its end, journaling as it goes. The state always matches the journal:
    /// an event is applied only after it was appended.
    pub async fn run(&self, state: &mut SessionState) {
        match self.rounds(state).await {
            // The last round journaled the turn's end with its reply.
            Ok(()) => {}
            Err(failure) => {
                let (category, message) = (failure.category, failure.message);
                self.emit(SessionEvent::TurnFailed {
                    category,
                    message: message.clone(),
                });
                let event = JournalEvent::TurnFailed {
                    category,
                    message: message.clone(),
                };
                if let Err(err) = self.record(state, vec![event]) {
                    tracing::error!(%err, "could not journal the end of a turn");
                }
            }
        }
    }

    async fn rounds(&self, state: &mut SessionState) -> Result<(), LlmError> {
        let tools = prompt::tool_specs(&self.deps.tools, self.audience);
        let mut turn_usage = Usage::default();
        let temp_dir = self.dirs.prepare_temp_dir();
        let time = CurrentTime::now();
        let setup =
            layers::prepare_turn(self.deps, self.dirs, &temp_dir, state, self.audience, time).await;
        self.record(state, setup)?;
        let mut ctx = ToolContext {
            project_dir: state.project_dir.clone(),
            cwd: state.cwd.clone(),
            temp_dir: temp_dir.clone(),
            // The session's own folder (artifacts, logs) and its scratch space, as tier B
            // tells the model.
            readable_dirs: vec![self.dirs.session_dir.clone(), temp_dir],
            tool_timeout: self.deps.settings.tool_execution_timeout,
        };
        loop {
            let route = &self.deps.client.primary;
            let request = layers::request(state, self.audience, tools.clone(), route);
            let mut observer = Forward {
                events: &self.events,
            };
            let reply = self
                .deps
                .client
                .complete(request, &mut observer, &self.cancel)
                .await?;
            turn_usage.add(&reply.usage);
            self.emit(SessionEvent::Usage {
                model: reply.model.clone(),
                usage: reply.usage,
            });
            let mut events = vec![JournalEvent::Usage {
                model: reply.model.clone(),
                usage: reply.usage,
            }];

            // The whole text is what the turn answered, even when the history keeps only a
            // placeholder for it.
            let reply_message = Message {
                role: Role::Assistant,
                content: reply.content,
            };
            let text = reply_message.text();
            let calls: Vec<ToolCall> = reply_message.tool_calls().cloned().collect();
            let content = self.fit_content(state, reply_message.content);
            if !content.is_empty() {
                events.push(JournalEvent::AssistantMessage {
                    model: reply.model,
                    content,
                });
            }
            if calls.is_empty() {
                events.push(JournalEvent::TurnCompleted);
            }
            // One commit per round: the reply, its usage and, at the end, the turn's end.
            self.record(state, events)?;
            if calls.is_empty() {
                self.emit(SessionEvent::TurnCompleted {
                    text,
                    usage: turn_usage,
                });
                return Ok(());
            }

            for call in &calls {
                self.emit(SessionEvent::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                });
            }
            let env = BatchEnv {
                tools: &self.deps.tools,
                audience: self.audience,
                approval: self.deps.approval,
                malformed: &reply.malformed_tool_args,
            };
            let outcomes = run_batch(&calls, &env, &mut ctx, &self.cancel).await;
            let mut results = Vec::with_capacity(outcomes.len());
            let mut effects = Vec::new();
            for (call, outcome) in calls.iter().zip(outcomes) {
                let mut result = outcome.result;
                result.content = self.fit_text(&format!("tool-{}.txt", call.id), result.content);
                self.emit(SessionEvent::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    content: result.content.clone(),
                    is_error: result.is_error,
                });
                results.push(result);
                effects.extend(outcome.effects);
            }
            let mut events = vec![JournalEvent::ToolResults { results }];
            // The journal records paths as text; a path that is not UTF-8 cannot be kept in
            // the recent files (the tool result already named it).
            let effects = effects.into_iter().filter(|effect| match effect {
                ToolEffect::Read(path)
                | ToolEffect::Wrote(path)
                | ToolEffect::SetWorkingDirectory(path) => path.to_str().is_some(),
            });
            events.extend(effects.map(|effect| match effect {
                ToolEffect::Read(path) | ToolEffect::Wrote(path) => {
                    JournalEvent::FileTouched { path }
                }
                ToolEffect::SetWorkingDirectory(path) => {
                    JournalEvent::WorkingDirectoryChanged { path }
                }
            }));
            self.record(state, events)?;
            if self.cancel.is_cancelled() {
                return Err(LlmError::new(
                    ErrorCategory::Cancelled,
                    "the turn was cancelled",
                ));
            }
        }
    }

    /// Appends `events` durably in one commit, then applies them.
    fn record(&self, state: &mut SessionState, events: Vec<JournalEvent>) -> Result<(), LlmError> {
        self.deps
            .store
            .append_batch(&state.id, &events)
            .map_err(|err| {
                LlmError::new(
                    ErrorCategory::Storage,
                    format!("the session journal could not be written, so the turn stopped: {err}"),
                )
            })?;
        for event in &events {
            state.apply(event);
        }
        Ok(())
    }

    fn emit(&self, event: SessionEvent) {
        // The actor outlives its turns; a failed send means it is shutting down anyway.
        let _ = self.events.send(event);
    }

    /// Replaces oversized text blocks of an assistant message by placeholders.
    fn fit_content(&self, state: &SessionState, content: Vec<ContentBlock>) -> Vec<ContentBlock> {
        content
            .into_iter()
            .enumerate()
            .map(|(i, block)| match block {
                ContentBlock::Text { text } => ContentBlock::Text {
                    text: self.fit_text(&format!("reply-{}-{i}.txt", state.messages.len()), text),
                },
                other => other,
            })
            .collect()
    }

    /// Keeps `text` if it is within the message size limit; otherwise saves it as an artifact
    /// and returns a placeholder naming its size and where it went.
    pub fn fit_text(&self, name: &str, text: String) -> String {
        let limit = self.deps.settings.max_message_bytes;
        if text.len() <= limit {
            return text;
        }
        let saved = self.dirs.save_artifact(name, &text);
        oversize_placeholder(text.len(), limit, saved.as_deref())
    }
}

/// Passes streamed model output on to the session's subscribers.
struct Forward<'a> {
    events: &'a UnboundedSender<SessionEvent>,
}

impl Forward<'_> {
    fn send(&self, event: SessionEvent) {
        let _ = self.events.send(event);
    }
}

impl StreamObserver for Forward<'_> {
    fn on_event(&mut self, event: &StreamEvent) {
        let event = match event {
            StreamEvent::TextDelta(text) => SessionEvent::TextDelta { text: text.clone() },
            StreamEvent::ThinkingDelta(text) => SessionEvent::ThinkingDelta { text: text.clone() },
            _ => return,
        };
        self.send(event);
    }

    fn on_retry(&mut self, attempt: u32, delay: Duration, error: &LlmError) {
        self.send(SessionEvent::Retry {
            attempt,
            delay,
            category: error.category,
            message: error.message.clone(),
        });
    }

    fn on_fallback(&mut self, model: &str, error: &LlmError) {
        self.send(SessionEvent::Fallback {
            model: model.to_owned(),
            message: error.to_string(),
        });
    }
}
