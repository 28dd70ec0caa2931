//! The composer: where the person writes. Multi-line (Enter sends; Shift+Enter, Alt+Enter or
//! Ctrl+J start a new line), with the usual editing keys, input history on Up and Down at the
//! first and last line, and pastes over 20 lines kept whole behind a `[pasted N lines]`
//! marker that is expanded when the message is sent.

use crate::tui::theme::Theme;
use crate::tui::wrap::str_width;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};

/// A paste longer than this many lines shows as a marker.
const PASTE_MARKER_LINES: usize = 20;
/// Most rows the composer takes on screen; longer text scrolls inside it.
pub const MAX_ROWS: u16 = 10;
/// Inputs remembered for Up and Down.
const HISTORY: usize = 200;

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
    /// Cursor line and character (not byte) index in it.
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Which history entry is shown while browsing, and the draft it replaced.
    browsing: Option<(usize, Vec<String>)>,
    /// Marker → pasted text.
    pastes: Vec<(String, String)>,
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
        let mut text = self.shown();
        for (marker, pasted) in &self.pastes {
            text = text.replace(marker, pasted);
        }
        text
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    pub fn clear(&mut self) {
        self.lines = vec![String::new()];
        self.row = 0;
        self.col = 0;
        self.browsing = None;
        self.pastes.clear();
    }

    /// Replaces the text, the cursor at its end.
    pub fn set(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
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
                let text = self.text();
                if text.trim().is_empty() {
                    return Edit::Ignored;
                }
                self.remember(&self.shown());
                self.clear();
                return Edit::Submit(text);
            }
            KeyCode::Char('a') if ctrl => self.col = 0,
            KeyCode::Char('e') if ctrl => self.col = self.line_len(),
            KeyCode::Char('u') if ctrl => {
                let cut = self.byte_at(self.col);
                self.lines[self.row].replace_range(..cut, "");
                self.col = 0;
            }
            KeyCode::Char('k') if ctrl => {
                let cut = self.byte_at(self.col);
                self.lines[self.row].truncate(cut);
            }
            KeyCode::Char('w') if ctrl => self.delete_word(),
            KeyCode::Backspace if alt || ctrl => self.delete_word(),
            KeyCode::Char(c) if !ctrl => self.insert(&c.to_string()),
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
            KeyCode::Up => {
                self.row -= 1;
                self.col = self.col.min(self.line_len());
            }
            KeyCode::Down if self.row + 1 == self.lines.len() => return self.history_forward(),
            KeyCode::Down => {
                self.row += 1;
                self.col = self.col.min(self.line_len());
            }
            _ => return Edit::Ignored,
        }
        self.browsing = None;
        Edit::Changed
    }

    /// A bracketed paste: inserted as typed, or behind a marker when long.
    pub fn paste(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        let count = text.lines().count();
        if count > PASTE_MARKER_LINES {
            let marker = format!("[pasted {count} lines #{}]", self.pastes.len() + 1);
            self.pastes.push((marker.clone(), text));
            self.insert(&marker);
        } else {
            self.insert(&text);
        }
        self.browsing = None;
    }

    /// The word under the cursor, back to the last space, and where it starts (characters):
    /// what `@` completion works on.
    pub fn current_word(&self) -> (usize, &str) {
        let line = &self.lines[self.row];
        let end = self.byte_at(self.col);
        let start = line[..end].rfind(char::is_whitespace).map_or(0, |i| i + 1);
        (line[..start].chars().count(), &line[start..end])
    }

    /// Replaces the word under the cursor (see [`Composer::current_word`]) with `with`.
    pub fn replace_current_word(&mut self, with: &str) {
        let (start, _) = self.current_word();
        let from = self.byte_at(start);
        let to = self.byte_at(self.col);
        self.lines[self.row].replace_range(from..to, with);
        self.col = start + with.chars().count();
    }

    fn insert(&mut self, text: &str) {
        let mut parts = text.split('\n');
        let first = parts.next().unwrap_or("");
        let at = self.byte_at(self.col);
        let tail = self.lines[self.row].split_off(at);
        self.lines[self.row].push_str(first);
        self.col += first.chars().count();
        for part in parts {
            self.row += 1;
            self.lines.insert(self.row, part.to_owned());
            self.col = part.chars().count();
        }
        self.lines[self.row].push_str(&tail);
    }

    fn newline(&mut self) {
        self.insert("\n");
    }

    fn backspace(&mut self) {
        if let Some(marker) = self.marker_before_cursor() {
            let len = marker.chars().count();
            let from = self.byte_at(self.col - len);
            let to = self.byte_at(self.col);
            self.lines[self.row].replace_range(from..to, "");
            self.col -= len;
            self.pastes.retain(|(m, _)| *m != marker);
        } else if self.col > 0 {
            let from = self.byte_at(self.col - 1);
            let to = self.byte_at(self.col);
            self.lines[self.row].replace_range(from..to, "");
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.line_len();
            self.lines[self.row].push_str(&line);
        }
    }

    /// A paste marker ending at the cursor: deleted as a whole.
    fn marker_before_cursor(&self) -> Option<String> {
        let before = &self.lines[self.row][..self.byte_at(self.col)];
        self.pastes
            .iter()
            .map(|(marker, _)| marker)
            .find(|marker| before.ends_with(marker.as_str()))
            .cloned()
    }

    fn delete(&mut self) {
        if self.col < self.line_len() {
            let from = self.byte_at(self.col);
            let to = self.byte_at(self.col + 1);
            self.lines[self.row].replace_range(from..to, "");
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    fn delete_word(&mut self) {
        let start = self.word_start();
        let from = self.byte_at(start);
        let to = self.byte_at(self.col);
        if from == to {
            self.backspace();
            return;
        }
        self.lines[self.row].replace_range(from..to, "");
        self.col = start;
    }

    /// Where the word before the cursor starts.
    fn word_start(&self) -> usize {
        let chars: Vec<char> = self.lines[self.row].chars().take(self.col).collect();
        let mut at = chars.len();
        while at > 0 && chars[at - 1].is_whitespace() {
            at -= 1;
        }
        while at > 0 && !chars[at - 1].is_whitespace() {
            at -= 1;
        }
        at
    }

    fn word_left(&mut self) {
        if self.col == 0 {
            self.left();
        } else {
            self.col = self.word_start();
        }
    }

    fn word_right(&mut self) {
        let chars: Vec<char> = self.lines[self.row].chars().collect();
        if self.col >= chars.len() {
            self.right();
            return;
        }
        let mut at = self.col;
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        while at < chars.len() && !chars[at].is_whitespace() {
            at += 1;
        }
        self.col = at;
    }

    fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.line_len();
        }
    }

    fn right(&mut self) {
        if self.col < self.line_len() {
            self.col += 1;
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
        self.lines[self.row].chars().count()
    }

    /// The byte offset of character `col` in the cursor's line.
    fn byte_at(&self, col: usize) -> usize {
        let line = &self.lines[self.row];
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }

    /// The text cut into rows of `width` cells after the prompt, and where the cursor is
    /// among them (row, column in cells).
    fn rows(&self, width: u16) -> (Vec<String>, (usize, usize)) {
        let room = (width as usize).saturating_sub(2).max(1);
        let mut rows = Vec::new();
        let mut cursor = (0, 0);
        for (r, line) in self.lines.iter().enumerate() {
            let mut row = String::new();
            let mut used = 0;
            for (c, ch) in line.chars().enumerate() {
                if r == self.row && c == self.col {
                    cursor = (rows.len(), used);
                }
                let w = str_width(ch.encode_utf8(&mut [0; 4]));
                if used + w > room {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                    if r == self.row && c == self.col {
                        cursor = (rows.len(), 0);
                    }
                }
                row.push(ch);
                used += w;
            }
            if r == self.row && self.col >= line.chars().count() {
                if used >= room {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                cursor = (rows.len(), used);
            }
            rows.push(row);
        }
        (rows, cursor)
    }

    /// Rows the composer wants at `width`, at most [`MAX_ROWS`].
    pub fn height(&self, width: u16) -> u16 {
        (self.rows(width).0.len() as u16).clamp(1, MAX_ROWS)
    }

    /// Draws the composer into `area`; returns where the cursor goes.
    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme, hint: &str) -> Position {
        let (rows, (crow, ccol)) = self.rows(area.width);
        let visible = area.height as usize;
        if visible == 0 || area.width == 0 {
            return Position {
                x: area.x,
                y: area.y,
            };
        }
        let first = (crow + 1).saturating_sub(visible);
        if self.is_empty() && !hint.is_empty() {
            let line = Line::from(vec![
                Span::styled("› ", theme.accent),
                Span::styled(hint.to_owned(), theme.dim),
            ]);
            buf.set_line(area.x, area.y, &line, area.width);
        } else {
            for (i, row) in rows.iter().skip(first).take(visible).enumerate() {
                let lead = if first + i == 0 { "› " } else { "  " };
                let line = Line::from(vec![
                    Span::styled(lead, theme.accent),
                    Span::styled(row.clone(), theme.user_message),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn with(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    fn typed(text: &str) -> Composer {
        let mut c = Composer::default();
        for ch in text.chars() {
            c.key(key(KeyCode::Char(ch)));
        }
        c
    }

    #[test]
    fn enter_sends_and_the_modified_enters_start_a_line() {
        let mut c = typed("one");
        c.key(with(KeyCode::Enter, KeyModifiers::SHIFT));
        c.key(key(KeyCode::Char('2')));
        c.key(with(KeyCode::Enter, KeyModifiers::ALT));
        c.key(key(KeyCode::Char('3')));
        c.key(with(KeyCode::Char('j'), KeyModifiers::CONTROL));
        c.key(key(KeyCode::Char('4')));
        assert_eq!(
            c.key(key(KeyCode::Enter)),
            Edit::Submit("one\n2\n3\n4".into())
        );
        assert!(c.is_empty());
        assert_eq!(c.key(key(KeyCode::Enter)), Edit::Ignored, "nothing to send");
    }

    #[test]
    fn editing_keys_move_and_delete_by_character_and_word() {
        let mut c = typed("hello brave world");
        c.key(with(KeyCode::Char('w'), KeyModifiers::CONTROL));
        assert_eq!(c.shown(), "hello brave ");
        c.key(with(KeyCode::Left, KeyModifiers::ALT));
        c.key(key(KeyCode::Char('X')));
        assert_eq!(c.shown(), "hello Xbrave ");
        c.key(with(KeyCode::Char('a'), KeyModifiers::CONTROL));
        c.key(key(KeyCode::Delete));
        assert_eq!(c.shown(), "ello Xbrave ");
        c.key(with(KeyCode::Char('k'), KeyModifiers::CONTROL));
        assert!(c.is_empty());
        let mut c = typed("ab");
        c.key(with(KeyCode::Enter, KeyModifiers::SHIFT));
        c.key(key(KeyCode::Backspace));
        assert_eq!(
            c.shown(),
            "ab",
            "backspace at a line's start joins the lines"
        );
        let mut c = typed("naïve ünïcödé");
        c.key(key(KeyCode::Backspace));
        c.key(key(KeyCode::Left));
        c.key(key(KeyCode::Backspace));
        assert_eq!(c.shown(), "naïve ünïcd");
    }

    #[test]
    fn up_and_down_at_the_edges_browse_the_history() {
        let mut c = Composer::default();
        c.remember("first");
        c.remember("second");
        let mut c2 = c.clone();
        for ch in "draft".chars() {
            c2.key(key(KeyCode::Char(ch)));
        }
        c2.key(key(KeyCode::Up));
        assert_eq!(c2.shown(), "second");
        c2.key(key(KeyCode::Up));
        assert_eq!(c2.shown(), "first");
        assert_eq!(c2.key(key(KeyCode::Up)), Edit::Ignored, "the oldest");
        c2.key(key(KeyCode::Down));
        c2.key(key(KeyCode::Down));
        assert_eq!(c2.shown(), "draft", "back to what was being written");
        // Inside a multi-line text, Up moves the cursor instead.
        c.set("a\nb");
        c.key(key(KeyCode::Up));
        assert_eq!(c.shown(), "a\nb");
    }

    #[test]
    fn a_long_paste_shows_as_a_marker_and_is_sent_whole() {
        let pasted: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let mut c = typed("see ");
        c.paste(&pasted);
        assert_eq!(c.shown(), "see [pasted 30 lines #1]");
        c.key(key(KeyCode::Char('!')));
        assert_eq!(
            c.key(key(KeyCode::Enter)),
            Edit::Submit(format!("see {pasted}!"))
        );
        // A short paste goes in as typed; backspace removes a marker whole.
        let mut c = Composer::default();
        c.paste("a\nb");
        assert_eq!(c.shown(), "a\nb");
        let mut c = Composer::default();
        c.paste(&pasted);
        c.key(key(KeyCode::Backspace));
        assert!(c.is_empty());
        assert_eq!(c.text(), "");
    }

    #[test]
    fn the_word_under_the_cursor_can_be_completed() {
        let mut c = typed("look at @src/ma");
        assert_eq!(c.current_word(), (8, "@src/ma"));
        c.replace_current_word("src/main.rs ");
        assert_eq!(c.shown(), "look at src/main.rs ");
        c.key(key(KeyCode::Char('x')));
        assert_eq!(c.shown(), "look at src/main.rs x");
    }

    #[test]
    fn rows_wrap_at_the_width_and_the_cursor_follows() {
        let c = typed("abcdefghij");
        // Width 6: two cells of prompt, four of text.
        let (rows, cursor) = c.rows(6);
        assert_eq!(rows, ["abcd", "efgh", "ij"]);
        assert_eq!(cursor, (2, 2));
        assert_eq!(c.height(6), 3);
        let full = typed("abcd");
        let (rows, cursor) = full.rows(6);
        assert_eq!(rows, ["abcd", ""], "a full row puts the cursor on the next");
        assert_eq!(cursor, (1, 0));
    }
}
