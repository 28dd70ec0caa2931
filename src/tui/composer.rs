//! The composer: where the person writes. Multi-line (Enter sends; Shift+Enter, Alt+Enter or
//! Ctrl+J start a new line), with the usual editing keys, input history on Up and Down at the
//! first and last line, and pastes over 20 lines kept whole behind a `[pasted N lines]`
//! marker that is expanded when the message is sent.
//!
//! A key costs the same however long the text is: the cursor is a byte offset, the rows on
//! screen are laid out again only from the row an edit touched ([`Rows`]), and the word
//! completion looks at is found within a bounded stretch before the cursor, so a burst of
//! 100,000 typed characters goes in as fast as a short one.

use crate::tui::composer_rows::Rows;
use crate::tui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use std::cell::RefCell;

/// A paste longer than this many lines shows as a marker.
const PASTE_MARKER_LINES: usize = 20;
/// Most rows the composer takes on screen; longer text scrolls inside it.
pub const MAX_ROWS: u16 = 10;
/// Inputs remembered for Up and Down.
const HISTORY: usize = 200;
/// Bytes before the cursor searched for the start of the word being written: a longer word
/// is no `@` file name or command being completed.
const WORD_REACH: usize = 1024;

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Not a key the composer handles.
    Ignored,
    Changed,
    /// The person sent the text (markers expanded).
    Submit(String),
}

/// The text being written and the cursor in it.
#[derive(Debug, Clone)]
pub struct Composer {
    lines: Vec<String>,
    /// Cursor line and byte offset in it (always at a character's start).
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Which history entry is shown while browsing, and the draft it replaced.
    browsing: Option<(usize, Vec<String>)>,
    /// Marker → pasted text.
    pastes: Vec<(String, String)>,
    /// Pastes put behind a marker since the composer was last cleared: each marker's number,
    /// never used twice even when an earlier marker was deleted.
    markers: usize,
    /// The text's rows at the width last drawn; laid out while drawing, which borrows the
    /// composer as is.
    laid: RefCell<Rows>,
}

impl Default for Composer {
    fn default() -> Self {
        Self {
            lines: vec![String::new()],
            row: 0,
            col: 0,
            history: Vec::new(),
            browsing: None,
            pastes: Vec::new(),
            markers: 0,
            laid: RefCell::default(),
        }
    }
}

impl Composer {
    /// The text as shown (with paste markers).
    pub fn shown(&self) -> String {
        self.lines.join("\n")
    }

    /// The text as it will be sent, markers replaced by what was pasted.
    pub fn text(&self) -> String {
        expanded(&self.shown(), &self.pastes)
    }

    /// [`Self::text`] for sending: a message that is one paste and nothing else is moved out
    /// rather than copied, so a paste of megabytes is never held twice here.
    fn take_text(&mut self) -> String {
        if let ([line], [(marker, _)]) = (self.lines.as_slice(), self.pastes.as_slice())
            && line == marker
        {
            return self
                .pastes
                .pop()
                .map(|(_, pasted)| pasted)
                .unwrap_or_default();
        }
        self.text()
    }

