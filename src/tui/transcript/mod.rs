//! The transcript: the session's cells in order, the part of them on screen, and how session
//! events change them.
//!
//! Drawing is virtualised: the view is anchored either to the bottom (it follows new output)
//! or to a line of a cell (the person scrolled up), and a frame renders only the cells it
//! shows, from their per-width caches. A 10,000-message session costs what a screenful does.
//! Streamed text is gathered as it arrives and committed to its cell once per frame.

mod cell;
mod fold;
mod growing;
mod history;
mod long_text;
mod packed;
mod stream;
mod tail;
mod tool_cell;

pub use cell::{Cell, CellKind, ToolCell, ToolStatus, View};
pub use history::{cells_from_history, last_usage};
pub use tool_cell::format_duration;

use crate::tui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use tokio::time::Instant;

/// Where the view is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scroll {
    /// The last lines are shown, and new output scrolls into view.
    #[default]
    Bottom,
    /// The view's first line is line `line` of cell `cell`.
    At { cell: usize, line: usize },
}

/// The cells and the view onto them.
#[derive(Debug, Default)]
pub struct Transcript {
    pub cells: Vec<Cell>,
    pub view: View,
    pub scroll: Scroll,
    /// Text and thinking received since the last frame, and the round they belong to.
    stream: stream::Stream,
    /// The height and width of the last frame, for paging.
    last_area: (u16, u16),
    /// The first and last cells the last frame showed.
    shown: (usize, usize),
}

impl Transcript {
    /// A transcript holding `cells` (a resumed session's history), viewed from the bottom.
    pub fn with_cells(cells: Vec<Cell>) -> Self {
        Self {
            cells,
            ..Self::default()
        }
    }

    pub fn push(&mut self, kind: CellKind) {
        self.cells.push(Cell::new(kind));
    }

    /// Whether the view follows new output.
    pub fn at_bottom(&self) -> bool {
        self.scroll == Scroll::Bottom
    }

    /// Draws the visible part into `area` of `buf`.
    pub fn render(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme, now: Instant) {
        self.last_area = (area.height, area.width);
        if area.height == 0 || area.width == 0 {
            return;
        }
        let (width, height) = (area.width, area.height as usize);
        let view = self.view;
        let (mut cell, mut skip) = match self.scroll {
            Scroll::Bottom => self.top_for_bottom(width, height, theme),
            Scroll::At { cell, line } => (cell.min(self.cells.len()), line),
        };
        let mut y = 0;
        self.shown = (cell, cell);
        while y < height && cell < self.cells.len() {
            self.shown.1 = cell;
            let live = self.cells[cell].live_header(now, width, theme);
            let lines = self.cells[cell].lines(width, view, theme);
            for (i, line) in lines.iter().enumerate().skip(skip) {
                if y >= height {
                    break;
                }
                let line = match (&live, i) {
                    (Some(header), 0) => header,
                    _ => line,
                };
                buf.set_line(area.x, area.y + y as u16, line, area.width);
                y += 1;
            }
            skip = 0;
            cell += 1;
        }
        // Scrolled down to the end: follow new output again.
        if y < height && matches!(self.scroll, Scroll::At { .. }) && cell >= self.cells.len() {
            self.scroll = Scroll::Bottom;
        }
    }

    /// The first cell and line shown when the view is at the bottom.
    fn top_for_bottom(&mut self, width: u16, height: usize, theme: &Theme) -> (usize, usize) {
        let view = self.view;
        let mut need = height;
        for index in (0..self.cells.len()).rev() {
            let h = self.cells[index].height(width, view, theme);
            if h >= need {
                return (index, h - need);
            }
            need -= h;
        }
        (0, 0)
    }

    /// Scrolls up by `lines`.
    pub fn scroll_up(&mut self, lines: usize, theme: &Theme) {
        let (height, width) = self.last_area;
        let (mut cell, mut line) = match self.scroll {
            Scroll::Bottom => self.top_for_bottom(width, height as usize, theme),
            Scroll::At { cell, line } => (cell, line),
        };
        let mut left = lines;
        while left > 0 {
            if line >= left {
                line -= left;
                left = 0;
            } else if cell == 0 {
                line = 0;
                left = 0;
            } else {
                left -= line + 1;
                cell -= 1;
                line = self.cells[cell]
                    .height(width, self.view, theme)
                    .saturating_sub(1);
            }
        }
        self.scroll = Scroll::At { cell, line };
    }

