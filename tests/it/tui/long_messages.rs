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

#[test]
fn a_message_of_megabytes_keeps_its_ends_and_the_count_of_the_rest() {
    let now = Instant::now();
    let pasted = log(100_000);
    let mut app = sent(&pasted, now);
    // Folded as any long message: the count is of all its lines.
    let folded = screen(&mut app, 80, 24, now);
    assert!(
        folded.contains("… 99992 more lines · ctrl+o to show more"),
        "{folded}"
    );
    assert!(folded.contains("log line 100000\n"), "{folded}");
    // The cell holds the lines it can show, not the megabytes; /export says what it left out.
    let markdown = app.transcript.to_markdown();
    assert!(markdown.len() < 20_000, "{} bytes exported", markdown.len());
    for kept in [
        "log line 1\n",
        "log line 200\n",
        "log line 99801\n",
        "log line 100000",
    ] {
        assert!(markdown.contains(kept), "{kept:?} is exported");
    }
    assert!(!markdown.contains("log line 201\n"), "{markdown}");
    assert!(
        markdown.contains("[… 99,600 lines left out here; the session keeps the whole message]"),
        "{markdown}"
    );
}

#[test]
fn a_message_of_megabytes_not_sent_comes_back_whole() {
    let now = Instant::now();
    let pasted = log(100_000);
    let mut app = super::app();
    app.paste(pasted.as_str());
    let actions = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    let [tern::tui::app::Action::Send(text)] = actions.as_slice() else {
        panic!("the message is sent: {actions:?}");
    };
    assert_eq!(*text, pasted);
    app.app_event(tern::tui::app::AppEvent::NotSent {
        text: text.clone(),
        error: "the session has stopped".into(),
    });
    let shown = screen(&mut app, 80, 24, now);
    assert!(!shown.contains("queued"), "the queued cell went:\n{shown}");
    assert!(
        shown.contains("your message is back in the composer"),
        "{shown}"
    );
    // Back behind a marker, and sent again whole.
    assert!(shown.contains("[pasted 100000 lines"), "{shown}");
    let again = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert!(
        matches!(again.as_slice(), [tern::tui::app::Action::Send(text)] if *text == pasted),
        "sent again whole"
    );
}

#[test]
fn a_message_of_one_huge_line_keeps_its_start_and_length() {
    let now = Instant::now();
    let line = "x".repeat(1_000_000);
    let mut app = sent(&line, now);
    let markdown = app.transcript.to_markdown();
    assert!(markdown.len() < 10_000, "{} bytes exported", markdown.len());
    assert!(
        markdown.contains("… (1000000 bytes in all)"),
        "{markdown:.200}"
    );
    let shown = screen(&mut app, 80, 24, now);
    assert!(shown.contains("x".repeat(70).as_str()), "{shown}");
}

#[test]
fn an_empty_last_line_is_kept_with_the_ends() {
    let now = Instant::now();
    let pasted = format!("{}\n", log(100_000));
    let mut app = sent(&pasted, now);
    let markdown = app.transcript.to_markdown();
    assert!(
        markdown.contains("log line 99802\n") && markdown.contains("log line 100000\n\n"),
        "the tail is the last 200 lines, the empty one among them"
    );
    assert!(!markdown.contains("log line 99801\n"), "{markdown}");
    let folded = screen(&mut app, 80, 24, now);
    assert!(folded.contains("… 99993 more lines"), "{folded}");
}
