//! A tool's output in its cell: a line of megabytes that `shell_execute` really printed is
//! shown as a few rows while collapsed, and folded to a bounded number of rows and a note of
//! its length when opened, never laid out whole.

use super::{events, screen, settings, started};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use tern::domain::cut::group_digits;
use tern::session::SessionEvent;
use tern::tools::ToolRegistry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the model got from `shell_execute` running `command` in a temp dir.
async fn shell_output(command: &str) -> String {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().canonicalize().expect("canonical temp dir");
    let ctx = crate::support::tool_context(dir.clone(), dir.join("tmp"));
    let registry = ToolRegistry::builtin();
    let tool = registry.get("shell_execute").expect("a built-in tool");
    let out = tool
        .execute(json!({"command": command}), &ctx, CancellationToken::new())
        .await;
    assert!(!out.is_error, "{}", out.content);
    // The first line says how long the command took; a snapshot needs the same every time.
    let (status, rest) = out.content.split_once('\n').expect("a status line");
    assert!(status.starts_with("Exit code 0 after"), "{status}");
    format!("Exit code 0 after 0.0 s.\n{rest}")
}

/// Rows of the screen holding a run of `a`s.
fn rows_of_a(screen: &str) -> usize {
    screen
        .lines()
        .filter(|l| l.contains(&"a".repeat(40)))
        .count()
}

#[tokio::test]
async fn a_line_of_a_megabyte_is_shown_in_a_few_rows_and_folded_when_opened() {
    let output = shell_output("head -c 1000000 /dev/zero | tr '\\0' a; echo").await;
    // The tool keeps its head and tail: two lines of 15 KB around the note of the cut.
    let long_lines: Vec<usize> = output
        .lines()
        .map(str::len)
        .filter(|len| *len > 10_000)
        .collect();
    assert_eq!(long_lines.len(), 2, "{long_lines:?}");

    let now = Instant::now();
    let mut app = super::app();
    started(&mut app, "print a long line", now);
    let command = "head -c 1000000 /dev/zero | tr '\\0' a; echo";
    events(
        &mut app,
        &[
            SessionEvent::ToolCall {
                id: "s1".into(),
                name: "shell_execute".into(),
                input: json!({ "command": command }),
            },
            SessionEvent::ToolResult {
                id: "s1".into(),
                name: "shell_execute".into(),
                content: output.clone(),
                is_error: false,
                duration_ms: Some(7),
            },
        ],
        now,
    );
    let collapsed = screen(&mut app, 80, 24, now);
    settings().bind(|| insta::assert_snapshot!("tui_long_output_line_80x24", collapsed));
    // Two rows of each long line, the note between them and a count of what is left.
    assert_eq!(rows_of_a(&collapsed), 4, "{collapsed}");
    assert!(collapsed.contains("cut from the middle"), "{collapsed}");
    assert!(
        collapsed.contains("… 1 more line · ctrl+o to show"),
        "{collapsed}"
    );

    app.key(
        KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
        now,
    );
    let open = screen(&mut app, 80, 80, now);
    // Each long line is folded to 20 rows and a note of its length, not its 200-odd rows.
    assert_eq!(rows_of_a(&open), 40, "{open}");
    for len in &long_lines {
        let note = format!(
            "⋯ the line goes on: {} characters in all",
            group_digits(*len as u64)
        );
        assert!(open.contains(&note), "{note:?} in\n{open}");
    }
    assert_eq!(open.matches("⋯ the line goes on").count(), 2, "{open}");
    assert!(open.contains("[the output was 976.6 KB"), "{open}");
}

#[tokio::test]
async fn short_lines_of_output_are_shown_whole_when_opened() {
    let output = shell_output("seq 1 30 | tr '\\n' ' '; echo; echo done").await;
    let now = Instant::now();
    let mut app = super::app();
    started(&mut app, "count", now);
    events(
        &mut app,
        &[
            SessionEvent::ToolCall {
                id: "s1".into(),
                name: "shell_execute".into(),
                input: json!({"command": "seq"}),
            },
            SessionEvent::ToolResult {
                id: "s1".into(),
                name: "shell_execute".into(),
                content: output,
                is_error: false,
                duration_ms: Some(7),
            },
        ],
        now,
    );
    app.key(
        KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
        now,
    );
    let open = screen(&mut app, 40, 24, now);
    // The numbers wrap over a few rows, all of them shown, and no note of a fold.
    for n in ["1 2 3", "29 30", "done"] {
        assert!(open.contains(n), "{n:?} in\n{open}");
    }
    assert!(!open.contains("goes on"), "{open}");
}
