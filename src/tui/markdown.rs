//! Markdown (CommonMark with GitHub tables, strikethrough and task lists) rendered to styled
//! terminal lines at a width.
//!
//! The layout follows what a terminal markdown viewer does: blocks separated by one blank
//! line, headings styled per level (no `#` marks), list items with a bullet or number and
//! their wrapped lines indented under the text, block quotes behind a `│` bar on every line
//! (blank ones included), tables in box-drawing borders, code blocks highlighted and cut at
//! the width rather than word-wrapped (the rest of a cut line goes on after a `↪`), a link's
//! URL shown dim after its text when the two differ. A theme that gives inline code or code
//! blocks no colour (as under `NO_COLOR`) gets inline code in its backticks and code blocks
//! indented, so code still stands apart from prose.
//!
//! The input is often a reply still being streamed, so any prefix of a document must render
//! sensibly: pulldown-cmark closes what is open at the end of its input, which makes an
//! unclosed fence a code block holding what has arrived so far, and a table with a partial
//! last row simply has empty cells. Nothing in the text can make rendering panic.

use std::iter::Peekable;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::highlight::highlight_shared;
use super::table::{Cell, Table, render_table, table_rows_as_text};
use super::theme::Theme;
use super::wrap::{hard_wrap, line_width, wrap_prefixed};

/// Bullets for unordered lists, by nesting depth.
const BULLETS: [&str; 3] = ["• ", "◦ ", "▪ "];

/// Renders markdown `text` into lines at most `width` cells wide (width 0 gives none).
pub fn render_markdown(text: &str, width: u16, theme: &Theme) -> Vec<Line<'static>> {
    if width == 0 {
        return Vec::new();
    }
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut renderer = Renderer::new(width, theme);
    renderer.run(Parser::new_ext(text, options).peekable());
    renderer.out
}

/// A container that puts a prefix before the lines of the blocks inside it.
enum Container {
    Quote,
    Item {
        marker: String,
        /// The marker is written on the item's first line only; then its width in spaces.
        marker_pending: bool,
    },
}

/// An open list: the next item's number (`None` when bulleted) and how many items it had.
struct List {
    next: Option<u64>,
    items: usize,
}

/// A link being read: where its text starts in the inline buffer, and where it points.
struct OpenLink {
    start: usize,
    url: String,
    kind: LinkType,
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: u16,
    out: Vec<Line<'static>>,
    containers: Vec<Container>,
    lists: Vec<List>,
    /// The inline content of the paragraph, heading or cell being read.
    inline: Vec<Span<'static>>,
    /// Inline styles (emphasis, links…) in effect, each patched over the one before.
    inline_styles: Vec<Style>,
    links: Vec<OpenLink>,
    heading: Option<HeadingLevel>,
    /// The code block being read: its language and text.
    code: Option<(String, String)>,
    /// An HTML block being read.
    html: Option<String>,
    table: Option<Table>,
    table_row: Vec<Cell>,
    in_table_head: bool,
    /// A block ended, so the next one is set off by a blank line.
    need_blank: bool,
}

impl<'t> Renderer<'t> {
    fn new(width: u16, theme: &'t Theme) -> Self {
        Renderer {
            theme,
            width,
            out: Vec::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            inline: Vec::new(),
            inline_styles: Vec::new(),
            links: Vec::new(),
            heading: None,
            code: None,
            html: None,
            table: None,
            table_row: Vec::new(),
            in_table_head: false,
            need_blank: false,
        }
    }

