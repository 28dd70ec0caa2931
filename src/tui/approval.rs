//! The approval modal: a tool call that needs the person's yes, shown with what it would do
//! (the command, or the diff of the edit), answered with `y` (once), `a` (always, for this
//! session: that command prefix or that tool), `n` (no, with an optional reason for the
//! model) or Esc (no).

use super::diff::{DiffOptions, render_diff_rows};
use super::theme::Theme;
use super::wrap::{hard_wrap, wrap, wrap_prefixed};
use crate::domain::call_text::argument_pairs;
use crate::domain::cut::{count_of, lines_cut};
use crate::domain::{Answer, ApprovalDetail, ContentBlock, Grant, SessionId};
use crate::gateway::catalog::{JournalEvent, JournalRecord};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Widget};
use std::ops::Range;

/// A call waiting for the person's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Asking {
    pub call_id: String,
    pub tool: String,
    pub summary: String,
    pub detail: ApprovalDetail,
    /// What `a` would remember; `None` when the call cannot be allowed for good.
    pub always: Option<Grant>,
    /// The reason being typed after `n`, if the person pressed it.
    pub reason: Option<String>,
    /// For a subagent's call: its session, and the run and agent named in the box.
    pub from_run: Option<FromRun>,
}

/// The subagent run an approval request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromRun {
    pub session: SessionId,
    /// `explorer (run-…)`.
    pub label: String,
}

/// The approval request in `records` (a session's journal) that has no decision yet, as the
/// box asks it: its arguments as the model sent them, since the preview it was made with is
/// not journaled; no "always", for the same reason.
pub fn still_waiting(records: &[JournalRecord], from: FromRun) -> Option<Asking> {
    let (call_id, tool, prompt) =
        records
            .iter()
            .rev()
            .find_map(|record| match &record.event {
                JournalEvent::ApprovalDecided { .. } => Some(None),
                JournalEvent::ApprovalRequested {
                    call_id,
                    tool,
                    prompt,
                    ..
                } => Some(Some((call_id.clone(), tool.clone(), prompt.clone()))),
                _ => None,
            })??;
    let arguments = records.iter().find_map(|record| match &record.event {
        JournalEvent::AssistantMessage { content, .. } => {
            content.iter().find_map(|block| match block {
                ContentBlock::ToolUse(call) if call.id == call_id => Some(call.input.clone()),
                _ => None,
            })
        }
        _ => None,
    })?;
    Some(Asking {
        call_id,
        tool,
        summary: prompt,
        detail: ApprovalDetail::Other { arguments },
        always: None,
        reason: None,
        from_run: Some(from),
    })
}

