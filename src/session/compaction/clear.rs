//! Freeing context by tool output and arguments alone: old results replaced by a placeholder
//! naming the tool and the size cleared, their calls' large arguments with them
//! ([`clear_tool_results`]), how many recent ones a window can keep whole
//! ([`results_to_keep`]), and, when the turn being answered is itself too large, its older
//! results and its calls' arguments cleared and the latest results shortened to their head
//! and tail ([`clear_older_results`], [`shorten_latest_results`]). Which calls there are,
//! texts and the order of messages never change.

use super::arguments::clear_arguments;
use super::estimate_tokens;
use crate::domain::{ContentBlock, Message, Role, ToolResult};
use std::collections::{HashMap, HashSet};

/// How a cleared result starts; with [`CLEARED_WORD`] it marks a result as already cleared.
const CLEARED_OPENING: &str = "[output of ";
const CLEARED_WORD: &str = " cleared";

/// What a result is attributed to when its call cannot be found.
pub(super) const UNKNOWN_TOOL: &str = "a tool";

/// The least of a result that shortening keeps, head and tail together.
const MIN_SHORTENED: usize = 512;

/// A history whose old tool results were cleared, and what that saved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cleared {
    pub messages: Vec<Message>,
    /// How many tool results were replaced by a placeholder.
    pub results_cleared: usize,
    /// How many calls had large arguments replaced by placeholders.
    pub arguments_cleared: usize,
    /// How many bytes of result content and arguments the placeholders saved.
    pub bytes_freed: usize,
}

/// Replaces the content of every tool result but the `keep_recent` most recent by a
/// placeholder naming the tool and the size cleared, and the large arguments of their calls
/// (and of calls whose results an earlier clearing took) by placeholders too. Results
/// already cleared stay as they are and do not count among the kept ones; a result no longer
/// than its placeholder is left whole, since clearing it would cost context instead of saving
/// it. Nothing else changes.
pub fn clear_tool_results(messages: &[Message], keep_recent: usize) -> Cleared {
    let results: Vec<&ToolResult> = messages.iter().flat_map(Message::tool_results).collect();
    let live = results.iter().filter(|r| !is_cleared(&r.content)).count();
    let mut to_clear = live.saturating_sub(keep_recent);
    // Whether each call whose output goes (now or before) succeeded, by call id; the
    // results to clear now are the oldest live ones.
    let mut going: HashMap<&str, bool> = HashMap::new();
    let mut clear_now: HashSet<&str> = HashSet::new();
    for result in results {
        let cleared = is_cleared(&result.content);
        if !cleared && to_clear > 0 {
            to_clear -= 1;
            clear_now.insert(&result.tool_use_id);
        }
        if cleared || clear_now.contains(result.tool_use_id.as_str()) {
            going.insert(&result.tool_use_id, !result.is_error);
        }
    }
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Cleared::default();
    for message in messages {
        learn_tool_names(&mut names, message);
        let mut message = message.clone();
        for block in &mut message.content {
            match block {
                ContentBlock::ToolUse(call) => {
                    if let Some(&ok) = going.get(call.id.as_str()) {
                        let saved = clear_arguments(call, ok);
                        out.bytes_freed += saved;
                        out.arguments_cleared += usize::from(saved > 0);
                    }
                }
                ContentBlock::ToolResult(result)
                    if clear_now.contains(result.tool_use_id.as_str()) =>
                {
                    let name = names.get(result.tool_use_id.as_str()).copied();
                    let placeholder =
                        cleared_placeholder(name.unwrap_or(UNKNOWN_TOOL), result.content.len());
                    if let Some(saved) = result.replace_with(placeholder) {
                        out.bytes_freed += saved;
                        out.results_cleared += 1;
                    }
                }
                _ => {}
            }
        }
        out.messages.push(message);
    }
    out
}

/// Remembers the name of each tool `message` calls, by call id, so results can name it.
pub(super) fn learn_tool_names<'a>(names: &mut HashMap<&'a str, &'a str>, message: &'a Message) {
    if message.role == Role::Assistant {
        let calls = message.tool_calls();
        names.extend(calls.map(|c| (c.id.as_str(), c.name.as_str())));
    }
}

/// Whether a result's content is a placeholder left by an earlier clearing.
pub(super) fn is_cleared(content: &str) -> bool {
    content.starts_with(CLEARED_OPENING) && content.contains(CLEARED_WORD)
}

/// The text that stands in for a cleared result of `bytes` bytes.
fn cleared_placeholder(tool: &str, bytes: usize) -> String {
    let size = format_size(bytes);
    format!("{CLEARED_OPENING}{tool}{CLEARED_WORD} to save context: {size}]")
}

