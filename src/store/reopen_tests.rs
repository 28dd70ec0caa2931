//! Recovery from I/O failures, driven by a storage backend that fails on demand: a write that
//! fails once is retried on a reopened database, a commit that fails after reaching the file
//! is not stored twice, and a lasting failure (a full disk) is reported with what to do and
//! cleared by the next operation once writes succeed again.

use super::*;
use crate::domain::{Audience, Sender, SessionId, SessionKey};
use redb::backends::FileBackend;
use redb::{BackendError, Database, StorageBackend};
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The bytes of redb's file header and its two commit slots; a write below this offset
/// publishes a commit.
const HEADER_BYTES: u64 = 320;

/// Failures to inject, shared between a test and every backend its store opens.
#[derive(Debug, Default)]
struct Faults {
    /// Every write and every growth of the file fails, as on a full disk.
    disk_full: AtomicBool,
    /// The next write fails.
    next_write: AtomicBool,
    /// The next sync after a write to the header fails: the commit is in the file, but redb
    /// reports an error for it.
    sync_after_header: AtomicBool,
    header_written: AtomicBool,
    /// How many failures were injected.
    injected: AtomicU32,
}

impl Faults {
    fn fail(&self) -> std::io::Error {
        self.injected.fetch_add(1, Ordering::SeqCst);
        std::io::Error::from_raw_os_error(libc::ENOSPC)
    }

    fn fail_sync_after_next_header_write(&self) {
        self.header_written.store(false, Ordering::SeqCst);
        self.sync_after_header.store(true, Ordering::SeqCst);
    }
}

