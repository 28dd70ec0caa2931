//! A stored session's transcript, rebuilt from its journal: everything that was said and
//! done, compactions included (the model's history shrinks; what the person sees does not).
//! tern's own notes to the model (per-turn context, loop-guard corrections) are left out.

use super::cell::{Cell, CellKind, ToolCell, ToolStatus};
use super::stream::end_notice;
use crate::domain::{ContentBlock, ErrorCategory, TurnStop};
use crate::store::{JournalEvent, JournalRecord};
use std::collections::HashMap;
use std::time::Duration;

/// The cells of a stored session, oldest first.
pub fn cells_from_history(records: &[JournalRecord]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    // Open tool calls: id → (cell index, when the call was journaled).
    let mut open: HashMap<String, (usize, i64)> = HashMap::new();
    let push = |cells: &mut Vec<Cell>, kind| cells.push(Cell::new(kind));
    for record in records {
        match &record.event {
            JournalEvent::InputAccepted { text, .. } => push(
                &mut cells,
                CellKind::User {
                    text: text.clone(),
                    queued: false,
                },
            ),
            JournalEvent::AssistantMessage { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                            push(
                                &mut cells,
                                CellKind::Thinking {
                                    text: thinking.clone(),
                                },
                            )
                        }
                        ContentBlock::Text { text } if !text.trim().is_empty() => push(
                            &mut cells,
                            CellKind::Assistant {
                                text: text.clone(),
                                streaming: false,
                                interrupted: false,
                            },
                        ),
                        ContentBlock::ToolUse(call) => {
                            open.insert(call.id.clone(), (cells.len(), record.at_ms));
                            push(
                                &mut cells,
                                CellKind::Tool(ToolCell {
                                    id: call.id.clone(),
                                    name: call.name.clone(),
                                    input: call.input.clone(),
                                    status: ToolStatus::Done {
                                        ok: false,
                                        took: None,
                                    },
                                    output: "no result was recorded".to_owned(),
                                }),
                            );
                        }
                        _ => {}
                    }
                }
            }
            JournalEvent::ToolResults { results } => {
                for result in results {
                    let Some((at, asked)) = open.remove(&result.tool_use_id) else {
                        continue;
                    };
                    if let CellKind::Tool(tool) = cells[at].edit() {
                        let took = u64::try_from(record.at_ms - asked).ok();
                        tool.status = ToolStatus::Done {
                            ok: !result.is_error,
                            took: took.map(Duration::from_millis),
                        };
                        tool.output = result.content.clone();
                    }
                }
            }
            JournalEvent::Compacted { dropped, notes, .. } => {
                let how = if notes.is_some() {
                    "summarised in notes"
                } else {
                    "removed"
                };
                push(
                    &mut cells,
                    CellKind::Notice {
                        text: format!(
                            "compacted: the {dropped} oldest messages of the model's history \
                             were {how}; the transcript above is kept whole"
                        ),
                    },
                );
            }
            JournalEvent::TurnCompleted { stop } if *stop != TurnStop::Completed => push(
                &mut cells,
                CellKind::Notice {
                    text: end_notice(*stop),
                },
            ),
            JournalEvent::TurnFailed {
                category, message, ..
            } => {
                let interrupted = *category == ErrorCategory::Cancelled
                    || matches!(record.event.turn_stop(), Some(TurnStop::Interrupted));
                if interrupted
                    && let Some(last) = cells.last_mut()
                    && matches!(last.kind, CellKind::Assistant { .. })
                    && let CellKind::Assistant { interrupted, .. } = last.edit()
                {
                    *interrupted = true;
                }
                let kind = if interrupted {
                    CellKind::Notice {
                        text: "interrupted".to_owned(),
                    }
                } else {
                    CellKind::Error {
                        category: category.to_string(),
                        message: message.clone(),
                    }
                };
                push(&mut cells, kind);
            }
            JournalEvent::TurnResumed { .. } => push(
                &mut cells,
                CellKind::Notice {
                    text: "tern restarted; the turn went on by itself".to_owned(),
                },
            ),
            _ => {}
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Audience, InputKind, Sender, ToolCall, ToolResult};

    fn records(events: Vec<(i64, JournalEvent)>) -> Vec<JournalRecord> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, (at_ms, event))| JournalRecord {
                seq: i as u64 + 1,
                at_ms,
                event,
            })
            .collect()
    }

    fn said(text: &str) -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: text.into(),
        }
    }

    #[test]
    fn the_journal_becomes_the_transcript_the_person_saw() {
        let cells = cells_from_history(&records(vec![
            (0, said("find the bug")),
            (
                1,
                JournalEvent::NudgeAdded {
                    text: "[system: …]".into(),
                },
            ),
            (
                2,
                JournalEvent::AssistantMessage {
                    model: "m".into(),
                    content: vec![
                        ContentBlock::Thinking {
                            thinking: "look in queue.rs".into(),
                            signature: None,
                        },
                        ContentBlock::Text {
                            text: "Looking.".into(),
                        },
                        ContentBlock::ToolUse(ToolCall {
                            id: "t1".into(),
                            name: "grep".into(),
                            input: serde_json::json!({"pattern": "push"}),
                        }),
                    ],
                },
            ),
            (
                1502,
                JournalEvent::ToolResults {
                    results: vec![ToolResult::ok("t1", "src/queue.rs:42")],
                },
            ),
            (
                1600,
                JournalEvent::Compacted {
                    messages: Vec::new(),
                    dropped: 4,
                    results_cleared: 1,
                    notes: Some("notes".into()),
                },
            ),
            (
                1700,
                JournalEvent::AssistantMessage {
                    model: "m".into(),
                    content: vec![ContentBlock::Text {
                        text: "It is in pu".into(),
                    }],
                },
            ),
            (
                1701,
                JournalEvent::TurnFailed {
                    category: ErrorCategory::Cancelled,
                    message: "cancelled".into(),
                    stop: Some(TurnStop::Interrupted),
                },
            ),
        ]));
        let kinds: Vec<&CellKind> = cells.iter().map(|c| &c.kind).collect();
        assert!(
            matches!(kinds[0], CellKind::User { text, queued: false } if text == "find the bug")
        );
        assert!(matches!(kinds[1], CellKind::Thinking { .. }));
        assert!(matches!(kinds[2], CellKind::Assistant { text, .. } if text == "Looking."));
        let CellKind::Tool(tool) = kinds[3] else {
            panic!("{kinds:?}")
        };
        assert_eq!(
            tool.status,
            ToolStatus::Done {
                ok: true,
                took: Some(Duration::from_millis(1500))
            }
        );
        assert_eq!(tool.output, "src/queue.rs:42");
        assert!(matches!(kinds[4], CellKind::Notice { text } if text.contains("4 oldest")));
        assert!(matches!(
            kinds[5],
            CellKind::Assistant { text, interrupted: true, .. } if text == "It is in pu"
        ));
        assert!(matches!(kinds[6], CellKind::Notice { text } if text == "interrupted"));
        assert_eq!(kinds.len(), 7, "the nudge is not shown");
    }

    #[test]
    fn a_call_the_journal_never_answered_says_so() {
        let cells = cells_from_history(&records(vec![(
            0,
            JournalEvent::AssistantMessage {
                model: "m".into(),
                content: vec![ContentBlock::ToolUse(ToolCall {
                    id: "t9".into(),
                    name: "glob".into(),
                    input: serde_json::json!({}),
                })],
            },
        )]));
        let CellKind::Tool(tool) = &cells[0].kind else {
            panic!()
        };
        assert_eq!(tool.output, "no result was recorded");
    }
}
