//! Store behaviour that needs redb itself to set up: databases written by something other than
//! this build of tern, and records that no longer decode.

use super::schema::{FORMAT_KEY, FORMAT_VERSION, INFO, JOURNAL};
use super::*;
use crate::domain::{Audience, Sender, SessionId, SessionKey};
use redb::{Database, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tern.redb");
    (dir, path)
}

/// Writes a redb database at `path` with whatever `fill` puts in it, outside the store.
fn write_raw(path: &Path, fill: impl FnOnce(&redb::WriteTransaction)) {
    let db = Database::create(path).expect("raw create");
    let txn = db.begin_write().expect("begin");
    fill(&txn);
    txn.commit().expect("commit");
}

fn check_refused_untouched(path: &Path, expect: impl FnOnce(&StoreError) -> bool) {
    let before = std::fs::read(path).expect("read before");
    let err = Store::open(path).expect_err("must be refused");
    assert!(expect(&err), "unexpected error: {err:?}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert!(
        std::fs::read(path).expect("read after") == before,
        "file changed"
    );
}

#[test]
fn another_programs_redb_database_is_refused_untouched() {
    let (_dir, path) = temp_db();
    let other: TableDefinition<&str, u64> = TableDefinition::new("inventory");
    write_raw(&path, |txn| {
        let mut table = txn.open_table(other).expect("table");
        table.insert("apples", 3).expect("insert");
    });
    check_refused_untouched(
        &path,
        |err| matches!(err, StoreError::Corrupt { detail, .. } if detail.contains("inventory")),
    );
}

#[test]
fn a_newer_storage_format_is_refused_untouched() {
    let (_dir, path) = temp_db();
    drop(Store::open(&path).expect("create"));
    write_raw(&path, |txn| {
        let mut info = txn.open_table(INFO).expect("info");
        info.insert(FORMAT_KEY, FORMAT_VERSION + 1).expect("insert");
    });
    check_refused_untouched(
        &path,
        |err| matches!(err, StoreError::UnsupportedFormat { found, .. } if *found == FORMAT_VERSION + 1),
    );
}

#[test]
fn a_record_that_no_longer_decodes_is_skipped() {
    let (_dir, path) = temp_db();
    let id = SessionId::from_string("s-skip");
    let event = JournalEvent::InputAccepted {
        sender: Sender {
            id: "local".into(),
            name: "dev".into(),
            automated: false,
            trusted: true,
        },
        audience: Audience::Personal,
        kind: crate::domain::InputKind::Person,
        text: "kept".into(),
    };
    {
        let store = Store::open(&path).expect("open");
        store
            .create_session(&SessionMeta::new(
                id.clone(),
                SessionKey::cli(&id),
                PathBuf::from("/p"),
                1,
            ))
            .expect("create");
        store.append(&id, &event).expect("append");
    }
    // Seq 2 as a future tern might write it: an event type this build does not know.
    write_raw(&path, |txn| {
        let mut journal = txn.open_table(JOURNAL).expect("journal");
        let future = br#"{"seq":2,"at_ms":5,"event":{"type":"hologram","depth":3}}"#;
        journal
            .insert(("s-skip", 2), future.as_slice())
            .expect("insert");
    });
    let store = Store::open(&path).expect("reopen");
    store.append(&id, &event).expect("append after");
    let seqs: Vec<u64> = store
        .load(&id)
        .expect("load")
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(
        seqs,
        [1, 3],
        "the unreadable record is skipped, seq still advances"
    );
}

#[test]
fn a_store_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Store>();
}

fn person(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender::local_user(),
        audience: Audience::Personal,
        kind: crate::domain::InputKind::Person,
        text: text.into(),
    }
}

/// What the index entries add up to, read the slow way.
fn summed(store: &Store) -> Totals {
    let metas = store.list().expect("list");
    Totals {
        sessions: metas.len() as u64,
        transcript_bytes: metas.iter().map(|m| m.transcript_bytes).sum(),
    }
}

