//! A person's long message folded to what its cell shows: its first and last lines with the
//! count of those between, so a pasted log of a hundred thousand lines costs the transcript no
//! more than a screenful to lay out. Ctrl-O (the view's `tools_open`) shows more of it, still
//! bounded. A message of megabytes is not even kept whole in its cell: only the lines the cell
//! can show open are ([`kept`]); the session keeps the whole text (as an artifact).

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
/// Bytes the note of a cut line may take beyond [`MAX_LINE_BYTES`].
const CUT_NOTE_ROOM: usize = 40;
/// Bytes of a message its cell keeps whole; of a longer one it keeps the lines it can show.
const KEEP_WHOLE_BYTES: usize = 256 * 1024;

/// What a cell keeps of the message `text`, and how many of its lines that leaves out: all
/// of it when it is within [`KEEP_WHOLE_BYTES`]; else its lines cut to [`MAX_LINE_BYTES`],
/// and of more than the cell shows open only the first and last [`OPEN_END_LINES`], the
/// count of those between being the second value. Each kept line ends in `\n`, so empty ones
/// are kept too. What is kept is the same for the same text, and at most about 800 KB.
pub fn kept(text: &str) -> (String, usize) {
    if text.len() <= KEEP_WHOLE_BYTES {
        return (text.to_owned(), 0);
    }
    let count = text.lines().count();
    let keep = |kept: &mut String, line: &str| {
        kept.push_str(&cut(line));
        kept.push('\n');
    };
    let mut kept = String::new();
    if count <= 2 * OPEN_END_LINES + 1 {
        text.lines().for_each(|line| keep(&mut kept, line));
        return (kept, 0);
    }
    text.lines()
        .take(OPEN_END_LINES)
        .for_each(|line| keep(&mut kept, line));
    let mut tail: Vec<&str> = text.lines().rev().take(OPEN_END_LINES).collect();
    tail.reverse();
    tail.into_iter().for_each(|line| keep(&mut kept, line));
    (kept, count - 2 * OPEN_END_LINES)
}

/// The message a cell kept, as `/export` writes it: whole, or with a line saying how many
/// lines were left out where they were.
pub fn exported(text: &str, left_out: usize) -> std::borrow::Cow<'_, str> {
    if left_out == 0 {
        return text.into();
    }
    let head: Vec<&str> = text.lines().take(OPEN_END_LINES).collect();
    let tail: Vec<&str> = text.lines().skip(OPEN_END_LINES).collect();
    format!(
        "{}\n\n[… {} lines left out here; the session keeps the whole message]\n\n{}",
        head.join("\n"),
        crate::domain::cut::group_digits(left_out as u64),
        tail.join("\n")
    )
    .into()
}

/// `text` after a marker, indented as wide on the lines after it: whole when short, else its
/// first and last lines around a line counting those left out (`left_out` lines were already
/// left out of `text` by [`kept`], between its halves). Only the lines shown are wrapped, so
/// the cost is bounded whatever the message's size.
#[allow(clippy::too_many_arguments)]
pub fn folded_message(
    text: &str,
    left_out: usize,
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
    let kept_lines = text.lines().count();
    let count = kept_lines + left_out;
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
        (kept_lines, 0)
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

/// `line`, or its start and its length when it is too long to lay out. A line cut already
/// (by [`kept`]) is within the room its note takes, and is not cut again.
fn cut(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LINE_BYTES + CUT_NOTE_ROOM {
        return line.into();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … ({} bytes in all)", &line[..end], line.len()).into()
}
