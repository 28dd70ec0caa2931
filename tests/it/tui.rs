//! The terminal interface drawn at fixed sizes (ratatui's test backend) and pinned with insta
//! snapshots: the screen as text, one snapshot per view and size. The app is driven the way
//! the runner drives it: keys, pastes and session events in, frames out, on a fixed clock.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use tern::domain::{ErrorCategory, TurnStop, Usage};
use tern::session::{Phase, SessionEvent};
use tern::tui::app::App;
use tern::tui::popup::FileIndex;
use tern::tui::status::Status;
use tern::tui::{Theme, view};
use tokio::time::Instant;

mod approvals;
mod cells;
mod commands;
mod long_messages;
mod setup;
mod tables;
mod tool_output;

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings
        .set_snapshot_path(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings
}

/// An app as a fresh `tern` shows it, with a fixed model and branch.
fn app() -> App {
    let status = Status {
        model: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        context_window: 200_000,
        branch: Some("main".into()),
        ..Status::default()
    };
    let files = FileIndex::of(vec![
        "src/main.rs".into(),
        "src/tui/app.rs".into(),
        "src/tui/markdown.rs".into(),
        "README.md".into(),
    ]);
    App::new(
        Theme::default(),
        "/home/dev/.config/tern/themes".into(),
        files,
        status,
    )
}

/// The screen as text after one frame at `now`.
fn screen(app: &mut App, width: u16, height: u16, now: Instant) -> String {
    app.tick(now);
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("a test terminal");
    terminal
        .draw(|frame| view::draw(frame, app, now))
        .expect("a frame");
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let row: String = (0..width)
            .map(|x| buffer[(x, y)].symbol().to_owned())
            .collect();
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

/// Snapshots the app at 80x24 and 120x40 as `name_80x24` and `name_120x40`.
fn check(name: &str, app: &mut App, now: Instant) {
    settings().bind(|| {
        for (w, h) in [(80, 24), (120, 40)] {
            insta::assert_snapshot!(format!("tui_{name}_{w}x{h}"), screen(app, w, h, now));
        }
    });
}

fn key(app: &mut App, code: KeyCode, now: Instant) {
    app.key(KeyEvent::new(code, KeyModifiers::NONE), now);
}

fn typed(app: &mut App, text: &str, now: Instant) {
    for ch in text.chars() {
        key(app, KeyCode::Char(ch), now);
    }
}

fn events(app: &mut App, events: &[SessionEvent], at: Instant) {
    for event in events {
        app.session_event(event, at);
    }
}

fn text(t: &str) -> SessionEvent {
    SessionEvent::TextDelta { text: t.into() }
}

fn started(app: &mut App, message: &str, at: Instant) {
    app.submit_text(message.into());
    events(
        app,
        &[
            SessionEvent::InputAccepted {
                seq: 1,
                text: message.into(),
                sender: "local".into(),
            },
            SessionEvent::PhaseChanged {
                phase: Phase::Processing,
            },
        ],
        at,
    );
}

fn completed(app: &mut App, answer: &str, at: Instant) {
    events(
        app,
        &[
            SessionEvent::Usage {
                model: "claude-sonnet-4-5".into(),
                usage: Usage {
                    input_tokens: 1800,
                    output_tokens: 420,
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: 21_000,
                },
            },
            SessionEvent::TurnCompleted {
                text: answer.into(),
                usage: Usage::default(),
                stop: TurnStop::Completed,
            },
            SessionEvent::PhaseChanged {
                phase: Phase::Ready,
            },
        ],
        at,
    );
}

const MARKDOWN: &str = "## The fix\n\nThe panic comes from `unwrap()` on a **missing** key. \
                        Two changes:\n\n1. return an error instead\n2. test the empty case\n\n\
                        ```rust\nfn lookup(map: &Map, key: &str) -> Result<u32, Missing> {\n    \
                        map.get(key).copied().ok_or(Missing(key.into()))\n}\n```\n\n> See \
                        [the docs](https://doc.rust-lang.org/std/option/) for `ok_or`.\n";

#[test]
fn an_empty_session() {
    let now = Instant::now();
    check("empty", &mut app(), now);
}

#[test]
fn a_reply_streaming_mid_line() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "what does the session actor do?", now);
    events(
        &mut app,
        &[
            text("It owns a session's state and runs one turn at a time. When an input "),
            text("arrives during a tu"),
        ],
        now,
    );
    check("streaming", &mut app, now + Duration::from_millis(2300));
}

