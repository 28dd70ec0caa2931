//! Making a history safe to send: every tool call answered by the next message, no result
//! without its call.

use crate::domain::{ContentBlock, Message, Role, ToolResult};
use std::collections::HashSet;

/// What a call without a recorded result is answered with.
const MISSING_RESULT: &str = "no result was recorded for this call; it did not run";

/// Returns a copy of `messages` in which every tool call of an assistant message is answered
/// in the following user message (missing results are added as errors) and results whose call
/// is not in the preceding assistant message are dropped. Providers reject either orphan, and
/// the journal should never contain one; this is the last line of defence.
pub fn pair_tool_calls(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut pending: Vec<String> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                answer_missing(&mut out, &mut pending, None);
                pending = message.tool_calls().map(|c| c.id.clone()).collect();
                out.push(message.clone());
            }
            Role::User => {
                let mut message = message.clone();
                let open: HashSet<String> = pending.iter().cloned().collect();
                message.content.retain(|block| match block {
                    ContentBlock::ToolResult(r) => open.contains(&r.tool_use_id),
                    _ => true,
                });
                let answered: HashSet<String> = message
                    .tool_results()
                    .map(|r| r.tool_use_id.clone())
                    .collect();
                pending.retain(|id| !answered.contains(id));
                answer_missing(&mut out, &mut pending, Some(&mut message));
                if !message.content.is_empty() {
                    out.push(message);
                }
            }
        }
    }
    answer_missing(&mut out, &mut pending, None);
    out
}

/// Puts error results for `pending` calls at the front of `into` (or of a new user message).
fn answer_missing(out: &mut Vec<Message>, pending: &mut Vec<String>, into: Option<&mut Message>) {
    if pending.is_empty() {
        return;
    }
    let results: Vec<ContentBlock> = pending
        .drain(..)
        .map(|id| ContentBlock::ToolResult(ToolResult::error(id, MISSING_RESULT)))
        .collect();
    match into {
        Some(message) => {
            // Results must come before any text in the message that answers the calls.
            let rest = std::mem::take(&mut message.content);
            message.content = results;
            message.content.extend(rest);
        }
        None => out.push(Message {
            role: Role::User,
            content: results,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ToolCall;
    use serde_json::json;

    fn calls(ids: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            content: ids
                .iter()
                .map(|id| {
                    ContentBlock::ToolUse(ToolCall {
                        id: (*id).into(),
                        name: "t".into(),
                        input: json!({}),
                    })
                })
                .collect(),
        }
    }

    fn results(ids: &[&str]) -> Message {
        Message {
            role: Role::User,
            content: ids
                .iter()
                .map(|id| ContentBlock::ToolResult(ToolResult::ok(*id, "r")))
                .collect(),
        }
    }

    fn result_ids(m: &Message) -> Vec<String> {
        m.tool_results().map(|r| r.tool_use_id.clone()).collect()
    }

    #[test]
    fn a_paired_history_is_unchanged() {
        let history = vec![Message::user_text("a"), calls(&["1"]), results(&["1"])];
        assert_eq!(pair_tool_calls(&history), history);
    }

    #[test]
    fn a_call_without_result_is_answered_before_the_next_text() {
        let history = vec![
            calls(&["1", "2"]),
            results(&["2"]),
            Message::assistant_text("x"),
        ];
        let out = pair_tool_calls(&history);
        assert_eq!(result_ids(&out[1]), vec!["1", "2"]);
    }

    #[test]
    fn a_trailing_call_is_answered_and_orphan_results_dropped() {
        let history = vec![results(&["9"]), Message::user_text("a"), calls(&["1"])];
        let out = pair_tool_calls(&history);
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], Message::user_text("a"));
        assert_eq!(result_ids(&out[2]), vec!["1"]);
    }
}
