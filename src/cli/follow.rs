//! Following a turn's feed in the line front ends (`tern run`, the line mode) through a
//! change of owner. A turn the leaving owner drained voids what its cut model call had
//! streamed; the session is then followed again where it is served next, and what the next
//! owner journaled before the feed was back (the turn asked again, perhaps finished) is shown
//! from the journal, so the output holds each answer once.

use super::render::{Renderer, TurnEnd};
use crate::domain::{ContentBlock, ErrorCategory, SessionId, TurnStop};
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::{OutputFilter, SUBSCRIBER_BACKLOG, SessionEvent};
use crate::store::{JournalEvent, JournalRecord};

/// Shows one item of the feed of session `id`; the turn's end once it has ended. A feed the
/// owner dropped (it left, or this reader fell behind) is replaced in `feed` by one from the
/// last position read.
pub(super) async fn step(
    item: Option<FeedItem>,
    feed: &mut Feed,
    renderer: &mut Renderer,
    service: &SessionService,
    id: &SessionId,
) -> anyhow::Result<Option<TurnEnd>> {
    Ok(match item {
        Some(FeedItem::Event(stamped)) => match &stamped.event {
            // Stopped for a handover: the next owner asks again.
            SessionEvent::TurnCompleted {
                stop: TurnStop::Drained,
                ..
            } => {
                renderer.void_cut();
                None
            }
            event => renderer.event(event),
        },
        Some(FeedItem::Replay { records }) => replayed(renderer, &records),
        Some(FeedItem::Live { .. }) => None,
        Some(FeedItem::Dropped(dropped)) => {
            // What streamed and was not journaled is gone with the feed; the journal has
            // what stands.
            renderer.void_cut();
            *feed = service
                .subscribe(
                    id,
                    Some(dropped.last_at),
                    OutputFilter::ALL,
                    SUBSCRIBER_BACKLOG,
                )
                .await?;
            None
        }
        Some(FeedItem::Ended) | None => Some(TurnEnd::Failed(ErrorCategory::Internal)),
    })
}

/// Shows what `records`, read from the journal after a feed was followed again, hold of the
/// turn; its end, if they hold one that nothing resumed after.
fn replayed(renderer: &mut Renderer, records: &[JournalRecord]) -> Option<TurnEnd> {
    let mut text = String::new();
    let mut end = None;
    for record in records {
        let event = match &record.event {
            JournalEvent::TurnResumed { .. } => {
                text.clear();
                end = None;
                continue;
            }
            JournalEvent::AssistantMessage { content, .. } => {
                text.clear();
                for block in content {
                    match block {
                        ContentBlock::Text { text: said } => {
                            text.push_str(said);
                            renderer.event(&SessionEvent::TextDelta { text: said.clone() });
                        }
                        ContentBlock::ToolUse(call) => {
                            renderer.event(&SessionEvent::ToolCall {
                                id: call.id.clone(),
                                name: call.name.clone(),
                                input: call.input.clone(),
                            });
                        }
                        _ => {}
                    }
                }
                continue;
            }
            JournalEvent::ToolResults { results, .. } => {
                for result in results {
                    renderer.event(&SessionEvent::ToolResult {
                        id: result.tool_use_id.clone(),
                        name: String::new(),
                        content: result.content.clone(),
                        is_error: result.is_error,
                        duration_ms: None,
                    });
                }
                continue;
            }
            JournalEvent::Usage { model, usage } => SessionEvent::Usage {
                model: model.clone(),
                usage: *usage,
            },
            JournalEvent::TurnCompleted {
                stop: TurnStop::Drained,
            } => {
                renderer.void_cut();
                continue;
            }
            JournalEvent::TurnCompleted { stop } => SessionEvent::TurnCompleted {
                text: std::mem::take(&mut text),
                usage: Default::default(),
                stop: *stop,
            },
            JournalEvent::TurnFailed {
                category,
                message,
                stop,
            } => SessionEvent::TurnFailed {
                category: *category,
                message: message.clone(),
                stop: stop.unwrap_or(TurnStop::Error {
                    category: *category,
                }),
            },
            _ => continue,
        };
        if let Some(ended) = renderer.event(&event) {
            end = Some(ended);
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::render::OutputFormat;
    use crate::testing::numbered as records;

    fn answer(text: &str) -> JournalEvent {
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    #[test]
    fn a_turn_read_from_the_journal_ends_only_where_nothing_resumed_it() {
        let drained = JournalEvent::TurnCompleted {
            stop: TurnStop::Drained,
        };
        let resumed = JournalEvent::TurnResumed {
            notice: "carried on".into(),
        };
        let done = JournalEvent::TurnCompleted {
            stop: TurnStop::Completed,
        };
        let mut renderer = Renderer::new(OutputFormat::Text);
        // Drained and resumed, still running: no end yet.
        let running = records(vec![drained.clone(), resumed.clone()]);
        assert_eq!(replayed(&mut renderer, &running), None);
        // Resumed and finished before the feed was back.
        let finished = records(vec![drained.clone(), resumed.clone(), answer("A"), done]);
        assert_eq!(replayed(&mut renderer, &finished), Some(TurnEnd::Completed));
        // A failure after it is the end.
        let failed = records(vec![
            resumed,
            JournalEvent::TurnFailed {
                category: ErrorCategory::Network,
                message: "down".into(),
                stop: None,
            },
        ]);
        assert_eq!(
            replayed(&mut renderer, &failed),
            Some(TurnEnd::Failed(ErrorCategory::Network))
        );
        // Drained alone: the feed goes on to tell whether the next owner takes it up.
        assert_eq!(replayed(&mut renderer, &records(vec![drained])), None);
    }
}
