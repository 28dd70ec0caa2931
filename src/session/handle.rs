//! The session's handle: the cloneable front every caller holds. It only sends requests to
//! the actor (see `actor.rs`), which owns the state; each method says when it returns.

use super::actor::SessionActor;
use super::deps::SessionDeps;
use super::envelope::SessionDirs;
use super::events::{OutputFilter, SUBSCRIBER_BACKLOG, Subscription};
use super::input::{SessionError, UserInput};
use super::state::SessionState;
use super::{snapshot, spool};
use crate::domain::{Answer, SessionId, SessionKey, SubagentRole};
use crate::store::{JournalEvent, SessionMeta};
use crate::tools::ApprovalMode;
use crate::tools::mcp::{McpHub, prompt};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};

/// What a drained session says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainedTurn {
    /// Whether inputs were waiting for their turn (they were refused).
    pub waiting: bool,
    /// The approval mode of the turn it stopped, when not the session's own.
    pub approval: Option<ApprovalMode>,
}

/// The cloneable front of a session.
#[derive(Clone)]
pub struct SessionHandle {
    pub(super) id: SessionId,
    pub(super) tx: mpsc::Sender<Request>,
    /// How many [`KeepAwake`] guards are alive; the actor does not rest while any is.
    pub(super) awake: Arc<AtomicUsize>,
    /// The MCP servers whose prompts an input may name (`/mcp__server__prompt`), and the
    /// session's project, whose servers they are.
    pub(super) prompts: Option<(Arc<McpHub>, PathBuf)>,
}

/// Keeps a session from resting while it lives: held by work that runs on after a turn (a
/// background job, a subagent). When the last one goes, idle time counts from then.
pub struct KeepAwake {
    tx: mpsc::Sender<Request>,
    awake: Arc<AtomicUsize>,
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.awake.fetch_sub(1, Ordering::AcqRel);
        rouse(&self.tx);
    }
}

/// Asks the actor to look again at whether it may rest, without waiting.
/// Closes a stopping actor's channel and gives the inputs still in it back to their senders
/// unread ([`SessionError::NotTaken`]), so they can go to the actor started in its place.
pub(super) fn give_back_unread(mut requests: mpsc::Receiver<Request>) {
    requests.close();
    while let Ok(request) = requests.try_recv() {
        if let Request::Send { input, reply } = request {
            let _ = reply.send(Err(SessionError::NotTaken(Box::new(input))));
        }
    }
}

fn rouse(tx: &mpsc::Sender<Request>) {
    if tx.try_send(Request::Awake).is_err()
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        let tx = tx.clone();
        runtime.spawn(async move {
            let _ = tx.send(Request::Awake).await;
        });
    }
}

pub(super) enum Request {
    Send {
        input: UserInput,
        reply: oneshot::Sender<Result<u64, SessionError>>,
    },
    Subscribe {
        filter: OutputFilter,
        backlog: usize,
        reply: oneshot::Sender<Subscription>,
    },
    /// Answered once no turn is running.
    State {
        reply: oneshot::Sender<SessionState>,
    },
    Cancel,
    /// From the next turn on, ask (or not) as `mode` says.
    SetApproval {
        mode: ApprovalMode,
    },
    /// From the next turn on, offer and run only these tools.
    SetTools {
        tools: crate::tools::ToolRegistry,
    },
    /// From the next turn on, call the model of `deps` (its client and overrides).
    SetModel {
        deps: Arc<SessionDeps>,
    },
    /// The person's answer for the call `call_id`, which waits for approval.
    Answer {
        call_id: String,
        answer: Answer,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    /// Stop for a restart: the running turn ends after its current tool batch, then the actor
    /// stops; answered with whether inputs were waiting (they are refused, not kept).
    Drain {
        reply: oneshot::Sender<DrainedTurn>,
        /// A handover: a model call in flight is let go rather than waited for.
        cut: bool,
    },
    /// Go on with the history as it stands, without a new input: a drained turn resuming
    /// after a restart, its nudge carrying `notice`.
    ResumeTurn {
        notice: String,
        /// The approval mode the stopped turn had, when not the session's own.
        approval: Option<ApprovalMode>,
        /// Told whether the turn was taken up, once its resumption is journaled.
        started: oneshot::Sender<bool>,
    },
    /// A [`KeepAwake`] guard was taken or dropped.
    Awake,
    /// Compact the history now (`/compact`); answered with whether anything changed, once
    /// the compaction ran (after the running turn, if any).
    Compact {
        reply: oneshot::Sender<Result<bool, SessionError>>,
    },
    /// Stop once the running turn and the queued inputs are done; answered after the actor
    /// has released everything it holds (the store among them).
    Close {
        reply: oneshot::Sender<()>,
    },
}

/// What a subagent's session starts from.
#[derive(Debug, Clone)]
pub struct ChildStart {
    pub role: SubagentRole,
    pub project_dir: PathBuf,
    pub cwd: PathBuf,
    /// The parent's, most recent first.
    pub recent_files: Vec<PathBuf>,
    /// The tools it may use.
    pub tools: Vec<String>,
    /// A model of its own; `None`: the one its dependencies call.
    pub model: Option<String>,
    /// What it is called in listings (its definition and the start of its task).
    pub title: String,
}

impl SessionHandle {
    /// Starts a new session for `project_dir`, from the terminal (`cli:<id>`).
    pub fn create(deps: Arc<SessionDeps>, project_dir: PathBuf) -> Result<Self, SessionError> {
        let id = SessionId::generate();
        let key = SessionKey::cli(&id);
        Self::create_as(deps, id, key, project_dir)
    }

