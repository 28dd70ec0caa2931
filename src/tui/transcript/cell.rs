//! One entry of the transcript and how it is drawn: the person's messages, the assistant's
//! markdown, thinking (collapsed unless opened), tool calls with their outcome and output
//! (file changes as diffs), `!` commands, errors and tern's own notices.
//!
//! A cell renders to lines for a width; the result is cached per width and view, so a line
//! is wrapped again only when the width, the view or the cell changed. A running tool's
//! header (its spinner and clock) is the one part drawn fresh every frame.

use super::growing::Growing;
use super::long_text::folded_message;
use super::packed::Packed;
use super::tool_cell::{format_duration, output_lines, tool_header, tool_lines};
use crate::tui::render_markdown;
use crate::tui::theme::Theme;
use crate::tui::wrap::wrap_prefixed;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use std::time::Duration;
use tokio::time::Instant;

/// Lines of a diff shown while collapsed.
pub(super) const COLLAPSED_DIFF_LINES: usize = 14;
/// Most lines of tool output ever shown; the rest is in the session's journal.
pub(super) const MAX_OUTPUT_LINES: usize = 400;

/// The spinner's frames, one every 80 ms.
pub(super) const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// How the whole transcript is shown right now; part of every cell's cache key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct View {
    /// Thinking shown in full (Ctrl-T), not as one line.
    pub thinking_open: bool,
    /// Tool output shown in full (Ctrl-O), not its first lines.
    pub tools_open: bool,
    /// Bumped when the theme changes.
    pub theme_epoch: u32,
    /// Of a reply still streaming, only the end of the paragraph being written, enough for
    /// this many lines, is laid out: a view that shows only its last lines (a run's pane)
    /// need not lay out the rest again on every frame.
    pub live_tail: Option<u16>,
}

/// A tool call's state.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolStatus {
    Running {
        since: Instant,
    },
    /// Waiting for the person's approval.
    Asking,
    Done {
        ok: bool,
        took: Option<Duration>,
    },
}

/// A tool call and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCell {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
    pub status: ToolStatus,
    pub output: String,
}

/// What a cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum CellKind {
    /// A message the person sent; `queued` until the session has taken it in. Of a message
    /// of megabytes only the lines the cell can show are kept, `left_out` counting the
    /// lines between them (see [`super::long_text::kept`]).
    User {
        text: String,
        left_out: usize,
        queued: bool,
    },
    /// The assistant's reply, streamed in; `interrupted` when the person stopped it.
    Assistant {
        text: String,
        streaming: bool,
        interrupted: bool,
    },
    Thinking {
        text: String,
    },
    Tool(ToolCell),
    /// A command the person ran with `!`.
    Shell {
        command: String,
        output: String,
        ok: bool,
    },
    Error {
        category: String,
        message: String,
    },
    Notice {
        text: String,
    },
}

/// A transcript entry with its rendering cache.
#[derive(Debug, Clone)]
pub struct Cell {
    pub kind: CellKind,
    /// Bumped on every change, so the cache knows it is stale.
    generation: u64,
    cache: Option<Cached>,
    /// While a reply streams: what of it is laid out for good.
    stream: Growing,
}

#[derive(Debug, Clone)]
struct Cached {
    width: u16,
    generation: u64,
    view: View,
    laid: Laid,
}

/// A cell's laid-out lines, as they are drawn or packed while off screen.
#[derive(Debug, Clone)]
enum Laid {
    Lines(Vec<Line<'static>>),
    Packed(Packed),
}

impl Laid {
    fn into_lines(self) -> Vec<Line<'static>> {
        match self {
            Laid::Lines(lines) => lines,
            Laid::Packed(packed) => packed.unpack(),
        }
    }
}

impl Cell {
    pub fn new(kind: CellKind) -> Self {
        Self {
            kind,
            generation: 0,
            cache: None,
            stream: Growing::default(),
        }
    }

    /// Changes the cell; its cached lines are drawn again next time.
    pub fn edit(&mut self) -> &mut CellKind {
        self.generation += 1;
        &mut self.kind
    }

    /// Whether part of the cell changes with time alone (a running tool's clock).
    pub fn is_live(&self) -> bool {
        matches!(
            &self.kind,
            CellKind::Tool(ToolCell {
                status: ToolStatus::Running { .. },
                ..
            })
        )
    }

