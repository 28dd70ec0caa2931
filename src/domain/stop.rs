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

/// What made the loop guard end a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardCause {
    /// The model kept making calls it had made already (the same call round after round, or
    /// the same few calls in a cycle) after five of them were refused.
    RepeatedCalls,
    /// Tool calls kept failing (a failure score of 8).
    RepeatedFailures,
    /// The turn ran `[session] max_rounds` rounds of tool calls.
    MaxRounds,
}

impl GuardCause {
    /// Why, in words, for people and for the model.
    pub fn words(self) -> &'static str {
        match self {
            Self::RepeatedCalls => "it kept repeating tool calls it had already made",
            Self::RepeatedFailures => "its tool calls kept failing",
            Self::MaxRounds => {
                "it reached the limit of rounds of tool calls ([session] max_rounds)"
            }
        }
    }
}

impl fmt::Display for GuardCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RepeatedCalls => "repeated_calls",
            Self::RepeatedFailures => "repeated_failures",
            Self::MaxRounds => "max_rounds",
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
    /// The loop guard ended a turn that kept repeating calls or failing, or that ran its
    /// most rounds of tool calls; the model's last text stands as the answer.
    LoopGuard {
        /// Why; `None` in journals from before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<GuardCause>,
        /// The rounds of tool calls the turn ran (0 when not recorded).
        #[serde(default, skip_serializing_if = "is_zero")]
        rounds: u32,
    },
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
            Self::Completed | Self::LoopGuard { .. } | Self::InterruptedByPerson
        )
    }

    /// For a turn the loop guard ended, one line saying so and why, for the person (a note in
    /// the transcript, `tern run`'s standard error); `None` for any other end.
    pub fn guard_summary(self) -> Option<String> {
        let Self::LoopGuard { cause, rounds } = self else {
            return None;
        };
        let after = match rounds {
            0 => String::new(),
            1 => " after 1 round of tool calls".to_owned(),
            n => format!(" after {n} rounds of tool calls"),
        };
        let why = cause.map_or("it kept repeating or failing tool calls", GuardCause::words);
        Some(format!("the loop guard ended the turn{after}: {why}"))
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl fmt::Display for TurnStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Completed => f.write_str("completed"),
            Self::Timeout { watchdog } => write!(f, "timeout({watchdog})"),
            Self::LoopGuard { cause: None, .. } => f.write_str("loop_guard"),
            Self::LoopGuard {
                cause: Some(cause), ..
            } => write!(f, "loop_guard({cause})"),
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
        let guard = TurnStop::LoopGuard {
            cause: Some(GuardCause::MaxRounds),
            rounds: 60,
        };
        assert!(!error.is_success() && guard.is_success());
        assert_eq!(guard.to_string(), "loop_guard(max_rounds)");
        assert_eq!(
            serde_json::to_value(guard).unwrap(),
            serde_json::json!({"reason": "loop_guard", "cause": "max_rounds", "rounds": 60})
        );
    }

    #[test]
    fn a_guard_end_from_an_older_journal_still_reads() {
        let old: TurnStop = serde_json::from_value(serde_json::json!({"reason": "loop_guard"}))
            .expect("the old form");
        assert_eq!(
            old,
            TurnStop::LoopGuard {
                cause: None,
                rounds: 0
            }
        );
        assert_eq!(old.to_string(), "loop_guard");
        assert_eq!(
            old.guard_summary().as_deref(),
            Some("the loop guard ended the turn: it kept repeating or failing tool calls")
        );
        let cycle = TurnStop::LoopGuard {
            cause: Some(GuardCause::RepeatedCalls),
            rounds: 9,
        };
        assert_eq!(
            cycle.guard_summary().as_deref(),
            Some(
                "the loop guard ended the turn after 9 rounds of tool calls: it kept repeating \
                 tool calls it had already made"
            )
        );
        assert_eq!(TurnStop::Completed.guard_summary(), None);
    }
}
