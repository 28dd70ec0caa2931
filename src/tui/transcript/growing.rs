//! A reply still being streamed, laid out as it grows. Its finished paragraphs (everything
//! before its last blank line outside a code block) are laid out once; of the paragraph
//! being written, the lines that can no longer change are kept as well (settled), so that a
//! frame lays out only the text after the last settled line: its cost follows what arrived,
//! not the length of the paragraph.
//!
//! A line is settled only where laying out the text before it and the text from it apart
//! gives exactly the lines that laying out both at once gives, and where nothing still to
//! come can change that: the text before it leaves open no emphasis, code span, link or tag
//! that a later character could close, and the line's first word is whole and drawn as
//! written, so it cannot come to fit on the line before. A later line that changes a
//! paragraph as a whole (a setext underline or a table's delimiter row, which make it a
//! heading or a table) or a tab (whose width depends on the column it starts at) has the
//! paragraph laid out again from its start.
//!
//! A code block being written settles the same way, a line at a time: what follows a
//! settled code line is laid out behind the block's opening line and the code line before
//! it (not shown), which is exact where that line alone leaves the highlighter as the whole
//! block does (true of most lines; not inside a comment or a string over several lines,
//! where the block waits for a line past its end).

use super::cell::{View, markdown_block};
use super::tail::live_tail;
use crate::tui::highlight::ends_as_alone;
use crate::tui::markdown::fence_language;
use crate::tui::render_markdown;
use crate::tui::theme::Theme;
use ratatui::text::{Line, Span};
use std::borrow::Cow;

/// The paragraph being written is looked at for a line to settle once what is not settled
/// of it takes this many lines.
const SETTLE_AFTER: usize = 8;
/// Lines left unsettled when settling: the last one may still grow.
const KEEP_OPEN: usize = 2;
/// Places where a line's first word occurs that are tried as the line's start.
const TRIES: usize = 4;

/// What of a streaming reply is laid out for good, and the scan for its paragraph ends.
#[derive(Debug, Clone, Default)]
pub(super) struct Growing {
    /// The width and view the kept lines were laid out for.
    key: Option<(u16, View)>,
    /// Where the paragraph being written starts in the text, and the lines before it.
    paragraph: Mark,
    /// Up to where the text is laid out for good, and in how many lines: the start of the
    /// paragraph being written or a settled line in it.
    settled: Mark,
    /// The length of the unsettled text from which settling is tried again, after a try
    /// that found no line to settle: the tries cost in all what laying it out once does.
    retry_at: usize,
    /// The opening line of the code block the settled line is in, and the code line before
    /// it: the text after it is laid out behind these, so that it is still code, highlighted
    /// from where that line leaves the highlighter; the line is laid out to `replayed` lines,
    /// not shown.
    fence: Option<String>,
    replayed: usize,
    scan: Scan,
    /// Bytes of text laid out by the last call, for the tests that the work per frame does
    /// not grow with the paragraph.
    pub(super) laid_out: usize,
}

/// A place in the text and the number of lines laid out before it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Mark {
    offset: usize,
    lines: usize,
}

impl Growing {
    /// The lines of streaming `text` into `out`, which holds the lines of the last call:
    /// those laid out for good are kept when the width and view are the same.
    pub(super) fn render(
        &mut self,
        text: &str,
        width: u16,
        view: View,
        theme: &Theme,
        out: &mut Vec<Line<'static>>,
    ) {
        self.laid_out = 0;
        let cut = self.scan.advance(text);
        let current = self.key == Some((width, view))
            && out.len() >= self.settled.lines
            && self.settled.offset <= text.len()
            && text.is_char_boundary(self.settled.offset)
            && cut >= self.paragraph.offset;
        if !current {
            *self = Growing {
                key: Some((width, view)),
                scan: self.scan,
                ..Growing::default()
            };
            out.clear();
        }
        out.truncate(self.settled.lines);
        // What comes after a settled code line cannot change the lines before it.
        if self.is_inside_block()
            && self.fence.is_none()
            && must_start_over(&text[self.settled.offset..])
        {
            self.settled = self.paragraph;
            out.truncate(self.settled.lines);
        }
        // Paragraphs finished since the last call join the lines laid out for good.
        if cut > self.settled.offset {
            let finished = self.source(&text[self.settled.offset..cut]);
            self.append(out, &finished, self.replayed, width, theme);
            self.paragraph = Mark {
                offset: cut,
                lines: out.len(),
            };
            self.settled = self.paragraph;
            self.fence = None;
            self.replayed = 0;
        }
        let tail = self.source(&text[self.settled.offset..]);
        let shown = match view.live_tail {
            Some(lines) => live_tail(&tail, width, lines),
            None => Cow::Borrowed(tail.as_ref()),
        };
        if shown.trim().is_empty() {
            if out.is_empty() {
                out.extend(markdown_block(&shown, width.max(4), theme));
            }
        } else {
            // Cut for a view of the last lines, it no longer starts with the replayed line.
            let replayed = if shown.len() == tail.len() {
                self.replayed
            } else {
                0
            };
            let start = self.append(out, &shown, replayed, width, theme);
            // A view of the last lines lays out only the end of the tail anyway.
            if view.live_tail.is_none() {
                self.settle(text, start, out, width, theme);
            }
        }
        out.push(Line::default());
    }