    /// Scrolls down by `lines`; reaching the end follows new output again. Only the cells
    /// from the view down are looked at, so cells far below, let go, are not laid out again.
    pub fn scroll_down(&mut self, lines: usize, theme: &Theme) {
        let Scroll::At { mut cell, mut line } = self.scroll else {
            return;
        };
        let (height, width) = self.last_area;
        let mut left = lines;
        while left > 0 && cell < self.cells.len() {
            let h = self.cells[cell].height(width, self.view, theme);
            if line + left < h {
                line += left;
                left = 0;
            } else {
                left -= h - line;
                cell += 1;
                line = 0;
            }
        }
        self.scroll = if self.fits_below(cell, line, width, height as usize, theme) {
            Scroll::Bottom
        } else {
            Scroll::At { cell, line }
        };
    }

    /// Whether the lines from line `line` of cell `cell` to the end fit in `height` rows.
    fn fits_below(
        &mut self,
        cell: usize,
        line: usize,
        width: u16,
        height: usize,
        theme: &Theme,
    ) -> bool {
        let view = self.view;
        let mut below = 0usize;
        for (i, c) in self.cells.iter_mut().enumerate().skip(cell) {
            below += c.height(width, view, theme);
            if i == cell {
                below = below.saturating_sub(line);
            }
            if below > height {
                return false;
            }
        }
        true
    }

    /// A screen's worth of lines, less two kept for context.
    pub fn page(&self) -> usize {
        (self.last_area.0 as usize).saturating_sub(2).max(1)
    }

    pub fn to_top(&mut self) {
        self.scroll = Scroll::At { cell: 0, line: 0 };
    }

    pub fn to_bottom(&mut self) {
        self.scroll = Scroll::Bottom;
    }

    /// Keeps what rendering holds in step with what is shown rather than with the session's
    /// length or one reply's size: off screen, the nearest cells keep their laid-out lines
    /// up to `keep` lines in all; the next ones keep them packed (see [`packed`]) up to
    /// `keep_packed` lines; the rest let them go. The cells on screen keep theirs. Returns
    /// how many laid-out lines were packed or let go.
    pub fn forget_far(&mut self, keep: usize, keep_packed: usize) -> usize {
        let len = self.cells.len();
        if len == 0 {
            return 0;
        }
        // Cells may have gone since the frame that set `shown`.
        let (first, last) = (self.shown.0.min(len - 1), self.shown.1.min(len - 1));
        let (mut left, mut packed_left) = (keep, keep_packed);
        let mut freed = 0;
        let mut keep_or_forget = |cell: &mut Cell| {
            let ready = cell.cached_lines();
            if ready > 0 && ready <= left {
                left -= ready;
                return;
            }
            let packed = ready.max(cell.packed_lines());
            if packed == 0 {
                return;
            }
            if packed <= packed_left {
                packed_left -= packed;
                cell.pack();
            } else {
                cell.forget();
            }
            freed += ready;
        };
        for distance in 1..=len {
            let above = first.checked_sub(distance);
            let below = last.checked_add(distance).filter(|&i| i < len);
            if above.is_none() && below.is_none() {
                break;
            }
            for index in [above, below].into_iter().flatten() {
                keep_or_forget(&mut self.cells[index]);
            }
        }
        freed
    }

    /// The whole transcript as markdown, for `/export`.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        for cell in &self.cells {
            match &cell.kind {
                CellKind::User { text, left_out, .. } => {
                    out.push_str("## You\n\n");
                    out.push_str(&long_text::exported(text, *left_out));
                    out.push_str("\n\n");
                }
                CellKind::Assistant { text, .. } => {
                    out.push_str(text);
                    out.push_str("\n\n");
                }
                CellKind::Thinking { .. } => {}
                CellKind::Tool(tool) => {
                    out.push_str(&format!(
                        "> **{}** `{}`\n\n",
                        tool.name,
                        crate::domain::call_text::summarize_input(&tool.input)
                    ));
                    if !tool.output.is_empty() {
                        out.push_str(&format!("```\n{}\n```\n\n", tool.output.trim_end()));
                    }
                }
                CellKind::Shell {
                    command, output, ..
                } => out.push_str(&format!("```\n$ {command}\n{}\n```\n\n", output.trim_end())),
                CellKind::Error { category, message } => {
                    out.push_str(&format!("> error ({category}): {message}\n\n"));
                }
                CellKind::Notice { text } => out.push_str(&format!("> {text}\n\n")),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ErrorCategory, TurnStop, Usage};
    use crate::session::SessionEvent;

