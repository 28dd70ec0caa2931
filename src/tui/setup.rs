//! The first-run screen, shown instead of the conversation when no provider is usable: what
//! is missing (the variable to export, or the config entry to write, with a minimal config),
//! and the local model servers that answered, which one key configures.

use super::terminal::TerminalGuard;
use super::theme::Theme;
use super::wrap::wrap;
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use ratatui::text::{Line, Span};
use std::path::PathBuf;

/// A model server found answering on this machine, as the setup screen names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundServer {
    /// What it is, in words (`llama.cpp server`, `Ollama`).
    pub name: String,
    pub base_url: String,
    /// The first model it lists, if it lists any.
    pub model: Option<String>,
}

/// What the screen shows.
#[derive(Debug, Clone)]
pub struct SetupScreen {
    /// Why no provider is usable, with the ways to fix it.
    pub problem: String,
    /// Where the config file goes.
    pub config_file: PathBuf,
    pub servers: Vec<FoundServer>,
    pub selected: usize,
}

/// What the person chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupChoice {
    Quit,
    /// Configure `servers[i]`.
    Use(usize),
}

impl SetupScreen {
    /// Handles a key; `Some` when the screen is done.
    pub fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) -> Option<SetupChoice> {
        match code {
            KeyCode::Char('q') | KeyCode::Esc => Some(SetupChoice::Quit),
            KeyCode::Char('c') | KeyCode::Char('d')
                if modifiers.contains(KeyModifiers::CONTROL) =>
            {
                Some(SetupChoice::Quit)
            }
            KeyCode::Up => {
                self.selected = self.selected.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                self.selected = (self.selected + 1).min(self.servers.len().saturating_sub(1));
                None
            }
            KeyCode::Enter if !self.servers.is_empty() => Some(SetupChoice::Use(self.selected)),
            _ => None,
        }
    }

    /// Draws the screen.
    pub fn render(&self, frame: &mut Frame<'_>, theme: &Theme) {
        let area = frame.area();
        let width = area.width.saturating_sub(2).max(1);
        let mut lines = vec![
            Line::styled("tern · set up a model provider", theme.heading_1),
            Line::default(),
        ];
        for paragraph in self.problem.lines() {
            lines.extend(wrap(
                &[Span::styled(paragraph.to_owned(), theme.base)],
                width,
            ));
        }
        lines.push(Line::default());
        if self.servers.is_empty() {
            lines.extend(wrap(
                &[Span::styled(
                    "No llama.cpp or Ollama server answers on its default port \
                     (127.0.0.1:8080, 127.0.0.1:11434). Start one, or set a provider up as \
                     above, then run tern again."
                        .to_owned(),
                    theme.dim,
                )],
                width,
            ));
            lines.push(Line::default());
            lines.push(Line::styled("q or esc: quit", theme.accent));
        } else {
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
                lines.push(Line::from(vec![
                    Span::styled(marker, theme.accent),
                    Span::styled(text, style),
                ]));
            }
            lines.push(Line::default());
            lines.extend(wrap(
                &[Span::styled(
                    format!(
                        "enter: write {} for the selected server and start · up/down: choose · \
                         q or esc: quit",
                        self.config_file.display()
                    ),
                    theme.accent,
                )],
                width,
            ));
        }
        let buf = frame.buffer_mut();
        buf.set_style(area, theme.base);
        for (i, line) in lines.iter().take(area.height as usize).enumerate() {
            buf.set_line(area.x + 1, area.y + i as u16, line, width);
        }
    }
}

/// Shows the screen until the person chooses.
pub async fn run(mut screen: SetupScreen, theme: &Theme) -> std::io::Result<SetupChoice> {
    let mut terminal = TerminalGuard::enter()?;
    let mut input = super::input::Input::take();
    loop {
        terminal.screen.draw(|frame| screen.render(frame, theme))?;
        match input.next().await {
            Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                if let Some(choice) = screen.key(key.code, key.modifiers) {
                    return Ok(choice);
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return Ok(SetupChoice::Quit),
        }
    }
}
