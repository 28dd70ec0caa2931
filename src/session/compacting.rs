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
use super::turn::GUARD_NOTE;
use crate::domain::{ContentBlock, Message, Role, Watchdog};
use crate::llm::{ChatRequest, LlmError};
use crate::prompt::NUDGE_OPENING;
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
/// when there is nothing to gain (no result to clear, nothing to cut but an earlier
/// compaction's head, no tokens saved) or when `cancel` fired meanwhile: a cancelled
/// compaction changes nothing.
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
    // Cutting only the head an earlier compaction left gains nothing worth a notes call.
    let cuts_something = reduction.dropped.iter().any(|m| !is_compaction_head(m));
    if !cuts_something && cleared.results_cleared == 0 {
        return None;
    }
    // The history without notes decides whether there is a gain, before any notes call.
    let history = |notes: Option<&str>| {
        if reduction.dropped.is_empty() {
            return cleared.messages.clone();
        }
        let mut history = compacted_history(notes, &reduction);
        keep_the_task(&mut history, &reduction.dropped);
        history
    };
    let extractive = history(None);
    if overhead + estimate_tokens(&extractive) >= tokens_before {
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
    if cancel.is_cancelled() {
        return None;
    }
    let resumed = Instant::now();
    let messages = match &notes {
        Some(notes) => history(Some(notes)),
        None => extractive,
    };
    let (messages_after, tokens_after) = (messages.len(), overhead + estimate_tokens(&messages));
    let has_notes = notes.is_some();
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
        messages_before: state.messages.len(),
        messages_after,
        tokens_before,
        tokens_after,
        results_cleared: cleared.results_cleared,
        notes: has_notes,
        work,
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
        model: client.primary.model(),
        system: vec![NOTES_SYSTEM.to_owned()],
        messages: vec![Message::user_text(notes_request_text(dropped))],
        tools: Vec::new(),
        max_output_tokens: NOTES_MAX_TOKENS,
        context_window: 0,
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

/// Whether `message` is the head a compaction put first: its notes or its marker.
fn is_compaction_head(message: &Message) -> bool {
    message.role == Role::User && message.text().starts_with("[compaction")
}

/// Whether `message` is something a person (or an automation) sent: a user message of text
/// only that is not one of tern's own notes.
fn is_input(message: &Message) -> bool {
    message.role == Role::User
        && message
            .content
            .iter()
            .all(|block| matches!(block, ContentBlock::Text { .. }))
        && !message.text().starts_with(NUDGE_OPENING)
        && !message.text().starts_with("[compaction")
        && !message.text().starts_with(GUARD_NOTE)
}

/// When the cut took the latest input (the request this turn is answering), repeats it in
/// the head message word for word, so the task survives even without notes.
fn keep_the_task(history: &mut [Message], dropped: &[Message]) {
    let kept_has_input = history.iter().skip(1).any(is_input);
    let Some(input) = dropped.iter().rev().find(|m| is_input(m)) else {
        return;
    };
    if kept_has_input {
        return;
    }
    if let Some(ContentBlock::Text { text }) =
        history.first_mut().and_then(|m| m.content.first_mut())
    {
        text.push_str(&format!(
            "\n\n[the latest message, which is being answered now]\n{}",
            input.text()
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_input_is_repeated_in_the_head() {
        let dropped = vec![
            Message::user_text(format!("{NUDGE_OPENING}\n\n[current-time]\nutc: now")),
            Message::user_text("THE TASK: fix the build"),
            Message::assistant_text("looking"),
        ];
        let mut history = vec![
            Message::user_text("[compaction notes: …]\n\nnotes"),
            Message::assistant_text("still looking"),
        ];
        keep_the_task(&mut history, &dropped);
        let head = history[0].text();
        assert!(
            head.ends_with(
                "\n\n[the latest message, which is being answered now]\nTHE TASK: fix the build"
            ),
            "{head}"
        );
        // When the kept part still holds an input, the head stays as it was.
        let mut kept = vec![
            Message::user_text("[compaction notes: …]"),
            Message::user_text("a newer message"),
        ];
        keep_the_task(&mut kept, &dropped);
        assert_eq!(kept[0].text(), "[compaction notes: …]");
    }

    #[test]
    fn notes_nudges_and_guard_notes_are_not_inputs() {
        assert!(is_input(&Message::user_text("hello")));
        for text in [
            format!("{NUDGE_OPENING}\n\nx"),
            "[compaction notes: …]".to_owned(),
            format!("{GUARD_NOTE} 4 tool calls have failed"),
        ] {
            assert!(!is_input(&Message::user_text(text)));
        }
        assert!(is_compaction_head(&Message::user_text(
            "[compaction: 3 earlier"
        )));
    }
}
