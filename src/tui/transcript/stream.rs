//! How session events change the transcript. Text and thinking deltas are gathered and
//! committed to their cell once per frame ([`Transcript::commit_pending`]); tool calls,
//! results and turn ends apply at once.

use super::Transcript;
use super::cell::{CellKind, ToolCell, ToolStatus};
use crate::domain::{ErrorCategory, TurnStop};
use crate::session::SessionEvent;
use std::time::Duration;
use tokio::time::Instant;

/// What is being streamed now.
#[derive(Debug, Default)]
pub(super) struct Stream {
    text: String,
    thinking: String,
    /// The cell the current round's text goes to, once it has any.
    answer: Option<usize>,
    thought: Option<usize>,
}

impl Transcript {
    /// Applies one session event.
    pub fn apply(&mut self, event: &SessionEvent, now: Instant) {
        match event {
            SessionEvent::InputAccepted { text, .. } => self.accepted(text),
            SessionEvent::TextDelta { text } => self.stream.text.push_str(text),
            SessionEvent::ThinkingDelta { text } => self.stream.thinking.push_str(text),
            SessionEvent::Retry {
                attempt,
                category,
                message,
                ..
            } => {
                self.void_round();
                self.push(CellKind::Notice {
                    text: format!("retrying (attempt {attempt}) after {category}: {message}"),
                });
            }
            SessionEvent::TextReadAsCalls { .. } => self.void_answer(),
            SessionEvent::Fallback { model, message, .. } => {
                self.void_round();
                self.push(CellKind::Notice {
                    text: format!("switching to the fallback model {model}: {message}"),
                });
            }
            SessionEvent::ToolCall { id, name, input } => {
                self.end_round();
                self.push(CellKind::Tool(ToolCell {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                    status: ToolStatus::Running { since: now },
                    output: String::new(),
                }));
            }
            SessionEvent::ToolResult {
                id,
                content,
                is_error,
                duration_ms,
                ..
            } => self.tool_done(id, content, *is_error, *duration_ms),
            SessionEvent::Compacted { .. } => {
                if let Some(text) = event.compaction_summary() {
                    self.push(CellKind::Notice { text });
                }
            }
            SessionEvent::TurnCompleted { text, stop, .. } => {
                // A drain ends a turn after a batch, or (a handover) lets its model call go:
                // what that call streamed is in no record, and is asked for again.
                if *stop == TurnStop::Drained {
                    self.void_round();
                }
                let streamed = self.stream.answer.is_some() || !self.stream.text.is_empty();
                self.end_round();
                if !streamed && !text.trim().is_empty() {
                    self.push(CellKind::Assistant {
                        text: text.clone(),
                        streaming: false,
                        interrupted: false,
                    });
                }
                if *stop != TurnStop::Completed {
                    self.push(CellKind::Notice {
                        text: end_notice(*stop),
                    });
                }
            }
            SessionEvent::TurnFailed {
                category,
                message,
                stop,
            } => self.failed(*category, message, *stop),
            SessionEvent::ApprovalRequested { call_id, .. } => {
                self.set_tool_status(call_id, ToolStatus::Asking)
            }
            SessionEvent::ApprovalDecided { call_id, answer } if answer.allows() => {
                self.set_tool_status(call_id, ToolStatus::Running { since: now })
            }
            SessionEvent::PhaseChanged { .. }
            | SessionEvent::Usage { .. }
            | SessionEvent::ApprovalDecided { .. }
            | SessionEvent::TitleChanged { .. } => {}
        }
    }

    /// Moves what was streamed since the last frame into its cells. Returns whether anything
    /// changed.
    pub fn commit_pending(&mut self) -> bool {
        let thinking = std::mem::take(&mut self.stream.thinking);
        let text = std::mem::take(&mut self.stream.text);
        let thought = self.stream.thought;
        self.stream.thought = self.append_streamed(thought, &thinking, || CellKind::Thinking {
            text: String::new(),
        });
        let answer = self.stream.answer;
        self.stream.answer = self.append_streamed(answer, &text, || CellKind::Assistant {
            text: String::new(),
            streaming: true,
            interrupted: false,
        });
        !thinking.is_empty() || !text.is_empty()
    }

