//! Laying out a markdown table in box-drawing characters: columns sized to their content,
//! shrunk to fit the width (widest first), cell text wrapped inside its column.
//!
//! ```text
//! ┌──────┬─────────────┐
//! │ Name │ Description │
//! ├──────┼─────────────┤
//! │ wrap │ breaks text │
//! │      │ at spaces   │
//! └──────┴─────────────┘
//! ```
//!
//! A column is never narrower than its widest character, nor than [`MIN_COLUMN`] cells when
//! its text is wider, so no row is wider than the table and no word is cut letter by letter.
//! A table that cannot fit so is laid out at those least widths and clipped at the width,
//! each line ending in a `→` that says the grid goes on. Only a width too small even for
//! that ([`MIN_CLIPPED`]) gives no grid; the caller then shows each row as text, the cells
//! separated by `│` ([`table_rows_as_text`]), so nothing is lost.

use pulldown_cmark::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::wrap::{line_width, narrowest_width, truncate, wrap};

/// The fewest cells a column whose text is wider gets: fewer, and its words are cut into
/// pieces too short to read.
const MIN_COLUMN: usize = 5;

/// The narrowest width a clipped grid is drawn at; below it, rows are shown as text.
const MIN_CLIPPED: usize = 8;

/// What ends each line of a table clipped at the width.
const CLIPPED: &str = "→";

/// The styled content of one cell.
pub(super) type Cell = Vec<Span<'static>>;

/// A table as parsed, before layout.
#[derive(Debug, Default)]
pub(super) struct Table {
    /// Per-column alignment from the delimiter row.
    pub alignments: Vec<Alignment>,
    /// The header row, when the table has one.
    pub header: Option<Vec<Cell>>,
    /// The body rows; a row may have fewer cells than there are columns (streaming).
    pub rows: Vec<Vec<Cell>>,
}

/// Borders and padding of a row: `│ ` before each cell, ` │` after the last, ` │ ` between.
fn overhead(columns: usize) -> usize {
    3 * columns + 1
}

/// The table laid out in at most `width` cells (without any container prefix), clipped with
/// a marker when it cannot fit, or `None` when the width cannot hold even a clipped grid.
pub(super) fn render_table(
    table: &Table,
    width: usize,
    border: Style,
) -> Option<Vec<Line<'static>>> {
    let all_rows: Vec<&Vec<Cell>> = table.header.iter().chain(table.rows.iter()).collect();
    let columns = all_rows
        .iter()
        .map(|r| r.len())
        .max()
        .unwrap_or(0)
        .max(table.alignments.len());
    if columns == 0 {
        return Some(Vec::new());
    }
    // A column is at least as wide as its widest character: a wide character in a column of
    // one cell would push the row's border past the width.
    let mut least = vec![1usize; columns];
    let mut natural = vec![1usize; columns];
    for row in &all_rows {
        for (c, cell) in row.iter().enumerate() {
            least[c] = least[c].max(narrowest_width(cell));
            natural[c] = natural[c].max(cell_width(cell));
        }
    }
    for (n, l) in natural.iter_mut().zip(least.iter_mut()) {
        *n = (*n).max(*l);
        *l = (*n).min(MIN_COLUMN).max(*l);
    }
    let least_total = overhead(columns) + least.iter().sum::<usize>();
    if least_total > width {
        if width < MIN_CLIPPED {
            return None;
        }
        let grid = grid(table, &least, border);
        return Some(grid.iter().map(|l| clip(l, width, border)).collect());
    }
    let widths = fit_widths(&natural, &least, width - overhead(columns));
    Some(grid(table, &widths, border))
}

/// `line` cut to `width` cells, its last one the marker that says it goes on.
fn clip(line: &Line<'_>, width: usize, border: Style) -> Line<'static> {
    let mut clipped = truncate(line, width - 1);
    let short = width - 1 - line_width(&clipped);
    if short > 0 {
        // A wide character did not fit in the last cell.
        clipped.spans.push(Span::raw(" ".repeat(short)));
    }
    clipped.spans.push(Span::styled(CLIPPED, border));
    clipped
}

/// The table's lines at these column widths.
fn grid(table: &Table, widths: &[usize], border: Style) -> Vec<Line<'static>> {
    let mut out = vec![rule(widths, ('┌', '┬', '┐'), border)];
    if let Some(header) = &table.header {
        out.extend(render_row(header, widths, &table.alignments, border));
        out.push(rule(widths, ('├', '┼', '┤'), border));
    }
    for row in &table.rows {
        out.extend(render_row(row, widths, &table.alignments, border));
    }
    out.push(rule(widths, ('└', '┴', '┘'), border));
    out
}

