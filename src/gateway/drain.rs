//! Drain and warm-up: stopping every session for a restart (running turns end after their
//! current tool batch, the whole stop bounded), listing them in `drained.json`, and at the
//! next start resuming the turns that may go on by themselves.

use super::manager::{GatewayError, SessionManager};
use crate::domain::{ContentBlock, SessionId, SessionKey, TurnStop};
use crate::session::{DrainedTurn, SessionError, SessionHandle};
use crate::store::{JournalEvent, JournalRecord};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The longest a drain may take before running turns are cancelled.
pub const DRAIN_BOUND: Duration = Duration::from_secs(30);

/// Where the drained sessions are listed between a stop and the next start.
const MANIFEST: &str = "drained.json";

/// What the next call of a resumed turn is told.
const RESTART_NOTICE: &str = "tern restarted in the middle of this turn, after the tool results \
                              above; carry on from there.";

/// A session a drain stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainedSession {
    pub id: SessionId,
    pub key: String,
    /// Whether inputs were waiting for their turn (they were refused).
    pub waiting: bool,
    /// The approval mode of the stopped turn, when not the session's own: the turn resumed
    /// goes on with it (a `tern run --approve all` turn handed over to an interface).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::tools::ApprovalMode>,
}

/// A session started again after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmedUp {
    pub id: SessionId,
    pub key: String,
    /// Whether its stopped turn went on by itself; otherwise the person should be told it
    /// stopped.
    pub resumed: bool,
}

/// Whether the journal ends with a drained turn that may go on by itself: it stopped after a
/// tool batch (or, handed over, before a model call), no text of it reached the person, and
/// every call has its result.
fn resumable(records: &[JournalRecord]) -> bool {
    let Some(end) = records.iter().rposition(|r| r.event.turn_stop().is_some()) else {
        return false;
    };
    if records[end].event.turn_stop() != Some(TurnStop::Drained) || end + 1 != records.len() {
        return false;
    }
    let start = records[..end]
        .iter()
        .rposition(|r| {
            matches!(
                r.event,
                JournalEvent::InputAccepted { .. } | JournalEvent::TurnResumed { .. }
            )
        })
        .map_or(0, |i| i + 1);
    let turn = &records[start..end];
    let mut calls = std::collections::HashSet::new();
    let mut answered = std::collections::HashSet::new();
    for record in turn {
        match &record.event {
            JournalEvent::AssistantMessage { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => return false,
                        ContentBlock::ToolUse(call) => {
                            calls.insert(call.id.clone());
                        }
                        _ => {}
                    }
                }
            }
            JournalEvent::ToolResults { results, .. } => {
                answered.extend(results.iter().map(|r| r.tool_use_id.clone()));
            }
            _ => {}
        }
    }
    // A handover may end a turn before its first batch: asked again, it loses nothing.
    calls.is_subset(&answered)
}

impl SessionManager {
    /// Stops every session for a restart, within `bound`: running turns end after their
    /// current tool batch (those still running when `bound` passes are cancelled), and the
    /// drained sessions are written to the manifest for [`SessionManager::warm_up`].
    pub async fn drain(&self, bound: Duration) -> Result<Vec<DrainedSession>, GatewayError> {
        self.drain_with(bound, false).await
    }

    /// [`SessionManager::drain`] for a handover to another process: model calls in flight
    /// are let go rather than waited for, and their turns asked again by the next owner.
    pub async fn hand_over(&self, bound: Duration) -> Result<Vec<DrainedSession>, GatewayError> {
        self.drain_with(bound, true).await
    }

