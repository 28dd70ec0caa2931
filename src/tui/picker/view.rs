//! Drawing the picker from plain data ([`Model`]): a header with the scope and a count, the
//! query line, the list of sessions (title, project dir, last activity, messages, model), a
//! preview of the selected session (to the right on a wide screen, below on a tall one, left
//! out on a small one) and a line of key hints. Columns that do not fit are left out, the
//! least needed first; text is cut to its cells with an ellipsis, so nothing overflows and
//! any size, down to a single cell, draws.

use super::preview::{PreviewMessage, Speaker};
use super::text::{ago, fit, fit_left, messages, pad, pad_left, plural, thousands};
use crate::gateway::catalog::SessionMeta;
use crate::tui::Theme;
use crate::tui::wrap::{str_width, wrap_prefixed};
use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use std::path::Path;
use unicode_segmentation::UnicodeSegmentation;

/// Everything one frame shows.
#[derive(Debug)]
pub struct Model<'a> {
    pub project_dir: &'a Path,
    pub all_projects: bool,
    pub archived: bool,
    pub query: &'a str,
    pub now_ms: i64,
    /// The rows on screen, top first.
    pub rows: Vec<Row<'a>>,
    pub selected_meta: Option<&'a SessionMeta>,
    pub preview: PreviewState<'a>,
    pub status: Status,
    /// Why there are no rows, when there are none.
    pub empty: Option<Empty<'a>>,
}

/// One listed session; `meta` is `None` for one removed since it was listed.
#[derive(Debug)]
pub struct Row<'a> {
    pub meta: Option<&'a SessionMeta>,
    pub selected: bool,
}

/// What the preview pane has for the selected session.
#[derive(Debug)]
pub enum PreviewState<'a> {
    Nothing,
    Loading,
    Failed(&'a str),
    Messages(&'a [PreviewMessage]),
}

/// The count or progress in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Sessions listed; `more` when only the first pages are read.
    Sessions {
        count: usize,
        more: bool,
    },
    Indexing,
    /// Searching, with the matches found so far once some results came.
    Searching(Option<usize>),
    Matches {
        found: usize,
        elsewhere: usize,
    },
    SearchFailed(String),
}

