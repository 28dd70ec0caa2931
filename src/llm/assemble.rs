//! Folding a stream of events into the reply's content blocks, in the order the model
//! produced them: text, thinking with its signature, and tool calls with their arguments
//! parsed.
//!
//! Arguments that are not valid JSON do not fail the reply. The call keeps an empty object as
//! input and the parse error is reported next to it, so the turn can answer that call with an
//! error the model can correct, instead of losing the whole reply.

use super::StreamEvent;
use super::error::excerpt;
use crate::domain::{ContentBlock, ToolCall, Usage};
use std::collections::{BTreeMap, HashMap};

/// A tool call whose arguments are still arriving.
#[derive(Debug)]
struct PendingCall {
    /// Position of its `ToolUse` block.
    block: usize,
    arguments: String,
}

/// Collects streamed events into content blocks and usage.
#[derive(Debug, Default)]
pub(crate) struct ReplyAssembler {
    blocks: Vec<ContentBlock>,
    pending: HashMap<usize, PendingCall>,
    usage: Usage,
    /// Call id → why its arguments could not be read.
    malformed: BTreeMap<String, String>,
}

/// What a finished stream produced.
#[derive(Debug, PartialEq)]
pub(crate) struct Assembled {
    pub content: Vec<ContentBlock>,
    pub usage: Usage,
    pub malformed_tool_args: BTreeMap<String, String>,
}

