//! A stored session's transcript, rebuilt from its journal: everything that was said and
//! done, compactions included (the model's history shrinks; what the person sees does not).
//! tern's own notes to the model (per-turn context, loop-guard corrections) are left out.
//! Tool calls show the durations journaled with their results, and the status line starts
//! from the latest call's usage, so the session looks as it did when it was left.

use super::cell::{Cell, CellKind, ToolCell, ToolStatus};
use super::stream::end_notice;
use crate::domain::{ContentBlock, ErrorCategory, TurnStop, Usage};
use crate::gateway::catalog::{JournalEvent, JournalRecord};
use std::collections::HashMap;
use std::time::Duration;

/// The cells of a stored session, oldest first.
pub fn cells_from_history(records: &[JournalRecord]) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::new();
    // Open tool calls: id → (cell index, when the call was journaled or, for a call that can
    // change things, when its start was).
    let mut open: HashMap<String, (usize, i64)> = HashMap::new();
    let push = |cells: &mut Vec<Cell>, kind| cells.push(Cell::new(kind));
    for record in records {
        match &record.event {
            JournalEvent::InputAccepted { text, .. } => {
                let (text, left_out) = super::long_text::kept(text);
                push(
                    &mut cells,
                    CellKind::User {
                        text,
                        left_out,
                        queued: false,
                    },
                )
            }
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
            JournalEvent::ToolCallsStarted { call_ids } => {
                for id in call_ids {
                    if let Some((_, since)) = open.get_mut(id) {
                        *since = record.at_ms;
                    }
                }
            }
            JournalEvent::ToolResults { results, took_ms } => {
                for result in results {
                    let Some((at, since)) = open.remove(&result.tool_use_id) else {
                        continue;
                    };
                    let took = match took_ms {
                        // Measured when the call ran: what the live view showed.
                        Some(took_ms) => took_ms.get(&result.tool_use_id).copied(),
                        // An older journal: the time since the call's start was journaled,
                        // or else since the reply asking for it.
                        None => u64::try_from(record.at_ms - since).ok(),
                    };
                    if let CellKind::Tool(tool) = cells[at].edit() {
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

/// The usage of the session's latest model call, for the status line's context figure on
/// opening it: the figure it showed when the session was left. Calls whose server reported
/// no input are passed over, as the live status line passes over them.
pub fn last_usage(records: &[JournalRecord]) -> Option<Usage> {
    records.iter().rev().find_map(|record| match &record.event {
        JournalEvent::Usage { usage, .. } if usage.context_tokens() > 0 => Some(*usage),
        _ => None,
    })
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
                    took_ms: None,
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
            matches!(kinds[0], CellKind::User { text, queued: false, .. } if text == "find the bug")
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

    fn call(id: &str, name: &str) -> JournalEvent {
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: id.into(),
                name: name.into(),
                input: serde_json::json!({}),
            })],
        }
    }

    fn took(cells: &[Cell]) -> Vec<Option<Duration>> {
        cells
            .iter()
            .filter_map(|cell| match &cell.kind {
                CellKind::Tool(ToolCell {
                    status: ToolStatus::Done { took, .. },
                    ..
                }) => Some(*took),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn tool_times_are_the_ones_journaled_with_the_results() {
        // The reply at 0; a person approved the edit at 2000, it ran 135 ms; the read was
        // refused, so it never ran. The records' times would say 2.2 s.
        let cells = cells_from_history(&records(vec![
            (0, call("edit", "file_edit")),
            (0, call("read", "file_read")),
            (
                2000,
                JournalEvent::ToolCallsStarted {
                    call_ids: vec!["edit".into()],
                },
            ),
            (
                2200,
                JournalEvent::ToolResults {
                    results: vec![
                        ToolResult::ok("edit", "edited"),
                        ToolResult::error("read", "refused"),
                    ],
                    took_ms: Some([("edit".to_owned(), 135)].into()),
                },
            ),
        ]));
        assert_eq!(took(&cells), [Some(Duration::from_millis(135)), None]);
    }

    #[test]
    fn an_older_journal_times_a_call_from_its_journaled_start() {
        let cells = cells_from_history(&records(vec![
            (0, call("edit", "file_edit")),
            (0, call("read", "file_read")),
            (
                2000,
                JournalEvent::ToolCallsStarted {
                    call_ids: vec!["edit".into()],
                },
            ),
            (
                2140,
                JournalEvent::ToolResults {
                    results: vec![ToolResult::ok("edit", "ok"), ToolResult::ok("read", "x")],
                    took_ms: None,
                },
            ),
        ]));
        assert_eq!(
            took(&cells),
            [
                Some(Duration::from_millis(140)),
                Some(Duration::from_millis(2140))
            ]
        );
    }

    #[test]
    fn the_context_figure_comes_from_the_latest_call_that_counted() {
        let usage = |input: u64| JournalEvent::Usage {
            model: "m".into(),
            usage: Usage {
                input_tokens: input,
                output_tokens: 10,
                ..Usage::default()
            },
        };
        let journal = records(vec![
            (0, said("hi")),
            (1, usage(900)),
            (2, usage(1200)),
            // A server that did not count: passed over.
            (3, usage(0)),
            (4, JournalEvent::completed()),
        ]);
        assert_eq!(last_usage(&journal).map(|u| u.input_tokens), Some(1200));
        assert_eq!(last_usage(&records(vec![(0, said("hi"))])), None);
    }
}
