//! Fitting the picker's text into cells: cutting with an ellipsis, padding, and the short
//! counts and ages its rows show.

use crate::tui::wrap::str_width;
use ratatui::buffer::CellWidth;
use unicode_segmentation::UnicodeSegmentation;

/// `text` on one line cut to `width` cells, ending with "…" when cut. Control characters
/// and line breaks become spaces.
pub fn fit(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    let flat = flatten(text);
    if str_width(&flat) <= width {
        return flat;
    }
    for grapheme in flat.graphemes(true) {
        let cells = usize::from(grapheme.cell_width());
        if used + cells + 1 > width {
            break;
        }
        out.push_str(grapheme);
        used += cells;
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// `text` cut to `width` cells from the left: "…" and its end, for paths and long queries.
pub fn fit_left(text: &str, width: usize) -> String {
    let flat = flatten(text);
    if str_width(&flat) <= width {
        return flat;
    }
    if width == 0 {
        return String::new();
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for grapheme in flat.graphemes(true).rev() {
        let cells = usize::from(grapheme.cell_width());
        if used + cells + 1 > width {
            break;
        }
        kept.push(grapheme);
        used += cells;
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    out
}

/// Control characters (newlines, tabs, escapes) as spaces, so text stays on its line and
/// cannot act on the terminal.
pub(super) fn flatten(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `text` followed by spaces up to `width` cells.
pub fn pad(text: &str, width: usize) -> String {
    let used = str_width(text);
    format!("{text}{}", " ".repeat(width.saturating_sub(used)))
}

pub(super) fn pad_left(text: &str, width: usize) -> String {
    let used = str_width(text);
    format!("{}{text}", " ".repeat(width.saturating_sub(used)))
}

/// How long ago `then_ms` was at `now_ms`: "just now", "5m ago", "3h ago", "2d ago",
/// "4mo ago", "2y ago".
pub fn ago(now_ms: i64, then_ms: i64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    let (count, unit) = match secs {
        s if s < 60 => return "just now".to_owned(),
        s if s < 3600 => (s / 60, "m"),
        s if s < 86_400 => (s / 3600, "h"),
        s if s < 30 * 86_400 => (s / 86_400, "d"),
        s if s < 365 * 86_400 => (s / (30 * 86_400), "mo"),
        s => (s / (365 * 86_400), "y"),
    };
    format!("{count}{unit} ago")
}

/// "1 msg", "12 msgs", "12k msgs".
pub(super) fn messages(count: u64) -> String {
    match count {
        1 => "1 msg".to_owned(),
        n if n < 10_000 => format!("{n} msgs"),
        n => format!("{}k msgs", n / 1000),
    }
}

pub(super) fn plural(count: usize, word: &str) -> String {
    match (count, word) {
        (1, _) => word.to_owned(),
        (_, "match") => "matches".to_owned(),
        _ => format!("{word}s"),
    }
}

/// `n` with thousands separated by commas.
pub(super) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