/// Column widths summing to at most `target`: the natural widths if they fit, else every
/// column capped at the largest width that fits, the widest losing the most, but none below
/// its least width. The natural widths are at least the least ones, and the least ones fit.
fn fit_widths(natural: &[usize], least: &[usize], target: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= target {
        return natural.to_vec();
    }
    let capped = |cap: usize| {
        natural
            .iter()
            .zip(least)
            .map(move |(n, l)| (*n).min(cap).max(*l))
    };
    // The largest cap whose total fits; at least 1, where every column has its least width.
    let (mut low, mut high) = (1, natural.iter().copied().max().unwrap_or(1));
    while low < high {
        let middle = (low + high).div_ceil(2);
        if capped(middle).sum::<usize>() <= target {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    let mut widths: Vec<usize> = capped(low).collect();
    // Hand the cells left over to the capped columns, left to right.
    let mut spare = target.saturating_sub(widths.iter().sum());
    for (w, n) in widths.iter_mut().zip(natural) {
        if spare == 0 {
            break;
        }
        if *w < *n {
            *w += 1;
            spare -= 1;
        }
    }
    widths
}

fn cell_width(cell: &Cell) -> usize {
    line_width(&Line::from(cell.clone()))
}

fn rule(
    widths: &[usize],
    (left, middle, right): (char, char, char),
    style: Style,
) -> Line<'static> {
    let mut text = String::new();
    text.push(left);
    for (i, w) in widths.iter().enumerate() {
        if i > 0 {
            text.push(middle);
        }
        text.extend(std::iter::repeat_n('─', w + 2));
    }
    text.push(right);
    Line::from(Span::styled(text, style))
}

fn render_row(
    row: &[Cell],
    widths: &[usize],
    alignments: &[Alignment],
    border: Style,
) -> Vec<Line<'static>> {
    let empty = Cell::new();
    let wrapped: Vec<Vec<Line<'static>>> = widths
        .iter()
        .enumerate()
        .map(|(c, w)| {
            let cell = row.get(c).unwrap_or(&empty);
            // Width fits in u16: it is at most the table's width, which came from a u16.
            wrap(cell, u16::try_from(*w).unwrap_or(u16::MAX))
        })
        .collect();
    let height = wrapped.iter().map(Vec::len).max().unwrap_or(1).max(1);
    (0..height)
        .map(|line| {
            let mut spans = vec![Span::styled("│ ", border)];
            for (c, w) in widths.iter().enumerate() {
                if c > 0 {
                    spans.push(Span::styled(" │ ", border));
                }
                let content = wrapped[c].get(line).cloned().unwrap_or_default();
                let gap = w.saturating_sub(line_width(&content));
                let (before, after) = match alignments.get(c) {
                    Some(Alignment::Right) => (gap, 0),
                    Some(Alignment::Center) => (gap / 2, gap - gap / 2),
                    _ => (0, gap),
                };
                if before > 0 {
                    spans.push(Span::raw(" ".repeat(before)));
                }
                spans.extend(content.spans);
                if after > 0 {
                    spans.push(Span::raw(" ".repeat(after)));
                }
            }
            spans.push(Span::styled(" │", border));
            Line::from(spans)
        })
        .collect()
}