    fn notes(n: usize) -> Transcript {
        let mut t = Transcript::default();
        for i in 0..n {
            t.push(CellKind::Notice {
                text: format!("note {i}"),
            });
        }
        t
    }

    /// The text of the rows drawn into a `width`x`height` area.
    fn rows(t: &mut Transcript, width: u16, height: u16) -> Vec<String> {
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        t.render(area, &mut buf, &Theme::default(), Instant::now());
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buf[(x, y)].symbol().to_owned())
                    .collect::<String>()
                    .trim_end()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn the_view_follows_the_bottom_until_scrolled_up() {
        let theme = Theme::default();
        // Each note is two lines: its text and a blank.
        let mut t = notes(10);
        assert_eq!(rows(&mut t, 20, 4), ["· note 8", "", "· note 9", ""]);
        t.scroll_up(3, &theme);
        assert_eq!(rows(&mut t, 20, 4)[0], "");
        assert!(!t.at_bottom());
        // New output does not move a scrolled view.
        t.push(CellKind::Notice {
            text: "note 10".into(),
        });
        assert_eq!(rows(&mut t, 20, 4), ["", "· note 7", "", "· note 8"]);
        t.scroll_down(100, &theme);
        assert!(t.at_bottom(), "back at the end, it follows again");
        assert_eq!(rows(&mut t, 20, 4)[2], "· note 10");
        t.to_top();
        assert_eq!(rows(&mut t, 20, 4)[0], "· note 0");
        t.scroll_up(5, &theme);
        assert_eq!(rows(&mut t, 20, 4)[0], "· note 0", "the top stays the top");
    }

    #[test]
    fn cells_off_screen_keep_their_lines_only_within_the_budgets() {
        let theme = Theme::default();
        let code: String = (0..2_000).map(|i| format!("let v{i} = {i};\n")).collect();
        let mut t = Transcript::default();
        t.push(CellKind::Assistant {
            text: format!("```rust\n{code}```"),
            streaming: false,
            interrupted: false,
        });
        let mut t2 = notes(30);
        t.cells.append(&mut t2.cells);
        // On screen, the big reply keeps its lines whatever their number.
        t.to_top();
        rows(&mut t, 60, 10);
        t.forget_far(100, 100);
        assert!(t.cells[0].cached_lines() > 2_000);
        t.to_bottom();
        t.scroll_up(20, &theme);
        rows(&mut t, 60, 10);
        t.to_bottom();
        rows(&mut t, 60, 10);
        // Scrolled away, it is over the budget for lines ready to draw: within the one for
        // packed lines it is packed; the notes near the view keep theirs.
        t.forget_far(100, 5_000);
        assert_eq!(t.cells[0].cached_lines(), 0);
        assert!(t.cells[0].packed_lines() > 2_000);
        assert!(t.cells[20].cached_lines() > 0);
        t.to_top();
        let unpacked = rows(&mut t, 60, 10);
        assert!(
            t.cells[0].cached_lines() > 2_000,
            "unpacked, not laid out again"
        );
        // Packed again, then beyond both budgets, it is let go, and laid out again when
        // back: the same rows.
        t.to_bottom();
        rows(&mut t, 60, 10);
        t.forget_far(100, 5_000);
        assert!(t.cells[0].packed_lines() > 2_000);
        t.forget_far(100, 100);
        assert_eq!(t.cells[0].cached_lines() + t.cells[0].packed_lines(), 0);
        t.to_top();
        assert_eq!(rows(&mut t, 60, 10), unpacked);
        assert!(
            unpacked.iter().any(|row| row.contains("let v0 = 0;")),
            "{unpacked:?}"
        );
    }

    #[test]
    fn cells_gone_since_the_last_frame_are_not_looked_for() {
        let mut t = notes(10);
        rows(&mut t, 20, 4);
        t.cells.truncate(3);
        t.forget_far(0, 0);
        t.cells.clear();
        assert_eq!(t.forget_far(0, 0), 0);
    }