    /// Starts a new session for `project_dir` that `key` talks to from now on.
    pub fn create_with_key(
        deps: Arc<SessionDeps>,
        key: SessionKey,
        project_dir: PathBuf,
    ) -> Result<Self, SessionError> {
        Self::create_as(deps, SessionId::generate(), key, project_dir)
    }

    fn create_as(
        deps: Arc<SessionDeps>,
        id: SessionId,
        key: SessionKey,
        project_dir: PathBuf,
    ) -> Result<Self, SessionError> {
        let (dirs, meta) = Self::new_meta(&deps, id, key, project_dir);
        deps.store.create_session(&meta)?;
        let state = SessionState::new(meta.id, meta.project_dir);
        Ok(SessionActor::spawn(deps, dirs, state))
    }

    fn new_meta(
        deps: &SessionDeps,
        id: SessionId,
        key: SessionKey,
        project_dir: PathBuf,
    ) -> (SessionDirs, SessionMeta) {
        let now = jiff::Timestamp::now().as_millisecond();
        let dirs = SessionDirs::new(&deps.data_dir, &id, &key);
        let mut meta = SessionMeta::new(id, key, project_dir, now);
        meta.provider = deps.client.primary.provider.name().to_owned();
        meta.model = deps.client.primary.model();
        meta.overrides = deps.overrides.clone();
        meta.session_dir = Some(dirs.session_dir.clone());
        (dirs, meta)
    }

    /// Starts the session of a subagent run under `key`: its role, working directory and the
    /// parent's recent files are journaled (durably) before anything else, and it runs only
    /// the tools `tools` names, now and whenever it is opened again.
    pub fn create_child(
        deps: Arc<SessionDeps>,
        key: SessionKey,
        start: ChildStart,
    ) -> Result<Self, SessionError> {
        let (dirs, mut meta) =
            Self::new_meta(&deps, SessionId::generate(), key, start.project_dir.clone());
        meta.permissions.tools = Some(start.tools);
        deps.store.create_session(&meta)?;
        let mut state = SessionState::new(meta.id.clone(), meta.project_dir.clone());
        let mut events = vec![
            JournalEvent::SubagentRoleSet { role: start.role },
            JournalEvent::TitleChanged { title: start.title },
        ];
        if start.cwd != start.project_dir {
            events.push(JournalEvent::WorkingDirectoryChanged { path: start.cwd });
        }
        // Oldest first, so the most recent ends up in front.
        for path in start.recent_files.into_iter().rev() {
            events.push(JournalEvent::FileTouched { path });
        }
        let every = deps.settings.snapshot_every;
        snapshot::commit(&deps.store, every, &mut state, &events)?;
        Ok(SessionActor::spawn(deps, dirs, state))
    }

