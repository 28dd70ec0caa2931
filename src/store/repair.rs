//! `tern doctor --repair`: a damaged session database is moved aside, never deleted, and
//! what redb can still read of it is copied into a fresh database.
//!
//! The copy is made from a second copy of the damaged file, so the file set aside stays
//! byte-for-byte what was found. Each table is copied entry by entry; an entry or a table
//! that cannot be read is skipped and counted, and the rest still comes across.

use super::db::Store;
use super::error::StoreError;
use super::probe;
use super::schema::{ACTIVITY, JOURNAL, SEARCH, SESSIONS, SNAPSHOTS, TOTALS};
use super::{activity, search, totals};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableError};
use std::path::{Path, PathBuf};

/// What a repair did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// The database opened cleanly; nothing was touched.
    Healthy,
    /// The damaged file was moved to `moved_to`, and a fresh database holds what could be read.
    Rebuilt {
        moved_to: PathBuf,
        sessions: usize,
        records: usize,
        /// Entries (or whole tables) that could not be read and were left behind.
        unreadable: usize,
        /// Why nothing could be read at all, when that is the case.
        failure: Option<String>,
    },
}

/// Checks the database at `path` and, when it is damaged, rebuilds it as described above.
/// Errors other than damage (the database is in use, a newer format, no permission) are
/// returned as they are and nothing is moved.
pub fn repair(path: &Path) -> Result<Repair, StoreError> {
    // The read-only check first: a healthy file is not even opened for writing.
    match probe::verify(path, true) {
        Ok(()) => return Ok(Repair::Healthy),
        Err(StoreError::Corrupt { .. }) => {}
        Err(other) => return Err(other),
    }
    let io = |action: &'static str, path: &Path, source| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let moved_to = with_suffix(path, &format!(".damaged-{stamp}"));
    std::fs::rename(path, &moved_to).map_err(|e| io("move aside", path, e))?;
    // The scratch copy redb may repair in place; the file set aside stays as it was.
    let scratch = with_suffix(path, &format!(".salvage-{stamp}"));
    std::fs::copy(&moved_to, &scratch).map_err(|e| io("copy", &moved_to, e))?;
    let salvaged = salvage(&scratch, path);
    let _ = std::fs::remove_file(&scratch);
    let (sessions, records, unreadable, failure) = match salvaged {
        Ok(counts) => (counts.0, counts.1, counts.2, None),
        Err(err) => {
            // Nothing readable: start an empty database so tern works again.
            Store::open(path)?;
            (0, 0, 0, Some(err))
        }
    };
    Ok(Repair::Rebuilt {
        moved_to,
        sessions,
        records,
        unreadable,
        failure,
    })
}

/// Copies what can be read of `from` into a new tern database at `into`: (sessions, journal
/// records, unreadable entries). A damaged file can make the storage engine panic while it
/// reads; each table is copied in its own transaction with the panic contained, so one bad
/// table costs only itself.
pub(super) fn salvage(from: &Path, into: &Path) -> Result<(usize, usize, usize), String> {
    let opened = contained(|| Database::builder().create(from));
    let source = match opened {
        Some(Ok(db)) => db,
        Some(Err(err)) => return Err(format!("redb cannot open it: {err}")),
        None => return Err("redb cannot open it".to_owned()),
    };
    // A fresh database through the store, so it gets tern's format marker.
    drop(Store::open(into).map_err(|e| e.to_string())?);
    let target = Database::create(into).map_err(|e| e.to_string())?;
    let mut unreadable = 0;
    let sessions = copy_counted(&source, &target, SESSIONS, &mut unreadable);
    let records = copy_counted(&source, &target, JOURNAL, &mut unreadable);
    copy_counted(&source, &target, SNAPSHOTS, &mut unreadable);
    // The activity index, the search table and the totals are rebuilt from the sessions that
    // came across.
    let txn = target.begin_write().map_err(|e| e.to_string())?;
    txn.delete_table(ACTIVITY).map_err(|e| e.to_string())?;
    txn.delete_table(SEARCH).map_err(|e| e.to_string())?;
    txn.delete_table(TOTALS).map_err(|e| e.to_string())?;
    txn.commit().map_err(|e| e.to_string())?;
    activity::ensure(&target, into).map_err(|e| e.to_string())?;
    search::ensure(&target, into).map_err(|e| e.to_string())?;
    totals::ensure(&target, into).map_err(|e| e.to_string())?;
    Ok((sessions, records, unreadable))
}

/// Copies `table` in its own transaction with any panic contained; returns how many entries
/// came across and adds the ones that did not (or 1 for a table lost whole) to `unreadable`.
fn copy_counted<K: redb::Key + 'static, V: redb::Value + 'static>(
    source: &Database,
    target: &Database,
    table: TableDefinition<K, V>,
    unreadable: &mut usize,
) -> usize
where
    for<'a> K::SelfType<'a>: std::borrow::Borrow<K::SelfType<'a>>,
{
    match contained(|| copy_in_own_transaction(source, target, table)) {
        Some(Ok((copied, skipped))) => {
            *unreadable += skipped;
            copied
        }
        _ => {
            *unreadable += 1;
            0
        }
    }
}

/// Runs `read` with a panic in it turned into `None`.
fn contained<T>(read: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).ok()
}

/// Copies `table` from `source` to `target` in one transaction: (copied, skipped).
fn copy_in_own_transaction<K: redb::Key + 'static, V: redb::Value + 'static>(
    source: &Database,
    target: &Database,
    table: TableDefinition<K, V>,
) -> Result<(usize, usize), redb::Error>
where
    for<'a> K::SelfType<'a>: std::borrow::Borrow<K::SelfType<'a>>,
{
    let read = source.begin_read()?;
    let write = target.begin_write()?;
    let mut skipped = 0;
    let copied = copy_table(&read, &write, table, &mut skipped);
    write.commit()?;
    Ok((copied, skipped))
}

/// Copies every readable entry of `table`; returns how many came across.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    read: &redb::ReadTransaction,
    write: &redb::WriteTransaction,
    table: TableDefinition<K, V>,
    unreadable: &mut usize,
) -> usize
where
    for<'a> K::SelfType<'a>: std::borrow::Borrow<K::SelfType<'a>>,
{
    let source = match read.open_table(table) {
        Ok(source) => source,
        Err(TableError::TableDoesNotExist(_)) => return 0,
        Err(_) => {
            *unreadable += 1;
            return 0;
        }
    };
    let Ok(mut target) = write.open_table(table) else {
        *unreadable += 1;
        return 0;
    };
    let Ok(entries) = source.iter() else {
        *unreadable += 1;
        return 0;
    };
    let mut copied = 0;
    for entry in entries {
        match entry {
            Ok((key, value)) => {
                if target.insert(key.value(), value.value()).is_ok() {
                    copied += 1;
                } else {
                    *unreadable += 1;
                }
            }
            Err(_) => *unreadable += 1,
        }
    }
    copied
}

/// `path` with `suffix` added to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
