//! A tool call's lines: its header (name, what it was called with, its state and time) and
//! its output, collapsed or open, each output line wrapped only as far as the rows it may
//! take, and a written file's diff folded.

use super::cell::{COLLAPSED_DIFF_LINES, MAX_OUTPUT_LINES, SPINNER, ToolCell, ToolStatus, View};
use super::fold::{Folded, written_as_diff};
use crate::domain::call_text::summarize_input;
use crate::domain::cut::{count_of, group_digits};
use crate::tui::render_diff;
use crate::tui::theme::Theme;
use crate::tui::wrap::{hard_wrap, str_width, wrap_prefixed};
use ratatui::text::{Line, Span};
use std::time::Duration;
use unicode_segmentation::UnicodeSegmentation;

/// Lines of tool output shown while the output is collapsed.
const COLLAPSED_OUTPUT_LINES: usize = 4;
/// Rows one line of tool output takes at most while collapsed.
pub(super) const COLLAPSED_LINE_ROWS: usize = 2;
/// Rows one line of tool output takes at most when open; a longer line is folded to them
/// and a note of its length.
pub(super) const OPEN_LINE_ROWS: usize = 20;

pub(super) fn tool_lines(
    tool: &ToolCell,
    width: u16,
    view: View,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let (icon, took) = match &tool.status {
        // A placeholder of the same width; the live header replaces it every frame.
        ToolStatus::Running { .. } => (
            Span::styled(SPINNER[0].to_owned(), theme.tool_running),
            None,
        ),
        ToolStatus::Asking => (
            Span::styled("?".to_owned(), theme.warning),
            Some("waiting for your answer".to_owned()),
        ),
        ToolStatus::Done { ok: true, took } => (
            Span::styled("✓".to_owned(), theme.success),
            took.map(format_duration),
        ),
        ToolStatus::Done { ok: false, took } => (
            Span::styled("✗".to_owned(), theme.failure),
            took.map(format_duration),
        ),
    };
    let mut lines = vec![tool_header(tool, icon, took, width, theme)];
    let ok = !matches!(tool.status, ToolStatus::Done { ok: false, .. });
    // Only the lines that can be shown are laid out: a diff of megabytes costs no more than
    // its first lines (collapsed) or its first and last (open).
    let diff = match tool.name.as_str() {
        "file_edit" if ok && tool.output.contains("\n@@") => Some(Folded::of(&tool.output, view)),
        "file_write" if ok => written_as_diff(&tool.input, view),
        _ => None,
    };
    match diff {
        Some(diff) => {
            let inner = width.saturating_sub(4);
            let mut body = render_diff(&diff.head, inner, theme);
            // Lines cut here (a wrapped line counts as the lines it takes) and lines never
            // laid out.
            let mut hidden = diff.total.saturating_sub(diff.head_lines);
            if !view.tools_open && body.len() > COLLAPSED_DIFF_LINES {
                hidden += body.len() - COLLAPSED_DIFF_LINES;
                body.truncate(COLLAPSED_DIFF_LINES);
            }
            if diff.tail.is_empty() && hidden > 0 {
                let hint = if view.tools_open {
                    ""
                } else {
                    " · ctrl+o to show"
                };
                body.push(Line::styled(
                    format!(
                        "… {hidden} more line{}{hint}",
                        if hidden == 1 { "" } else { "s" }
                    ),
                    theme.dim,
                ));
            } else if !diff.tail.is_empty() {
                body.push(Line::styled(
                    format!("⋮ {} lines not shown", diff.hidden),
                    theme.dim,
                ));
                body.extend(render_diff(&diff.tail, inner, theme));
            }
            lines.extend(indent(body, "    "));
        }
        None if matches!(tool.status, ToolStatus::Done { .. }) => {
            lines.extend(output_lines(&tool.output, width, view, ok, theme));
        }
        None => {}
    }
    lines
}