    /// Reopens a stored session: replays its journal, repairs what a crash left open, and
    /// returns once the session is ready.
    pub fn resume(deps: Arc<SessionDeps>, meta: &SessionMeta) -> Result<Self, SessionError> {
        let dirs = locate_dirs(&deps, meta);
        let mut replay = snapshot::recover(
            &deps.store,
            &meta.id,
            meta.project_dir.clone(),
            &dirs.spool_dir,
            &deps.redactor,
        )?;
        if !replay.repairs.is_empty() {
            tracing::info!(session = %meta.id, repairs = replay.repairs.len(), "repairing journal");
            snapshot::store_repairs(&deps.store, &mut replay, &dirs.spool_dir)?;
        }
        spool::clear(&dirs.spool_dir);
        Ok(SessionActor::spawn(deps, dirs, replay.state))
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Keeps the session from resting (and wakes it from the grace before rest) until the
    /// guard is dropped.
    pub fn keep_awake(&self) -> KeepAwake {
        self.awake.fetch_add(1, Ordering::AcqRel);
        rouse(&self.tx);
        KeepAwake {
            tx: self.tx.clone(),
            awake: self.awake.clone(),
        }
    }

    /// Journals `input` durably and returns its journal position; the turn it starts runs
    /// on afterwards. An input sent during a turn is acknowledged when its own turn starts.
    pub async fn send(&self, input: UserInput) -> Result<u64, SessionError> {
        self.offer(input).await.map_err(|(err, _)| err)
    }

    /// [`SessionHandle::send`], giving `input` back when the session's actor stopped before
    /// it took the input in, so it can go to the actor started after it without a copy (a
    /// paste of megabytes). The input given back has had its prompt (`/mcp__…`) expanded:
    /// it is sent again with [`SessionHandle::hand_over`].
    pub async fn offer(&self, input: UserInput) -> Result<u64, (SessionError, Option<UserInput>)> {
        if input.text.trim().is_empty() {
            return Err((SessionError::EmptyInput, None));
        }
        let input = self.with_prompt(input).await.map_err(|err| (err, None))?;
        self.hand_over(input).await
    }

    /// [`SessionHandle::offer`] for an input whose prompt is expanded already.
    pub async fn hand_over(
        &self,
        input: UserInput,
    ) -> Result<u64, (SessionError, Option<UserInput>)> {
        let (reply, rx) = oneshot::channel();
        if let Err(refused) = self.tx.send(Request::Send { input, reply }).await {
            let input = match refused.0 {
                Request::Send { input, .. } => Some(input),
                _ => None,
            };
            return Err((SessionError::Closed, input));
        }
        match rx.await {
            Ok(Ok(seq)) => Ok(seq),
            Ok(Err(SessionError::NotTaken(input))) => Err((SessionError::Closed, Some(*input))),
            Ok(Err(err)) => Err((err, None)),
            Err(_) => Err((SessionError::Closed, None)),
        }
    }

    /// `input`, its text the prompt it names (`/mcp__server__prompt ARGS`) as the server
    /// gives it, when it names one; as it is otherwise.
    async fn with_prompt(&self, input: UserInput) -> Result<UserInput, SessionError> {
        let Some((hub, project)) = &self.prompts else {
            return Ok(input);
        };
        if prompt::named(&input.text).is_none() {
            return Ok(input);
        }
        let text = hub
            .prompt(project, &input.text, input.audience)
            .await
            .map_err(SessionError::Prompt)?;
        Ok(UserInput {
            text: text.into(),
            ..input
        })
    }

    /// Attaches a subscriber; events from now on arrive on the returned receiver, which may
    /// hold [`SUBSCRIBER_BACKLOG`] events unread before it is dropped.
    pub async fn subscribe(&self, filter: OutputFilter) -> Result<Subscription, SessionError> {
        self.subscribe_with(filter, SUBSCRIBER_BACKLOG).await
    }

    /// [`SessionHandle::subscribe`] with a bound of its own on the events left unread.
    pub async fn subscribe_with(
        &self,
        filter: OutputFilter,
        backlog: usize,
    ) -> Result<Subscription, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Subscribe {
            filter,
            backlog,
            reply,
        })
        .await?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// The session's state once no turn is running.
    pub async fn state(&self) -> Result<SessionState, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::State { reply }).await?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// Lets the session finish what it accepted, then stops it. Returns once the actor has
    /// released the store, so the database can be closed or reopened right after. In
    /// approval mode `ask` nobody is left to answer, so the running turn ends after its
    /// current tool batch as a drain ends it.
    pub async fn close(self) {
        let (reply, rx) = oneshot::channel();
        if self.request(Request::Close { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops the session for a restart: the running turn ends after its current tool batch
    /// (`TurnStop::Drained`; a call waiting for approval and the calls after it do not run),
    /// inputs still waiting are refused, and the actor stops. Returns whether inputs were
    /// waiting.
    pub async fn drain(&self) -> Result<bool, SessionError> {
        Ok(self.drain_with(false).await?.waiting)
    }

    /// [`SessionHandle::drain`]; with `cut`, for a handover to another process: a model
    /// call in flight is let go (the turn ends drained, as if just before it) rather than
    /// waited for.
    pub async fn drain_with(&self, cut: bool) -> Result<DrainedTurn, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Drain { reply, cut }).await?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// Starts a turn that goes on from the history as it stands, its first call told
    /// `notice` (a turn a drain stopped, resumed after the restart), the
    /// turn allowed what `approval` allows (what the stopped turn had; `None`: the session's
    /// own). Returns once the resumption is journaled: whether the turn was taken up.
    pub async fn resume_turn_with(
        &self,
        notice: impl Into<String>,
        approval: Option<ApprovalMode>,
    ) -> Result<bool, SessionError> {
        let (started, rx) = oneshot::channel();
        self.request(Request::ResumeTurn {
            notice: notice.into(),
            approval,
            started,
        })
        .await?;
        // Not taken up when the session closed before its turn could start.
        Ok(rx.await.unwrap_or(false))
    }

    /// Compacts the history now, after the running turn and the inputs already waiting.
    /// Returns whether anything changed (a short history has nothing to compact).
    pub async fn compact(&self) -> Result<bool, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Compact { reply }).await?;
        rx.await.map_err(|_| SessionError::Closed)?
    }