    async fn drain_with(
        &self,
        bound: Duration,
        cut: bool,
    ) -> Result<Vec<DrainedSession>, GatewayError> {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Release);
        let handles: Vec<(SessionKey, SessionHandle)> = self.live.lock().await.drain().collect();
        let deadline = tokio::time::Instant::now() + bound;
        let mut drained = Vec::new();
        for (key, handle) in handles {
            let stopped = match tokio::time::timeout_at(deadline, handle.drain_with(cut)).await {
                Ok(Ok(stopped)) => stopped,
                Ok(Err(_)) => DrainedTurn::default(),
                Err(_) => {
                    tracing::warn!(session = %handle.id(), "drain took too long; cancelling the turn");
                    let _ = handle.cancel().await;
                    DrainedTurn::default()
                }
            };
            drained.push(DrainedSession {
                id: handle.id().clone(),
                key: key.as_str().to_owned(),
                waiting: stopped.waiting,
                approval: stopped.approval,
            });
        }
        let manifest = serde_json::to_vec_pretty(&drained)
            .map_err(|e| SessionError::Io(format!("the drain manifest: {e}")))?;
        let path = self.manifest_path();
        let temp = path.with_extension("json.tmp");
        std::fs::write(&temp, manifest)
            .and_then(|()| std::fs::rename(&temp, &path))
            .map_err(|e| SessionError::Io(format!("{}: {e}", path.display())))?;
        Ok(drained)
    }

    /// After a restart: starts the sessions whose turns the last drain stopped, first (the
    /// ones it found idle stay cold until their next message). A turn the drain
    /// stopped after a tool batch goes on by itself (its nudge says tern restarted) when no
    /// text of it had reached the person, no input was waiting and every call has its result;
    /// the others are reported so the person can be told their turn stopped.
    pub async fn warm_up(&self) -> Result<Vec<WarmedUp>, GatewayError> {
        let path = self.manifest_path();
        let drained: Vec<DrainedSession> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                tracing::warn!(%err, "unreadable drain manifest; no session resumes by itself");
                Vec::new()
            }),
            Err(_) => return Ok(Vec::new()),
        };
        let mut warmed = Vec::new();
        // The runs drained with their owner, ended once every session is up: a notice opens
        // its parent, which must not be opened again here.
        let mut runs = Vec::new();
        for session in drained {
            // One that cannot be warmed up does not keep the others cold.
            match self.warm_one(&session, &mut runs).await {
                Ok(Some(one)) => warmed.push(one),
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(session = %session.id, %err, "could not warm up a drained session");
                }
            }
        }
        for records in runs {
            self.end_drained_run(&records).await;
        }
        let _ = std::fs::remove_file(&path);
        Ok(warmed)
    }

    /// Opens one session the drain stopped, taking its turn up again when it can be;
    /// `None` for one the drain found idle, which stays cold until its next message.
    async fn warm_one(
        &self,
        session: &DrainedSession,
        runs: &mut Vec<Vec<JournalRecord>>,
    ) -> Result<Option<WarmedUp>, GatewayError> {
        let Ok(key) = SessionKey::parse(&session.key) else {
            return Ok(None);
        };
        let store = &self.deps.store;
        let Some(meta) = store.meta(&session.id).map_err(SessionError::from)? else {
            return Ok(None);
        };
        let records = store.load(&meta.id).map_err(SessionError::from)?;
        let last_stop = records.iter().rev().find_map(|r| r.event.turn_stop());
        if last_stop != Some(TurnStop::Drained) {
            return Ok(None);
        }
        // A subagent's turn is not taken up with nobody following it: its run ends, and
        // its parent is told.
        if meta.parent.is_some() {
            runs.push(records);
            return Ok(None);
        }
        let handle = SessionHandle::resume(self.deps_of(&meta), &meta)?;
        // Once taken up, the turn's resumption is in the journal: whoever follows the
        // session from now on reads it there.
        let resumes = !session.waiting
            && resumable(&records)
            && handle
                .resume_turn_with(RESTART_NOTICE, session.approval)
                .await?;
        self.live.lock().await.insert(key, handle);
        Ok(Some(WarmedUp {
            id: meta.id,
            key: session.key.clone(),
            resumed: resumes,
        }))
    }

    fn manifest_path(&self) -> PathBuf {
        self.deps.data_dir.join(MANIFEST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Audience, InputKind, Sender, ToolCall, ToolResult};
    use crate::testing::numbered as records;

    fn input() -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: "find it".into(),
        }
    }

    fn asks(text: &str, calls: &[&str]) -> JournalEvent {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(ContentBlock::Text { text: text.into() });
        }
        content.extend(calls.iter().map(|id| {
            ContentBlock::ToolUse(ToolCall {
                id: (*id).into(),
                name: "glob".into(),
                input: serde_json::json!({}),
            })
        }));
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content,
        }
    }

    fn answers(ids: &[&str]) -> JournalEvent {
        JournalEvent::ToolResults {
            results: ids.iter().map(|id| ToolResult::ok(*id, "ok")).collect(),
            took_ms: None,
        }
    }

    fn drained() -> JournalEvent {
        JournalEvent::TurnCompleted {
            stop: TurnStop::Drained,
        }
    }

    fn check(events: Vec<JournalEvent>, expected: bool) {
        assert_eq!(resumable(&records(events.clone())), expected, "{events:#?}");
    }

    #[test]
    fn a_drained_tool_loop_that_said_nothing_resumes() {
        check(
            vec![input(), asks("", &["a"]), answers(&["a"]), drained()],
            true,
        );
        // Earlier turns do not count, only the drained one.
        check(
            vec![
                input(),
                asks("an earlier answer", &[]),
                JournalEvent::completed(),
                input(),
                asks("", &["a", "b"]),
                answers(&["a", "b"]),
                drained(),
            ],
            true,
        );
        // Handed over before its first reply: asked again.
        check(vec![input(), drained()], true);
    }

    #[test]
    fn a_turn_that_reached_the_person_or_left_a_call_open_does_not() {
        // Text already shown.
        check(
            vec![
                input(),
                asks("Looking…", &["a"]),
                answers(&["a"]),
                drained(),
            ],
            false,
        );
        // A call without its result.
        check(
            vec![input(), asks("", &["a", "b"]), answers(&["a"]), drained()],
            false,
        );
        // The last turn ended normally, or something came after the drain.
        check(
            vec![
                input(),
                asks("", &["a"]),
                answers(&["a"]),
                JournalEvent::completed(),
            ],
            false,
        );
        check(
            vec![
                input(),
                asks("", &["a"]),
                answers(&["a"]),
                drained(),
                input(),
            ],
            false,
        );
    }
}
