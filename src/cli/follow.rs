//! Following a turn's feed in the line front ends (`tern run`, the line mode) through a
//! change of owner. A turn the leaving owner drained voids what its cut model call had
//! streamed; the session is then followed again where it is served next, and what the next
//! owner journaled before the feed was back (the turn asked again, perhaps finished) is shown
//! from the journal, so the output holds each answer once.

use super::render::{Renderer, TurnEnd};
use crate::domain::{ContentBlock, ErrorCategory, SessionId, TurnStop};
use crate::gateway::remote::OWNER_LEFT;
use crate::gateway::{Feed, FeedItem, SessionService};
use crate::session::{OutputFilter, SUBSCRIBER_BACKLOG, SessionEvent};
use crate::store::{JournalEvent, JournalRecord};

/// Follows the turn of session `id` through its feed.
pub(super) struct Follower<'a> {
    service: &'a SessionService,
    id: &'a SessionId,
    /// The turn ended drained (its owner left) and has not been taken up again yet.
    drained: bool,
    /// How the person goes on with a turn that was not taken up.
    go_on: String,
}

impl<'a> Follower<'a> {
    /// A follower whose person goes on as `go_on` says when a turn is not taken up.
    pub fn new(service: &'a SessionService, id: &'a SessionId, go_on: String) -> Self {
        Self {
            service,
            id,
            drained: false,
            go_on,
        }
    }

    /// Shows one item of the feed; the turn's end once it has ended. A feed the owner
    /// dropped (it left, or this reader fell behind) is replaced in `feed` by one from the
    /// last position read.
    pub async fn step(
        &mut self,
        item: Option<FeedItem>,
        feed: &mut Feed,
        renderer: &mut Renderer,
    ) -> anyhow::Result<Option<TurnEnd>> {
        Ok(match item {
            Some(FeedItem::Event(stamped)) => match &stamped.event {
                // Stopped for a handover: the next owner may ask again.
                SessionEvent::TurnCompleted {
                    stop: TurnStop::Drained,
                    ..
                } => {
                    renderer.void_cut(true);
                    self.drained = true;
                    None
                }
                event => renderer.event(event),
            },
            Some(FeedItem::Replay { records }) => {
                let end = replayed(&mut self.drained, renderer, &records);
                if end.is_some() && self.drained {
                    self.not_taken_up();
                }
                end
            }
            // The journal is read up to now: a drained turn the next owner took up has
            // said so by now (it resumes turns before it serves anyone).
            Some(FeedItem::Live { .. }) if self.drained => {
                self.not_taken_up();
                Some(TurnEnd::Failed(ErrorCategory::Internal))
            }
            Some(FeedItem::Live { .. }) => None,
            Some(FeedItem::Dropped(dropped)) => {
                // What streamed and was not journaled is gone with the feed; the journal has
                // what stands.
                renderer.void_cut(dropped.reason == OWNER_LEFT);
                *feed = self
                    .service
                    .subscribe(
                        self.id,
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

    fn not_taken_up(&self) {
        eprintln!(
            "tern: the turn stopped when the tern that ran it quit, and was not taken up again; {}",
            self.go_on
        );
    }
}

/// Shows what `records`, read from the journal after a feed was followed again, hold of the
/// turn, up to its end: the end, if they hold one. `drained` says whether the turn stands
/// drained and not taken up again.
fn replayed(
    drained: &mut bool,
    renderer: &mut Renderer,
    records: &[JournalRecord],
) -> Option<TurnEnd> {
    let mut text = String::new();
    for record in records {
        let event = match &record.event {
            // Another message came after the drained turn, which was not taken up.
            JournalEvent::InputAccepted { .. } if *drained => {
                return Some(TurnEnd::Failed(ErrorCategory::Internal));
            }
            JournalEvent::TurnResumed { .. } => {
                text.clear();
                *drained = false;
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
                renderer.void_cut(true);
                *drained = true;
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
        // What comes after the end (another front end's message) is not this turn's.
        if let Some(end) = renderer.event(&event) {
            return Some(end);
        }
    }
    None
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
        let drained_end = JournalEvent::TurnCompleted {
            stop: TurnStop::Drained,
        };
        let resumed = JournalEvent::TurnResumed {
            notice: "carried on".into(),
        };
        let done = JournalEvent::TurnCompleted {
            stop: TurnStop::Completed,
        };
        let failed = JournalEvent::TurnFailed {
            category: ErrorCategory::Network,
            message: "down".into(),
            stop: None,
        };
        let mut drained = false;
        let mut renderer = Renderer::discarding(OutputFormat::Text);
        // Drained and resumed, still running: no end yet.
        let running = records(vec![drained_end.clone(), resumed.clone()]);
        assert_eq!(replayed(&mut drained, &mut renderer, &running), None);
        assert!(!drained);
        // Resumed and finished before the feed was back; what came after is another turn's.
        let finished = records(vec![
            drained_end.clone(),
            resumed.clone(),
            answer("A"),
            done,
            answer("another turn's"),
            failed.clone(),
        ]);
        assert_eq!(
            replayed(&mut drained, &mut renderer, &finished),
            Some(TurnEnd::Completed)
        );
        // A failure is the end too.
        assert_eq!(
            replayed(&mut drained, &mut renderer, &records(vec![resumed, failed])),
            Some(TurnEnd::Failed(ErrorCategory::Network))
        );
        // Drained alone: the feed goes on to tell whether the next owner takes it up.
        let alone = records(vec![drained_end.clone()]);
        assert_eq!(replayed(&mut drained, &mut renderer, &alone), None);
        assert!(drained);
        // Not taken up, and another message ran since: its answer is not this turn's.
        let other = records(vec![
            drained_end,
            JournalEvent::InputAccepted {
                sender: crate::domain::Sender::local_user(),
                audience: crate::domain::Audience::Personal,
                kind: crate::domain::InputKind::Person,
                text: "another".into(),
            },
            answer("not this turn's"),
            JournalEvent::TurnCompleted {
                stop: TurnStop::Completed,
            },
        ]);
        assert_eq!(
            replayed(&mut drained, &mut renderer, &other),
            Some(TurnEnd::Failed(ErrorCategory::Internal))
        );
    }
}
