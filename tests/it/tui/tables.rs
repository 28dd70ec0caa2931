//! A markdown table wider than the screen stays a grid: its columns shrink to a readable
//! width, and what still does not fit is clipped, each line ending in `→`.

use super::{app, completed, events, screen, settings, started, text};
use tokio::time::Instant;

/// A table of twelve columns, about 200 cells wide laid out whole.
fn wide_table() -> String {
    let columns = 12;
    let header: Vec<String> = (1..=columns).map(|c| format!("column {c:02}")).collect();
    let mut table = format!("Results:\n\n| {} |\n|", header.join(" | "));
    table.push_str(&"---|".repeat(columns));
    for row in 1..=3 {
        let cells: Vec<String> = (1..=columns)
            .map(|c| format!("r{row}c{c:02} value"))
            .collect();
        table.push_str(&format!("\n| {} |", cells.join(" | ")));
    }
    table.push_str("\n\nThat is all.\n");
    table
}

#[test]
fn a_table_wider_than_the_screen_is_a_clipped_grid_not_text() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "show the results", now);
    let reply = wide_table();
    events(&mut app, &[text(&reply)], now);
    completed(&mut app, &reply, now);
    let shown = screen(&mut app, 80, 24, now);
    let grid: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains('│') || l.contains('┬'))
        .collect();
    assert!(!grid.is_empty(), "{shown}");
    // Every line of the grid reaches the edge and says it goes on.
    for line in &grid {
        assert!(line.ends_with('→'), "{line:?}\n{shown}");
    }
    settings().bind(|| insta::assert_snapshot!("tui_wide_table_80x24", shown));
}
