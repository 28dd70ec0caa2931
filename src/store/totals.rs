//! Running totals of what the database stores: how many sessions and how many journal bytes.
//! Kept in the same transaction as every change that moves them, so maintenance can check a
//! disk budget on each write by reading two numbers instead of the whole index; built from
//! the index once when a database from before them is opened.

use super::error::{StoreError, from_redb};
use super::schema;
use super::schema::TOTALS;
use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};
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
    if schema::is_missing(db, path, TOTALS)? {
        let mut totals = Totals::default();
        schema::derive_from_index(db, path, TOTALS, |table, _, meta| {
            totals.sessions += 1;
            totals.transcript_bytes += meta.map_or(0, |m| m.transcript_bytes);
            table.insert(SESSIONS_KEY, totals.sessions)?;
            table.insert(BYTES_KEY, totals.transcript_bytes)?;
            Ok(())
        })?;
        return Ok(totals);
    }
    let read = db.begin_read().map_err(|e| from_redb(path, e))?;
    let table = read.open_table(TOTALS).map_err(|e| from_redb(path, e))?;
    let get = |key| {
        table
            .get(key)
            .map(|v| v.map_or(0, |g| g.value()))
            .map_err(|e| from_redb(path, e))
    };
    Ok(Totals {
        sessions: get(SESSIONS_KEY)?,
        transcript_bytes: get(BYTES_KEY)?,
    })
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