#[test]
fn markdown_with_a_code_block() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "why does lookup panic?", now);
    events(&mut app, &[text(MARKDOWN)], now);
    completed(&mut app, MARKDOWN, now);
    check("markdown", &mut app, now);
}

#[test]
fn tool_cells_running_succeeded_and_failed() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "run the tests and look at the config", now);
    let call = |id: &str, name: &str, input: serde_json::Value| SessionEvent::ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    };
    let result = |id: &str, name: &str, content: &str, is_error: bool| SessionEvent::ToolResult {
        id: id.into(),
        name: name.into(),
        content: content.into(),
        is_error,
        // As the session measured it: the results come 1.5 s after the calls.
        duration_ms: Some(1500),
    };
    events(
        &mut app,
        &[
            text("Let me look."),
            call("t1", "file_read", json!({"path": "Cargo.toml"})),
            call("t2", "grep", json!({"pattern": "fn lookup", "path": "src"})),
            call(
                "t3",
                "shell_execute",
                json!({"command": "cargo test --lib"}),
            ),
        ],
        now,
    );
    let later = now + Duration::from_millis(1500);
    events(
        &mut app,
        &[
            result(
                "t1",
                "file_read",
                "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[dependencies]\nserde = \"1\"\n",
                false,
            ),
            result("t2", "grep", "No match for `fn lookup` in src.", true),
        ],
        later,
    );
    check("tools", &mut app, now + Duration::from_millis(4200));
    // Ctrl-O shows the whole output.
    app.key(
        KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL),
        later,
    );
    settings().bind(|| {
        insta::assert_snapshot!(
            "tui_tools_open_80x24",
            screen(&mut app, 80, 24, now + Duration::from_millis(4200))
        );
    });
}

#[test]
fn a_file_edit_shows_its_diff() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "fix the typo in the greeting", now);
    let diff = "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,5 +1,5 @@\n fn main() {\n-    println!(\"Helo, world!\");\n+    println!(\"Hello, world!\");\n     run();\n }\n \n";
    events(
        &mut app,
        &[
            SessionEvent::ToolCall {
                id: "e1".into(),
                name: "file_edit".into(),
                input: json!({"path": "src/main.rs", "old": "Helo", "new": "Hello"}),
            },
            SessionEvent::ToolResult {
                id: "e1".into(),
                name: "file_edit".into(),
                content: format!("Edited src/main.rs: 1 replacement.\n{diff}"),
                is_error: false,
                duration_ms: Some(0),
            },
        ],
        now + Duration::from_millis(40),
    );
    completed(&mut app, "Fixed: `Helo` → `Hello`.", now);
    events(&mut app, &[], now);
    check("diff", &mut app, now);
}

#[test]
fn thinking_collapsed_and_expanded() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "which file holds the retry policy?", now);
    events(
        &mut app,
        &[
            SessionEvent::ThinkingDelta {
                text: "The person asks about retries.\nThe llm module has retry.rs.\nThat is the pure decision; the client applies it.".into(),
            },
            text("It is `src/llm/retry.rs`: pure decisions and the backoff."),
        ],
        now,
    );
    completed(
        &mut app,
        "It is `src/llm/retry.rs`: pure decisions and the backoff.",
        now,
    );
    check("thinking_collapsed", &mut app, now);
    app.key(
        KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL),
        now,
    );
    check("thinking_expanded", &mut app, now);
}

#[test]
fn the_slash_popup() {
    let now = Instant::now();
    let mut app = app();
    typed(&mut app, "/", now);
    check("slash", &mut app, now);
    typed(&mut app, "co", now);
    settings().bind(|| {
        insta::assert_snapshot!("tui_slash_filtered_80x24", screen(&mut app, 80, 24, now));
    });
}

#[test]
fn the_file_completion() {
    let now = Instant::now();
    let mut app = app();
    typed(&mut app, "explain @tuima", now);
    check("files", &mut app, now);
    key(&mut app, KeyCode::Tab, now);
    assert_eq!(app.composer.shown(), "explain src/tui/markdown.rs ");
}