/// `name summary · 1.2s`, cut to the width.
pub(super) fn tool_header(
    tool: &ToolCell,
    icon: Span<'static>,
    took: Option<String>,
    width: u16,
    theme: &Theme,
) -> Line<'static> {
    let mut spans = vec![
        icon,
        Span::raw(" "),
        Span::styled(tool.name.clone(), theme.tool_name),
        Span::raw(" "),
        Span::styled(summarize_input(&tool.input), theme.dim),
    ];
    if let Some(took) = took {
        spans.push(Span::styled(format!(" · {took}"), theme.dim));
    }
    let mut lines = hard_wrap(&spans, width, &Line::default(), &Line::default());
    lines.truncate(1);
    lines.pop().unwrap_or_default()
}

/// A tool's (or a `!` command's) output under its header: the first lines while collapsed.
/// Only what can be shown is laid out: a line of output is wrapped only as far as the rows it
/// may take (two while collapsed, [`OPEN_LINE_ROWS`] when open, then a note of its length),
/// so a line of megabytes costs a frame no more than a short one.
pub(super) fn output_lines(
    output: &str,
    width: u16,
    view: View,
    ok: bool,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let style = if ok { theme.dim } else { theme.error };
    let output = output.trim_end_matches('\n');
    if output.is_empty() {
        return Vec::new();
    }
    let (shown, rows) = if view.tools_open {
        (MAX_OUTPUT_LINES, OPEN_LINE_ROWS)
    } else {
        (COLLAPSED_OUTPUT_LINES, COLLAPSED_LINE_ROWS)
    };
    let first = Line::from(Span::styled("  ⎿ ".to_owned(), theme.dim));
    let rest = Line::from("    ");
    let mut lines = Vec::new();
    for (i, text) in output.lines().take(shown).enumerate() {
        let lead = if i == 0 { &first } else { &rest };
        // Output is mostly words (messages, paths, test names): a line breaks at a space, and
        // a word is cut only when it is longer than a whole line. A line that fits keeps its
        // spaces and indentation as printed, so columns of aligned output still line up.
        let (part, whole) = fitting_part(text, (rows + 2) * usize::from(width));
        let mut wrapped =
            wrap_prefixed(&[Span::styled(part.to_owned(), style)], width, lead, &rest);
        let folded = !whole || wrapped.len() > rows;
        wrapped.truncate(rows);
        lines.extend(wrapped);
        if folded && view.tools_open {
            lines.push(Line::styled(
                format!(
                    "    ⋯ the line goes on: {} characters in all",
                    group_digits(text.chars().count() as u64)
                ),
                theme.dim,
            ));
        }
    }
    let total = output.lines().count();
    if total > shown {
        let hint = if view.tools_open {
            "in the session's journal"
        } else {
            "ctrl+o to show"
        };
        lines.push(Line::styled(
            format!("    … {} · {hint}", count_of(total - shown, "more line")),
            theme.dim,
        ));
    }
    lines
}

/// The start of `text` that takes at least `cells` terminal cells (all of it when it takes
/// fewer), and whether that is all of it. Given two rows' worth more than it shows, wrapping
/// this part gives the same first rows as wrapping the whole line: a row's break depends only
/// on the next word, and a word longer than a row is cut at the row's end either way. Text
/// that takes no room (control characters, a megabyte of them) ends the part after eight
/// graphemes a cell, so the bound holds whatever the line holds.
pub(super) fn fitting_part(text: &str, cells: usize) -> (&str, bool) {
    let mut taken = 0;
    let most = cells.saturating_mul(8).saturating_add(64);
    for (count, (at, grapheme)) in text.grapheme_indices(true).enumerate() {
        if taken > cells || count > most {
            return (&text[..at], false);
        }
        // A tab takes up to four cells once expanded; counting it as four never cuts short.
        taken += if grapheme == "\t" {
            4
        } else {
            str_width(grapheme)
        };
    }
    (text, true)
}

pub(super) fn indent(lines: Vec<Line<'static>>, by: &'static str) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .map(|mut line| {
            line.spans.insert(0, Span::raw(by));
            line
        })
        .collect()
}

/// `850ms`, `4.2s`, `3m05s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", d.as_secs_f64()),
        _ => format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60),
    }
}
