//! `Store`: the session database. It opens (or creates) `tern.redb`, appends journal events
//! durably while keeping each session's index entry current, and answers the reads that
//! listings, resume and replay need.
//!
//! All methods are synchronous and take `&self`; redb serialises write transactions, so one
//! `Arc<Store>` can be shared by every session actor. An append the caller waits for is
//! durable before it returns, through the write-ahead log beside the file (`wal`): a quarter
//! of a millisecond typically, several milliseconds on a busy disk, so async callers may
//! prefer a blocking thread for it. The database's own durable commits come when the log is
//! full, when [`Store::flush`] finds a commit the log does not hold, and at the close.
//!
//! After one I/O failure (a full disk, say) redb refuses every later operation on that handle,
//! so the store closes the database, reopens the same file (redb recovers it to its last
//! commit) and runs the operation once more. If that fails too, the caller gets
//! [`StoreError::Unwritable`], and the next operation tries the reopen again, so freeing disk
//! space is enough; tern need not restart.

use super::activity;
use super::append::Appends;
use super::append::Logged;
use super::error::{StoreError, from_open, from_redb};
use super::event::{JournalEvent, JournalRecord};
use super::keys;
use super::lazy::Lazy;
use super::logged::open_wal;
use super::meta::SessionMeta;
use super::schema::{self, Contents, JOURNAL, SESSIONS};
use super::totals::{self, Delta, Totals};
use super::wal::Wal;
use super::{clean, codec, migrate, owner, probe, search};
use crate::domain::SessionId;
use redb::backends::FileBackend;
use redb::{
    Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, WriteTransaction,
};
use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Page cache of the open database. The journal is read once per resume and the resume
/// picker reads the whole search table once; the OS page cache serves repeats, so a large
/// cache would only grow the process (redb's default, 1 GiB; 32 MiB held most of a
/// 100,000-session search table after the picker's scan). A few MiB keeps every b-tree's
/// upper levels, which is what the writes touch again.
const CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Fewest characters of an id that `resolve` accepts as a prefix.
pub const MIN_PREFIX_CHARS: usize = 4;

/// Opens a database on a storage backend over the database file. Tests wrap the backend to
/// make writes fail on demand.
pub(super) type Connect = dyn Fn(FileBackend) -> Result<Database, DatabaseError> + Send + Sync;

/// The session database: journal and session index in one redb file owned by this process.
pub struct Store {
    /// The open database. Every operation holds the read lock while it uses it; replacing it
    /// after an I/O failure takes the write lock, so no transaction outlives its handle.
    db: RwLock<Handle>,
    connect: Box<Connect>,
    pub(super) path: PathBuf,
    owner_file: PathBuf,
    /// The totals as of the last commit, mirrored from the `totals` table.
    totals: Mutex<Totals>,
    observer: RwLock<Option<Arc<Observer>>>,
    /// Appends waiting for the next group commit.
    pub(super) appends: Appends,
    /// Durable commits made and syncs of the write-ahead log: each is an fsync.
    pub(super) durable_commits: AtomicU64,
    /// The write-ahead log, unless it could not be opened (every append the caller waits
    /// for is then a durable commit).
    pub(super) wal: Option<Wal>,
    /// Set by a commit that is not durable yet, cleared by the next durable one.
    pub(super) lazy_pending: AtomicBool,
    /// Set by a commit that is not durable yet and not in the write-ahead log either (a
    /// snapshot of its own, no room in the log), cleared by the next durable one.
    pub(super) unlogged: AtomicBool,
    /// Whether closing may record the clean-close marker (not while a recovery is unfinished).
    closes_clean: AtomicBool,
    /// Set while a flush is scheduled, so the lazy commits before it share it.
    flush_due: AtomicBool,
    /// What the commits that are not durable yet wrote, in order.
    pub(super) lazy: Mutex<Vec<Lazy>>,
}

