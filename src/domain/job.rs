//! A background job as its session's journal records it: enough for a later tern to say what
//! it was, where its log is, and to tell its processes apart from others given the same ids.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One background job of a session, journaled when it starts (and beside its log, where a
/// wake after a crash that lost the journal's latest events still finds it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its number in the session, from 1.
    pub id: u64,
    pub command: String,
    /// Where its output goes.
    pub log: PathBuf,
    /// Its process group: the pid of the shell that leads it.
    pub group: i32,
    /// When that shell started, in clock ticks after boot (`/proc/<pid>/stat`), and the boot
    /// it started in: a process with the same pid but another start is not the job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_start: Option<(String, u64)>,
    /// How it ended, once a turn of the session has been told (`JobEnded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The session went to rest after it started, which stops its jobs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rested: bool,
}