    /// Stops the running turn, if any, at its next await point; a call waiting for approval
    /// is answered as denied by the cancel.
    pub async fn cancel(&self) -> Result<(), SessionError> {
        self.request(Request::Cancel).await
    }

    /// Sets how much this session may do without asking, from its next turn on.
    pub async fn set_approval(&self, mode: ApprovalMode) -> Result<(), SessionError> {
        self.request(Request::SetApproval { mode }).await
    }

    /// Offers and runs only `tools` from the next turn on.
    pub async fn set_tools(&self, tools: crate::tools::ToolRegistry) -> Result<(), SessionError> {
        self.request(Request::SetTools { tools }).await
    }

    /// Calls the model `deps` names from the next turn on, keeping this session's own
    /// approval mode.
    pub async fn set_model(&self, deps: Arc<SessionDeps>) -> Result<(), SessionError> {
        self.request(Request::SetModel { deps }).await
    }

    /// Answers the approval request for `call_id` (a `SessionEvent::ApprovalRequested`).
    /// Returns once the waiting call has the answer; the decision is journaled before the
    /// call runs. Fails with `SessionError::NotWaiting` when no call waits under that id.
    pub async fn answer(&self, call_id: &str, answer: Answer) -> Result<(), SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Answer {
            call_id: call_id.to_owned(),
            answer,
            reply,
        })
        .await?;
        rx.await.map_err(|_| SessionError::Closed)?
    }

    async fn request(&self, request: Request) -> Result<(), SessionError> {
        self.tx
            .send(request)
            .await
            .map_err(|_| SessionError::Closed)
    }
}

/// The session's folders, where the index says they are; a folder recorded under a data dir
/// that has since moved is re-rooted onto the current one, once, with a warning naming both.
fn locate_dirs(deps: &SessionDeps, meta: &SessionMeta) -> SessionDirs {
    let (dirs, moved) = SessionDirs::locate(&deps.data_dir, meta);
    if let Some(moved) = moved {
        tracing::warn!(
            session = %meta.id,
            from = %moved.from.display(),
            to = %moved.to.display(),
            "the session folder was recorded under another data dir; using it under the current one"
        );
        if let Err(err) = deps.store.set_session_dir(&meta.id, &moved.to) {
            tracing::warn!(session = %meta.id, %err, "could not record the session folder's new place");
        }
    }
    dirs
}
