//! Wrapping styled text to a width in terminal cells.
//!
//! Text is measured per grapheme cluster with the same measure ratatui draws with
//! ([`CellWidth`], unicode-width underneath), so a wide CJK character or an emoji counts two
//! cells, a combining accent none, and a wrapped line never overflows when drawn. Prose
//! ([`wrap`], [`wrap_prefixed`]) breaks at spaces, and inside a word only when the word is
//! longer than a whole line; a wide character is a break opportunity on either side, since
//! CJK text has no spaces. Code and diffs ([`hard_wrap`]) break at the width exactly and keep
//! every space. Styles carry across breaks, and each output line starts with a prefix: the
//! first line with `first`, the rest with `rest` (a bullet then its indent, or a quote bar
//! on every line).
//!
//! Newlines in the text end a line (a trailing one adds nothing); tabs become spaces to the
//! next multiple of four; other control characters are dropped, since a terminal would act
//! on them. Width 0 gives no lines at all. A prefix as wide as the width is cut to leave one
//! cell of text, and a character wider than the cells left is put on a line of its own, the
//! only case where a line is wider than asked.
//!
//! [`WrapCache`] keeps the lines of one block so that redraws do not wrap it again.

use ratatui::buffer::CellWidth;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

const TAB_STOP: usize = 4;

