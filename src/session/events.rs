//! What a session tells its subscribers, and the filter each subscriber attaches with.
//!
//! Subscribers receive over their own unbounded channel; one that goes away is dropped from
//! the list on the next send without the session noticing.

use super::Phase;
use crate::domain::{Answer, ApprovalDetail, ErrorCategory, Grant, TurnStop, Usage};
use serde::Serialize;
use std::time::Duration;
use tokio::sync::mpsc;

/// One thing that happened in a session, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent {
    /// An input was durably journaled; `seq` is its journal position.
    InputAccepted {
        seq: u64,
        text: String,
    },
    PhaseChanged {
        phase: Phase,
    },
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        text: String,
    },
    /// A model call failed and is being retried: what the failed attempt streamed is void.
    Retry {
        attempt: u32,
        #[serde(serialize_with = "as_millis")]
        delay: Duration,
        category: ErrorCategory,
        message: String,
        /// Characters (Unicode scalar values) of the `TextDelta`s the failed attempt sent:
        /// always the last ones sent, so a subscriber that gathered the text drops that many
        /// from its end.
        discarded_chars: u64,
        /// The same for its `ThinkingDelta`s.
        discarded_thinking_chars: u64,
    },
    /// The primary model kept failing; the fallback model takes over. What the primary's
    /// last attempt streamed is void, counted as in `Retry`.
    Fallback {
        model: String,
        message: String,
        discarded_chars: u64,
        discarded_thinking_chars: u64,
    },
    /// The reply's text turned out to be tool calls written as text
    /// ([`crate::llm::text_calls`]): the `TextDelta`s it sent are void, counted as in
    /// `Retry`, and the calls follow as `ToolCall`s.
    TextReadAsCalls {
        discarded_chars: u64,
    },
    ToolCall {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    ToolResult {
        id: String,
        name: String,
        content: String,
        is_error: bool,
        /// How long the tool ran, in milliseconds, as journaled with the result; absent for a
        /// call that never started.
        #[serde(skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
    },
    /// The call `call_id` (announced by its `ToolCall`) waits for a person's answer
    /// (`SessionHandle::answer`); the results of the calls before it in its batch came first.
    /// `always` is what answering `Always` would remember for the session; `None` when
    /// nothing can be (a compound command), and `Always` then counts as `Once`.
    ApprovalRequested {
        call_id: String,
        tool: String,
        summary: String,
        detail: ApprovalDetail,
        always: Option<Grant>,
    },
    /// The approval request for `call_id` is settled: by the person, or as denied by a cancel
    /// or a stop (the reason says which). The call's `ToolResult` follows.
    ApprovalDecided {
        call_id: String,
        answer: Answer,
    },
    /// The session's title changed: after the first turn, a model call named it.
    TitleChanged {
        title: String,
    },
    /// Usage of one model call.
    Usage {
        model: String,
        usage: Usage,
    },
    /// The history was compacted to fit the context window.
    Compacted {
        messages_before: usize,
        messages_after: usize,
        /// Estimated tokens of each request before and after.
        tokens_before: u64,
        tokens_after: u64,
        results_cleared: usize,
        /// Whether the compaction model wrote notes on what was cut.
        notes: bool,
        /// Time spent deciding what to keep, in microseconds, the notes call excluded.
        work_micros: u64,
    },
    /// The turn ended with the model's final text; `stop` says how (completed, or ended
    /// quietly by the loop guard or by a person's message).
    TurnCompleted {
        text: String,
        usage: Usage,
        #[serde(flatten)]
        stop: TurnStop,
    },
    TurnFailed {
        category: ErrorCategory,
        message: String,
        #[serde(flatten)]
        stop: TurnStop,
    },
}