#[test]
fn errors_queued_messages_and_interruptions() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "summarise the changes", now);
    events(&mut app, &[text("The branch changes three")], now);
    // Written while the turn runs: queued until the session takes it in.
    typed(&mut app, "also list the tests", now);
    key(&mut app, KeyCode::Enter, now);
    events(
        &mut app,
        &[SessionEvent::TurnFailed {
            category: ErrorCategory::Cancelled,
            message: "the turn was cancelled".into(),
            stop: TurnStop::Interrupted,
        }],
        now,
    );
    events(
        &mut app,
        &[SessionEvent::TurnFailed {
            category: ErrorCategory::RateLimit,
            message: "rate limited by the provider; retry in 30 s".into(),
            stop: TurnStop::Error {
                category: ErrorCategory::RateLimit,
            },
        }],
        now,
    );
    check("errors", &mut app, now);
}

#[test]
fn a_turn_the_loop_guard_ended_says_why_under_its_answer() {
    use tern::domain::GuardCause;
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "what does this project do?", now);
    let stop = TurnStop::LoopGuard {
        cause: Some(GuardCause::RepeatedCalls),
        rounds: 9,
    };
    events(
        &mut app,
        &[
            text("Reading them."),
            SessionEvent::TurnCompleted {
                text: "Reading them.".into(),
                usage: Usage::default(),
                stop,
            },
        ],
        now,
    );
    let shown = screen(&mut app, 120, 40, now);
    let answer = shown.find("Reading them.").expect("the answer stands");
    let note = shown
        .find("the loop guard ended the turn after 9 rounds of tool calls: it kept repeating")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(answer < note, "{shown}");
}

#[test]
fn a_tiny_terminal_still_draws() {
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "why does lookup panic?", now);
    events(&mut app, &[text(MARKDOWN)], now);
    completed(&mut app, MARKDOWN, now);
    settings().bind(|| {
        insta::assert_snapshot!("tui_tiny_20x5", screen(&mut app, 20, 5, now));
    });
    // Every size down to nothing, and back: no panic, lines never wider than the screen.
    for (w, h) in [(1, 1), (2, 1), (5, 2), (0, 0), (20, 5), (200, 60), (13, 3)] {
        let shown = screen(&mut app, w, h, now);
        assert!(
            shown.lines().all(|l| l.chars().count() <= w as usize),
            "{w}x{h}:\n{shown}"
        );
    }
}

#[test]
fn the_approval_modal() {
    use tern::domain::{Answer, ApprovalDetail, Grant};
    use tern::tui::app::Action;
    let now = Instant::now();
    let mut app = app();
    started(&mut app, "run the tests", now);
    events(
        &mut app,
        &[
            SessionEvent::ToolCall {
                id: "s1".into(),
                name: "shell_execute".into(),
                input: json!({"command": "cargo test --workspace"}),
            },
            SessionEvent::ApprovalRequested {
                call_id: "s1".into(),
                tool: "shell_execute".into(),
                summary: "runs a command on this machine".into(),
                detail: ApprovalDetail::Command {
                    command: "cargo test --workspace".into(),
                    cwd: "/home/dev/project".into(),
                },
                always: Some(Grant::Command {
                    prefix: "cargo test".into(),
                }),
            },
        ],
        now,
    );
    check("approval_command", &mut app, now);
    // `n` asks for a reason, which goes to the model with the no.
    key(&mut app, KeyCode::Char('n'), now);
    typed(&mut app, "use nextest", now);
    settings().bind(|| {
        insta::assert_snapshot!("tui_approval_reason_80x24", screen(&mut app, 80, 24, now));
    });
    let answered = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert_eq!(
        answered,
        [Action::Answer {
            call_id: "s1".into(),
            answer: Answer::Deny {
                reason: Some("use nextest".into())
            },
            session: None,
        }]
    );
    assert!(app.asking.is_empty());

    // An edit shows its diff.
    let mut app = self::app();
    started(&mut app, "fix the greeting", now);
    events(
        &mut app,
        &[SessionEvent::ApprovalRequested {
            call_id: "e1".into(),
            tool: "file_edit".into(),
            summary: "changes src/main.rs".into(),
            detail: ApprovalDetail::Edit {
                path: "src/main.rs".into(),
                diff: "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"Helo\");\n+    println!(\"Hello\");\n }\n".into(),
            },
            always: Some(Grant::Tool {
                tool: "file_edit".into(),
                need: tern::domain::NeedKind::Edit,
            }),
        }],
        now,
    );
    check("approval_edit", &mut app, now);
    assert_eq!(
        app.key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::NONE), now),
        [Action::Answer {
            call_id: "e1".into(),
            answer: Answer::Always,
            session: None,
        }]
    );
}

