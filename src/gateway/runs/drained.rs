//! A run whose session the last owner drained: at the next start its turn is not taken up
//! with nobody following it, so none of its calls runs twice; the run ends
//! `owner_restarted`, and its parent is told.

use super::work::subagent_sender;
use crate::domain::{Audience, InputKind, RunState, text_of};
use crate::gateway::{SendUserMessage, SessionManager};
use crate::session::UserInput;
use crate::store::{JournalEvent, JournalRecord};

impl SessionManager {
    /// Ends the run whose session's journal is `records`: `result.md` says it stopped with
    /// what it had answered, and its parent gets the notice of any other end.
    pub(in crate::gateway) async fn end_drained_run(&self, records: &[JournalRecord]) {
        let Some(role) = records.iter().find_map(|record| match &record.event {
            JournalEvent::SubagentRoleSet { role } => Some(role.clone()),
            _ => None,
        }) else {
            return;
        };
        let said: Vec<String> = records
            .iter()
            .filter_map(|record| match &record.event {
                JournalEvent::AssistantMessage { content, .. } => Some(text_of(content)),
                _ => None,
            })
            .filter(|text| !text.trim().is_empty())
            .collect();
        let said = if said.is_empty() {
            "(nothing)".to_owned()
        } else {
            said.join("\n\n")
        };
        let result_path = role.run_dir.join("result.md");
        // The tern that drained it wrote its result (its worktree's branch among it) when it
        // could: that one stands.
        let written = std::fs::metadata(&result_path).is_ok_and(|meta| meta.len() > 0);
        let result = format!(
            "# Result of run {} ({})\n\nState: {}\n\nThe tern that ran it stopped before it \
             ended, and it was not taken up again, so none of its calls ran twice. What it had \
             said by then:\n\n{said}\n",
            role.run_id,
            role.agent,
            RunState::OwnerRestarted,
        );
        if !written && let Err(err) = std::fs::write(&result_path, result) {
            tracing::warn!(run = %role.run_id, %err, "could not write a run's result");
        }
        let Some(parent) = self.deps.store.meta(&role.parent).ok().flatten() else {
            return;
        };
        let notice = format!(
            "[subagent run {} ({}) ended: {}]\nResult: {}\nThe tern that ran it stopped before \
             it ended; nothing of it runs again. Send it again if its task still needs doing.",
            role.run_id,
            role.agent,
            RunState::OwnerRestarted,
            result_path.display()
        );
        let message = SendUserMessage {
            key: parent.key.as_str().to_owned(),
            input: UserInput {
                sender: subagent_sender(&role.parent),
                audience: task_audience(records),
                kind: InputKind::ChildNotice,
                text: notice,
                approval: None,
                touched: Vec::new(),
            },
            project_dir: parent.project_dir,
        };
        if let Err(err) = self.send(message).await {
            tracing::warn!(run = %role.run_id, %err, "a run's notice was not delivered");
        }
    }
}

/// The audience the run's task came for: its parent's.
fn task_audience(records: &[JournalRecord]) -> Audience {
    records
        .iter()
        .find_map(|record| match &record.event {
            JournalEvent::InputAccepted { audience, .. } => Some(*audience),
            _ => None,
        })
        .unwrap_or(Audience::Personal)
}