impl SessionEvent {
    /// What a compaction did, in one sentence for the person; `None` for other events.
    pub fn compaction_summary(&self) -> Option<String> {
        let SessionEvent::Compacted {
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
            notes,
            ..
        } = self
        else {
            return None;
        };
        let notes = if *notes {
            "with notes"
        } else {
            "without notes"
        };
        Some(format!(
            "compacted the conversation to fit the context window: {messages_before} → \
             {messages_after} messages, about {tokens_before} → {tokens_after} tokens ({notes})"
        ))
    }
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Which kinds of event a subscriber wants. Lifecycle events (input accepted, turn end,
/// retries, fallback) always arrive; phase changes and title changes come with
/// `PROCESSING_STATE`; approval requests and decisions with `APPROVALS`, which a front end
/// that answers them must ask for (`ALL` includes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFilter(u8);

impl OutputFilter {
    pub const TEXT: Self = Self(1);
    pub const TEXT_STREAMING: Self = Self(1 << 1);
    pub const THINKING: Self = Self(1 << 2);
    pub const TOOL_CALLS: Self = Self(1 << 3);
    pub const USAGE: Self = Self(1 << 4);
    pub const FILES: Self = Self(1 << 5);
    pub const PROCESSING_STATE: Self = Self(1 << 6);
    pub const APPROVALS: Self = Self(1 << 7);
    pub const ALL: Self = Self(0xff);

    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether a subscriber with this filter receives `event`.
    pub fn admits(self, event: &SessionEvent) -> bool {
        match event {
            SessionEvent::TextDelta { .. } => self.contains(Self::TEXT_STREAMING),
            SessionEvent::ThinkingDelta { .. } => self.contains(Self::THINKING),
            SessionEvent::ToolCall { .. } | SessionEvent::ToolResult { .. } => {
                self.contains(Self::TOOL_CALLS)
            }
            SessionEvent::Usage { .. } => self.contains(Self::USAGE),
            SessionEvent::PhaseChanged { .. } | SessionEvent::TitleChanged { .. } => {
                self.contains(Self::PROCESSING_STATE)
            }
            SessionEvent::ApprovalRequested { .. } | SessionEvent::ApprovalDecided { .. } => {
                self.contains(Self::APPROVALS)
            }
            SessionEvent::InputAccepted { .. }
            | SessionEvent::Compacted { .. }
            | SessionEvent::Retry { .. }
            | SessionEvent::Fallback { .. }
            | SessionEvent::TextReadAsCalls { .. }
            | SessionEvent::TurnCompleted { .. }
            | SessionEvent::TurnFailed { .. } => true,
        }
    }
}

/// The receiving end a subscriber reads from.
pub type Subscription = mpsc::UnboundedReceiver<SessionEvent>;

/// The session's list of subscribers.
#[derive(Debug, Default)]
pub struct Subscribers {
    list: Vec<(OutputFilter, mpsc::UnboundedSender<SessionEvent>)>,
}

impl Subscribers {
    pub fn add(&mut self, filter: OutputFilter) -> Subscription {
        let (tx, rx) = mpsc::unbounded_channel();
        self.list.push((filter, tx));
        rx
    }

    /// Sends `event` to everyone whose filter admits it, forgetting subscribers that left.
    pub fn publish(&mut self, event: &SessionEvent) {
        self.list
            .retain(|(filter, tx)| !filter.admits(event) || tx.send(event.clone()).is_ok());
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_passes_lifecycle_always_and_deltas_on_request() {
        let delta = SessionEvent::TextDelta { text: "x".into() };
        let done = SessionEvent::TurnCompleted {
            text: "x".into(),
            usage: Usage::default(),
            stop: TurnStop::Completed,
        };
        assert!(!OutputFilter::TEXT.admits(&delta));
        assert!(OutputFilter::TEXT.admits(&done));
        assert!(
            OutputFilter::TEXT
                .union(OutputFilter::TEXT_STREAMING)
                .admits(&delta)
        );
    }

    #[test]
    fn a_dropped_subscriber_is_forgotten() {
        let mut subs = Subscribers::default();
        let kept = subs.add(OutputFilter::ALL);
        drop(subs.add(OutputFilter::ALL));
        subs.publish(&SessionEvent::TextDelta { text: "x".into() });
        assert_eq!(subs.len(), 1);
        drop(kept);
    }
}
