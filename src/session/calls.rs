//! The tool calls of one round: the loop guard's verdicts, the batch, and the results
//! journaled in call order as they become final. When a call waits for a person, the results
//! before it are journaled (and shown) first, so the person sees them while deciding and a
//! crash meanwhile loses none of them; the rest follow when the batch ends.

use super::asking::Asker;
use super::batch::{BatchEnv, CallOutcome, run_batch};
use super::events::SessionEvent;
use super::loop_guard::{Outcome, Verdict};
use super::state::SessionState;
use super::turn::Turn;
use crate::domain::{ToolCall, ToolResult};
use crate::llm::LlmError;
use crate::store::JournalEvent;
use crate::tools::{ToolContext, ToolEffect};
use std::collections::BTreeMap;

impl Turn<'_> {
    /// Runs the calls the guard lets through as one batch and answers the refused ones with
    /// their correction, journaling the results (and the files they touched) in call order.
    /// Returns how each call turned out, for the guard.
    pub(super) async fn run_calls(
        &self,
        state: &mut SessionState,
        calls: &[ToolCall],
        verdicts: &[Verdict],
        malformed: &BTreeMap<String, String>,
        ctx: &mut ToolContext,
    ) -> Result<Vec<Outcome>, LlmError> {
        let allowed: Vec<ToolCall> = calls
            .iter()
            .zip(verdicts)
            .filter(|(_, verdict)| matches!(verdict, Verdict::Run))
            .map(|(call, _)| call.clone())
            .collect();
        let env = BatchEnv {
            tools: &self.deps.tools,
            audience: self.audience,
            approval: self.deps.approval,
            malformed,
            spool_dir: Some(&self.dirs.spool_dir),
        };
        let mut asker = Asker::new(Recorder {
            turn: self,
            state,
            calls,
            verdicts,
            results: Vec::with_capacity(calls.len()),
            outcomes: Vec::with_capacity(calls.len()),
            ran: 0,
            failed: None,
        });
        let outcomes = run_batch(&allowed, &env, ctx, &self.cancel, &mut asker).await;
        let mut recorder = asker.into_recorder();
        if let Some(err) = recorder.failed.take() {
            return Err(err);
        }
        recorder.record(&outcomes, true, Vec::new())?;
        Ok(recorder.outcomes)
    }
}

/// Journals a round's results in call order, as they become final.
pub(super) struct Recorder<'r, 't> {
    pub turn: &'r Turn<'t>,
    pub state: &'r mut SessionState,
    calls: &'r [ToolCall],
    verdicts: &'r [Verdict],
    /// The results of `calls[..results.len()]`, journaled.
    results: Vec<ToolResult>,
    /// How those calls turned out, for the loop guard.
    outcomes: Vec<Outcome>,
    /// How many of the calls the guard let run have their results journaled.
    ran: usize,
    /// A journal write that failed while the batch ran; the round fails with it.
    pub failed: Option<LlmError>,
}

impl Recorder<'_, '_> {
    /// Journals, in one commit followed by `then`, the results not journaled yet: of every
    /// call when `all`, otherwise of the calls before the one that the batch's `outcomes`
    /// (of the calls the guard let run, in order) do not reach yet.
    pub fn record(
        &mut self,
        outcomes: &[CallOutcome],
        all: bool,
        then: Vec<JournalEvent>,
    ) -> Result<(), LlmError> {
        let mut fresh = Vec::new();
        let mut weighed = Vec::new();
        let mut took_ms = BTreeMap::new();
        let mut effects = Vec::new();
        let mut spools = Vec::new();
        let mut ran = self.ran;
        for (call, verdict) in self
            .calls
            .iter()
            .zip(self.verdicts)
            .skip(self.results.len())
        {
            let mut empty = false;
            let mut result = match verdict {
                Verdict::Refuse(correction) => ToolResult::error(call.id.clone(), correction),
                Verdict::Run if !all && ran == outcomes.len() => break,
                Verdict::Run => {
                    ran += 1;
                    match outcomes.get(ran - 1) {
                        Some(outcome) => {
                            effects.extend(outcome.effects.iter().cloned());
                            spools.extend(outcome.spool.iter().cloned());
                            empty = outcome.empty;
                            if let Some(took) = outcome.took {
                                took_ms.insert(call.id.clone(), millis(took));
                            }
                            outcome.result.clone()
                        }
                        None => ToolResult::error(call.id.clone(), "not run"),
                    }
                }
            };
            // A credential tern knows never reaches the journal or the provider, whatever a
            // tool printed.
            let content = self.turn.deps.redactor.credentials(&result.content);
            result.content = self
                .turn
                .fit_text(&format!("tool-{}.txt", call.id), content);
            let refused = matches!(verdict, Verdict::Refuse(_));
            weighed.push(Outcome::of(
                refused,
                result.is_error,
                empty,
                &result.content,
            ));
            fresh.push(result);
        }
        let mut events = Vec::new();
        if !fresh.is_empty() {
            events.push(JournalEvent::ToolResults {
                results: fresh.clone(),
                took_ms: Some(took_ms.clone()),
            });
        }
        let answered = &self.calls[self.results.len()..];
        events.extend(self.turn.shortened_arguments(answered, &fresh));
        // The journal records paths as text; a path that is not UTF-8 cannot be kept in
        // the recent files (the tool result already named it, in the escaped form the tools
        // read back). Journaling that form instead would put a name that exists nowhere into
        // a list of real paths.
        let effects = effects.into_iter().filter(|effect| match effect {
            ToolEffect::Read(path)
            | ToolEffect::Wrote(path)
            | ToolEffect::SetWorkingDirectory(path) => path.to_str().is_some(),
            ToolEffect::JobStarted(_) => true,
        });
        events.extend(effects.map(|effect| match effect {
            ToolEffect::Read(path) | ToolEffect::Wrote(path) => JournalEvent::FileTouched { path },
            ToolEffect::SetWorkingDirectory(path) => JournalEvent::WorkingDirectoryChanged { path },
            ToolEffect::JobStarted(job) => JournalEvent::JobStarted { job },
        }));
        events.extend(then);
        self.turn.record(self.state, events)?;
        // Their results are journaled: what they printed is no longer needed for recovery.
        for spool in spools {
            let _ = std::fs::remove_file(spool);
        }
        let first = self.results.len();
        for (call, result) in self.calls[first..].iter().zip(&fresh) {
            self.turn.emit(SessionEvent::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                content: result.content.clone(),
                is_error: result.is_error,
                duration_ms: took_ms.get(&call.id).copied(),
            });
        }
        self.results.extend(fresh);
        self.outcomes.extend(weighed);
        self.ran = ran;
        Ok(())
    }
}

impl Recorder<'_, '_> {
    /// Journals that `calls` start, in one commit with the results of `done` not journaled
    /// yet (see [`Approver::starting`](super::batch::Approver::starting)).
    pub fn starting(&mut self, calls: &[ToolCall], done: &[CallOutcome]) -> Result<(), LlmError> {
        let started = JournalEvent::ToolCallsStarted {
            call_ids: calls.iter().map(|call| call.id.clone()).collect(),
        };
        self.record(done, false, vec![started])
    }
}

/// A duration in whole milliseconds, as the journal keeps it.
fn millis(took: std::time::Duration) -> u64 {
    u64::try_from(took.as_millis()).unwrap_or(u64::MAX)
}
