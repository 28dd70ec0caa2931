//! `Store`: the session database. It opens (or creates) `tern.redb`, appends journal events
//! durably while keeping each session's index entry current, and answers the reads that
//! listings, resume and replay need.
//!
//! All methods are synchronous and take `&self`; redb serialises write transactions, so one
//! `Arc<Store>` can be shared by every session actor. An append commits with immediate
//! durability (an fsync) before it returns: about half a millisecond typically, several
//! milliseconds on a busy disk, so async callers may prefer a blocking thread for it.

use super::error::{StoreError, from_open, from_redb};
use super::event::{JournalEvent, JournalRecord};
use super::meta::SessionMeta;
use super::schema::{self, Contents, JOURNAL, SESSIONS};
use super::{clean, owner, probe, summary};
use crate::domain::SessionId;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, WriteTransaction};
use serde::Serialize;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Page cache of the open database. The journal is read once per resume; the OS page cache
/// serves repeats, so redb's default (1 GiB) would only grow the process.
const CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Fewest characters of an id that `resolve` accepts as a prefix.
pub const MIN_PREFIX_CHARS: usize = 4;

/// The session database: journal and session index in one redb file owned by this process.
pub struct Store {
    /// Always `Some` until `drop`, which takes it to close the file before recording the
    /// clean-close marker.
    db: Option<Database>,
    path: PathBuf,
    owner_file: PathBuf,
}

/// A record as written: like `JournalRecord` but borrowing the event, so appending does not
/// clone it before encoding. Serialises to the same JSON.
#[derive(Serialize)]
struct RecordRef<'a> {
    seq: u64,
    at_ms: i64,
    event: &'a JournalEvent,
}

