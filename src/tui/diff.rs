//! Unified diffs (as the `similar` crate and `git diff` write them) shown in colour.
//!
//! Each line is classified by where it stands: file headers (`--- a/…`, `+++ b/…`, `diff`,
//! `index`) before a hunk, the `@@ -a,b +c,d @@` hunk header, then exactly as many added,
//! removed and context lines as the header announces. Counting matters because a removed
//! line that reads `-- x` looks like a file header (`--- x`) to anything that only looks at
//! its first characters. A diff without hunk headers (a fragment) is read by first character.
//!
//! Long lines are cut at the width (code is not word-wrapped); the `+`/`-` marker stays alone
//! in its gutter column, and continuation lines leave that column blank in the line's style.

use ratatui::text::{Line, Span};

use super::theme::Theme;
use super::wrap::{hard_wrap, line_width};

/// What each line of a unified diff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffLine<'a> {
    /// `diff …`, `index …`, `--- a/…`, `+++ b/…` and the like.
    FileHeader(&'a str),
    /// `@@ -a,b +c,d @@ section`.
    Hunk(&'a str),
    /// An added line, without its `+`.
    Added(&'a str),
    /// A removed line, without its `-`.
    Removed(&'a str),
    /// An unchanged line, without its leading space.
    Context(&'a str),
    /// `\ No newline at end of file`, or anything else outside a hunk.
    Note(&'a str),
}

/// Options for [`render_diff_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// Show line numbers in a gutter: the new file's for added and context lines, the old
    /// file's for removed ones.
    pub line_numbers: bool,
}

/// Renders a unified diff at `width` cells.
pub fn render_diff(unified: &str, width: u16, theme: &Theme) -> Vec<Line<'static>> {
    render_diff_with(unified, width, theme, DiffOptions::default())
}

/// Renders a unified diff at `width` cells, with options.
pub fn render_diff_with(
    unified: &str,
    width: u16,
    theme: &Theme,
    options: DiffOptions,
) -> Vec<Line<'static>> {
    render_diff_rows(unified, width, theme, options)
        .into_iter()
        .map(|(_, line)| line)
        .collect()
}

/// [`render_diff_with`], each drawn row with the index of the diff's line it shows (a line
/// wrapped over several rows gives each of them its index).
pub fn render_diff_rows(
    unified: &str,
    width: u16,
    theme: &Theme,
    options: DiffOptions,
) -> Vec<(usize, Line<'static>)> {
    if width == 0 {
        return Vec::new();
    }
    let numbered = classify_numbered(unified);
    let digits = if options.line_numbers {
        numbered
            .iter()
            .filter_map(|(_, n)| *n)
            .max()
            .map_or(1, |n| n.to_string().len())
    } else {
        0
    };
    let mut out = Vec::new();
    for (index, (line, number)) in numbered.into_iter().enumerate() {
        let (marker, text, style) = match line {
            DiffLine::FileHeader(t) => (None, t, theme.diff_file_header),
            DiffLine::Hunk(t) => (None, t, theme.diff_hunk),
            DiffLine::Note(t) => (None, t, theme.dim),
            DiffLine::Added(t) => (Some("+"), t, theme.diff_added),
            DiffLine::Removed(t) => (Some("-"), t, theme.diff_removed),
            DiffLine::Context(t) => (Some(" "), t, theme.diff_context),
        };
        let mut first = Vec::new();
        let mut rest = Vec::new();
        if let Some(marker) = marker {
            if options.line_numbers {
                let shown = number.map(|n| n.to_string()).unwrap_or_default();
                first.push(Span::styled(format!("{shown:>digits$} "), theme.dim));
                rest.push(Span::styled(" ".repeat(digits + 1), theme.dim));
            }
            first.push(Span::styled(marker, style));
            rest.push(Span::styled(" ", style));
        }
        let (first, rest) = (Line::from(first), Line::from(rest));
        let content = [Span::styled(text.to_string(), style)];
        for mut wrapped in hard_wrap(&content, width, &first, &rest) {
            // Lines told apart by their background read as bands across the width.
            if marker.is_some() && style.bg.is_some() {
                let gap = usize::from(width).saturating_sub(line_width(&wrapped));
                if gap > 0 {
                    wrapped.spans.push(Span::styled(" ".repeat(gap), style));
                }
            }
            out.push((index, wrapped));
        }
    }
    out
}

/// The numbers of added and removed lines in a unified diff.
pub fn diff_stats(unified: &str) -> (usize, usize) {
    classify(unified).fold((0, 0), |(added, removed), line| match line {
        DiffLine::Added(_) => (added + 1, removed),
        DiffLine::Removed(_) => (added, removed + 1),
        _ => (added, removed),
    })
}

/// Classifies each line of a unified diff.
pub fn classify(unified: &str) -> impl Iterator<Item = DiffLine<'_>> {
    classify_numbered(unified).into_iter().map(|(line, _)| line)
}

/// Where the reader is in the diff.
enum State {
    /// Before any hunk, or between files.
    Headers,
    /// Inside a hunk whose header gave counts: lines of each side still to come, and the next
    /// line numbers.
    Counted {
        old_left: u64,
        new_left: u64,
        old_line: u64,
        new_line: u64,
    },
    /// Inside a hunk whose header could not be read, or a fragment without headers: lines are
    /// read by their first character.
    Loose,
}

/// Each line with its line number (new side for added and context lines, old side for
/// removed ones), when the hunk header gave one.
fn classify_numbered(unified: &str) -> Vec<(DiffLine<'_>, Option<u64>)> {
    let lines: Vec<&str> = unified.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut state = State::Headers;
    for (index, &line) in lines.iter().enumerate() {
        if let State::Counted {
            old_left,
            new_left,
            old_line,
            new_line,
        } = &mut state
        {
            let (kind, number) = match line.chars().next() {
                // Saturating: the numbers come from the text and may be absurd.
                Some('+') if *new_left > 0 => {
                    *new_left -= 1;
                    let number = *new_line;
                    *new_line = number.saturating_add(1);
                    (DiffLine::Added(&line[1..]), number)
                }
                Some('-') if *old_left > 0 => {
                    *old_left -= 1;
                    let number = *old_line;
                    *old_line = number.saturating_add(1);
                    (DiffLine::Removed(&line[1..]), number)
                }
                // Some tools strip the space of an empty context line.
                Some(' ') | None if *old_left > 0 && *new_left > 0 => {
                    *old_left -= 1;
                    *new_left -= 1;
                    *old_line = old_line.saturating_add(1);
                    let number = *new_line;
                    *new_line = number.saturating_add(1);
                    (DiffLine::Context(line.get(1..).unwrap_or("")), number)
                }
                Some('\\') => {
                    out.push((DiffLine::Note(line), None));
                    continue;
                }
                _ => {
                    // The counts were wrong or the hunk is over: read this line afresh.
                    state = State::Headers;
                    out.push(headers_line(
                        &mut state,
                        line,
                        lines.get(index + 1).copied(),
                    ));
                    continue;
                }
            };
            out.push((kind, Some(number)));
            if *old_left == 0 && *new_left == 0 {
                state = State::Headers;
            }
            continue;
        }
        out.push(headers_line(
            &mut state,
            line,
            lines.get(index + 1).copied(),
        ));
    }
    out
}

/// A line read outside a counted hunk; a hunk header moves the state into the hunk.
fn headers_line<'a>(
    state: &mut State,
    line: &'a str,
    next: Option<&str>,
) -> (DiffLine<'a>, Option<u64>) {
    if line.starts_with("@@") {
        *state = match parse_hunk_header(line) {
            Some((old_line, old_left, new_line, new_left)) if old_left > 0 || new_left > 0 => {
                State::Counted {
                    old_left,
                    new_left,
                    old_line,
                    new_line,
                }
            }
            Some(_) => State::Headers,
            None => State::Loose,
        };
        return (DiffLine::Hunk(line), None);
    }
    let is_file_header = (line.starts_with("--- ") && next.is_some_and(|n| n.starts_with("+++ ")))
        || [
            "diff ",
            "index ",
            "new file mode",
            "deleted file mode",
            "similarity index",
        ]
        .iter()
        .any(|p| line.starts_with(p))
        || line.starts_with("rename from ")
        || line.starts_with("rename to ");
    if is_file_header {
        *state = State::Headers;
        return (DiffLine::FileHeader(line), None);
    }
    if line.starts_with("+++ ") && matches!(state, State::Headers) {
        return (DiffLine::FileHeader(line), None);
    }
    // Outside a counted hunk: a fragment, read by first character.
    let kind = match line.chars().next() {
        Some('+') => DiffLine::Added(&line[1..]),
        Some('-') => DiffLine::Removed(&line[1..]),
        Some(' ') => DiffLine::Context(&line[1..]),
        _ => DiffLine::Note(line),
    };
    if !matches!(kind, DiffLine::Note(_)) {
        *state = State::Loose;
    }
    (kind, None)
}

