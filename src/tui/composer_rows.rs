//! The composer's text cut into rows of the screen's width, kept from frame to frame and laid
//! out again only from the row an edit touched, so a frame's work does not grow with the text:
//! typing at the end of a 100,000-character message lays out one row, and drawing it reads
//! the rows on screen.
//!
//! A line's rows are found greedily: a row ends before the character that would overflow it.
//! Where a row ends depends only on the characters before that point and the one at it, so an
//! edit at byte `at` leaves every row end before `at` where it was.

use crate::tui::wrap::str_width;

/// The rows of every line of the text at one width.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    /// Cells a row holds; 0 before the first layout.
    room: usize,
    lines: Vec<LineRows>,
}

#[derive(Debug, Clone, Default)]
struct LineRows {
    /// Byte offsets where the line's rows after the first begin.
    breaks: Vec<usize>,
    /// The line changed from this byte on since it was laid out.
    stale_from: Option<usize>,
}

impl LineRows {
    fn stale() -> Self {
        Self {
            breaks: Vec::new(),
            stale_from: Some(0),
        }
    }

    fn count(&self) -> usize {
        self.breaks.len() + 1
    }
}

/// A row of the text: which line, and the byte range of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub line: usize,
    pub from: usize,
    pub to: usize,
}

impl Rows {
    /// The text is now `lines` lines, none laid out.
    pub fn reset(&mut self, lines: usize) {
        self.lines.clear();
        self.lines.resize_with(lines, LineRows::stale);
    }

    /// Line `line` changed from byte `at` on.
    pub fn edited(&mut self, line: usize, at: usize) {
        if let Some(rows) = self.lines.get_mut(line) {
            rows.stale_from = Some(rows.stale_from.map_or(at, |from| from.min(at)));
        }
    }

    /// `count` new lines were put in before line `at`.
    pub fn inserted(&mut self, at: usize, count: usize) {
        let at = at.min(self.lines.len());
        self.lines
            .splice(at..at, std::iter::repeat_with(LineRows::stale).take(count));
    }

    /// Line `at` was taken out.
    pub fn removed(&mut self, at: usize) {
        if at < self.lines.len() {
            self.lines.remove(at);
        }
    }

    /// Lays out what changed since the last layout, for rows of `room` cells.
    pub fn lay_out(&mut self, text: &[String], room: usize) {
        let room = room.max(1);
        if room != self.room || self.lines.len() != text.len() {
            self.room = room;
            self.reset(text.len());
        }
        for (rows, line) in self.lines.iter_mut().zip(text) {
            let Some(from) = rows.stale_from.take() else {
                continue;
            };
            let kept = rows.breaks.partition_point(|&b| b < from);
            rows.breaks.truncate(kept);
            let start = rows.breaks.last().copied().unwrap_or(0);
            break_rows(line, start, room, &mut rows.breaks);
        }
    }

    /// Rows in all, with the cursor's own row when it sits after a full last row.
    pub fn count(&self, text: &[String], cursor: (usize, usize), at_most: usize) -> usize {
        let mut count = 0;
        for rows in &self.lines {
            count += rows.count();
            if count >= at_most {
                return at_most;
            }
        }
        count += usize::from(self.cursor_past_end(text, cursor));
        count.clamp(1, at_most)
    }

    /// The row the cursor is on (counted over all lines) and its column in cells.
    pub fn cursor(&self, text: &[String], (line, col): (usize, usize)) -> (usize, usize) {
        let before: usize = self.lines[..line.min(self.lines.len())]
            .iter()
            .map(LineRows::count)
            .sum();
        let Some(rows) = self.lines.get(line) else {
            return (before, 0);
        };
        if self.cursor_past_end(text, (line, col)) {
            return (before + rows.count(), 0);
        }
        let within = rows.breaks.partition_point(|&b| b <= col);
        let start = if within == 0 {
            0
        } else {
            rows.breaks[within - 1]
        };
        let cells = text
            .get(line)
            .and_then(|text| text.get(start..col))
            .map_or(0, str_width_by_char);
        (before + within, cells)
    }