/// Why the list is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Empty<'a> {
    /// The database holds no session at all.
    NoSessions,
    /// None in this project (other projects have some).
    NoneInProject,
    /// Nothing passes the filter (archived ones may be hidden).
    NoneListed,
    Loading,
    Failed(&'a str),
    Indexing,
    Searching,
    NoMatch {
        elsewhere: usize,
    },
    SearchFailed(&'a str),
}

/// Where each part goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    pub header: Rect,
    pub query: Rect,
    pub rule: Rect,
    pub list: Rect,
    /// The preview pane, with the line or column that sets it off from the list.
    pub preview: Option<PreviewArea>,
    pub help: Rect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviewArea {
    pub edge: Rect,
    pub body: Rect,
    /// Beside the list (room for more detail) rather than below it.
    pub beside: bool,
}

/// Widest terminal that puts the preview below the list rather than beside it.
const SIDE_BY_SIDE: u16 = 110;

/// Fewest list rows that leave room for a preview below them.
const PREVIEW_BELOW: u16 = 14;

/// Widths of the columns after the title, and the gap before each.
const AGO: usize = 8;
const MESSAGES: usize = 8;
const PROJECT: usize = 18;
const MODEL: usize = 14;
const GAP: usize = 2;

/// Splits `area` into the picker's parts.
pub fn layout(area: Rect) -> Areas {
    let mut rest = area;
    let mut areas = Areas::default();
    let top = |rest: &mut Rect| {
        let row = Rect {
            height: rest.height.min(1),
            ..*rest
        };
        rest.y += row.height;
        rest.height -= row.height;
        row
    };
    areas.header = top(&mut rest);
    if rest.height >= 1 {
        areas.query = top(&mut rest);
    }
    if rest.height >= 2 {
        rest.height -= 1;
        areas.help = Rect {
            y: rest.y + rest.height,
            height: 1,
            ..rest
        };
    }
    if rest.height >= 5 {
        areas.rule = top(&mut rest);
    }
    areas.list = rest;
    if rest.width >= SIDE_BY_SIDE && rest.height >= 3 {
        let width = (rest.width / 3).clamp(32, 56);
        let body = Rect {
            x: rest.x + rest.width - width,
            width,
            ..rest
        };
        let edge = Rect {
            x: body.x - 1,
            width: 1,
            ..rest
        };
        // A blank column between the list and the edge.
        areas.list.width = rest.width - width - 2;
        areas.preview = Some(PreviewArea {
            edge,
            body,
            beside: true,
        });
    } else if rest.height >= PREVIEW_BELOW {
        let height = (rest.height / 3).clamp(5, 10);
        let edge = Rect {
            y: rest.y + rest.height - height,
            height: 1,
            ..rest
        };
        let body = Rect {
            y: edge.y + 1,
            height: height - 1,
            ..rest
        };
        areas.list.height = rest.height - height;
        areas.preview = Some(PreviewArea {
            edge,
            body,
            beside: false,
        });
    }
    areas
}

/// Draws `model` into `buf`; returns where the terminal cursor belongs (the end of the
/// query), if the query line is on screen.
pub fn draw(buf: &mut Buffer, areas: &Areas, model: &Model<'_>, theme: &Theme) -> Option<Position> {
    buf.set_style(areas.header, theme.base);
    draw_header(buf, areas.header, model, theme);
    let cursor = draw_query(buf, areas.query, model, theme);
    if areas.rule.height > 0 {
        let rule = "─".repeat(usize::from(areas.rule.width));
        set_line(
            buf,
            areas.rule,
            0,
            &Line::from(Span::styled(rule, theme.rule)),
        );
    }
    draw_list(buf, areas.list, model, theme);
    if let Some(preview) = areas.preview.filter(|_| model.empty.is_none()) {
        draw_preview(buf, &preview, model, theme);
    }
    draw_help(buf, areas.help, model, theme);
    cursor
}

fn draw_header(buf: &mut Buffer, area: Rect, model: &Model<'_>, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let width = usize::from(area.width);
    let status = status_text(&model.status, model.all_projects);
    let status_width = str_width(&status);
    let mut scope = if model.all_projects {
        "in all projects".to_owned()
    } else {
        format!("in {}", model.project_dir.display())
    };
    if model.archived {
        scope.push_str(" · archived shown");
    }
    let title = " Resume a session";
    let left_room = width.saturating_sub(status_width + 2);
    let mut spans = vec![Span::styled(
        fit(title, left_room),
        theme.accent.add_modifier(Modifier::BOLD),
    )];
    let used = str_width(&spans[0].content);
    if left_room > used + 3 {
        spans.push(Span::styled("  ", theme.dim));
        spans.push(Span::styled(fit(&scope, left_room - used - 2), theme.dim));
    }
    let used: usize = spans.iter().map(|s| str_width(&s.content)).sum();
    if width > used + status_width {
        spans.push(Span::raw(" ".repeat(width - used - status_width - 1)));
        spans.push(Span::styled(status, theme.dim));
    }
    set_line(buf, area, 0, &Line::from(spans));
}

fn status_text(status: &Status, all_projects: bool) -> String {
    match status {
        Status::Sessions { count, more } => {
            let plus = if *more { "+" } else { "" };
            format!("{}{plus} {}", thousands(*count), plural(*count, "session"))
        }
        Status::Indexing => "indexing…".to_owned(),
        Status::Searching(None) => "searching…".to_owned(),
        Status::Searching(Some(found)) => format!("searching… {}", thousands(*found)),
        Status::Matches { found, elsewhere } => {
            let mut text = format!("{} {}", thousands(*found), plural(*found, "match"));
            if *elsewhere > 0 && !all_projects {
                text.push_str(&format!(" · {} in other projects", thousands(*elsewhere)));
            }
            text
        }
        Status::SearchFailed(_) => "search unavailable".to_owned(),
    }
}

fn draw_query(buf: &mut Buffer, area: Rect, model: &Model<'_>, theme: &Theme) -> Option<Position> {
    if area.height == 0 {
        return None;
    }
    let width = usize::from(area.width);
    let prompt = fit(" › ", width);
    let prompt_width = str_width(&prompt);
    let room = width - prompt_width;
    let mut spans = vec![Span::styled(prompt, theme.accent)];
    let typed = if model.query.is_empty() {
        spans.push(Span::styled(
            fit("type to search titles, first messages and folders", room),
            theme.dim,
        ));
        0
    } else {
        // The end of a long query stays in view, where the typing happens.
        let shown = fit_left(model.query, room.saturating_sub(1));
        let typed = str_width(&shown);
        spans.push(Span::styled(shown, theme.base));
        typed
    };
    set_line(buf, area, 0, &Line::from(spans));
    let x = (prompt_width + typed).min(width.saturating_sub(1));
    Some(Position::new(area.x + x as u16, area.y))
}

fn draw_list(buf: &mut Buffer, area: Rect, model: &Model<'_>, theme: &Theme) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    if let Some(empty) = &model.empty {
        let lines = empty_lines(empty, model.query);
        for (y, text) in lines.iter().enumerate().take(usize::from(area.height)) {
            let text = fit(&format!("  {text}"), usize::from(area.width));
            set_line(
                buf,
                area,
                y as u16,
                &Line::from(Span::styled(text, theme.dim)),
            );
        }
        return;
    }
    let columns = Columns::for_width(usize::from(area.width));
    let highlighter = (!model.query.trim().is_empty()).then(|| Highlighter::new(model.query));
    let mut highlighter = highlighter;
    for (y, row) in model.rows.iter().enumerate().take(usize::from(area.height)) {
        let line = row_line(row, &columns, model.now_ms, highlighter.as_mut(), theme);
        let line_area = Rect {
            y: area.y + y as u16,
            height: 1,
            ..area
        };
        if row.selected {
            buf.set_style(line_area, theme.selection);
        }
        set_line(buf, line_area, 0, &line);
    }
}

