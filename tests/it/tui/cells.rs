//! What reaches the screen's cells: a reply streamed in pieces, drawn frame after frame on one
//! terminal as the runner draws it (each frame a diff of the one before), never leaves a cell
//! whose symbol a terminal would place differently from the buffer, and ends as a fresh
//! full draw of the same reply would.

use super::{app, events, started, text};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::CellWidth;
use std::time::Duration;
use tern::tui::app::App;
use tern::tui::view;
use tokio::time::Instant;

/// Characters that take no cell and that terminals place differently.
const INVISIBLE: &[char] = &['\u{200B}', '\u{200C}', '\u{2060}', '\u{FEFF}', '\u{AD}'];

/// Every row of the terminal's screen as its cells' symbols, the cells a wide character
/// covers left out.
fn rows(terminal: &Terminal<TestBackend>) -> Vec<String> {
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            let mut row = String::new();
            let mut x = 0;
            while x < buffer.area.width {
                let symbol = buffer[(x, y)].symbol();
                row.push_str(symbol);
                x += symbol.cell_width().max(1);
            }
            row.trim_end().to_owned()
        })
        .collect()
}

fn frame(terminal: &mut Terminal<TestBackend>, app: &mut App, now: Instant) {
    app.tick(now);
    terminal
        .draw(|frame| view::draw(frame, app, now))
        .expect("a frame");
}

#[test]
fn zero_width_joiners_in_a_streamed_reply_leave_no_cell_a_terminal_would_shift() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "say it", now);
    let mut terminal = Terminal::new(TestBackend::new(40, 12)).expect("a test terminal");
    let pieces = [
        "xx",
        "\u{200D}",
        "漢漢漢",
        " e\u{301}",
        "\u{200B}ok ",
        "\u{FEFF}a\u{AD}b",
        "\u{200C}👨\u{200D}👩 ",
        "👧\u{200D}",
        "x",
    ];
    for (i, piece) in pieces.iter().enumerate() {
        events(&mut app, &[text(piece)], now);
        frame(
            &mut terminal,
            &mut app,
            now + Duration::from_millis(20 * i as u64),
        );
        let buffer = terminal.backend().buffer();
        // A joiner may only sit inside a cell's symbol, joining two of its characters.
        let bad = buffer.content.iter().find(|cell| {
            let symbol = cell.symbol().trim_end_matches('\u{200D}');
            symbol.len() < cell.symbol().len() || symbol.contains(INVISIBLE)
        });
        assert!(bad.is_none(), "after {piece:?}: a cell holds {bad:?}");
    }
    let shown = rows(&terminal);
    assert!(
        shown
            .iter()
            .any(|row| row.contains("xx漢漢漢 e\u{301}ok ab👨\u{200D}👩 👧x")),
        "{shown:#?}"
    );
    // The same reply drawn whole on a fresh terminal gives the same screen.
    let mut fresh = Terminal::new(TestBackend::new(40, 12)).expect("a test terminal");
    let last = now + Duration::from_millis(20 * (pieces.len() as u64 - 1));
    frame(&mut fresh, &mut app, last);
    assert_eq!(rows(&fresh), shown);
}
