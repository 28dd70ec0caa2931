//! One turn: model call, tool batch, results, model call … until the model ends the turn, the
//! loop guard or a person ends it quietly, or something fails. Every step is journaled before
//! the state moves on. Before each model call the history is compacted when it nears the
//! context window, never cutting the turn itself, and a turn too large for the window fails
//! naming it; a call the window overflows is compacted and made again once. Between batches
//! the same person's new messages join the turn.

use super::asking::ApprovalSlot;
use super::compacting::{self, Compaction};
use super::compaction::{self, Budget};
use super::deps::SessionDeps;
use super::envelope::SessionDirs;
use super::events::{EventTx, SessionEvent};
use super::fit::Fit;
use super::input::{SessionError, UserInput, journal_input};
use super::layers;
use super::loop_guard::{self, LoopGuard};
use super::phase::Phase;
use super::snapshot;
use super::state::{SessionState, oversize_placeholder};
use crate::context::CurrentTime;
use crate::domain::{
    Audience, ContentBlock, ErrorCategory, Message, Role, ToolCall, ToolResult, TurnStop, Usage,
};
use crate::llm::{LlmError, StreamEvent, StreamObserver, ToolSpec};
use crate::prompt::{PromptSize, TurnNotes};
use crate::store::JournalEvent;
use crate::tools::ToolContext;
use crate::tools::agents::AgentContext;
use crate::tools::jobs::JobContext;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// An input waiting to be journaled, and who to tell its journal position.
pub type PendingInput = (UserInput, oneshot::Sender<Result<u64, SessionError>>);

/// Inputs from the turn's own person that join it at the next batch boundary; the actor
/// fills it, the turn drains it, and whatever is left when the turn ends starts the next one.
pub type Joining = Arc<Mutex<VecDeque<PendingInput>>>;

/// How the loop guard's nudges open, in the history.
pub const GUARD_NOTE: &str = "[tern, on the tool calls]";

/// A running turn's view of the session: its dependencies and where its events go.
pub struct Turn<'a> {
    pub deps: &'a SessionDeps,
    pub dirs: &'a SessionDirs,
    pub audience: Audience,
    /// Layers of this turn's nudge beyond the working context (the interrupted-automation
    /// note, …).
    pub notes: TurnNotes,
    pub cancel: CancellationToken,
    /// Set when the turn should end after its current tool batch: a trusted person wrote
    /// during this automated turn, or tern is stopping.
    pub stop_after_batch: StopAfterBatch,
    pub joining: Joining,
    pub events: EventTx,
    /// Where a call waiting for a person's answer receives it.
    pub approvals: ApprovalSlot,
}

/// A request, shared with a running turn, to end it after its current tool batch, and why.
#[derive(Debug, Clone, Default)]
pub struct StopAfterBatch {
    code: Arc<AtomicU8>,
    /// Fires on a drain: a call waiting for a person is not run, since tern is stopping.
    stopping: CancellationToken,
    /// Fires on a handover: a model call in flight is let go, to be asked again by the
    /// process that takes the session over.
    cut: CancellationToken,
}

impl StopAfterBatch {
    const PERSON: u8 = 1;
    const DRAIN: u8 = 2;

    /// Asks for the stop; a drain outranks a person's interruption.
    pub fn request(&self, why: TurnStop) {
        let code = match why {
            TurnStop::Drained => Self::DRAIN,
            _ => Self::PERSON,
        };
        self.code.fetch_max(code, Ordering::SeqCst);
        // After the code, so a call woken by it finds the turn's stop already set.
        if code == Self::DRAIN {
            self.stopping.cancel();
        }
    }

    /// Asks for a drain that does not wait for a model call in flight: it ends the turn
    /// now, its reply unasked, as if the drain had come just before the call.
    pub fn request_cut(&self) {
        self.request(TurnStop::Drained);
        self.cut.cancel();
    }

    /// Returns once a model call in flight is to be let go.
    async fn cut(&self) {
        self.cut.cancelled().await;
    }

