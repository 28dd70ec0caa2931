//! The search table kept in step with the session index (creation, first input, title
//! changes, archiving, removal, a database from before it, a repair), the pages of
//! `recent_page`, and `tail`.

use super::schema::SEARCH;
use super::*;
use crate::domain::{Audience, InputKind, Sender, SessionId, SessionKey};
use redb::{Database, ReadableDatabase};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tern.redb");
    (dir, path)
}

fn person(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender::local_user(),
        audience: Audience::Personal,
        kind: InputKind::Person,
        text: text.into(),
    }
}

fn create(store: &Store, id: &str, project: &str, at_ms: i64) -> SessionId {
    let id = SessionId::from_string(id);
    let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), project.into(), at_ms);
    store.create_session(&meta).expect("create");
    id
}

/// One scanned entry, owned: (id, title, first input, project dir, archived).
type Row = (String, String, String, String, bool);

/// What a scan hands over.
#[derive(Debug, Default)]
struct Collected {
    begun: usize,
    entries: Vec<Row>,
    activity: Vec<(i64, String)>,
}

impl SearchSink for Collected {
    fn begin(&mut self, _sessions: u64) {
        self.begun += 1;
        self.entries.clear();
        self.activity.clear();
    }

    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()> {
        self.entries.push((
            entry.id.to_owned(),
            entry.title.to_owned(),
            entry.first_input.to_owned(),
            entry.project_dir.to_owned(),
            entry.archived,
        ));
        ControlFlow::Continue(())
    }

    fn activity(&mut self, at_ms: i64, id: &str) -> ControlFlow<()> {
        self.activity.push((at_ms, id.to_owned()));
        ControlFlow::Continue(())
    }
}

fn scan(store: &Store) -> Collected {
    let mut collected = Collected::default();
    assert!(
        store.scan_search(&mut collected).expect("scan"),
        "ran to the end"
    );
    assert_eq!(collected.begun, 1);
    collected
}

/// Checks that the search table holds exactly the record of every index entry.
fn check_in_step(store: &Store) -> Vec<Row> {
    let mut expected: Vec<Row> = store
        .list()
        .expect("list")
        .iter()
        .map(|meta| {
            let record = super::search::encode(meta);
            let entry = super::search::decode(meta.id.as_str(), &record).expect("decodes");
            (
                entry.id.to_owned(),
                entry.title.to_owned(),
                entry.first_input.to_owned(),
                entry.project_dir.to_owned(),
                entry.archived,
            )
        })
        .collect();
    expected.sort();
    let scanned = scan(store).entries;
    assert_eq!(scanned, expected);
    scanned
}

fn row(id: &str, title: &str, first_input: &str, project: &str, archived: bool) -> Row {
    (
        id.into(),
        title.into(),
        first_input.into(),
        project.into(),
        archived,
    )
}

#[test]
fn the_search_table_follows_creation_inputs_titles_archiving_and_removal() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).expect("open");
    let a = create(&store, "a", "/p/a", 1);
    let b = create(&store, "b", "/p/b", 2);
    assert_eq!(
        check_in_step(&store),
        [
            row("a", "", "", "/p/a", false),
            row("b", "", "", "/p/b", false)
        ]
    );

    store
        .append(&a, &person("  fix the flaky test\nin the scheduler"))
        .expect("append");
    store.append(&a, &person("and the docs")).expect("append");
    assert_eq!(
        check_in_step(&store)[0],
        row(
            "a",
            "",
            "fix the flaky test\nin the scheduler",
            "/p/a",
            false
        ),
        "a title taken from the first input is not stored again"
    );

    let title = JournalEvent::TitleChanged {
        title: "Scheduler race".into(),
    };
    store.append(&a, &title).expect("title");
    store.archive_session(&a, 50).expect("archive");
    assert_eq!(
        check_in_step(&store)[0],
        row(
            "a",
            "Scheduler race",
            "fix the flaky test\nin the scheduler",
            "/p/a",
            true
        )
    );

    store.delete_session(&b).expect("delete");
    assert_eq!(check_in_step(&store).len(), 1);
    drop(store);
    let store = Store::open(&path).expect("reopen");
    check_in_step(&store);
}

#[test]
fn a_scan_lists_activity_newest_first_and_can_be_stopped() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).expect("open");
    for (name, at) in [("x", 30), ("y", 10), ("z", 20)] {
        create(&store, name, "/p", at);
    }
    let collected = scan(&store);
    assert_eq!(
        collected.activity,
        [
            (30, "x".to_owned()),
            (20, "z".to_owned()),
            (10, "y".to_owned())
        ]
    );

    struct FirstOnly(usize);
    impl SearchSink for FirstOnly {
        fn begin(&mut self, sessions: u64) {
            assert_eq!(sessions, 3);
        }
        fn entry(&mut self, _: SearchEntry<'_>) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Break(())
        }
        fn activity(&mut self, _: i64, _: &str) -> ControlFlow<()> {
            panic!("the scan was stopped");
        }
    }
    let mut first = FirstOnly(0);
    assert!(!store.scan_search(&mut first).expect("scan"));
    assert_eq!(first.0, 1);
}

/// Writes into the database at `path` outside the store.
fn write_raw(path: &Path, fill: impl FnOnce(&redb::WriteTransaction)) {
    let db = Database::create(path).expect("raw open");
    let txn = db.begin_write().expect("begin");
    fill(&txn);
    txn.commit().expect("commit");
}

