//! The session folder on disk: named by id and key hash, recorded in the index, found again
//! when the whole data dir was moved, and kept apart from the commands' temp dir.

use super::*;

/// The folders under `<home>/data/sessions`.
fn session_folders(home: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.join("data/sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_moved_data_dir_keeps_its_session_folders_with_one_warning() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("first answer"));
    let first = cli.run(&["run", "--output-format", "json", "first"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let id = json_lines(&first)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let folders = session_folders(cli.home.home());
    assert_eq!(folders.len(), 1, "{folders:?}");
    let folder = &folders[0];
    assert!(
        folder.starts_with(&format!("{id}-")) && folder.len() == id.len() + 9,
        "<id>-<8 hex digits>: {folder}"
    );

    // The whole data dir moves to another TERN_HOME.
    let moved = cli.home.root().join("moved");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::rename(cli.home.home().join("data"), moved.join("data")).unwrap();
    for text in ["second", "third"] {
        cli.mock.push(Reply::text("ok"));
        let run = cli
            .tern(&["run", "--session", &id, text])
            .env("TERN_HOME", &moved)
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", stderr(&run));
    }
    assert_eq!(session_folders(&moved), folders, "no second folder");
    let log = std::fs::read_to_string(
        moved
            .join("data/sessions")
            .join(folder)
            .join("logs/session.log"),
    )
    .unwrap();
    assert_eq!(
        log.matches("accepted").count(),
        3,
        "one log across the move: {log}"
    );

    let tern_log = std::fs::read_to_string(moved.join("logs/tern.log")).unwrap();
    let warnings: Vec<&str> = tern_log
        .lines()
        .filter(|l| l.contains("recorded under another data dir"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "once, then the new place is recorded: {tern_log}"
    );
    let old = cli.home.home().join("data/sessions").join(folder);
    let new = moved.join("data/sessions").join(folder);
    assert!(
        warnings[0].contains(old.to_str().unwrap()) && warnings[0].contains(new.to_str().unwrap()),
        "both paths named: {}",
        warnings[0]
    );
}