    /// Unsettled text as it is laid out: behind the opening line of the code block it is in.
    fn source<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match &self.fence {
            Some(fence) => Cow::Owned(format!("{fence}{text}")),
            None => Cow::Borrowed(text),
        }
    }

    /// Whether the text is laid out for good up to a settled line inside a block (a
    /// paragraph or a code block).
    fn is_inside_block(&self) -> bool {
        self.settled.offset > self.paragraph.offset
    }

    /// Lays `text` out after the lines in `out` as laying out everything at once would have
    /// placed it: after a blank line when it starts a block, straight on when it goes on from
    /// a settled line, and without the reply's bullet, which only its first line has.
    /// Returns where its lines start in `out`. The first `replayed` lines laid out (the code
    /// line put behind a fence again) are left out.
    fn append(
        &mut self,
        out: &mut Vec<Line<'static>>,
        text: &str,
        replayed: usize,
        width: u16,
        theme: &Theme,
    ) -> usize {
        let mid = self.is_inside_block();
        let text = if mid {
            text
        } else {
            text.trim_start_matches('\n')
        };
        if text.trim().is_empty() {
            return out.len();
        }
        self.laid_out += text.len();
        let mut lines = markdown_block(text, width.max(4), theme);
        lines.drain(..replayed.min(lines.len()));
        if !out.is_empty() {
            if let Some(first) = lines.first_mut()
                && let Some(marker) = first.spans.first_mut()
            {
                *marker = Span::raw("  ");
            }
            if !mid {
                out.push(Line::from("  "));
            }
        }
        let start = out.len();
        out.append(&mut lines);
        start
    }

    /// Settles the unsettled lines (from `start` in `out`) but the last [`KEEP_OPEN`], when
    /// they are many and the place their last line starts is found.
    fn settle(
        &mut self,
        text: &str,
        start: usize,
        out: &[Line<'static>],
        width: u16,
        theme: &Theme,
    ) {
        let tail = &text[self.settled.offset..];
        // `append` dropped these when the tail starts a block.
        let lead = match self.is_inside_block() {
            true => 0,
            false => tail.len() - tail.trim_start_matches('\n').len(),
        };
        let source = self.source(&tail[lead..]);
        let lines = &out[start..];
        if lines.len() < SETTLE_AFTER || source.len() < self.retry_at {
            return;
        }
        let mut apart = Apart {
            inner: width.max(4) - 2,
            theme,
            skip: self.replayed,
            laid_out: &mut self.laid_out,
        };
        let found = match open_fence(&source) {
            Some((fence, code)) => settled_code_line(&source, fence, code, lines, &mut apart),
            None => {
                let keep = lines.len() - KEEP_OPEN;
                settled_line(&source, lines, keep, &mut apart).map(|at| (at, keep, None, 0))
            }
        };
        // Where the source starts in the text: before the fence's line put in front of it.
        let origin = (self.settled.offset + lead).checked_sub(source.len() - tail[lead..].len());
        match found.zip(origin) {
            Some(((at, keep, fence, replayed), origin)) if origin + at > self.settled.offset => {
                self.settled = Mark {
                    offset: origin + at,
                    lines: start + keep,
                };
                self.fence = fence;
                self.replayed = replayed;
                self.retry_at = 0;
            }
            _ => self.retry_at = source.len().saturating_mul(2),
        }
    }
}