    /// The cell's height in lines at `width` (its trailing blank line included).
    pub fn height(&mut self, width: u16, view: View, theme: &Theme) -> usize {
        self.lines(width, view, theme).len()
    }

    /// The cell's lines at `width`, from the cache when it is current. A live cell's first
    /// line is a placeholder: call [`Cell::live_header`] for it.
    pub fn lines(&mut self, width: u16, view: View, theme: &Theme) -> &[Line<'static>] {
        let current = self
            .cache
            .as_ref()
            .is_some_and(|c| c.width == width && c.generation == self.generation && c.view == view);
        if current
            && let Some(cached) = self.cache.as_mut()
            && let Laid::Packed(packed) = &cached.laid
        {
            cached.laid = Laid::Lines(packed.unpack());
        }
        if !current {
            let lines = match &self.kind {
                CellKind::Assistant {
                    text,
                    streaming: true,
                    ..
                } => {
                    let mut lines = self
                        .cache
                        .take()
                        .map(|c| c.laid.into_lines())
                        .unwrap_or_default();
                    self.stream.render(text, width, view, theme, &mut lines);
                    lines
                }
                kind => render(kind, width, view, theme),
            };
            self.cache = Some(Cached {
                width,
                generation: self.generation,
                view,
                laid: Laid::Lines(lines),
            });
        }
        match &self.cache {
            Some(Cached {
                laid: Laid::Lines(lines),
                ..
            }) => lines,
            _ => &[],
        }
    }

    /// The header line of a running tool at `now`: spinner and elapsed time.
    pub fn live_header(&self, now: Instant, width: u16, theme: &Theme) -> Option<Line<'static>> {
        let CellKind::Tool(tool) = &self.kind else {
            return None;
        };
        let ToolStatus::Running { since } = tool.status else {
            return None;
        };
        let elapsed = now.saturating_duration_since(since);
        let frame = SPINNER[(elapsed.as_millis() / 80) as usize % SPINNER.len()];
        let icon = Span::styled(frame.to_owned(), theme.tool_running);
        Some(tool_header(
            tool,
            icon,
            Some(format_duration(elapsed)),
            width,
            theme,
        ))
    }

    /// How many laid-out lines the cell holds ready to draw.
    pub fn cached_lines(&self) -> usize {
        match &self.cache {
            Some(Cached {
                laid: Laid::Lines(lines),
                ..
            }) => lines.len(),
            _ => 0,
        }
    }

    /// How many laid-out lines the cell holds packed.
    pub fn packed_lines(&self) -> usize {
        match &self.cache {
            Some(Cached {
                laid: Laid::Packed(packed),
                ..
            }) => packed.len(),
            _ => 0,
        }
    }

    /// Packs the cell's laid-out lines (see [`Packed`]) to keep them off screen for less.
    pub fn pack(&mut self) {
        if let Some(cached) = self.cache.as_mut()
            && let Laid::Lines(lines) = &cached.laid
        {
            match Packed::pack(lines) {
                Some(packed) => cached.laid = Laid::Packed(packed),
                None => self.forget(),
            }
        }
    }

    /// Drops the cached lines (to free memory for cells far off screen).
    pub fn forget(&mut self) {
        self.cache = None;
        self.stream = Growing::default();
    }
}

/// Renders `kind` at `width`; every cell ends with a blank line.
fn render(kind: &CellKind, width: u16, view: View, theme: &Theme) -> Vec<Line<'static>> {
    let width = width.max(4);
    let mut lines = match kind {
        CellKind::User {
            text,
            left_out,
            queued,
        } => {
            let mut lines = folded_message(
                text,
                *left_out,
                width,
                view,
                "› ",
                theme.accent,
                theme.user_message,
                theme,
            );
            if *queued {
                lines.push(Line::styled(
                    "  queued: it goes in at the next tool step, or after this turn",
                    theme.dim,
                ));
            }
            lines
        }
        CellKind::Assistant {
            text, interrupted, ..
        } => {
            let mut lines = markdown_block(text, width, theme);
            if *interrupted {
                lines.push(Line::styled("  ⎿ interrupted", theme.warning));
            }
            lines
        }
        CellKind::Thinking { text } => thinking(text, width, view, theme),
        CellKind::Tool(tool) => tool_lines(tool, width, view, theme),
        CellKind::Shell {
            command,
            output,
            ok,
        } => {
            let icon = if *ok {
                Span::styled("!".to_owned(), theme.accent)
            } else {
                Span::styled("!".to_owned(), theme.failure)
            };
            let mut lines = vec![Line::from(vec![
                icon,
                Span::raw(" "),
                Span::styled(command.clone(), theme.tool_name),
            ])];
            lines.extend(output_lines(output, width, view, *ok, theme));
            lines
        }
        CellKind::Error { category, message } => prefixed_text(
            &format!("{category}: {message}"),
            width,
            "✗ ",
            theme.error,
            theme.error,
        ),
        CellKind::Notice { text } => prefixed_text(text, width, "· ", theme.notice, theme.notice),
    };
    lines.push(Line::default());
    lines
}