fn empty_lines(empty: &Empty<'_>, query: &str) -> Vec<String> {
    let query = query.trim();
    match empty {
        Empty::NoSessions => vec![
            "No sessions yet: the conversations you have with tern are listed here.".into(),
            "Press Ctrl-N to start one.".into(),
        ],
        Empty::NoneInProject => vec![
            "No sessions in this project yet.".into(),
            "Tab lists every project's sessions; Ctrl-N starts a new one here.".into(),
        ],
        Empty::NoneListed => vec![
            "No sessions to list; archived ones are hidden (Ctrl-A shows them).".into(),
            "Ctrl-N starts a new one.".into(),
        ],
        Empty::Loading => vec!["Loading sessions…".into()],
        Empty::Failed(err) => vec![format!("Could not list the sessions: {err}")],
        Empty::Indexing => vec!["Reading every session for the search…".into()],
        Empty::Searching => vec![format!("Searching for “{query}”…")],
        Empty::NoMatch { elsewhere: 0 } => vec![
            format!("No session matches “{query}”."),
            "Backspace to widen the search, Ctrl-U to clear it.".into(),
        ],
        Empty::NoMatch { elsewhere } => vec![
            format!("No session in this project matches “{query}”."),
            if *elsewhere == 1 {
                "1 session in another project matches: Tab shows it.".to_owned()
            } else {
                format!(
                    "{} sessions in other projects match: Tab shows them.",
                    thousands(*elsewhere)
                )
            },
        ],
        Empty::SearchFailed(err) => vec![format!("The search is unavailable: {err}")],
    }
}

/// Which columns a list of a given width shows.
#[derive(Debug, Clone, Copy)]
struct Columns {
    title: usize,
    ago: bool,
    messages: bool,
    project: bool,
    model: bool,
}

