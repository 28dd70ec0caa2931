//! How each appended event changes its session's index entry: counts, times, title, model,
//! tokens and where the session stands.
//!
//! Pure functions over data, applied inside the append's write transaction so the index and
//! the journal never disagree.

use super::event::JournalEvent;
use super::meta::{Lifecycle, ParentRun, SessionMeta};
use crate::domain::TurnStop;

/// Longest title derived from an input, in characters.
const TITLE_CHARS: usize = 60;

/// Longest start of the first input kept for the picker, in characters.
const FIRST_INPUT_CHARS: usize = 200;

/// Folds one appended event into the session's summary.
pub(super) fn apply(meta: &mut SessionMeta, event: &JournalEvent, at_ms: i64) {
    meta.event_count += 1;
    // Never move backwards, so a clock stepping back cannot reorder the session list.
    meta.updated_at_ms = meta.updated_at_ms.max(at_ms);
    match event {
        JournalEvent::InputAccepted {
            text, sender, kind, ..
        } => {
            // The first input that has any text names the session, unless a title was already
            // chosen (TitleChanged, or given at creation).
            if meta.title.is_empty() {
                meta.title = title_from_input(text);
            }
            if meta.first_input.is_empty() {
                meta.first_input = text.trim().chars().take(FIRST_INPUT_CHARS).collect();
            }
            meta.input_count += 1;
            meta.message_count += 1;
            meta.lifecycle = Lifecycle::Working;
            // Automation (reminders, jobs, webhooks) keeps no session fresh.
            if !kind.is_automation() && !sender.automated {
                meta.last_activity_ms = meta.last_activity_ms.max(at_ms);
            }
        }
        JournalEvent::TitleChanged { title } => meta.title = title.clone(),
        JournalEvent::AssistantMessage { model, .. } => {
            meta.message_count += 1;
            if !model.is_empty() {
                meta.model = model.clone();
            }
        }
        JournalEvent::Usage { model, usage } => {
            meta.tokens.add(usage);
            if !model.is_empty() {
                meta.model = model.clone();
            }
        }
        JournalEvent::Compacted { .. } => meta.compaction_count += 1,
        JournalEvent::SubagentRoleSet { role } => {
            meta.parent = Some(ParentRun {
                session: role.parent.clone(),
                run_id: role.run_id.clone(),
                agent: role.agent.clone(),
            });
        }
        JournalEvent::TurnResumed { .. } => meta.lifecycle = Lifecycle::Working,
        JournalEvent::Passivated { .. } => meta.lifecycle = Lifecycle::Resting,
        JournalEvent::TurnCompleted { .. } | JournalEvent::TurnFailed { .. } => {
            meta.lifecycle = match event.turn_stop() {
                Some(TurnStop::Drained) => Lifecycle::Drained,
                _ => Lifecycle::Idle,
            };
        }
        _ => {}
    }
}

