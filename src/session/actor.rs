//! The session actor and its handle.
//!
//! The handle is cheap to clone and only sends requests; the actor task owns the state.
//! While a turn runs, the state moves into the turn's task and comes back when it ends, so
//! there is never more than one writer. Inputs that arrive during a turn wait in a queue and
//! are journaled (and only then acknowledged) when their own turn starts.

use super::envelope::SessionDirs;
use super::events::{OutputFilter, SessionEvent, Subscribers, Subscription};
use super::log::SessionLog;
use super::phase::{IllegalTransition, Phase};
use super::state::{SessionState, oversize_placeholder};
use super::turn::Turn;
use crate::config::SessionSettings;
use crate::domain::{Audience, ErrorCategory, Sender, SessionId, SessionKey};
use crate::llm::ModelClient;
use crate::prompt;
use crate::store::{JournalEvent, SessionMeta, Store, StoreError, title_from_input};
use crate::tools::{ApprovalMode, ToolRegistry};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Requests waiting for the actor; a full queue makes senders wait.
const REQUEST_QUEUE: usize = 32;

/// What every session of this process shares.
pub struct SessionDeps {
    pub store: Arc<Store>,
    pub client: ModelClient,
    pub tools: ToolRegistry,
    pub settings: SessionSettings,
    pub approval: ApprovalMode,
    /// Where session folders live (`<data>/sessions/<id>/`).
    pub data_dir: PathBuf,
    /// The user's identity files (`<config>/identity/`): SOUL.md, AGENTS.md, TOOLING.md.
    pub identity_dir: PathBuf,
}

/// Input for the session, from any front end.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInput {
    pub sender: Sender,
    pub audience: Audience,
    pub text: String,
}

impl UserInput {
    /// Text typed by the person at this terminal.
    pub fn local(text: impl Into<String>) -> Self {
        Self {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            text: text.into(),
        }
    }
}

/// Why a session request failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Phase(#[from] IllegalTransition),
    #[error("the session has stopped and takes no more requests")]
    Closed,
    #[error("the input is empty; type a message for the model")]
    EmptyInput,
    #[error(
        "the input was dropped because the turn was cancelled before it started; send it again"
    )]
    Cancelled,
    #[error(
        "the input is {bytes} bytes, over the {limit}-byte message limit, and could not be saved \
         in {dir} to keep it whole; check that the folder is writable, or send a shorter message"
    )]
    Oversized {
        bytes: usize,
        limit: usize,
        dir: PathBuf,
    },
}

/// The cloneable front of a session.
#[derive(Clone)]
pub struct SessionHandle {
    id: SessionId,
    tx: mpsc::Sender<Request>,
}

enum Request {
    Send {
        input: UserInput,
        reply: oneshot::Sender<Result<u64, SessionError>>,
    },
    Subscribe {
        filter: OutputFilter,
        reply: oneshot::Sender<Subscription>,
    },
    /// Answered once no turn is running.
    State {
        reply: oneshot::Sender<SessionState>,
    },
    Cancel,
    /// Stop once the running turn and the queued inputs are done; answered after the actor
    /// has released everything it holds (the store among them).
    Close {
        reply: oneshot::Sender<()>,
    },
}

impl SessionHandle {
    /// Starts a new session for `project_dir`.
    pub fn create(deps: Arc<SessionDeps>, project_dir: PathBuf) -> Result<Self, SessionError> {
        let id = SessionId::generate();
        let key = SessionKey::cli(&id);
        let now = jiff::Timestamp::now().as_millisecond();
        deps.store.create_session(&SessionMeta {
            id: id.clone(),
            key: key.clone(),
            project_dir: project_dir.clone(),
            title: String::new(),
            created_at_ms: now,
            updated_at_ms: now,
            event_count: 0,
            input_count: 0,
            provider: deps.client.primary.provider.name().to_owned(),
            model: deps.client.primary.model.to_owned(),
        })?;
        let state = SessionState::new(id, project_dir);
        Ok(SessionActor::spawn(deps, key, state))
    }

