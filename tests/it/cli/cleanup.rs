//! `tern sessions cleanup`: what is over the maintenance limits is reported, and removed only
//! when enforcing; folders of no session go too.

use super::*;

/// Three sessions, oldest first; returns their ids.
fn three_sessions(cli: &Cli) -> Vec<String> {
    (0..3)
        .map(|i| {
            cli.mock.push(Reply::text(format!("answer {i}")));
            let run = cli.run(&["run", "--output-format", "json", &format!("session {i}")]);
            assert!(run.status.success(), "{}", stderr(&run));
            json_lines(&run)[0]["session_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// How many folders under `data/sessions` belong to session `id` (`<id>-<hash>`).
fn folders_of(cli: &Cli, id: &str) -> usize {
    std::fs::read_dir(cli.home.home().join("data/sessions"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_str().unwrap().starts_with(&format!("{id}-"))
        })
        .count()
}

fn listed(cli: &Cli) -> Vec<String> {
    let list = cli.run(&["sessions", "list", "--json"]);
    let sessions: Value = serde_json::from_str(&stdout(&list)).unwrap();
    sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_oldest_beyond_max_entries_is_reported_then_removed_when_enforcing() {
    let cli = Cli::new();
    let ids = three_sessions(&cli);
    cli.home
        .write_config("[session.maintenance]\nmax_entries = 2\n");
    let ghost = cli.home.home().join("data/sessions/ghost");
    std::fs::create_dir_all(&ghost).unwrap();
    assert_eq!(folders_of(&cli, &ids[0]), 1, "each session has its folder");
    std::fs::write(ghost.join("left.txt"), "x".repeat(5000)).unwrap();

    // The default mode only reports.
    let report = cli.run(&["sessions", "cleanup"]);
    assert!(report.status.success(), "{}", stderr(&report));
    let said = stdout(&report);
    assert!(said.contains("Would remove:"), "{said}");
    assert!(said.contains("(belongs to no session)"), "{said}");
    assert!(said.contains("session 0"), "the oldest: {said}");
    assert!(said.contains("beyond max_entries"), "{said}");
    assert!(said.contains("Nothing was removed"), "{said}");
    assert_eq!(listed(&cli).len(), 3);
    assert!(ghost.exists());

    let enforced = cli.run(&["sessions", "cleanup", "--enforce"]);
    assert!(enforced.status.success(), "{}", stderr(&enforced));
    assert!(
        stdout(&enforced).contains("Freed "),
        "{}",
        stdout(&enforced)
    );
    let left = listed(&cli);
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&ids[0]), "the oldest went");
    assert!(!ghost.exists());
    assert_eq!(folders_of(&cli, &ids[0]), 0, "its folder went with it");
    assert_eq!(folders_of(&cli, &ids[1]), 1);

    let again = cli.run(&["sessions", "cleanup", "--dry-run"]);
    assert!(
        stdout(&again).contains("Nothing to clean up"),
        "{}",
        stdout(&again)
    );
    // The sessions that stayed still open.
    cli.mock.push(Reply::text("still here"));
    let resumed = cli.run(&["run", "--session", &ids[2], "hello"]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
}

#[test]
fn over_the_byte_budget_the_oldest_go_down_to_the_high_water_mark() {
    let cli = Cli::new();
    let ids = three_sessions(&cli);
    // The three sessions take about 15 KB (journals and logs), 5 KB each; a 10 KB budget is
    // exceeded, and removal goes on, oldest first, down to the 7 KB high-water mark.
    cli.home.write_config(
        "[session.maintenance]\nmode = \"enforce\"\nmax_disk_bytes = \"10KB\"\nhigh_water_bytes = \"7KB\"\n",
    );
    let enforced = cli.run(&["sessions", "cleanup"]);
    assert!(enforced.status.success(), "{}", stderr(&enforced));
    let said = stdout(&enforced);
    assert!(said.contains("over the budget"), "{said}");
    assert!(said.contains("oldest while over max_disk_bytes"), "{said}");
    assert_eq!(listed(&cli), [ids[2].clone()], "only the newest is left");
}

#[test]
fn a_cleanup_beside_a_running_interface_goes_through_it_and_spares_its_session() {
    let cli = Cli::new();
    let ids = three_sessions(&cli);
    cli.home
        .write_config("[session.maintenance]\nmax_entries = 1\n");
    // The oldest is open in an interface, which owns the store; a newer one comes after it,
    // so only the open one keeps it from being beyond max_entries.
    let open = super::tmux::Tmux::start(&cli, &["-r", &ids[0]]);
    open.wait_for("answer 0");
    cli.mock.push(Reply::text("the newest"));
    let newest = cli.run(&["run", "--output-format", "json", "the newest"]);
    assert!(newest.status.success(), "{}", stderr(&newest));
    let newest = json_lines(&newest)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = cli.run(&["sessions", "cleanup", "--enforce"]);
    assert!(report.status.success(), "{}", stderr(&report));
    let said = stdout(&report);
    assert!(said.contains("Removing:"), "{said}");
    let mut kept = listed(&cli);
    kept.sort();
    let mut expected = vec![ids[0].clone(), newest];
    expected.sort();
    assert_eq!(kept, expected, "the open one stays: {said}");
    assert_eq!(folders_of(&cli, &ids[1]), 0, "its folder went with it");
    open.wait_for("answer 0");
}
