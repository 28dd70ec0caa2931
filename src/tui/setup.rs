//! The first-run screen, shown instead of the conversation when no provider is usable: what
//! is missing (the variable to export, or the config entry to write, with a minimal config),
//! the local model servers that answered, which one key configures, and a key that writes
//! an example config to fill in.
//!
//! [`SetupScreen`] is the screen as plain data: keys in, [`SetupAction`]s out, and the
//! caller's report of what it did shown as a [`Note`]. [`SetupTerminal`] draws it on the
//! terminal and waits for the person; the caller writes the files, so that nothing but the
//! screen writes to the terminal while it is up.

use super::app::QUIT_WINDOW;
use super::input::Input;
use super::terminal::TerminalGuard;
use super::theme::Theme;
use super::wrap::{str_width, wrap, wrap_prefixed};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use std::path::PathBuf;
use tokio::time::Instant;

/// A model server found answering on this machine, as the setup screen names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundServer {
    /// What it is, in words (`llama.cpp server`, `Ollama`).
    pub name: String,
    pub base_url: String,
    /// The first model it lists, if it lists any.
    pub model: Option<String>,
}

/// What the person asked for; the caller carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupAction {
    /// Leave without a provider.
    Quit,
    /// Write a config for `servers[i]` and start.
    Use(usize),
    /// Write the example config, where there is no config file yet.
    WriteExample,
}

/// What the screen says under its keys about the last thing the person did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Something done, such as a file written.
    Done(String),
    /// Why a key did nothing, or what went wrong.
    Problem(String),
}

/// What the screen shows, and where the person is on it.
#[derive(Debug, Clone)]
pub struct SetupScreen {
    /// Why no provider is usable, with the ways to fix it.
    problem: String,
    /// Where the config file goes.
    config_file: PathBuf,
    /// Whether the config file exists: a file that exists is the person's, so no server is
    /// offered to be written into it.
    config_exists: bool,
    servers: Vec<FoundServer>,
    selected: usize,
    note: Option<Note>,
    /// When Ctrl-C was pressed, while a second press would quit.
    ctrl_c: Option<Instant>,
}

impl SetupScreen {
    /// The screen for `problem`, offering `servers` (none when the config file exists).
    pub fn new(
        problem: String,
        config_file: PathBuf,
        config_exists: bool,
        servers: Vec<FoundServer>,
    ) -> Self {
        let servers = if config_exists { Vec::new() } else { servers };
        Self {
            problem,
            config_file,
            config_exists,
            servers,
            selected: 0,
            note: None,
            ctrl_c: None,
        }
    }

