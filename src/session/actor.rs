//! The session actor: the task that owns a session's state (its handle is in `handle.rs`).
//!
//! The handle is cheap to clone and only sends requests; the actor task owns the state.
//! While a turn runs, the state moves into the turn's task and comes back when it ends, so
//! there is never more than one writer. Inputs that arrive during a turn either join it (the
//! same person: journaled and acknowledged at its next tool-batch boundary) or wait in a
//! queue and are journaled (and only then acknowledged) when their own turn starts; see
//! [`joining`](super::joining). After the first completed turn a title call runs beside the
//! idle session ([`titling`](super::titling)); the actor journals its answer.

mod recover;
mod rest;
#[cfg(test)]
mod tests;

use super::asking::ApprovalSlot;
use super::background;
use super::deps::SessionDeps;
use super::envelope::SessionDirs;
use super::events::{EventTx, SessionEvent, Stamped, Subscribers};
use super::handle::{DrainedTurn, Request, SessionHandle, give_back_unread};
use super::input::{SessionError, UserInput, journal_input_unsynced};
use super::joining::{self, Route, TurnOwner};
use super::log::SessionLog;
use super::phase::{IllegalTransition, Phase};
use super::snapshot;
use super::state::SessionState;
use super::titling::Titler;
use super::turn::{Joining, PendingInput, StopAfterBatch, Turn};
use crate::domain::{Audience, SessionId, TurnStop};
use crate::prompt::TurnNotes;
use crate::store::{JournalEvent, Unsynced};
use crate::tools::ApprovalMode;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// Requests waiting for the actor; a full queue makes senders wait.
const REQUEST_QUEUE: usize = 32;

/// How long a session about to be put to rest still takes a new message that keeps it up.
const PASSIVATION_GRACE: Duration = Duration::from_secs(5);

struct RunningTurn {
    cancel: CancellationToken,
    /// Ends the turn after its current batch (a person's message, a drain).
    stop_after_batch: StopAfterBatch,
    /// Whom the turn answers; `None` for a compaction on demand.
    owner: Option<TurnOwner>,
    joining: Joining,
    /// Where the call waiting for a person, if any, takes its answer.
    approvals: ApprovalSlot,
    /// How much the turn may do without asking.
    approval: ApprovalMode,
    events: mpsc::UnboundedReceiver<Stamped>,
    task: JoinHandle<SessionState>,
}

/// What waits for the session to be idle.
enum Queued {
    Input(PendingInput),
    /// A person's input that ended an automated turn: it goes before everything else, after
    /// any that did so earlier.
    Interrupting(PendingInput),
    Compact(oneshot::Sender<Result<bool, SessionError>>),
    /// A turn without a new input, after a restart.
    /// A drained turn to take up again; told once its resumption is journaled (or not).
    Resume(String, Option<ApprovalMode>, oneshot::Sender<bool>),
}

/// What a running turn reports: an event, then, once its events are all out, its end.
enum TurnUpdate {
    Event(Stamped),
    /// The turn's task returned the state, or died (a bug) and must be recovered from.
    Ended(Box<Result<SessionState, tokio::task::JoinError>>),
}

pub(super) struct SessionActor {
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
    queue: VecDeque<Queued>,
    /// The note for the next turn after a person's message ended an automated one.
    interrupted_note: Option<String>,
    /// How the running turn ended, once it has said so.
    last_stop: Option<TurnStop>,
    /// When the session last had something to do (an input, a compaction, a turn's end, a
    /// keep-awake guard taken or dropped).
    active_at: Instant,
    waiting_for_state: Vec<oneshot::Sender<SessionState>>,
    turn: Option<RunningTurn>,
    /// False once closing: new input is refused, the rest is still answered.
    accepting: bool,
    /// Told when the actor has stopped and released its dependencies.
    closers: Vec<oneshot::Sender<()>>,
    /// Told, when the actor has stopped, whether inputs were waiting at the drain.
    drainers: Vec<(oneshot::Sender<DrainedTurn>, DrainedTurn)>,
    /// Live [`super::handle::KeepAwake`] guards; none may rest while there are any.
    awake: Arc<AtomicUsize>,
    /// The model call naming the session after its first turn.
    titles: Titler,
    /// The journal position of the latest event published.
    published_at: u64,
}

