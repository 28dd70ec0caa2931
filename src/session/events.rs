//! What a session tells its subscribers, and the filter each subscriber attaches with.
//!
//! Every event goes out stamped with the journal position it was published at ([`Stamped`]):
//! an event that journaled something carries that record's position, any other the position
//! of the last record before it. A subscriber that also reads the journal up to the position
//! it attached at ([`Subscription::attached_at`]) sees everything once: what the journal gave
//! up to there, and from there on the events.
//!
//! Subscribers receive over their own bounded channel. One that falls behind is dropped, with
//! the reason and the last position it was sent, so the session never waits for it; one that
//! goes away is dropped on the next send without the session noticing.

use super::Phase;
use crate::domain::{Answer, ApprovalDetail, ErrorCategory, Grant, TurnStop, Usage};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// Events a subscriber may have waiting before it counts as fallen behind, unless it asks
/// for another bound.
pub const SUBSCRIBER_BACKLOG: usize = 4096;

/// Room a subscriber's backlog must have for the first event of a new journal position (at
/// most a quarter of it), so the events of one record are not split by a drop.
const GROUP_ROOM: usize = 64;

/// One thing that happened in a session, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent {
    /// An input was durably journaled; `seq` is its journal position, `sender` its sender's
    /// id (`local` for the terminal's person).
    InputAccepted {
        seq: u64,
        text: String,
        #[serde(default)]
        sender: String,
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
        #[serde(with = "millis")]
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
    /// Whether the event stands for a journal record, published once the record is
    /// committed and stamped with its position; the others (streamed deltas, phases,
    /// retries) are not journaled, and are stamped with the position before them.
    pub fn is_journaled(&self) -> bool {
        match self {
            SessionEvent::InputAccepted { .. }
            | SessionEvent::ToolCall { .. }
            | SessionEvent::ToolResult { .. }
            | SessionEvent::ApprovalRequested { .. }
            | SessionEvent::ApprovalDecided { .. }
            | SessionEvent::TitleChanged { .. }
            | SessionEvent::Usage { .. }
            | SessionEvent::Compacted { .. }
            | SessionEvent::TurnCompleted { .. }
            | SessionEvent::TurnFailed { .. } => true,
            SessionEvent::PhaseChanged { .. }
            | SessionEvent::TextDelta { .. }
            | SessionEvent::ThinkingDelta { .. }
            | SessionEvent::Retry { .. }
            | SessionEvent::Fallback { .. }
            | SessionEvent::TextReadAsCalls { .. } => false,
        }
    }

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

/// A duration as whole milliseconds.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// An event with the journal position it was published at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    pub at: u64,
    pub event: SessionEvent,
}

/// The session's journal position, shared between the state that moves it and the senders
/// that stamp events with it.
#[derive(Debug, Clone, Default)]
pub struct JournalHead(Arc<AtomicU64>);

/// A copy of `last_seq`, so two states compare equal whatever their heads hold.
impl PartialEq for JournalHead {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl JournalHead {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub fn set(&self, seq: u64) {
        self.0.store(seq, Ordering::Release);
    }
}

/// Where a running turn sends its events: each stamped with the journal position as the
/// turn's own commits left it.
#[derive(Debug, Clone)]
pub struct EventTx {
    tx: mpsc::UnboundedSender<Stamped>,
    head: JournalHead,
}

impl EventTx {
    pub fn channel(head: JournalHead) -> (Self, mpsc::UnboundedReceiver<Stamped>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, head }, rx)
    }

    /// Sends `event`; a failed send means the actor is shutting down anyway.
    pub fn send(&self, event: SessionEvent) {
        let at = self.head.get();
        let _ = self.tx.send(Stamped { at, event });
    }
}

/// Which kinds of event a subscriber wants. Lifecycle events (input accepted, turn end,
/// retries, fallback) always arrive; phase changes and title changes come with
/// `PROCESSING_STATE`; approval requests and decisions with `APPROVALS`, which a front end
/// that answers them must ask for (`ALL` includes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
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

/// Why a subscription ended before the session did: it fell behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub reason: String,
    /// A position up to which it was sent every event that stands for a record: the
    /// journal after it and the events from a new subscription hold the rest.
    pub last_at: u64,
}

/// The receiving end a subscriber reads from.
#[derive(Debug)]
pub struct Subscription {
    rx: mpsc::Receiver<Stamped>,
    dropped: Arc<OnceLock<Dropped>>,
    attached_at: u64,
    last_at: u64,
}

impl Subscription {
    /// The next event; `None` once the session stopped or the subscriber was dropped
    /// ([`Subscription::dropped`] says which).
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        self.next().await.map(|stamped| stamped.event)
    }

    /// The next event with its journal position.
    pub async fn next(&mut self) -> Option<Stamped> {
        loop {
            let stamped = self.rx.recv().await?;
            if let Some(stamped) = self.take(stamped) {
                return Some(stamped);
            }
        }
    }

    /// An event if one is waiting.
    pub fn try_recv(&mut self) -> Option<SessionEvent> {
        loop {
            let stamped = self.rx.try_recv().ok()?;
            if let Some(stamped) = self.take(stamped) {
                return Some(stamped.event);
            }
        }
    }

    /// `stamped`, unless the subscriber was dropped before its position was whole: what
    /// comes after the position the drop names is read from the journal instead.
    fn take(&mut self, stamped: Stamped) -> Option<Stamped> {
        if let Some(dropped) = self.dropped.get()
            && stamped.at > dropped.last_at
        {
            return None;
        }
        self.last_at = self.last_at.max(stamped.at);
        Some(stamped)
    }

    /// The journal position the session had published up to when this subscriber attached:
    /// the journal up to here and the events from here on hold everything once.
    pub fn attached_at(&self) -> u64 {
        self.attached_at
    }

    /// The position of the latest event received (or of the attachment, before any).
    pub fn last_at(&self) -> u64 {
        self.last_at
    }

    /// Set when the session dropped this subscriber for falling behind.
    pub fn dropped(&self) -> Option<&Dropped> {
        self.dropped.get()
    }
}