/// A committed change, as the store's observer is told of it.
#[derive(Debug, Clone, Copy)]
pub enum StoreChange<'a> {
    Created(&'a SessionMeta),
    Appended {
        id: &'a SessionId,
        events: &'a [JournalEvent],
    },
    Archived(&'a SessionId),
    Deleted(&'a SessionId),
}

/// Told of every committed change with the totals after it, on the committing thread: it
/// must be quick (maintenance compares two numbers; anything more goes to another task).
pub type Observer = dyn Fn(&StoreChange<'_>, Totals) + Send + Sync;

/// The current database handle and how many times it has been reopened.
struct Handle {
    /// `None` while a reopen has failed (until the next operation retries it), and after
    /// `drop` has closed the file.
    db: Option<Database>,
    /// Counts reopens, so that threads failing on the same handle reopen it only once.
    generation: u64,
}

/// Whether an operation runs for the first time or again after an I/O failure, when the first
/// run's commit may have reached the file even though it reported an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attempt {
    First,
    Retry,
}

/// What an operation does with the database, which decides how a lasting failure reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    Read,
    Write,
}

impl Store {
    /// Opens the database at `path`, creating it (and its folder) if absent.
    ///
    /// An existing file that is damaged or not a tern database is refused with
    /// [`StoreError::Corrupt`] and left byte-for-byte as it was; a database held by another
    /// process (or another `Store` here) fails at once with [`StoreError::Locked`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(moved_to) = super::repair::unfinished_repair(path) {
            return Err(StoreError::RepairUnfinished {
                path: path.to_owned(),
                moved_to,
            });
        }
        if let Some(folders) = super::repair::lost_with_folders(path) {
            return Err(StoreError::Lost {
                path: path.to_owned(),
                missing: !path.exists(),
                folders,
                sessions_dir: super::repair::sessions_dir(path),
            });
        }
        Self::open_with(path, Box::new(connect_file))
    }

    /// Opens (creating) the database at `path` even where session folders exist without
    /// it: for a repair, which gives them their entries again.
    pub(super) fn open_fresh(path: &Path) -> Result<Store, StoreError> {
        Self::open_with(path, Box::new(connect_file))
    }

    /// `open`, with the storage backend chosen by `connect` for this and every later reopen.
    pub(super) fn open_with(path: &Path, connect: Box<Connect>) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir(parent).map_err(|source| StoreError::Io {
                action: "create the folder of",
                path: path.to_owned(),
                source,
            })?;
        }
        let len = std::fs::metadata(path).map_or(0, |meta| meta.len());
        // A generous bound: the full check reads about 1.5 ms per MB.
        let limit = std::time::Duration::from_secs(60 + len / 20_000_000);
        let clean = clean::unchanged_since_close(path);
        probe::verify_within(path, !clean, limit)?;
        create_private_file(path).map_err(|source| StoreError::Io {
            action: "create",
            path: path.to_owned(),
            source,
        })?;
        let db = connect_path(path, &connect)?;
        let contents = schema::inspect(&db, path)?;
        match contents {
            Contents::Empty => schema::initialize(&db, path)?,
            Contents::Tern { format } if format < schema::FORMAT_VERSION => {
                migrate::frame_values(&db, path)?;
            }
            Contents::Tern { .. } => {}
        }
        activity::ensure(&db, path)?;
        search::ensure(&db, path)?;
        let totals = totals::ensure(&db, path)?;
        let owner_file = owner::sidecar_path(path);
        write_owner(&owner_file);
        // After a clean close everything the log held is in the file; a new file has no
        // history the log could add to.
        let fresh = contents == Contents::Empty;
        let (wal, found) = open_wal(&db, path, !(clean || fresh), fresh)?;
        let store = Store {
            db: RwLock::new(Handle {
                db: Some(db),
                generation: 0,
            }),
            connect,
            path: path.to_owned(),
            owner_file,
            totals: Mutex::new(totals),
            observer: RwLock::new(None),
            appends: Appends::default(),
            durable_commits: AtomicU64::new(0),
            wal,
            lazy_pending: AtomicBool::new(false),
            unlogged: AtomicBool::new(false),
            closes_clean: AtomicBool::new(true),
            flush_due: AtomicBool::new(false),
            lazy: Mutex::new(Vec::new()),
        };
        // Until what the log holds is written again, a close is not a clean one: the next
        // open must read the log again.
        store.closes_clean.store(false, Ordering::Release);
        store.recover_logged(found)?;
        store.closes_clean.store(true, Ordering::Release);
        Ok(store)
    }

    /// Sessions and journal bytes stored, as of the last commit: two numbers read without
    /// touching the file.
    pub fn totals(&self) -> Totals {
        *self.totals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the totals again from the file.
    pub(super) fn reload_totals(&self, db: &Database) -> Result<(), StoreError> {
        let totals = totals::ensure(db, &self.path)?;
        *self.totals.lock().unwrap_or_else(PoisonError::into_inner) = totals;
        Ok(())
    }

    /// Sets the one observer told of every committed change (replacing any earlier one).
    pub fn observe(&self, observer: Arc<Observer>) {
        *self
            .observer
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(observer);
    }

    /// Marks a flush as scheduled; `false` when one already is (the caller then schedules
    /// nothing). [`Store::flush`] clears the mark.
    pub fn schedule_flush(&self) -> bool {
        !self.flush_due.swap(true, Ordering::AcqRel)
    }

    pub(super) fn flush_done(&self) {
        self.flush_due.store(false, Ordering::Release);
    }

    /// Whether a commit is waiting for the next durable one.
    pub fn flush_pending(&self) -> bool {
        self.lazy_pending.load(Ordering::Acquire)
    }

    /// How many durable commits (each an fsync of the file) this store has made since it
    /// was opened.
    pub fn durable_commits(&self) -> u64 {
        self.durable_commits.load(Ordering::Relaxed)
    }

    /// Copies the database file to `to` as it stands after a durable commit made now, with
    /// every write held off until the copy is whole: what `tern doctor` checks while this
    /// process keeps the file open. Returns the bytes copied.
    pub fn copy_to(&self, to: &Path) -> Result<u64, StoreError> {
        let copied = self.run(Access::Write, |db, _| {
            // Every write takes this lock before its transaction, so none starts until the
            // copy is made.
            let mut lazy = self.lazy.lock().unwrap_or_else(PoisonError::into_inner);
            let mut txn = db.begin_write().map_err(|e| self.err(e))?;
            txn.set_durability(Durability::Immediate)
                .map_err(|e| self.err(e))?;
            let epoch = self.next_epoch(&txn)?;
            txn.commit().map_err(|e| self.err(e))?;
            self.after_durable(&mut lazy, epoch);
            // A failed copy is no failure of the database: it must not reopen it.
            Ok(std::fs::copy(&self.path, to))
        })?;
        copied.map_err(|source| StoreError::Io {
            action: "copy the session database to",
            path: to.to_owned(),
            source,
        })
    }

    /// Records a committed `delta` and tells the observer of `change`.
    pub(super) fn committed(&self, change: StoreChange<'_>, delta: Delta) {
        let totals = {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            *totals = totals.after(delta);
            *totals
        };
        let observer = self
            .observer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(observer) = observer {
            observer(&change, totals);
        }
    }

    /// The database file this store owns.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a new session to the index. Fails with `SessionExists` if the id is taken.
    pub fn create_session(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        check_utf8(&meta.project_dir)?;
        let json = encode(codec::encode_meta(meta))?;
        // Not durable by itself: a session with no input loses nothing if a crash takes it,
        // and its first input's durable commit makes it durable too.
        let kept = || vec![Lazy::Created(Box::new(meta.clone()))];
        self.write_lazily(kept, |txn, attempt| {
            self.create_in(txn, attempt, meta, &json)
        })?;
        let delta = Delta {
            sessions: 1,
            bytes: meta.transcript_bytes as i64,
        };
        self.committed(StoreChange::Created(meta), delta);
        Ok(())
    }

    /// Writes a new session's index entries in `txn`.
    pub(super) fn create_in(
        &self,
        txn: &WriteTransaction,
        attempt: Attempt,
        meta: &SessionMeta,
        json: &[u8],
    ) -> Result<(), StoreError> {
        let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        if let Some(existing) = sessions.get(meta.id.as_str()).map_err(|e| self.err(e))? {
            // A retry finding exactly its own entry: the failed first commit landed.
            if attempt == Attempt::Retry && existing.value() == json {
                return Ok(());
            }
            return Err(StoreError::SessionExists {
                id: meta.id.clone(),
            });
        }
        sessions
            .insert(meta.id.as_str(), json)
            .map_err(|e| self.err(e))?;
        activity::touch(txn, meta.id.as_str(), None, Some(meta.updated_at_ms))
            .map_err(|e| self.err(e))?;
        keys::bind(txn, meta.key.as_str(), meta.id.as_str()).map_err(|e| self.err(e))?;
        search::sync(txn, meta.id.as_str(), None, Some(meta)).map_err(|e| self.err(e))?;
        let delta = Delta {
            sessions: 1,
            bytes: meta.transcript_bytes as i64,
        };
        totals::add(txn, delta).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The session's journal in seq order.
    ///
    /// A record that no longer decodes (written by a different tern version, or damaged) is
    /// skipped with a warning rather than making the whole session unreadable; its seq is
    /// then missing from the result.
    pub fn load(&self, id: &SessionId) -> Result<Vec<JournalRecord>, StoreError> {
        self.load_after(id, 0)
    }

    /// The session's journal records after position `after`, in seq order, as [`Store::load`]
    /// reads them: what a snapshot taken at `after` needs replayed on top.
    pub fn load_after(&self, id: &SessionId, after: u64) -> Result<Vec<JournalRecord>, StoreError> {
        self.read_journal(id, after.saturating_add(1), None)
    }

    /// The last `n` records of the session's journal, in seq order: read backwards from its
    /// end, so a long journal costs no more than a short one. Records that no longer decode
    /// are skipped, as by [`Store::load`].
    pub fn tail(&self, id: &SessionId, n: usize) -> Result<Vec<JournalRecord>, StoreError> {
        self.read_journal(id, 0, Some(n))
    }

    /// The session's records from seq `from` on, or only the last `last` of them, in seq
    /// order. A record that no longer decodes (another tern version wrote it, or it is
    /// damaged) is skipped with a warning rather than making the whole session unreadable.
    fn read_journal(
        &self,
        id: &SessionId,
        from: u64,
        last: Option<usize>,
    ) -> Result<Vec<JournalRecord>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            if sessions
                .get(id.as_str())
                .map_err(|e| self.err(e))?
                .is_none()
            {
                return Err(unknown(id.as_str()));
            }
            let journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
            let range = journal
                .range((id.as_str(), from)..=(id.as_str(), u64::MAX))
                .map_err(|e| self.err(e))?;
            let entries: Box<dyn Iterator<Item = _>> = match last {
                Some(n) => Box::new(range.rev().take(n)),
                None => Box::new(range),
            };
            let mut records = Vec::new();
            for entry in entries {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                match codec::decode_record(id.as_str(), value.value()) {
                    Ok(record) => records.push(record),
                    Err(err) => tracing::warn!(
                        session = %id,
                        seq = key.value().1,
                        %err,
                        "skipping a journal record that cannot be decoded"
                    ),
                }
            }
            if last.is_some() {
                records.reverse();
            }
            Ok(records)
        })
    }

    /// The session's index entry, or `None` if no session has this id.
    pub fn meta(&self, id: &SessionId) -> Result<Option<SessionMeta>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let found = sessions.get(id.as_str()).map_err(|e| self.err(e))?;
            found
                .map(|bytes| self.decode_meta(id.as_str(), bytes.value()))
                .transpose()
        })
    }

    /// Every session, most recently updated first. Entries that cannot be decoded are skipped
    /// with a warning.
    pub fn list(&self) -> Result<Vec<SessionMeta>, StoreError> {
        let mut metas = self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let mut metas = Vec::new();
            for entry in sessions.iter().map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                match self.decode_meta(key.value(), value.value()) {
                    Ok(meta) => metas.push(meta),
                    Err(err) => tracing::warn!(%err, "skipping a session index entry"),
                }
            }
            Ok(metas)
        })?;
        // Ties (same millisecond) fall back to the id, which for generated ids is creation order.
        metas.sort_by(|a, b| {
            b.updated_at_ms
                .cmp(&a.updated_at_ms)
                .then_with(|| b.id.cmp(&a.id))
        });
        Ok(metas)
    }

    /// The most recently updated session started in `project_dir`, for `--continue`.
    ///
    /// Paths are compared as given; callers pass the same (canonical) form they stored.
    pub fn latest_for_project(
        &self,
        project_dir: &Path,
    ) -> Result<Option<SessionMeta>, StoreError> {
        Ok(self
            .recent(1, |meta| meta.project_dir == project_dir)?
            .pop())
    }

    /// Finds a session by its full id or by a unique prefix of at least
    /// [`MIN_PREFIX_CHARS`] characters.
    pub fn resolve(&self, id_or_prefix: &str) -> Result<SessionMeta, StoreError> {
        let wanted = id_or_prefix.trim();
        let matches = self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            if let Some(bytes) = sessions.get(wanted).map_err(|e| self.err(e))? {
                return Ok(vec![(wanted.to_owned(), bytes.value().to_vec())]);
            }
            if wanted.chars().count() < MIN_PREFIX_CHARS {
                return Err(StoreError::PrefixTooShort {
                    prefix: wanted.to_owned(),
                    min: MIN_PREFIX_CHARS,
                });
            }
            let mut matches = Vec::new();
            for entry in sessions.range(wanted..).map_err(|e| self.err(e))? {
                let (key, value) = entry.map_err(|e| self.err(e))?;
                if !key.value().starts_with(wanted) {
                    break;
                }
                matches.push((key.value().to_owned(), value.value().to_vec()));
            }
            Ok(matches)
        })?;
        match matches.as_slice() {
            [] => Err(unknown(wanted)),
            [(key, value)] => self.decode_meta(key, value),
            _ => Err(StoreError::AmbiguousSession {
                prefix: wanted.to_owned(),
                candidates: matches
                    .into_iter()
                    .map(|(key, _)| SessionId::from_string(key))
                    .collect(),
            }),
        }
    }

    /// Runs `body` in a write transaction committed with immediate durability; an error from
    /// `body` aborts it, so nothing partial is stored. After an I/O failure `body` runs again
    /// on the reopened database, told that it is a retry.
    pub(super) fn write<T>(
        &self,
        body: impl Fn(&WriteTransaction, Attempt) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.write_with(Durability::Immediate, body)
    }

    /// [`Store::write`] at `durability`: `None` commits become durable with the next
    /// immediate one, for data whose loss only costs time (snapshots).
    pub(super) fn write_with<T>(
        &self,
        durability: Durability,
        body: impl Fn(&WriteTransaction, Attempt) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.commit_with(durability, Vec::new, body)
    }

    /// Commits `body` at `durability`. A commit that is not durable yet keeps what `kept`
    /// says it wrote, to be written again if a reopen rolls it back; a durable one makes
    /// everything kept durable.
    pub(super) fn commit_with<T>(
        &self,
        durability: Durability,
        kept: impl Fn() -> Vec<Lazy>,
        body: impl Fn(&WriteTransaction, Attempt) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.commit_logged(durability, kept, body)
            .map(|(out, _)| out)
    }

    /// [`Store::commit_with`], saying how the commit reached the disk: what a commit that is
    /// not durable wrote also goes to the write-ahead log, in commit order.
    pub(super) fn commit_logged<T>(
        &self,
        durability: Durability,
        kept: impl Fn() -> Vec<Lazy>,
        body: impl Fn(&WriteTransaction, Attempt) -> Result<T, StoreError>,
    ) -> Result<(T, Logged), StoreError> {
        self.run(Access::Write, |db, attempt| {
            // Held across the commit, so what is kept matches what the file holds, and the
            // log's entries keep the commits' order.
            let mut lazy = self.lazy.lock().unwrap_or_else(PoisonError::into_inner);
            let mut txn = db.begin_write().map_err(|e| self.err(e))?;
            txn.set_durability(durability).map_err(|e| self.err(e))?;
            let out = body(&txn, attempt)?;
            if matches!(durability, Durability::Immediate) {
                let epoch = self.next_epoch(&txn)?;
                txn.commit().map_err(|e| self.err(e))?;
                self.after_durable(&mut lazy, epoch);
                return Ok((out, Logged::Durable));
            }
            txn.commit().map_err(|e| self.err(e))?;
            self.lazy_pending.store(true, Ordering::Release);
            let kept = kept();
            let logged = self.log_ahead(&kept);
            if kept.is_empty() || logged == Logged::Later {
                self.unlogged.store(true, Ordering::Release);
            }
            lazy.extend(kept);
            Ok((out, logged))
        })
    }

    /// Runs `op` on the database. If it fails with an I/O error (redb then refuses the handle
    /// for good), or the database is closed after such a failure, reopens the file and runs
    /// `op` once more. A write that still fails becomes [`StoreError::Unwritable`].
    pub(super) fn run<T>(
        &self,
        access: Access,
        op: impl Fn(&Database, Attempt) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let (generation, attempt) = {
            let handle = self.handle();
            match &handle.db {
                Some(db) => match op(db, Attempt::First) {
                    Err(err) if is_io_failure(&err) => {
                        tracing::warn!(path = %self.path.display(), %err, "reopening the session database after an I/O failure");
                        (handle.generation, Attempt::Retry)
                    }
                    other => return other,
                },
                // An earlier reopen failed: this operation has not run yet.
                None => (handle.generation, Attempt::First),
            }
        };
        self.reopen(generation)
            .map_err(|err| self.lasting(access, err))?;
        let handle = self.handle();
        let Some(db) = &handle.db else {
            // Another thread's reopen failed after ours succeeded.
            return Err(self.lasting(access, self.io_failed_error()));
        };
        op(db, attempt).map_err(|err| self.lasting(access, err))
    }

    /// Closes the failed database and opens the file again, unless another thread already
    /// did since `seen`. redb recovers the file to its last commit on the way.
    fn reopen(&self, seen: u64) -> Result<(), StoreError> {
        let mut handle = self.handle_mut();
        if handle.generation != seen && handle.db.is_some() {
            return Ok(());
        }
        handle.generation += 1;
        // Closing releases the file's lock, which the same process then takes again.
        if let Some(old) = handle.db.take()
            && let Err(err) = old.close()
        {
            tracing::debug!(path = %self.path.display(), %err, "closing the failed session database");
        }
        let db = handle.db.insert(connect_path(&self.path, &self.connect)?);
        // The sidecar still names this process, but a holder that slipped in while the file
        // was closed may have replaced or removed it.
        write_owner(&self.owner_file);
        tracing::info!(path = %self.path.display(), "reopened the session database");
        // The reopen rolled the file back to its last durable commit: what came after it is
        // written again, durably, before anything else. When that fails (the disk is still
        // full) reads go on, and the next write's reopen tries again.
        self.restore_lazy(db)
    }

    /// The error for an operation that failed again after the reopen. For a write, an I/O
    /// failure becomes the message that says what to do about it.
    fn lasting(&self, access: Access, err: StoreError) -> StoreError {
        match (access, err) {
            (Access::Write, StoreError::Io { source, .. }) => StoreError::Unwritable {
                path: self.path.clone(),
                cause: source.to_string(),
            },
            (_, other) => other,
        }
    }

    fn io_failed_error(&self) -> StoreError {
        StoreError::Unwritable {
            path: self.path.clone(),
            cause: "it could not be reopened after an earlier failure".to_owned(),
        }
    }

    fn handle(&self) -> RwLockReadGuard<'_, Handle> {
        // A panic cannot leave the handle half-replaced: the swap is a single assignment.
        self.db.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn handle_mut(&self) -> RwLockWriteGuard<'_, Handle> {
        self.db.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn err(&self, err: impl Into<redb::Error>) -> StoreError {
        from_redb(&self.path, err)
    }

    pub(super) fn decode_meta(&self, id: &str, bytes: &[u8]) -> Result<SessionMeta, StoreError> {
        codec::decode_meta(id, bytes).map_err(|err| StoreError::Corrupt {
            path: self.path.clone(),
            detail: format!("the index entry of session {id} cannot be read: {err}"),
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Snapshots still waiting for a commit go in one now; the close makes it durable.
        if !self.appends.snapshots.is_empty() {
            let due = self.appends.snapshots.take();
            let written = self.write_with(Durability::None, |txn, _| self.put_snapshots(txn, &due));
            if let Err(err) = written {
                tracing::debug!(%err, "the last snapshots were not saved");
            }
        }
        // The sidecar goes while the lock is still held, so it can never be the next holder's.
        // The marker is recorded only after a clean close, from the file as the close left it.
        owner::remove_own(&self.owner_file);
        let handle = self.db.get_mut().unwrap_or_else(PoisonError::into_inner);
        let closed = handle.db.take().map(Database::close);
        match closed {
            Some(Ok(())) if self.closes_clean.load(Ordering::Acquire) => clean::record(&self.path),
            Some(Ok(())) => {}
            Some(Err(err)) => {
                tracing::warn!(path = %self.path.display(), %err, "the session database did not close cleanly");
            }
            None => {}
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Opens the database file on a [`FileBackend`] through `connect`.
fn connect_path(path: &Path, connect: &Connect) -> Result<Database, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| StoreError::Io {
            action: "open",
            path: path.to_owned(),
            source,
        })?;
    let backend = FileBackend::new(file).map_err(|err| from_open(path, err))?;
    connect(backend).map_err(|err| from_open(path, err))
}

/// How the store opens the database outside tests.
fn connect_file(backend: FileBackend) -> Result<Database, DatabaseError> {
    Database::builder()
        .set_cache_size(CACHE_BYTES)
        .create_with_backend(backend)
}

/// Names this process in the owner sidecar. Best effort: only the message a second process
/// would show is poorer without it.
fn write_owner(owner_file: &Path) {
    if let Err(err) = owner::write(owner_file, &owner::LockOwner::current(now_ms())) {
        tracing::warn!(path = %owner_file.display(), %err, "could not write the owner sidecar");
    }
}

/// True for the failures after which redb refuses the handle: I/O errors, and the
/// `PreviousIo` they leave behind.
fn is_io_failure(err: &StoreError) -> bool {
    matches!(err, StoreError::Io { .. } | StoreError::Unwritable { .. })
}

/// Refuses a path the journal cannot hold: it stores paths as JSON strings.
pub(super) fn check_utf8(path: &Path) -> Result<(), StoreError> {
    match path.to_str() {
        Some(_) => Ok(()),
        None => Err(StoreError::NonUtf8Path {
            path: path.to_owned(),
        }),
    }
}

/// The file beside the database at `db_path` whose name adds `suffix` (`tern.redb.owner`,
/// `tern.redb.damaged-…`): where every sidecar file of the database lives.
pub(super) fn beside(db_path: &Path, suffix: &str) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// An encoding failure as a store error (the value cannot be stored; nothing was written).
pub(super) fn encode(encoded: Result<Vec<u8>, String>) -> Result<Vec<u8>, StoreError> {
    encoded.map_err(StoreError::Internal)
}

pub(super) fn unknown(id: &str) -> StoreError {
    StoreError::UnknownSession { id: id.to_owned() }
}

pub(super) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Creates `dir` and its missing parents, private to the user, as session data is.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates an empty database file readable by the user only, unless one exists; redb then
/// initialises it in place.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}