    /// Reopens a stored session: replays its journal, repairs what a crash left open, and
    /// returns once the session is ready.
    pub fn resume(deps: Arc<SessionDeps>, meta: &SessionMeta) -> Result<Self, SessionError> {
        let records = deps.store.load(&meta.id)?;
        let replay = SessionState::replay(meta.id.clone(), meta.project_dir.clone(), &records);
        if !replay.repairs.is_empty() {
            tracing::info!(session = %meta.id, repairs = replay.repairs.len(), "repairing journal");
            deps.store.append_batch(&meta.id, &replay.repairs)?;
        }
        Ok(SessionActor::spawn(deps, meta.key.clone(), replay.state))
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// Journals `input` durably and returns its journal position; the turn it starts runs
    /// on afterwards. An input sent during a turn is acknowledged when its own turn starts.
    pub async fn send(&self, input: UserInput) -> Result<u64, SessionError> {
        if input.text.trim().is_empty() {
            return Err(SessionError::EmptyInput);
        }
        let (reply, rx) = oneshot::channel();
        self.request(Request::Send { input, reply }).await?;
        rx.await.map_err(|_| SessionError::Closed)?
    }

    /// Attaches a subscriber; events from now on arrive on the returned receiver.
    pub async fn subscribe(&self, filter: OutputFilter) -> Result<Subscription, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::Subscribe { filter, reply }).await?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// The session's state once no turn is running.
    pub async fn state(&self) -> Result<SessionState, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.request(Request::State { reply }).await?;
        rx.await.map_err(|_| SessionError::Closed)
    }

    /// Lets the session finish what it accepted, then stops it. Returns once the actor has
    /// released the store, so the database can be closed or reopened right after.
    pub async fn close(self) {
        let (reply, rx) = oneshot::channel();
        if self.request(Request::Close { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops the running turn, if any, at its next await point.
    pub async fn cancel(&self) -> Result<(), SessionError> {
        self.request(Request::Cancel).await
    }

    async fn request(&self, request: Request) -> Result<(), SessionError> {
        self.tx
            .send(request)
            .await
            .map_err(|_| SessionError::Closed)
    }
}

struct RunningTurn {
    cancel: CancellationToken,
    events: mpsc::UnboundedReceiver<SessionEvent>,
    task: JoinHandle<SessionState>,
}

/// What a running turn reports: an event, then, once its events are all out, its end.
enum TurnUpdate {
    Event(SessionEvent),
    /// The turn's task returned the state, or died (a bug) and must be recovered from.
    Ended(Result<SessionState, tokio::task::JoinError>),
}

struct SessionActor {
    id: SessionId,
    project_dir: PathBuf,
    deps: Arc<SessionDeps>,
    dirs: Arc<SessionDirs>,
    phase: Phase,
    /// `None` while a turn owns the state, or after the state was lost.
    state: Option<SessionState>,
    subscribers: Subscribers,
    /// `logs/session.log` in the session's folder.
    log: SessionLog,
    queue: VecDeque<(UserInput, oneshot::Sender<Result<u64, SessionError>>)>,
    waiting_for_state: Vec<oneshot::Sender<SessionState>>,
    turn: Option<RunningTurn>,
    /// False once closing: new input is refused, the rest is still answered.
    accepting: bool,
    /// Told when the actor has stopped and released its dependencies.
    closers: Vec<oneshot::Sender<()>>,
}

impl SessionActor {
    fn spawn(deps: Arc<SessionDeps>, key: SessionKey, state: SessionState) -> SessionHandle {
        let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
        let id = state.id.clone();
        let dirs = Arc::new(SessionDirs::new(&deps.data_dir, &id, &key));
        let actor = SessionActor {
            id: id.clone(),
            project_dir: state.project_dir.clone(),
            log: SessionLog::new(&dirs.log_dir),
            dirs,
            deps,
            phase: Phase::Recovering,
            state: Some(state),
            subscribers: Subscribers::default(),
            queue: VecDeque::new(),
            waiting_for_state: Vec::new(),
            turn: None,
            accepting: true,
            closers: Vec::new(),
        };
        tokio::spawn(actor.run(rx));
        SessionHandle { id, tx }
    }

    async fn run(mut self, mut requests: mpsc::Receiver<Request>) {
        if let Err(err) = self.set_phase(Phase::Ready) {
            tracing::error!(%err, "session could not become ready");
            return;
        }
        let mut handles_alive = true;
        while self.accepting || self.turn.is_some() || !self.queue.is_empty() {
            tokio::select! {
                request = requests.recv(), if handles_alive => match request {
                    Some(request) => self.handle(request),
                    // Every handle is gone: finish what was accepted, then stop.
                    None => {
                        handles_alive = false;
                        self.accepting = false;
                    }
                },
                update = next_turn_update(&mut self.turn) => match update {
                    TurnUpdate::Event(event) => self.publish(&event),
                    TurnUpdate::Ended(ended) => {
                        self.turn = None;
                        match ended {
                            Ok(state) => self.finish_turn(state),
                            Err(err) => self.recover_after_crash(&err),
                        }
                    }
                },
            }
        }
        for (_, reply) in self.queue.drain(..) {
            let _ = reply.send(Err(SessionError::Closed));
        }
        let closers = std::mem::take(&mut self.closers);
        drop(self);
        drop(requests);
        for reply in closers {
            let _ = reply.send(());
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Send { input, reply } if self.accepting => {
                self.queue.push_back((input, reply));
                self.start_next_turn();
            }
            Request::Send { reply, .. } => {
                let _ = reply.send(Err(SessionError::Closed));
            }
            Request::Subscribe { filter, reply } => {
                let _ = reply.send(self.subscribers.add(filter));
            }
            Request::State { reply } => match &self.state {
                Some(state) => {
                    let _ = reply.send(state.clone());
                }
                None => self.waiting_for_state.push(reply),
            },
            Request::Close { reply } => {
                self.closers.push(reply);
                self.accepting = false;
            }
            Request::Cancel => {
                if let Some(turn) = &self.turn {
                    turn.cancel.cancel();
                }
                // Inputs not yet journaled were never acknowledged; tell their senders.
                for (_, reply) in self.queue.drain(..) {
                    let _ = reply.send(Err(SessionError::Cancelled));
                }
            }
        }
    }

    /// Starts a turn for the oldest queued input if the session is idle.
    fn start_next_turn(&mut self) {
        while self.phase == Phase::Ready && self.state.is_some() {
            let Some((input, reply)) = self.queue.pop_front() else {
                return;
            };
            if let Err(err) = self.set_phase(Phase::Processing) {
                tracing::error!(%err, "could not start a turn");
                let _ = reply.send(Err(err.into()));
                return;
            }
            let Some(mut state) = self.state.take() else {
                return;
            };
            match self.accept(&mut state, input.clone()) {
                Ok(seq) => {
                    let _ = reply.send(Ok(seq));
                    self.spawn_turn(state, input.audience);
                    return;
                }
                Err(err) => {
                    // Nothing was journaled: the input is refused, the session stays as it was.
                    self.state = Some(state);
                    let _ = reply.send(Err(err));
                    if let Err(err) = self.set_phase(Phase::Ready) {
                        tracing::error!(%err, "could not return to ready");
                    }
                }
            }
        }
    }

    fn spawn_turn(&mut self, mut state: SessionState, audience: crate::domain::Audience) {
        let (events, receiver) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let deps = self.deps.clone();
        let dirs = self.dirs.clone();
        let token = cancel.clone();
        let task = tokio::spawn(async move {
            let turn = Turn {
                deps: &deps,
                dirs: &dirs,
                audience,
                cancel: token,
                events,
            };
            turn.run(&mut state).await;
            state
        });
        self.turn = Some(RunningTurn {
            cancel,
            events: receiver,
            task,
        });
    }

    /// Journals an input durably, then applies and announces it. An input over the size
    /// limit is kept whole as an artifact and replaced by a placeholder; if it cannot be kept,
    /// it is refused rather than lost.
    fn accept(&mut self, state: &mut SessionState, input: UserInput) -> Result<u64, SessionError> {
        let limit = self.deps.settings.max_message_bytes;
        // No input may pass itself off as tern's own note to the model.
        let input = UserInput {
            text: prompt::quote_lookalikes(&input.text).into_owned(),
            ..input
        };
        let text = if input.text.len() > limit {
            let name = format!("input-{}.txt", state.messages.len());
            let Some(saved) = self.dirs.save_artifact(&name, &input.text) else {
                return Err(SessionError::Oversized {
                    bytes: input.text.len(),
                    limit,
                    dir: self.dirs.artifact_dir.clone(),
                });
            };
            oversize_placeholder(input.text.len(), limit, Some(&saved))
        } else {
            input.text
        };
        let event = JournalEvent::InputAccepted {
            sender: input.sender,
            audience: input.audience,
            text,
        };
        // The first input names the session, in the same commit.
        let mut events = vec![event];
        if state.title.is_none()
            && let JournalEvent::InputAccepted { text, .. } = &events[0]
        {
            let title = title_from_input(text);
            if !title.is_empty() {
                events.push(JournalEvent::TitleChanged { title });
            }
        }
        let records = self.deps.store.append_batch(&state.id, &events)?;
        let seq = records.first().map_or(0, |record| record.seq);
        for event in &events {
            state.apply(event);
        }
        if let Some(JournalEvent::InputAccepted { text, .. }) = events.into_iter().next() {
            self.publish(&SessionEvent::InputAccepted { seq, text });
        }
        Ok(seq)
    }

    fn finish_turn(&mut self, state: SessionState) {
        for reply in self.waiting_for_state.drain(..) {
            let _ = reply.send(state.clone());
        }
        self.state = Some(state);
        if let Err(err) = self.set_phase(Phase::Ready) {
            tracing::error!(%err, "could not end a turn");
        }
        self.start_next_turn();
    }

    /// The turn's task died, which is a bug. The journal is the truth: rebuild from it, end
    /// the turn there, and go on. If the journal cannot be read either, the session stops.
    fn recover_after_crash(&mut self, err: &tokio::task::JoinError) {
        tracing::error!(%err, "a turn task stopped unexpectedly; rebuilding from the journal");
        if let Err(err) = self.set_phase(Phase::Recovering) {
            tracing::error!(%err, "could not enter recovery");
        }
        let message = "the turn stopped unexpectedly (a bug in tern); the session was restored \
                       from its journal and can go on";
        let records = match self.deps.store.load(&self.id) {
            Ok(records) => records,
            Err(err) => {
                self.publish(&SessionEvent::TurnFailed {
                    category: ErrorCategory::Storage,
                    message: format!(
                        "the turn stopped unexpectedly and the session journal could not be \
                         read back ({err}); the session has stopped. Open it again with \
                         `tern run --session {}`",
                        self.id
                    ),
                });
                self.accepting = false;
                return;
            }
        };
        let mut replay = SessionState::replay(self.id.clone(), self.project_dir.clone(), &records);
        for event in &mut replay.repairs {
            if let JournalEvent::TurnFailed {
                category,
                message: text,
            } = event
            {
                *category = ErrorCategory::Internal;
                *text = message.to_owned();
            }
        }
        if let Err(err) = self.deps.store.append_batch(&self.id, &replay.repairs) {
            tracing::error!(%err, "could not repair the journal");
        }
        self.publish(&SessionEvent::TurnFailed {
            category: ErrorCategory::Internal,
            message: message.to_owned(),
        });
        self.finish_turn(replay.state);
    }

    /// Tells the subscribers and the session log.
    fn publish(&mut self, event: &SessionEvent) {
        self.log.record(event);
        self.subscribers.publish(event);
    }

    fn set_phase(&mut self, to: Phase) -> Result<(), IllegalTransition> {
        self.phase = self.phase.become_(to)?;
        self.publish(&SessionEvent::PhaseChanged { phase: to });
        Ok(())
    }
}

/// The next update of the running turn; pending forever when no turn runs.
async fn next_turn_update(turn: &mut Option<RunningTurn>) -> TurnUpdate {
    let Some(turn) = turn else {
        return std::future::pending().await;
    };
    match turn.events.recv().await {
        Some(event) => TurnUpdate::Event(event),
        // Every event is out; the task has returned or died.
        None => TurnUpdate::Ended((&mut turn.task).await),
    }
}
