//! Compaction's decisions: what a history too large for its context window becomes. Every
//! step is a pure function over the messages, so a compaction can be replayed and tested
//! without a provider:
//!
//! - the numbers come from the window ([`Budget`]): keep half of it, leave the reply its room,
//!   give the notes a sixteenth;
//! - old tool output is cleared first, with the large arguments of its calls
//!   ([`clear_tool_results`], [`clear_arguments`]), keeping as many recent results whole as an
//!   eighth of the window holds;
//! - the oldest messages are cut ([`reduce`]), never a tool call without its result and never
//!   anything of the turn being answered; when that turn alone is too large, its older results
//!   and its calls' large arguments are cleared and its latest results shortened
//!   ([`clear_older_results`], [`shorten_latest_results`]);
//! - one user-role message stands in for what was cut ([`compacted_history`]): notes a model
//!   wrote from [`notes_request_text`] within [`notes_call`]'s limits, or a plain marker;
//! - a compaction never makes the history larger ([`Plan::with_notes`]).

mod arguments;
mod budget;
mod clear;
mod cut;
mod notes;
#[cfg(test)]
mod tests;

pub use arguments::{ARGUMENT_FLOOR, clear_arguments, json_len, shorten_arguments};
pub use budget::{Budget, NOTES_MAX_TOKENS, NotesCall, notes_call};
pub use clear::{
    Changed, Cleared, clear_older_results, clear_tool_results, results_to_keep,
    shorten_latest_results,
};
pub use cut::{Reduction, reduce};
pub use notes::{NOTES_SYSTEM, notes_request_text};

use super::turn::GUARD_NOTE;
use crate::domain::{ContentBlock, Message, Role};
use crate::llm::ToolSpec;
use crate::prompt::{NUDGE_OPENING, quote_lookalikes};

use crate::domain::BYTES_PER_TOKEN;
/// The estimate's fixed costs for a message's role and framing, and for each block's.
const MESSAGE_TOKENS: u64 = 4;
const BLOCK_TOKENS: u64 = 3;

/// The heading of the message that holds the notes in the compacted history.
const NOTES_HEADING: &str = "[compaction notes: the earlier part of this conversation, summarised]";

/// A deterministic estimate of how many tokens `messages` take: one per four bytes of text,
/// thinking, tool names with their compact JSON arguments and tool results, plus a small fixed
/// cost per message and per block. It is only good for deciding where to cut; the provider's
/// reported usage is the truth wherever the real count matters.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let mut bytes = 0u64;
    let mut fixed = 0u64;
    for message in messages {
        fixed += MESSAGE_TOKENS;
        for block in &message.content {
            fixed += BLOCK_TOKENS;
            bytes += match block {
                ContentBlock::Text { text } => text.len(),
                ContentBlock::Thinking { thinking, .. } => thinking.len(),
                ContentBlock::ToolUse(call) => call.name.len() + call.input.to_string().len(),
                ContentBlock::ToolResult(result) => result.weight(),
            } as u64;
        }
    }
    bytes.div_ceil(BYTES_PER_TOKEN) + fixed
}

/// Estimated tokens a request spends before its history: the system blocks and the tools'
/// names, descriptions and schemas, one per four bytes.
pub fn prefix_tokens<'a>(system: impl IntoIterator<Item = &'a str>, tools: &[ToolSpec]) -> u64 {
    let system: usize = system.into_iter().map(str::len).sum();
    let tools: usize = tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
        .sum();
    ((system + tools) as u64) / BYTES_PER_TOKEN
}

/// The history after a compaction: one user-role message holding the notes (or, when they
/// are missing or blank, a marker saying how many messages were removed), then the kept
/// messages. It always starts with a user message, as providers require.
pub fn compacted_history(notes: Option<&str>, reduction: &Reduction) -> Vec<Message> {
    let head = match notes.map(str::trim).filter(|notes| !notes.is_empty()) {
        // Notes are a model's words about text that included tool output, so no line in them
        // may pass for tern's own per-turn note.
        Some(notes) => format!("{NOTES_HEADING}\n\n{}", quote_lookalikes(notes)),
        None => removed_marker(reduction.dropped.len()),
    };
    let mut history = vec![Message::user_text(head)];
    history.extend_from_slice(&reduction.kept);
    history
}

/// What stands in for `removed` messages when there are no notes.
fn removed_marker(removed: usize) -> String {
    let (what, verb, whose) = match removed {
        1 => ("1 earlier message".to_owned(), "was", "its"),
        n => (format!("{n} earlier messages"), "were", "their"),
    };
    format!(
        "[compaction: {what} of this conversation {verb} removed to fit the context window; \
         {whose} details are no longer available]"
    )
}

/// How many tool results and messages a compaction keeps whole at most (`[session]`
/// `keep_recent_tool_results`, `keep_recent_messages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    pub results: usize,
    pub messages: usize,
}

/// A compaction worked out before any notes: what is cut, cleared and kept, and the history
/// it gives without notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub reduction: Reduction,
    /// The history without notes: a marker for what was cut (none when nothing was), then
    /// the kept messages; the history unchanged when the plan saves nothing.
    pub extractive: Vec<Message>,
    /// Tool results cleared or shortened.
    pub results_changed: usize,
    /// Calls whose large arguments were cleared.
    pub arguments_cleared: usize,
    /// Estimated tokens of a request before and after (without notes), overhead included.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Whether the plan changes anything: a cut or a clearing that saves tokens.
    pub saves: bool,
    /// Where the turn being answered starts in the new history.
    pub turn_start: Option<usize>,
    budget: Budget,
}

