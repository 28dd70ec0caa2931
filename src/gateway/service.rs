//! The session service: the one door every front end goes through. A [`SessionService`] is a
//! cloneable handle holding nothing a front end could reach past it: commands (send an input,
//! answer an approval, cancel, compact, reset, run a `!` line, close), queries served off the
//! actors on blocking threads (a session's meta, the picker's [`Catalog`], the git branch, the
//! project's files), and subscriptions from a journal position ([`Feed`]).
//!
//! Every session is named by its id except where a key picks it (an input to a key, a reset);
//! an approval names the session and the call.

use super::catalog::Catalog;
use super::drain::{DrainedSession, WarmedUp};
use super::events::LifecycleEvent;
use super::feed::{self, Feed};
use super::manager::{Delivered, GatewayError, SendUserMessage, SessionManager};
use crate::domain::{Answer, SessionId, SessionKey};
use crate::session::{OutputFilter, SessionDeps, SessionError, SessionHandle, UserInput};
use crate::store::SessionMeta;
use crate::tools::ToolContext;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Longest a `!` line may run without output.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(120);
/// Files the file completion lists at most.
const FILE_LIMIT: usize = 50_000;
/// Longest the git branch is looked for.
const GIT_BOUND: Duration = Duration::from_secs(2);

/// Why the service could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    pub message: String,
}

impl ServiceError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl From<GatewayError> for ServiceError {
    fn from(err: GatewayError) -> Self {
        Self::new(err.to_string())
    }
}

impl From<SessionError> for ServiceError {
    fn from(err: SessionError) -> Self {
        Self::new(err.to_string())
    }
}

/// What a `!` line printed, with the credentials the sessions know replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRun {
    pub output: String,
    pub ok: bool,
}

/// The handle every front end holds.
#[derive(Clone)]
pub struct SessionService {
    manager: Arc<SessionManager>,
    deps: Arc<SessionDeps>,
}

impl SessionService {
    /// The service over the sessions `manager` runs, in this process.
    pub fn local(manager: Arc<SessionManager>) -> Self {
        let deps = manager.deps.clone();
        Self { manager, deps }
    }

    /// Delivers an input to the session `key` talks to (see [`SessionManager::send`]).
    pub async fn send(
        &self,
        key: &str,
        project_dir: &Path,
        input: UserInput,
    ) -> Result<Delivered, ServiceError> {
        let message = SendUserMessage {
            key: key.to_owned(),
            input,
            project_dir: project_dir.to_path_buf(),
        };
        Ok(self.manager.send(message).await?)
    }

    /// Delivers an input to the session `id`, whichever key it has.
    pub async fn send_to(&self, id: &SessionId, input: UserInput) -> Result<u64, ServiceError> {
        let handle = self.running(id).await?;
        Ok(handle.send(input).await?)
    }

    /// The session `key` talks to, started (or created) when needed.
    pub async fn open_key(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        let key = SessionKey::parse(key).map_err(|err| ServiceError::new(err.to_string()))?;
        let handle = self.manager.handle(&key, project_dir).await?;
        Ok(handle.id().clone())
    }

    /// Makes the stored session `id` the one its key talks to, started; returns its meta.
    pub async fn open(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        let meta = self.meta(id).await?;
        self.manager.attach(&meta).await?;
        Ok(meta)
    }

    /// Follows session `id` from journal position `from` (the records after it first;
    /// `None`: from now), with the kinds of event `filter` admits, `backlog` items at most
    /// left unread before the session drops the feed.
    pub async fn subscribe(
        &self,
        id: &SessionId,
        from: Option<u64>,
        filter: OutputFilter,
        backlog: usize,
    ) -> Result<Feed, ServiceError> {
        let handle = self.running(id).await?;
        let live = handle.subscribe_with(filter, backlog).await?;
        Ok(feed::start(
            self.deps.store.clone(),
            id.clone(),
            from,
            live,
            backlog,
        ))
    }

    /// Answers the approval request for `call_id` in session `id`. The first answer wins: a
    /// second one finds nothing waiting.
    pub async fn answer(
        &self,
        id: &SessionId,
        call_id: &str,
        answer: Answer,
    ) -> Result<(), ServiceError> {
        let handle = self.live(id).await?;
        Ok(handle.answer(call_id, answer).await?)
    }

    /// Stops the running turn of session `id`, if it runs.
    pub async fn cancel(&self, id: &SessionId) -> Result<(), ServiceError> {
        match self.manager.live_handle(id).await {
            Some(handle) => Ok(handle.cancel().await?),
            None => Ok(()),
        }
    }

