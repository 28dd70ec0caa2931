//! `tern doctor --repair`: a damaged database is moved aside, never deleted, and tern works
//! again; a healthy one is left alone.

use super::*;

#[test]
fn a_healthy_database_is_left_alone() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("hi"));
    assert!(cli.run(&["run", "hello"]).status.success());
    let before = std::fs::read(cli.db()).unwrap();
    let output = cli.run(&["doctor", "--repair"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("is healthy; nothing was changed"));
    assert_eq!(std::fs::read(cli.db()).unwrap(), before);
}

#[test]
fn an_unreadable_file_is_moved_aside_whole_and_tern_starts_afresh() {
    let cli = Cli::new();
    std::fs::create_dir_all(cli.db().parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(cli.db(), &garbage).unwrap();
    let output = cli.run(&["doctor", "--repair"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains("was damaged. It was moved to "), "{said}");
    assert!(said.contains("Nothing could be read from it"), "{said}");
    let moved = moved_file(&cli);
    assert_eq!(
        std::fs::read(&moved).unwrap(),
        garbage,
        "kept byte for byte"
    );
    let list = cli.run(&["sessions", "list", "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
}

#[test]
fn a_damaged_database_keeps_what_can_be_read_and_the_original_is_kept() {
    let cli = Cli::new();
    for i in 0..3 {
        cli.mock.push(Reply::text(format!("answer {i}")));
        assert!(cli.run(&["run", &format!("question {i}")]).status.success());
    }
    let mut bytes = std::fs::read(cli.db()).unwrap();
    let (from, to) = (bytes.len() * 3 / 10, bytes.len() * 7 / 10);
    for at in (from..to).step_by(97) {
        bytes[at] ^= 0x5a;
    }
    std::fs::write(cli.db(), &bytes).unwrap();
    let refused = cli.run(&["sessions", "list"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    assert!(stderr(&refused).contains("doctor --repair") || stderr(&refused).contains("damaged"));

    let output = cli.run(&["doctor", "--repair"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read(moved_file(&cli)).unwrap(),
        bytes,
        "kept byte for byte"
    );
    // tern works again, with whatever could be saved.
    let list = cli.run(&["sessions", "list", "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    cli.mock.push(Reply::text("fresh start"));
    assert!(cli.run(&["run", "hello again"]).status.success());
}

/// The one file the repair moved the database to.
fn moved_file(cli: &Cli) -> std::path::PathBuf {
    let dir = cli.db().parent().unwrap().to_path_buf();
    let moved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("tern.redb.damaged-"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    moved[0].clone()
}
