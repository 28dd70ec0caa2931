//! The write-ahead log as a crash leaves it: the database file and its log are copied while
//! the store is open (what a killed process leaves on disk), and the copy is opened. Every
//! append that returned is there once, in order, with its index entry; nothing deleted
//! comes back; a clean close leaves nothing to recover.

use super::reopen_tests::{input, meta};
use super::*;
use crate::domain::SessionId;
use std::path::{Path, PathBuf};

/// A store in a folder of its own, holding session `s-1`.
struct Running {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Store,
}

impl Running {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tern.redb");
        let store = Store::open(&path).expect("open");
        store.create_session(&meta("s-1")).expect("create");
        Self {
            _dir: dir,
            path,
            store,
        }
    }

    fn append(&self, session: &str, text: &str) {
        let id = SessionId::from_string(session);
        self.store.append(&id, &input(text)).expect("append");
    }

    /// Opens what the disk holds now, as the next process would after a crash.
    fn crash(self) -> Crashed {
        let crashed = Crashed::copy_of(&self.path);
        drop(self.store);
        crashed
    }
}

/// The database and its log copied as they were on disk, opened.
struct Crashed {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Store,
}

impl Crashed {
    fn copy_of(from: &Path) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tern.redb");
        std::fs::copy(from, &path).expect("copy the database");
        let mut log = from.as_os_str().to_owned();
        log.push(".wal");
        std::fs::copy(&log, dir.path().join("tern.redb.wal")).expect("copy the log");
        let store = Store::open(&path).expect("open after the crash");
        Self {
            _dir: dir,
            path,
            store,
        }
    }

    fn texts(&self, session: &str) -> Vec<(u64, String)> {
        let records = self
            .store
            .load(&SessionId::from_string(session))
            .expect("load");
        records
            .iter()
            .filter_map(|record| match &record.event {
                JournalEvent::InputAccepted { text, .. } => Some((record.seq, text.clone())),
                _ => None,
            })
            .collect()
    }
}

fn pairs(list: &[(u64, &str)]) -> Vec<(u64, String)> {
    list.iter()
        .map(|(seq, text)| (*seq, (*text).to_owned()))
        .collect()
}

#[test]
fn acknowledged_appends_outlive_a_crash_before_any_durable_commit() {
    let running = Running::new();
    let commits = running.store.durable_commits();
    running.append("s-1", "one");
    let s1 = SessionId::from_string("s-1");
    running
        .store
        .append_lazily(&s1, &[input("two")])
        .expect("lazy");
    running.append("s-1", "three");
    assert_eq!(
        running.store.durable_commits() - commits,
        2,
        "one sync of the log per append waited for, no commit of the database"
    );
    let crashed = running.crash();
    assert_eq!(
        crashed.texts("s-1"),
        pairs(&[(1, "one"), (2, "two"), (3, "three")])
    );
    let entry = crashed.store.meta(&s1).expect("meta").expect("listed");
    assert_eq!(entry.input_count, 3, "the index entry came back with them");
    assert_eq!(crashed.store.totals().sessions, 1);
    let next = crashed.store.append(&s1, &input("four")).expect("append");
    assert_eq!(next.seq, 4);
    // Recovered once: a second crash after the recovery does not write it again.
    let again = Crashed::copy_of(&crashed.path);
    assert_eq!(
        again.texts("s-1"),
        pairs(&[(1, "one"), (2, "two"), (3, "three"), (4, "four")])
    );
}

#[test]
fn what_a_durable_commit_holds_is_not_recovered_again_and_what_follows_it_is() {
    let running = Running::new();
    running.append("s-1", "one");
    // Archiving is a durable commit of the database: the log starts again after it.
    let s1 = SessionId::from_string("s-1");
    running.store.archive_session(&s1, 5).expect("archive");
    running.append("s-1", "two");
    let crashed = running.crash();
    assert_eq!(crashed.texts("s-1"), pairs(&[(1, "one"), (2, "two")]));
    let entry = crashed.store.meta(&s1).expect("meta").expect("listed");
    assert!(entry.archived_at_ms.is_some());
}

#[test]
fn a_session_deleted_before_the_crash_stays_deleted() {
    let running = Running::new();
    running.store.create_session(&meta("s-2")).expect("create");
    running.append("s-2", "gone");
    let s2 = SessionId::from_string("s-2");
    running.store.delete_session(&s2).expect("delete");
    running.append("s-1", "kept");
    let crashed = running.crash();
    assert!(crashed.store.meta(&s2).expect("meta").is_none());
    assert_eq!(crashed.texts("s-1"), pairs(&[(1, "kept")]));
    assert_eq!(crashed.store.totals().sessions, 1);
}

#[test]
fn a_full_log_hands_the_append_to_a_durable_commit_and_starts_again() {
    let running = Running::new();
    let big = "x".repeat((wal::MAX_BYTES / 3) as usize);
    for n in 1..=4 {
        running.append("s-1", &format!("{n}{big}"));
    }
    running.append("s-1", "last");
    let crashed = running.crash();
    let texts = crashed.texts("s-1");
    let seqs: Vec<u64> = texts.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(texts[4].1, "last");
}

#[test]
fn a_clean_close_leaves_nothing_to_recover() {
    let running = Running::new();
    running.append("s-1", "one");
    let path = running.path.clone();
    drop(running.store);
    let reopened = Store::open(&path).expect("open");
    reopened
        .append(&SessionId::from_string("s-1"), &input("two"))
        .expect("append");
    let crashed = Crashed::copy_of(&path);
    drop(reopened);
    assert_eq!(crashed.texts("s-1"), pairs(&[(1, "one"), (2, "two")]));
}

#[test]
fn a_new_database_takes_nothing_from_an_old_log_beside_it() {
    // Nothing durable yet: the sessions' creations are in the log, under the first epoch.
    let running = Running::new();
    running.store.create_session(&meta("s-2")).expect("create");
    let log = running.path.with_extension("redb.wal");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    let db = elsewhere.path().join("tern.redb");
    std::fs::copy(&log, db.with_extension("redb.wal")).expect("copy the log");
    let fresh = Store::open(&db).expect("open a new database");
    let s1 = SessionId::from_string("s-1");
    assert!(fresh.meta(&s1).expect("meta").is_none());
    assert_eq!(fresh.totals().sessions, 0);
    // Nor after a crash of the new one, whose log began over the old entries.
    fresh.create_session(&meta("s-9")).expect("create");
    let after = Crashed::copy_of(&db);
    let s2 = SessionId::from_string("s-2");
    assert!(after.store.meta(&s2).expect("meta").is_none());
    assert_eq!(after.store.totals().sessions, 1);
    // The same log beside the database it belongs to gives the session back.
    let recovered = running.crash();
    assert!(recovered.store.meta(&s1).expect("meta").is_some());
}