/// Wraps prose to `width` cells, breaking at spaces.
pub fn wrap(spans: &[Span<'_>], width: u16) -> Vec<Line<'static>> {
    wrap_prefixed(spans, width, &Line::default(), &Line::default())
}

/// Wraps prose to `width` cells (prefix included), the first line after `first` and every
/// other line after `rest`.
pub fn wrap_prefixed(
    spans: &[Span<'_>],
    width: u16,
    first: &Line<'_>,
    rest: &Line<'_>,
) -> Vec<Line<'static>> {
    Wrapper::new(width, first, rest, Mode::Words).run(spans)
}

/// Cuts text into lines of exactly `width` cells (prefix included) wherever it falls, keeping
/// all spaces: for code and diffs, where moving a word would misrepresent the line.
pub fn hard_wrap(
    spans: &[Span<'_>],
    width: u16,
    first: &Line<'_>,
    rest: &Line<'_>,
) -> Vec<Line<'static>> {
    Wrapper::new(width, first, rest, Mode::Cells).run(spans)
}

/// The width of a line in cells, measured as it will be drawn.
pub fn line_width(line: &Line<'_>) -> usize {
    line.spans.iter().map(|s| str_width(&s.content)).sum()
}

/// The width of a string in cells, measured as it will be drawn (control characters count
/// nothing, as they are not drawn).
pub fn str_width(text: &str) -> usize {
    text.graphemes(true)
        .filter(|g| !g.contains(char::is_control))
        .map(|g| usize::from(g.cell_width()))
        .sum()
}

/// The wrapped (or otherwise rendered) lines of one block of text, kept until the text or the
/// width changes.
///
/// The cache is keyed by a generation number the owner bumps whenever the text changes (for
/// text that only grows, such as a streamed reply, its length in bytes will do) and by the
/// width. A redraw at the same width and generation costs nothing.
#[derive(Debug, Default, Clone)]
pub struct WrapCache {
    key: Option<(u64, u16)>,
    lines: Vec<Line<'static>>,
}

impl WrapCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lines for `generation` at `width`, from `render(width)` if they are not cached.
    pub fn get_or_render(
        &mut self,
        generation: u64,
        width: u16,
        render: impl FnOnce(u16) -> Vec<Line<'static>>,
    ) -> &[Line<'static>] {
        if self.key != Some((generation, width)) {
            self.lines = render(width);
            self.key = Some((generation, width));
        }
        &self.lines
    }

    /// Whether lines for `generation` at `width` are cached.
    pub fn is_current(&self, generation: u64, width: u16) -> bool {
        self.key == Some((generation, width))
    }

    /// Forgets the cached lines, for a change the generation does not capture (a new theme).
    pub fn invalidate(&mut self) {
        self.key = None;
        self.lines.clear();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Break at spaces; drop the spaces a break falls on.
    Words,
    /// Break at the width exactly; keep everything.
    Cells,
}

/// One grapheme of the input, with its style and width.
struct Glyph<'a> {
    text: &'a str,
    width: usize,
    style: Style,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Part of a word.
    Word,
    /// A wide character: a word by itself.
    Wide,
    /// A space a line may break at.
    Space,
    /// A forced line break.
    Newline,
}

struct Wrapper {
    width: usize,
    first: Line<'static>,
    rest: Line<'static>,
    mode: Mode,
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    current_width: usize,
}

impl Wrapper {
    fn new(width: u16, first: &Line<'_>, rest: &Line<'_>, mode: Mode) -> Self {
        let width = usize::from(width);
        let keep = width.saturating_sub(1);
        Wrapper {
            width,
            first: truncate(first, keep),
            rest: truncate(rest, keep),
            mode,
            lines: Vec::new(),
            current: Vec::new(),
            current_width: 0,
        }
    }

    /// The cells left for text on the line being built.
    fn available(&self) -> usize {
        let prefix = if self.lines.is_empty() {
            &self.first
        } else {
            &self.rest
        };
        self.width.saturating_sub(line_width(prefix)).max(1)
    }

    fn run(mut self, spans: &[Span<'_>]) -> Vec<Line<'static>> {
        if self.width == 0 {
            return Vec::new();
        }
        let glyphs = glyphs(spans);
        let mut i = 0;
        // Spaces seen since the last word, written only if the next word stays on the line.
        let mut pending: Vec<&Glyph<'_>> = Vec::new();
        let mut at_hard_line_start = true;
        let mut ended_with_newline = false;
        while i < glyphs.len() {
            let glyph = &glyphs[i];
            ended_with_newline = false;
            match glyph.kind {
                Kind::Newline => {
                    pending.clear();
                    self.finish_line();
                    at_hard_line_start = true;
                    ended_with_newline = true;
                    i += 1;
                }
                Kind::Space if self.mode == Mode::Words && !at_hard_line_start => {
                    pending.push(glyph);
                    i += 1;
                }
                _ => {
                    // A word: a run of word glyphs, or one wide glyph, or (at the start of a
                    // hard line, and always in cell mode) the indentation.
                    let end = word_end(&glyphs, i, self.mode, at_hard_line_start);
                    let word = &glyphs[i..end];
                    let word_width: usize = word.iter().map(|g| g.width).sum();
                    let pending_width: usize = pending.iter().map(|g| g.width).sum();
                    if self.current_width + pending_width + word_width <= self.available() {
                        for space in pending.drain(..) {
                            self.push(space);
                        }
                        word.iter().for_each(|g| self.push(g));
                    } else if self.mode == Mode::Words
                        && self.current_width > 0
                        && word_width <= self.rest_available()
                    {
                        pending.clear();
                        self.finish_line();
                        word.iter().for_each(|g| self.push(g));
                    } else {
                        // Longer than a line (or cell mode): start it on a fresh line in word
                        // mode, then cut it wherever the width falls.
                        if self.mode == Mode::Words && self.current_width > 0 {
                            self.finish_line();
                        }
                        pending.clear();
                        for g in word {
                            if self.current_width > 0
                                && self.current_width + g.width > self.available()
                            {
                                self.finish_line();
                            }
                            self.push(g);
                        }
                    }
                    at_hard_line_start = false;
                    i = end;
                }
            }
        }
        if !ended_with_newline || self.lines.is_empty() {
            self.finish_line();
        }
        self.lines
    }

    /// The cells a continuation line has for text.
    fn rest_available(&self) -> usize {
        self.width.saturating_sub(line_width(&self.rest)).max(1)
    }

    fn push(&mut self, glyph: &Glyph<'_>) {
        self.current_width += glyph.width;
        match self.current.last_mut() {
            Some(last) if last.style == glyph.style => last.content.to_mut().push_str(glyph.text),
            _ => self
                .current
                .push(Span::styled(glyph.text.to_string(), glyph.style)),
        }
    }

    fn finish_line(&mut self) {
        let prefix = if self.lines.is_empty() {
            &self.first
        } else {
            &self.rest
        };
        let mut spans = prefix.spans.clone();
        let mut content = std::mem::take(&mut self.current);
        if self.mode == Mode::Words {
            trim_end(&mut content);
        }
        spans.extend(content);
        self.lines.push(Line::from(spans));
        self.current_width = 0;
    }
}

/// Where the word starting at `start` ends.
fn word_end(glyphs: &[Glyph<'_>], start: usize, mode: Mode, hard_line_start: bool) -> usize {
    let first = &glyphs[start];
    if mode == Mode::Cells || first.kind == Kind::Wide {
        return start + 1;
    }
    let wanted = if first.kind == Kind::Space && hard_line_start {
        Kind::Space
    } else {
        Kind::Word
    };
    let mut end = start + 1;
    while end < glyphs.len() && glyphs[end].kind == wanted {
        end += 1;
    }
    end
}

/// The input's graphemes, classified; tabs expanded and control characters dropped.
fn glyphs<'a>(spans: &'a [Span<'_>]) -> Vec<Glyph<'a>> {
    let mut out = Vec::new();
    let mut column = 0;
    for span in spans {
        for g in span.content.graphemes(true) {
            let (text, width, kind) = if g == "\n" || g == "\r\n" {
                (g, 0, Kind::Newline)
            } else if g == "\t" {
                // One glyph per cell, so that hard wrapping can cut inside the tab.
                let width = TAB_STOP - column % TAB_STOP;
                for _ in 0..width {
                    out.push(Glyph {
                        text: " ",
                        width: 1,
                        style: span.style,
                        kind: Kind::Space,
                    });
                }
                column += width;
                continue;
            } else if g.contains(char::is_control) {
                continue;
            } else {
                let width = usize::from(g.cell_width());
                let kind = if is_breaking_space(g) {
                    Kind::Space
                } else if width >= 2 {
                    Kind::Wide
                } else {
                    Kind::Word
                };
                (g, width, kind)
            };
            column = if kind == Kind::Newline {
                0
            } else {
                column + width
            };
            out.push(Glyph {
                text,
                width,
                style: span.style,
                kind,
            });
        }
    }
    out
}

/// Whether a line may break at this grapheme: Unicode spaces other than the no-break ones,
/// and the zero-width space, whose whole purpose is to mark a break.
fn is_breaking_space(g: &str) -> bool {
    let mut chars = g.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return false;
    };
    c == '\u{200B}'
        || (c.is_whitespace() && !matches!(c, '\u{A0}' | '\u{2007}' | '\u{202F}' | '\u{FEFF}'))
}

/// Drops trailing spaces from the end of a line's content.
fn trim_end(spans: &mut Vec<Span<'static>>) {
    while let Some(last) = spans.last_mut() {
        let trimmed = last.content.trim_end_matches(is_breaking_space_char);
        if trimmed.is_empty() {
            spans.pop();
        } else {
            let len = trimmed.len();
            last.content.to_mut().truncate(len);
            return;
        }
    }
}

fn is_breaking_space_char(c: char) -> bool {
    let mut buffer = [0u8; 4];
    is_breaking_space(c.encode_utf8(&mut buffer))
}

/// A line cut to at most `max` cells.
fn truncate(line: &Line<'_>, max: usize) -> Line<'static> {
    let mut left = max;
    let mut spans = Vec::new();
    for span in &line.spans {
        let mut text = String::new();
        for g in span.content.graphemes(true) {
            if g.contains(char::is_control) {
                continue;
            }
            let w = usize::from(g.cell_width());
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            text.push_str(g);
        }
        if !text.is_empty() {
            spans.push(Span::styled(text, span.style));
        }
        if left == 0 {
            break;
        }
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use ratatui::style::{Color, Modifier};

    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn check(input: &str, width: u16, expected: &[&str]) {
        let lines = wrap(&[Span::raw(input)], width);
        assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
    }

    fn check_prefixed(input: &str, width: u16, first: &str, rest: &str, expected: &[&str]) {
        let lines = wrap_prefixed(
            &[Span::raw(input)],
            width,
            &Line::from(first.to_string()),
            &Line::from(rest.to_string()),
        );
        assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
    }

    fn check_hard(input: &str, width: u16, expected: &[&str]) {
        let lines = hard_wrap(
            &[Span::raw(input)],
            width,
            &Line::default(),
            &Line::default(),
        );
        assert_eq!(plain(&lines), expected, "input {input:?} at width {width}");
    }

    #[test]
    fn breaks_at_spaces() {
        check("the quick brown fox", 10, &["the quick", "brown fox"]);
        check("the quick brown fox", 9, &["the quick", "brown fox"]);
        check("the quick brown fox", 8, &["the", "quick", "brown", "fox"]);
        check("the quick brown fox", 80, &["the quick brown fox"]);
        check("a  b", 80, &["a  b"]);
        check("a    b", 3, &["a", "b"]);
    }

    #[test]
    fn long_words_are_cut_only_when_longer_than_a_line() {
        check("abcdefghij", 4, &["abcd", "efgh", "ij"]);
        check(
            "see https://example.com/x",
            10,
            &["see", "https://ex", "ample.com/", "x"],
        );
        check("ab cdefgh", 4, &["ab", "cdef", "gh"]);
    }

    #[test]
    fn empty_and_degenerate_widths() {
        check("", 10, &[""]);
        check("anything", 0, &[]);
        check("ab cd", 1, &["a", "b", "c", "d"]);
        check("   ", 10, &[""]);
    }

    #[test]
    fn newlines_end_lines_and_keep_indentation() {
        check("one\ntwo", 10, &["one", "two"]);
        check("one\n\ntwo\n", 10, &["one", "", "two"]);
        check("one\r\ntwo", 10, &["one", "two"]);
        check("  indented line here", 10, &["  indented", "line here"]);
        check("\tx", 10, &["    x"]);
        check("ab\tx", 10, &["ab  x"]);
    }

    #[test]
    fn control_characters_are_dropped() {
        check("a\u{1b}[31mb\u{7}c", 10, &["a[31mbc"]);
        check("a\rb", 10, &["ab"]);
    }

    #[test]
    fn wide_characters_count_two_cells_and_break_anywhere() {
        check("日本語のテキスト", 6, &["日本語", "のテキ", "スト"]);
        check("日本語のテキスト", 5, &["日本", "語の", "テキ", "スト"]);
        check("ok 🎉🎉 done", 5, &["ok 🎉", "🎉", "done"]);
        // A wide character in a single column cannot fit: it gets a line of its own.
        check("日本", 1, &["日", "本"]);
    }

    #[test]
    fn zero_width_marks_stay_with_their_letter() {
        // "e" + combining acute accent is one cell.
        check("caf\u{65}\u{301} noir", 5, &["cafe\u{301}", "noir"]);
        // A ZWJ family is one grapheme of two cells.
        check(
            "family 👨\u{200d}👩\u{200d}👧 ok",
            9,
            &["family 👨\u{200d}👩\u{200d}👧", "ok"],
        );
        // The zero-width space is a break opportunity without a visible space.
        check("alpha\u{200b}beta", 6, &["alpha", "beta"]);
        // The no-break space is not.
        check("a b\u{a0}c", 3, &["a", "b\u{a0}c"]);
    }

    #[test]
    fn prefixes_first_and_rest() {
        check_prefixed(
            "one two three four",
            10,
            "• ",
            "  ",
            &["• one two", "  three", "  four"],
        );
        check_prefixed("a b", 10, "│ ", "│ ", &["│ a b"]);
        check_prefixed("", 10, "│ ", "│ ", &["│ "]);
        check_prefixed("x\ny", 10, "1. ", "   ", &["1. x", "   y"]);
        // A prefix as wide as the line is cut to leave one cell for the text.
        check_prefixed("ab", 3, "> > > ", "> > > ", &["> a", "> b"]);
        check_prefixed("ab", 1, "> ", "> ", &["a", "b"]);
    }

    #[test]
    fn styles_survive_breaks_and_merge() {
        let bold = Style::new().add_modifier(Modifier::BOLD);
        let red = Style::new().fg(Color::Red);
        let spans = [
            Span::styled("bold words", bold),
            Span::styled("tail", red),
            Span::styled(" more", bold),
        ];
        let lines = wrap(&spans, 9);
        assert_eq!(plain(&lines), vec!["bold", "wordstail", "more"]);
        assert_eq!(lines[0].spans, vec![Span::styled("bold", bold)]);
        assert_eq!(
            lines[1].spans,
            vec![Span::styled("words", bold), Span::styled("tail", red)]
        );
        assert_eq!(lines[2].spans, vec![Span::styled("more", bold)]);
    }

    #[test]
    fn prefix_styles_are_kept() {
        let bar = Style::new().fg(Color::Blue);
        let prefix = Line::from(Span::styled("│ ", bar));
        let lines = wrap_prefixed(&[Span::raw("aa bb")], 4, &prefix, &prefix);
        assert_eq!(plain(&lines), vec!["│ aa", "│ bb"]);
        assert!(lines.iter().all(|l| l.spans[0].style == bar));
    }

    #[test]
    fn hard_wrap_keeps_spaces_and_cuts_exactly() {
        check_hard("    let x = 1;", 6, &["    le", "t x = ", "1;"]);
        check_hard("", 6, &[""]);
        check_hard("ab", 0, &[]);
        check_hard("日本語", 3, &["日", "本", "語"]);
        check_hard("\tx", 1, &[" ", " ", " ", " ", "x"]);
        let lines = hard_wrap(
            &[Span::raw("abcdef")],
            4,
            &Line::from("+ "),
            &Line::from("  "),
        );
        assert_eq!(plain(&lines), vec!["+ ab", "  cd", "  ef"]);
    }

    #[test]
    fn widths_are_measured_as_drawn() {
        assert_eq!(str_width("abc"), 3);
        assert_eq!(str_width("日本"), 4);
        assert_eq!(str_width("e\u{301}"), 1);
        assert_eq!(str_width("a\u{1b}b"), 2);
        assert_eq!(
            line_width(&Line::from(vec![Span::raw("ab"), Span::raw("日")])),
            4
        );
    }

    #[test]
    fn cache_renders_once_per_generation_and_width() {
        let mut cache = WrapCache::new();
        let mut calls = 0;
        let mut render = |generation: u64, width: u16, cache: &mut WrapCache| {
            cache
                .get_or_render(generation, width, |w| {
                    calls += 1;
                    wrap(&[Span::raw("some words to wrap")], w)
                })
                .len()
        };
        assert_eq!(render(1, 10, &mut cache), 2);
        assert_eq!(render(1, 10, &mut cache), 2);
        assert_eq!(render(1, 40, &mut cache), 1);
        assert_eq!(render(2, 40, &mut cache), 1);
        assert!(cache.is_current(2, 40));
        assert!(!cache.is_current(2, 10));
        cache.invalidate();
        assert!(!cache.is_current(2, 40));
        assert_eq!(render(2, 40, &mut cache), 1);
        assert_eq!(calls, 4);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn text() -> impl Strategy<Value = String> {
            // Words, spaces, newlines, tabs, wide and zero-width characters, control bytes.
            proptest::collection::vec(
                prop_oneof![
                    "[a-z]{1,12}",
                    Just(" ".to_string()),
                    Just("\n".to_string()),
                    Just("\t".to_string()),
                    Just("日本".to_string()),
                    Just("🎉".to_string()),
                    Just("e\u{301}".to_string()),
                    Just("\u{200b}".to_string()),
                    Just("\u{1b}".to_string()),
                    any::<char>().prop_map(String::from),
                ],
                0..40,
            )
            .prop_map(|parts| parts.concat())
        }

        fn words(s: &str) -> String {
            s.chars()
                .filter(|c| !c.is_whitespace() && !c.is_control() && *c != '\u{200b}')
                .collect()
        }

        proptest! {
            // Failures are turned into named unit tests rather than kept in a file.
            #![proptest_config(ProptestConfig {
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn wrap_never_panics_fits_and_loses_nothing(input in text(), width in 0u16..30) {
                let lines = wrap_prefixed(
                    &[Span::raw(input.clone())],
                    width,
                    &Line::from("• "),
                    &Line::from("  "),
                );
                if width == 0 {
                    prop_assert!(lines.is_empty());
                } else {
                    prop_assert!(!lines.is_empty());
                    for line in &lines {
                        // Only a wide character alone on a line may pass the width.
                        prop_assert!(line_width(line) <= usize::from(width).max(4));
                    }
                    let joined: String = lines
                        .iter()
                        .flat_map(|l| l.spans.iter().skip(usize::from(width > 2)))
                        .map(|s| s.content.to_string())
                        .collect();
                    if width > 2 {
                        prop_assert_eq!(words(&joined), words(&input));
                    }
                }
            }

            #[test]
            fn hard_wrap_never_panics_and_fits(input in text(), width in 0u16..30) {
                let lines = hard_wrap(&[Span::raw(input)], width, &Line::default(), &Line::default());
                for line in &lines {
                    prop_assert!(line_width(line) <= usize::from(width).max(2));
                }
            }
        }
    }
}