    /// Adds `chunk` to the streamed cell at `at`, or to a new one made by `new` when there is
    /// none yet; returns where the cell is.
    fn append_streamed(
        &mut self,
        at: Option<usize>,
        chunk: &str,
        new: impl FnOnce() -> CellKind,
    ) -> Option<usize> {
        if chunk.is_empty() {
            return at;
        }
        let at = at.unwrap_or_else(|| {
            self.push(new());
            self.cells.len() - 1
        });
        if let CellKind::Thinking { text } | CellKind::Assistant { text, .. } =
            self.cells[at].edit()
        {
            text.push_str(chunk);
        }
        Some(at)
    }

    /// Whether streamed text waits to be committed.
    pub fn has_pending(&self) -> bool {
        !self.stream.text.is_empty() || !self.stream.thinking.is_empty()
    }

    /// A message the person sent, shown at once and marked queued until accepted.
    pub fn sent(&mut self, text: &str) {
        // What streamed before it was written goes above it.
        self.commit_pending();
        let (text, left_out) = super::long_text::kept(text);
        self.push(CellKind::User {
            text,
            left_out,
            queued: true,
        });
    }

    /// The message `text` was not sent after all: its queued cell goes.
    /// The message may have gone with the output of `!` lines before it, which its cell
    /// does not show: it is the message's end.
    pub fn unsent(&mut self, text: &str) {
        let (kept, _) = super::long_text::kept(text);
        let Some(at) = self.cells.iter().rposition(|c| {
            matches!(&c.kind, CellKind::User { text: shown, queued: true, left_out }
                if *shown == kept || (*left_out == 0 && text.ends_with(shown.as_str())))
        }) else {
            return;
        };
        self.cells.remove(at);
        // The streaming cells' places move up with it.
        for place in [&mut self.stream.answer, &mut self.stream.thought]
            .into_iter()
            .flatten()
        {
            if *place > at {
                *place -= 1;
            }
        }
    }

    /// The oldest queued message was taken in; an input from elsewhere is added.
    fn accepted(&mut self, text: &str) {
        let queued = self
            .cells
            .iter()
            .position(|c| matches!(c.kind, CellKind::User { queued: true, .. }));
        match queued {
            Some(at) => {
                let cell = self.cells.remove(at);
                let CellKind::User {
                    text: sent,
                    left_out,
                    ..
                } = cell.kind
                else {
                    return;
                };
                // It goes where the session took it in: after what came before it.
                self.end_round();
                self.push(CellKind::User {
                    text: sent,
                    left_out,
                    queued: false,
                });
            }
            None => {
                self.end_round();
                let (text, left_out) = super::long_text::kept(text);
                self.push(CellKind::User {
                    text,
                    left_out,
                    queued: false,
                });
            }
        }
    }

    /// Ends the current model round: what was streamed is final.
    fn end_round(&mut self) {
        self.commit_pending();
        if let Some(at) = self.stream.answer.take()
            && let CellKind::Assistant { streaming, .. } = self.cells[at].edit()
        {
            *streaming = false;
        }
        self.stream.thought = None;
    }

    /// A retry or a failover voids what the failed call streamed.
    /// Drops the round's text and its cell, keeping its thinking: the text was tool calls.
    fn void_answer(&mut self) {
        self.stream.text.clear();
        if let Some(at) = self.stream.answer.take()
            && at < self.cells.len()
        {
            self.cells.remove(at);
            if let Some(thought) = self.stream.thought.as_mut()
                && *thought > at
            {
                *thought -= 1;
            }
        }
    }

