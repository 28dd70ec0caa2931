//! Approvals as plain data: how much a session may do unasked, what a call needs before it
//! may run, what a person asked about it is shown, their answer, and the grants an "always"
//! leaves for the rest of the session.
//!
//! The journal records requests and decisions with these types, the session's subscribers
//! receive them, and the tools describe their calls with them; the rules that decide live in
//! `tools::policy` (the session's mode) and `session::approvals` (what a grant covers).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// Ask a person about everything that needs approval and is not granted yet; needs a
    /// front end that answers (`SessionHandle::answer`), so `tern run` refuses it.
    Ask,
}

impl ApprovalMode {
    /// The value as written on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMode::Never => "never",
            ApprovalMode::Edits => "edits",
            ApprovalMode::All => "all",
            ApprovalMode::Ask => "ask",
        }
    }
}

impl std::fmt::Display for ApprovalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one call needs before it may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalNeed {
    /// Reads inside the project: runs freely.
    None,
    /// Creates or changes files inside the project.
    Edit,
    /// Runs a command on the host, or changes files under `.git`, which git runs as
    /// commands later (hooks, and commands named in its config).
    Exec,
    /// Reads or writes a path outside the project directory.
    OutsideProject(PathBuf),
    /// Asked of a person at every call, whatever the session's mode, and never covered by
    /// an "always" answer: a tool configured so (an MCP server's `approve = "always"`).
    /// Refused where no person answers.
    Person,
}

impl ApprovalNeed {
    /// The kind of need without its particulars, or `None` for a call that needs nothing.
    pub fn kind(&self) -> Option<NeedKind> {
        match self {
            Self::None => None,
            Self::Edit => Some(NeedKind::Edit),
            Self::Exec => Some(NeedKind::Exec),
            Self::OutsideProject(_) => Some(NeedKind::Outside),
            Self::Person => Some(NeedKind::Exec),
        }
    }
}

/// The kind of an [`ApprovalNeed`]: what a grant for a whole tool is limited to, so that an
/// "always" for edits inside the project never extends to writing outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeedKind {
    Edit,
    Exec,
    Outside,
}

/// What a person deciding on a call is shown besides its one-line summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalDetail {
    /// A shell command (`shell_execute`) and the directory it would run in.
    Command { command: String, cwd: PathBuf },
    /// A file change (`file_edit`, `file_write`) as the unified diff it would make, worked
    /// out without writing; a new file's diff is from empty (`--- /dev/null`).
    Edit { path: PathBuf, diff: String },
    /// Access to a path outside the project directory; `access` is `read` or `write`.
    Outside { path: PathBuf, access: String },
    /// Any other call: its arguments as the model sent them.
    Other { arguments: serde_json::Value },
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// Run this call.
    Once,
    /// Run this call and, for the rest of the session, the calls its grant covers.
    Always,
    /// Do not run it; the model is told, with the reason when one is given.
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Answer {
    /// Whether the call may run.
    pub fn allows(&self) -> bool {
        matches!(self, Self::Once | Self::Always)
    }
}

/// What an "always" answer allows for the rest of the session, without asking again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Grant {
    /// Simple `shell_execute` commands whose prefix is `prefix` (the first word, or the
    /// first two after a multiplexer such as `git` or `cargo`).
    Command { prefix: String },
    /// Calls of `tool` that need approval of the kind `need`.
    Tool { tool: String, need: NeedKind },
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Command { prefix } => write!(f, "commands starting `{prefix}`"),
            Self::Tool { tool, need } => {
                let what = match need {
                    NeedKind::Edit => "changing files in the project",
                    NeedKind::Exec => "commands and changes under .git",
                    NeedKind::Outside => "outside the project",
                };
                write!(f, "`{tool}` calls {what}")
            }
        }
    }
}
