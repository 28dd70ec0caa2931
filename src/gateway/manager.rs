//! The session manager: one child actor per session, created on demand. An input arrives as
//! [`SendUserMessage`] with a session key; the key is checked (an invalid one is an error, never
//! a new session), mapped to its current session in the store (a new one is created for a
//! key seen for the first time), and the session's actor is started (resumed from its journal)
//! if it is not running. An actor that has stopped is logged and started again from its
//! journal; the other sessions are not touched.

use crate::domain::{ContentBlock, InvalidSessionKey, SessionId, SessionKey, TurnStop};
use crate::session::{
    OutputFilter, SessionDeps, SessionError, SessionHandle, Subscription, UserInput,
};
use crate::store::{JournalEvent, JournalRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// An input for the session a key talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct SendUserMessage {
    /// `cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, ….
    pub key: String,
    pub input: UserInput,
    /// Where a session created for this message works.
    pub project_dir: PathBuf,
}

/// Why the manager could not deliver an input.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    InvalidKey(#[from] InvalidSessionKey),
    #[error(transparent)]
    Session(#[from] SessionError),
}

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
/// tool batch, no text of it reached the person, and every call has its result.
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
    let mut batches = 0;
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
            JournalEvent::ToolResults { results } => {
                batches += 1;
                answered.extend(results.iter().map(|r| r.tool_use_id.clone()));
            }
            _ => {}
        }
    }
    batches > 0 && calls.is_subset(&answered)
}

/// Routes inputs by session key to the sessions' actors.
pub struct SessionManager {
    deps: Arc<SessionDeps>,
    live: Mutex<HashMap<SessionKey, SessionHandle>>,
}

impl SessionManager {
    pub fn new(deps: Arc<SessionDeps>) -> Self {
        Self {
            deps,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// Delivers `message` and returns the session it went to and the input's journal
    /// position. An actor found stopped is started again from its journal and the input sent
    /// once more.
    pub async fn send(&self, message: SendUserMessage) -> Result<(SessionId, u64), GatewayError> {
        let key = SessionKey::parse(&message.key)?;
        let mut restarted = false;
        loop {
            let handle = self.handle(&key, &message.project_dir).await?;
            match handle.send(message.input.clone()).await {
                Err(SessionError::Closed) if !restarted => {
                    tracing::error!(session = %handle.id(), %key, "the session's actor had stopped; restarting it from its journal");
                    self.live.lock().await.remove(&key);
                    restarted = true;
                }
                Ok(seq) => return Ok((handle.id().clone(), seq)),
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Attaches a subscriber to the session `key` talks to (starting it if needed).
    pub async fn subscribe(
        &self,
        key: &str,
        project_dir: PathBuf,
        filter: OutputFilter,
    ) -> Result<Subscription, GatewayError> {
        let key = SessionKey::parse(key)?;
        let handle = self.handle(&key, &project_dir).await?;
        Ok(handle.subscribe(filter).await?)
    }

    /// The running session for `key`: the live one, else its current session resumed from the
    /// journal, else a new one.
    pub async fn handle(
        &self,
        key: &SessionKey,
        project_dir: &std::path::Path,
    ) -> Result<SessionHandle, SessionError> {
        let mut live = self.live.lock().await;
        if let Some(handle) = live.get(key) {
            return Ok(handle.clone());
        }
        let handle = match self.deps.store.session_for_key(key)? {
            Some(meta) => SessionHandle::resume(self.deps.clone(), &meta)?,
            None => SessionHandle::create_with_key(
                self.deps.clone(),
                key.clone(),
                project_dir.to_path_buf(),
            )?,
        };
        live.insert(key.clone(), handle.clone());
        Ok(handle)
    }

    /// Gives `key` a new session (`/new`, `/reset`): the current one finishes what it
    /// accepted, is archived with its transcript, and the next input starts afresh. Returns
    /// the new session's id.
    pub async fn reset(&self, key: &str, project_dir: PathBuf) -> Result<SessionId, GatewayError> {
        let key = SessionKey::parse(key)?;
        let mut live = self.live.lock().await;
        if let Some(handle) = live.remove(&key) {
            handle.close().await;
        }
        if let Some(meta) = self
            .deps
            .store
            .session_for_key(&key)
            .map_err(SessionError::from)?
        {
            let now = jiff::Timestamp::now().as_millisecond();
            self.deps
                .store
                .archive_session(&meta.id, now)
                .map_err(SessionError::from)?;
        }
        let handle = SessionHandle::create_with_key(self.deps.clone(), key.clone(), project_dir)?;
        let id = handle.id().clone();
        live.insert(key, handle);
        Ok(id)
    }

    /// Stops every session for a restart, within `bound`: running turns end after their
    /// current tool batch (those still running when `bound` passes are cancelled), and the
    /// drained sessions are written to the manifest for [`SessionManager::warm_up`].
    pub async fn drain(&self, bound: Duration) -> Result<Vec<DrainedSession>, GatewayError> {
        let handles: Vec<(SessionKey, SessionHandle)> = self.live.lock().await.drain().collect();
        let deadline = tokio::time::Instant::now() + bound;
        let mut drained = Vec::new();
        for (key, handle) in handles {
            let waiting = match tokio::time::timeout_at(deadline, handle.drain()).await {
                Ok(Ok(waiting)) => waiting,
                Ok(Err(_)) => false,
                Err(_) => {
                    tracing::warn!(session = %handle.id(), "drain took too long; cancelling the turn");
                    let _ = handle.cancel().await;
                    false
                }
            };
            drained.push(DrainedSession {
                id: handle.id().clone(),
                key: key.as_str().to_owned(),
                waiting,
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
        for session in drained {
            let Ok(key) = SessionKey::parse(&session.key) else {
                continue;
            };
            let Some(meta) = self
                .deps
                .store
                .meta(&session.id)
                .map_err(SessionError::from)?
            else {
                continue;
            };
            let records = self.deps.store.load(&meta.id).map_err(SessionError::from)?;
            // A session the drain found idle stays cold until its next message.
            let last_stop = records.iter().rev().find_map(|r| r.event.turn_stop());
            if last_stop != Some(TurnStop::Drained) {
                continue;
            }
            let resumes = !session.waiting && resumable(&records);
            let handle = SessionHandle::resume(self.deps.clone(), &meta)?;
            if resumes {
                handle.resume_turn(RESTART_NOTICE).await?;
            }
            self.live.lock().await.insert(key, handle);
            warmed.push(WarmedUp {
                id: meta.id,
                key: session.key,
                resumed: resumes,
            });
        }
        let _ = std::fs::remove_file(&path);
        Ok(warmed)
    }

    fn manifest_path(&self) -> PathBuf {
        self.deps.data_dir.join(MANIFEST)
    }

    /// How many sessions have a running actor.
    pub async fn live_sessions(&self) -> usize {
        self.live.lock().await.len()
    }

    /// Lets every session finish what it accepted, then stops them all.
    pub async fn close_all(&self) {
        let handles: Vec<SessionHandle> = self.live.lock().await.drain().map(|(_, h)| h).collect();
        for handle in handles {
            handle.close().await;
        }
    }
}
