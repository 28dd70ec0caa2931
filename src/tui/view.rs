//! The screen's layout and drawing: the transcript on top (with room kept beside it for the
//! panes of background subagents), a rule, the composer, and the status line at the bottom;
//! popups over the transcript just above the composer. Any size works, down to a few cells.

use super::app::App;
use super::popup;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use tokio::time::Instant;

/// The regions of the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Regions {
    pub transcript: Rect,
    /// Where subagent panes go; empty until there are any.
    pub panes: Rect,
    pub rule: Rect,
    pub composer: Rect,
    pub status: Rect,
}

/// Splits `area` for a composer that wants `composer_rows` rows.
pub fn regions(area: Rect, composer_rows: u16) -> Regions {
    let row = |y: u16, height: u16| Rect {
        x: area.x,
        y,
        width: area.width,
        height,
    };
    let bottom = area.y + area.height;
    // The composer and the status line come first; the rule and the transcript get the rest.
    let status_h = u16::from(area.height >= 2);
    let composer_h = composer_rows
        .min(area.height.saturating_sub(status_h))
        .max(u16::from(area.height > 0));
    let rule_h = u16::from(area.height >= composer_h + status_h + 2);
    let transcript_h = area.height.saturating_sub(composer_h + status_h + rule_h);
    let status = row(bottom - status_h, status_h);
    let composer = row(status.y - composer_h, composer_h);
    let rule = row(composer.y - rule_h, rule_h);
    Regions {
        transcript: row(area.y, transcript_h),
        panes: row(area.y, 0),
        rule,
        composer,
        status,
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &mut App, now: Instant) {
    let area = frame.area();
    let rows = app.composer.height(area.width);
    let at = regions(area, rows);
    let theme = app.theme.clone();
    let buf = frame.buffer_mut();
    buf.set_style(area, theme.base);
    app.transcript.render(at.transcript, buf, &theme, now);
    if at.rule.height > 0 {
        let rule = "─".repeat(at.rule.width as usize);
        buf.set_line(
            at.rule.x,
            at.rule.y,
            &Line::styled(rule, theme.dim),
            at.rule.width,
        );
    }
    let cursor = app.composer.render(at.composer, buf, &theme, app.hint());
    if at.status.height > 0 {
        let line = app.status.line(at.status.width, now, &theme);
        buf.set_style(at.status, Style::default());
        buf.set_line(at.status.x, at.status.y, &line, at.status.width);
    }
    if let Some((title, choices)) = app.popup() {
        popup::render(choices, title, at.composer, buf, &theme);
    }
    if let Some(asking) = app.asking.front() {
        let over = Rect {
            height: at.transcript.height + at.rule.height,
            ..at.transcript
        };
        asking.render(over, buf, &theme);
    }
    if at.composer.height > 0 && cursor.x < area.x + area.width && cursor.y < area.y + area.height {
        frame.set_cursor_position(cursor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_fits_any_size() {
        for (w, h) in [
            (80, 24),
            (120, 40),
            (20, 5),
            (1, 1),
            (0, 0),
            (10, 2),
            (200, 3),
        ] {
            let area = Rect::new(0, 0, w, h);
            for composer in [1, 3, 10] {
                let r = regions(area, composer);
                let total =
                    r.transcript.height + r.rule.height + r.composer.height + r.status.height;
                assert_eq!(total, h, "{w}x{h} with {composer}: {r:?}");
                assert!(r.transcript.y + r.transcript.height <= r.rule.y.max(r.composer.y));
            }
        }
        let r = regions(Rect::new(0, 0, 80, 24), 2);
        assert_eq!(
            (
                r.transcript.height,
                r.rule.height,
                r.composer.height,
                r.status.height
            ),
            (20, 1, 2, 1)
        );
    }
}