    fn run<'a>(&mut self, mut events: Peekable<Parser<'a>>) {
        while let Some(event) = events.next() {
            match event {
                Event::Start(tag) => self.start(tag, &mut events),
                Event::End(tag) => self.end(tag),
                Event::Text(text) => self.text(&text),
                Event::Code(code) => {
                    let style = self.text_style().patch(self.theme.inline_code);
                    // Without colour (NO_COLOR) nothing would set the code apart: keep its
                    // backticks.
                    let text = if is_invisible(self.theme.inline_code) {
                        format!("`{code}`")
                    } else {
                        code.into_string()
                    };
                    self.inline.push(Span::styled(text, style));
                }
                Event::Html(html) => match &mut self.html {
                    Some(block) => block.push_str(&html),
                    None => self.inline_html(&html),
                },
                Event::InlineHtml(html) => self.inline_html(&html),
                Event::SoftBreak => self.inline.push(Span::styled(" ", self.text_style())),
                Event::HardBreak => self.inline.push(Span::raw("\n")),
                Event::Rule => {
                    self.flush_inline();
                    let available = usize::from(self.width).saturating_sub(self.prefix_width());
                    let rule = [Span::styled("─".repeat(available.max(1)), self.theme.rule)];
                    let (first, rest) = self.prefixes();
                    let mut lines = hard_wrap(&rule, self.width, &first, &rest);
                    lines.truncate(1);
                    self.emit_block(lines);
                    self.need_blank = true;
                }
                Event::TaskListMarker(done) => {
                    if let Some(Container::Item { marker, .. }) = self.containers.last_mut() {
                        *marker = if done { "[x] " } else { "[ ] " }.to_string();
                    }
                }
                // Not enabled in the parser options; shown as text if they ever arrive.
                Event::FootnoteReference(text)
                | Event::InlineMath(text)
                | Event::DisplayMath(text) => self.text(&text),
            }
        }
        // pulldown-cmark closes every open tag at the end of the input, but be safe with
        // whatever is left.
        self.end_code_block();
        self.end_table();
        self.flush_inline();
    }

    fn start<'a>(&mut self, tag: Tag<'a>, events: &mut Peekable<Parser<'a>>) {
        match tag {
            Tag::Paragraph => self.flush_inline(),
            Tag::Heading { level, .. } => {
                self.flush_inline();
                self.heading = Some(level);
            }
            Tag::BlockQuote(_) => {
                self.flush_inline();
                // The blank line before a quote has no bar of its own.
                self.separate();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.flush_inline();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => fence_language(&info),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::HtmlBlock => {
                self.flush_inline();
                self.html = Some(String::new());
            }
            Tag::List(start) => {
                self.flush_inline();
                self.lists.push(List {
                    next: start,
                    items: 0,
                });
            }
            Tag::Item => {
                self.flush_inline();
                let bullet_depth = self.lists.iter().filter(|l| l.next.is_none()).count();
                let mut later_item = false;
                let marker = match self.lists.last_mut() {
                    Some(list) => {
                        later_item = list.items > 0;
                        list.items += 1;
                        match &mut list.next {
                            Some(number) => {
                                let marker = format!("{number}. ");
                                *number = number.saturating_add(1);
                                marker
                            }
                            None => {
                                BULLETS[bullet_depth.saturating_sub(1) % BULLETS.len()].to_string()
                            }
                        }
                    }
                    None => BULLETS[0].to_string(),
                };
                // Items of a tight list (no paragraphs inside) follow each other directly,
                // even after a nested block that asked for a blank line.
                let tight = !matches!(events.peek(), Some(Event::Start(Tag::Paragraph)));
                if later_item && tight {
                    self.need_blank = false;
                }
                self.containers.push(Container::Item {
                    marker,
                    marker_pending: true,
                });
            }
            Tag::Table(alignments) => {
                self.flush_inline();
                self.table = Some(Table {
                    alignments,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                self.in_table_head = true;
                self.table_row.clear();
            }
            Tag::TableRow => self.table_row.clear(),
            Tag::TableCell => self.inline.clear(),
            Tag::Emphasis => self.push_style(Style::new().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(Style::new().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link {
                link_type,
                dest_url,
                ..
            } => {
                self.links.push(OpenLink {
                    start: self.inline.len(),
                    url: dest_url.into_string(),
                    kind: link_type,
                });
                self.push_style(self.theme.link);
            }
            Tag::Image { dest_url, .. } => {
                self.links.push(OpenLink {
                    start: self.inline.len(),
                    url: dest_url.into_string(),
                    kind: LinkType::Inline,
                });
                self.push_style(self.theme.dim);
                self.inline
                    .push(Span::styled("[image: ", self.text_style()));
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.need_blank = true;
            }
            TagEnd::Heading(_) => {
                self.flush_inline();
                self.heading = None;
                self.need_blank = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.pop_container();
                self.need_blank = true;
            }
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::HtmlBlock => {
                if let Some(html) = self.html.take() {
                    let text = html.trim_end_matches('\n');
                    let spans = [Span::styled(text.to_string(), self.theme.dim)];
                    let (first, rest) = self.prefixes();
                    self.emit_block(wrap_prefixed(&spans, self.width, &first, &rest));
                }
                self.need_blank = true;
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                self.need_blank = true;
            }
            TagEnd::Item => {
                self.flush_inline();
                self.pop_container();
            }
            TagEnd::Table => self.end_table(),
            TagEnd::TableHead => {
                self.in_table_head = false;
                let row = std::mem::take(&mut self.table_row);
                if let Some(table) = &mut self.table {
                    table.header = Some(row);
                }
            }
            TagEnd::TableRow => {
                let row = std::mem::take(&mut self.table_row);
                if let Some(table) = &mut self.table {
                    table.rows.push(row);
                }
            }
            TagEnd::TableCell => {
                let cell = std::mem::take(&mut self.inline);
                self.table_row.push(cell);
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.inline_styles.pop();
            }
            TagEnd::Link => {
                self.inline_styles.pop();
                if let Some(link) = self.links.pop() {
                    self.link_url(link);
                }
            }
            TagEnd::Image => {
                self.inline.push(Span::styled("]", self.text_style()));
                self.inline_styles.pop();
                if let Some(link) = self.links.pop() {
                    self.link_url(link);
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
        } else if let Some(html) = &mut self.html {
            html.push_str(text);
        } else {
            self.inline
                .push(Span::styled(text.to_string(), self.text_style()));
        }
    }

    fn inline_html(&mut self, html: &str) {
        let tag = html.trim().to_ascii_lowercase().replace(' ', "");
        if matches!(tag.as_str(), "<br>" | "<br/>") {
            self.inline.push(Span::raw("\n"));
        } else {
            let style = self.text_style().patch(self.theme.dim);
            self.inline.push(Span::styled(html.to_string(), style));
        }
    }

    /// After a link's text, its URL in the dim link style, unless the text already says it.
    fn link_url(&mut self, link: OpenLink) {
        let text: String = self
            .inline
            .get(link.start..)
            .unwrap_or_default()
            .iter()
            .map(|s| s.content.as_ref())
            .collect();
        let url = link.url.trim();
        let redundant = url.is_empty()
            || matches!(link.kind, LinkType::Autolink | LinkType::Email)
            || url == text.trim()
            || url.strip_prefix("mailto:") == Some(text.trim())
            || url.trim_end_matches('/') == text.trim().trim_end_matches('/');
        if !redundant {
            let style = self.base_style().patch(self.theme.link_url);
            self.inline.push(Span::styled(format!(" ({url})"), style));
        }
    }

    fn push_style(&mut self, style: Style) {
        let current = self.inline_styles.last().copied().unwrap_or_default();
        self.inline_styles.push(current.patch(style));
    }

    /// The style of plain text in the current block, before inline styles.
    fn base_style(&self) -> Style {
        let mut style = self.theme.assistant_text;
        if self
            .containers
            .iter()
            .any(|c| matches!(c, Container::Quote))
        {
            style = style.patch(self.theme.block_quote);
        }
        if let Some(level) = self.heading {
            style = style.patch(self.theme.heading(level as u8));
        }
        if self.in_table_head {
            style = style
                .patch(self.theme.table_header)
                .add_modifier(Modifier::BOLD);
        }
        style
    }

    fn text_style(&self) -> Style {
        let base = self.base_style();
        match self.inline_styles.last() {
            Some(inline) => base.patch(*inline),
            None => base,
        }
    }

    /// The prefixes for the first and the following lines of a block in the current
    /// containers.
    fn prefixes(&self) -> (Line<'static>, Line<'static>) {
        let mut first = Vec::new();
        let mut rest = Vec::new();
        for container in &self.containers {
            match container {
                Container::Quote => {
                    let bar = Span::styled("│ ", self.theme.block_quote);
                    first.push(bar.clone());
                    rest.push(bar);
                }
                Container::Item {
                    marker,
                    marker_pending,
                } => {
                    let indent = " ".repeat(marker.chars().count());
                    if *marker_pending {
                        first.push(Span::styled(marker.clone(), self.theme.list_marker));
                    } else {
                        first.push(Span::raw(indent.clone()));
                    }
                    rest.push(Span::raw(indent));
                }
            }
        }
        (Line::from(first), Line::from(rest))
    }

    fn prefix_width(&self) -> usize {
        line_width(&self.prefixes().1)
    }

    /// Writes the paragraph, heading or tight list item text read so far.
    fn flush_inline(&mut self) {
        if self.inline.is_empty() || self.table.is_some() {
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let (first, rest) = self.prefixes();
        let lines = wrap_prefixed(&spans, self.width, &first, &rest);
        self.emit_block(lines);
    }

    /// The blank line between two blocks, if one is due: only the quote bars of the
    /// containers, so a quote stays one piece.
    fn separate(&mut self) {
        if self.need_blank && !self.out.is_empty() {
            let bars = self
                .containers
                .iter()
                .filter(|c| matches!(c, Container::Quote))
                .count();
            let line = if bars == 0 {
                Line::default()
            } else {
                let text = "│ ".repeat(bars);
                Line::from(Span::styled(
                    text.trim_end().to_string(),
                    self.theme.block_quote,
                ))
            };
            self.out.push(line);
        }
        self.need_blank = false;
    }

    /// Adds a block's lines, after a blank line if one is due; list markers are written once.
    fn emit_block(&mut self, lines: Vec<Line<'static>>) {
        if lines.is_empty() {
            return;
        }
        self.separate();
        self.out.extend(lines);
        for container in &mut self.containers {
            if let Container::Item { marker_pending, .. } = container {
                *marker_pending = false;
            }
        }
    }

    fn pop_container(&mut self) {
        // An item that ended without any content still shows its marker.
        if let Some(Container::Item {
            marker_pending: true,
            ..
        }) = self.containers.last()
        {
            let (first, rest) = self.prefixes();
            self.emit_block(wrap_prefixed(&[], self.width, &first, &rest));
        }
        self.containers.pop();
    }

    fn end_code_block(&mut self) {
        let Some((lang, code)) = self.code.take() else {
            return;
        };
        let theme = self.theme;
        let highlighted = highlight_shared(&code, &lang, &theme.syntax_theme);
        let (mut first, mut rest) = self.prefixes();
        let pad = theme.code_block.bg.is_some();
        if !pad {
            // With no background to show where the code is, indent it as plain-text mail does.
            first.spans.push(Span::raw("  "));
            rest.spans.push(Span::raw("  "));
        }
        // A code line cut at the width goes on after a marker, so that it is not taken for a
        // line of its own (which matters in Python).
        let mut continuation = rest.clone();
        continuation.spans.push(Span::styled(
            "↪ ",
            theme.code_block.patch(Style {
                bg: None,
                ..theme.dim
            }),
        ));
        let mut lines = Vec::new();
        let empty = [Vec::new()];
        // A fence just opened shows as one empty code line, so the block is visible at once.
        let source: &[_] = if highlighted.is_empty() {
            &empty
        } else {
            &highlighted
        };
        for (index, pieces) in source.iter().enumerate() {
            let spans: Vec<Span<'static>> = pieces
                .iter()
                .map(|(style, text)| {
                    Span::styled(text.clone(), theme.code_block.patch(theme.adapt(*style)))
                })
                .collect();
            let first_prefix = if index == 0 { &first } else { &rest };
            for mut line in hard_wrap(&spans, self.width, first_prefix, &continuation) {
                if pad {
                    let gap = usize::from(self.width).saturating_sub(line_width(&line));
                    if gap > 0 {
                        line.spans
                            .push(Span::styled(" ".repeat(gap), theme.code_block));
                    }
                }
                lines.push(line);
            }
        }
        self.emit_block(lines);
        self.need_blank = true;
    }

    fn end_table(&mut self) {
        let Some(mut table) = self.table.take() else {
            return;
        };
        // A row still open at the end of the input (streaming) is shown as far as it goes.
        if !self.inline.is_empty() {
            self.table_row.push(std::mem::take(&mut self.inline));
        }
        if !self.table_row.is_empty() {
            table.rows.push(std::mem::take(&mut self.table_row));
        }
        self.in_table_head = false;
        let (first, rest) = self.prefixes();
        let available = usize::from(self.width).saturating_sub(line_width(&rest));
        let lines = match render_table(&table, available, self.theme.table_border) {
            Some(grid) => grid
                .into_iter()
                .enumerate()
                .map(|(i, line)| {
                    let prefix = if i == 0 { &first } else { &rest };
                    let mut spans = prefix.spans.clone();
                    spans.extend(line.spans);
                    Line::from(spans)
                })
                .collect(),
            // Too narrow for a grid: each row as a line of text, cells separated by bars.
            None => {
                let mut lines = Vec::new();
                for (i, row) in table_rows_as_text(&table, self.theme.table_border)
                    .iter()
                    .enumerate()
                {
                    let prefix = if i == 0 { &first } else { &rest };
                    lines.extend(wrap_prefixed(row, self.width, prefix, &rest));
                }
                lines
            }
        };
        self.emit_block(lines);
        self.need_blank = true;
    }
}

/// Whether a style would look like plain text: no colour and no modifier.
fn is_invisible(style: Style) -> bool {
    style.fg.is_none() && style.bg.is_none() && style.add_modifier.is_empty()
}

/// The language named by a fence's info string: its first word, without attributes such as
/// `rust,no_run` or `python {linenos}`.
pub(crate) fn fence_language(info: &str) -> String {
    info.trim()
        .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .trim_start_matches('.')
        .to_string()
}

#[cfg(test)]
mod tests;