impl Columns {
    fn for_width(width: usize) -> Columns {
        let ago = width >= 30;
        let messages = width >= 44;
        let project = width >= 60;
        let model = width >= 96;
        let mut rest = width.saturating_sub(2);
        for (shown, cells) in [
            (ago, AGO),
            (messages, MESSAGES),
            (project, PROJECT),
            (model, MODEL),
        ] {
            if shown {
                rest = rest.saturating_sub(cells + GAP);
            }
        }
        Columns {
            title: rest,
            ago,
            messages,
            project,
            model,
        }
    }
}

/// The cells of one listed session.
fn row_line<'a>(
    row: &Row<'_>,
    columns: &Columns,
    now_ms: i64,
    highlighter: Option<&mut Highlighter>,
    theme: &Theme,
) -> Line<'a> {
    let base = if row.selected {
        theme.base.patch(theme.selection)
    } else {
        theme.base
    };
    let dim = if row.selected {
        theme.dim.patch(theme.selection)
    } else {
        theme.dim
    };
    let marker = if row.selected { "› " } else { "  " };
    let mut spans = vec![Span::styled(marker, theme.accent.patch(base))];
    let Some(meta) = row.meta else {
        spans.push(Span::styled(
            pad(
                &fit("(removed since the list was read)", columns.title),
                columns.title,
            ),
            dim,
        ));
        return Line::from(spans);
    };
    // A chat channel's session says which channel it belongs to.
    let tag = meta
        .key
        .chat_channel()
        .map(|channel| format!("{channel} · "))
        .unwrap_or_default();
    let title_width = columns.title.saturating_sub(tag.chars().count());
    if !tag.is_empty() {
        spans.push(Span::styled(fit(&tag, columns.title), dim));
    }
    if meta.title.trim().is_empty() {
        spans.push(Span::styled(
            pad(&fit("(no messages yet)", title_width), title_width),
            dim,
        ));
    } else {
        let marks = highlighter
            .map(|h| h.indices(&meta.title))
            .unwrap_or_default();
        let accent = theme.accent.patch(base);
        spans.extend(fitted_marked(
            &meta.title,
            title_width,
            &marks,
            base,
            accent,
        ));
    }
    let gap = || Span::raw(" ".repeat(GAP));
    if columns.project {
        spans.push(gap());
        let dir = meta.project_dir.to_string_lossy();
        spans.push(Span::styled(pad(&fit_left(&dir, PROJECT), PROJECT), dim));
    }
    if columns.ago {
        spans.push(gap());
        let ago = ago(now_ms, meta.updated_at_ms);
        spans.push(Span::styled(pad_left(&fit(&ago, AGO), AGO), dim));
    }
    if columns.messages {
        spans.push(gap());
        let count = messages(meta.message_count);
        spans.push(Span::styled(
            pad_left(&fit(&count, MESSAGES), MESSAGES),
            dim,
        ));
    }
    if columns.model {
        spans.push(gap());
        spans.push(Span::styled(pad(&fit(&meta.model, MODEL), MODEL), dim));
    }
    Line::from(spans)
}

