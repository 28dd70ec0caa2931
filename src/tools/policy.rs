//! Approval policy: which calls run freely, which need a person's yes, and what the session's
//! approval mode decides when no person is asked.

use serde::{Deserialize, Serialize};

/// How much the session may do without asking (`--approve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Ask for nothing; refuse everything that needs approval.
    #[default]
    Never,
    /// Allow file changes inside the project; refuse the rest that needs approval.
    Edits,
    /// Allow everything.
    All,
}

/// What one call needs before it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalNeed {
    /// Reads inside the project: runs freely.
    None,
    /// Creates or changes files inside the project.
    Edit,
    /// Runs a command on the host.
    Exec,
    /// Reads or writes a path outside the project directory.
    OutsideProject(std::path::PathBuf),
}

/// The policy's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused without asking; the reason is returned to the model as the tool result.
    Refuse(String),
}