/// Text laid out apart to check a place to settle: the lines it gives, at the width the
/// reply's markdown has inside its two-cell margin.
struct Apart<'a> {
    inner: u16,
    theme: &'a Theme,
    /// Lines the source starts with that were not shown: the code line put behind a fence.
    skip: usize,
    laid_out: &'a mut usize,
}

impl Apart<'_> {
    /// The lines of `text`, less the first `skip`.
    fn lay_out(&mut self, text: &str, skip: usize) -> Vec<Line<'static>> {
        *self.laid_out += text.len();
        let mut lines = render_markdown(text, self.inner, self.theme);
        lines.drain(..skip.min(lines.len()));
        lines
    }

    /// Whether the source's text before `at` lays out apart to `lines`.
    fn gives(&mut self, before: &str, lines: &[Line<'static>]) -> Option<Vec<Line<'static>>> {
        let laid = self.lay_out(before, self.skip);
        same_lines(&laid, lines).then_some(laid)
    }
}

/// Where in `source` line `keep` of its lines (each behind a one-span marker) starts, when
/// the lines before it are final: laid out apart, the text before it and the text from it
/// give these very lines, and the text before it leaves nothing open.
fn settled_line(
    source: &str,
    lines: &[Line<'static>],
    keep: usize,
    apart: &mut Apart<'_>,
) -> Option<usize> {
    let word = first_word(&lines[keep])?;
    let starts = source.rmatch_indices(word.as_str()).filter(|(at, _)| {
        let before = source[..*at].chars().next_back();
        let after = source[at + word.len()..].chars().next();
        before.is_some_and(char::is_whitespace) && after.is_some_and(char::is_whitespace)
    });
    for (at, _) in starts.take(TRIES) {
        if !same_lines(&apart.lay_out(&source[at..], 0), &lines[keep..]) {
            continue;
        }
        let before = apart.gives(&source[..at], &lines[..keep])?;
        return leaves_nothing_open(&before).then_some(at);
    }
    None
}

/// The opening line of the code block `source` ends inside, and where the block's code starts.
fn open_fence(source: &str) -> Option<(&str, usize)> {
    let mut open = None;
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            open = match open {
                Some(_) => None,
                None => Some((line, offset + line.len())),
            };
        }
        offset += line.len();
    }
    open.filter(|(fence, _)| fence.ends_with('\n'))
}

