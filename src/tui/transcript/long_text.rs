//! A person's long message folded to what its cell shows: its first and last lines with the
//! count of those between, so a pasted log of a hundred thousand lines costs the transcript no
//! more than a screenful to lay out. Ctrl-O (the view's `tools_open`) shows more of it, still
//! bounded; the whole text stays in the cell for `/export` and the session's journal.

use super::cell::View;
use crate::tui::theme::Theme;
use crate::tui::wrap::wrap_prefixed;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Lines of a message shown whole; a longer one is folded.
const FOLD_OVER_LINES: usize = 12;
/// Lines shown at each end of a folded message.
const COLLAPSED_END_LINES: usize = 4;
/// Lines shown at each end of a folded message while opened with Ctrl-O.
const OPEN_END_LINES: usize = 200;
/// Bytes of one line laid out; a longer line is cut, its length said.
const MAX_LINE_BYTES: usize = 2_000;

/// `text` after a marker, indented as wide on the lines after it: whole when short, else its
/// first and last lines around a line counting those left out. Only the lines shown are
/// wrapped, so the cost is bounded whatever the message's size.
pub fn folded_message(
    text: &str,
    width: u16,
    view: View,
    marker: &str,
    marker_style: Style,
    style: Style,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let first = Line::from(Span::styled(marker.to_owned(), marker_style));
    let rest = Line::from(" ".repeat(crate::tui::wrap::str_width(marker)));
    let wrap = |text: &str, lead: &Line<'_>| {
        let text = if text.is_empty() { " " } else { text };
        wrap_prefixed(&[Span::styled(text.to_owned(), style)], width, lead, &rest)
    };
    let count = text.lines().count();
    if count <= FOLD_OVER_LINES && text.len() <= MAX_LINE_BYTES * FOLD_OVER_LINES {
        return wrap(text, &first);
    }
    let ends = if view.tools_open {
        OPEN_END_LINES
    } else {
        COLLAPSED_END_LINES
    };
    // Folding away one line would save nothing: the fold's own line takes its room.
    let (head_count, hidden) = if count > 2 * ends + 1 {
        (ends, count - 2 * ends)
    } else {
        (count, 0)
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().take(head_count).enumerate() {
        out.extend(wrap(&cut(line), if i == 0 { &first } else { &rest }));
    }
    if hidden == 0 {
        return out;
    }
    let hint = if view.tools_open {
        "ctrl+o to fold"
    } else {
        "ctrl+o to show more"
    };
    out.push(Line::styled(
        format!("{}… {hidden} more lines · {hint}", rest_of(&rest)),
        theme.dim,
    ));
    let mut tail: Vec<&str> = text.lines().rev().take(ends).collect();
    tail.reverse();
    for line in tail {
        out.extend(wrap(&cut(line), &rest));
    }
    out
}

/// The indent's text.
fn rest_of(rest: &Line<'_>) -> String {
    rest.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// `line`, or its start and its length when it is too long to lay out.
fn cut(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LINE_BYTES {
        return line.into();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … ({} bytes in all)", &line[..end], line.len()).into()
}
