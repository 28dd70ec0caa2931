//! Running a compaction: the IO half of [`compaction`](super::compaction). Clears old tool
//! output, cuts the oldest messages to fit half the window, asks the compaction model for
//! notes on what was cut (best effort, within `sidecar_llm_timeout`), and returns the journal
//! events that replace the history. The pure steps decide what is kept; this decides when and
//! talks to the model.

use super::actor::SessionDeps;
use super::compaction::{
    clear_tool_results, compacted_history, estimate_tokens, notes_request_text, reduce,
};
use super::state::SessionState;
use crate::domain::{Message, Watchdog};
use crate::llm::{ChatRequest, LlmError};
use crate::store::JournalEvent;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The instructions the notes model works under.
const NOTES_SYSTEM: &str = "You write compaction notes for a coding assistant's conversation \
                            that no longer fits its context window. Be concise and factual.";

/// The longest notes asked for, in tokens.
const NOTES_MAX_TOKENS: u32 = 4096;

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
    /// Whether the notes model answered; the extractive result stands otherwise.
    pub notes: bool,
    /// Time spent deciding what to keep, the notes call excluded.
    pub work: Duration,
}

/// Compacts `state`'s history for a model whose window is `window` tokens, given the
/// `overhead` tokens every request spends on the system prompt and the tools. Returns `None`
/// when there is nothing to gain (no result to clear, no message to cut).
pub async fn compact(
    deps: &SessionDeps,
    state: &SessionState,
    window: u64,
    overhead: u64,
    cancel: &CancellationToken,
) -> Option<Compaction> {
    let started = Instant::now();
    let settings = &deps.settings;
    let tokens_before = overhead + estimate_tokens(&state.messages);
    let cleared = clear_tool_results(&state.messages, settings.keep_recent_tool_results);
    let budget = (window / 2).saturating_sub(overhead);
    let reduction = reduce(&cleared.messages, settings.keep_recent_messages, budget);
    if reduction.dropped.is_empty() && cleared.results_cleared == 0 {
        return None;
    }
    let mut work = started.elapsed();
    let notes = if reduction.dropped.is_empty() {
        None
    } else {
        // Clearing keeps positions, so the notes model can read the cut messages whole.
        let dropped = &state.messages[..reduction.dropped.len().min(state.messages.len())];
        write_notes(deps, dropped, window, cancel).await
    };
    let resumed = Instant::now();
    let messages = if reduction.dropped.is_empty() {
        cleared.messages
    } else {
        compacted_history(notes.as_deref(), &reduction)
    };
    let compaction = Compaction {
        messages_before: state.messages.len(),
        messages_after: messages.len(),
        tokens_before,
        tokens_after: overhead + estimate_tokens(&messages),
        results_cleared: cleared.results_cleared,
        notes: notes.is_some(),
        work: Duration::ZERO,
        events: Vec::new(),
    };
    let mut events = vec![JournalEvent::Compacted {
        messages,
        dropped: reduction.dropped.len(),
        results_cleared: cleared.results_cleared,
        notes: notes.clone(),
    }];
    if let Some(notes) = notes {
        events.push(JournalEvent::MemoryCheckpoint { notes });
    }
    work += resumed.elapsed();
    Some(Compaction {
        events,
        work,
        ..compaction
    })
}

/// Asks the compaction model (its fallback on failure) for notes on `dropped`. Best effort:
/// any failure, a timeout or an empty answer gives `None`, and the cut stands without notes.
async fn write_notes(
    deps: &SessionDeps,
    dropped: &[Message],
    window: u64,
    cancel: &CancellationToken,
) -> Option<String> {
    let client = deps.notes_client.as_ref().unwrap_or(&deps.client);
    // The transcript must fit the notes model too: at most half the window of it, newest kept.
    let dropped = fitting_tail(dropped, window / 2);
    let request = ChatRequest {
        model: client.primary.model.clone(),
        system: vec![NOTES_SYSTEM.to_owned()],
        messages: vec![Message::user_text(notes_request_text(dropped))],
        tools: Vec::new(),
        max_output_tokens: NOTES_MAX_TOKENS,
        cache_breakpoints: Vec::new(),
        cache_key: None,
    };
    let timeout = deps.settings.sidecar_llm_timeout;
    let mut quiet = ();
    let call = client.complete(request, &mut quiet, cancel);
    let outcome = match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_) => Err(LlmError {
            watchdog: Some(Watchdog::SidecarLlm),
            ..LlmError::new(
                crate::domain::ErrorCategory::Timeout,
                format!("the compaction notes took longer than {timeout:?} (sidecar_llm_timeout)"),
            )
        }),
    };
    match outcome {
        Ok(reply) => {
            let text = Message {
                role: crate::domain::Role::Assistant,
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

/// The most recent messages of `messages` whose estimate fits `tokens`.
fn fitting_tail(messages: &[Message], tokens: u64) -> &[Message] {
    let mut total = 0;
    let mut start = messages.len();
    while start > 0 {
        total += estimate_tokens(&messages[start - 1..start]);
        if total > tokens {
            break;
        }
        start -= 1;
    }
    &messages[start..]
}
