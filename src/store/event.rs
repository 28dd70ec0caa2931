//! What the journal records, one event per append. Replaying a session's events in order
//! rebuilds its history.

use crate::domain::{
    Answer, ApprovalNeed, Audience, ContentBlock, ErrorCategory, Grant, InputKind, JobRecord,
    Message, Sender, SubagentRole, ToolResult, TurnStop, Usage,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One journaled fact about a session. New variants may be added; old ones never lose or
/// change a field (a field added later has a default), so old journals keep replaying.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JournalEvent {
    /// An input accepted into the session, committed before it is acknowledged.
    InputAccepted {
        sender: Sender,
        audience: Audience,
        /// A person, or which automation; absent from older journals (a person).
        #[serde(default)]
        kind: InputKind,
        text: String,
    },
    /// A complete assistant message (text, thinking, tool calls).
    AssistantMessage {
        model: String,
        content: Vec<ContentBlock>,
    },
    /// The results of a tool batch, in call order, each paired with its call by id. A batch
    /// that waits for a person journals the results it has so far first; the next
    /// `ToolResults` of the same batch extends the same history message on replay.
    ToolResults {
        results: Vec<ToolResult>,
        /// How long each call that ran took, in milliseconds, by call id; a result with no
        /// entry is of a call that never started. `None` in journals written before
        /// durations were kept, where only the records' times are left to go by.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        took_ms: Option<BTreeMap<String, u64>>,
    },
    /// Calls that have their results, whose large arguments the history keeps from here on
    /// as short placeholders: each call's arguments as the history holds them now, by call
    /// id. The message that made the calls keeps them whole in the journal; the full text is
    /// in the file a call wrote or in the session's artifacts.
    ArgumentsShortened {
        inputs: BTreeMap<String, serde_json::Value>,
    },
    /// Tokens used by one model call.
    Usage {
        model: String,
        usage: Usage,
    },
    /// A turn that ended with an answer that stands: completed, or ended quietly by the loop
    /// guard or by a person's message.
    TurnCompleted {
        #[serde(default)]
        stop: TurnStop,
    },
    /// A turn that ended in an error; the history up to it stays valid.
    TurnFailed {
        category: ErrorCategory,
        message: String,
        /// Why it stopped; absent from journals written before stop reasons were recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop: Option<TurnStop>,
    },
    TitleChanged {
        title: String,
    },
    /// The durable part of the working context: where relative paths resolve.
    WorkingDirectoryChanged {
        path: PathBuf,
    },
    /// A file the tools read or wrote, for the recent-files list.
    FileTouched {
        path: PathBuf,
    },
    /// A message the history must carry as is (used by recovery and compaction).
    Message {
        message: Message,
    },
    /// Tier A of the prompt for an audience: the persisted system prompt. Journaled when
    /// first built and again only when one of its sources changed.
    SystemPromptSet {
        audience: Audience,
        text: String,
    },
    /// Tier B of the prompt for an audience: the static context, rendered on the first model
    /// call and again after a compaction.
    StaticContextSet {
        audience: Audience,
        text: String,
    },
    /// A compaction replaced the history with `messages`: old tool output cleared, the
    /// oldest `dropped` messages cut and summarised by `notes` when the notes model answered.
    /// Replay takes `messages` as the history from here on, and tier B is rendered again.
    Compacted {
        messages: Vec<Message>,
        dropped: usize,
        results_cleared: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notes: Option<String>,
    },
    /// Notes worth remembering beyond this conversation (a compaction's notes), kept for the
    /// long-term memory to take in.
    MemoryCheckpoint {
        notes: String,
    },
    /// A turn that tern stopped (a drain) goes on by itself after a restart, with no new input.
    TurnResumed {
        notice: String,
    },
    /// The session was put to rest after `idle_timeout` without input: the checkpoint where
    /// a long-term memory will distil it. The next input wakes it from its snapshot.
    Passivated {
        idle_secs: u64,
    },
    /// Tier D: the turn's `[system: …]` note, placed just before the latest user message and
    /// kept in the history as it was sent, so later requests share it as cached prefix.
    NudgeAdded {
        text: String,
    },
    /// These calls, which can change things, are about to run: journaled durably before they
    /// start, so a crash leaves it known that they may have run, and recovery never calls
    /// them "not run".
    ToolCallsStarted {
        call_ids: Vec<String>,
    },
    /// A call that needs approval was put to a person; its batch waits for the answer.
    /// `prompt` is the one-line summary they were shown.
    ApprovalRequested {
        call_id: String,
        tool: String,
        need: ApprovalNeed,
        prompt: String,
    },
    /// The session is a subagent of another: its role, journaled before its task, which gives
    /// it its definition's thin prompt stack and names the parent it reports to.
    SubagentRoleSet {
        role: SubagentRole,
    },
    /// A background job started; it does not outlive the process that started it, so a later
    /// wake that finds it here reports it reaped, its log still readable.
    JobStarted {
        job: JobRecord,
    },
    /// A background job's end, journaled with the turn that is told of it.
    JobEnded {
        id: u64,
        how: String,
    },
    /// The answer to an approval request; a cancel or a stop answers it as denied, with a
    /// reason saying so. `grant` is what an "always" leaves for the rest of the session.
    ApprovalDecided {
        call_id: String,
        answer: Answer,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grant: Option<Grant>,
    },
}

impl JournalEvent {
    /// The results of calls none of which ran (or whose running time is not known, such as
    /// calls a crash interrupted): no durations to keep.
    pub fn results_not_timed(results: Vec<ToolResult>) -> Self {
        Self::ToolResults {
            results,
            took_ms: Some(BTreeMap::new()),
        }
    }

    /// A turn that completed normally.
    pub fn completed() -> Self {
        Self::TurnCompleted {
            stop: TurnStop::Completed,
        }
    }

    /// Why the turn this event ends stopped, when it ends one.
    pub fn turn_stop(&self) -> Option<TurnStop> {
        match self {
            Self::TurnCompleted { stop } => Some(*stop),
            Self::TurnFailed { stop, category, .. } => Some(stop.unwrap_or(TurnStop::Error {
                category: *category,
            })),
            _ => None,
        }
    }

    /// The path the event records, if it records one.
    pub(super) fn path(&self) -> Option<&Path> {
        match self {
            Self::WorkingDirectoryChanged { path } | Self::FileTouched { path } => Some(path),
            _ => None,
        }
    }
}

/// A journal event with its position and time, as read back from the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalRecord {
    /// Position in the session's journal, from 1.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when it was appended.
    pub at_ms: i64,
    pub event: JournalEvent,
}