    /// Returns once tern is stopping (a drain was asked for).
    pub async fn stopping(&self) {
        self.stopping.cancelled().await;
    }

    fn requested(&self) -> Option<TurnStop> {
        match self.code.load(Ordering::SeqCst) {
            Self::DRAIN => Some(TurnStop::Drained),
            Self::PERSON => Some(TurnStop::InterruptedByPerson),
            _ => None,
        }
    }
}

/// How a turn's rounds ended without an error.
struct Ended {
    text: String,
    stop: TurnStop,
    /// The last reply's records, journaled in one commit with the turn's end, and the usage
    /// event told once they are.
    last_reply: Option<(Vec<JournalEvent>, SessionEvent)>,
}

impl Turn<'_> {
    /// Runs the turn to its end, journaling as it goes. The state always matches the journal:
    /// an event is applied only after it was appended.
    pub async fn run(&self, state: &mut SessionState) {
        let mut usage = Usage::default();
        let outcome = self.rounds(state, &mut usage).await;
        let mut last_usage = None;
        let (journal, event) = match outcome {
            Ok(Ended {
                text,
                stop,
                last_reply,
            }) => {
                let mut journal = Vec::new();
                if let Some((records, usage_event)) = last_reply {
                    journal = records;
                    last_usage = Some(usage_event);
                }
                journal.push(JournalEvent::TurnCompleted { stop });
                (journal, SessionEvent::TurnCompleted { text, usage, stop })
            }
            Err(failure) => {
                let stop = failure.turn_stop();
                let journal = JournalEvent::TurnFailed {
                    category: failure.category,
                    message: failure.message.clone(),
                    stop: Some(stop),
                };
                let event = SessionEvent::TurnFailed {
                    category: failure.category,
                    message: failure.message,
                    stop,
                };
                (vec![journal], event)
            }
        };
        match self.record_soon(state, journal) {
            Ok(()) => {
                if let Some(usage_event) = last_usage {
                    self.emit(usage_event);
                }
                self.emit(event);
            }
            // The last reply went with the end: not journaled, it is no answer. The turn
            // fails as a storage failure does, journaled if the journal takes it now.
            Err(failure) if last_usage.is_some() => {
                tracing::error!(message = %failure.message, "could not journal a turn's last reply");
                let stop = failure.turn_stop();
                let end = JournalEvent::TurnFailed {
                    category: failure.category,
                    message: failure.message.clone(),
                    stop: Some(stop),
                };
                if let Err(err) = self.record_soon(state, vec![end]) {
                    tracing::error!(message = %err.message, "could not journal the end of a turn");
                }
                self.emit(SessionEvent::TurnFailed {
                    category: failure.category,
                    message: failure.message,
                    stop,
                });
            }
            Err(err) => {
                tracing::error!(message = %err.message, "could not journal the end of a turn");
                self.emit(event);
            }
        }
    }

    /// The subagent runs this turn's calls may start (a subagent's may start none, and only
    /// have their writes checked against the other runs'); `None` where the session service
    /// runs none.
    fn agent_context(&self, state: &SessionState) -> Option<AgentContext> {
        let runs = self.deps.agents.get().and_then(std::sync::Weak::upgrade)?;
        Some(AgentContext {
            runs,
            as_run: state.subagent.as_ref().map(|role| role.run_id.clone()),
            parent: state.id.clone(),
            audience: self.audience,
            recent_files: state.recent_files.iter().cloned().collect(),
            approval: self.deps.approval,
        })
    }

    async fn rounds(&self, state: &mut SessionState, usage: &mut Usage) -> Result<Ended, LlmError> {
        // The model and its window may still be on their way from the server (a bounded
        // wait, begun at start): the first call, the prompt's size and the compaction check
        // need them.
        self.deps.client.primary.ready().await;
        let mut tools = layers::tool_specs(self.deps, self.audience);
        let temp_dir = self.dirs.prepare_temp_dir();
        let time = CurrentTime::now();
        let setup = layers::prepare_turn(
            self.deps,
            self.dirs,
            &temp_dir,
            state,
            self.audience,
            &self.notes,
            time,
        )
        .await;
        let told: Vec<u64> = setup
            .iter()
            .filter_map(|event| match event {
                JournalEvent::JobEnded { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        // Before any side effect: the next durable commit (the reply's calls, or the turn's
        // end) makes it durable.
        self.record_soon(state, setup)?;
        // The jobs whose ends this turn tells are told for good.
        self.deps.jobs.mark_told(&state.id, &told);
        let mut ctx = ToolContext {
            project_dir: state.project_dir.clone(),
            cwd: state.cwd.clone(),
            temp_dir: temp_dir.clone(),
            // The session's own folder (artifacts, logs) and its scratch space, as tier B
            // tells the model.
            readable_dirs: vec![self.dirs.session_dir.clone(), temp_dir],
            tool_timeout: self.deps.settings.tool_execution_timeout,
            child_env: self.deps.child_env.clone(),
            spool: None,
            agents: self.agent_context(state),
            // A subagent starts none: they would outlive its run, out of its parent's reach.
            jobs: state.subagent.is_none().then(|| JobContext {
                jobs: self.deps.jobs.clone(),
                session: state.id.clone(),
                log_dir: self.dirs.log_dir.join(super::JOB_LOGS),
            }),
            repo_maps: Some(crate::context::repo_map::cache::dir_in(&self.deps.data_dir)),
        };
        let max_rounds = self.deps.settings.max_rounds;
        let mut guard = LoopGuard::new(max_rounds);
        let mut overflow_compacted = false;
        // Where this turn starts: no compaction cuts anything from here on.
        let mut turn_start = compaction::turn_start(&state.messages);
        // The window to fit (the route's, or less once the server showed a smaller one by
        // filling up), and how the server's counts compare with the estimates.
        let mut fit = Fit::new(self.deps.client.primary.context_window());
        loop {
            if self.needs_compaction(state, &tools, &fit) {
                self.compact(state, &tools, &fit, &mut turn_start).await?;
            }
            self.check_fits(state, &tools, &fit)?;
            let sent = self.overhead(state, &tools) + compaction::estimate_tokens(&state.messages);
            let route = &self.deps.client.primary;
            let request = layers::request(state, self.audience, tools.clone(), route);
            let mut observer = Forward::new(&self.events);
            let asked = tokio::select! {
                asked = self.deps.client.complete(request, &mut observer, &self.cancel) => asked,
                // Handed over: the next owner asks again; nothing of this call was journaled.
                () = self.stop_after_batch.cut() => {
                    return Ok(Ended {
                        text: String::new(),
                        stop: TurnStop::Drained,
                        last_reply: None,
                    });
                }
            };
            let reply = match asked {
                Ok(reply) => reply,
                // Too big for the model after all: compact and try once more.
                Err(err)
                    if err.category == ErrorCategory::ContextOverflow && !overflow_compacted =>
                {
                    overflow_compacted = true;
                    tracing::warn!(%err, "the provider says the context is full; compacting");
                    match err.window_filled_at {
                        // The request fitted; the reply filled the window the server has.
                        Some(filled) => {
                            fit.filled_at(filled);
                            // A window too small for the full tool descriptions gets the
                            // small window's tools from here on, so the retry has room.
                            let size = PromptSize::for_window(fit.window);
                            if size.is_compact() && !layers::prompt_size(self.deps).is_compact() {
                                tools = layers::tool_specs_for(self.deps, self.audience, size);
                            }
                        }
                        None => fit.overflowed(sent),
                    }
                    if !self.compact(state, &tools, &fit, &mut turn_start).await? {
                        return Err(overflow_unfixable(err, fit.window));
                    }
                    // A reply the window cut off mid-stream was shown as it came: the call
                    // made again voids it, as a retry by the client would.
                    observer.retry(observer.attempt + 1, Duration::ZERO, &err);
                    continue;
                }
                Err(err) if err.category == ErrorCategory::ContextOverflow => {
                    return Err(overflow_unfixable(err, fit.window));
                }
                Err(err) => {
                    // What the person saw before interrupting stays, marked by the turn's end.
                    if let Some(text) = &err.interrupted_text {
                        let partial = JournalEvent::AssistantMessage {
                            model: route.model(),
                            content: vec![ContentBlock::Text { text: text.clone() }],
                        };
                        self.record(state, vec![partial])?;
                    }
                    return Err(err);
                }
            };
            // The next call is another request: it may be compacted and retried in its turn.
            overflow_compacted = false;
            fit.measured(sent, reply.usage.context_tokens());
            usage.add(&reply.usage);
            // Told once journaled, as every event that stands for a record is.
            let usage_event = SessionEvent::Usage {
                model: reply.model.clone(),
                usage: reply.usage,
            };
            let mut events = vec![JournalEvent::Usage {
                model: reply.model.clone(),
                usage: reply.usage,
            }];

            // The whole text is what the turn answered, even when the history keeps only a
            // placeholder for it.
            let reply_message = Message {
                role: Role::Assistant,
                content: reply.content,
            };
            let text = reply_message.text();
            let calls: Vec<ToolCall> = reply_message.tool_calls().cloned().collect();
            let content = self.fit_content(state, reply_message.content);
            if !content.is_empty() {
                events.push(JournalEvent::AssistantMessage {
                    model: reply.model,
                    content,
                });
            }
            if calls.is_empty() {
                // The reply and its usage go in one commit with the turn's end (journaled by
                // `run`), which does not wait for the disk: the flush after it does.
                return Ok(Ended {
                    text,
                    stop: TurnStop::Completed,
                    last_reply: Some((events, usage_event)),
                });
            }
            self.record(state, events)?;
            self.emit(usage_event);
            for call in &calls {
                self.emit(SessionEvent::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                });
            }

            let plan = guard.plan(&calls);
            if let Some(cause) = plan.stop {
                // The guard ends the turn quietly: the model's text stands, the calls it
                // asked for get a result saying they did not run.
                self.answer_unrun(state, &calls, &loop_guard::not_run(cause, max_rounds))?;
                let stop = TurnStop::LoopGuard {
                    cause: Some(cause),
                    rounds: guard.rounds(),
                };
                return Ok(Ended {
                    text,
                    stop,
                    last_reply: None,
                });
            }
            let outcomes = self
                .run_calls(
                    state,
                    &calls,
                    &plan.verdicts,
                    &reply.malformed_tool_args,
                    &mut ctx,
                )
                .await?;
            if let Some(nudge) = guard.record(&outcomes) {
                let message = JournalEvent::Message {
                    message: Message::user_text(format!("{GUARD_NOTE} {nudge}")),
                };
                self.record(state, vec![message])?;
            }
            if self.cancel.is_cancelled() {
                return Err(LlmError::new(
                    ErrorCategory::Cancelled,
                    "the turn was cancelled",
                ));
            }
            if let Some(stop) = self.stop_after_batch.requested() {
                return Ok(Ended {
                    text,
                    stop,
                    last_reply: None,
                });
            }
            if self.take_joining(state)? {
                guard.reset();
            }
        }
    }

    /// Answers `calls` with `why` without running them, so every call keeps a result.
    fn answer_unrun(
        &self,
        state: &mut SessionState,
        calls: &[ToolCall],
        why: &str,
    ) -> Result<(), LlmError> {
        let results: Vec<ToolResult> = calls
            .iter()
            .map(|call| ToolResult::error(call.id.clone(), why))
            .collect();
        for (call, result) in calls.iter().zip(&results) {
            self.emit(SessionEvent::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: result.content.clone(),
                is_error: true,
                duration_ms: None,
            });
        }
        let shortened = self.shortened_arguments(calls, &results);
        let answered = JournalEvent::results_not_timed(results);
        self.record(state, [answered].into_iter().chain(shortened).collect())
    }

    /// Journals the inputs that joined since the last batch, acknowledging each; returns
    /// whether there were any.
    fn take_joining(&self, state: &mut SessionState) -> Result<bool, LlmError> {
        let joined: Vec<PendingInput> = match self.joining.lock() {
            Ok(mut queue) => queue.drain(..).collect(),
            Err(poisoned) => poisoned.into_inner().drain(..).collect(),
        };
        let any = !joined.is_empty();
        let mut joined = joined.into_iter();
        while let Some((input, reply)) = joined.next() {
            let sender = input.sender.id.clone();
            match journal_input(self.deps, self.dirs, state, input) {
                Ok((seq, text)) => {
                    self.emit(SessionEvent::InputAccepted { seq, text, sender });
                    let _ = reply.send(Ok(seq));
                }
                Err(err) => {
                    let storage = matches!(err, SessionError::Store(_));
                    let message = err.to_string();
                    let _ = reply.send(Err(err));
                    if storage {
                        // The rest go back; the actor gives them a turn of their own.
                        let mut queue = self.joining.lock().unwrap_or_else(PoisonError::into_inner);
                        for (i, pending) in joined.enumerate() {
                            queue.insert(i, pending);
                        }
                        return Err(storage_error(&message));
                    }
                }
            }
        }
        Ok(any)
    }

    /// Whether the next request would pass the compaction threshold of the window: the last
    /// call's input tokens plus an estimate of what was added since, as the server counts.
    fn needs_compaction(&self, state: &SessionState, tools: &[ToolSpec], fit: &Fit) -> bool {
        let threshold = self.deps.settings.compaction_threshold * fit.window as f64;
        fit.next_request(state, self.overhead(state, tools)) as f64 > threshold
    }

    /// Fails the turn when its next request cannot leave even a short reply room in the
    /// window after compacting: the turn being answered, with its older tool output cleared
    /// and its latest shortened, is larger than the window allows. A request that leaves
    /// less than the whole output limit is still sent: most replies are short, and one the
    /// full window cuts off is compacted for and made again. Nothing is lost: the history
    /// stays, and the message names the window.
    fn check_fits(
        &self,
        state: &SessionState,
        tools: &[ToolSpec],
        fit: &Fit,
    ) -> Result<(), LlmError> {
        let window = fit.window;
        let budget = self.budget(state, tools, window);
        let needed = fit.next_request(state, budget.overhead);
        let short_reply = budget.reply.min(window / 16);
        let room = window.saturating_sub(short_reply);
        if needed <= room {
            return Ok(());
        }
        Err(LlmError::new(
            ErrorCategory::ContextOverflow,
            format!(
                "this turn no longer fits the context window of {window} tokens: its request \
                 needs about {needed} tokens with older tool output cleared, and the reply \
                 needs room beyond {room}; nothing was lost; ask for less at a time (a \
                 narrower read or search, a command with shorter output), or start a new \
                 session, or use a model with a larger context_window"
            ),
        ))
    }

    /// Tokens every request spends before the history: the system blocks and the tools.
    fn overhead(&self, state: &SessionState, tools: &[ToolSpec]) -> u64 {
        let system = [&state.system_prompts, &state.static_contexts]
            .into_iter()
            .filter_map(|tier| tier.get(&self.audience))
            .map(String::as_str);
        compaction::prefix_tokens(system, tools)
    }

    /// What a compaction for `window` works to.
    fn budget(&self, state: &SessionState, tools: &[ToolSpec], window: u64) -> Budget {
        Budget {
            window,
            overhead: self.overhead(state, tools),
            reply: u64::from(self.deps.client.primary.max_output_tokens()),
        }
    }

    /// Compacts the history within the turn (phase Compacting meanwhile), keeping the turn
    /// from `turn_start` on and moving it to where that lands, and renders tier B again.
    /// Returns whether anything changed.
    async fn compact(
        &self,
        state: &mut SessionState,
        tools: &[ToolSpec],
        fit: &Fit,
        turn_start: &mut Option<usize>,
    ) -> Result<bool, LlmError> {
        self.emit(SessionEvent::PhaseChanged {
            phase: Phase::Compacting,
        });
        // Compaction plans in estimated tokens: the window as the estimates see it.
        let window = fit.estimated_window();
        let compacted = self
            .compact_history(state, tools, window, *turn_start)
            .await;
        self.emit(SessionEvent::PhaseChanged {
            phase: Phase::Processing,
        });
        match compacted? {
            Some(start) => {
                *turn_start = start;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// A compaction on its own (`/compact`): the actor holds phase Compacting meanwhile.
    /// Between turns nothing is being answered, so nothing is kept for a turn's sake.
    pub async fn compact_on_demand(&self, state: &mut SessionState) -> Result<bool, LlmError> {
        // The window decides the cut; the server may still be saying what it is.
        self.deps.client.primary.ready().await;
        let tools = layers::tool_specs(self.deps, self.audience);
        let window = self.deps.client.primary.context_window();
        let compacted = self.compact_history(state, &tools, window, None).await?;
        Ok(compacted.is_some())
    }

    /// Runs a compaction; `Some` with where the turn now starts when it changed the history.
    async fn compact_history(
        &self,
        state: &mut SessionState,
        tools: &[ToolSpec],
        window: u64,
        turn_start: Option<usize>,
    ) -> Result<Option<Option<usize>>, LlmError> {
        let budget = self.budget(state, tools, window);
        match compacting::compact(self.deps, state, budget, turn_start, &self.cancel).await {
            Some(compaction) => {
                let start = compaction.turn_start;
                self.apply_compaction(state, compaction)?;
                Ok(Some(start))
            }
            None => Ok(None),
        }
    }

    fn apply_compaction(
        &self,
        state: &mut SessionState,
        compaction: Compaction,
    ) -> Result<(), LlmError> {
        tracing::info!(
            before = compaction.messages_before,
            after = compaction.messages_after,
            tokens_before = compaction.tokens_before,
            tokens_after = compaction.tokens_after,
            work_us = compaction.work.as_micros() as u64,
            "compacted"
        );
        self.record(state, compaction.events)?;
        // Tier B is rendered again right after a compaction.
        let temp_dir = self.dirs.prepare_temp_dir();
        let static_context =
            layers::static_context_event(self.deps, self.dirs, &temp_dir, state, self.audience);
        self.record(state, vec![static_context])?;
        self.emit(SessionEvent::Compacted {
            messages_before: compaction.messages_before,
            messages_after: compaction.messages_after,
            tokens_before: compaction.tokens_before,
            tokens_after: compaction.tokens_after,
            results_cleared: compaction.results_cleared,
            notes: compaction.notes,
            work_micros: compaction.work.as_micros() as u64,
        });
        Ok(())
    }

    /// Appends `events` durably in one commit, then applies them.
    pub(super) fn record(
        &self,
        state: &mut SessionState,
        events: Vec<JournalEvent>,
    ) -> Result<(), LlmError> {
        if events.is_empty() {
            return Ok(());
        }
        let every = self.deps.settings.snapshot_every;
        snapshot::commit(&self.deps.store, every, state, &events)
            .map_err(|err| storage_error(&err.to_string()))?;
        Ok(())
    }

    /// [`Turn::record`] without waiting for the disk (see [`snapshot::commit_soon`]).
    fn record_soon(
        &self,
        state: &mut SessionState,
        events: Vec<JournalEvent>,
    ) -> Result<(), LlmError> {
        let every = self.deps.settings.snapshot_every;
        snapshot::commit_soon(&self.deps.store, every, state, &events)
            .map_err(|err| storage_error(&err.to_string()))?;
        Ok(())
    }

    pub(super) fn emit(&self, event: SessionEvent) {
        self.events.send(event);
    }

    /// Replaces oversized text blocks of an assistant message by placeholders.
    fn fit_content(&self, state: &SessionState, content: Vec<ContentBlock>) -> Vec<ContentBlock> {
        content
            .into_iter()
            .enumerate()
            .map(|(i, block)| match block {
                ContentBlock::Text { text } => ContentBlock::Text {
                    text: self.fit_text(&format!("reply-{}-{i}.txt", state.messages.len()), text),
                },
                other => other,
            })
            .collect()
    }

    /// Keeps `text` if it is within the message size limit; otherwise saves it as an artifact
    /// and returns a placeholder naming its size and where it went.
    pub fn fit_text(&self, name: &str, text: String) -> String {
        let limit = self.deps.settings.max_message_bytes;
        if text.len() <= limit {
            return text;
        }
        let saved = self.dirs.save_artifact(name, &text);
        oversize_placeholder(text.len(), limit, saved.as_deref())
    }
}

fn storage_error(err: &str) -> LlmError {
    LlmError::new(
        ErrorCategory::Storage,
        format!(
            "the session journal could not be written, so the turn stopped: {err}. Some of \
             this turn's actions may already have run (files written, commands executed) \
             without being recorded; check the project before repeating them"
        ),
    )
}

/// The error for a request that is still too big for a `window`-token context window after
/// compacting.
fn overflow_unfixable(err: LlmError, window: u64) -> LlmError {
    err.with_hint(&format!(
        "compacting the conversation did not make it fit the context window of {window} \
         tokens; the session is intact: send a shorter message, or start a new session"
    ))
}

/// Passes streamed model output on to the session's subscribers, counting what the current
/// attempt sent so that the event voiding it can say how much to drop.
struct Forward<'a> {
    events: &'a EventTx,
    /// The attempt now streaming, as the client numbers them on its route.
    attempt: u32,
    /// Characters of the text and thinking deltas sent since the attempt began.
    text_chars: u64,
    thinking_chars: u64,
}

impl<'a> Forward<'a> {
    fn new(events: &'a EventTx) -> Self {
        Self {
            events,
            attempt: 1,
            text_chars: 0,
            thinking_chars: 0,
        }
    }

    fn send(&self, event: SessionEvent) {
        self.events.send(event);
    }

    /// Starts attempt `attempt` after `error`: the `Retry` event voids what the one before
    /// streamed. Also used by the turn when it repeats a call itself (after compacting).
    fn retry(&mut self, attempt: u32, delay: Duration, error: &LlmError) {
        let (discarded_chars, discarded_thinking_chars) = self.restart();
        self.send(SessionEvent::Retry {
            attempt,
            delay,
            category: error.category,
            message: error.message.clone(),
            discarded_chars,
            discarded_thinking_chars,
        });
        self.attempt = attempt;
    }

    /// The text and thinking characters the attempt sent, counting from zero again.
    fn restart(&mut self) -> (u64, u64) {
        (
            std::mem::take(&mut self.text_chars),
            std::mem::take(&mut self.thinking_chars),
        )
    }
}

impl StreamObserver for Forward<'_> {
    fn on_event(&mut self, event: &StreamEvent) {
        // Counted as sent, so the count matches what subscribers received.
        let event = match event {
            StreamEvent::TextDelta(text) => {
                self.text_chars += text.chars().count() as u64;
                SessionEvent::TextDelta { text: text.clone() }
            }
            StreamEvent::ThinkingDelta(text) => {
                self.thinking_chars += text.chars().count() as u64;
                SessionEvent::ThinkingDelta { text: text.clone() }
            }
            _ => return,
        };
        self.send(event);
    }

    fn on_retry(&mut self, attempt: u32, delay: Duration, error: &LlmError) {
        self.retry(attempt, delay, error);
    }

    fn on_text_read_as_calls(&mut self) {
        let discarded_chars = std::mem::take(&mut self.text_chars);
        self.send(SessionEvent::TextReadAsCalls { discarded_chars });
    }

    fn on_fallback(&mut self, model: &str, error: &LlmError) {
        let (discarded_chars, discarded_thinking_chars) = self.restart();
        self.send(SessionEvent::Fallback {
            model: model.to_owned(),
            message: error.to_string(),
            discarded_chars,
            discarded_thinking_chars,
        });
        self.attempt = 1;
    }
}
