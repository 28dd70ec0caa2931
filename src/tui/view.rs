//! The screen's layout and drawing: the transcript on top (the panes of background subagents
//! beside it on a wide terminal, as a row of tabs under it on a narrow one, or one of them in
//! its place full screen), a rule, the composer, and the status line at the bottom; popups
//! over the transcript just above the composer. Any size works, down to a few cells.

use super::app::App;
use super::panes::SIDE_BY_SIDE_WIDTH;
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
    /// Where subagent panes go: beside the transcript, or one row of tabs under it; empty
    /// when there are none.
    pub panes: Rect,
    pub rule: Rect,
    pub composer: Rect,
    pub status: Rect,
}

/// Splits `area` for a composer that wants `composer_rows` rows and `panes` subagent panes.
pub fn regions(area: Rect, composer_rows: u16, panes: usize) -> Regions {
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
    let mut transcript = row(area.y, transcript_h);
    let mut beside = row(area.y, 0);
    if panes > 0 && area.width >= SIDE_BY_SIDE_WIDTH {
        let left = (u32::from(area.width) * 3 / 5) as u16;
        beside = Rect {
            x: area.x + left,
            width: area.width - left,
            ..transcript
        };
        transcript.width = left;
    } else if panes > 0 && transcript_h >= 3 {
        transcript.height -= 1;
        beside = row(transcript.y + transcript.height, 1);
    }
    Regions {
        transcript,
        panes: beside,
        rule,
        composer,
        status,
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &mut App, now: Instant) {
    let area = frame.area();
    let rows = app.composer.height(area.width);
    let at = regions(area, rows, app.panes.list.len());
    let theme = app.theme.clone();
    let buf = frame.buffer_mut();
    buf.set_style(area, theme.base);
    if app.panes.full && app.panes.focused().is_some() {
        let whole = Rect {
            height: at.transcript.height + u16::from(at.panes.y > at.transcript.y),
            width: at.transcript.width + at.panes.width * u16::from(at.panes.height > 1),
            ..at.transcript
        };
        app.panes.render_full(whole, buf, &theme, now);
    } else {
        app.transcript.render(at.transcript, buf, &theme, now);
        if at.panes.height == 1 {
            app.panes.render_tabs(at.panes, buf, &theme, now);
        } else {
            app.panes.render_side(at.panes, buf, &theme, now);
        }
    }
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
    } else if let Some(question) = &app.overwrite {
        let over = Rect {
            height: at.transcript.height + at.rule.height,
            ..at.transcript
        };
        question.render(over, buf, &theme);
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
            for (composer, panes) in [(1, 0), (3, 2), (10, 1)] {
                let r = regions(area, composer, panes);
                let tabs = r.panes.height * u16::from(r.panes.height == 1 && r.panes.width == w);
                let total = r.transcript.height
                    + tabs
                    + r.rule.height
                    + r.composer.height
                    + r.status.height;
                assert_eq!(total, h, "{w}x{h} with {composer}: {r:?}");
                assert!(r.transcript.y + r.transcript.height <= r.rule.y.max(r.composer.y));
                if r.panes.height > 1 {
                    assert_eq!(r.transcript.width + r.panes.width, w, "side by side");
                }
            }
        }
        let wide = regions(Rect::new(0, 0, 160, 48), 2, 2);
        assert_eq!(
            (wide.transcript.width, wide.panes.x, wide.panes.width),
            (96, 96, 64)
        );
        assert_eq!(wide.panes.height, wide.transcript.height);
        let narrow = regions(Rect::new(0, 0, 80, 24), 2, 2);
        assert_eq!(
            (
                narrow.transcript.height,
                narrow.panes.y,
                narrow.panes.height
            ),
            (19, 19, 1)
        );
        let r = regions(Rect::new(0, 0, 80, 24), 2, 0);
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
