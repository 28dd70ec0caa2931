//! The session manager: one child actor per session, created on demand. An input arrives as
//! [`SendUserMessage`] with a session key; the key is checked (an invalid one is an error, never
//! a new session), mapped to its current session in the store (a new one is created for a
//! key seen for the first time), and the session's actor is started (resumed from its journal)
//! if it is not running. An actor that has stopped is logged and started again from its
//! journal; the other sessions are not touched.

use crate::domain::{InvalidSessionKey, SessionId, SessionKey};
use crate::session::{
    OutputFilter, SessionDeps, SessionError, SessionHandle, Subscription, UserInput,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
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
