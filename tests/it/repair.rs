//! The store's repair through its public interface, at the edges the corruption harness only
//! meets by chance: a storage engine that hangs or crashes on the file, a database whose
//! tables are gone while its records' bytes remain, tombstones that must outlive the tables,
//! and a database lost (missing or emptied) beside its session folders.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tern::domain::{Audience, InputKind, Sender, SessionId, SessionKey};
use tern::store::{
    self, JournalEvent, Limits, Repair, RepairOptions, Salvage, SessionMeta, Source, Store,
    StoreError, Worker,
};

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("tern.redb");
        Self { _dir: dir, db }
    }

    fn sessions_dir(&self) -> PathBuf {
        self.db.parent().expect("parent").join("sessions")
    }
}

fn input(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender::local_user(),
        audience: Audience::Personal,
        kind: InputKind::Person,
        text: text.into(),
    }
}

/// `sessions` sessions of `inputs` inputs each; returns their ids. Every input closes the
/// database after it: a durable commit of the file each, so older copies of the pages stay
/// in its free pages.
fn fill(db: &Path, sessions: usize, inputs: usize) -> Vec<SessionId> {
    let ids: Vec<SessionId> = (0..sessions)
        .map(|s| SessionId::from_string(format!("session-{s}")))
        .collect();
    for id in &ids {
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(id), "/work/p".into(), 1);
        Store::open(db)
            .expect("open")
            .create_session(&meta)
            .expect("create");
        for n in 0..inputs {
            Store::open(db)
                .expect("open")
                .append(id, &input(&format!("{id} input {n}")))
                .expect("append");
        }
    }
    ids
}

/// Overwrites the file's first page (the storage engine's header) with noise: no table can
/// be reached any more, only the records' bytes remain.
fn ruin_header(db: &Path) {
    let mut bytes = std::fs::read(db).expect("read");
    for (i, b) in bytes.iter_mut().take(4096).enumerate() {
        *b = (i * 31 % 251) as u8;
    }
    std::fs::write(db, bytes).expect("write");
}

fn options(worker: Worker) -> RepairOptions {
    let mut options = RepairOptions::new(worker);
    options.limits = Some(Limits {
        stall: Duration::from_secs(1),
        total: Duration::from_secs(5),
    });
    options
}

fn rebuilt(repair: Result<Repair, StoreError>) -> Salvage {
    match repair.expect("repair") {
        Repair::Rebuilt(salvage) => salvage,
        Repair::Healthy => panic!("the damaged database was called healthy"),
    }
}

/// A worker that never answers, as redb did on a damaged page: it is stopped, and the scan
/// of the file's bytes still gives back every record.
#[test]
fn a_storage_engine_that_hangs_is_stopped_and_the_pages_give_everything_back() {
    let fixture = Fixture::new();
    let ids = fill(&fixture.db, 3, 5);
    let hangs = Worker::Process {
        program: "sh".into(),
        args: vec!["-c".into(), "sleep 60".into(), "sh".into()],
    };
    let started = Instant::now();
    let salvage = rebuilt(store::repair(&fixture.db, &options(hangs)));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        salvage.problems.iter().any(|p| p.contains("no progress")),
        "{:?}",
        salvage.problems
    );
    assert_eq!(
        (salvage.found(), salvage.recovered(), salvage.lost()),
        (15, 15, 0)
    );
    let store = Store::open(&fixture.db).expect("reopen");
    for id in &ids {
        let texts: Vec<String> = store
            .load(id)
            .expect("load")
            .into_iter()
            .filter_map(|r| match r.event {
                JournalEvent::InputAccepted { text, .. } => Some(text),
                _ => None,
            })
            .collect();
        let expected: Vec<String> = (0..5).map(|n| format!("{id} input {n}")).collect();
        assert_eq!(texts, expected);
        let meta = store.meta(id).expect("meta").expect("listed");
        assert_eq!(
            (meta.event_count, meta.input_count),
            (5, 5),
            "counts folded again"
        );
    }
}

/// A worker that dies (as redb's panics and aborts end it) is reported, not propagated.
#[test]
fn a_storage_engine_that_crashes_is_reported_and_the_repair_goes_on() {
    let fixture = Fixture::new();
    fill(&fixture.db, 2, 3);
    let crashes = Worker::Process {
        program: "sh".into(),
        args: vec!["-c".into(), "kill -SEGV $$".into(), "sh".into()],
    };
    let salvage = rebuilt(store::repair(&fixture.db, &options(crashes)));
    assert!(
        salvage
            .problems
            .iter()
            .any(|p| p.contains("ended unexpectedly")),
        "{:?}",
        salvage.problems
    );
    assert_eq!(salvage.recovered(), 6);
}