impl SessionActor {
    pub(super) fn spawn(
        deps: Arc<SessionDeps>,
        dirs: SessionDirs,
        state: SessionState,
    ) -> SessionHandle {
        let (tx, rx) = mpsc::channel(REQUEST_QUEUE);
        let id = state.id.clone();
        let subagent = state.subagent.is_some();
        let prompts = deps.mcp.clone().map(|hub| (hub, state.project_dir.clone()));
        let dirs = Arc::new(dirs);
        let awake = Arc::new(AtomicUsize::new(0));
        // Jobs an earlier tern started in it are known from here on, reported reaped.
        deps.jobs
            .adopt(&id, &state.jobs, &dirs.log_dir.join(super::JOB_LOGS));
        let actor = SessionActor {
            id: id.clone(),
            project_dir: state.project_dir.clone(),
            log: SessionLog::new(&dirs.log_dir, deps.redactor.clone()),
            dirs,
            deps,
            phase: Phase::Recovering,
            state: Some(state),
            subscribers: Subscribers::default(),
            queue: VecDeque::new(),
            interrupted_note: None,
            last_stop: None,
            active_at: Instant::now(),
            waiting_for_state: Vec::new(),
            turn: None,
            accepting: true,
            closers: Vec::new(),
            drainers: Vec::new(),
            awake: awake.clone(),
            titles: Titler::default(),
            published_at: 0,
        };
        // A run's session, its turns and its model streams keep off the threads of the
        // session the person talks to.
        if subagent {
            background::spawn(actor.run(rx));
        } else {
            tokio::spawn(actor.run(rx));
        }
        SessionHandle {
            id,
            tx,
            awake,
            prompts,
        }
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
                    Some(request) => self.handle(request).await,
                    // Every handle is gone: finish what was accepted, then stop.
                    None => {
                        handles_alive = false;
                        self.accepting = false;
                    }
                },
                _ = sleep_until(self.rest_at()), if self.may_rest() => self.rest(),
                () = self.titles.finished() => self.apply_title(),
                update = next_turn_update(&mut self.turn) => match update {
                    // A turn changing phase (compacting and back) goes through the table.
                    TurnUpdate::Event(Stamped { at, event: SessionEvent::PhaseChanged { phase } }) => {
                        self.published_at = self.published_at.max(at);
                        if let Err(err) = self.set_phase(phase) {
                            tracing::error!(%err, "a turn asked for an illegal phase change");
                        }
                    }
                    TurnUpdate::Event(Stamped { at, event }) => {
                        if let SessionEvent::TurnCompleted { stop, .. }
                        | SessionEvent::TurnFailed { stop, .. } = &event
                        {
                            self.last_stop = Some(*stop);
                        }
                        self.published_at = self.published_at.max(at);
                        self.publish(&event);
                    }
                    TurnUpdate::Ended(ended) => {
                        if let Some(turn) = self.turn.take() {
                            // Inputs that were to join but came after the turn's last batch
                            // start the next turn, in the order they came.
                            for pending in drain_joining(&turn.joining).into_iter().rev() {
                                self.queue.push_front(Queued::Input(pending));
                            }
                        }
                        match *ended {
                            Ok(state) => self.finish_turn(state).await,
                            Err(err) => self.turn_task_lost(&err).await,
                        }
                    }
                },
            }
        }
        for queued in self.queue.drain(..) {
            refuse(queued, || SessionError::Closed);
        }
        // A title still being asked for is best effort: it goes with the session.
        self.titles.abort();
        let closers = std::mem::take(&mut self.closers);
        let drainers = std::mem::take(&mut self.drainers);
        drop(self);
        give_back_unread(requests);
        for reply in closers {
            let _ = reply.send(());
        }
        for (reply, waiting) in drainers {
            let _ = reply.send(waiting);
        }
    }

    async fn handle(&mut self, request: Request) {
        if matches!(
            request,
            Request::Send { .. } | Request::Compact { .. } | Request::Awake
        ) {
            self.active_at = Instant::now();
            if self.phase == Phase::Passivating {
                // Woken during the grace: the session stays up.
                if let Err(err) = self.set_phase(Phase::Ready) {
                    tracing::error!(%err, "could not wake the session");
                }
            }
        }
        match request {
            Request::Send { input, reply } if self.accepting => self.arrive(input, reply).await,
            Request::Send { input, reply } => {
                let _ = reply.send(Err(SessionError::NotTaken(Box::new(input))));
            }
            Request::Subscribe {
                filter,
                backlog,
                reply,
            } => {
                let at = self.position();
                let _ = reply.send(self.subscribers.add(filter, at, backlog));
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
                // Its background jobs go with it (a reset, a switch, tern closing).
                self.deps.jobs.kill_session(&self.id);
                // Whoever would answer a question is leaving: stop as a drain does rather
                // than wait for ever.
                if self.deps.approval == ApprovalMode::Ask
                    && let Some(turn) = &self.turn
                {
                    turn.stop_after_batch.request(TurnStop::Drained);
                }
            }
            Request::Answer {
                call_id,
                answer,
                reply,
            } => {
                let delivered = self
                    .turn
                    .as_ref()
                    .is_some_and(|turn| turn.approvals.deliver(&call_id, answer));
                let _ = reply.send(if delivered {
                    Ok(())
                } else {
                    Err(SessionError::NotWaiting { call_id })
                });
            }
            Request::SetApproval { mode } => {
                if self.deps.approval != mode {
                    let mut deps = (*self.deps).clone();
                    deps.approval = mode;
                    self.deps = Arc::new(deps);
                }
            }
            Request::SetTools { tools } => {
                let mut changed = (*self.deps).clone();
                changed.tools = tools;
                self.deps = Arc::new(changed);
            }
            Request::SetModel { deps } => {
                let mut changed = (*self.deps).clone();
                changed.client = deps.client.clone();
                changed.notes_client = deps.notes_client.clone();
                changed.overrides = deps.overrides.clone();
                self.deps = Arc::new(changed);
            }
            Request::Cancel => {
                if let Some(turn) = &self.turn {
                    turn.cancel.cancel();
                    // Inputs that were to join it were never acknowledged either.
                    for queued in drain_joining(&turn.joining) {
                        refuse(Queued::Input(queued), || SessionError::Cancelled);
                    }
                }
                // Inputs not yet journaled were never acknowledged; tell their senders.
                for queued in self.queue.drain(..) {
                    refuse(queued, || SessionError::Cancelled);
                }
                self.interrupted_note = None;
            }
            Request::Drain { reply, cut } => {
                let waiting = self
                    .queue
                    .iter()
                    .any(|q| matches!(q, Queued::Input(_) | Queued::Interrupting(_)));
                match &self.turn {
                    Some(turn) if cut => turn.stop_after_batch.request_cut(),
                    Some(turn) => turn.stop_after_batch.request(TurnStop::Drained),
                    None => {}
                }
                // A turn whose input said how much it may do goes on so when resumed.
                let approval = self
                    .turn
                    .as_ref()
                    .map(|turn| turn.approval)
                    .filter(|mode| *mode != self.deps.approval);
                self.drainers
                    .push((reply, DrainedTurn { waiting, approval }));
                self.accepting = false;
                for queued in self.queue.drain(..) {
                    refuse(queued, || SessionError::Closed);
                }
            }
            Request::ResumeTurn {
                notice,
                approval,
                started,
            } if self.accepting => {
                self.queue
                    .push_back(Queued::Resume(notice, approval, started));
                self.start_next_turn().await;
            }
            Request::ResumeTurn { .. } => {}
            // Only the idle clock and the phase change, above.
            Request::Awake => {}
            Request::Compact { reply } if self.accepting => {
                self.queue.push_back(Queued::Compact(reply));
                self.start_next_turn().await;
            }
            Request::Compact { reply } => {
                let _ = reply.send(Err(SessionError::Closed));
            }
        }
    }

    /// Routes an input: into the running turn, ahead of the queue (ending an automated
    /// turn), or to the back of the queue.
    async fn arrive(
        &mut self,
        input: UserInput,
        reply: oneshot::Sender<Result<u64, SessionError>>,
    ) {
        let route = match self.turn.as_ref().and_then(|turn| turn.owner.as_ref()) {
            Some(owner) => joining::route(owner, &input),
            None => Route::Wait,
        };
        match (route, &self.turn) {
            (Route::Join, Some(turn)) => match turn.joining.lock() {
                Ok(mut joining) => joining.push_back((input, reply)),
                Err(poisoned) => poisoned.into_inner().push_back((input, reply)),
            },
            (Route::Interrupt, Some(turn)) => {
                turn.stop_after_batch.request(TurnStop::InterruptedByPerson);
                self.interrupted_note = Some(joining::interrupted_note("automation"));
                let after = self
                    .queue
                    .iter()
                    .take_while(|q| matches!(q, Queued::Interrupting(_)))
                    .count();
                self.queue
                    .insert(after, Queued::Interrupting((input, reply)));
            }
            _ => self.queue.push_back(Queued::Input((input, reply))),
        }
        self.start_next_turn().await;
    }

    /// Starts a turn for the oldest queued input (or runs a queued compaction) if the session
    /// is idle.
    async fn start_next_turn(&mut self) {
        while self.phase == Phase::Ready && self.state.is_some() {
            let Some(queued) = self.queue.pop_front() else {
                return;
            };
            let (input, reply) = match queued {
                Queued::Input(pending) | Queued::Interrupting(pending) => pending,
                Queued::Compact(reply) => {
                    self.start_compaction(reply);
                    return;
                }
                Queued::Resume(notice, approval, started) => {
                    let _ = started.send(self.start_resumed_turn(notice, approval));
                    return;
                }
            };
            if let Err(err) = self.set_phase(Phase::Processing) {
                tracing::error!(%err, "could not start a turn");
                let _ = reply.send(Err(err.into()));
                return;
            }
            let Some(mut state) = self.state.take() else {
                return;
            };
            // What the turn needs of the input, taken before the input moves on: its text
            // may be megabytes.
            let (approval, owner) = (input.approval, TurnOwner::of(&input));
            let sender = input.sender.id.clone();
            match journal_input_unsynced(&self.deps, &self.dirs, &mut state, input).await {
                Ok((seq, text, unsynced)) => {
                    // The turn starts while the disk syncs the input: its request goes out
                    // meanwhile. Nothing of it is published, nor the input acknowledged, until
                    // the input is durable (its events wait in its channel for this actor),
                    // and nothing it does is done before (a tool call is journaled durably
                    // first, after the input in the log).
                    self.spawn_turn(state, approval, owner);
                    self.acknowledge(seq, text, sender, unsynced, reply).await;
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

    fn spawn_turn(
        &mut self,
        state: SessionState,
        approval: Option<ApprovalMode>,
        owner: TurnOwner,
    ) {
        let notes = TurnNotes {
            interrupted_automation: self.interrupted_note.take(),
            ..TurnNotes::default()
        };
        // An input that says how much its turn may do without asking gets a turn that does so.
        let deps = match approval {
            Some(mode) if mode != self.deps.approval => {
                let mut deps = (*self.deps).clone();
                deps.approval = mode;
                Arc::new(deps)
            }
            _ => self.deps.clone(),
        };
        let audience = owner.audience;
        self.spawn_turn_for(deps, state, audience, owner, notes);
    }

    fn spawn_turn_for(
        &mut self,
        deps: Arc<SessionDeps>,
        mut state: SessionState,
        audience: Audience,
        owner: TurnOwner,
        notes: TurnNotes,
    ) {
        // What was journaled before the turn (its resumption) is before any subscriber's
        // position from now on: the replay holds it.
        self.published_at = self.published_at.max(state.last_seq);
        let approval = deps.approval;
        let (events, receiver) = EventTx::channel(state.head.clone());
        let cancel = CancellationToken::new();
        let stop_after_batch = StopAfterBatch::default();
        let joining: Joining = Joining::default();
        let dirs = self.dirs.clone();
        let turn_cancel = cancel.clone();
        let turn_stop = stop_after_batch.clone();
        let turn_joining = joining.clone();
        let approvals = ApprovalSlot::default();
        let turn_approvals = approvals.clone();
        let automated = owner.automated;
        let run = async move {
            let deps = with_mcp_tools(deps, &state.project_dir).await;
            let turn = Turn {
                deps: &deps,
                dirs: &dirs,
                audience,
                notes,
                cancel: turn_cancel,
                stop_after_batch: turn_stop,
                joining: turn_joining,
                events,
                approvals: turn_approvals,
            };
            turn.run(&mut state).await;
            state
        };
        // A turn no person waits for at a keyboard (a webhook's, a reminder's) runs beside
        // the subagent runs: it never queues ahead of a person's turn. A person's runs on
        // threads of its own at tern's priority. Neither holds up the acknowledgement of an
        // input, which stays with the actor.
        let task = match automated {
            true => background::spawn_joined(run),
            false => background::spawn_turn(run),
        };
        self.turn = Some(RunningTurn {
            cancel,
            stop_after_batch,
            owner: Some(owner),
            joining,
            approvals,
            approval,
            events: receiver,
            task,
        });
    }

    /// Starts a turn from the history as it stands, answering whoever sent the latest input.
    /// Takes a drained turn up again; whether it did (its resumption journaled).
    fn start_resumed_turn(&mut self, notice: String, approval: Option<ApprovalMode>) -> bool {
        let Some(mut state) = self.state.take() else {
            return false;
        };
        let Some((sender, audience, kind)) = state.last_input.clone() else {
            self.state = Some(state);
            return false;
        };
        if let Err(err) = self.set_phase(Phase::Processing) {
            tracing::error!(%err, "could not resume a turn");
            self.state = Some(state);
            return false;
        }
        let every = self.deps.settings.snapshot_every;
        let marker = [JournalEvent::TurnResumed {
            notice: notice.clone(),
        }];
        if let Err(err) = snapshot::commit(&self.deps.store, every, &mut state, &marker) {
            tracing::error!(%err, "could not journal a resumed turn");
            self.state = Some(state);
            let _ = self.set_phase(Phase::Ready);
            return false;
        }
        let owner = TurnOwner {
            sender_id: sender.id.clone(),
            audience,
            automated: kind.is_automation() || sender.automated,
        };
        let notes = TurnNotes {
            restart_notice: Some(notice),
            ..TurnNotes::default()
        };
        // The approval mode the stopped turn had, when it was not the session's own.
        let deps = match approval {
            Some(mode) if mode != self.deps.approval => {
                let mut deps = (*self.deps).clone();
                deps.approval = mode;
                Arc::new(deps)
            }
            _ => self.deps.clone(),
        };
        self.spawn_turn_for(deps, state, audience, owner, notes);
        true
    }

    /// Runs a compaction on demand, in phase Compacting.
    fn start_compaction(&mut self, reply: oneshot::Sender<Result<bool, SessionError>>) {
        if let Err(err) = self.set_phase(Phase::Compacting) {
            let _ = reply.send(Err(err.into()));
            return;
        }
        let Some(mut state) = self.state.take() else {
            let _ = reply.send(Err(SessionError::Closed));
            return;
        };
        let (events, receiver) = EventTx::channel(state.head.clone());
        let cancel = CancellationToken::new();
        let deps = self.deps.clone();
        let dirs = self.dirs.clone();
        let token = cancel.clone();
        // A model call like a turn's, and run where a person's turns run.
        let task = background::spawn_turn(async move {
            let deps = with_mcp_tools(deps, &state.project_dir).await;
            let turn = Turn {
                deps: &deps,
                dirs: &dirs,
                audience: Audience::Personal,
                notes: TurnNotes::default(),
                cancel: token,
                stop_after_batch: StopAfterBatch::default(),
                joining: Joining::default(),
                events,
                approvals: ApprovalSlot::default(),
            };
            let outcome = turn.compact_on_demand(&mut state).await;
            let _ = reply.send(outcome.map_err(SessionError::Turn));
            state
        });
        self.turn = Some(RunningTurn {
            cancel,
            stop_after_batch: StopAfterBatch::default(),
            owner: None,
            joining: Joining::default(),
            approvals: ApprovalSlot::default(),
            approval: self.deps.approval,
            events: receiver,
            task,
        });
    }

    /// Announces and acknowledges the input a turn started for, once it is durable. If it
    /// cannot be made durable (the log's sync and the database's own commit both failed),
    /// the turn is cancelled and its sender told; its request may have gone out by then, and
    /// the input, stored, may yet become durable with a later commit.
    async fn acknowledge(
        &mut self,
        seq: u64,
        text: String,
        sender: String,
        unsynced: Unsynced,
        reply: oneshot::Sender<Result<u64, SessionError>>,
    ) {
        match snapshot::sync_awaited(&self.deps.store, unsynced).await {
            Ok(()) => {
                self.publish(&SessionEvent::InputAccepted { seq, text, sender });
                let _ = reply.send(Ok(seq));
            }
            Err(err) => {
                tracing::error!(%err, "an input could not be made durable");
                if let Some(turn) = &self.turn {
                    turn.cancel.cancel();
                }
                let _ = reply.send(Err(err.into()));
            }
        }
    }

    async fn finish_turn(&mut self, state: SessionState) {
        self.active_at = Instant::now();
        let stop = self.last_stop.take();
        // The note is for the turn after one a person's message really ended.
        if stop != Some(TurnStop::InterruptedByPerson) {
            self.interrupted_note = None;
        }
        for reply in self.waiting_for_state.drain(..) {
            let _ = reply.send(state.clone());
        }
        self.state = Some(state);
        self.apply_title();
        if let Some(state) = &self.state
            && self.accepting
        {
            self.titles.start_after(&self.deps, state, stop);
        }
        if let Err(err) = self.set_phase(Phase::Ready) {
            tracing::error!(%err, "could not end a turn");
        }
        self.start_next_turn().await;
    }

    /// Journals the title the title call found, if there is one and the actor holds the
    /// state (otherwise it waits for the running turn to end).
    fn apply_title(&mut self) {
        let Some(state) = self.state.as_mut() else {
            return;
        };
        if let Some(event) = self.titles.journal(&self.deps, state) {
            self.publish(&event);
        }
    }

    /// Tells the subscribers and the session log.
    fn publish(&mut self, event: &SessionEvent) {
        let at = self.position();
        self.log.record(event);
        self.subscribers.publish(at, event);
    }

    /// The journal position events are published at: the state's while the actor holds it,
    /// else the latest a running turn's events carried. Where the actor works on a state it
    /// took out (accepting an input, a recovery), it moves `published_at` itself first.
    fn position(&mut self) -> u64 {
        if let Some(state) = &self.state {
            self.published_at = self.published_at.max(state.last_seq);
        }
        self.published_at
    }

    fn set_phase(&mut self, to: Phase) -> Result<(), IllegalTransition> {
        self.phase = self.phase.become_(to)?;
        self.publish(&SessionEvent::PhaseChanged { phase: to });
        Ok(())
    }
}

/// The session's dependencies with the tools of its project's MCP servers beside its own,
/// for one turn: the servers that run by now (those still starting are waited for at most
/// `[mcp] startup_timeout`, and join a later turn if slower).
pub(super) async fn with_mcp_tools(
    deps: Arc<SessionDeps>,
    project_dir: &std::path::Path,
) -> Arc<SessionDeps> {
    let Some(hub) = &deps.mcp else {
        return deps;
    };
    let tools = hub.tools_for(project_dir).await;
    if tools.is_empty() {
        return deps;
    }
    let mut own = (*deps).clone();
    for tool in tools {
        // A tool of tern's own keeps its name.
        if own.tools.get(tool.name()).is_none() {
            own.tools.register(tool);
        }
    }
    Arc::new(own)
}

/// Takes every input waiting to join a turn.
fn drain_joining(joining: &Joining) -> Vec<PendingInput> {
    match joining.lock() {
        Ok(mut queue) => queue.drain(..).collect(),
        Err(poisoned) => poisoned.into_inner().drain(..).collect(),
    }
}

/// Answers a queued request that will not run with `error`.
fn refuse(queued: Queued, error: impl Fn() -> SessionError) {
    match queued {
        Queued::Input((_, reply)) | Queued::Interrupting((_, reply)) => {
            let _ = reply.send(Err(error()));
        }
        Queued::Compact(reply) => {
            let _ = reply.send(Err(error()));
        }
        Queued::Resume(..) => {}
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
        None => TurnUpdate::Ended(Box::new((&mut turn.task).await)),
    }
}
