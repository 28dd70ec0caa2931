//! The session index entry: what listings and `--continue` need without replaying a journal.

use crate::domain::{SessionId, SessionKey};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Summary of one session, kept current by the store as events are appended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: SessionId,
    pub key: SessionKey,
    pub project_dir: PathBuf,
    /// Set from the first input until a title is chosen.
    pub title: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Number of journal events.
    pub event_count: u64,
    /// Number of accepted inputs.
    pub input_count: u64,
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
}
