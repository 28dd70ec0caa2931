//! A stored session's transcript, rebuilt from its journal: everything that was said and
//! done, compactions included (the model's history shrinks; what the person sees does not).
//! tern's own notes to the model (per-turn context, loop-guard corrections) are left out.

use super::cell::{Cell, CellKind, ToolCell, ToolStatus};
use super::stream::stop_words;
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
                    text: format!("the turn ended: {}", stop_words(*stop)),
                },
            ),
            JournalEvent::TurnFailed {
                category, message, ..
            } => {
                let interrupted = *category == ErrorCategory::Cancelled
                    || matches!(record.event.turn_stop(), Some(TurnStop::Interrupted));
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