/// A title from an input's text: its first non-blank line, cut near 60 characters, at a word
/// boundary when one is close.
pub fn title_from_input(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= TITLE_CHARS {
        return line;
    }
    let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    let ends_at_word = line.chars().nth(TITLE_CHARS - 1) == Some(' ');
    // Prefer ending at a word when that keeps at least two thirds of the room.
    let cut = match cut.rfind(' ') {
        _ if ends_at_word => cut.as_str(),
        Some(space) if cut[..space].chars().count() >= TITLE_CHARS * 2 / 3 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        Audience, ContentBlock, ErrorCategory, InputKind, Sender, SessionId, SessionKey, Usage,
    };

    fn input(text: &str, kind: InputKind) -> JournalEvent {
        JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind,
            text: text.into(),
        }
    }

    fn fold(events: &[(i64, JournalEvent)]) -> SessionMeta {
        let id = SessionId::from_string("s1");
        let mut meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 10);
        for (at, event) in events {
            apply(&mut meta, event, *at);
        }
        meta
    }

    #[test]
    fn the_index_counts_messages_tokens_and_compactions() {
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_creation_input_tokens: 5,
            cache_read_input_tokens: 70,
        };
        let meta = fold(&[
            (
                20,
                input("  first question\nwith detail", InputKind::Person),
            ),
            (
                21,
                JournalEvent::AssistantMessage {
                    model: "m1".into(),
                    content: vec![ContentBlock::Text { text: "a".into() }],
                },
            ),
            (
                21,
                JournalEvent::Usage {
                    model: "m1".into(),
                    usage,
                },
            ),
            (22, JournalEvent::completed()),
            (30, input("second", InputKind::Person)),
            (
                31,
                JournalEvent::Usage {
                    model: "m2".into(),
                    usage,
                },
            ),
            (
                32,
                JournalEvent::Compacted {
                    messages: Vec::new(),
                    dropped: 1,
                    results_cleared: 0,
                    notes: None,
                },
            ),
        ]);
        assert_eq!(meta.message_count, 3);
        assert_eq!(meta.input_count, 2);
        assert_eq!(meta.first_input, "first question\nwith detail");
        assert_eq!(meta.title, "first question");
        assert_eq!(meta.tokens.input_tokens, 200);
        assert_eq!(meta.tokens.cache_read_input_tokens, 140);
        assert_eq!(meta.tokens.output_tokens, 40);
        assert_eq!(meta.model, "m2");
        assert_eq!(meta.compaction_count, 1);
        assert_eq!(
            meta.lifecycle,
            Lifecycle::Working,
            "the second turn is open"
        );
        assert_eq!(meta.last_activity_ms, 30);
        assert_eq!(meta.updated_at_ms, 32);
    }

    #[test]
    fn the_lifecycle_follows_turn_ends_rest_and_drains() {
        let failed = JournalEvent::TurnFailed {
            category: ErrorCategory::Network,
            message: "x".into(),
            stop: None,
        };
        let drained = JournalEvent::TurnCompleted {
            stop: TurnStop::Drained,
        };
        let check = |events: Vec<JournalEvent>, expected: Lifecycle| {
            let events: Vec<_> = events.into_iter().map(|e| (1, e)).collect();
            assert_eq!(fold(&events).lifecycle, expected, "{events:?}");
        };
        check(vec![], Lifecycle::Idle);
        check(vec![input("x", InputKind::Person)], Lifecycle::Working);
        check(vec![input("x", InputKind::Person), failed], Lifecycle::Idle);
        check(
            vec![input("x", InputKind::Person), drained],
            Lifecycle::Drained,
        );
        check(
            vec![JournalEvent::TurnResumed { notice: "n".into() }],
            Lifecycle::Working,
        );
        check(
            vec![JournalEvent::Passivated { idle_secs: 3600 }],
            Lifecycle::Resting,
        );
    }

    #[test]
    fn automation_keeps_no_session_fresh() {
        let meta = fold(&[
            (20, input("person", InputKind::Person)),
            (50, input("reminder", InputKind::Reminder)),
            (60, input("job done", InputKind::JobResult)),
        ]);
        assert_eq!(meta.last_activity_ms, 20);
        assert_eq!(meta.updated_at_ms, 60);
        let mut automated = Sender::local_user();
        automated.automated = true;
        let mut meta = fold(&[]);
        let event = JournalEvent::InputAccepted {
            sender: automated,
            audience: Audience::Team,
            kind: InputKind::Person,
            text: "bot".into(),
        };
        apply(&mut meta, &event, 99);
        assert_eq!(meta.last_activity_ms, 10, "creation time stands");
    }

    fn check_title(input: &str, expected: &str) {
        assert_eq!(title_from_input(input), expected, "input: {input:?}");
    }

    #[test]
    fn titles_take_the_first_non_blank_line() {
        check_title("  fix the build\nmore detail", "fix the build");
        check_title("\n\n   \nsecond   line  spaced", "second line spaced");
        check_title("", "");
    }

    #[test]
    fn long_titles_are_cut_at_a_word() {
        let input = "refactor the session actor so that compaction runs off the turn loop today";
        let title = title_from_input(input);
        assert_eq!(
            title,
            "refactor the session actor so that compaction runs off the…"
        );
        assert!(title.chars().count() <= TITLE_CHARS);
    }

    #[test]
    fn long_words_are_cut_mid_word() {
        let input = "x".repeat(100);
        let title = title_from_input(&input);
        assert_eq!(title.chars().count(), TITLE_CHARS);
        assert!(title.ends_with('…'));
    }
}
