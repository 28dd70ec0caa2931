//! The session index entry: what listings, the picker and `--continue` need without replaying
//! a journal.

use crate::domain::{ApprovalMode, RunId, SessionId, SessionKey, Usage};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Summary of one session, kept current by the store as events are appended.
///
/// Fields added after the first release carry `#[serde(default)]`, so entries written by an
/// older tern still decode; they fill in as the session is used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: SessionId,
    pub key: SessionKey,
    pub project_dir: PathBuf,
    /// Set from the first input until a title is chosen.
    pub title: String,
    pub created_at_ms: i64,
    /// When anything was last journaled.
    pub updated_at_ms: i64,
    /// When a person last wrote (automation does not count): what idle and daily resets
    /// measure freshness by. Entries from before it was kept read as their creation time.
    #[serde(default)]
    pub last_activity_ms: i64,
    /// Number of journal events.
    pub event_count: u64,
    /// Number of accepted inputs.
    pub input_count: u64,
    /// Messages of the conversation: inputs and the assistant's replies.
    #[serde(default)]
    pub message_count: u64,
    /// The start of the first input, for the picker's search and preview.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub first_input: String,
    /// Bytes the session's journal records take, as stored: what maintenance budgets with,
    /// without reading the journal.
    #[serde(default)]
    pub transcript_bytes: u64,
    /// When a reset archived the session: its transcript stays, its key moved on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at_ms: Option<i64>,
    /// Provider profile and model of the latest call.
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    /// The provider profile and model the session was started with on purpose (`--provider`,
    /// `--model`), used again when it is resumed without either flag.
    #[serde(default, skip_serializing_if = "Overrides::is_empty")]
    pub overrides: Overrides,
    /// The approval mode and tool set the session was given for itself (through the session
    /// service), used again whenever it is opened, by any tern process.
    #[serde(default, skip_serializing_if = "Permissions::is_empty")]
    pub permissions: Permissions,
    /// Tokens of every model call, summed.
    #[serde(default)]
    pub tokens: Usage,
    /// How many times the history was compacted.
    #[serde(default)]
    pub compaction_count: u64,
    /// Where the session stands, as the journal last said.
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Counts the writes of this entry: of the copies a repair finds in a damaged file's
    /// pages, the one with the highest revision is the latest.
    #[serde(default)]
    pub revision: u64,
    /// The session's folder (`<data>/sessions/<id>-<hash>/`). `None` for entries from before
    /// it was recorded, whose folder is `<data>/sessions/<id>/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_dir: Option<PathBuf>,
    /// For a subagent: the session and run it works for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRun>,
}

/// The parent of a subagent session, and which of its runs the session is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRun {
    pub session: SessionId,
    pub run_id: RunId,
    pub agent: String,
}

/// The provider profile and model a session asked for, when it asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Overrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.provider.is_none() && self.model.is_none()
    }
}

/// What a session was allowed for itself: its approval mode (an input may still carry one
/// for its own turn) and the tools it is offered; `None` where it goes with the process's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
    /// The names of the only tools it is offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

impl Permissions {
    pub fn is_empty(&self) -> bool {
        self.approval.is_none() && self.tools.is_none()
    }
}

/// Where a session stands between its journal's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// No turn running.
    #[default]
    Idle,
    /// A turn started and has not ended: running now, or cut off by a crash (recovery
    /// closes it on the next open).
    Working,
    /// Put to rest after `idle_timeout`; woken by the next input.
    Resting,
    /// A drain stopped its turn for a restart.
    Drained,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Working => "working",
            Self::Resting => "resting",
            Self::Drained => "drained",
        }
    }
}

impl SessionMeta {
    /// The entry of a session created at `now_ms`, before anything was journaled.
    pub fn new(id: SessionId, key: SessionKey, project_dir: PathBuf, now_ms: i64) -> Self {
        Self {
            id,
            key,
            project_dir,
            title: String::new(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            last_activity_ms: now_ms,
            event_count: 0,
            input_count: 0,
            message_count: 0,
            first_input: String::new(),
            transcript_bytes: 0,
            archived_at_ms: None,
            provider: String::new(),
            model: String::new(),
            overrides: Overrides::default(),
            permissions: Permissions::default(),
            tokens: Usage::default(),
            compaction_count: 0,
            lifecycle: Lifecycle::Idle,
            revision: 0,
            session_dir: None,
            parent: None,
        }
    }

    /// The channel the session's key belongs to: `cli`, `slack`, `discord`, ….
    pub fn channel(&self) -> &str {
        self.key.channel()
    }

    /// When a person last wrote, for entries that predate the field: their creation.
    pub fn freshness_ms(&self) -> i64 {
        if self.last_activity_ms == 0 {
            self.created_at_ms
        } else {
            self.last_activity_ms
        }
    }
}
