//! How each appended event changes its session's index entry: counts, times, title and model.
//!
//! Pure functions over data, applied inside the append's write transaction so the index and
//! the journal never disagree.

use super::event::JournalEvent;
use super::meta::SessionMeta;

/// Longest title derived from an input, in characters.
const TITLE_CHARS: usize = 60;

/// Folds one appended event into the session's summary.
pub(super) fn apply(meta: &mut SessionMeta, event: &JournalEvent, at_ms: i64) {
    meta.event_count += 1;
    // Never move backwards, so a clock stepping back cannot reorder the session list.
    meta.updated_at_ms = meta.updated_at_ms.max(at_ms);
    match event {
        JournalEvent::InputAccepted { text, .. } => {
            // The first input that has any text names the session, unless a title was already
            // chosen (TitleChanged, or given at creation).
            if meta.title.is_empty() {
                meta.title = title_from_input(text);
            }
            meta.input_count += 1;
        }
        JournalEvent::TitleChanged { title } => meta.title = title.clone(),
        JournalEvent::AssistantMessage { model, .. } | JournalEvent::Usage { model, .. }
            if !model.is_empty() =>
        {
            meta.model = model.clone();
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