    /// Handles a key press; `Some` when the caller has something to do.
    pub fn key(&mut self, key: KeyEvent, now: Instant) -> Option<SetupAction> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // A Ctrl-C waits for the very next key: anything else puts the quitting off.
        let armed = self.ctrl_c.take();
        match key.code {
            KeyCode::Char('c') if ctrl => {
                if armed.is_some_and(|at| now.saturating_duration_since(at) <= QUIT_WINDOW) {
                    return Some(SetupAction::Quit);
                }
                self.ctrl_c = Some(now);
                None
            }
            KeyCode::Char('d') if ctrl => Some(SetupAction::Quit),
            KeyCode::Char('q') | KeyCode::Esc if !ctrl => Some(SetupAction::Quit),
            KeyCode::Char('c') if !ctrl => Some(SetupAction::WriteExample),
            KeyCode::Up => {
                self.selected = self.selected.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                self.selected = (self.selected + 1).min(self.servers.len().saturating_sub(1));
                None
            }
            KeyCode::Enter if !self.servers.is_empty() => Some(SetupAction::Use(self.selected)),
            KeyCode::Enter => {
                self.note = Some(Note::Problem(self.nothing_to_use()));
                None
            }
            KeyCode::Char(_) if !ctrl => {
                self.typed();
                None
            }
            _ => None,
        }
    }

    /// Text typed or pasted, which this screen has no use for: it says what it takes.
    pub fn typed(&mut self) {
        self.ctrl_c = None;
        let keys = if !self.servers.is_empty() {
            "enter uses the selected server, c writes an example config, q quits"
        } else if self.config_exists {
            "q quits"
        } else {
            "c writes an example config, q quits"
        };
        self.note = Some(Note::Problem(format!(
            "This screen reads keys, not text: {keys}."
        )));
    }

    /// Shows `note` under the keys.
    pub fn note(&mut self, note: Note) {
        self.note = Some(note);
    }

    /// The config file exists now: no server is offered to be written into it any more.
    pub fn config_written(&mut self) {
        self.config_exists = true;
        self.servers.clear();
        self.selected = 0;
    }

    /// When the screen changes by itself (the Ctrl-C hint going away), if it will.
    pub fn deadline(&self) -> Option<Instant> {
        self.ctrl_c.map(|at| at + QUIT_WINDOW)
    }

    /// Lets time pass: a Ctrl-C not followed by another within the window is forgotten.
    pub fn tick(&mut self, now: Instant) {
        if self.deadline().is_some_and(|end| now >= end) {
            self.ctrl_c = None;
        }
    }

    /// What Enter says when there is no server to choose.
    fn nothing_to_use(&self) -> String {
        if self.config_exists {
            format!(
                "No local server to use: tern offers one only while there is no config file. \
                 Set a provider up in {} as above, then run tern again.",
                self.config_file.display()
            )
        } else {
            "No local server found to use: start llama.cpp's server or Ollama, or set a \
             provider up as above, then run tern again."
                .to_owned()
        }
    }

    /// Draws the screen. The keys and the note stay on screen however short it is; the
    /// explanation above them gives way.
    pub fn render(&self, frame: &mut Frame<'_>, theme: &Theme) {
        let area = frame.area();
        let width = area.width.saturating_sub(2).max(1);
        let body = self.body(width, theme);
        let footer = self.footer(width, theme);
        let height = area.height as usize;
        let footer_rows = footer.len().min(height);
        let body_rows = body.len().min(height - footer_rows);
        let buf = frame.buffer_mut();
        buf.set_style(area, theme.base);
        let lines = body[..body_rows].iter().chain(&footer[..footer_rows]);
        for (i, line) in lines.enumerate() {
            buf.set_line(area.x + 1, area.y + i as u16, line, width);
        }
    }

    /// The heading, the problem and the servers.
    fn body(&self, width: u16, theme: &Theme) -> Vec<Line<'static>> {
        let mut lines = vec![
            Line::styled("tern · set up a model provider", theme.heading_1),
            Line::default(),
        ];
        for paragraph in self.problem.lines() {
            lines.extend(hanging(paragraph, theme.base, width));
        }
        lines.push(Line::default());
        if self.servers.is_empty() {
            let text = if self.config_exists {
                format!(
                    "tern offers a local model server only while there is no config file, and \
                     {} exists: set a provider up in it as above, then run tern again.",
                    self.config_file.display()
                )
            } else {
                "No llama.cpp or Ollama server answers on its default port (127.0.0.1:8080, \
                 127.0.0.1:11434). Start one, or set a provider up as above, then run tern \
                 again."
                    .to_owned()
            };
            lines.extend(wrap(&[Span::styled(text, theme.dim)], width));
            return lines;
        }
        lines.push(Line::styled("Found on this machine:", theme.base));
        for (i, server) in self.servers.iter().enumerate() {
            let model = server
                .model
                .as_deref()
                .map_or(String::new(), |m| format!(" (model {m})"));
            let text = format!("{} at {}{model}", server.name, server.base_url);
            let (marker, style) = if i == self.selected {
                ("▸ ", theme.selection)
            } else {
                ("  ", theme.base)
            };
            lines.extend(wrap_prefixed(
                &[Span::styled(text, style)],
                width,
                &Line::from(Span::styled(marker, theme.accent)),
                &Line::from("  "),
            ));
        }
        lines
    }

    /// The keys, and what the last one did.
    fn footer(&self, width: u16, theme: &Theme) -> Vec<Line<'static>> {
        let path = self.config_file.display();
        let keys = if !self.servers.is_empty() {
            vec![
                format!("enter: write {path} for the selected server and start"),
                "up/down: choose".to_owned(),
                "c: write an example config instead".to_owned(),
                "q or esc: quit".to_owned(),
            ]
        } else if self.config_exists {
            vec!["q or esc: quit".to_owned()]
        } else {
            vec![
                format!("c: write an example config to {path}"),
                "q or esc: quit".to_owned(),
            ]
        };
        let mut lines = vec![Line::default()];
        lines.extend(key_lines(&keys, width, theme.accent));
        let note = match (&self.ctrl_c, &self.note) {
            (Some(_), _) => Some(("press Ctrl-C again to quit", theme.accent)),
            (None, Some(Note::Done(text))) => Some((text.as_str(), theme.success)),
            (None, Some(Note::Problem(text))) => Some((text.as_str(), theme.warning)),
            (None, None) => None,
        };
        if let Some((text, style)) = note {
            lines.push(Line::default());
            lines.extend(wrap(&[Span::styled(text.to_owned(), style)], width));
        }
        lines
    }
}