/// `bytes` for people: bytes under a KiB, then KiB or MiB to one decimal.
pub(super) fn format_size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let size = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if size < KIB * KIB {
        format!("{:.1} KiB", size / KIB)
    } else {
        format!("{:.1} MiB", size / (KIB * KIB))
    }
}

/// How many of the most recent results still whole stay so: at most `keep_recent`, and no
/// more than fit `tokens` together, but always the latest one when `keep_recent` allows any,
/// since the model is about to read it.
pub fn results_to_keep(messages: &[Message], keep_recent: usize, tokens: u64) -> usize {
    let live = messages
        .iter()
        .rev()
        .flat_map(|m| m.tool_results().collect::<Vec<_>>().into_iter().rev())
        .filter(|r| !is_cleared(&r.content));
    let mut total = 0;
    let mut kept = 0;
    for result in live.take(keep_recent) {
        total += (result.weight() as u64).div_ceil(4);
        if kept > 0 && total > tokens {
            break;
        }
        kept += 1;
    }
    kept
}

/// What clearing a turn's older output changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    /// Tool results replaced by a placeholder.
    pub results: usize,
    /// Calls whose large arguments were.
    pub arguments: usize,
}

/// Clears the results of `messages` oldest first, all but those of the last message holding
/// results (the batch the model is about to read), and the large arguments of every call
/// that has its result, that batch's included, until the estimate fits `budget` tokens.
pub fn clear_older_results(messages: &mut [Message], budget: u64) -> Changed {
    let mut total = estimate_tokens(messages);
    let mut changed = Changed::default();
    let Some(latest) = messages.iter().rposition(|m| m.tool_results().count() > 0) else {
        return changed;
    };
    let answered: HashMap<String, bool> = messages
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| (r.tool_use_id.clone(), !r.is_error))
        .collect();
    let mut names: HashMap<String, String> = HashMap::new();
    for i in 0..latest {
        if total <= budget {
            break;
        }
        if messages[i].role == Role::Assistant {
            let calls = messages[i].tool_calls();
            names.extend(calls.map(|c| (c.id.clone(), c.name.clone())));
        }
        let before = estimate_tokens(&messages[i..=i]);
        for block in &mut messages[i].content {
            match block {
                ContentBlock::ToolUse(call) => {
                    if let Some(&ok) = answered.get(&call.id)
                        && clear_arguments(call, ok) > 0
                    {
                        changed.arguments += 1;
                    }
                }
                ContentBlock::ToolResult(result) if !is_cleared(&result.content) => {
                    let name = names.get(&result.tool_use_id).map(String::as_str);
                    let placeholder =
                        cleared_placeholder(name.unwrap_or(UNKNOWN_TOOL), result.content.len());
                    if result.replace_with(placeholder).is_some() {
                        changed.results += 1;
                    }
                }
                _ => {}
            }
        }
        total = total - before + estimate_tokens(&messages[i..=i]);
    }
    changed
}

/// When `messages` are estimated over `budget` tokens, shortens each result of the last
/// message holding results to an equal share of what the rest leaves, keeping its head and
/// tail around a note naming the `window`, never below 512 bytes. Returns how many it
/// shortened; when even that does not fit, they are as short as they go.
pub fn shorten_latest_results(messages: &mut [Message], budget: u64, window: u64) -> usize {
    let total = estimate_tokens(messages);
    let Some(latest) = messages.iter().rposition(|m| m.tool_results().count() > 0) else {
        return 0;
    };
    if total <= budget {
        return 0;
    }
    let others = total - estimate_tokens(&messages[latest..=latest]);
    let count = messages[latest].tool_results().count() as u64;
    let room = budget.saturating_sub(others) * 4;
    let share = usize::try_from(room / count).unwrap_or(usize::MAX);
    let mut shortened = 0;
    for block in &mut messages[latest].content {
        if let ContentBlock::ToolResult(result) = block
            && let Some(shorter) = shortened_to(&result.content, share, window)
        {
            result.content = shorter;
            shortened += 1;
        }
    }
    shortened
}

/// `content` cut to about `bytes` bytes (at least [`MIN_SHORTENED`]), its head and tail kept
/// around a note of what was cut and why; `None` when it is no longer than that already.
fn shortened_to(content: &str, bytes: usize, window: u64) -> Option<String> {
    let note_room = 120;
    let keep = bytes.saturating_sub(note_room).max(MIN_SHORTENED);
    if content.len() <= keep + note_room {
        return None;
    }
    let mut head = keep / 2;
    while !content.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = content.len() - (keep - head);
    while !content.is_char_boundary(tail) {
        tail += 1;
    }
    let cut = format_size(tail - head);
    Some(format!(
        "{}\n[tern cut {cut} from the middle of this output to fit the {window}-token context \
         window; ask for less at a time to see it]\n{}",
        &content[..head],
        &content[tail..]
    ))
}
