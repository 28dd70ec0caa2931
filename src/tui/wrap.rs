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
//! on them, and so are invisible format characters (a joiner that joins nothing,
//! directional marks, the soft hyphen), which terminals place differently. They are dropped before the text is cut into
//! graphemes, and neighbouring spans of one style are read as one text, so that what is
//! measured is what is drawn: an emoji and
//! the variation selector that widens it meet on screen even with a control character or a
//! span boundary between them. Width 0 gives no lines at all. A prefix as wide as the width
//! is cut to leave one cell of text, and a wide character in the one cell left is put on a
//! line of its own, the only case where a line is wider than asked, by one cell. A grapheme
//! wider than two cells (a run of Hangul leading jamo, a wide letter with spacing marks) is
//! drawn as its characters, each in a span of its own, so that it can be cut between them;
//! a character wider than two cells (the Khmer sign beyyal) shows as `…` where it does not
//! fit.
//!
//! [`WrapCache`] keeps the lines of one block so that redraws do not wrap it again.

use std::borrow::Cow;

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

/// The narrowest width at which wrapping `spans` makes no line wider than asked: the width
/// of its widest glyph, two cells for a wide character (a grapheme wider than that is cut
/// into its characters), 0 for no text.
pub fn narrowest_width(spans: &[Span<'_>]) -> usize {
    glyphs(&runs(spans))
        .iter()
        .map(|g| g.width)
        .max()
        .unwrap_or(0)
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

/// One grapheme of the input (or one part of a grapheme too wide to keep whole), with its
/// style and width.
struct Glyph<'a> {
    text: &'a str,
    width: usize,
    style: Style,
    kind: Kind,
    /// Starts a span of its own rather than going on the previous glyph's: the two did not
    /// meet in the text (a tab's spaces, the parts of a cut grapheme), and in one span they
    /// could join into a grapheme of another width.
    fresh: bool,
    /// Continues the grapheme the previous glyph began: the two stay on one line if they fit.
    joined: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Part of a word.
    Word,
    /// A wide character, or a part of a grapheme wider than two cells: a word by itself
    /// (with the grapheme's other parts).
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
        let runs = runs(spans);
        let glyphs = glyphs(&runs);
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
                    } else if self.current_width > 0 && word_width <= self.rest_available() {
                        // In cell mode the word is one grapheme, cut into parts only when it
                        // is wider than a whole line.
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
                            if g.width > self.available().max(2) {
                                // A character wider than a wide one cannot be cut (the Khmer
                                // sign beyyal is three cells): where it does not fit, the
                                // line would be clipped before it anyway, so a mark shows
                                // that something is there.
                                self.push(&Glyph {
                                    text: "…",
                                    width: 1,
                                    fresh: true,
                                    joined: false,
                                    ..*g
                                });
                            } else {
                                self.push(g);
                            }
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
            Some(last) if last.style == glyph.style && !glyph.fresh => {
                last.content.to_mut().push_str(glyph.text);
            }
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
        let mut end = start + 1;
        while end < glyphs.len() && glyphs[end].joined {
            end += 1;
        }
        return end;
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

/// The text as it will be drawn, in runs of one style: neighbouring spans of the same style
/// joined, and control characters other than tabs and newlines dropped (a `\r\n` becomes a
/// newline). The graphemes are found in this text, since the characters either side of a
/// dropped one meet on screen and may form a grapheme of another width.
fn runs<'a>(spans: &'a [Span<'_>]) -> Vec<(Cow<'a, str>, Style)> {
    let mut runs: Vec<(Cow<'a, str>, Style)> = Vec::new();
    for span in spans {
        let text = drawable(&span.content, true);
        if text.is_empty() {
            continue;
        }
        match runs.last_mut() {
            Some((run, style)) if *style == span.style => run.to_mut().push_str(&text),
            _ => runs.push((text, span.style)),
        }
    }
    runs.into_iter()
        .map(|(text, style)| (without_loose_joiners(text), style))
        .collect()
}

/// `text` without its control characters (but for tabs and newlines, if `keep_breaks`) and
/// without its invisible format characters (but for the zero-width space, a break
/// opportunity, if `keep_breaks`).
fn drawable(text: &str, keep_breaks: bool) -> Cow<'_, str> {
    let dropped = |c: char| {
        (c.is_control() && !(keep_breaks && matches!(c, '\t' | '\n')))
            || (is_invisible_format(c) && !(keep_breaks && c == '\u{200B}'))
    };
    if text.contains(dropped) {
        Cow::Owned(text.chars().filter(|&c| !dropped(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// Whether `c` is a format character that takes no cell and joins nothing the terminal
/// draws: the zero-width non-joiner, directional marks, the soft hyphen, the byte-order
/// mark. Terminals disagree about their width; dropped, they cannot shift anything. The
/// zero-width joiner is dropped only where it joins nothing ([`without_loose_joiners`]).
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{AD}'
            | '\u{61C}'
            | '\u{180E}'
            | '\u{200B}'
            | '\u{200C}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// `text` without the zero-width joiners that end their grapheme, keeping those inside one
/// (an emoji sequence, drawn as one glyph). A joiner drawn at the end of a cell makes some
/// terminals (tmux among them) join the next cell's character into that cell, so every cell
/// after it lands off the place the screen's diff believes, until a full redraw.
fn without_loose_joiners(text: Cow<'_, str>) -> Cow<'_, str> {
    const ZWJ: char = '\u{200D}';
    if !text.contains(ZWJ) {
        return text;
    }
    let mut kept = String::with_capacity(text.len());
    for g in text.graphemes(true) {
        kept.push_str(g.trim_end_matches(ZWJ));
    }
    Cow::Owned(kept)
}

/// The runs' graphemes, classified; tabs expanded, graphemes wider than two cells cut into
/// their characters.
fn glyphs<'a>(runs: &'a [(Cow<'a, str>, Style)]) -> Vec<Glyph<'a>> {
    let mut out = Vec::new();
    let mut column = 0;
    for (text, style) in runs {
        let glyph = |text, width, kind, fresh, joined| Glyph {
            text,
            width,
            style: *style,
            kind,
            fresh,
            joined,
        };
        // Whether the next glyph follows one that was not in the text as it stands.
        let mut after_made = false;
        for g in text.graphemes(true) {
            if g == "\n" {
                out.push(glyph(g, 0, Kind::Newline, false, false));
                column = 0;
                after_made = false;
            } else if g == "\t" {
                // One glyph per cell, so that hard wrapping can cut inside the tab.
                let width = TAB_STOP - column % TAB_STOP;
                for cell in 0..width {
                    out.push(glyph(" ", 1, Kind::Space, cell == 0, false));
                }
                column += width;
                after_made = true;
            } else if g == "\u{200B}" {
                // A break opportunity that draws nothing.
                out.push(glyph("", 0, Kind::Space, after_made, false));
            } else {
                let width = usize::from(g.cell_width());
                if width > 2 {
                    // Wider than a wide character: a line narrower than the grapheme would
                    // overflow by all of it, so it is drawn as its characters, which a line
                    // may be cut between (each in a span of its own, measured as drawn).
                    for (i, part) in grapheme_parts(g).into_iter().enumerate() {
                        let width = str_width(part);
                        out.push(glyph(part, width, Kind::Wide, true, i > 0));
                        column += width;
                    }
                    after_made = true;
                    continue;
                }
                let kind = if is_breaking_space(g) {
                    Kind::Space
                } else if width >= 2 {
                    Kind::Wide
                } else {
                    Kind::Word
                };
                out.push(glyph(g, width, kind, after_made, false));
                column += width;
                after_made = false;
            }
        }
    }
    out
}

/// A grapheme cut before each of its characters that takes cells, the characters that take
/// none (accents, joiners, selectors) kept with the one before them.
fn grapheme_parts(grapheme: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut has_width = false;
    for (i, c) in grapheme.char_indices() {
        if str_width(&grapheme[i..i + c.len_utf8()]) == 0 {
            continue;
        }
        if has_width {
            parts.push(&grapheme[start..i]);
            start = i;
        }
        has_width = true;
    }
    parts.push(&grapheme[start..]);
    parts
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
pub(super) fn truncate(line: &Line<'_>, max: usize) -> Line<'static> {
    let mut left = max;
    let mut spans = Vec::new();
    for span in &line.spans {
        let mut text = String::new();
        // Graphemes as drawn: found after the control characters are dropped.
        for g in without_loose_joiners(drawable(&span.content, false)).graphemes(true) {
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
mod tests;