    /// Compacts session `id` now; whether anything changed.
    pub async fn compact(&self, id: &SessionId) -> Result<bool, ServiceError> {
        let handle = self.running(id).await?;
        Ok(handle.compact().await?)
    }

    /// Gives `key` a new session (`/new`); its id.
    pub async fn reset(&self, key: &str, project_dir: &Path) -> Result<SessionId, ServiceError> {
        Ok(self.manager.reset(key, project_dir.to_path_buf()).await?)
    }

    /// Runs a `!` line in `cwd` through the sessions' own shell tool: its own process group,
    /// no credentials in its environment, its output capped and its credentials replaced.
    pub async fn shell(&self, cwd: &Path, command: &str) -> Result<ShellRun, ServiceError> {
        let tool = self
            .deps
            .tools
            .get_shared("shell_execute")
            .cloned()
            .ok_or_else(|| ServiceError::new("the shell tool is not available"))?;
        let ctx = ToolContext {
            project_dir: cwd.to_path_buf(),
            cwd: cwd.to_path_buf(),
            temp_dir: std::env::temp_dir(),
            readable_dirs: Vec::new(),
            tool_timeout: SHELL_TIMEOUT,
            child_env: self.deps.child_env.clone(),
            spool: None,
        };
        let input = serde_json::json!({ "command": command });
        let output = tool.execute(input, &ctx, CancellationToken::new()).await;
        Ok(ShellRun {
            output: self.deps.redactor.credentials(&output.content),
            ok: !output.is_error,
        })
    }

    /// A stored session's meta, read on a blocking thread.
    pub async fn meta(&self, id: &SessionId) -> Result<SessionMeta, ServiceError> {
        let store = self.deps.store.clone();
        let wanted = id.clone();
        let found = blocking(move || store.meta(&wanted)).await?;
        found
            .map_err(|err| ServiceError::new(err.to_string()))?
            .ok_or_else(|| ServiceError::new(format!("session {} is not stored", id.short())))
    }

    /// Reading stored sessions from a front end's own threads (the picker's).
    pub fn catalog(&self) -> Arc<dyn Catalog> {
        self.deps.store.clone()
    }

    /// The branch `dir` is on (`(detached)` for a detached head), or `None` outside a
    /// repository; looked for within two seconds.
    pub async fn git_branch(&self, dir: &Path) -> Option<String> {
        use crate::context::git::{Branch, GitContext, working_git};
        match working_git(dir, GIT_BOUND).await {
            GitContext::Repo(snapshot) => Some(match snapshot.branch {
                Branch::Named(name) => name,
                Branch::Detached => "(detached)".to_owned(),
            }),
            GitContext::Unavailable { .. } => None,
        }
    }

    /// The files of the project at `root` that a walk respecting `.gitignore` finds, for
    /// completion; read on a blocking thread.
    pub async fn files(&self, root: PathBuf) -> Vec<String> {
        blocking(move || crate::tools::list_files(&root, FILE_LIMIT))
            .await
            .unwrap_or_default()
    }

    /// Lifecycle events of every session from now on.
    pub fn lifecycle(&self) -> broadcast::Receiver<LifecycleEvent> {
        self.manager.lifecycle()
    }

    /// Lets every session finish what it accepted, then stops them.
    pub async fn close_all(&self) {
        self.manager.close_all().await;
    }

    /// Stops every session for a restart (see [`SessionManager::drain`]).
    pub async fn drain(&self, bound: Duration) -> Result<Vec<DrainedSession>, ServiceError> {
        Ok(self.manager.drain(bound).await?)
    }

    /// Resumes what the last drain stopped (see [`SessionManager::warm_up`]).
    pub async fn warm_up(&self) -> Result<Vec<WarmedUp>, ServiceError> {
        Ok(self.manager.warm_up().await?)
    }

    /// The running session `id`, started from its journal when it is not running.
    async fn running(&self, id: &SessionId) -> Result<SessionHandle, ServiceError> {
        if let Some(handle) = self.manager.live_handle(id).await {
            return Ok(handle);
        }
        let meta = self.meta(id).await?;
        Ok(self.manager.attach(&meta).await?)
    }

    /// The running session `id`; an error when it is not running.
    async fn live(&self, id: &SessionId) -> Result<SessionHandle, ServiceError> {
        self.manager
            .live_handle(id)
            .await
            .ok_or_else(|| ServiceError::new(format!("session {} is not running", id.short())))
    }
}

/// Runs `work` on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ServiceError::new(format!("a query stopped: {err}")))
}
