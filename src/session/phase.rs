//! The session's lifecycle phases and the transitions allowed between them.
//!
//! Transitions are validated: asking for an illegal one is an error the caller must handle,
//! never something silently ignored, because a session in the wrong phase would interleave
//! two turns or answer from a half-replayed history.

use std::fmt;

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Replaying the journal; no input is processed yet.
    Recovering,
    /// Idle, waiting for input.
    Ready,
    /// A turn is running: model calls and tool batches.
    Processing,
    /// Shrinking the history to fit the context window.
    Compacting,
    /// Saving state before the actor stops.
    Passivating,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recovering => "recovering",
            Self::Ready => "ready",
            Self::Processing => "processing",
            Self::Compacting => "compacting",
            Self::Passivating => "passivating",
        }
    }

    /// Whether `self -> to` is a legal step.
    pub fn can_become(self, to: Phase) -> bool {
        use Phase::*;
        matches!(
            (self, to),
            (Recovering, Ready)
                | (Ready, Processing)
                | (Ready, Compacting)
                | (Ready, Passivating)
                | (Processing, Ready)
                | (Processing, Compacting)
                // A turn whose task died is rebuilt from the journal.
                | (Processing, Recovering)
                | (Compacting, Processing)
                | (Compacting, Ready)
                // A compaction whose task died is rebuilt from the journal too.
                | (Compacting, Recovering)
                | (Passivating, Ready)
        )
    }

    /// Moves to `to`, or explains why that is not allowed.
    pub fn become_(self, to: Phase) -> Result<Phase, IllegalTransition> {
        if self.can_become(to) {
            Ok(to)
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transition the lifecycle does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal session phase transition from {from} to {to}")]
pub struct IllegalTransition {
    pub from: Phase,
    pub to: Phase,
}

#[cfg(test)]
mod tests {
    use super::Phase::{self, *};

    fn check(from: Phase, to: Phase, legal: bool) {
        assert_eq!(from.become_(to).is_ok(), legal, "{from} -> {to}");
    }

    #[test]
    fn turn_cycle_is_legal() {
        check(Recovering, Ready, true);
        check(Ready, Processing, true);
        check(Processing, Ready, true);
    }

    #[test]
    fn skipping_recovery_or_nesting_turns_is_illegal() {
        check(Recovering, Processing, false);
        check(Processing, Processing, false);
        check(Ready, Ready, false);
        check(Passivating, Processing, false);
        check(Ready, Recovering, false);
    }

    /// Every pair of phases against the table, written out once more by hand: a change to
    /// the lifecycle must change both.
    #[test]
    fn every_transition_is_legal_or_illegal_as_written() {
        let all = [Recovering, Ready, Processing, Compacting, Passivating];
        let legal = [
            (Recovering, Ready),
            (Ready, Processing),
            (Ready, Compacting),
            (Ready, Passivating),
            (Processing, Ready),
            (Processing, Compacting),
            (Processing, Recovering),
            (Compacting, Processing),
            (Compacting, Ready),
            (Compacting, Recovering),
            (Passivating, Ready),
        ];
        for from in all {
            for to in all {
                check(from, to, legal.contains(&(from, to)));
            }
        }
    }

    #[test]
    fn error_names_both_phases() {
        let err = Processing.become_(Processing).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal session phase transition from processing to processing"
        );
    }
}