/// Key hints with `·` between them, each kept whole on one line where it fits.
fn key_lines(hints: &[String], width: u16, style: Style) -> Vec<Line<'static>> {
    let mut rows: Vec<String> = Vec::new();
    for hint in hints {
        match rows.last_mut() {
            Some(row) if str_width(row) + 3 + str_width(hint) <= usize::from(width) => {
                row.push_str(" · ");
                row.push_str(hint);
            }
            _ => rows.push(hint.clone()),
        }
    }
    rows.into_iter()
        .flat_map(|row| wrap(&[Span::styled(row, style)], width))
        .collect()
}

/// A line of prose wrapped with a hanging indent: the lines after the first start under its
/// text, past its indent and any list marker (`- `, `* `, `• `, `1. `, `2) `).
fn hanging(line: &str, style: Style, width: u16) -> Vec<Line<'static>> {
    if line.trim().is_empty() {
        return vec![Line::default()];
    }
    let lead = lead_len(line);
    let (lead, text) = line.split_at(lead);
    wrap_prefixed(
        &[Span::styled(text.to_owned(), style)],
        width,
        &Line::from(Span::styled(lead.to_owned(), style)),
        &Line::from(" ".repeat(str_width(lead))),
    )
}

/// The length in bytes of a line's indent and list marker.
fn lead_len(line: &str) -> usize {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    if let Some(bullet) = ["- ", "* ", "• "].iter().find(|b| rest.starts_with(**b)) {
        return indent + bullet.len();
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && (rest[digits..].starts_with(". ") || rest[digits..].starts_with(") ")) {
        return indent + digits + 2;
    }
    indent
}

/// The setup screen on the terminal: the alternate screen and the input, held until dropped.
pub struct SetupTerminal {
    terminal: TerminalGuard,
    input: Input,
    theme: Theme,
}

impl SetupTerminal {
    /// Takes the terminal over.
    pub fn enter(theme: Theme) -> std::io::Result<Self> {
        let terminal = TerminalGuard::enter()?;
        Ok(Self {
            terminal,
            input: Input::take(),
            theme,
        })
    }

    /// Draws `screen` and waits until the person asks for something; a terminal that can no
    /// longer be read asks to quit.
    pub async fn next(&mut self, screen: &mut SetupScreen) -> std::io::Result<SetupAction> {
        loop {
            let theme = &self.theme;
            self.terminal
                .screen
                .draw(|frame| screen.render(frame, theme))?;
            let event = match screen.deadline() {
                Some(deadline) => tokio::select! {
                    event = self.input.next() => Some(event),
                    () = tokio::time::sleep_until(deadline) => None,
                },
                None => Some(self.input.next().await),
            };
            let now = Instant::now();
            match event {
                None => screen.tick(now),
                Some(Some(Ok(Event::Key(key)))) if key.kind != KeyEventKind::Release => {
                    if let Some(action) = screen.key(key, now) {
                        return Ok(action);
                    }
                }
                Some(Some(Ok(Event::Paste(_)))) => screen.typed(),
                Some(Some(Ok(_))) => {}
                Some(Some(Err(_)) | None) => return Ok(SetupAction::Quit),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn screen(servers: usize) -> SetupScreen {
        let found = FoundServer {
            name: "Ollama".into(),
            base_url: "http://127.0.0.1:11434".into(),
            model: None,
        };
        SetupScreen::new(
            "no model provider is configured".into(),
            "/home/dev/.config/tern/config.toml".into(),
            false,
            vec![found; servers],
        )
    }

    fn press(screen: &mut SetupScreen, code: KeyCode, now: Instant) -> Option<SetupAction> {
        screen.key(KeyEvent::new(code, KeyModifiers::NONE), now)
    }

    fn ctrl_c(screen: &mut SetupScreen, now: Instant) -> Option<SetupAction> {
        screen.key(
            KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            now,
        )
    }

    #[test]
    fn ctrl_c_quits_when_pressed_twice_within_the_window() {
        let start = Instant::now();
        let mut setup = screen(0);
        assert_eq!(ctrl_c(&mut setup, start), None);
        assert!(setup.deadline().is_some(), "the hint is up");
        assert_eq!(
            ctrl_c(&mut setup, start + Duration::from_millis(400)),
            Some(SetupAction::Quit)
        );

        // Too late: the second press counts as a first one.
        let mut setup = screen(0);
        assert_eq!(ctrl_c(&mut setup, start), None);
        let late = start + QUIT_WINDOW + Duration::from_millis(1);
        setup.tick(late);
        assert_eq!(setup.deadline(), None, "the hint went away");
        assert_eq!(ctrl_c(&mut setup, late), None);
        assert_eq!(ctrl_c(&mut setup, late), Some(SetupAction::Quit));

        // Another key in between puts the quitting off.
        let mut setup = screen(0);
        assert_eq!(ctrl_c(&mut setup, start), None);
        assert_eq!(press(&mut setup, KeyCode::Down, start), None);
        assert_eq!(ctrl_c(&mut setup, start), None);
    }

    #[test]
    fn enter_with_no_server_and_typed_text_say_why_nothing_happened() {
        let now = Instant::now();
        let mut setup = screen(0);
        assert_eq!(press(&mut setup, KeyCode::Enter, now), None);
        assert!(
            matches!(&setup.note, Some(Note::Problem(text)) if text.starts_with("No local server found")),
            "{:?}",
            setup.note
        );
        assert_eq!(press(&mut setup, KeyCode::Char('x'), now), None);
        assert_eq!(
            setup.note,
            Some(Note::Problem(
                "This screen reads keys, not text: c writes an example config, q quits.".into()
            ))
        );
        assert_eq!(
            press(&mut setup, KeyCode::Char('c'), now),
            Some(SetupAction::WriteExample)
        );
        assert_eq!(
            press(&mut setup, KeyCode::Char('q'), now),
            Some(SetupAction::Quit)
        );

        let mut setup = screen(2);
        assert_eq!(press(&mut setup, KeyCode::Down, now), None);
        assert_eq!(press(&mut setup, KeyCode::Down, now), None);
        assert_eq!(
            press(&mut setup, KeyCode::Enter, now),
            Some(SetupAction::Use(1))
        );
        // Once the config file exists, no server is offered any more.
        setup.config_written();
        assert_eq!(press(&mut setup, KeyCode::Enter, now), None);
        assert!(
            matches!(&setup.note, Some(Note::Problem(text)) if text.contains("only while there is no config file")),
            "{:?}",
            setup.note
        );
    }

    #[test]
    fn a_list_item_wraps_under_its_text() {
        let check = |line: &str, width: u16, expected: &[&str]| {
            let lines: Vec<String> = hanging(line, Style::default(), width)
                .iter()
                .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
                .collect();
            assert_eq!(lines, expected, "{line:?}");
        };
        check(
            "  - export OPENAI_API_KEY=<key> for OpenAI",
            20,
            &["  - export", "    OPENAI_API_KEY=<", "    key> for OpenAI"],
        );
        check(
            "12. one two three",
            10,
            &["12. one", "    two", "    three"],
        );
        check("3) one two", 7, &["3) one", "   two"]);
        check(
            "    kind = \"openai\"",
            12,
            &["    kind =", "    \"openai\""],
        );
        check("• one two", 6, &["• one", "  two"]);
        check("plain words here", 6, &["plain", "words", "here"]);
        check("-not a marker", 20, &["-not a marker"]);
        check("", 20, &[""]);
    }
}