fn draw_preview(buf: &mut Buffer, pane: &PreviewArea, model: &Model<'_>, theme: &Theme) {
    if pane.beside {
        for y in 0..pane.edge.height {
            set_line(
                buf,
                pane.edge,
                y,
                &Line::from(Span::styled("│", theme.popup_border)),
            );
        }
    } else {
        let rule = "─".repeat(usize::from(pane.edge.width));
        set_line(
            buf,
            pane.edge,
            0,
            &Line::from(Span::styled(rule, theme.popup_border)),
        );
    }
    let body = Rect {
        x: pane.body.x + 1,
        width: pane.body.width.saturating_sub(2),
        ..pane.body
    };
    let width = usize::from(body.width);
    let height = usize::from(body.height);
    if width == 0 || height == 0 {
        return;
    }
    let mut lines: Vec<Line<'static>> = Vec::new();
    if let Some(meta) = model.selected_meta {
        let title = if meta.title.trim().is_empty() {
            "(no messages yet)"
        } else {
            meta.title.as_str()
        };
        lines.push(Line::from(Span::styled(
            fit(title, width),
            theme.base.add_modifier(Modifier::BOLD),
        )));
        if pane.beside {
            let dir = meta.project_dir.to_string_lossy();
            lines.push(Line::from(Span::styled(fit_left(&dir, width), theme.dim)));
            let mut facts = vec![
                messages(meta.message_count),
                ago(model.now_ms, meta.updated_at_ms),
            ];
            if !meta.model.is_empty() {
                facts.push(meta.model.clone());
            }
            lines.push(Line::from(Span::styled(
                fit(&facts.join(" · "), width),
                theme.dim,
            )));
            lines.push(Line::default());
        }
    }
    let room = height.saturating_sub(lines.len());
    let body_lines = match &model.preview {
        PreviewState::Nothing => Vec::new(),
        PreviewState::Loading => vec![Line::from(Span::styled("loading…", theme.dim))],
        PreviewState::Failed(err) => wrap_prefixed(
            &[Span::styled(
                format!("Could not read this session: {err}"),
                theme.error,
            )],
            body.width,
            &Line::default(),
            &Line::default(),
        ),
        PreviewState::Messages([]) => {
            vec![Line::from(Span::styled("no messages yet", theme.dim))]
        }
        PreviewState::Messages(messages) => {
            let per_message = if pane.beside { 4 } else { 2 };
            message_lines(messages, body.width, room, per_message, theme)
        }
    };
    lines.extend(body_lines.into_iter().take(room));
    for (y, line) in lines.iter().enumerate().take(height) {
        set_line(buf, body, y as u16, line);
    }
}

/// The latest messages that fit in `room` lines, oldest first, each cut to `per_message`
/// lines.
fn message_lines(
    messages: &[PreviewMessage],
    width: u16,
    room: usize,
    per_message: usize,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let mut blocks: Vec<Vec<Line<'static>>> = Vec::new();
    let mut used = 0;
    for message in messages.iter().rev() {
        if used >= room {
            break;
        }
        let (label, style) = match message.speaker {
            Speaker::Person => ("you  ", theme.user_message),
            Speaker::Assistant => ("tern ", theme.assistant_text),
        };
        let first = Line::from(Span::styled(label, theme.dim));
        let rest = Line::from(" ".repeat(label.len()));
        let mut lines = wrap_prefixed(
            &[Span::styled(message.text.clone(), style)],
            width,
            &first,
            &rest,
        );
        let cap = per_message.min(room - used);
        if lines.len() > cap {
            lines.truncate(cap);
            if let Some(last) = lines.last_mut() {
                end_with_ellipsis(last, usize::from(width));
            }
        }
        used += lines.len();
        blocks.push(lines);
    }
    blocks.into_iter().rev().flatten().collect()
}

/// Ends `line` with "…", dropping what it takes of the line's end to fit in `width`.
fn end_with_ellipsis(line: &mut Line<'static>, width: usize) {
    while crate::tui::wrap::line_width(line) + 1 > width {
        let Some(span) = line.spans.last_mut() else {
            return;
        };
        let mut text = span.content.to_string();
        if text.pop().is_none() {
            line.spans.pop();
            continue;
        }
        span.content = text.into();
    }
    let style = line.spans.last().map(|s| s.style).unwrap_or_default();
    line.spans.push(Span::styled("…", style));
}

fn draw_help(buf: &mut Buffer, area: Rect, model: &Model<'_>, theme: &Theme) {
    if area.height == 0 {
        return;
    }
    let scope = if model.all_projects {
        "this project"
    } else {
        "all projects"
    };
    let archived = if model.archived {
        "hide archived"
    } else {
        "archived"
    };
    // The least needed last, since a narrow screen drops from the end.
    let hints = [
        ("Enter", "resume"),
        ("Ctrl-N", "new"),
        ("Esc", "cancel"),
        ("Tab", scope),
        ("Ctrl-A", archived),
        ("↑↓", "move"),
    ];
    let width = usize::from(area.width);
    let mut spans = vec![Span::raw(" ")];
    let mut used = 1;
    for (key, what) in hints {
        let cells = str_width(key) + 1 + str_width(what) + 2;
        if used + cells > width + 2 {
            break;
        }
        spans.push(Span::styled(key, theme.accent));
        spans.push(Span::styled(format!(" {what}  "), theme.dim));
        used += cells;
    }
    set_line(buf, area, 0, &Line::from(spans));
}