impl Asking {
    /// Handles a key; `Some` with the answer once the person has given one.
    pub fn key(&mut self, key: KeyEvent) -> Option<Answer> {
        if let Some(reason) = &mut self.reason {
            match key.code {
                KeyCode::Enter => {
                    let reason = reason.trim().to_owned();
                    return Some(Answer::Deny {
                        reason: (!reason.is_empty()).then_some(reason),
                    });
                }
                KeyCode::Esc => return Some(Answer::Deny { reason: None }),
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    reason.push(c);
                }
                _ => {}
            }
            return None;
        }
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Some(Answer::Once),
            KeyCode::Char('a') | KeyCode::Char('A') if self.always.is_some() => {
                Some(Answer::Always)
            }
            KeyCode::Char('n') | KeyCode::Char('N') => {
                self.reason = Some(String::new());
                None
            }
            KeyCode::Esc => Some(Answer::Deny { reason: None }),
            _ => None,
        }
    }

    /// Pasted text goes into the reason, when one is being typed.
    pub fn paste(&mut self, text: &str) {
        if let Some(reason) = &mut self.reason {
            reason.push_str(&text.replace(['\n', '\r'], " "));
        }
    }

    /// Draws the modal over `area`, centred.
    pub fn render(&self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        let width = area.width.saturating_sub(4).clamp(1, 100);
        if area.height < 5 || width < 10 {
            // No room for a box: one line that still says what to press.
            let line = Line::styled(format!("approve {}? y/a/n", self.tool), theme.warning);
            let y = area.y + area.height.saturating_sub(1);
            buf.set_line(area.x, y, &line, area.width);
            return;
        }
        let inner_width = width.saturating_sub(2);
        let (mut lines, keys, origins) = self.body(inner_width, theme);
        let max_body = (area.height.saturating_sub(2) as usize).saturating_sub(keys.len());
        if lines.len() > max_body {
            // Keep the question and the keys, and of the detail its start and its end (a long
            // diff's last hunk): what is cut in between is counted in lines of the diff.
            let room = max_body.saturating_sub(1);
            let tail = room / 3;
            let head = room - tail;
            let end = lines.split_off(lines.len() - tail);
            let hidden = self.hidden_lines(&origins, head..lines.len(), tail);
            lines.truncate(head);
            lines.push(Line::styled(
                format!("⋮ {}", count_of(hidden, "more line")),
                theme.dim,
            ));
            lines.extend(end);
        }
        lines.extend(keys);
        let height = (lines.len() as u16 + 2).min(area.height);
        let rect = Rect {
            x: area.x + (area.width - width) / 2,
            y: area.y + area.height.saturating_sub(height) / 2,
            width,
            height,
        };
        Clear.render(rect, buf);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.warning)
            .title(Span::styled(
                match &self.from_run {
                    Some(from) => format!(" approval needed · subagent {} ", from.label),
                    None => " approval needed ".to_owned(),
                },
                theme.warning,
            ));
        let inner = block.inner(rect);
        block.render(rect, buf);
        buf.set_style(inner, theme.base);
        for (i, line) in lines.iter().take(inner.height as usize).enumerate() {
            buf.set_line(inner.x, inner.y + i as u16, line, inner.width);
        }
    }

    /// How many lines the rows `hidden` of the body stand for: a diff's line wrapped over
    /// rows counts once, and only when none of its rows is shown; a cut note in a capped diff
    /// counts the lines it says were cut. `tail` rows follow the hidden ones.
    fn hidden_lines(&self, origins: &Origins, hidden: Range<usize>, tail: usize) -> usize {
        let diff_lines: Vec<&str> = match &self.detail {
            ApprovalDetail::Edit { diff, .. } => diff.lines().collect(),
            _ => Vec::new(),
        };
        let origin = |row: usize| {
            row.checked_sub(origins.start)
                .and_then(|at| origins.lines.get(at).copied())
        };
        let (before, after) = (hidden.start.checked_sub(1), hidden.end);
        let shown = |index: usize| {
            before.and_then(origin) == Some(index) || tail > 0 && origin(after) == Some(index)
        };
        let mut count = 0usize;
        let mut last = None;
        for row in hidden {
            let Some(index) = origin(row) else {
                count = count.saturating_add(1);
                continue;
            };
            if last == Some(index) || shown(index) {
                continue;
            }
            last = Some(index);
            let cut = diff_lines.get(index).and_then(|line| lines_cut(line));
            let stands_for = cut.map_or(1, |cut| usize::try_from(cut).unwrap_or(usize::MAX));
            count = count.saturating_add(stands_for);
        }
        count
    }

    /// The question with its detail, and the lines saying which keys answer; for a diff, which
    /// of its lines each of its rows shows.
    fn body(&self, width: u16, theme: &Theme) -> (Vec<Line<'static>>, Vec<Line<'static>>, Origins) {
        let mut origins = Origins::default();
        let question = match &self.detail {
            ApprovalDetail::Command { .. } => "Run this command?",
            ApprovalDetail::Edit { .. } => "Make this change?",
            ApprovalDetail::Outside { .. } => "Go outside the project?",
            ApprovalDetail::Other { .. } => "Allow this call?",
        };
        let mut lines = vec![Line::from(vec![
            Span::styled(question.to_owned(), theme.heading_2),
            Span::styled(format!("  {}", self.tool), theme.tool_name),
        ])];
        lines.extend(wrap(
            &[Span::styled(self.summary.clone(), theme.dim)],
            width,
        ));
        lines.push(Line::default());
        match &self.detail {
            ApprovalDetail::Command { command, cwd } => {
                let prompt = Line::from(Span::styled("$ ", theme.accent));
                let rest = Line::from("  ");
                for text in command.lines() {
                    let span = Span::styled(text.to_owned(), theme.inline_code);
                    lines.extend(hard_wrap(&[span], width, &prompt, &rest));
                }
                lines.push(Line::styled(format!("in {}", cwd.display()), theme.dim));
            }
            ApprovalDetail::Edit { path, diff } => {
                lines.push(Line::styled(path.display().to_string(), theme.tool_name));
                origins.start = lines.len();
                for (index, row) in render_diff_rows(diff, width, theme, DiffOptions::default()) {
                    origins.lines.push(index);
                    lines.push(row);
                }
            }
            ApprovalDetail::Outside { path, access } => {
                lines.extend(wrap(
                    &[Span::styled(
                        format!("{access} {} (outside the project)", path.display()),
                        theme.base,
                    )],
                    width,
                ));
            }
            ApprovalDetail::Other { arguments } => {
                // Each argument as `name: value`, text shown as text, so no call is put to a
                // person as raw JSON.
                let pairs = argument_pairs(arguments);
                if pairs.is_empty() {
                    lines.push(Line::styled("(no arguments)", theme.dim));
                }
                for (name, value) in pairs {
                    let first = Line::from(Span::styled(format!("{name}: "), theme.accent));
                    let rest = Line::from("  ");
                    let mut value_lines = value.lines();
                    let head = value_lines.next().unwrap_or("");
                    lines.extend(wrap_prefixed(
                        &[Span::styled(head.to_owned(), theme.base)],
                        width,
                        &first,
                        &rest,
                    ));
                    for more in value_lines {
                        lines.extend(wrap_prefixed(
                            &[Span::styled(more.to_owned(), theme.base)],
                            width,
                            &rest,
                            &rest,
                        ));
                    }
                }
            }
        }
        lines.push(Line::default());
        let mut keys = Vec::new();
        let key_line = |key: &str, what: String| {
            let first = Line::from(Span::styled(format!("{key:<4}"), theme.accent));
            wrap_prefixed(
                &[Span::styled(what, theme.base)],
                width,
                &first,
                &Line::from("    "),
            )
        };
        match &self.reason {
            Some(reason) => {
                keys.push(Line::styled(
                    "Why not? (optional; the model reads it)",
                    theme.base,
                ));
                keys.push(Line::from(vec![
                    Span::styled("› ", theme.accent),
                    Span::styled(reason.clone(), theme.user_message),
                    Span::styled("▏", theme.accent),
                ]));
                keys.push(Line::styled(
                    "enter: send the no · esc: no, without a reason",
                    theme.dim,
                ));
            }
            None => {
                keys.extend(key_line("y", "yes, once".to_owned()));
                if let Some(grant) = &self.always {
                    keys.extend(key_line("a", format!("always: {grant}, for this session")));
                }
                keys.extend(key_line("n", "no, and say why".to_owned()));
                keys.extend(key_line("esc", "no".to_owned()));
            }
        }
        (lines, keys, origins)
    }
}

