//! The tables of the session database and the storage format version that describes them.
//!
//! Values are JSON (serde_json) so old records stay readable as types gain fields with serde
//! defaults; only the search table, which the picker reads whole, has a compact encoding of its
//! own (see `search`). The `tern_info` table records the format version; a file with tables but without
//! it is some other program's redb database, which tern refuses rather than writes into.

use super::error::{StoreError, from_redb};
use super::meta::SessionMeta;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use std::path::Path;

/// Session index: session id → `SessionMeta` as JSON.
pub(super) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");

/// Journal: (session id, seq) → `JournalRecord` as JSON. The tuple key keeps each session's
/// records together and in seq order, so a load is one range scan.
pub(super) const JOURNAL: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("journal");

/// Activity index: (last activity in ms, session id) → nothing; most recent last.
pub(super) const ACTIVITY: TableDefinition<(i64, &str), ()> = TableDefinition::new("activity");

/// Search records: session id → the text the resume picker searches, in the compact
/// encoding of `search` (not JSON: the picker reads every record at once).
pub(super) const SEARCH: TableDefinition<&str, &[u8]> = TableDefinition::new("search");

/// Session keys: key → the id of the session it currently talks to.
pub(super) const KEYS: TableDefinition<&str, &str> = TableDefinition::new("keys");

/// Snapshots: session id → the last journal position included (8 bytes, little-endian)
/// followed by the session's encoding of its state.
pub(super) const SNAPSHOTS: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshots");

/// Tombstones: session id → a framed tombstone, for every session ever deleted. A repair
/// that finds a deleted session's old records in the file's free pages leaves them deleted.
pub(super) const DELETED: TableDefinition<&str, &[u8]> = TableDefinition::new("deleted");

/// Running totals: `sessions` and `transcript_bytes` → their value (see `totals`).
pub(super) const TOTALS: TableDefinition<&str, u64> = TableDefinition::new("totals");

/// Facts about the database itself, such as `format`.
pub(super) const INFO: TableDefinition<&str, u64> = TableDefinition::new("tern_info");

/// Key in `INFO` holding the storage format version.
pub(super) const FORMAT_KEY: &str = "format";

/// The storage format this build writes and reads. Raise it when a change needs a migration.
/// 1: plain JSON values; 2: journal records and index entries framed (see `frame`).
pub(super) const FORMAT_VERSION: u64 = 2;

/// What an opened database holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Contents {
    /// No tables yet: a new file, or one whose first commit never happened.
    Empty,
    /// A tern database in a format this build reads: `format` or an older one.
    Tern { format: u64 },
}

/// Inspects the tables of `db` without writing, refusing foreign and newer databases.
pub(super) fn inspect(db: &Database, path: &Path) -> Result<Contents, StoreError> {
    let txn = db.begin_read().map_err(|e| from_redb(path, e))?;
    let names: Vec<String> = txn
        .list_tables()
        .map_err(|e| from_redb(path, e))?
        .map(|table| table.name().to_owned())
        .collect();
    if names.is_empty() {
        return Ok(Contents::Empty);
    }
    if !names.iter().any(|name| name == INFO.name()) {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "it is a redb database, but tern did not create it (its tables: {})",
                names.join(", ")
            ),
        });
    }
    let info = txn.open_table(INFO).map_err(|e| from_redb(path, e))?;
    let format = info
        .get(FORMAT_KEY)
        .map_err(|e| from_redb(path, e))?
        .map(|guard| guard.value());
    match format {
        // A marker far ahead of any tern is damage, not a newer version.
        Some(found) if found > FORMAT_VERSION + 16 => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!("its format marker is damaged (it reads {found})"),
        }),
        Some(found) if found > FORMAT_VERSION => Err(StoreError::UnsupportedFormat {
            path: path.to_owned(),
            format: "table format",
            found,
            supported: FORMAT_VERSION,
        }),
        Some(format) => Ok(Contents::Tern { format }),
        None => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: "its format version is missing".to_owned(),
        }),
    }
}

/// Whether the database has no table `table` yet (a database from before it).
pub(super) fn is_missing<K: redb::Key + 'static, V: redb::Value + 'static>(
    db: &Database,
    path: &Path,
    table: TableDefinition<K, V>,
) -> Result<bool, StoreError> {
    let read = db.begin_read().map_err(|e| from_redb(path, e))?;
    match read.open_table(table) {
        Ok(_) => Ok(false),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(true),
        Err(err) => Err(from_redb(path, err)),
    }
}

/// Builds `table`, derived from the session index, in one durable commit: `add` is called
/// once per index entry, with the entry decoded (or `None` when it does not decode).
pub(super) fn derive_from_index<K: redb::Key + 'static, V: redb::Value + 'static>(
    db: &Database,
    path: &Path,
    table: TableDefinition<K, V>,
    mut add: impl FnMut(
        &mut redb::Table<'_, K, V>,
        &str,
        Option<SessionMeta>,
    ) -> Result<(), redb::Error>,
) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(|e| from_redb(path, e))?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| from_redb(path, e))?;
    {
        let mut target = txn.open_table(table).map_err(|e| from_redb(path, e))?;
        let sessions = txn.open_table(SESSIONS).map_err(|e| from_redb(path, e))?;
        for entry in sessions.iter().map_err(|e| from_redb(path, e))? {
            let (key, value) = entry.map_err(|e| from_redb(path, e))?;
            let meta = super::codec::decode_meta(key.value(), value.value()).ok();
            add(&mut target, key.value(), meta).map_err(|e| from_redb(path, e))?;
        }
    }
    txn.commit().map_err(|e| from_redb(path, e))
}

/// Creates the tables and records the format version, in one durable commit.
pub(super) fn initialize(db: &Database, path: &Path) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(|e| from_redb(path, e))?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| from_redb(path, e))?;
    {
        txn.open_table(SESSIONS).map_err(|e| from_redb(path, e))?;
        txn.open_table(JOURNAL).map_err(|e| from_redb(path, e))?;
        txn.open_table(DELETED).map_err(|e| from_redb(path, e))?;
        let mut info = txn.open_table(INFO).map_err(|e| from_redb(path, e))?;
        info.insert(FORMAT_KEY, FORMAT_VERSION)
            .map_err(|e| from_redb(path, e))?;
    }
    txn.commit().map_err(|e| from_redb(path, e))
}