/// Prose wrapped after a marker on its first line, indented as wide on the others.
fn prefixed_text(
    text: &str,
    width: u16,
    marker: &str,
    marker_style: Style,
    style: Style,
) -> Vec<Line<'static>> {
    let first = Line::from(Span::styled(marker.to_owned(), marker_style));
    let rest = Line::from(" ".repeat(crate::tui::wrap::str_width(marker)));
    let text = if text.is_empty() { " " } else { text };
    wrap_prefixed(
        &[Span::styled(text.to_owned(), style)],
        width,
        &first,
        &rest,
    )
}

/// Markdown indented two cells, with a bullet on its first line.
pub(super) fn markdown_block(text: &str, width: u16, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = render_markdown(text, width.saturating_sub(2), theme);
    if lines.is_empty() {
        lines.push(Line::default());
    }
    for (i, line) in lines.iter_mut().enumerate() {
        let marker = if i == 0 {
            Span::styled("• ".to_owned(), theme.dim)
        } else {
            Span::raw("  ")
        };
        line.spans.insert(0, marker);
    }
    lines
}

fn thinking(text: &str, width: u16, view: View, theme: &Theme) -> Vec<Line<'static>> {
    let count = text.lines().filter(|l| !l.trim().is_empty()).count();
    let style = theme.thinking.add_modifier(Modifier::ITALIC);
    if !view.thinking_open {
        return vec![Line::styled(
            format!("✻ thinking · {count} lines · ctrl+t to show"),
            style,
        )];
    }
    let mut lines = vec![Line::styled("✻ thinking · ctrl+t to hide", style)];
    let bar = Line::from(Span::styled("┊ ".to_owned(), theme.dim));
    for paragraph in text.lines() {
        let span = Span::styled(paragraph.to_owned(), style);
        lines.extend(wrap_prefixed(&[span], width, &bar, &bar));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::tool_cell::{COLLAPSED_LINE_ROWS, OPEN_LINE_ROWS, fitting_part};
    use super::*;

    fn text_of(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    /// A finished tool call with `output`, drawn at `width` with its output open.
    fn check_tool_output(output: &str, width: u16, expected: &[&str]) {
        let kind = CellKind::Tool(ToolCell {
            id: "call_1".into(),
            name: "shell_execute".into(),
            input: serde_json::json!({"command": "make"}),
            status: ToolStatus::Done {
                ok: true,
                took: None,
            },
            output: output.into(),
        });
        let view = View {
            tools_open: true,
            ..View::default()
        };
        let lines = render(&kind, width, view, &Theme::default());
        // The header first, a blank line last.
        assert_eq!(text_of(&lines[1..lines.len() - 1]), expected, "{output:?}");
    }

    #[test]
    fn tool_output_wraps_at_word_boundaries() {
        check_tool_output(
            "error: cannot borrow value as mutable",
            24,
            &["  ⎿ error: cannot borrow", "    value as mutable"],
        );
        // A word longer than a line is cut, and only that word.
        check_tool_output(
            "see src/a/very/long/path/to/module.rs now",
            20,
            &[
                "  ⎿ see",
                "    src/a/very/long/",
                "    path/to/module.r",
                "    s now",
            ],
        );
        // A line that fits keeps its spaces and indentation, so columns still line up.
        check_tool_output(
            "name   size\n  a.rs   12",
            40,
            &["  ⎿ name   size", "      a.rs   12"],
        );
        // The `!` commands' output is drawn the same way.
        let lines = render(
            &CellKind::Shell {
                command: "ls".into(),
                output: "alpha beta gamma delta".into(),
                ok: true,
            },
            16,
            View::default(),
            &Theme::default(),
        );
        assert_eq!(
            text_of(&lines[1..lines.len() - 1]),
            ["  ⎿ alpha beta", "    gamma delta"]
        );
    }

    #[test]
    fn a_long_line_of_output_wrapped_in_part_shows_the_rows_the_whole_would() {
        let style = Style::default();
        let lead = Line::from("  ⎿ ");
        let rest = Line::from("    ");
        let words: String = (0..3000)
            .map(|n| format!("w{} ", "x".repeat(n % 23)))
            .collect();
        let mixed: String = (0..2000)
            .map(|n| match n % 5 {
                0 => "漢字かな ".to_owned(),
                1 => "\tcol".to_owned(),
                2 => "a".repeat(n % 200),
                3 => "   ".to_owned(),
                _ => "é ".to_owned(),
            })
            .collect();
        for text in [words.as_str(), mixed.as_str(), &"a".repeat(50_000)] {
            for width in [10u16, 37, 80, 121] {
                for rows in [COLLAPSED_LINE_ROWS, OPEN_LINE_ROWS] {
                    let wrap = |text: &str| {
                        let mut lines = wrap_prefixed(
                            &[Span::styled(text.to_owned(), style)],
                            width,
                            &lead,
                            &rest,
                        );
                        lines.truncate(rows);
                        text_of(&lines)
                    };
                    let (part, whole) = fitting_part(text, (rows + 2) * usize::from(width));
                    assert!(!whole && part.len() < text.len());
                    assert_eq!(wrap(part), wrap(text), "width {width}, {rows} rows");
                }
            }
        }
        assert_eq!(fitting_part("short", 100), ("short", true));
    }

    #[test]
    fn a_streaming_reply_looks_as_it_will_when_finished() {
        let theme = Theme::default();
        let samples = [
            "One paragraph only, still being writ",
            "First paragraph.\n\nSecond one, still",
            "Intro:\n\n- one\n- two\n\nAfter the list.\n\n```rust\nfn main() {\n\n    run();\n}\n```\n\nDone",
            "1. first\n\n2. second\n\n3. thi",
            "A\n\n\n\nB after blank lines",
        ];
        for text in samples {
            let finished = render(
                &CellKind::Assistant {
                    text: text.into(),
                    streaming: false,
                    interrupted: false,
                },
                60,
                View::default(),
                &theme,
            );
            let mut cell = Cell::new(CellKind::Assistant {
                text: text.into(),
                streaming: true,
                interrupted: false,
            });
            let streaming = cell.lines(60, View::default(), &theme).to_vec();
            assert_eq!(text_of(&streaming), text_of(&finished), "{text:?}");
        }
        // A cell streamed a piece at a time ends as it would have been drawn whole.
        let mut cell = Cell::new(CellKind::Assistant {
            text: String::new(),
            streaming: true,
            interrupted: false,
        });
        let whole = samples[2];
        for end in (1..=whole.len()).filter(|e| whole.is_char_boundary(*e)) {
            if let CellKind::Assistant { text, .. } = cell.edit() {
                *text = whole[..end].to_owned();
            }
            cell.lines(60, View::default(), &theme);
        }
        let finished = render(
            &CellKind::Assistant {
                text: whole.into(),
                streaming: false,
                interrupted: false,
            },
            60,
            View::default(),
            &theme,
        );
        assert_eq!(
            text_of(cell.lines(60, View::default(), &theme)),
            text_of(&finished)
        );
    }

    #[test]
    fn a_view_of_the_last_lines_lays_out_only_the_end_of_a_long_streaming_paragraph() {
        let theme = Theme::default();
        let view = View {
            live_tail: Some(64),
            ..View::default()
        };
        let words: String = (0..20_000).map(|n| format!("word{n} ")).collect();
        let streaming = || {
            Cell::new(CellKind::Assistant {
                text: words.clone(),
                streaming: true,
                interrupted: false,
            })
        };
        let lines = text_of(streaming().lines(60, view, &theme));
        assert!((64..8 * 64).contains(&lines.len()), "{}", lines.len());
        assert!(lines[lines.len() - 2].trim_end().ends_with("word19999"));
        // Any other view lays out the whole of it.
        assert!(streaming().height(60, View::default(), &theme) > 2000);
    }
}