impl Store {
    /// Opens the database at `path`, creating it (and its folder) if absent.
    ///
    /// An existing file that is damaged or not a tern database is refused with
    /// [`StoreError::Corrupt`] and left byte-for-byte as it was; a database held by another
    /// process (or another `Store` here) fails at once with [`StoreError::Locked`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dir(parent).map_err(|source| StoreError::Io {
                action: "create the folder of",
                path: path.to_owned(),
                source,
            })?;
        }
        probe::verify(path, !clean::unchanged_since_close(path))?;
        create_private_file(path).map_err(|source| StoreError::Io {
            action: "create",
            path: path.to_owned(),
            source,
        })?;
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|err| from_open(path, err))?;
        if schema::inspect(&db, path)? == Contents::Empty {
            schema::initialize(&db, path)?;
        }
        let owner_file = owner::sidecar_path(path);
        if let Err(err) = owner::write(&owner_file, &owner::LockOwner::current(now_ms())) {
            // Only the message a second process would show is poorer without it.
            tracing::warn!(path = %owner_file.display(), %err, "could not write the owner sidecar");
        }
        Ok(Store {
            db: Some(db),
            path: path.to_owned(),
            owner_file,
        })
    }

    /// The database file this store owns.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a new session to the index. Fails with `SessionExists` if the id is taken.
    pub fn create_session(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        let json = self.encode(meta)?;
        self.write(|txn| {
            let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let exists = sessions
                .get(meta.id.as_str())
                .map_err(|e| self.err(e))?
                .is_some();
            if exists {
                return Err(StoreError::SessionExists {
                    id: meta.id.clone(),
                });
            }
            sessions
                .insert(meta.id.as_str(), json.as_slice())
                .map_err(|e| self.err(e))?;
            Ok(())
        })
    }

    /// Appends one event to the session's journal and updates its index entry, durably, in
    /// one transaction. Returns the record with its assigned seq and time.
    pub fn append(
        &self,
        id: &SessionId,
        event: &JournalEvent,
    ) -> Result<JournalRecord, StoreError> {
        let mut records = self.append_batch(id, std::slice::from_ref(event))?;
        records.pop().ok_or_else(|| {
            StoreError::Internal("an append of one event produced no record".to_owned())
        })
    }

    /// Appends several events in order, durably, in one transaction: all or none are stored.
    pub fn append_batch(
        &self,
        id: &SessionId,
        events: &[JournalEvent],
    ) -> Result<Vec<JournalRecord>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let at_ms = now_ms();
        self.write(|txn| {
            let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let mut meta = match sessions.get(id.as_str()).map_err(|e| self.err(e))? {
                Some(bytes) => self.decode_meta(id.as_str(), bytes.value())?,
                None => return Err(unknown(id.as_str())),
            };
            let mut journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
            // The journal's last key is the authority on seq, not the index's count.
            let mut seq = journal
                .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
                .map_err(|e| self.err(e))?
                .next_back()
                .transpose()
                .map_err(|e| self.err(e))?
                .map_or(0, |(key, _)| key.value().1);
            let mut records = Vec::with_capacity(events.len());
            for event in events {
                seq += 1;
                let json = self.encode(&RecordRef { seq, at_ms, event })?;
                journal
                    .insert((id.as_str(), seq), json.as_slice())
                    .map_err(|e| self.err(e))?;
                summary::apply(&mut meta, event, at_ms);
                records.push(JournalRecord {
                    seq,
                    at_ms,
                    event: event.clone(),
                });
            }
            let json = self.encode(&meta)?;
            sessions
                .insert(id.as_str(), json.as_slice())
                .map_err(|e| self.err(e))?;
            Ok(records)
        })
    }

    /// The session's journal in seq order.
    ///
    /// A record that no longer decodes (written by a different tern version, or damaged) is
    /// skipped with a warning rather than making the whole session unreadable; its seq is
    /// then missing from the result.
    pub fn load(&self, id: &SessionId) -> Result<Vec<JournalRecord>, StoreError> {
        let txn = self.db().begin_read().map_err(|e| self.err(e))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        if sessions
            .get(id.as_str())
            .map_err(|e| self.err(e))?
            .is_none()
        {
            return Err(unknown(id.as_str()));
        }
        let journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
        let mut records = Vec::new();
        for entry in journal
            .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
            .map_err(|e| self.err(e))?
        {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            let seq = key.value().1;
            match serde_json::from_slice::<JournalRecord>(value.value()) {
                Ok(record) => records.push(record),
                Err(err) => tracing::warn!(
                    session = %id,
                    seq,
                    %err,
                    "skipping a journal record that cannot be decoded"
                ),
            }
        }
        Ok(records)
    }

    /// The session's index entry, or `None` if no session has this id.
    pub fn meta(&self, id: &SessionId) -> Result<Option<SessionMeta>, StoreError> {
        let txn = self.db().begin_read().map_err(|e| self.err(e))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        let found = sessions.get(id.as_str()).map_err(|e| self.err(e))?;
        found
            .map(|bytes| self.decode_meta(id.as_str(), bytes.value()))
            .transpose()
    }

    /// Every session, most recently updated first. Entries that cannot be decoded are skipped
    /// with a warning.
    pub fn list(&self) -> Result<Vec<SessionMeta>, StoreError> {
        let txn = self.db().begin_read().map_err(|e| self.err(e))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        let mut metas = Vec::new();
        for entry in sessions.iter().map_err(|e| self.err(e))? {
            let (key, value) = entry.map_err(|e| self.err(e))?;
            match self.decode_meta(key.value(), value.value()) {
                Ok(meta) => metas.push(meta),
                Err(err) => tracing::warn!(%err, "skipping a session index entry"),
            }
        }
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
            .list()?
            .into_iter()
            .find(|meta| meta.project_dir == project_dir))
    }

    /// Finds a session by its full id or by a unique prefix of at least
    /// [`MIN_PREFIX_CHARS`] characters.
    pub fn resolve(&self, id_or_prefix: &str) -> Result<SessionMeta, StoreError> {
        let wanted = id_or_prefix.trim();
        let txn = self.db().begin_read().map_err(|e| self.err(e))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        if let Some(bytes) = sessions.get(wanted).map_err(|e| self.err(e))? {
            return self.decode_meta(wanted, bytes.value());
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
    /// `body` aborts it, so nothing partial is stored.
    fn write<T>(
        &self,
        body: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut txn = self.db().begin_write().map_err(|e| self.err(e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.err(e))?;
        let out = body(&txn)?;
        txn.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }

    fn db(&self) -> &Database {
        // `db` is only taken by `drop`, after which no method can run.
        self.db
            .as_ref()
            .expect("the database stays open until the store is dropped")
    }

    fn err(&self, err: impl Into<redb::Error>) -> StoreError {
        from_redb(&self.path, err)
    }

    fn encode(&self, value: &impl Serialize) -> Result<Vec<u8>, StoreError> {
        serde_json::to_vec(value)
            .map_err(|err| StoreError::Internal(format!("could not encode a record: {err}")))
    }

    fn decode_meta(&self, id: &str, bytes: &[u8]) -> Result<SessionMeta, StoreError> {
        serde_json::from_slice(bytes).map_err(|err| StoreError::Corrupt {
            path: self.path.clone(),
            detail: format!("the index entry of session {id} cannot be read: {err}"),
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // The sidecar goes while the lock is still held, so it can never be the next holder's.
        // The marker is recorded only after a clean close, from the file as the close left it.
        owner::remove_own(&self.owner_file);
        let closed = self.db.take().map(Database::close);
        match closed {
            Some(Ok(())) => clean::record(&self.path),
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

fn unknown(id: &str) -> StoreError {
    StoreError::UnknownSession { id: id.to_owned() }
}

fn now_ms() -> i64 {
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