#[test]
fn totals_follow_every_change_and_survive_a_reopen() {
    let (_dir, path) = temp_db();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    {
        let store = Store::open(&path).expect("open");
        let log = seen.clone();
        store.observe(std::sync::Arc::new(move |change, totals| {
            let what = match change {
                StoreChange::Created(meta) => format!("created {}", meta.id),
                StoreChange::Appended { id, events } => format!("appended {} {id}", events.len()),
                StoreChange::Archived(id) => format!("archived {id}"),
                StoreChange::Deleted(id) => format!("deleted {id}"),
            };
            log.lock().unwrap().push((what, totals));
        }));
        for name in ["a", "b"] {
            let id = SessionId::from_string(name);
            let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
            store.create_session(&meta).expect("create");
            store
                .append_batch(&id, &[person("one"), person("two")])
                .expect("append");
        }
        assert_eq!(store.totals(), summed(&store));
        store
            .archive_session(&SessionId::from_string("a"), 5)
            .expect("archive");
        store
            .delete_session(&SessionId::from_string("b"))
            .expect("delete");
        assert_eq!(store.totals(), summed(&store));
        assert_eq!(store.totals().sessions, 1);
    }
    let seen = seen.lock().unwrap();
    let what: Vec<&str> = seen.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(
        what,
        [
            "created a",
            "appended 2 a",
            "created b",
            "appended 2 b",
            "archived a",
            "deleted b"
        ]
    );
    // Each change is told with the totals after it.
    assert_eq!(seen[1].1.sessions, 1);
    assert!(seen[1].1.transcript_bytes > 0);
    assert_eq!(
        seen[5].1,
        Totals {
            sessions: 1,
            transcript_bytes: seen[1].1.transcript_bytes,
        },
        "b went, a stays"
    );
    let store = Store::open(&path).expect("reopen");
    assert_eq!(store.totals(), summed(&store), "read back from the file");
}

#[test]
fn totals_are_built_for_a_database_from_before_them() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).expect("open");
        let id = SessionId::from_string("old");
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
        store.create_session(&meta).expect("create");
        store.append(&id, &person("kept")).expect("append");
    }
    write_raw(&path, |txn| {
        txn.delete_table(super::schema::TOTALS)
            .expect("drop the totals");
    });
    let store = Store::open(&path).expect("reopen");
    assert_eq!(store.totals(), summed(&store));
    assert_eq!(store.totals().sessions, 1);
}

