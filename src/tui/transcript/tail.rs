//! The end of a streaming paragraph, for a view that shows only its last lines (a run's
//! pane): laying out the whole paragraph on every frame would cost more the longer a run
//! writes.

use std::borrow::Cow;

/// The fewest lines' worth of a streaming paragraph such a view lays out.
const MIN_LINES: usize = 8;

/// The end of `tail` (the paragraph being written) that fills at least `lines` lines at
/// `width` (and at least [`MIN_LINES`]); the whole of it when short. The cut falls at the start of a line when
/// one begins soon after it, else after a space, so nothing shown starts inside a word; a
/// code block open at the cut keeps its opening line, so what follows is still code.
pub fn live_tail(tail: &str, width: u16, lines: u16) -> Cow<'_, str> {
    // Four bytes a column: enough for every script (a Thai letter with its marks, an emoji),
    // and half as much again before it, so what a skip to the next line leaves still fills.
    let keep = usize::from(lines).max(MIN_LINES) * usize::from(width.max(4)) * 4;
    if tail.len() <= 2 * keep {
        return Cow::Borrowed(tail);
    }
    let mut from = tail.len() - keep - keep / 2;
    while !tail.is_char_boundary(from) {
        from += 1;
    }
    let rest = &tail[from..];
    let skip = match rest.find('\n') {
        Some(at) if at < keep / 2 => at + 1,
        _ => rest
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
