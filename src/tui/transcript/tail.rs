//! The end of a streaming paragraph, for a view that shows only its last lines (a run's
//! pane): laying out the whole paragraph on every frame would cost more the longer a run
//! writes.

use ratatui::buffer::CellWidth;
use std::borrow::Cow;

/// The fewest lines' worth of a streaming paragraph such a view lays out.
const MIN_LINES: usize = 8;

/// The end of `tail` (the paragraph being written) that fills at least `lines` lines at
/// `width` (and at least [`MIN_LINES`]); the whole of it when short. It is measured in
/// terminal cells, as it will be drawn, with half as much again for what wrapping at word
/// edges leaves empty. The cut falls at the start of a line when one begins soon after it,
/// else after a space, so nothing shown starts inside a word; a code block open at the cut
/// keeps its opening line, so what follows is still code.
pub fn live_tail(tail: &str, width: u16, lines: u16) -> Cow<'_, str> {
    let width = usize::from(width.max(4));
    let keep = usize::from(lines).max(MIN_LINES) * width;
    let Some(from) = cells_back(tail, width, keep + keep / 2) else {
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

/// The cells a character takes: a line's end fills the rest of the line, a tab up to four.
fn cells_of(c: char) -> usize {
    match c {
        '\t' => 4,
        c => usize::from(c.encode_utf8(&mut [0; 4]).cell_width()),
    }
}

/// Where the end of `text` that takes `wanted` cells at `width` begins, reading back from its
/// end; `None` when all of it takes fewer.
fn cells_back(text: &str, width: usize, wanted: usize) -> Option<usize> {
    // Whole lines below the one being read, and that line's cells so far.
    let (mut below, mut line) = (0usize, 0usize);
    for (at, c) in text.char_indices().rev() {
        if c == '\n' {
            below += line.div_ceil(width).max(1) * width;
            line = 0;
        } else {
            line += cells_of(c);
        }
        if below + line >= wanted {
            return Some(at);
        }
    }
    None
}

/// Just after the first line end of `text` within its first `cells` cells.
fn line_start_within(text: &str, cells: usize) -> Option<usize> {
    let mut taken = 0;
    for (at, c) in text.char_indices() {
        if c == '\n' {
            return Some(at + 1);
        }
        taken += cells_of(c);
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
        use crate::tui::wrap::wrap;
        use ratatui::text::Span;
        let (width, lines) = (70, 12);
        let texts = [
            (0..5000).map(|n| format!("word{n} ")).collect::<String>(),
            (0..5000).map(|n| format!("単語{n}")).collect(),
            // Thai: marks that take no cell of their own.
            "สวัสดีครับ ".repeat(3000),
            (0..3000).map(|n| format!("short line {n}\n")).collect(),
            (0..300)
                .map(|n| format!("{}{n}\n", "long ".repeat(40)))
                .collect(),
        ];
        for text in &texts {
            let shown = live_tail(text, width, lines);
            let drawn = wrap(&[Span::raw(shown.as_ref())], width).len();
            assert!(
                drawn >= usize::from(lines),
                "{drawn} lines of {:?}",
                &shown[..20]
            );
            assert!(
                drawn <= 3 * usize::from(lines),
                "{drawn} lines of {:?}",
                &shown[..20]
            );
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