#[test]
fn a_database_of_format_1_is_framed_as_it_opens() {
    let (_dir, path) = temp_db();
    let id = SessionId::from_string("old");
    let framed_bytes = {
        let store = Store::open(&path).expect("open");
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
        store.create_session(&meta).expect("create");
        store
            .append_batch(&id, &[person("one"), person("two"), person("three")])
            .expect("append");
        store.totals().transcript_bytes
    };
    // The same data as format 1 wrote it: plain JSON values.
    write_raw(&path, |txn| {
        let mut journal = txn.open_table(JOURNAL).expect("journal");
        for seq in 1..=3 {
            let plain = {
                let value = journal.get(("old", seq)).expect("get").expect("record");
                super::frame::read_exact(value.value())
                    .expect("framed")
                    .payload
                    .to_vec()
            };
            journal.insert(("old", seq), plain.as_slice()).expect("put");
        }
        let mut sessions = txn.open_table(super::schema::SESSIONS).expect("sessions");
        let plain = {
            let value = sessions.get("old").expect("get").expect("entry");
            let mut meta: SessionMeta = serde_json::from_slice(
                super::frame::read_exact(value.value())
                    .expect("framed")
                    .payload,
            )
            .expect("meta");
            meta.transcript_bytes = 1;
            serde_json::to_vec(&meta).expect("json")
        };
        sessions.insert("old", plain.as_slice()).expect("put");
        txn.open_table(INFO)
            .expect("info")
            .insert(FORMAT_KEY, 1)
            .expect("format 1");
        txn.delete_table(super::schema::DELETED)
            .expect("no tombstones yet");
    });
    let store = Store::open(&path).expect("migrating open");
    let texts: Vec<String> = store
        .load(&id)
        .expect("load")
        .into_iter()
        .map(|r| match r.event {
            JournalEvent::InputAccepted { text, .. } => text,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(store.totals(), summed(&store));
    assert_eq!(
        store.totals().transcript_bytes,
        framed_bytes,
        "the frames counted"
    );
    drop(store);
    let db = Database::open(&path).expect("raw open");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read");
    let info = txn.open_table(INFO).expect("info");
    assert_eq!(
        info.get(FORMAT_KEY).expect("get").map(|v| v.value()),
        Some(FORMAT_VERSION)
    );
    let journal = txn.open_table(JOURNAL).expect("journal");
    for entry in journal.iter().expect("iter") {
        let (_, value) = entry.expect("entry");
        assert!(super::frame::is_framed(value.value()));
    }
}

#[test]
fn a_copy_made_while_open_holds_every_commit_and_checks_healthy() {
    let (dir, path) = temp_db();
    let store = Store::open(&path).expect("open");
    let id = SessionId::from_string("copied");
    let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
    store.create_session(&meta).expect("create");
    store
        .append_batch(&id, &[person("durable")])
        .expect("append");
    // Not yet durable when the copy is asked for: the copy's own commit makes it so.
    store
        .append_lazily(&id, &[person("lazy")])
        .expect("lazy append");
    let fsyncs = store.durable_commits();
    let copy = dir.path().join("copy.redb");
    let bytes = store.copy_to(&copy).expect("copy");
    assert_eq!(bytes, std::fs::metadata(&copy).unwrap().len());
    assert_eq!(store.durable_commits(), fsyncs + 1);
    assert!(!store.flush_pending());

    // The copy is whole while the original stays open and writing.
    store
        .append_batch(&id, &[person("after")])
        .expect("append after");
    let health = check(&copy, true, &Worker::Thread, Limits::for_file(bytes));
    assert_eq!(health.state, HealthState::Healthy, "{health:?}");
    assert_eq!(health.records, 2, "{health:?}");
    // (A second copy: the check's thread may still hold the first open for a moment.)
    let second = dir.path().join("second.redb");
    store.copy_to(&second).expect("copy again");
    let reopened = Store::open(&second).expect("open the copy");
    let texts: Vec<String> = reopened
        .load(&id)
        .expect("load")
        .into_iter()
        .filter_map(|r| match r.event {
            JournalEvent::InputAccepted { text, .. } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["durable", "lazy", "after"]);

    // A copy that cannot be written is an error naming it, and the store goes on.
    let nowhere = dir.path().join("missing").join("copy.redb");
    let err = store.copy_to(&nowhere).expect_err("no folder");
    assert!(err.to_string().contains("missing"), "{err}");
    store.append_batch(&id, &[person("still")]).expect("append");
}

#[test]
fn a_snapshot_kept_for_later_goes_with_the_next_commit_or_the_close() {
    let (_dir, path) = temp_db();
    let id = SessionId::from_string("snap");
    {
        let store = Store::open(&path).expect("open");
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
        store.create_session(&meta).expect("create");
        store.append_batch(&id, &[person("one")]).expect("append");
        let commits = store.durable_commits();
        store.save_snapshot_soon(&id, 1, b"at one".to_vec());
        // Read back at once, with no commit of its own; an older one does not replace it.
        store.save_snapshot_soon(&id, 0, b"older".to_vec());
        let kept = store.latest_snapshot(&id).expect("read").expect("kept");
        assert_eq!((kept.seq, kept.state.as_slice()), (1, &b"at one"[..]));
        assert_eq!(store.durable_commits(), commits);
        // The next append writes it in its own transaction.
        store.append_batch(&id, &[person("two")]).expect("append");
        assert!(store.appends.snapshots.is_empty());
        store
            .save_snapshot(&id, 0, b"stale")
            .expect("an older one is ignored");
        let written = store.latest_snapshot(&id).expect("read").expect("written");
        assert_eq!(written.state, b"at one");
        // One still waiting when the store closes is written by the close.
        store.save_snapshot_soon(&id, 2, b"at two".to_vec());
    }
    let store = Store::open(&path).expect("reopen");
    let closed = store
        .latest_snapshot(&id)
        .expect("read")
        .expect("written at close");
    assert_eq!((closed.seq, closed.state.as_slice()), (2, &b"at two"[..]));
    // A deleted session's waiting snapshot goes with it.
    store.save_snapshot_soon(&id, 3, b"at three".to_vec());
    store.delete_session(&id).expect("delete");
    assert!(store.latest_snapshot(&id).expect("read").is_none());
}