    #[test]
    fn streamed_text_is_committed_per_frame_and_a_retry_voids_it() {
        let now = Instant::now();
        let mut t = Transcript::default();
        t.apply(&SessionEvent::TextDelta { text: "Hel".into() }, now);
        assert!(
            t.cells.is_empty() && t.has_pending(),
            "nothing until the frame"
        );
        assert!(t.commit_pending());
        t.apply(&SessionEvent::TextDelta { text: "lo".into() }, now);
        t.commit_pending();
        assert!(
            matches!(&t.cells[0].kind, CellKind::Assistant { text, streaming: true, .. } if text == "Hello")
        );
        t.apply(
            &SessionEvent::Retry {
                attempt: 2,
                delay: std::time::Duration::from_millis(500),
                category: ErrorCategory::Overloaded,
                message: "overloaded".into(),
                discarded_chars: 5,
                discarded_thinking_chars: 0,
            },
            now,
        );
        assert!(
            matches!(&t.cells[0].kind, CellKind::Notice { .. }),
            "the void text is gone"
        );
        // A reply that streamed nothing is shown from the turn's end.
        t.apply(
            &SessionEvent::TurnCompleted {
                text: "Hello again".into(),
                usage: Usage::default(),
                stop: TurnStop::Completed,
            },
            now,
        );
        assert!(
            matches!(&t.cells[1].kind, CellKind::Assistant { text, streaming: false, .. } if text == "Hello again")
        );
    }

    #[test]
    fn a_failover_voids_what_the_primary_streamed() {
        let now = Instant::now();
        let mut t = Transcript::default();
        t.apply(&SessionEvent::ThinkingDelta { text: "hmm".into() }, now);
        t.apply(
            &SessionEvent::TextDelta {
                text: "Half".into(),
            },
            now,
        );
        t.commit_pending();
        assert_eq!(t.cells.len(), 2);
        t.apply(
            &SessionEvent::Fallback {
                model: "backup".into(),
                message: "overloaded".into(),
                discarded_chars: 4,
                discarded_thinking_chars: 3,
            },
            now,
        );
        t.apply(
            &SessionEvent::TextDelta {
                text: "Whole".into(),
            },
            now,
        );
        t.commit_pending();
        let kinds: Vec<&CellKind> = t.cells.iter().map(|c| &c.kind).collect();
        assert!(
            matches!(
                kinds.as_slice(),
                [CellKind::Notice { .. }, CellKind::Assistant { text, .. }] if text == "Whole"
            ),
            "{kinds:?}"
        );
    }

    #[test]
    fn text_read_as_calls_leaves_the_thinking_and_the_call() {
        let now = Instant::now();
        let mut t = Transcript::default();
        t.apply(&SessionEvent::ThinkingDelta { text: "hmm".into() }, now);
        t.apply(
            &SessionEvent::TextDelta {
                text: r#"{"name": "glob", "arguments": {}}"#.into(),
            },
            now,
        );
        t.commit_pending();
        assert_eq!(t.cells.len(), 2);
        t.apply(
            &SessionEvent::TextReadAsCalls {
                discarded_chars: 33,
            },
            now,
        );
        t.apply(
            &SessionEvent::ToolCall {
                id: "text_call_1_0".into(),
                name: "glob".into(),
                input: serde_json::json!({}),
            },
            now,
        );
        let kinds: Vec<&CellKind> = t.cells.iter().map(|c| &c.kind).collect();
        assert!(
            matches!(
                kinds.as_slice(),
                [CellKind::Thinking { .. }, CellKind::Tool(tool)] if tool.name == "glob"
            ),
            "{kinds:?}"
        );
    }

    #[test]
    fn tool_results_find_their_calls() {
        let now = Instant::now();
        let later = now + std::time::Duration::from_millis(1200);
        let mut t = Transcript::default();
        for id in ["a", "b"] {
            t.apply(
                &SessionEvent::ToolCall {
                    id: id.into(),
                    name: "glob".into(),
                    input: serde_json::json!({"pattern": "*.rs"}),
                },
                now,
            );
        }
        t.apply(
            &SessionEvent::ToolResult {
                id: "b".into(),
                name: "glob".into(),
                content: "x.rs".into(),
                is_error: false,
                duration_ms: Some(35),
            },
            later,
        );
        let status = |i: usize| match &t.cells[i].kind {
            CellKind::Tool(tool) => tool.status.clone(),
            _ => panic!(),
        };
        assert!(matches!(status(0), ToolStatus::Running { .. }));
        assert_eq!(
            status(1),
            ToolStatus::Done {
                ok: true,
                // The time the session measured, not the time between the events.
                took: Some(std::time::Duration::from_millis(35))
            }
        );
        assert!(t.cells[0].is_live() && !t.cells[1].is_live());
    }
}