#[test]
fn slash_commands_and_shell_lines_become_actions() {
    use tern::tui::app::Action;
    let now = Instant::now();
    let mut app = app();
    let mut run = |line: &str| -> Vec<Action> {
        app.composer.set(line);
        // Enter with a popup open would run its choice instead; close it first.
        app.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), now);
        app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now)
    };
    assert_eq!(run("/new"), [Action::Reset]);
    assert_eq!(run("/reset"), [Action::Reset]);
    assert_eq!(run("/resume"), [Action::Pick]);
    assert_eq!(run("/compact"), [Action::Compact]);
    assert_eq!(run("/quit"), [Action::Quit]);
    assert_eq!(
        run("/model claude-opus-4-1"),
        [Action::SwitchModel("claude-opus-4-1".into())]
    );
    assert_eq!(
        run("/export notes.md"),
        [Action::Export {
            path: "notes.md".into(),
            overwrite: false
        }]
    );
    assert_eq!(
        run("!git status --short"),
        [Action::Shell("git status --short".into())]
    );
    assert_eq!(run("/theme light"), []);
    assert_eq!(run("/help"), []);
    assert_eq!(run("/status"), []);
    assert_eq!(run("/frobnicate"), []);
    assert_eq!(
        run("//not a command"),
        [Action::Send("//not a command".into())]
    );
    assert_eq!(run("/mcp"), [Action::ShowMcp(None)]);
    assert_eq!(
        run("/mcp approve docs"),
        [Action::ShowMcp(Some("docs".into()))]
    );
    assert_eq!(run("/mcp frobnicate"), []);
    // A server's prompt goes to the session, which asks the server for it.
    assert_eq!(
        run("/mcp__docs__review 42 the tests"),
        [Action::Send("/mcp__docs__review 42 the tests".into())]
    );
    assert_eq!(app.theme.name, "light");
    let notices: Vec<String> = app
        .transcript
        .cells
        .iter()
        .filter_map(|c| match &c.kind {
            tern::tui::transcript::CellKind::Notice { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(notices.iter().any(|n| n == "theme: light"), "{notices:?}");
    assert!(
        notices
            .iter()
            .any(|n| n.contains("/resume") && n.contains("ctrl+o")),
        "help: {notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("session ") && n.contains("claude-sonnet-4-5")),
        "status: {notices:?}"
    );
    assert!(
        notices
            .iter()
            .any(|n| n.contains("unknown command /frobnicate")),
        "{notices:?}"
    );
    // A bad theme name is an explanation, not a failure.
    let mut app = self::app();
    app.composer.set("/theme nosuch");
    app.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), now);
    app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert_eq!(app.theme.name, "dark");
}

#[test]
fn a_shell_commands_output_goes_with_the_next_message() {
    use tern::tui::app::{Action, AppEvent};
    let now = Instant::now();
    let mut app = app();
    app.app_event(AppEvent::ShellDone {
        command: "cargo --version".into(),
        output: "cargo 1.95.0\n".into(),
        ok: true,
    });
    typed(&mut app, "which version is this?", now);
    let sent = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    let [Action::Send(message)] = sent.as_slice() else {
        panic!("{sent:?}")
    };
    assert!(
        message.contains("[I ran `cargo --version` in the project"),
        "{message}"
    );
    assert!(message.contains("cargo 1.95.0") && message.ends_with("which version is this?"));
    // Only once.
    typed(&mut app, "and now?", now);
    let sent = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert_eq!(sent, [Action::Send("and now?".into())]);
}

