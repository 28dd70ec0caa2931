//! A person's long message in the transcript: folded to its first and last lines around a
//! count of those between, opened further with Ctrl-O, never laid out whole.

use super::{events, screen, settings};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tern::session::SessionEvent;
use tokio::time::Instant;

/// `count` numbered lines, as a pasted log.
fn log(count: usize) -> String {
    (1..=count).map(|i| format!("log line {i}\n")).collect()
}

/// The app after `pasted` was pasted, sent and taken in by the session.
fn sent(pasted: &str, now: Instant) -> tern::tui::app::App {
    let mut app = super::app();
    app.paste(pasted);
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert_eq!(actions.len(), 1, "the message is sent: {actions:?}");
    events(
        &mut app,
        &[SessionEvent::InputAccepted {
            seq: 1,
            text: pasted.into(),
            sender: "local".into(),
        }],
        now,
    );
    app
}

#[test]
fn a_long_pasted_message_shows_its_first_and_last_lines_and_a_count() {
    let now = Instant::now();
    let mut app = sent(&log(1000), now);
    let folded = screen(&mut app, 80, 24, now);
    settings().bind(|| insta::assert_snapshot!("tui_long_message_folded_80x24", folded));
    for shown in [
        "log line 1\n",
        "log line 4\n",
        "log line 997\n",
        "log line 1000\n",
    ] {
        assert!(folded.contains(shown), "{shown:?} is shown:\n{folded}");
    }
    assert!(
        folded.contains("… 992 more lines · ctrl+o to show more"),
        "{folded}"
    );
    assert!(!folded.contains("log line 5\n"), "{folded}");

    // Ctrl-O shows more of each end, still folded.
    app.key(
        KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
        now,
    );
    let open = screen(&mut app, 80, 24, now);
    settings().bind(|| insta::assert_snapshot!("tui_long_message_open_80x24", open));
    assert!(open.contains("log line 1000\n"), "{open}");
    assert!(
        open.contains("log line 990\n"),
        "more of the end is shown:\n{open}"
    );
}

#[test]
fn a_long_message_opened_still_counts_what_it_leaves_out() {
    let now = Instant::now();
    let mut app = sent(&log(100_000), now);
    app.key(
        KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
        now,
    );
    // The count line sits above the last 200 lines: scroll to it.
    let screen_text = (0..20)
        .map(|_| {
            app.key(KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE), now);
            screen(&mut app, 80, 24, now)
        })
        .find(|s| s.contains("more lines"))
        .expect("the count of the lines left out is on some page");
    assert!(
        screen_text.contains("… 99600 more lines · ctrl+o to fold"),
        "{screen_text}"
    );
}

#[test]
fn a_short_message_is_shown_whole() {
    let now = Instant::now();
    let mut app = sent(&log(12), now);
    let shown = screen(&mut app, 80, 24, now);
    assert!(
        shown.contains("log line 1\n") && shown.contains("log line 12\n"),
        "{shown}"
    );
    assert!(!shown.contains("more lines"), "{shown}");
}
