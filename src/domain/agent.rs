//! Subagent runs as every layer sees them: a run's id, where it stands, and the role a child
//! session plays for its parent.

use super::SessionId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One subagent run: `run-` and 12 hexadecimal digits, unique within the store. It names the
/// run's folder (`subagents/<run-id>/`), its session key (`subagent:<run-id>`) and its branch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// A fresh id: the low 48 bits of a UUIDv7's random part, so two runs started in the same
    /// millisecond still differ.
    pub fn generate() -> Self {
        let bits = uuid::Uuid::now_v7().as_u128() as u64 & 0xffff_ffff_ffff;
        Self(format!("run-{bits:012x}"))
    }

    /// An id as the model or a person typed it, when it has the shape of one.
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.trim().strip_prefix("run-")?;
        let valid = hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| Self(format!("run-{}", hex.to_ascii_lowercase())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepted, waiting for one of the `max_concurrent` places.
    Queued,
    Running,
    /// The child's turn completed; its answer is in `result.md`.
    Completed,
    /// The child's turn failed (an error, the loop guard, the output limit).
    Failed,
    /// Cancelled by the parent, a person or `check_agent_run`.
    Cancelled,
    /// The tern that ran it stopped before it ended, and it could not be taken up again.
    OwnerRestarted,
}

impl RunState {
    /// Whether the run has ended: it changes no more.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::OwnerRestarted => "owner_restarted",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What makes a session a subagent: journaled as its first event, it gives the session the
/// thin prompt stack of its definition and names the parent it reports to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentRole {
    pub parent: SessionId,
    pub run_id: RunId,
    /// The definition's name (`explorer`, `reviewer`, …).
    pub agent: String,
    /// The definition's body: the child's own instructions.
    pub instructions: String,
    /// The run's folder (`<parent session>/subagents/<run-id>/`).
    pub run_dir: std::path::PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_distinct_and_read_back() {
        let (a, b) = (RunId::generate(), RunId::generate());
        assert_ne!(a, b);
        assert_eq!(RunId::parse(a.as_str()), Some(a.clone()));
        assert_eq!(
            RunId::parse(&a.as_str().to_ascii_uppercase().replace("RUN-", "run-")),
            Some(a)
        );
        for bad in [
            "",
            "run-",
            "run-12345",
            "run-zzzzzzzzzzzz",
            "abc-0123456789ab",
        ] {
            assert_eq!(RunId::parse(bad), None, "{bad}");
        }
    }
}