struct Subscriber {
    filter: OutputFilter,
    tx: mpsc::Sender<Stamped>,
    dropped: Arc<OnceLock<Dropped>>,
    /// The position of the last event sent to it.
    last_at: u64,
    /// A position all of whose events it was sent: the one before `last_at`'s.
    complete: u64,
}

/// The session's list of subscribers.
#[derive(Default)]
pub struct Subscribers {
    list: Vec<Subscriber>,
}

impl Subscribers {
    /// A subscriber from position `at` on that may have up to `backlog` events waiting.
    pub fn add(&mut self, filter: OutputFilter, at: u64, backlog: usize) -> Subscription {
        let (tx, rx) = mpsc::channel(backlog.max(1));
        let dropped = Arc::new(OnceLock::new());
        self.list.push(Subscriber {
            filter,
            tx,
            dropped: dropped.clone(),
            last_at: at,
            complete: at,
        });
        Subscription {
            rx,
            dropped,
            attached_at: at,
            last_at: at,
        }
    }

    /// Sends `event` to everyone whose filter admits it, forgetting subscribers that left and
    /// dropping those whose backlog is full.
    pub fn publish(&mut self, at: u64, event: &SessionEvent) {
        self.list.retain_mut(|sub| {
            if !sub.filter.admits(event) {
                return true;
            }
            // Within a position, its journaled events come first, the rest after them: a
            // drop at a journaled event of the position last sent leaves that position
            // unfinished, a drop anywhere else leaves none.
            let mid_group = event.is_journaled() && at == sub.last_at;
            // A record's events go out whole or not at all: the first of a new position
            // needs room for the rest, so a drop falls between positions.
            let opens = event.is_journaled() && at > sub.last_at;
            let room = if opens {
                GROUP_ROOM.min(sub.tx.max_capacity() / 4).max(1)
            } else {
                1
            };
            if sub.tx.capacity() < room {
                let backlog = sub.tx.max_capacity();
                let _ = sub.dropped.set(Dropped {
                    reason: format!(
                        "fell behind the session: {backlog} events were waiting unread"
                    ),
                    last_at: if mid_group { sub.complete } else { sub.last_at },
                });
                return false;
            }
            let stamped = Stamped {
                at,
                event: event.clone(),
            };
            match sub.tx.try_send(stamped) {
                Ok(()) => {
                    if at > sub.last_at {
                        sub.complete = sub.last_at;
                    }
                    sub.last_at = at;
                    true
                }
                Err(_) => false,
            }
        });
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
        let kept = subs.add(OutputFilter::ALL, 0, 8);
        drop(subs.add(OutputFilter::ALL, 0, 8));
        subs.publish(1, &SessionEvent::TextDelta { text: "x".into() });
        assert_eq!(subs.len(), 1);
        drop(kept);
    }

    fn usage(at: u64) -> SessionEvent {
        SessionEvent::Usage {
            model: format!("m{at}"),
            usage: Usage::default(),
        }
    }

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_dropped_between_positions() {
        let mut subs = Subscribers::default();
        let mut slow = subs.add(OutputFilter::ALL, 3, 8);
        let mut quick = subs.add(OutputFilter::ALL, 3, 64);
        subs.publish(4, &usage(4));
        for _ in 0..6 {
            subs.publish(4, &SessionEvent::TextDelta { text: "x".into() });
        }
        // No room for the whole of position 5: the slow one is dropped before it.
        subs.publish(5, &usage(5));
        assert_eq!(subs.len(), 1, "the slow one is gone, the quick one stays");
        let dropped = slow.dropped().expect("dropped").clone();
        assert_eq!(dropped.last_at, 4, "every event of position 4 was sent");
        assert!(dropped.reason.contains("fell behind"), "{}", dropped.reason);
        assert_eq!(slow.recv().await, Some(usage(4)));
        for _ in 0..6 {
            assert!(matches!(
                slow.recv().await,
                Some(SessionEvent::TextDelta { .. })
            ));
        }
        assert_eq!(slow.recv().await, None);
        for at in [4, 4, 4, 4, 4, 4, 4, 5] {
            assert_eq!(quick.next().await.map(|s| s.at), Some(at));
        }
        assert_eq!(quick.last_at(), 5);
    }

    #[test]
    fn events_read_back_as_they_were_written() {
        let events = [
            SessionEvent::Retry {
                attempt: 2,
                delay: Duration::from_millis(1500),
                category: ErrorCategory::RateLimit,
                message: "slow down".into(),
                discarded_chars: 3,
                discarded_thinking_chars: 0,
            },
            SessionEvent::TurnCompleted {
                text: "done".into(),
                usage: Usage::default(),
                stop: TurnStop::Completed,
            },
            SessionEvent::PhaseChanged {
                phase: Phase::Processing,
            },
        ];
        for event in events {
            let text = serde_json::to_string(&event).expect("encodes");
            let back: SessionEvent = serde_json::from_str(&text).expect("decodes");
            assert_eq!(back, event, "{text}");
        }
    }
}