/// `@@ -a,b +c,d @@` as (old start, old count, new start, new count); a missing count is 1.
fn parse_hunk_header(line: &str) -> Option<(u64, u64, u64, u64)> {
    let inner = line.strip_prefix("@@ ")?;
    let end = inner.find(" @@")?;
    let mut parts = inner[..end].split_whitespace();
    let old = parts.next()?.strip_prefix('-')?;
    let new = parts.next()?.strip_prefix('+')?;
    let range = |s: &str| -> Option<(u64, u64)> {
        match s.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = range(old)?;
    let (new_start, new_count) = range(new)?;
    Some((old_start, old_count, new_start, new_count))
}

#[cfg(test)]
mod tests {
    use ratatui::style::Color;

    use super::*;
    use crate::tui::color::ColorDepth;

    const DIFF: &str = "\
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,4 +1,3 @@
 pub mod cli;
--- not a header, a removed line
+pub mod tui;
 pub mod store;
-pub mod old;
";

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    fn check(input: &str, width: u16, expected: &[&str]) {
        let lines = render_diff(input, width, &Theme::default());
        assert_eq!(plain(&lines), expected);
        for line in &lines {
            assert!(line_width(line) <= usize::from(width).max(2));
        }
    }

    #[test]
    fn classification_counts_the_hunk() {
        let lines: Vec<DiffLine<'_>> = classify(DIFF).collect();
        assert_eq!(
            lines,
            vec![
                DiffLine::FileHeader("--- a/src/lib.rs"),
                DiffLine::FileHeader("+++ b/src/lib.rs"),
                DiffLine::Hunk("@@ -1,4 +1,3 @@"),
                DiffLine::Context("pub mod cli;"),
                DiffLine::Removed("-- not a header, a removed line"),
                DiffLine::Added("pub mod tui;"),
                DiffLine::Context("pub mod store;"),
                DiffLine::Removed("pub mod old;"),
            ]
        );
        assert_eq!(diff_stats(DIFF), (1, 2));
    }

    #[test]
    fn several_files_and_hunks() {
        let diff = "\
diff --git a/x b/x
index 1..2 100644
--- a/x
+++ b/x
@@ -1 +1 @@
-a
+b
@@ -10,2 +10,3 @@ fn section()
 c
+d
 e
\\ No newline at end of file
--- a/y
+++ b/y
@@ -0,0 +1 @@
+new
";
        let kinds: Vec<&str> = classify(diff)
            .map(|l| match l {
                DiffLine::FileHeader(_) => "file",
                DiffLine::Hunk(_) => "hunk",
                DiffLine::Added(_) => "+",
                DiffLine::Removed(_) => "-",
                DiffLine::Context(_) => " ",
                DiffLine::Note(_) => "note",
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                "file", "file", "file", "file", "hunk", "-", "+", "hunk", " ", "+", " ", "note",
                "file", "file", "hunk", "+"
            ]
        );
        assert_eq!(diff_stats(diff), (3, 1));
    }

    #[test]
    fn fragments_without_headers_go_by_first_character() {
        assert_eq!(diff_stats("+a\n-b\n c\n+d"), (2, 1));
        assert_eq!(diff_stats("@@ garbled @@\n+a\n-b"), (1, 1));
        assert_eq!(diff_stats(""), (0, 0));
    }

    #[test]
    fn empty_context_lines_without_their_space() {
        let diff = "@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n";
        let lines: Vec<DiffLine<'_>> = classify(diff).collect();
        assert_eq!(lines[2], DiffLine::Context(""));
        assert_eq!(diff_stats(diff), (1, 1));
    }

    #[test]
    fn hunk_headers_parse() {
        assert_eq!(parse_hunk_header("@@ -1,4 +1,5 @@"), Some((1, 4, 1, 5)));
        assert_eq!(parse_hunk_header("@@ -3 +3 @@ fn x()"), Some((3, 1, 3, 1)));
        assert_eq!(parse_hunk_header("@@ -a +1 @@"), None);
        assert_eq!(parse_hunk_header("@@@ -1 +1 @@@"), None);
    }

    #[test]
    fn rendered_with_markers_and_cut_lines() {
        check(
            DIFF,
            14,
            &[
                "--- a/src/lib.",
                "rs",
                "+++ b/src/lib.",
                "rs",
                "@@ -1,4 +1,3 @",
                "@",
                " pub mod cli;",
                "--- not a head",
                " er, a removed",
                "  line",
                "+pub mod tui;",
                " pub mod store",
                " ;",
                "-pub mod old;",
            ],
        );
        check("", 10, &[]);
        check("+x", 0, &[]);
        check("+xy", 1, &["x", "y"]);
    }

    #[test]
    fn styles_by_kind() {
        let theme = Theme::default();
        let lines = render_diff(DIFF, 40, &theme);
        assert_eq!(lines[0].spans[0].style, theme.diff_file_header);
        assert_eq!(lines[2].spans[0].style, theme.diff_hunk);
        assert_eq!(lines[3].spans[0].style, theme.diff_context);
        assert_eq!(lines[4].spans[0].style, theme.diff_removed);
        assert_eq!(lines[5].spans[0].style, theme.diff_added);
        // Added and removed lines are bands across the width (the dark theme gives them a
        // background).
        assert_eq!(line_width(&lines[5]), 40);
        assert!(lines[5].spans.iter().all(|s| s.style == theme.diff_added));
        assert_eq!(line_width(&lines[3]), " pub mod cli;".len());

        let ansi = render_diff(DIFF, 40, &theme.for_depth(ColorDepth::Ansi16));
        assert_eq!(ansi[7].spans[0].style.fg, Some(Color::Red));
    }

    #[test]
    fn line_numbers_in_a_gutter() {
        let diff = "@@ -9,3 +9,3 @@\n a\n-b\n+c\n d\n";
        let lines = render_diff_with(
            diff,
            12,
            &Theme::default(),
            DiffOptions { line_numbers: true },
        );
        assert_eq!(
            plain(&lines),
            vec!["@@ -9,3 +9,3", " @@", " 9  a", "10 -b", "10 +c", "11  d"]
        );
    }

    #[test]
    fn absurd_hunk_numbers_do_not_overflow() {
        let diff = format!("@@ -{0},{0} +{0},{0} @@\n a\n+b\n-c\n", u64::MAX);
        assert_eq!(diff_stats(&diff), (1, 1));
        let lines = render_diff_with(
            &diff,
            40,
            &Theme::default(),
            DiffOptions { line_numbers: true },
        );
        // The 89-cell header takes three lines; the others fit in one each.
        assert_eq!(lines.len(), 6);
        assert!(lines.iter().all(|l| line_width(l) <= 40));
    }

    #[test]
    fn tabs_and_control_characters_in_content() {
        check(
            "@@ -1 +1 @@\n-\tx\u{1b}[0m\n+y",
            20,
            &["@@ -1 +1 @@", "-    x[0m", "+y"],
        );
    }

    #[test]
    fn a_grapheme_wider_than_two_cells_overflowed_a_narrow_line() {
        // Found by the property test: U+20000 with the Lepcha spacing mark U+1C24 is one
        // grapheme of three cells, and came out whole in a line of one cell.
        check("𠀀\u{1c24}", 1, &["𠀀", "\u{1c24}"]);
        check("+𠀀\u{1c24}", 3, &["+𠀀", " \u{1c24}"]);
        check("+𠀀\u{1c24}", 4, &["+𠀀\u{1c24}"]);
        // Hangul leading jamo make one grapheme however many there are.
        check(
            "-\u{1100}\u{1100}\u{1100}",
            4,
            &["-\u{1100}", " \u{1100}", " \u{1100}"],
        );
        let lines = render_diff_with(
            "@@ -1 +1 @@\n+𠀀\u{1c24}",
            4,
            &Theme::default(),
            DiffOptions { line_numbers: true },
        );
        assert_eq!(
            plain(&lines),
            vec!["@@ -", "1 +1", " @@", "1 +𠀀", "   \u{1c24}"]
        );
        assert!(lines.iter().all(|l| line_width(l) <= 5));
        // The Khmer sign beyyal is one character of three cells, which cannot be cut: where
        // it does not fit it shows as a mark.
        check("\u{17d8}", 1, &["…"]);
        check("+\u{17d8}", 4, &["+\u{17d8}"]);
        check("+\u{17d8}", 3, &["+…"]);
    }

    #[test]
    fn a_dropped_control_character_let_an_emoji_widen_unmeasured() {
        // Without the bell the selector makes the heart two cells wide; measured with the
        // bell in between, each heart was one cell and the line drawn twice as wide as cut.
        check(
            "+❤\u{7}\u{fe0f}❤\u{7}\u{fe0f}",
            3,
            &["+❤\u{fe0f}", " ❤\u{fe0f}"],
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn diff_text() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                Just("@@ -1,3 +1,2 @@\n".to_string()),
                Just("@@ -0,0 +1 @@ fn x\n".to_string()),
                Just("@@ -99999999999999999999 +1 @@\n".to_string()),
                Just("--- a/x\n+++ b/x\n".to_string()),
                Just("\\ No newline at end of file\n".to_string()),
                "[-+ ][a-z\t ]{0,30}\n",
                // What is hard to measure: wide characters, graphemes wider than two cells,
                // accents, joiners, and control characters between a character and the
                // selector that widens it.
                proptest::sample::select(vec![
                    "日本",
                    "🎉",
                    "e\u{301}",
                    "👨\u{200d}👩\u{200d}👧",
                    "𠀀\u{1c24}",
                    "\u{1100}\u{1100}\u{1100}",
                    "A\u{11302}\u{1134b}",
                    "❤\u{7}\u{fe0f}",
                    "\u{17d8}",
                    "\u{1b}[0m",
                    "\t",
                ])
                .prop_map(String::from),
                any::<String>(),
            ];
            proptest::collection::vec(piece, 0..20).prop_map(|p| p.concat())
        }

        proptest! {
            #![proptest_config(crate::testing::fixed_cases())]

            #[test]
            fn never_panics_and_fits(
                input in diff_text(),
                // Narrow widths half the time: the gutter and the marker leave them one cell.
                width in prop_oneof![0u16..8, 0u16..60],
                numbers: bool,
            ) {
                let options = DiffOptions { line_numbers: numbers };
                let lines = render_diff_with(&input, width, &Theme::default(), options);
                for line in &lines {
                    prop_assert!(line_width(line) <= usize::from(width) + 1);
                }
                let (added, removed) = diff_stats(&input);
                prop_assert!(added + removed <= input.lines().count());
            }
        }
    }
}