    /// The rows from row `first` on, at most `count` of them.
    pub fn rows(&self, text: &[String], first: usize, count: usize) -> Vec<Row> {
        let mut out = Vec::with_capacity(count.min(crate::tui::composer::MAX_ROWS as usize));
        let mut seen = 0;
        for (line, rows) in self.lines.iter().enumerate() {
            if seen + rows.count() <= first {
                seen += rows.count();
                continue;
            }
            let len = text.get(line).map_or(0, String::len);
            let starts = std::iter::once(0).chain(rows.breaks.iter().copied());
            let ends = rows.breaks.iter().copied().chain(std::iter::once(len));
            for (from, to) in starts.zip(ends) {
                if seen >= first {
                    out.push(Row { line, from, to });
                    if out.len() == count {
                        return out;
                    }
                }
                seen += 1;
            }
        }
        out
    }

    /// Whether the cursor stands at the end of its line, after a row that is already full:
    /// then it shows at the start of a row of its own.
    fn cursor_past_end(&self, text: &[String], (line, col): (usize, usize)) -> bool {
        let (Some(rows), Some(text)) = (self.lines.get(line), text.get(line)) else {
            return false;
        };
        if col < text.len() {
            return false;
        }
        let start = rows.breaks.last().copied().unwrap_or(0);
        start < text.len() && str_width_by_char(&text[start..]) >= self.room
    }
}

/// Finds the row ends of `line` from byte `start` (the start of a row) on, onto `breaks`.
fn break_rows(line: &str, start: usize, room: usize, breaks: &mut Vec<usize>) {
    let mut used = 0;
    let mut row_start = start;
    for (i, ch) in line[start..].char_indices() {
        let at = start + i;
        let w = char_width(ch);
        // A character wider than a whole row still gets a row of its own, never an empty one.
        if used + w > room && at > row_start {
            breaks.push(at);
            row_start = at;
            used = 0;
        }
        used += w;
    }
}

fn char_width(ch: char) -> usize {
    str_width(ch.encode_utf8(&mut [0; 4]))
}

/// Cells of `text`, measured character by character as rows are.
fn str_width_by_char(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.split('\n').map(str::to_owned).collect()
    }

    fn shown(rows: &Rows, text: &[String]) -> Vec<String> {
        rows.rows(text, 0, usize::MAX)
            .into_iter()
            .map(|row| text[row.line][row.from..row.to].to_owned())
            .collect()
    }

    #[test]
    fn rows_break_before_the_character_that_overflows() {
        let text = lines("abcdefghij\n\nxy");
        let mut rows = Rows::default();
        rows.lay_out(&text, 4);
        assert_eq!(shown(&rows, &text), ["abcd", "efgh", "ij", "", "xy"]);
        // Wide characters take two cells and never split.
        let text = lines("a漢字b");
        rows.lay_out(&text, 4);
        assert_eq!(shown(&rows, &text), ["a漢", "字b"]);
    }

    #[test]
    fn an_edit_lays_out_again_from_its_row_and_matches_a_fresh_layout() {
        let mut text = lines(&"word ".repeat(40));
        let mut rows = Rows::default();
        rows.lay_out(&text, 7);
        for (at, insert) in [(200, "end"), (3, "ünï"), (50, "漢字漢字"), (0, "x")] {
            text[0].insert_str(at, insert);
            rows.edited(0, at);
            rows.lay_out(&text, 7);
            let mut fresh = Rows::default();
            fresh.lay_out(&text, 7);
            assert_eq!(
                shown(&rows, &text),
                shown(&fresh, &text),
                "after {insert:?}"
            );
        }
        text[0].replace_range(10..60, "");
        rows.edited(0, 10);
        rows.lay_out(&text, 7);
        let mut fresh = Rows::default();
        fresh.lay_out(&text, 7);
        assert_eq!(shown(&rows, &text), shown(&fresh, &text), "after a cut");
    }

    #[test]
    fn the_cursor_after_a_full_row_starts_a_row_of_its_own() {
        let text = lines("abcd");
        let mut rows = Rows::default();
        rows.lay_out(&text, 4);
        assert_eq!(rows.cursor(&text, (0, 4)), (1, 0));
        assert_eq!(rows.count(&text, (0, 4), 10), 2);
        assert_eq!(rows.cursor(&text, (0, 2)), (0, 2));
        assert_eq!(rows.count(&text, (0, 2), 10), 1);
        let text = lines("ab\nabcdefg");
        rows.lay_out(&text, 4);
        assert_eq!(rows.cursor(&text, (1, 4)), (2, 0), "a cursor at a break");
        assert_eq!(rows.cursor(&text, (1, 7)), (2, 3));
        assert_eq!(rows.count(&text, (1, 7), 2), 2, "capped");
    }
}
