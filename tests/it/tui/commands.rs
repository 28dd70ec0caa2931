//! Slash commands that check before they act: `/model` refuses a name that cannot be a model
//! id, and `/export` asks before writing over a file that is there.

use super::{app, screen, settings};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tern::tui::app::{Action, App, AppEvent};
use tern::tui::export;
use tern::tui::transcript::CellKind;
use tokio::time::Instant;

/// Runs `line` as typed and sent.
fn run(app: &mut App, line: &str, now: Instant) -> Vec<Action> {
    app.composer.set(line);
    // Enter with a popup open would run its choice instead; close it first.
    press(app, KeyCode::Esc, now);
    press(app, KeyCode::Enter, now)
}

fn press(app: &mut App, code: KeyCode, now: Instant) -> Vec<Action> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE), now)
}

/// The text of the latest notice.
fn last_notice(app: &App) -> String {
    app.transcript
        .cells
        .iter()
        .rev()
        .find_map(|cell| match &cell.kind {
            CellKind::Notice { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn a_model_name_that_cannot_be_an_id_is_refused_with_the_cause() {
    let now = Instant::now();
    let mut app = app();
    let check = |app: &mut App, name: &str, says: &str| {
        let actions = run(app, &format!("/model {name}"), now);
        let shown: String = name.chars().take(20).collect();
        assert_eq!(actions, [], "{shown:?} was switched to");
        let notice = last_notice(app);
        assert!(notice.contains(says), "{shown:?}: {notice}");
        assert!(notice.contains("/model NAME"), "{notice}");
    };
    let long = "word ".repeat(1200);
    check(
        &mut app,
        long.trim(),
        "at most 200 characters and this one has 5999",
    );
    check(&mut app, "gpt 4o", "a space (character 4)");
    check(&mut app, "gpt-4o\u{1b}[2J", "a control character, U+001B,");
    check(&mut app, "gpt-4o\u{200b}", "U+200B");
    check(&mut app, "gpt;rm", "`;`");
    for id in [
        "qwen2.5-coder:7b",
        "hf.co/org/Model-GGUF:Q4_K_M",
        "openai/gpt-4o@latest",
    ] {
        assert_eq!(
            run(&mut app, &format!("/model {id}"), now),
            [Action::SwitchModel(id.into())]
        );
    }
    settings().bind(|| {
        insta::assert_snapshot!("tui_model_refused_80x24", screen(&mut app, 80, 24, now));
    });
}

#[test]
fn export_asks_before_writing_over_a_file_and_keeps_it_on_no() {
    let now = Instant::now();
    let dir = tempfile::tempdir().expect("a temp dir");
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "my own notes\n").expect("a file");
    let mut app = app();
    app.notice("the transcript so far");

    // The first write only creates: an existing file is left alone and asked about.
    let actions = run(&mut app, "/export notes.md", now);
    let [Action::Export { path, overwrite }] = &actions[..] else {
        panic!("not an export: {actions:?}");
    };
    assert!(!overwrite);
    let answer = export::write(dir.path(), path.clone(), *overwrite, "# exported\n");
    assert_eq!(answer, AppEvent::ExportExists(notes.clone()));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my own notes\n");

    // Shown with a fixed path, so that the snapshot does not depend on the temp dir's.
    app.app_event(AppEvent::ExportExists("/home/dev/project/notes.md".into()));
    settings().bind(|| {
        insta::assert_snapshot!("tui_export_overwrite_80x24", screen(&mut app, 80, 24, now));
    });
    app.overwrite = None;
    app.app_event(answer.clone());
    // Keys other than the answers do nothing while asked; typing goes nowhere.
    assert_eq!(press(&mut app, KeyCode::Char('q'), now), []);
    assert!(app.composer.is_empty());
    assert_eq!(press(&mut app, KeyCode::Char('n'), now), []);
    assert!(app.overwrite.is_none());
    assert!(
        last_notice(&app).contains("notes.md is kept as it was"),
        "{}",
        last_notice(&app)
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my own notes\n");

    // Asked again, y writes over it.
    app.app_event(answer);
    let actions = press(&mut app, KeyCode::Char('y'), now);
    assert_eq!(
        actions,
        [Action::Export {
            path: notes.clone(),
            overwrite: true
        }]
    );
    let written = export::write(dir.path(), notes.clone(), true, "# exported\n");
    assert_eq!(written, AppEvent::Exported(Ok(notes.clone())));
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "# exported\n");

    // A new file is written at once, and a folder is named as one.
    let fresh = export::write(dir.path(), "fresh.md".into(), false, "# new\n");
    assert_eq!(fresh, AppEvent::Exported(Ok(dir.path().join("fresh.md"))));
    let folder = export::write(dir.path(), ".".into(), false, "# new\n");
    assert!(
        matches!(&folder, AppEvent::Exported(Err(why)) if why.contains("is a folder")),
        "{folder:?}"
    );
}
