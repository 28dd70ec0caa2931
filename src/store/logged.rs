//! How the store uses its write-ahead log (`wal`): what a commit that is not durable writes
//! to it, the epoch a durable commit records, and opening the log beside the database.

use super::append::Logged;
use super::db::{Store, beside};
use super::error::{StoreError, from_redb};
use super::lazy::Lazy;
use super::wal::{self, Wal};
use super::{codec, schema};
use redb::{Database, ReadableDatabase, WriteTransaction};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

/// Key in the `tern_info` table holding the epoch the write-ahead log is filled under.
const WAL_EPOCH_KEY: &str = "wal_epoch";

impl Store {
    /// Records in `txn`, a durable commit's, the epoch the write-ahead log is filled under
    /// after it; [`Store::after_durable`] applies it once the commit is made.
    pub(super) fn next_epoch(&self, txn: &WriteTransaction) -> Result<Option<u64>, StoreError> {
        let Some(wal) = &self.wal else {
            return Ok(None);
        };
        let epoch = wal.epoch() + 1;
        let mut info = txn.open_table(schema::INFO).map_err(|e| self.err(e))?;
        info.insert(WAL_EPOCH_KEY, epoch).map_err(|e| self.err(e))?;
        Ok(Some(epoch))
    }

    /// After a durable commit: nothing is kept for later any more, and the write-ahead log
    /// starts again under the commit's `epoch`.
    pub(super) fn after_durable(&self, lazy: &mut Vec<Lazy>, epoch: Option<u64>) {
        self.count_sync();
        self.lazy_pending.store(false, Ordering::Release);
        self.unlogged.store(false, Ordering::Release);
        lazy.clear();
        if let (Some(wal), Some(epoch)) = (&self.wal, epoch) {
            wal.refill(epoch);
        }
    }

    pub(super) fn count_sync(&self) {
        self.durable_commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Holds every sync of the write-ahead log until what it returns is dropped, for a test
    /// of what goes on while the disk is slow.
    #[cfg(test)]
    pub(crate) fn hold_syncs(&self) -> super::wal::held::Hold {
        super::wal::held::hold(&self.wal_path())
    }

    pub(super) fn wal_path(&self) -> PathBuf {
        beside(&self.path, ".wal")
    }

    /// Writes what a commit that is not durable stored to the write-ahead log.
    pub(super) fn log_ahead(&self, kept: &[Lazy]) -> Logged {
        let Some(wal) = &self.wal else {
            return Logged::Later;
        };
        let mut entries: Vec<(wal::Kind, Vec<u8>)> = Vec::with_capacity(kept.len());
        for kept in kept {
            match kept {
                Lazy::Created(meta) => match codec::encode_meta(meta) {
                    Ok(bytes) => entries.push((wal::Kind::Created, bytes)),
                    // Not in the log, nor anything after it: the commit waits for a durable
                    // one instead.
                    Err(_) => {
                        wal.refuse();
                        return Logged::Later;
                    }
                },
                Lazy::Appended(append) => {
                    // Taken: the log is all that needs them (a retry encodes them again), and
                    // the append stays kept until a durable commit.
                    let records = std::mem::take(
                        &mut *append.stored.lock().unwrap_or_else(PoisonError::into_inner),
                    );
                    if !records.is_empty() {
                        entries.push((wal::Kind::Appended, records));
                    }
                }
            }
        }
        let views: Vec<(wal::Kind, &[u8])> = entries
            .iter()
            .map(|(kind, bytes)| (*kind, bytes.as_slice()))
            .collect();
        match wal.write(&views) {
            Ok(Some(at)) => Logged::At(at),
            Ok(None) => Logged::Later,
            Err(err) => {
                tracing::warn!(path = %wal.path().display(), %err, "could not write the write-ahead log");
                Logged::Later
            }
        }
    }
}

/// Opens the write-ahead log beside the database at `path`, and reads what it holds when
/// `recover` is set. A log that cannot be opened is done without, with a warning: appends
/// are then made durable by the database's own commits. For a `fresh` database, whose
/// epochs start again, an old log is emptied.
pub(super) fn open_wal(
    db: &Database,
    path: &Path,
    recover: bool,
    fresh: bool,
) -> Result<(Option<Wal>, Vec<wal::Entry>), StoreError> {
    let epoch = {
        let txn = db.begin_read().map_err(|e| from_redb(path, e))?;
        match txn.open_table(schema::INFO) {
            Ok(info) => info
                .get(WAL_EPOCH_KEY)
                .map_err(|e| from_redb(path, e))?
                .map_or(0, |epoch| epoch.value()),
            Err(redb::TableError::TableDoesNotExist(_)) => 0,
            Err(e) => return Err(from_redb(path, e)),
        }
    };
    let wal_path = beside(path, ".wal");
    let opened = Wal::open(&wal_path, epoch, recover).and_then(|(wal, found)| {
        if fresh {
            wal.clear()?;
        }
        Ok((wal, found))
    });
    match opened {
        Ok((wal, found)) => Ok((Some(wal), found)),
        // What it holds may be all that is left of acknowledged inputs: not passed over.
        Err(source) if recover && wal_path.exists() => Err(StoreError::Io {
            action: "read the write-ahead log",
            path: wal_path,
            source,
        }),
        Err(err) => {
            tracing::warn!(path = %wal_path.display(), %err, "could not open the write-ahead log; every input will wait for a durable commit of the database");
            Ok((None, Vec::new()))
        }
    }
}