/// A file backend that fails as `faults` says.
#[derive(Debug)]
struct FaultyBackend {
    file: FileBackend,
    faults: Arc<Faults>,
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        if self.faults.disk_full.load(Ordering::SeqCst) && len > self.file.len()? {
            return Err(self.faults.fail());
        }
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        if self.faults.header_written.load(Ordering::SeqCst)
            && self.faults.sync_after_header.swap(false, Ordering::SeqCst)
        {
            return Err(self.faults.fail());
        }
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        if self.faults.disk_full.load(Ordering::SeqCst)
            || self.faults.next_write.swap(false, Ordering::SeqCst)
        {
            return Err(self.faults.fail());
        }
        self.file.write(offset, data)?;
        if offset < HEADER_BYTES {
            self.faults.header_written.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

/// A store in a temp dir whose every open goes through a [`FaultyBackend`], holding one
/// session, `s-1`.
struct Faulty {
    _dir: tempfile::TempDir,
    path: PathBuf,
    faults: Arc<Faults>,
    store: Store,
}

impl Faulty {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tern.redb");
        let faults = Arc::new(Faults::default());
        let shared = faults.clone();
        let mut store = Store::open_with(
            &path,
            Box::new(move |file| {
                Database::builder().create_with_backend(FaultyBackend {
                    file,
                    faults: shared.clone(),
                })
            }),
        )
        .expect("open");
        // The database's own durable commits are what fail here: every append waits for one
        // (as for every commit when the write-ahead log is full or cannot be written).
        store.wal = None;
        store.create_session(&meta("s-1")).expect("create");
        Self {
            _dir: dir,
            path,
            faults,
            store,
        }
    }

    fn injected(&self) -> u32 {
        self.faults.injected.load(Ordering::SeqCst)
    }

    /// The texts of the inputs in `s-1`'s journal with their seqs, as stored.
    fn journal(&self) -> Vec<(u64, String)> {
        texts(&self.store.load(&id()).expect("load"))
    }
}

fn id() -> SessionId {
    SessionId::from_string("s-1")
}

pub(super) fn meta(session: &str) -> SessionMeta {
    let id = SessionId::from_string(session);
    SessionMeta::new(id.clone(), SessionKey::cli(&id), PathBuf::from("/p"), 1)
}

pub(super) fn input(text: &str) -> JournalEvent {
    JournalEvent::InputAccepted {
        sender: Sender {
            id: "local".into(),
            name: "dev".into(),
            automated: false,
            trusted: true,
        },
        audience: Audience::Personal,
        kind: crate::domain::InputKind::Person,
        text: text.into(),
    }
}

fn texts(records: &[JournalRecord]) -> Vec<(u64, String)> {
    records
        .iter()
        .map(|record| match &record.event {
            JournalEvent::InputAccepted { text, .. } => (record.seq, text.clone()),
            other => panic!("unexpected event {other:?}"),
        })
        .collect()
}

fn pairs(expected: &[(u64, &str)]) -> Vec<(u64, String)> {
    expected
        .iter()
        .map(|(seq, text)| (*seq, (*text).to_owned()))
        .collect()
}

#[test]
fn a_write_that_fails_once_succeeds_on_the_reopened_database() {
    let t = Faulty::new();
    t.store.append(&id(), &input("one")).expect("append");
    t.faults.next_write.store(true, Ordering::SeqCst);
    let record = t
        .store
        .append(&id(), &input("two"))
        .expect("the append is retried on a reopened database");
    assert_eq!(t.injected(), 1, "the failure was injected");
    assert_eq!(record.seq, 2);
    assert_eq!(t.journal(), pairs(&[(1, "one"), (2, "two")]));
    let stored = t.store.meta(&id()).expect("meta").expect("present");
    assert_eq!((stored.event_count, stored.input_count), (2, 2));

    // The reopened database belongs to this store: the lock and the sidecar say so.
    let err = Store::open(&t.path).expect_err("still held");
    assert!(
        matches!(&err, StoreError::Locked { owner: Some(owner), .. } if owner.pid == std::process::id()),
        "{err:?}"
    );
    let Faulty { store, path, .. } = t;
    drop(store);
    let store = Store::open(&path).expect("reopen after a clean close");
    assert_eq!(
        texts(&store.load(&id()).expect("load")),
        pairs(&[(1, "one"), (2, "two")])
    );
}

#[test]
fn a_commit_that_fails_after_reaching_the_file_is_not_stored_twice() {
    let t = Faulty::new();
    t.store.append(&id(), &input("one")).expect("append");
    t.faults.fail_sync_after_next_header_write();
    let records = t
        .store
        .append_batch(&id(), &[input("two"), input("three")])
        .expect("append");
    assert_eq!(t.injected(), 1, "the failure was injected");
    assert_eq!(texts(&records), pairs(&[(2, "two"), (3, "three")]));
    assert_eq!(t.journal(), pairs(&[(1, "one"), (2, "two"), (3, "three")]));
    let stored = t.store.meta(&id()).expect("meta").expect("present");
    assert_eq!(stored.event_count, 3);

    // A session's creation waits for no fsync: its first input's durable commit carries it,
    // and a failed sync there stores neither twice.
    t.store.create_session(&meta("s-2")).expect("create");
    t.faults.fail_sync_after_next_header_write();
    let second = SessionId::from_string("s-2");
    let record = t
        .store
        .append(&second, &input("first"))
        .expect("an append whose commit landed is not stored twice");
    assert_eq!(t.injected(), 2, "the failure was injected");
    assert_eq!(record.seq, 1);
    assert_eq!(
        texts(&t.store.load(&second).expect("load")),
        pairs(&[(1, "first")])
    );
    assert!(t.store.meta(&second).expect("meta").is_some());
}

#[test]
fn a_full_disk_is_reported_with_what_to_do_and_clears_once_writes_succeed() {
    let t = Faulty::new();
    t.store.append(&id(), &input("kept")).expect("append");
    t.faults.disk_full.store(true, Ordering::SeqCst);
    let err = t
        .store
        .append(&id(), &input("lost"))
        .expect_err("the disk is full");
    assert!(matches!(err, StoreError::Unwritable { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(
            "the session database could not be written (No space left on device (os error 28)); \
             free disk space, then try again — nothing already acknowledged was lost."
        ),
        "{message}"
    );
    assert!(!message.contains("Retry"), "{message}");
    let err = t
        .store
        .append(&id(), &input("lost too"))
        .expect_err("the disk is still full");
    assert!(matches!(err, StoreError::Unwritable { .. }), "{err:?}");
    // redb must write to recover the file, so reads wait for the space too, and say so.
    let err = t.store.load(&id()).expect_err("cannot reopen yet");
    assert!(err.to_string().contains("free disk space"), "{err}");

    // Space is freed: the next operation reopens the database and works, with nothing lost.
    t.faults.disk_full.store(false, Ordering::SeqCst);
    let record = t.store.append(&id(), &input("after")).expect("append");
    assert_eq!(record.seq, 2);
    assert_eq!(t.journal(), pairs(&[(1, "kept"), (2, "after")]));
}

#[test]
fn commits_not_yet_durable_are_written_again_after_a_reopen() {
    let t = Faulty::new();
    t.store.append(&id(), &input("one")).expect("append");
    let lazy = t
        .store
        .append_lazily(&id(), &[input("two")])
        .expect("lazy append");
    assert_eq!(lazy[0].seq, 2);
    t.store.create_session(&meta("s-2")).expect("lazy create");
    // The next durable commit fails; the reopen rolls the file back to "one".
    t.faults.next_write.store(true, Ordering::SeqCst);
    let record = t
        .store
        .append(&id(), &input("three"))
        .expect("the append is retried on a reopened database");
    assert_eq!(t.injected(), 1, "the failure was injected");
    assert_eq!(record.seq, 3, "after what was written again");
    assert_eq!(t.journal(), pairs(&[(1, "one"), (2, "two"), (3, "three")]));
    let second = SessionId::from_string("s-2");
    assert!(t.store.meta(&second).expect("meta").is_some());
    let stored = t.store.meta(&id()).expect("meta").expect("present");
    assert_eq!(stored.input_count, 3);
    assert_eq!(t.store.totals().sessions, 2);

    let Faulty { store, path, .. } = t;
    drop(store);
    let store = Store::open(&path).expect("reopen after a clean close");
    assert_eq!(store.load(&id()).expect("load").len(), 3);
    assert!(store.meta(&second).expect("meta").is_some());
}

#[test]
fn a_lazy_append_is_not_written_twice_when_the_commit_after_it_landed_anyway() {
    let t = Faulty::new();
    t.store.append(&id(), &input("one")).expect("append");
    t.store
        .append_lazily(&id(), &[input("two")])
        .expect("lazy append");
    // The durable commit after it reaches the file, but its fsync reports a failure.
    t.faults.fail_sync_after_next_header_write();
    let record = t.store.append(&id(), &input("three")).expect("append");
    assert_eq!(t.injected(), 1, "the failure was injected");
    assert_eq!(record.seq, 3);
    assert_eq!(t.journal(), pairs(&[(1, "one"), (2, "two"), (3, "three")]));
}