impl Plan {
    /// Whether the new history leaves a reply the room it asks for.
    pub fn fits(&self) -> bool {
        self.tokens_after <= self.budget.overhead + self.budget.limit()
    }

    /// Whether the plan cuts messages other than an earlier compaction's head, which is what
    /// a notes call is worth making for.
    pub fn cuts_something(&self) -> bool {
        self.saves
            && self
                .reduction
                .dropped
                .iter()
                .any(|m| !is_compaction_head(m))
    }

    /// The new history with `notes` at its head, or `None` when the extractive history should
    /// stand: blank notes, nothing cut, notes that would leave the history no smaller than it
    /// was before the compaction, or that would push a history that fits out of the window.
    pub fn with_notes(&self, notes: &str) -> Option<Vec<Message>> {
        if !self.saves || self.reduction.dropped.is_empty() || notes.trim().is_empty() {
            return None;
        }
        let mut history = compacted_history(Some(notes), &self.reduction);
        keep_the_task(&mut history, &self.reduction.dropped);
        let after = self.budget.overhead + estimate_tokens(&history);
        let grows = after >= self.tokens_before;
        let breaks_fit = self.fits() && after > self.budget.overhead + self.budget.limit();
        (!grows && !breaks_fit).then_some(history)
    }
}

/// Works out the compaction of `messages` within `budget`, keeping at most `keep` whole and
/// everything from `turn_start` (the turn being answered) on. Older tool output is cleared
/// first; then the oldest messages are cut to [`Budget::kept_tokens`]; when the kept part is
/// still over that (the turn alone is), the turn's older results are cleared, and then its
/// latest results shortened to it. Whatever saves nothing is left out: the plan then keeps the
/// history as it is ([`Plan::saves`] false).
pub fn plan(messages: &[Message], budget: &Budget, keep: Keep, turn_start: Option<usize>) -> Plan {
    let tokens_before = budget.overhead + estimate_tokens(messages);
    let whole = results_to_keep(messages, keep.results, budget.whole_results());
    let cleared = clear_tool_results(messages, whole);
    let kept_tokens = budget.kept_tokens();
    let mut reduction = reduce(&cleared.messages, keep.messages, kept_tokens, turn_start);
    if reduction.dropped.iter().all(is_compaction_head) {
        // Cutting only an earlier compaction's head would trade its notes for a bare marker.
        reduction = Reduction {
            kept: cleared.messages.clone(),
            dropped: Vec::new(),
            keep: cleared.messages.len(),
        };
    }
    let mut results_changed = cleared.results_cleared;
    let mut arguments_cleared = cleared.arguments_cleared;
    if estimate_tokens(&reduction.kept) > kept_tokens {
        // To the target, not just under the limit: a result shortened only as far as the
        // window allows would leave the next call over the threshold, and compacting again.
        let changed = clear_older_results(&mut reduction.kept, kept_tokens);
        results_changed += changed.results;
        arguments_cleared += changed.arguments;
        results_changed += shorten_latest_results(&mut reduction.kept, kept_tokens, budget.window);
    }
    let extractive = if reduction.dropped.is_empty() {
        reduction.kept.clone()
    } else {
        let mut history = compacted_history(None, &reduction);
        keep_the_task(&mut history, &reduction.dropped);
        history
    };
    let tokens_after = budget.overhead + estimate_tokens(&extractive);
    let cuts = !reduction.dropped.is_empty();
    let saves = (cuts || results_changed + arguments_cleared > 0) && tokens_after < tokens_before;
    if !saves {
        return Plan {
            reduction: Reduction {
                kept: messages.to_vec(),
                dropped: Vec::new(),
                keep: messages.len(),
            },
            extractive: messages.to_vec(),
            results_changed: 0,
            arguments_cleared: 0,
            tokens_before,
            tokens_after: tokens_before,
            saves: false,
            turn_start,
            budget: *budget,
        };
    }
    // The cut is never after the turn's start, so the turn moves up by what was cut, less
    // the one head message put in its place.
    let dropped = reduction.dropped.len();
    let turn_start = turn_start.map(|start| match dropped {
        0 => start,
        _ => 1 + start.saturating_sub(dropped),
    });
    Plan {
        reduction,
        extractive,
        results_changed,
        arguments_cleared,
        tokens_before,
        tokens_after,
        saves,
        turn_start,
        budget: *budget,
    }
}

/// Whether `message` is the head a compaction put first: its notes or its marker.
pub fn is_compaction_head(message: &Message) -> bool {
    message.role == Role::User && message.text().starts_with("[compaction")
}

/// Whether `message` is something a person (or an automation) sent: a user message of text
/// only that is not one of tern's own notes.
pub fn is_input(message: &Message) -> bool {
    message.role == Role::User
        && message
            .content
            .iter()
            .all(|block| matches!(block, ContentBlock::Text { .. }))
        && !message.text().starts_with(NUDGE_OPENING)
        && !message.text().starts_with("[compaction")
        && !message.text().starts_with(GUARD_NOTE)
}

/// Where the turn answering the latest input starts: that input, or the nudge just before
/// it. `None` when the history holds no input.
pub fn turn_start(messages: &[Message]) -> Option<usize> {
    let input = messages.iter().rposition(is_input)?;
    let nudge_before = input.checked_sub(1).filter(|&at| {
        messages[at].role == Role::User && messages[at].text().starts_with(NUDGE_OPENING)
    });
    Some(nudge_before.unwrap_or(input))
}

/// When the cut took the latest input (the request being answered), repeats it in the head
/// message word for word, so the task survives even without notes.
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