/// With the header gone no table can be read: records, index entries and tombstones are all
/// found in the pages, and a session deleted before the damage stays deleted even without the
/// list kept beside the database.
#[test]
fn without_any_table_the_pages_rebuild_the_index_and_deleted_sessions_stay_deleted() {
    let fixture = Fixture::new();
    let ids = fill(&fixture.db, 3, 4);
    {
        let store = Store::open(&fixture.db).expect("open");
        store.archive_session(&ids[0], 50).expect("archive");
        store.delete_session(&ids[2]).expect("delete");
    }
    std::fs::remove_file(fixture.db.with_extension("redb.deleted")).expect("the list was made");
    ruin_header(&fixture.db);
    let salvage = rebuilt(store::repair(&fixture.db, &options(Worker::Thread)));
    let ids_back: Vec<&str> = salvage.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids_back, ["session-0", "session-1"]);
    assert!(salvage.ignored_deleted >= 4, "{}", salvage.ignored_deleted);
    assert!(salvage.sessions.iter().all(|s| s.index == Source::Pages));
    let store = Store::open(&fixture.db).expect("reopen");
    let archived = store.meta(&ids[0]).expect("meta").expect("listed");
    assert!(
        archived.archived_at_ms.is_some(),
        "the latest index entry was taken"
    );
    assert_eq!(archived.project_dir, Path::new("/work/p"));
    assert!(store.meta(&ids[2]).expect("meta").is_none());
}

/// An emptied database beside session folders is refused, not started afresh, and the
/// repair gives every folder an entry so maintenance never takes it for an orphan.
#[test]
fn a_database_emptied_or_removed_beside_its_folders_is_refused_then_rebuilt_from_them() {
    for remove in [false, true] {
        let fixture = Fixture::new();
        fill(&fixture.db, 1, 2);
        let folder = fixture.sessions_dir().join("session-0-1a2b3c4d");
        std::fs::create_dir_all(folder.join("artifacts")).expect("folder");
        std::fs::write(folder.join("artifacts/notes.txt"), "kept").expect("artifact");
        if remove {
            std::fs::remove_file(&fixture.db).expect("remove");
        } else {
            std::fs::write(&fixture.db, b"").expect("empty");
        }
        let refused = Store::open(&fixture.db).expect_err("a lost database is not new");
        assert!(
            matches!(refused, StoreError::Lost { folders: 1, .. }),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("tern doctor --repair"),
            "{refused}"
        );

        let salvage = rebuilt(store::repair(&fixture.db, &options(Worker::Thread)));
        assert_eq!(salvage.sessions.len(), 1);
        assert_eq!(salvage.sessions[0].index, Source::Folder);
        assert_eq!(salvage.moved_to.is_some(), !remove);
        let store = Store::open(&fixture.db).expect("opens after the repair");
        let meta = store
            .meta(&SessionId::from_string("session-0"))
            .expect("meta")
            .expect("the folder's session");
        assert_eq!(meta.session_dir.as_deref(), Some(folder.as_path()));
        assert!(folder.join("artifacts/notes.txt").exists());
    }
}

/// A header whose format byte was hit by damage is damage, not a newer tern.
#[test]
fn a_damaged_header_is_called_damage_not_a_newer_version() {
    let fixture = Fixture::new();
    fill(&fixture.db, 1, 1);
    let mut bytes = std::fs::read(&fixture.db).expect("read");
    bytes[64] = 223;
    bytes[192] = 223;
    std::fs::write(&fixture.db, bytes).expect("write");
    let err = Store::open(&fixture.db).expect_err("damaged");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("header is damaged"), "{err}");
}

/// A repair cut short after it moved the damaged file aside leaves no database: the next
/// repair salvages that file again instead of starting from the folders alone, and a
/// half-built database it left is never taken for the real one.
#[test]
fn a_repair_cut_short_is_finished_by_the_next_one() {
    let fixture = Fixture::new();
    fill(&fixture.db, 2, 3);
    ruin_header(&fixture.db);
    // As a repair leaves it when it stops after the move: its marker names the moved file.
    let moved = fixture.db.with_extension("redb.damaged-20260101T000000Z");
    std::fs::rename(&fixture.db, &moved).expect("moved aside");
    std::fs::write(
        fixture.db.with_extension("redb.repairing"),
        moved.as_os_str().as_encoded_bytes(),
    )
    .expect("marker");
    std::fs::write(fixture.db.with_extension("redb.rebuilding"), b"half").expect("leftover");
    let refused = Store::open(&fixture.db).expect_err("no fresh database over a repair");
    assert!(
        matches!(refused, StoreError::RepairUnfinished { .. }),
        "{refused:?}"
    );

    let salvage = rebuilt(store::repair(&fixture.db, &options(Worker::Thread)));
    assert!(salvage.earlier);
    assert_eq!(salvage.moved_to.as_deref(), Some(moved.as_path()));
    assert_eq!((salvage.found(), salvage.recovered()), (6, 6));
    assert!(!fixture.db.with_extension("redb.rebuilding").exists());
    assert!(!fixture.db.with_extension("redb.repairing").exists());
    let store = Store::open(&fixture.db).expect("the rebuilt database");
    assert_eq!(store.list().expect("list").len(), 2);
}

/// A worker that cannot even start says nothing about the file: the repair leaves it where
/// it is, rather than taking a healthy database for a damaged one.
#[test]
fn a_worker_that_cannot_start_moves_nothing() {
    let fixture = Fixture::new();
    fill(&fixture.db, 1, 2);
    let before = std::fs::read(&fixture.db).expect("read");
    let missing = Worker::Process {
        program: "/nonexistent/tern".into(),
        args: Vec::new(),
    };
    let err = store::repair(&fixture.db, &options(missing)).expect_err("not checked");
    assert!(matches!(err, StoreError::CheckFailed { .. }), "{err:?}");
    assert_eq!(std::fs::read(&fixture.db).expect("read"), before);
}