/// Where in `source`, which ends inside a code block opened by `fence` (its code from
/// `code`), its last line with text starts, how many of `lines` come before it, and what to
/// lay the rest out behind, when the lines before it are final: laid out apart (the rest
/// behind the fence's line and the code line before it, which is not shown) they give these
/// very lines, and the highlighter is at that line where the line before it alone leaves it,
/// so the rest is highlighted the same apart.
fn settled_code_line(
    source: &str,
    fence: &str,
    code: usize,
    lines: &[Line<'static>],
    apart: &mut Apart<'_>,
) -> Option<(usize, usize, Option<String>, usize)> {
    let body = source[code..].trim_end_matches('\n');
    let at = code + body.rfind('\n')? + 1;
    let previous = code + body[..at - code - 1].rfind('\n').map_or(0, |i| i + 1);
    let behind = format!("{fence}{}", &source[previous..at]);
    let replayed = apart.lay_out(&behind, 0).len();
    let rest = apart.lay_out(&format!("{behind}{}", &source[at..]), replayed);
    let keep = lines.len().checked_sub(rest.len())?;
    if keep == 0 || !same_lines(&rest, &lines[keep..]) {
        return None;
    }
    apart.gives(&source[..at], &lines[..keep])?;
    let info = fence.trim_start().trim_start_matches(['`', '~']);
    *apart.laid_out += at - code;
    ends_as_alone(
        &source[code..at],
        &source[previous..at],
        &fence_language(info),
        &apart.theme.syntax_theme,
    )
    .then_some((at, keep, Some(behind), replayed))
}

/// Whether `laid` are `marked` without their first span (the reply's bullet or indent).
fn same_lines(laid: &[Line<'_>], marked: &[Line<'_>]) -> bool {
    laid.len() == marked.len()
        && laid
            .iter()
            .zip(marked)
            .all(|(a, b)| b.spans.get(1..) == Some(&a.spans[..]) && a.style == b.style)
}

/// The first word of a line behind its marker, when it is drawn as it is written: letters,
/// digits and punctuation that means nothing in markdown, starting with a letter (which no
/// block starts with).
fn first_word(line: &Line<'_>) -> Option<String> {
    let text: String = line
        .spans
        .iter()
        .skip(1)
        .map(|s| s.content.as_ref())
        .collect();
    let word = text.split(char::is_whitespace).next()?;
    let plain = |c: char| c.is_alphanumeric() || ".,;:?'\"-/%+=@".contains(c);
    (word.chars().next()?.is_alphabetic() && word.chars().all(plain)).then(|| word.to_owned())
}

/// Whether lines laid out leave open nothing a later character could close: no backtick,
/// bracket or tag start and no emphasis or strikethrough delimiter that could open is left
/// as text. (Escaped ones count too: they would only make a line wait.)
fn leaves_nothing_open(lines: &[Line<'_>]) -> bool {
    lines.iter().all(|line| {
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                '`' | '[' => return false,
                '<' if chars
                    .get(i + 1)
                    .is_none_or(|n| n.is_alphabetic() || "/!?".contains(*n)) =>
                {
                    return false;
                }
                '*' | '_' | '~' => {
                    let mut end = i;
                    while chars.get(end) == Some(&c) {
                        end += 1;
                    }
                    // At a line's edge the neighbour in the text is not known here.
                    let (Some(before), Some(after)) = (i.checked_sub(1), chars.get(end)) else {
                        return false;
                    };
                    if can_open(c, chars[before], *after) {
                        return false;
                    }
                    i = end;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        true
    })
}

/// Whether a run of delimiter `c` between `before` and `after` could open emphasis (the
/// flanking rules of CommonMark).
fn can_open(c: char, before: char, after: char) -> bool {
    let punct = |c: char| c.is_ascii_punctuation() || (!c.is_alphanumeric() && !c.is_whitespace());
    let left = !after.is_whitespace() && (!punct(after) || before.is_whitespace() || punct(before));
    let right =
        !before.is_whitespace() && (!punct(before) || after.is_whitespace() || punct(after));
    match c {
        '_' => left && (!right || punct(before)),
        _ => left,
    }
}

/// Whether unsettled text holds what changes the paragraph it goes on as a whole: a line
/// that underlines it into a heading or makes its last line a table's header, or a tab.
fn must_start_over(unsettled: &str) -> bool {
    unsettled.contains('\t')
        || unsettled.lines().any(|line| {
            let line = line.trim();
            !line.is_empty()
                && line.chars().all(|c| "-=|: ".contains(c))
                && line.contains(['-', '='])
        })
}

/// How far a streaming text has been looked through for paragraph ends.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Scan {
    /// Up to the end of its last complete line.
    offset: usize,
    /// Bytes after `offset` known to hold no line end: a long line is searched once.
    searched: usize,
    in_fence: bool,
    previous_blank: bool,
    /// Just after the last blank line outside a code block.
    pub(super) cut: usize,
}

impl Scan {
    /// Looks through what `text` gained since the last call; returns where its finished
    /// paragraphs end.
    pub(super) fn advance(&mut self, text: &str) -> usize {
        let end = self.offset + self.searched;
        if end > text.len() || !text.is_char_boundary(self.offset) || !text.is_char_boundary(end) {
            *self = Scan::default();
        }
        loop {
            let rest = &text[self.offset..];
            let Some(at) = rest[self.searched..].find('\n') else {
                self.searched = rest.len();
                break;
            };
            let line = &rest[..self.searched + at + 1];
            self.searched = 0;
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                self.in_fence = !self.in_fence;
            }
            let blank = line.trim().is_empty();
            self.offset += line.len();
            if blank && !self.in_fence && !self.previous_blank {
                self.cut = self.offset;
            }
            self.previous_blank = blank;
        }
        self.cut
    }
}

#[cfg(test)]
mod tests;
