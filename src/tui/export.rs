//! `/export`: the transcript written as markdown to a file. A file that is already there is
//! never replaced without the person's yes: the first write only creates, and finding the
//! file asks [`Overwrite`], answered with `y` (write over it) or `n`/Esc (keep it).

use super::app::AppEvent;
use super::theme::Theme;
use super::wrap::wrap;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Writes `markdown` to `path` (relative paths under `project_dir`); over an existing file
/// only when `overwrite` says so, otherwise the answer is [`AppEvent::ExportExists`].
pub fn write(project_dir: &Path, path: PathBuf, overwrite: bool, markdown: &str) -> AppEvent {
    let path = if path.is_absolute() {
        path
    } else {
        project_dir.join(path)
    };
    let opened = if overwrite {
        std::fs::File::create(&path)
    } else {
        // Created only if absent, in one step: nothing written between a look and the write
        // can be lost.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
    };
    let written = match opened {
        Ok(mut file) => file.write_all(markdown.as_bytes()),
        Err(err) if err.kind() == ErrorKind::AlreadyExists && path.is_dir() => {
            return AppEvent::Exported(Err(format!(
                "{} is a folder; /export FILE names the file to write",
                path.display()
            )));
        }
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            return AppEvent::ExportExists(path);
        }
        Err(err) => Err(err),
    };
    AppEvent::Exported(
        written
            .map(|()| path.clone())
            .map_err(|err| format!("{}: {err}", path.display())),
    )
}

/// The question asked when the file `/export` names exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overwrite {
    pub path: PathBuf,
}

impl Overwrite {
    /// The person's answer: `Some(true)` to write over the file, `Some(false)` to keep it;
    /// `None` for any other key.
    pub fn key(&self, key: KeyEvent) -> Option<bool> {
        match key.code {
            KeyCode::Char('y' | 'Y') => Some(true),
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(false),
            _ => None,
        }
    }

    /// What is said when the person keeps the file.
    pub fn kept(&self) -> String {
        format!(
            "not exported: {} is kept as it was; /export FILE writes to another file",
            self.path.display()
        )
    }

    /// Draws the question as a box in the middle of `area` (one line when there is no room).
    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        let width = area.width.saturating_sub(4).clamp(1, 80);
        if area.height < 5 || width < 10 {
            let line = Line::styled("overwrite the file? y/n", theme.warning);
            let y = area.y + area.height.saturating_sub(1);
            buf.set_line(area.x, y, &line, area.width);
            return;
        }
        let inner_width = width.saturating_sub(2);
        let mut lines = wrap(
            &[
                Span::styled(self.path.display().to_string(), theme.tool_name),
                Span::styled(" exists. Write the transcript over it?", theme.heading_2),
            ],
            inner_width,
        );
        lines.push(Line::default());
        lines.push(Line::from(vec![
            Span::styled("y", theme.heading_2),
            Span::styled(" overwrite · ", theme.dim),
            Span::styled("n", theme.heading_2),
            Span::styled(" keep the file", theme.dim),
        ]));
        // Centred over the transcript, as the approval box is.
        let height = (lines.len() as u16 + 2).min(area.height);
        let top = area.y + area.height.saturating_sub(height) / 2;
        let rect = Rect::new(area.x + (area.width - width) / 2, top, width, height);
        let title = Span::styled(" file exists ", theme.warning);
        Clear.render(rect, buf);
        Paragraph::new(lines)
            .style(theme.base)
            .block(Block::bordered().border_style(theme.warning).title(title))
            .render(rect, buf);
    }
}