    /// Whether the text as it would be sent is only whitespace, worked out from what is
    /// shown: a paste behind a marker is looked at only for whether it is blank.
    fn text_is_blank(&self) -> bool {
        self.lines.iter().all(|line| {
            let mut rest = line.clone();
            for (marker, pasted) in &self.pastes {
                if rest.contains(marker.as_str()) {
                    if !pasted.trim().is_empty() {
                        return false;
                    }
                    rest = rest.replace(marker.as_str(), "");
                }
            }
            rest.trim().is_empty()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// What follows the `/` while the whole text is one word starting with it: the slash
    /// command being written. No command is longer than [`WORD_REACH`].
    pub fn command(&self) -> Option<&str> {
        let [line] = self.lines.as_slice() else {
            return None;
        };
        let typed = line.strip_prefix('/')?;
        (typed.len() < WORD_REACH && !typed.contains(char::is_whitespace)).then_some(typed)
    }

    pub fn clear(&mut self) {
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.browsing = None;
        self.pastes.clear();
        self.markers = 0;
        self.laid.get_mut().reset(1);
    }

    /// Replaces the text, the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].len();
        self.laid.get_mut().reset(self.lines.len());
    }

    /// Adds a sent message to the history.
    pub fn remember(&mut self, text: &str) {
        if text.trim().is_empty() || self.history.last().map(String::as_str) == Some(text) {
            return;
        }
        self.history.push(text.to_owned());
        if self.history.len() > HISTORY {
            self.history.remove(0);
        }
    }

    /// Handles a key press.
    pub fn key(&mut self, key: KeyEvent) -> Edit {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        match key.code {
            KeyCode::Enter if shift || alt => self.newline(),
            KeyCode::Char('j') if ctrl => self.newline(),
            KeyCode::Enter => {
                if self.text_is_blank() {
                    return Edit::Ignored;
                }
                self.remember(&self.shown());
                let text = self.take_text();
                self.clear();
                return Edit::Submit(text);
            }
            KeyCode::Char('a') if ctrl => self.col = 0,
            KeyCode::Char('e') if ctrl => self.col = self.line_len(),
            KeyCode::Char('u') if ctrl => {
                self.lines[self.row].replace_range(..self.col, "");
                self.changed(0);
                self.col = 0;
            }
            KeyCode::Char('k') if ctrl => {
                self.lines[self.row].truncate(self.col);
                self.changed(self.col);
            }
            KeyCode::Char('w') if ctrl => self.delete_word(),
            KeyCode::Backspace if alt || ctrl => self.delete_word(),
            KeyCode::Char(c) if !ctrl => self.insert(c.encode_utf8(&mut [0; 4])),
            KeyCode::Tab => self.insert("    "),
            KeyCode::Backspace => self.backspace(),
            KeyCode::Delete => self.delete(),
            KeyCode::Left if alt || ctrl => self.word_left(),
            KeyCode::Right if alt || ctrl => self.word_right(),
            KeyCode::Left => self.left(),
            KeyCode::Right => self.right(),
            KeyCode::Home => self.col = 0,
            KeyCode::End => self.col = self.line_len(),
            KeyCode::Up if self.row == 0 => return self.history_back(),
            KeyCode::Up => self.go_to_line(self.row - 1),
            KeyCode::Down if self.row + 1 == self.lines.len() => return self.history_forward(),
            KeyCode::Down => self.go_to_line(self.row + 1),
            _ => return Edit::Ignored,
        }
        self.browsing = None;
        Edit::Changed
    }

    /// A bracketed paste: inserted as typed, or behind a marker when long. Taken by value, so
    /// a long paste is kept without a copy (line ends are rewritten only when it has `\r`).
    pub fn paste(&mut self, text: impl Into<String>) {
        let text = unix_line_ends(text.into());
        let count = text.lines().count();
        if count > PASTE_MARKER_LINES {
            self.markers += 1;
            let marker = format!("[pasted {count} lines #{}]", self.markers);
            self.pastes.push((marker.clone(), text));
            self.insert(&marker);
        } else {
            self.insert(&text);
        }
        self.browsing = None;
    }

    /// The word under the cursor, back to the last space, and where it starts (a byte
    /// offset in the cursor's line): what `@` completion works on. A word reaching further
    /// back than [`WORD_REACH`] bytes counts as none.
    pub fn current_word(&self) -> (usize, &str) {
        let line = &self.lines[self.row];
        let mut reach = self.col.saturating_sub(WORD_REACH);
        while !line.is_char_boundary(reach) {
            reach += 1;
        }
        let start = match line[reach..self.col].rfind(char::is_whitespace) {
            Some(i) => reach + i + line[reach + i..].chars().next().map_or(1, char::len_utf8),
            None if reach == 0 => 0,
            None => self.col,
        };
        (start, &line[start..self.col])
    }

    /// Replaces the word under the cursor (see [`Composer::current_word`]) with `with`.
    pub fn replace_current_word(&mut self, with: &str) {
        let (start, _) = self.current_word();
        self.lines[self.row].replace_range(start..self.col, with);
        self.changed(start);
        self.col = start + with.len();
    }

    fn insert(&mut self, text: &str) {
        if !text.contains('\n') {
            // A typed key: no copy of the rest of the line but the bytes after the cursor.
            self.lines[self.row].insert_str(self.col, text);
            self.changed(self.col);
            self.col += text.len();
            return;
        }
        let mut parts = text.split('\n');
        let first = parts.next().unwrap_or("");
        let tail = self.lines[self.row].split_off(self.col);
        self.changed(self.col);
        self.lines[self.row].push_str(first);
        let mut added = Vec::new();
        for part in parts {
            added.push(part.to_owned());
        }
        self.col = added.last().map_or(0, String::len);
        if let Some(last) = added.last_mut() {
            last.push_str(&tail);
        }
        let count = added.len();
        self.lines.splice(self.row + 1..self.row + 1, added);
        self.laid.get_mut().inserted(self.row + 1, count);
        self.row += count;
    }

    /// The cursor's line changed from byte `at` on: its rows are laid out again from there.
    fn changed(&mut self, at: usize) {
        self.laid.get_mut().edited(self.row, at);
    }

    /// Moves the cursor to line `row`, as many characters into it as it was into its own.
    fn go_to_line(&mut self, row: usize) {
        let chars = self.lines[self.row][..self.col].chars().count();
        self.row = row;
        let line = &self.lines[row];
        self.col = line
            .char_indices()
            .nth(chars)
            .map_or(line.len(), |(i, _)| i);
    }

    /// The byte offset of the character before the cursor.
    fn before_cursor(&self) -> usize {
        let line = &self.lines[self.row];
        line[..self.col]
            .chars()
            .next_back()
            .map_or(0, |c| self.col - c.len_utf8())
    }

    /// The byte offset after the character at the cursor.
    fn after_cursor(&self) -> usize {
        let line = &self.lines[self.row];
        line[self.col..]
            .chars()
            .next()
            .map_or(self.col, |c| self.col + c.len_utf8())
    }

    fn newline(&mut self) {
        self.insert("\n");
    }

    fn backspace(&mut self) {
        if let Some(marker) = self.marker_before_cursor() {
            let from = self.col - marker.len();
            self.lines[self.row].replace_range(from..self.col, "");
            self.col = from;
            self.changed(from);
            self.pastes.retain(|(m, _)| *m != marker);
        } else if self.col > 0 {
            let from = self.before_cursor();
            self.lines[self.row].replace_range(from..self.col, "");
            self.col = from;
            self.changed(from);
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.laid.get_mut().removed(self.row);
            self.row -= 1;
            self.col = self.line_len();
            self.lines[self.row].push_str(&line);
            self.changed(self.col);
        }
    }

    /// A paste marker ending at the cursor: deleted as a whole.
    fn marker_before_cursor(&self) -> Option<String> {
        let before = &self.lines[self.row][..self.col];
        self.pastes
            .iter()
            .map(|(marker, _)| marker)
            .find(|marker| before.ends_with(marker.as_str()))
            .cloned()
    }

    fn delete(&mut self) {
        if self.col < self.line_len() {
            let to = self.after_cursor();
            self.lines[self.row].replace_range(self.col..to, "");
            self.changed(self.col);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.laid.get_mut().removed(self.row + 1);
            self.lines[self.row].push_str(&next);
            self.changed(self.col);
        }
    }

    fn delete_word(&mut self) {
        let start = self.word_start();
        if start == self.col {
            self.backspace();
            return;
        }
        self.lines[self.row].replace_range(start..self.col, "");
        self.col = start;
        self.changed(start);
    }

    /// Where the word before the cursor starts (a byte offset).
    fn word_start(&self) -> usize {
        let before = &self.lines[self.row][..self.col];
        let word_end = before.trim_end_matches(char::is_whitespace).len();
        before[..word_end]
            .rfind(char::is_whitespace)
            .map_or(0, |i| {
                i + before[i..].chars().next().map_or(1, char::len_utf8)
            })
    }

    fn word_left(&mut self) {
        if self.col == 0 {
            self.left();
        } else {
            self.col = self.word_start();
        }
    }

    fn word_right(&mut self) {
        let after = &self.lines[self.row][self.col..];
        if after.is_empty() {
            self.right();
            return;
        }
        let word = after.trim_start_matches(char::is_whitespace);
        let skipped = after.len() - word.len();
        let word_len = word.find(char::is_whitespace).unwrap_or(word.len());
        self.col += skipped + word_len;
    }

    fn left(&mut self) {
        if self.col > 0 {
            self.col = self.before_cursor();
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.line_len();
        }
    }

    fn right(&mut self) {
        if self.col < self.line_len() {
            self.col = self.after_cursor();
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    fn history_back(&mut self) -> Edit {
        let next = match &self.browsing {
            Some((at, _)) if *at == 0 => return Edit::Ignored,
            Some((at, _)) => at - 1,
            None if self.history.is_empty() => return Edit::Ignored,
            None => self.history.len() - 1,
        };
        let draft = match self.browsing.take() {
            Some((_, draft)) => draft,
            None => self.lines.clone(),
        };
        let entry = self.history[next].clone();
        self.set(&entry);
        self.browsing = Some((next, draft));
        Edit::Changed
    }

    fn history_forward(&mut self) -> Edit {
        let Some((at, draft)) = self.browsing.take() else {
            return Edit::Ignored;
        };
        if at + 1 < self.history.len() {
            let entry = self.history[at + 1].clone();
            self.set(&entry);
            self.browsing = Some((at + 1, draft));
        } else {
            self.set(&draft.join("\n"));
        }
        Edit::Changed
    }

    fn line_len(&self) -> usize {
        self.lines[self.row].len()
    }

    /// The text's rows at `width` (two cells go to the prompt), laid out where it changed.
    fn rows_at(&self, width: u16) -> std::cell::RefMut<'_, Rows> {
        let room = (width as usize).saturating_sub(2).max(1);
        let mut rows = self.laid.borrow_mut();
        rows.lay_out(&self.lines, room);
        rows
    }

    /// The text cut into rows of `width` cells after the prompt, and where the cursor is
    /// among them (row, column in cells).
    #[cfg(test)]
    fn rows(&self, width: u16) -> (Vec<String>, (usize, usize)) {
        let laid = self.rows_at(width);
        let cursor = laid.cursor(&self.lines, (self.row, self.col));
        let count = laid.count(&self.lines, (self.row, self.col), usize::MAX);
        let mut rows: Vec<String> = laid
            .rows(&self.lines, 0, usize::MAX)
            .into_iter()
            .map(|row| self.lines[row.line][row.from..row.to].to_owned())
            .collect();
        rows.resize(count, String::new());
        (rows, cursor)
    }

    /// Rows the composer wants at `width`, at most [`MAX_ROWS`].
    pub fn height(&self, width: u16) -> u16 {
        let rows = self.rows_at(width);
        rows.count(&self.lines, (self.row, self.col), MAX_ROWS as usize) as u16
    }

    /// Draws the composer into `area`; returns where the cursor goes.
    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme, hint: &str) -> Position {
        let visible = area.height as usize;
        if visible == 0 || area.width == 0 {
            return Position {
                x: area.x,
                y: area.y,
            };
        }
        let laid = self.rows_at(area.width);
        let (crow, ccol) = laid.cursor(&self.lines, (self.row, self.col));
        let first = (crow + 1).saturating_sub(visible);
        if self.is_empty() && !hint.is_empty() {
            let line = Line::from(vec![
                Span::styled("› ", theme.accent),
                Span::styled(hint.to_owned(), theme.dim),
            ]);
            buf.set_line(area.x, area.y, &line, area.width);
        } else {
            for (i, row) in laid.rows(&self.lines, first, visible).iter().enumerate() {
                let lead = if first + i == 0 { "› " } else { "  " };
                let line = Line::from(vec![
                    Span::styled(lead, theme.accent),
                    Span::styled(&self.lines[row.line][row.from..row.to], theme.user_message),
                ]);
                buf.set_line(area.x, area.y + i as u16, &line, area.width);
            }
        }
        Position {
            x: area.x + 2 + ccol as u16,
            y: area.y + (crow - first) as u16,
        }
    }
}

/// `text` with its line ends made `\n` (terminals paste `\r` and `\r\n`), in place: a paste
/// of megabytes is not copied.
fn unix_line_ends(text: String) -> String {
    if !text.contains('\r') {
        return text;
    }
    let mut bytes = text.into_bytes();
    let mut kept = 0;
    for at in 0..bytes.len() {
        let byte = bytes[at];
        if byte == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
            continue;
        }
        bytes[kept] = if byte == b'\r' { b'\n' } else { byte };
        kept += 1;
    }
    bytes.truncate(kept);
    // Only ASCII bytes were changed or dropped, so the text is still UTF-8.
    String::from_utf8(bytes)
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

/// `shown` with each paste marker replaced by its text, in one pass into a string sized for
/// the result; a marker's text is not searched for other markers.
fn expanded(shown: &str, pastes: &[(String, String)]) -> String {
    let extra: usize = pastes.iter().map(|(_, pasted)| pasted.len()).sum();
    let mut out = String::with_capacity(shown.len() + extra);
    let mut rest = shown;
    loop {
        let next = pastes
            .iter()
            .filter_map(|(marker, pasted)| Some((rest.find(marker.as_str())?, marker, pasted)))
            .min_by_key(|(at, ..)| *at);
        let Some((at, marker, pasted)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        out.push_str(pasted);
        rest = &rest[at + marker.len()..];
    }
}

#[cfg(test)]
mod tests;