impl ReplyAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one event. `Stop` and `Error` end a stream and are the caller's to act on;
    /// they are ignored here.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta(delta) if !delta.is_empty() => match self.blocks.last_mut() {
                Some(ContentBlock::Text { text }) => text.push_str(&delta),
                _ => self.blocks.push(ContentBlock::Text { text: delta }),
            },
            StreamEvent::ThinkingDelta(delta) if !delta.is_empty() => {
                match self.blocks.last_mut() {
                    // A signed block is closed; new thinking after it is a new block.
                    Some(ContentBlock::Thinking {
                        thinking,
                        signature: None,
                    }) => thinking.push_str(&delta),
                    _ => self.blocks.push(ContentBlock::Thinking {
                        thinking: delta,
                        signature: None,
                    }),
                }
            }
            StreamEvent::ThinkingSignature(part) if !part.is_empty() => {
                match self.blocks.last_mut() {
                    Some(ContentBlock::Thinking { signature, .. }) => {
                        signature.get_or_insert_with(String::new).push_str(&part);
                    }
                    _ => self.blocks.push(ContentBlock::Thinking {
                        thinking: String::new(),
                        signature: Some(part),
                    }),
                }
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                // A second start on an index still open means the first call ended unsaid.
                self.finish_call(index);
                self.blocks.push(ContentBlock::ToolUse(ToolCall {
                    id,
                    name,
                    input: serde_json::Value::Object(serde_json::Map::new()),
                }));
                self.pending.insert(
                    index,
                    PendingCall {
                        block: self.blocks.len() - 1,
                        arguments: String::new(),
                    },
                );
            }
            StreamEvent::ToolCallArgsDelta { index, json } => {
                if let Some(call) = self.pending.get_mut(&index) {
                    call.arguments.push_str(&json);
                }
            }
            StreamEvent::ToolCallEnd { index } => self.finish_call(index),
            StreamEvent::Usage(usage) => self.usage.merge_max(&usage),
            _ => {}
        }
    }

    /// The text written so far, thinking and tool calls left out.
    pub fn text_so_far(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The usage reported so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The reply so far, with every call still open closed.
    pub fn finish(mut self) -> Assembled {
        let mut open: Vec<usize> = self.pending.keys().copied().collect();
        open.sort_unstable();
        for index in open {
            self.finish_call(index);
        }
        Assembled {
            content: self.blocks,
            usage: self.usage,
            malformed_tool_args: self.malformed,
        }
    }

    fn finish_call(&mut self, index: usize) {
        let Some(call) = self.pending.remove(&index) else {
            return;
        };
        let Some(ContentBlock::ToolUse(tool_call)) = self.blocks.get_mut(call.block) else {
            return;
        };
        let raw = call.arguments.trim();
        if raw.is_empty() {
            return;
        }
        match serde_json::from_str::<serde_json::Value>(raw) {
            Ok(value @ serde_json::Value::Object(_)) => tool_call.input = value,
            Ok(_) => {
                self.malformed.insert(
                    tool_call.id.clone(),
                    format!("the arguments are not a JSON object: {}", excerpt(raw, 200)),
                );
            }
            Err(err) => {
                self.malformed.insert(
                    tool_call.id.clone(),
                    format!(
                        "the arguments are not valid JSON ({err}): {}",
                        excerpt(raw, 200)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(events: Vec<StreamEvent>, content: Vec<ContentBlock>, malformed: &[&str]) {
        let mut assembler = ReplyAssembler::new();
        for event in events {
            assembler.push(event);
        }
        let done = assembler.finish();
        assert_eq!(done.content, content);
        let ids: Vec<&str> = done
            .malformed_tool_args
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(ids, malformed);
    }

    fn call(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
        ContentBlock::ToolUse(ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        })
    }

    #[test]
    fn blocks_keep_their_order() {
        use StreamEvent::*;
        check(
            vec![
                ThinkingDelta("let me ".into()),
                ThinkingDelta("see".into()),
                ThinkingSignature("sig".into()),
                ThinkingDelta("again".into()),
                TextDelta("".into()),
                TextDelta("Hel".into()),
                TextDelta("lo".into()),
                ToolCallStart {
                    index: 1,
                    id: "a".into(),
                    name: "read".into(),
                },
                ToolCallArgsDelta {
                    index: 1,
                    json: "{\"path\":".into(),
                },
                ToolCallStart {
                    index: 2,
                    id: "b".into(),
                    name: "ls".into(),
                },
                ToolCallArgsDelta {
                    index: 1,
                    json: "\"x\"}".into(),
                },
                ToolCallEnd { index: 1 },
                ToolCallEnd { index: 2 },
                TextDelta("after".into()),
            ],
            vec![
                ContentBlock::Thinking {
                    thinking: "let me see".into(),
                    signature: Some("sig".into()),
                },
                ContentBlock::Thinking {
                    thinking: "again".into(),
                    signature: None,
                },
                ContentBlock::Text {
                    text: "Hello".into(),
                },
                call("a", "read", json!({"path": "x"})),
                call("b", "ls", json!({})),
                ContentBlock::Text {
                    text: "after".into(),
                },
            ],
            &[],
        );
    }

    #[test]
    fn bad_arguments_become_an_empty_object_and_a_note() {
        use StreamEvent::*;
        let mut assembler = ReplyAssembler::new();
        for event in [
            ToolCallStart {
                index: 0,
                id: "bad".into(),
                name: "edit".into(),
            },
            ToolCallArgsDelta {
                index: 0,
                json: "{\"path\": \"a".into(),
            },
            ToolCallStart {
                index: 1,
                id: "list".into(),
                name: "edit".into(),
            },
            ToolCallArgsDelta {
                index: 1,
                json: "[1, 2]".into(),
            },
        ] {
            assembler.push(event);
        }
        // Calls never closed by the stream are closed by `finish`.
        let done = assembler.finish();
        assert_eq!(
            done.content,
            vec![
                call("bad", "edit", json!({})),
                call("list", "edit", json!({}))
            ]
        );
        let note = &done.malformed_tool_args["bad"];
        assert!(note.contains("not valid JSON"), "{note}");
        assert!(note.contains("{\"path\": \"a"), "{note}");
        assert!(done.malformed_tool_args["list"].contains("not a JSON object"));
    }

    #[test]
    fn usage_keeps_the_largest_counts() {
        let mut assembler = ReplyAssembler::new();
        assembler.push(StreamEvent::Usage(Usage {
            input_tokens: 100,
            output_tokens: 1,
            ..Usage::default()
        }));
        assembler.push(StreamEvent::Usage(Usage {
            output_tokens: 25,
            ..Usage::default()
        }));
        let done = assembler.finish();
        assert_eq!(
            done.usage,
            Usage {
                input_tokens: 100,
                output_tokens: 25,
                ..Usage::default()
            }
        );
    }
}
