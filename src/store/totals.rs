//! Running totals of what the database stores: how many sessions and how many journal bytes.
//! Kept in the same transaction as every change that moves them, so maintenance can check a
//! disk budget on each write by reading two numbers instead of the whole index; built from
//! the index once when a database from before them is opened.

use super::error::{StoreError, from_redb};
use super::meta::SessionMeta;
use super::schema::{SESSIONS, TOTALS};
use redb::{Database, ReadableDatabase, ReadableTable, TableError, WriteTransaction};
use std::path::Path;

const SESSIONS_KEY: &str = "sessions";
const BYTES_KEY: &str = "transcript_bytes";

/// What the database holds, as of the last commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sessions in the index, archived ones included.
    pub sessions: u64,
    /// Bytes of every session's journal records, as stored.
    pub transcript_bytes: u64,
}

/// A change to the totals made by one transaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Delta {
    pub sessions: i64,
    pub bytes: i64,
}

impl Totals {
    /// These totals after `delta`, never below zero.
    pub(super) fn after(self, delta: Delta) -> Totals {
        Totals {
            sessions: self.sessions.saturating_add_signed(delta.sessions),
            transcript_bytes: self.transcript_bytes.saturating_add_signed(delta.bytes),
        }
    }
}

/// Reads the totals, first building them from the session index when the database has none.
pub(super) fn ensure(db: &Database, path: &Path) -> Result<Totals, StoreError> {
    let read = db.begin_read().map_err(|e| from_redb(path, e))?;
    match read.open_table(TOTALS) {
        Ok(table) => {
            let get = |key| {
                table
                    .get(key)
                    .map(|v| v.map_or(0, |g| g.value()))
                    .map_err(|e| from_redb(path, e))
            };
            return Ok(Totals {
                sessions: get(SESSIONS_KEY)?,
                transcript_bytes: get(BYTES_KEY)?,
            });
        }
        Err(TableError::TableDoesNotExist(_)) => {}
        Err(err) => return Err(from_redb(path, err)),
    }
    drop(read);
    let mut txn = db.begin_write().map_err(|e| from_redb(path, e))?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| from_redb(path, e))?;
    let mut totals = Totals::default();
    {
        let sessions = txn.open_table(SESSIONS).map_err(|e| from_redb(path, e))?;
        for entry in sessions.iter().map_err(|e| from_redb(path, e))? {
            let (_, value) = entry.map_err(|e| from_redb(path, e))?;
            totals.sessions += 1;
            if let Ok(meta) = serde_json::from_slice::<SessionMeta>(value.value()) {
                totals.transcript_bytes += meta.transcript_bytes;
            }
        }
        let mut table = txn.open_table(TOTALS).map_err(|e| from_redb(path, e))?;
        table
            .insert(SESSIONS_KEY, totals.sessions)
            .map_err(|e| from_redb(path, e))?;
        table
            .insert(BYTES_KEY, totals.transcript_bytes)
            .map_err(|e| from_redb(path, e))?;
    }
    txn.commit().map_err(|e| from_redb(path, e))?;
    Ok(totals)
}

/// Adds `delta` to the stored totals, inside the caller's transaction.
pub(super) fn add(txn: &WriteTransaction, delta: Delta) -> Result<(), redb::Error> {
    let mut table = txn.open_table(TOTALS)?;
    for (key, by) in [(SESSIONS_KEY, delta.sessions), (BYTES_KEY, delta.bytes)] {
        if by == 0 {
            continue;
        }
        let now = table.get(key)?.map_or(0, |v| v.value());
        table.insert(key, now.saturating_add_signed(by))?;
    }
    Ok(())
}