#[test]
fn ctrl_c_clears_then_quits_and_esc_interrupts_a_turn() {
    use tern::tui::app::Action;
    let now = Instant::now();
    let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    let mut app = app();
    typed(&mut app, "draft", now);
    assert!(app.key(ctrl('c'), now).is_empty());
    assert!(app.composer.is_empty(), "the first Ctrl-C clears");
    assert!(app.key(ctrl('c'), now).is_empty(), "then it warns");
    assert_eq!(
        app.key(ctrl('c'), now + Duration::from_millis(500)),
        [Action::Quit]
    );
    let mut app = self::app();
    assert!(app.key(ctrl('c'), now).is_empty());
    assert!(
        app.key(ctrl('c'), now + Duration::from_millis(1500))
            .is_empty(),
        "too slow: a new first press"
    );
    assert_eq!(
        app.key(ctrl('d'), now),
        [Action::Quit],
        "Ctrl-D on an empty composer"
    );
    let mut app = self::app();
    started(&mut app, "go", now);
    assert_eq!(
        app.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE), now),
        [Action::Cancel]
    );
}

/// Two runs the session sent, one streaming and one in a worktree that ended, and the main
/// session streaming too.
fn with_two_runs(now: Instant) -> App {
    use tern::domain::RunId;
    use tern::tui::app::AppEvent;
    let mut app = app();
    started(&mut app, "send an explorer and a test writer", now);
    let run = |n: u64| RunId::parse(&format!("run-{n:012x}")).unwrap();
    for (n, id) in [(1, "s1"), (2, "s2")] {
        events(
            &mut app,
            &[
                SessionEvent::ToolCall {
                    id: id.into(),
                    name: "spawn_agent".into(),
                    input: json!({"task": "…"}),
                },
                SessionEvent::ToolResult {
                    id: id.into(),
                    name: "spawn_agent".into(),
                    content: json!({"run_id": run(n).as_str(), "state": "accepted"}).to_string(),
                    is_error: false,
                    duration_ms: Some(1),
                },
            ],
            now,
        );
    }
    assert_eq!(app.take_new_runs(), [run(1), run(2)]);
    app.app_event(AppEvent::RunStatus {
        run: run(1),
        status: json!({"state": "running", "agent": "explorer", "elapsed_s": 12, "session": "c1"}),
    });
    app.app_event(AppEvent::RunStatus {
        run: run(2),
        status: json!({"state": "completed", "agent": "test-writer", "elapsed_s": 40,
                       "branch": "tern/run-000000000002", "result_path": "/r/result.md"}),
    });
    for event in [
        SessionEvent::PhaseChanged {
            phase: Phase::Processing,
        },
        text("The parser lives in src/parse.rs; its entry point is `parse_expr`"),
    ] {
        app.app_event(AppEvent::RunEvent { run: run(1), event });
    }
    app.app_event(AppEvent::RunEvent {
        run: run(2),
        event: SessionEvent::Usage {
            model: "m".into(),
            usage: Usage {
                output_tokens: 812,
                ..Usage::default()
            },
        },
    });
    events(&mut app, &[text("Both are on their way. Meanwhile, ")], now);
    app
}

#[test]
fn subagent_panes_beside_the_transcript_as_tabs_and_full_screen() {
    let now = Instant::now();
    let mut app = with_two_runs(now);
    settings().bind(|| {
        for (w, h) in [(160, 48), (80, 24), (20, 5)] {
            insta::assert_snapshot!(format!("tui_panes_{w}x{h}"), screen(&mut app, w, h, now));
        }
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        app.key(ctrl('n'), now);
        app.key(ctrl('f'), now);
        insta::assert_snapshot!("tui_panes_full_80x24", screen(&mut app, 80, 24, now));
        // The focused run can be cancelled; the latest result shown.
        use tern::tui::app::Action;
        assert!(matches!(
            app.key(ctrl('x'), now).as_slice(),
            [Action::CancelRun(_)]
        ));
        app.key(ctrl('n'), now);
        assert!(matches!(
            app.key(ctrl('r'), now).as_slice(),
            [Action::ShowResult(path)] if path == &PathBuf::from("/r/result.md")
        ));
    });
}

#[test]
fn the_session_of_a_subagent_run_is_shown_read_only() {
    let now = Instant::now();
    let mut app = app();
    app.read_only_for = Some(tern::domain::SessionId::from_string("0123456789abcdef"));
    typed(&mut app, "take over", now);
    let sent = app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert!(sent.is_empty(), "{sent:?}");
    let shown = screen(&mut app, 80, 24, now);
    assert!(
        shown.contains("subagent run of session 01234567"),
        "{shown}"
    );
    assert!(
        shown.contains("take over"),
        "what was typed stays in the composer: {shown}"
    );
}