/// Each row as one run of text, the cells separated by ` │ `: for widths too small for a grid.
pub(super) fn table_rows_as_text(table: &Table, border: Style) -> Vec<Vec<Span<'static>>> {
    table
        .header
        .iter()
        .chain(table.rows.iter())
        .map(|row| {
            let mut spans = Vec::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    spans.push(Span::styled(" │ ", border));
                }
                spans.extend(cell.iter().cloned());
            }
            spans
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(text: &str) -> Cell {
        vec![Span::raw(text.to_string())]
    }

    fn table(header: &[&str], rows: &[&[&str]], alignments: &[Alignment]) -> Table {
        Table {
            alignments: alignments.to_vec(),
            header: Some(header.iter().map(|t| cell(t)).collect()),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|t| cell(t)).collect())
                .collect(),
        }
    }

    fn check(table: &Table, width: usize, expected: &str) {
        let lines = render_table(table, width, Style::new()).expect("a grid fits");
        let text: Vec<String> = lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(text.join("\n"), expected.trim_matches('\n'));
        for line in &lines {
            assert!(line_width(line) <= width, "{line:?} is wider than {width}");
        }
    }

    #[test]
    fn natural_widths_when_it_fits() {
        let t = table(&["a", "bb"], &[&["ccc", "d"]], &[]);
        check(
            &t,
            40,
            "
┌─────┬────┐
│ a   │ bb │
├─────┼────┤
│ ccc │ d  │
└─────┴────┘",
        );
    }

    #[test]
    fn alignment_from_the_delimiter_row() {
        let t = table(
            &["left", "mid", "right"],
            &[&["a", "b", "c"]],
            &[Alignment::Left, Alignment::Center, Alignment::Right],
        );
        check(
            &t,
            40,
            "
┌──────┬─────┬───────┐
│ left │ mid │ right │
├──────┼─────┼───────┤
│ a    │  b  │     c │
└──────┴─────┴───────┘",
        );
    }

    #[test]
    fn widest_column_shrinks_and_wraps() {
        let t = table(
            &["key", "description"],
            &[&["wrap", "breaks text at spaces"]],
            &[],
        );
        check(
            &t,
            22,
            "
┌──────┬─────────────┐
│ key  │ description │
├──────┼─────────────┤
│ wrap │ breaks text │
│      │ at spaces   │
└──────┴─────────────┘",
        );
    }

    #[test]
    fn missing_cells_are_empty() {
        let t = table(&["a", "b"], &[&["1"]], &[]);
        check(
            &t,
            40,
            "
┌───┬───┐
│ a │ b │
├───┼───┤
│ 1 │   │
└───┴───┘",
        );
    }

    #[test]
    fn columns_shrink_no_further_than_five_cells_then_the_grid_is_clipped() {
        let t = table(
            &["name", "description", "notes"],
            &[&["wrap", "breaks text at spaces", "tested"]],
            &[],
        );
        // 10 cells of borders, at least 4 + 5 + 5 of text.
        check(
            &t,
            24,
            "
┌──────┬───────┬───────┐
│ name │ descr │ notes │
│      │ iptio │       │
│      │ n     │       │
├──────┼───────┼───────┤
│ wrap │ break │ teste │
│      │ s     │ d     │
│      │ text  │       │
│      │ at    │       │
│      │ space │       │
│      │ s     │       │
└──────┴───────┴───────┘",
        );
        check(
            &t,
            20,
            "
┌──────┬───────┬───→
│ name │ descr │ no→
│      │ iptio │   →
│      │ n     │   →
├──────┼───────┼───→
│ wrap │ break │ te→
│      │ s     │ d →
│      │ text  │   →
│      │ at    │   →
│      │ space │   →
│      │ s     │   →
└──────┴───────┴───→",
        );
    }

    #[test]
    fn too_narrow_for_a_clipped_grid_gives_rows_as_text() {
        let t = table(&["a", "b", "c"], &[&["1", "2", "3"]], &[]);
        assert!(render_table(&t, 13, Style::new()).is_some());
        assert!(render_table(&t, MIN_CLIPPED, Style::new()).is_some());
        assert!(render_table(&t, MIN_CLIPPED - 1, Style::new()).is_none());
        assert!(render_table(&t, 0, Style::new()).is_none());
        let rows: Vec<String> = table_rows_as_text(&t, Style::new())
            .iter()
            .map(|r| r.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert_eq!(rows, vec!["a │ b │ c", "1 │ 2 │ 3"]);
    }

    #[test]
    fn fit_widths_caps_the_widest_first() {
        assert_eq!(fit_widths(&[3, 10, 4], &[1, 1, 1], 20), vec![3, 10, 4]);
        assert_eq!(fit_widths(&[3, 10, 4], &[1, 1, 1], 12), vec![3, 5, 4]);
        assert_eq!(fit_widths(&[10, 10], &[1, 1], 11), vec![6, 5]);
        assert_eq!(fit_widths(&[5, 5, 5], &[1, 1, 1], 3), vec![1, 1, 1]);
        // A column holding a wide character keeps two cells.
        assert_eq!(fit_widths(&[4, 4, 4], &[2, 1, 2], 5), vec![2, 1, 2]);
        assert_eq!(fit_widths(&[4, 9], &[2, 1], 6), vec![3, 3]);
    }
}