    /// Drops what the running round streamed, which no record holds: its model call was let
    /// go (the owner handed the session over) and is asked again.
    pub fn void_streamed(&mut self) {
        self.void_round();
    }

    fn void_round(&mut self) {
        self.stream.text.clear();
        self.stream.thinking.clear();
        let mut gone: Vec<usize> = [self.stream.answer.take(), self.stream.thought.take()]
            .into_iter()
            .flatten()
            .collect();
        gone.sort_unstable_by(|a, b| b.cmp(a));
        for at in gone {
            if at < self.cells.len() {
                self.cells.remove(at);
            }
        }
    }

    /// The call `id`'s tool cell, opened for a change.
    fn tool_cell(&mut self, id: &str) -> Option<&mut ToolCell> {
        let cell = self
            .cells
            .iter_mut()
            .rev()
            .find(|c| matches!(&c.kind, CellKind::Tool(tool) if tool.id == id))?;
        match cell.edit() {
            CellKind::Tool(tool) => Some(tool),
            _ => None,
        }
    }

    fn set_tool_status(&mut self, id: &str, status: ToolStatus) {
        if let Some(tool) = self.tool_cell(id) {
            tool.status = status;
        }
    }

    /// A call's result: the time shown is the one the session measured and journaled, so
    /// the session opened again shows the same; a call that never started shows none.
    fn tool_done(&mut self, id: &str, content: &str, is_error: bool, duration_ms: Option<u64>) {
        let Some(tool) = self.tool_cell(id) else {
            return;
        };
        tool.status = ToolStatus::Done {
            ok: !is_error,
            took: duration_ms.map(Duration::from_millis),
        };
        tool.output = content.to_owned();
    }

    fn failed(&mut self, category: ErrorCategory, message: &str, stop: TurnStop) {
        self.commit_pending();
        let interrupted =
            matches!(stop, TurnStop::Interrupted) || category == ErrorCategory::Cancelled;
        if let Some(at) = self.stream.answer.take()
            && let CellKind::Assistant {
                streaming,
                interrupted: marked,
                ..
            } = self.cells[at].edit()
        {
            *streaming = false;
            *marked = true;
        }
        self.stream.thought = None;
        // Tools still shown as running were stopped with the turn.
        for cell in self.cells.iter_mut().rev().take(64) {
            if let CellKind::Tool(tool) = &cell.kind
                && matches!(tool.status, ToolStatus::Running { .. } | ToolStatus::Asking)
                && let CellKind::Tool(tool) = cell.edit()
            {
                tool.status = ToolStatus::Done {
                    ok: false,
                    took: None,
                };
                tool.output = "stopped with the turn".to_owned();
            }
        }
        if interrupted {
            self.push(CellKind::Notice {
                text: "interrupted; the conversation goes on from here".to_owned(),
            });
        } else {
            let detail = match stop {
                TurnStop::OutputLimit => {
                    format!("{message} (the cut-off reply is not kept as an answer)")
                }
                _ => message.to_owned(),
            };
            self.push(CellKind::Error {
                category: category.to_string(),
                message: detail,
            });
        }
    }
}

/// The note after a turn that ended otherwise than by the model finishing: the loop guard's
/// summary, or why it stopped.
pub fn end_notice(stop: TurnStop) -> String {
    stop.guard_summary()
        .unwrap_or_else(|| format!("the turn ended: {}", stop_words(stop)))
}

/// Why a turn stopped, in words.
pub fn stop_words(stop: TurnStop) -> String {
    match stop {
        TurnStop::Completed => "completed".to_owned(),
        TurnStop::LoopGuard { cause, .. } => {
            let why = cause.map_or("it kept repeating or failing tool calls", |c| c.words());
            format!("{why}, so tern stopped it")
        }
        TurnStop::InterruptedByPerson => "your message ended the automated turn".to_owned(),
        TurnStop::Drained => "tern stopped; the turn goes on after the restart".to_owned(),
        other => other.to_string(),
    }
}
