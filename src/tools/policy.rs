//! Approval policy: which calls run freely, which need a person's yes, and what the session's
//! approval mode decides: allow, refuse, or (in mode `ask`) put the call to a person, whose
//! answers the session keeps (see `session::approvals`).

use super::path_text;
pub use crate::domain::{ApprovalMode, ApprovalNeed};

/// The policy's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused without asking; the reason is returned to the model as the tool result.
    Refuse(String),
    /// A person decides, unless an earlier "always" of theirs covers the call.
    Ask,
}

/// What the session's approval mode decides for a call with the given need. A refusal reason is
/// read by the model and shown to the user, so it says what was refused, why, and what would
/// allow it.
pub fn decide(mode: ApprovalMode, need: &ApprovalNeed) -> Decision {
    match (mode, need) {
        (ApprovalMode::Ask, ApprovalNeed::Person) => Decision::Ask,
        (mode, ApprovalNeed::Person) => Decision::Refuse(format!(
            "Refused: the configuration says a person must approve every call of this tool \
             (approve = \"always\"), and this session's approval mode is {mode}, in which no \
             one is asked. Ask the user to run it in a session whose approval mode is ask \
             (the interface), or do without it."
        )),
        (_, ApprovalNeed::None) | (ApprovalMode::All, _) => Decision::Allow,
        (ApprovalMode::Ask, _) => Decision::Ask,
        (ApprovalMode::Edits, ApprovalNeed::Edit) => Decision::Allow,
        (ApprovalMode::Never, ApprovalNeed::Edit) => Decision::Refuse(
            "Refused: this call changes files, which needs approval, and this session runs with \
             --approve never, which refuses everything that needs approval. Ask the user to \
             rerun with --approve edits (or --approve all), or describe the change so the user \
             can make it."
                .to_string(),
        ),
        (mode, ApprovalNeed::Exec) => Decision::Refuse(format!(
            "Refused: running a command needs approval, and so does changing files under .git \
             (git runs its hooks and the commands named in its config on the user's behalf). \
             This session runs with --approve {mode}, which does not allow commands. Ask the \
             user to rerun with --approve all, or do without (the file and search tools still \
             work outside .git)."
        )),
        (mode, ApprovalNeed::OutsideProject(path)) => Decision::Refuse(format!(
            "Refused: {} is outside the project directory, and this session runs with \
             --approve {mode}, which only allows access inside the project. Ask the user to \
             rerun with --approve all, or work with paths inside the project.",
            path_text::encode(path)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn decisions_follow_the_mode() {
        let outside = ApprovalNeed::OutsideProject(PathBuf::from("/etc/passwd"));
        let check = |mode, need: &ApprovalNeed, allowed: bool| {
            let decision = decide(mode, need);
            assert_eq!(
                decision == Decision::Allow,
                allowed,
                "{mode} {need:?}: {decision:?}"
            );
        };
        for mode in [
            ApprovalMode::Never,
            ApprovalMode::Edits,
            ApprovalMode::All,
            ApprovalMode::Ask,
        ] {
            check(mode, &ApprovalNeed::None, true);
        }
        check(ApprovalMode::Never, &ApprovalNeed::Edit, false);
        check(ApprovalMode::Never, &ApprovalNeed::Exec, false);
        check(ApprovalMode::Never, &outside, false);
        check(ApprovalMode::Edits, &ApprovalNeed::Edit, true);
        check(ApprovalMode::Edits, &ApprovalNeed::Exec, false);
        check(ApprovalMode::Edits, &outside, false);
        check(ApprovalMode::All, &ApprovalNeed::Edit, true);
        check(ApprovalMode::All, &ApprovalNeed::Exec, true);
        check(ApprovalMode::All, &outside, true);
        check(ApprovalMode::All, &ApprovalNeed::Person, false);
        check(ApprovalMode::Never, &ApprovalNeed::Person, false);
        assert_eq!(
            decide(ApprovalMode::Ask, &ApprovalNeed::Person),
            Decision::Ask
        );
        for need in [ApprovalNeed::Edit, ApprovalNeed::Exec, outside.clone()] {
            assert_eq!(decide(ApprovalMode::Ask, &need), Decision::Ask, "{need:?}");
        }
    }

    #[test]
    fn refusals_name_the_mode_and_the_fix() {
        let Decision::Refuse(reason) = decide(ApprovalMode::Edits, &ApprovalNeed::Exec) else {
            panic!("exec must be refused under edits");
        };
        assert!(reason.contains("--approve edits"), "{reason}");
        assert!(reason.contains("--approve all"), "{reason}");
        assert!(reason.contains("git runs its hooks"), "{reason}");
        let outside = ApprovalNeed::OutsideProject(PathBuf::from("/etc/passwd"));
        let Decision::Refuse(reason) = decide(ApprovalMode::Never, &outside) else {
            panic!("outside access must be refused under never");
        };
        assert!(reason.contains("/etc/passwd"), "{reason}");
    }
}
