//! The preview of a session: the last few things the person and the assistant said, taken
//! from the end of its journal (`Store::tail`) and shortened for a small pane. Pure.

use crate::domain::ContentBlock;
use crate::gateway::catalog::{JournalEvent, JournalRecord};

/// Journal records read from the end of a session for its preview. Tool results and usage
/// records sit between the messages, so this is several times the messages shown.
pub const TAIL_RECORDS: usize = 48;

/// Most messages a preview keeps.
const MESSAGES: usize = 8;

/// Longest text kept of one message, in characters; the pane shows a few lines of it.
const MESSAGE_CHARS: usize = 400;

/// Who said a previewed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    Person,
    Assistant,
}

/// One message of a preview, its whitespace collapsed and its length capped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewMessage {
    pub speaker: Speaker,
    pub text: String,
}

/// The last messages among `records` (oldest first): inputs and the assistant's text.
/// Messages with no text (a reply that only called tools) are left out.
pub fn preview_of(records: &[JournalRecord]) -> Vec<PreviewMessage> {
    let mut messages: Vec<PreviewMessage> = records
        .iter()
        .rev()
        .filter_map(|record| {
            let (speaker, text) = match &record.event {
                JournalEvent::InputAccepted { text, .. } => (Speaker::Person, shorten(text)),
                JournalEvent::AssistantMessage { content, .. } => {
                    let text: Vec<&str> = content
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    (Speaker::Assistant, shorten(&text.join(" ")))
                }
                _ => return None,
            };
            (!text.is_empty()).then_some(PreviewMessage { speaker, text })
        })
        .take(MESSAGES)
        .collect();
    messages.reverse();
    messages
}

/// `text` on one line (runs of whitespace, newlines included, become one space), cut to
/// [`MESSAGE_CHARS`] characters with an ellipsis.
pub fn shorten(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if chars > 0 {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= MESSAGE_CHARS {
                out.push('…');
                return out;
            }
            // Control characters would act on the terminal; whitespace is already gone.
            if !c.is_control() {
                out.push(c);
                chars += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Audience, InputKind, Sender, ToolCall, Usage};

    fn record(seq: u64, event: JournalEvent) -> JournalRecord {
        JournalRecord {
            seq,
            at_ms: 0,
            event,
        }
    }

    fn input(text: &str) -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: text.into(),
        }
    }

    fn reply(blocks: Vec<ContentBlock>) -> JournalEvent {
        JournalEvent::AssistantMessage {
            model: "m".into(),
            content: blocks,
        }
    }

    #[test]
    fn the_preview_keeps_inputs_and_replies_in_order() {
        let records = vec![
            record(1, input("fix the\n\n  flaky   test")),
            record(
                2,
                reply(vec![ContentBlock::ToolUse(ToolCall {
                    id: "c".into(),
                    name: "grep".into(),
                    input: serde_json::json!({}),
                })]),
            ),
            record(
                3,
                JournalEvent::Usage {
                    model: "m".into(),
                    usage: Usage::default(),
                },
            ),
            record(
                4,
                reply(vec![
                    ContentBlock::Thinking {
                        thinking: "hidden".into(),
                        signature: None,
                    },
                    ContentBlock::Text {
                        text: "Found it.".into(),
                    },
                    ContentBlock::Text {
                        text: "Fixed.".into(),
                    },
                ]),
            ),
        ];
        assert_eq!(
            preview_of(&records),
            [
                PreviewMessage {
                    speaker: Speaker::Person,
                    text: "fix the flaky test".into()
                },
                PreviewMessage {
                    speaker: Speaker::Assistant,
                    text: "Found it. Fixed.".into()
                },
            ]
        );
    }

    #[test]
    fn only_the_last_messages_are_kept() {
        let records: Vec<_> = (0..20)
            .map(|i| record(i, input(&format!("m{i}"))))
            .collect();
        let preview = preview_of(&records);
        assert_eq!(preview.len(), MESSAGES);
        assert_eq!(preview[0].text, "m12");
        assert_eq!(preview[MESSAGES - 1].text, "m19");
    }

    #[test]
    fn long_and_odd_text_is_shortened_safely() {
        let long = "word ".repeat(500);
        let short = shorten(&long);
        assert_eq!(short.chars().count(), MESSAGE_CHARS + 1);
        assert!(short.ends_with('…'));
        assert_eq!(shorten("a\u{1b}[31mb\u{7}"), "a[31mb");
        assert_eq!(shorten("   \n\t "), "");
        assert_eq!(
            shorten(&"é".repeat(1000)).chars().count(),
            MESSAGE_CHARS + 1
        );
    }
}
