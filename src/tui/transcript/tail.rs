//! The end of a streaming paragraph, for a view that shows only its last lines (a run's
//! pane): laying out the whole paragraph on every frame would cost more the longer a run
//! writes.

use ratatui::buffer::CellWidth;
use std::borrow::Cow;
use unicode_segmentation::UnicodeSegmentation;

/// The fewest lines' worth of a streaming paragraph such a view lays out.
const MIN_LINES: usize = 8;

/// The end of `tail` (the paragraph being written) that fills at least `lines` lines at
/// `width` (and at least [`MIN_LINES`]); the whole of it when short. It is measured in
/// terminal cells per grapheme, as it will be drawn, with half as much again for what
/// wrapping at word edges leaves empty; a line's end counts as the one space markdown joins
/// it into (where it ends a line instead, the text only fills more). The cut falls at the
/// start of a line when one begins soon after it, else after a space, so nothing shown starts
/// inside a word; a code block open at the cut keeps its opening line, so what follows is
/// still code.
pub fn live_tail(tail: &str, width: u16, lines: u16) -> Cow<'_, str> {
    let width = usize::from(width.max(4));
    let keep = usize::from(lines).max(MIN_LINES) * width;
    let Some(from) = cells_back(tail, keep + keep / 2) else {
        return Cow::Borrowed(tail);
    };
    let rest = &tail[from..];
    let skip = match line_start_within(rest, keep / 2) {
        Some(at) => at,
        None => rest
            .char_indices()
            .take(64)
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(at, c)| at + c.len_utf8()),
    };
    let from = from + skip;
    let fences = tail[..from].split_inclusive('\n').filter(|line| {
        let line = line.trim_start();
        line.starts_with("```") || line.starts_with("~~~")
    });
    let (count, last) = fences.fold((0, ""), |(n, _), line| (n + 1, line));
    match count % 2 {
        1 => Cow::Owned(format!("{last}{}", &tail[from..])),
        _ => Cow::Borrowed(&tail[from..]),
    }
}

/// The cells a grapheme takes: a line's end one (a space, when joined), a tab up to four,
/// another control character none (the wrapping drops them).
fn cells_of(grapheme: &str) -> usize {
    match grapheme {
        "\t" => 4,
        "\n" | "\r\n" => 1,
        other if other.chars().any(char::is_control) => 0,
        other => usize::from(other.cell_width()),
    }
}

/// Where the end of `text` that takes `wanted` cells begins, reading back from its end;
/// `None` when all of it takes fewer.
fn cells_back(text: &str, wanted: usize) -> Option<usize> {
    let mut cells = 0;
    for (at, grapheme) in text.grapheme_indices(true).rev() {
        cells += cells_of(grapheme);
        if cells >= wanted {
            return Some(at);
        }
    }
    None
}

/// Just after the first line end of `text` within its first `cells` cells.
fn line_start_within(text: &str, cells: usize) -> Option<usize> {
    let mut taken = 0;
    for (at, grapheme) in text.grapheme_indices(true) {
        if grapheme.ends_with('\n') {
            return Some(at + grapheme.len());
        }
        taken += cells_of(grapheme);
        if taken > cells {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_paragraph_is_cut_after_a_space_of_any_script() {
        let short = "a few words";
        assert!(matches!(live_tail(short, 40, 64), Cow::Borrowed(s) if s == short));
        for space in [' ', '\u{a0}', '\u{3000}', '\u{2028}'] {
            for filler in ["word", "слово", "単語", "🦀"] {
                let text: String = (0..5000).map(|n| format!("{filler}{n}{space}")).collect();
                let shown = live_tail(&text, 40, 64);
                assert!(shown.len() < text.len() / 2, "{filler:?}");
                assert!(
                    shown.starts_with(filler),
                    "{filler:?} {space:?}: {}",
                    &shown[..20]
                );
                assert!(text.ends_with(shown.as_ref()));
            }
        }
        // Text with no space at all is cut at a character's edge.
        let text = "é".repeat(20_000);
        assert!(live_tail(&text, 40, 64).chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_tail_fills_the_lines_asked_for_and_little_more() {
        use crate::tui::{Theme, render_markdown};
        let (width, lines) = (70, 12);
        let texts = [
            (0..5000).map(|n| format!("word{n} ")).collect::<String>(),
            (0..5000).map(|n| format!("単語{n}")).collect(),
            // Thai: marks that take no cell of their own.
            "สวัสดีครับ ".repeat(3000),
            // A family emoji: three people joined into one glyph of two cells.
            "👨\u{200d}👩\u{200d}👧 ".repeat(20_000),
            // Short lines of one paragraph, which markdown joins into long ones.
            (0..3000).map(|n| format!("a line of it {n}\n")).collect(),
            // Code: every line its own.
            format!(
                "```\n{}",
                (0..3000)
                    .map(|n| format!("let x{n} = {n};\n"))
                    .collect::<String>()
            ),
            (0..300)
                .map(|n| format!("{}{n}\n\n", "long ".repeat(40)))
                .collect(),
            // Control characters a model may send, which the wrapping drops.
            "\x1b[31mred\x1b[0m and \x0cfed word\r\n".repeat(3000),
        ];
        for text in &texts {
            let shown = live_tail(text, width, lines);
            let drawn = render_markdown(&shown, width, &Theme::default()).len();
            let start: String = shown.chars().take(20).collect();
            assert!(drawn >= usize::from(lines), "{drawn} lines of {start:?}");
            assert!(
                drawn <= 6 * usize::from(lines),
                "{drawn} lines of {start:?}"
            );
            assert!(shown.len() < text.len() / 10, "{start:?}");
        }
    }

    #[test]
    fn a_cut_inside_a_code_block_keeps_its_opening_line() {
        let code: String = (0..3000).map(|n| format!("let x{n} = {n};\n")).collect();
        let text = format!("Here:\n```rust\n{code}");
        let shown = live_tail(&text, 60, 64);
        assert!(shown.starts_with("```rust\nlet x"), "{}", &shown[..30]);
        // A block closed before the cut is not opened again.
        let text = format!("```\nx\n```\n{}", "plain line\n".repeat(3000));
        assert!(live_tail(&text, 60, 64).starts_with("plain line\n"));
    }
}