/// Which line of the diff each of the body's diff rows shows: row `start + i` shows line
/// `lines[i]`.
#[derive(Debug, Default)]
struct Origins {
    start: usize,
    lines: Vec<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(always: Option<Grant>) -> Asking {
        Asking {
            call_id: "t1".into(),
            tool: "shell_execute".into(),
            summary: "cargo test".into(),
            detail: ApprovalDetail::Command {
                command: "cargo test".into(),
                cwd: "/p".into(),
            },
            always,
            reason: None,
            from_run: None,
        }
    }

    fn press(a: &mut Asking, code: KeyCode) -> Option<Answer> {
        a.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn the_keys_answer() {
        let grant = Some(Grant::Command {
            prefix: "cargo test".into(),
        });
        assert_eq!(
            press(&mut asking(None), KeyCode::Char('y')),
            Some(Answer::Once)
        );
        assert_eq!(
            press(&mut asking(grant.clone()), KeyCode::Char('a')),
            Some(Answer::Always)
        );
        assert_eq!(
            press(&mut asking(None), KeyCode::Char('a')),
            None,
            "always is not offered for every call"
        );
        assert_eq!(
            press(&mut asking(None), KeyCode::Esc),
            Some(Answer::Deny { reason: None })
        );
        let mut a = asking(grant);
        assert_eq!(press(&mut a, KeyCode::Char('n')), None);
        for c in "use nextest".chars() {
            press(&mut a, KeyCode::Char(c));
        }
        a.paste(" please\n");
        assert_eq!(
            press(&mut a, KeyCode::Enter),
            Some(Answer::Deny {
                reason: Some("use nextest please".into())
            })
        );
        let mut a = asking(None);
        press(&mut a, KeyCode::Char('n'));
        assert_eq!(
            press(&mut a, KeyCode::Enter),
            Some(Answer::Deny { reason: None }),
            "no reason is fine"
        );
    }
}