fn search_len(path: &Path) -> u64 {
    use redb::ReadableTableMetadata;
    let db = Database::create(path).expect("raw open");
    let txn = db.begin_read().expect("read");
    txn.open_table(SEARCH)
        .expect("search table")
        .len()
        .expect("len")
}

#[test]
fn the_search_table_is_built_for_a_database_from_before_it() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).expect("open");
        let id = create(&store, "old", "/p", 1);
        store.append(&id, &person("kept question")).expect("append");
        create(&store, "older", "/q", 0);
    }
    write_raw(&path, |txn| {
        txn.delete_table(SEARCH).expect("drop the search table");
    });
    let store = Store::open(&path).expect("reopen");
    assert_eq!(
        check_in_step(&store),
        [
            row("old", "", "kept question", "/p", false),
            row("older", "", "", "/q", false)
        ]
    );
}

#[test]
fn a_repair_rebuilds_the_search_table_from_the_sessions() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).expect("open");
        let id = create(&store, "s", "/p", 1);
        store
            .append(&id, &person("what was asked"))
            .expect("append");
    }
    // A stale record and one for a session that does not exist: neither may survive.
    write_raw(&path, |txn| {
        let mut search = txn.open_table(SEARCH).expect("search");
        let stale = SessionMeta {
            first_input: "something else".into(),
            ..SessionMeta::new(
                SessionId::from_string("s"),
                SessionKey::from_string("cli:s"),
                "/elsewhere".into(),
                1,
            )
        };
        let record = super::search::encode(&stale);
        search.insert("s", record.as_slice()).expect("insert");
        search.insert("ghost", record.as_slice()).expect("insert");
    });
    assert_eq!(search_len(&path), 2);
    // The header ruined, so nothing of the tables is used: the session comes back from its
    // pages, and its search record is made anew.
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[..4096].fill(0xA5);
    std::fs::write(&path, bytes).expect("write");
    let options = super::RepairOptions::new(super::Worker::Thread);
    let repaired = super::repair(&path, &options).expect("repair");
    assert!(matches!(repaired, super::Repair::Rebuilt(_)));
    let store = Store::open(&path).expect("open repaired");
    assert_eq!(
        check_in_step(&store),
        [row("s", "", "what was asked", "/p", false)]
    );
}

#[test]
fn pages_follow_activity_filter_by_project_and_archive_and_go_on_from_their_cursor() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).expect("open");
    // Newest last: t9 is the most recent.
    for i in 0..10 {
        let project = if i % 2 == 0 { "/even" } else { "/odd" };
        create(&store, &format!("t{i}"), project, i);
    }
    store
        .archive_session(&SessionId::from_string("t8"), 100)
        .expect("archive");
    let ids = |page: &RecentPage| -> Vec<String> {
        page.sessions.iter().map(|m| m.id.to_string()).collect()
    };

    let all = ListFilter::default();
    let first = store.recent_page(&all, None, 3, 100).expect("page");
    assert_eq!(ids(&first), ["t9", "t7", "t6"], "archived t8 left out");
    let second = store
        .recent_page(&all, first.next.as_ref(), 3, 100)
        .expect("page");
    assert_eq!(ids(&second), ["t5", "t4", "t3"]);
    let rest = store
        .recent_page(&all, second.next.as_ref(), 10, 100)
        .expect("page");
    assert_eq!(ids(&rest), ["t2", "t1", "t0"]);
    assert_eq!(rest.next, None, "nothing older");

    let even = ListFilter {
        project_dir: Some("/even".into()),
        archived: true,
    };
    let page = store.recent_page(&even, None, 10, 100).expect("page");
    assert_eq!(ids(&page), ["t8", "t6", "t4", "t2", "t0"]);

    // A bounded look: two entries (t9, t8) looked at, none of them passed, more to come.
    let even = ListFilter {
        project_dir: Some("/even".into()),
        archived: false,
    };
    let bounded = store.recent_page(&even, None, 10, 2).expect("page");
    assert!(bounded.sessions.is_empty());
    let on = store
        .recent_page(&even, bounded.next.as_ref(), 10, 100)
        .expect("page");
    assert_eq!(ids(&on), ["t6", "t4", "t2", "t0"]);

    let nowhere = ListFilter {
        project_dir: Some("/nowhere".into()),
        archived: true,
    };
    let page = store.recent_page(&nowhere, None, 10, 100).expect("page");
    assert!(page.sessions.is_empty() && page.next.is_none());
}

#[test]
fn tail_reads_the_last_records_in_order() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).expect("open");
    let id = create(&store, "s", "/p", 1);
    for i in 0..5 {
        store
            .append(&id, &person(&format!("m{i}")))
            .expect("append");
    }
    let seqs = |n| -> Vec<u64> {
        store
            .tail(&id, n)
            .expect("tail")
            .iter()
            .map(|r| r.seq)
            .collect()
    };
    assert_eq!(seqs(2), [4, 5]);
    assert_eq!(seqs(10), [1, 2, 3, 4, 5]);
    assert!(seqs(0).is_empty());
    let other = create(&store, "empty", "/p", 2);
    assert!(store.tail(&other, 3).expect("tail").is_empty());
    let err = store
        .tail(&SessionId::from_string("nope"), 3)
        .expect_err("unknown");
    assert!(matches!(err, StoreError::UnknownSession { .. }), "{err:?}");
}
