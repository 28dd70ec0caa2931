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
    assert!(
        said.contains("Recovered 0 sessions: 0 journal records found"),
        "{said}"
    );
    assert!(said.contains("could not open it"), "{said}");
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

/// The one file the repair moved the database to (its write-ahead log goes beside it).
fn moved_file(cli: &Cli) -> std::path::PathBuf {
    let dir = cli.db().parent().unwrap().to_path_buf();
    let moved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("tern.redb.damaged-"))
        .filter(|p| p.extension().is_none_or(|ext| ext != "wal"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    moved[0].clone()
}

/// Damage in the middle of the file, the kind `tern doctor` must notice without being asked
/// to repair.
fn damage_the_middle(cli: &Cli) -> Vec<u8> {
    let mut bytes = std::fs::read(cli.db()).unwrap();
    let (from, to) = (bytes.len() * 3 / 10, bytes.len() * 7 / 10);
    for at in (from..to).step_by(97) {
        bytes[at] ^= 0x5a;
    }
    std::fs::write(cli.db(), &bytes).unwrap();
    bytes
}

fn one_session(cli: &Cli) {
    cli.mock.push(Reply::text("hi"));
    assert!(cli.run(&["run", "hello"]).status.success());
}

#[test]
fn doctor_checks_the_database_and_names_damage_without_changing_it() {
    let cli = Cli::new();
    one_session(&cli);
    let healthy = cli.run(&["doctor"]);
    assert!(
        stdout(&healthy).contains("Database\n  healthy"),
        "{}",
        stdout(&healthy)
    );
    let deep = cli.run(&["doctor", "--deep"]);
    assert!(
        stdout(&deep).contains("healthy (every page's checksum, every record and index entry decoded and counted: 1 sessions"),
        "{}",
        stdout(&deep)
    );

    let bytes = damage_the_middle(&cli);
    let output = cli.run(&["doctor"]);
    let said = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("Database\n  DAMAGED"), "{said}");
    assert!(said.contains("tern doctor --repair"), "{said}");
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    assert_eq!(
        std::fs::read(cli.db()).unwrap(),
        bytes,
        "a check changes nothing"
    );
}

#[test]
fn repair_works_with_a_broken_config_file() {
    let cli = Cli::new();
    one_session(&cli);
    damage_the_middle(&cli);
    cli.home.write_config("[session\nthis is not toml");
    let doctor = cli.run(&["doctor"]);
    let said = stdout(&doctor);
    assert!(said.contains("Database\n  DAMAGED"), "{said}");
    assert!(said.contains("Configuration\n  "), "{said}");
    assert!(
        said.contains("config.toml"),
        "the config's error is shown: {said}"
    );

    let output = cli.run(&["doctor", "--repair"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("was damaged. It was moved to"));
}

#[test]
fn a_lost_database_beside_session_folders_is_refused_then_rebuilt() {
    let cli = Cli::new();
    one_session(&cli);
    std::fs::write(cli.db(), b"").unwrap();
    let refused = cli.run(&["sessions", "list"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("empty, but 1 session folders exist"),
        "{}",
        stderr(&refused)
    );
    let doctor = cli.run(&["doctor"]);
    assert!(stdout(&doctor).contains("LOST"), "{}", stdout(&doctor));

    let output = cli.run(&["doctor", "--repair"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("only its folder was left"),
        "{}",
        stdout(&output)
    );
    let list = cli.run(&["sessions", "list", "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(
        stdout(&list).contains("transcript lost"),
        "{}",
        stdout(&list)
    );
}
