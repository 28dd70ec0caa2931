//! The history as the encoders see it: consecutive messages of the same role merged into one
//! turn, with blocks the wire format cannot carry left out.
//!
//! Providers want roles to alternate (Anthropic insists), while the session may hold two user
//! messages in a row (a message that joined a tool batch, a compaction note). Each block keeps
//! the index of the message it came from, so prompt-cache breakpoints named by message index
//! can still be placed after merging.

use crate::domain::{ContentBlock, Message, Role};

/// One merged turn.
#[derive(Debug, PartialEq)]
pub(crate) struct Turn<'a> {
    pub role: Role,
    /// The kept blocks in order, each with the index of the message it came from.
    pub blocks: Vec<(usize, &'a ContentBlock)>,
}

/// Merges consecutive same-role messages, keeping only blocks for which `keep` is true and
/// never a text block that is empty or only whitespace (a reply of "\n\n"): Anthropic rejects
/// those with a 400 on every later request, and the other providers gain nothing from them.
/// A message left with no blocks disappears, so its neighbours may merge; tool calls and
/// results are never dropped this way, so no call loses its result.
pub(crate) fn merge_turns<'a>(
    messages: &'a [Message],
    keep: impl Fn(&ContentBlock) -> bool,
) -> Vec<Turn<'a>> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let blocks: Vec<(usize, &ContentBlock)> = message
            .content
            .iter()
            .filter(|block| !matches!(block, ContentBlock::Text { text } if text.trim().is_empty()))
            .filter(|block| keep(block))
            .map(|block| (index, block))
            .collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(turn) if turn.role == message.role => turn.blocks.extend(blocks),
            _ => turns.push(Turn {
                role: message.role,
                blocks,
            }),
        }
    }
    turns
}

/// The text blocks of a turn joined with blank lines, for wire formats whose messages carry
/// one string.
pub(crate) fn joined_text(turn: &Turn<'_>) -> String {
    let texts: Vec<&str> = turn
        .blocks
        .iter()
        .filter_map(|(_, block)| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ToolCall, ToolResult};

    #[test]
    fn same_role_neighbours_merge_and_empty_messages_vanish() {
        let messages = vec![
            Message::user_text("a"),
            Message::user_text(""),
            Message::user_text("b"),
            Message::assistant_text("c"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse(ToolCall {
                    id: "t1".into(),
                    name: "read".into(),
                    input: serde_json::json!({}),
                })],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::ok("t1", "done"))],
            },
        ];
        let turns = merge_turns(&messages, |_| true);
        let shape: Vec<(Role, Vec<usize>)> = turns
            .iter()
            .map(|t| (t.role, t.blocks.iter().map(|(i, _)| *i).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Role::User, vec![0, 2]),
                (Role::Assistant, vec![3, 4]),
                (Role::User, vec![5]),
            ]
        );
        assert_eq!(joined_text(&turns[0]), "a\n\nb");
    }

    #[test]
    fn filtered_blocks_can_remove_a_whole_message() {
        let thinking_only = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: None,
            }],
        };
        let messages = vec![
            Message::user_text("a"),
            thinking_only,
            Message::user_text("b"),
        ];
        let turns = merge_turns(&messages, |b| !matches!(b, ContentBlock::Thinking { .. }));
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].blocks.len(), 2);
    }

    #[test]
    fn whitespace_only_text_is_dropped_but_tool_calls_stay() {
        let call = ContentBlock::ToolUse(ToolCall {
            id: "t1".into(),
            name: "read".into(),
            input: serde_json::json!({}),
        });
        let messages = vec![
            Message::user_text("a"),
            Message::assistant_text("\n\n"),
            Message::user_text("b"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Text { text: " \t".into() }, call.clone()],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResult::ok("t1", "done"))],
            },
        ];
        let turns = merge_turns(&messages, |_| true);
        let shape: Vec<(Role, Vec<usize>)> = turns
            .iter()
            .map(|t| (t.role, t.blocks.iter().map(|(i, _)| *i).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Role::User, vec![0, 2]),
                (Role::Assistant, vec![3]),
                (Role::User, vec![4]),
            ]
        );
        assert_eq!(turns[1].blocks[0].1, &call);
    }
}
