//! A run whose session the last owner drained: at the next start its turn is not taken up
//! with nobody following it, so none of its calls runs twice; the run ends
//! `owner_restarted`, and its parent is told.

use super::work::{Notice, notice_heading, result_heading};
use crate::domain::{Audience, RunState, text_of};
use crate::gateway::SessionManager;
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
            "{}\nThe tern that ran it stopped before it ended, and it was not taken up again, \
             so none of its calls ran twice. What it had said by then:\n\n{said}\n",
            result_heading(&role.run_id, &role.agent, RunState::OwnerRestarted)
        );
        if !written && let Err(err) = std::fs::write(&result_path, result) {
            tracing::warn!(run = %role.run_id, %err, "could not write a run's result");
        }
        let Some(parent) = self.deps.store.meta(&role.parent).ok().flatten() else {
            return;
        };
        let text = format!(
            "{}The tern that ran it stopped before it ended; nothing of it runs again. Send it \
             again if its task still needs doing.",
            notice_heading(
                &role.run_id,
                &role.agent,
                RunState::OwnerRestarted,
                &result_path
            )
        );
        let notice = Notice {
            run: &role.run_id,
            parent: &role.parent,
            key: &parent.key,
            audience: task_audience(records),
            project_dir: parent.project_dir.clone(),
            text,
            touched: Vec::new(),
        };
        notice.send(self).await;
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
