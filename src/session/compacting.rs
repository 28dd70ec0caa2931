//! Running a compaction: the IO half of [`compaction`](super::compaction). The pure plan
//! decides what is cleared, cut and kept within the window's budget; this asks the
//! compaction model for notes on what was cut (best effort, within limits that are a share of
//! the window) and returns the journal events that replace the history.

use super::compaction::{
    Budget, Keep, NOTES_SYSTEM, NotesCall, estimate_tokens, notes_call, notes_request_text, plan,
};
use super::deps::SessionDeps;
use super::state::SessionState;
use crate::domain::{ErrorCategory, Message, Role, Watchdog};
use crate::llm::{ChatRequest, LlmError};
use crate::store::JournalEvent;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What one compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// `Compacted` (the new history), then the notes as a memory checkpoint when there are
    /// notes.
    pub events: Vec<JournalEvent>,
    pub messages_before: usize,
    pub messages_after: usize,
    /// Estimated tokens of the history before and after, prompt overhead included.
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub results_cleared: usize,
    /// Whether the notes model answered and its notes were kept; the extractive result
    /// stands otherwise.
    pub notes: bool,
    /// Time spent deciding what to keep, the notes call excluded.
    pub work: Duration,
    /// Where the turn being answered starts in the new history.
    pub turn_start: Option<usize>,
}

/// Compacts `state`'s history within `budget`, keeping everything from `turn_start` (the
/// turn being answered) on. Returns `None` when there is nothing to gain (no result to clear,
/// nothing to cut but an earlier compaction's head, no tokens saved) or when `cancel` fired
/// meanwhile: a cancelled compaction changes nothing.
pub async fn compact(
    deps: &SessionDeps,
    state: &SessionState,
    budget: Budget,
    turn_start: Option<usize>,
    cancel: &CancellationToken,
) -> Option<Compaction> {
    let started = Instant::now();
    let settings = &deps.settings;
    let keep = Keep {
        results: settings.keep_recent_tool_results,
        messages: settings.keep_recent_messages,
    };
    let plan = plan(&state.messages, &budget, keep, turn_start);
    if !plan.saves {
        return None;
    }
    let mut work = started.elapsed();
    let notes = if plan.cuts_something() {
        // Clearing keeps positions, so the notes model can read the cut messages whole.
        let cut = plan.reduction.dropped.len().min(state.messages.len());
        write_notes(deps, &state.messages[..cut], &budget, cancel).await
    } else {
        None
    };
    if cancel.is_cancelled() {
        return None;
    }
    let resumed = Instant::now();
    let with_notes = notes.as_deref().and_then(|notes| plan.with_notes(notes));
    if notes.is_some() && with_notes.is_none() {
        tracing::info!(
            "the compaction notes would not make the history smaller; keeping the cut without them"
        );
    }
    let notes = with_notes.is_some().then_some(notes).flatten();
    let messages = with_notes.unwrap_or_else(|| plan.extractive.clone());
    let tokens_after = budget.overhead + estimate_tokens(&messages);
    let messages_after = messages.len();
    let mut events = vec![JournalEvent::Compacted {
        messages,
        dropped: plan.reduction.dropped.len(),
        results_cleared: plan.results_changed,
        notes: notes.clone(),
    }];
    let has_notes = notes.is_some();
    if let Some(notes) = notes {
        events.push(JournalEvent::MemoryCheckpoint { notes });
    }
    work += resumed.elapsed();
    Some(Compaction {
        events,
        messages_before: state.messages.len(),
        messages_after,
        tokens_before: plan.tokens_before,
        tokens_after,
        results_cleared: plan.results_changed,
        notes: has_notes,
        work,
        turn_start: plan.turn_start,
    })
}

/// Asks the compaction model (its fallback on failure) for notes on `dropped`, within the
/// limits [`notes_call`] sets for the window. Best effort: a window too small for a notes
/// call, any failure, a timeout or an empty answer gives `None`, and the cut stands without
/// notes.
async fn write_notes(
    deps: &SessionDeps,
    dropped: &[Message],
    budget: &Budget,
    cancel: &CancellationToken,
) -> Option<String> {
    let client = deps.notes_client.as_ref().unwrap_or(&deps.client);
    let sidecar = deps.settings.sidecar_llm_timeout;
    let Some(call) = notes_call(budget, client.primary.context_window(), sidecar) else {
        tracing::info!(
            window = budget.window,
            "the window is too small for a notes call; keeping the cut without notes"
        );
        return None;
    };
    let NotesCall {
        transcript_bytes,
        max_output_tokens,
        words,
        timeout,
    } = call;
    let request = ChatRequest {
        model: client.primary.model(),
        system: vec![NOTES_SYSTEM.to_owned()],
        messages: vec![Message::user_text(notes_request_text(
            dropped,
            transcript_bytes,
            words,
        ))],
        tools: Vec::new(),
        max_output_tokens,
        context_window: 0,
        cache_breakpoints: Vec::new(),
        cache_key: None,
        images: false,
    };
    let mut quiet = ();
    let call = client.complete(request, &mut quiet, cancel);
    let outcome = match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_) => Err(LlmError {
            watchdog: Some(Watchdog::SidecarLlm),
            ..LlmError::new(
                ErrorCategory::Timeout,
                format!(
                    "the compaction notes took longer than {timeout:?} (a share of \
                     sidecar_llm_timeout for a {}-token window)",
                    budget.window
                ),
            )
        }),
    };
    match outcome {
        Ok(reply) => {
            let text = Message {
                role: Role::Assistant,
                content: reply.content,
            }
            .text();
            let text = text.trim();
            if text.is_empty() {
                tracing::warn!("the compaction notes came back empty; keeping the cut without");
                None
            } else {
                Some(text.to_owned())
            }
        }
        Err(err) => {
            tracing::warn!(%err, "no compaction notes; keeping the cut without");
            None
        }
    }
}