/// Draws `line` on row `y` of `area`, clipped to it.
fn set_line(buf: &mut Buffer, area: Rect, y: u16, line: &Line<'_>) {
    if y < area.height && area.width > 0 {
        buf.set_line(area.x, area.y + y, line, area.width);
    }
}

/// Finds which characters of a title the query matched, to highlight them.
struct Highlighter {
    pattern: Pattern,
    matcher: Matcher,
    chars: Vec<char>,
    indices: Vec<u32>,
}

impl Highlighter {
    fn new(query: &str) -> Highlighter {
        Highlighter {
            pattern: Pattern::new(
                query,
                CaseMatching::Smart,
                Normalization::Smart,
                AtomKind::Fuzzy,
            ),
            matcher: Matcher::new(Config::DEFAULT),
            chars: Vec::new(),
            indices: Vec::new(),
        }
    }

    /// The grapheme positions in `title` that a query word matched, sorted.
    fn indices(&mut self, title: &str) -> Vec<u32> {
        let haystack = Utf32Str::new(title, &mut self.chars);
        let mut all = Vec::new();
        for atom in &self.pattern.atoms {
            self.indices.clear();
            if atom
                .indices(haystack, &mut self.matcher, &mut self.indices)
                .is_some()
            {
                all.extend_from_slice(&self.indices);
            }
        }
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// `text` in exactly `width` cells: cut with an ellipsis or padded, the graphemes at
/// positions `marks` in `marked` style.
fn fitted_marked<'a>(
    text: &str,
    width: usize,
    marks: &[u32],
    style: Style,
    marked: Style,
) -> Vec<Span<'a>> {
    let shown = fit(text, width);
    let mut spans: Vec<Span<'a>> = Vec::new();
    let mut run = String::new();
    let mut run_marked = false;
    for (i, grapheme) in shown.graphemes(true).enumerate() {
        let is_marked = marks.binary_search(&(i as u32)).is_ok() && grapheme != "…";
        if is_marked != run_marked && !run.is_empty() {
            let style = if run_marked { marked } else { style };
            spans.push(Span::styled(std::mem::take(&mut run), style));
        }
        run_marked = is_marked;
        run.push_str(grapheme);
    }
    let used = str_width(&shown);
    if !run.is_empty() {
        spans.push(Span::styled(run, if run_marked { marked } else { style }));
    }
    if used < width {
        spans.push(Span::styled(" ".repeat(width - used), style));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ago_counts_in_the_largest_whole_unit() {
        let now = 1_000_000_000_000;
        let check = |secs: i64, expected: &str| {
            assert_eq!(ago(now, now - secs * 1000), expected, "{secs}s");
        };
        check(-5, "just now");
        check(59, "just now");
        check(60, "1m ago");
        check(3599, "59m ago");
        check(3600, "1h ago");
        check(86_399, "23h ago");
        check(86_400, "1d ago");
        check(45 * 86_400, "1mo ago");
        check(400 * 86_400, "1y ago");
        assert_eq!(ago(i64::MAX, i64::MIN), "292471208y ago", "no overflow");
    }

    #[test]
    fn text_is_cut_to_its_cells() {
        assert_eq!(fit("hello", 10), "hello");
        assert_eq!(fit("hello world", 8), "hello w…");
        assert_eq!(fit("日本語のテキスト", 7), "日本語…");
        assert_eq!(fit("line\nbreak\ttab", 20), "line break tab");
        assert_eq!(fit("anything", 0), "");
        assert_eq!(fit_left("/home/dev/project", 10), "…v/project");
        assert_eq!(fit_left("/short", 10), "/short");
        assert_eq!(fit_left("/x", 0), "");
    }

    #[test]
    fn counts_read_naturally() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(messages(1), "1 msg");
        assert_eq!(messages(12), "12 msgs");
        assert_eq!(messages(123_456), "123k msgs");
    }
}
