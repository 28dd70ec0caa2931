//! Why a turn ended, as the journal, `tern sessions show` and stream-json report it.

use super::ErrorCategory;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which of the session's timeouts fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Watchdog {
    /// No response headers within `prefill_timeout` of sending the request.
    Prefill,
    /// Headers came, but no streamed event within `first_token_timeout`.
    FirstToken,
    /// The stream went silent, or sent only keepalives, for `no_progress_timeout`.
    NoProgress,
    /// The model only thought for 3 × `no_progress_timeout`.
    ThinkingOnly,
    /// A tool showed no progress for `tool_execution_timeout`.
    ToolExecution,
    /// A side call (compaction notes) took longer than `sidecar_llm_timeout`.
    SidecarLlm,
}

impl Watchdog {
    /// The setting that sets this timeout, as written under `[session]`.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Prefill => "prefill_timeout",
            Self::FirstToken => "first_token_timeout",
            Self::NoProgress | Self::ThinkingOnly => "no_progress_timeout",
            Self::ToolExecution => "tool_execution_timeout",
            Self::SidecarLlm => "sidecar_llm_timeout",
        }
    }
}

impl fmt::Display for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Prefill => "prefill",
            Self::FirstToken => "first_token",
            Self::NoProgress => "no_progress",
            Self::ThinkingOnly => "thinking_only",
            Self::ToolExecution => "tool_execution",
            Self::SidecarLlm => "sidecar_llm",
        })
    }
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum TurnStop {
    /// The model finished its answer.
    #[default]
    Completed,
    /// A watchdog fired.
    Timeout { watchdog: Watchdog },
    /// The loop guard ended a turn that kept repeating calls or failing; the model's last
    /// text stands as the answer.
    LoopGuard,
    /// tern was stopping or restarting and ended the turn at a safe point.
    Drained,
    /// A person's message ended an automated turn.
    InterruptedByPerson,
    /// The person stopped the turn (Ctrl-C, Esc).
    Interrupted,
    /// The reply was cut at the output limit; nothing of it was kept.
    OutputLimit,
    /// The turn failed with an error of this category.
    Error { category: ErrorCategory },
}

impl TurnStop {
    /// Whether the turn's answer stands (as opposed to a failure the person is shown).
    pub fn is_success(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::LoopGuard | Self::InterruptedByPerson
        )
    }
}

impl fmt::Display for TurnStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Completed => f.write_str("completed"),
            Self::Timeout { watchdog } => write!(f, "timeout({watchdog})"),
            Self::LoopGuard => f.write_str("loop_guard"),
            Self::Drained => f.write_str("drained"),
            Self::InterruptedByPerson => f.write_str("interrupted_by_person"),
            Self::Interrupted => f.write_str("interrupted"),
            Self::OutputLimit => f.write_str("output_limit"),
            Self::Error { category } => write!(f, "error({category})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_the_design_names_them() {
        let timeout = TurnStop::Timeout {
            watchdog: Watchdog::FirstToken,
        };
        assert_eq!(timeout.to_string(), "timeout(first_token)");
        assert_eq!(
            serde_json::to_value(timeout).unwrap(),
            serde_json::json!({"reason": "timeout", "watchdog": "first_token"})
        );
        let error = TurnStop::Error {
            category: ErrorCategory::Auth,
        };
        assert_eq!(error.to_string(), "error(auth)");
        assert!(!error.is_success() && TurnStop::LoopGuard.is_success());
    }
}
