//! The activity index: (last activity, session id) for every session, so the most recently
//! used sessions come first from one short range read, without decoding the whole index. It is
//! kept in the same transaction as every change to a session's entry, and built from the
//! session index when a database from before it is opened.

use super::db::{Access, Store};
use super::error::{StoreError, from_redb};
use super::meta::SessionMeta;
use super::schema::{ACTIVITY, SESSIONS};
use redb::{Database, ReadableDatabase, ReadableTable, TableError, WriteTransaction};
use std::path::Path;

/// Creates the index from the session index when the database has none yet.
pub(super) fn ensure(db: &Database, path: &Path) -> Result<(), StoreError> {
    let read = db.begin_read().map_err(|e| from_redb(path, e))?;
    match read.open_table(ACTIVITY) {
        Ok(_) => return Ok(()),
        Err(TableError::TableDoesNotExist(_)) => {}
        Err(err) => return Err(from_redb(path, err)),
    }
    drop(read);
    let mut txn = db.begin_write().map_err(|e| from_redb(path, e))?;
    txn.set_durability(redb::Durability::Immediate)
        .map_err(|e| from_redb(path, e))?;
    {
        let sessions = txn.open_table(SESSIONS).map_err(|e| from_redb(path, e))?;
        let mut activity = txn.open_table(ACTIVITY).map_err(|e| from_redb(path, e))?;
        for entry in sessions.iter().map_err(|e| from_redb(path, e))? {
            let (key, value) = entry.map_err(|e| from_redb(path, e))?;
            // An entry that does not decode is listed by nothing anyway.
            if let Ok(meta) = serde_json::from_slice::<SessionMeta>(value.value()) {
                activity
                    .insert((meta.updated_at_ms, key.value()), ())
                    .map_err(|e| from_redb(path, e))?;
            }
        }
    }
    txn.commit().map_err(|e| from_redb(path, e))
}

/// Moves `id` from `old` to `new` in the index, inside the caller's transaction.
pub(super) fn touch(
    txn: &WriteTransaction,
    id: &str,
    old: Option<i64>,
    new: Option<i64>,
) -> Result<(), redb::Error> {
    let mut activity = txn.open_table(ACTIVITY)?;
    if let Some(old) = old {
        activity.remove((old, id))?;
    }
    if let Some(new) = new {
        activity.insert((new, id), ())?;
    }
    Ok(())
}

impl Store {
    /// Up to `limit` sessions that `keep` accepts, most recently used first. Reads the index
    /// entries of the sessions it returns (and of those `keep` turns down), not all of them.
    pub fn recent(
        &self,
        limit: usize,
        keep: impl Fn(&SessionMeta) -> bool,
    ) -> Result<Vec<SessionMeta>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let activity = txn.open_table(ACTIVITY).map_err(|e| self.err(e))?;
            let mut found = Vec::new();
            for entry in activity.iter().map_err(|e| self.err(e))?.rev() {
                if found.len() >= limit {
                    break;
                }
                let (key, _) = entry.map_err(|e| self.err(e))?;
                let (_, id) = key.value();
                let Some(value) = sessions.get(id).map_err(|e| self.err(e))? else {
                    continue;
                };
                match self.decode_meta(id, value.value()) {
                    Ok(meta) if keep(&meta) => found.push(meta),
                    Ok(_) => {}
                    Err(err) => tracing::warn!(%err, "skipping a session index entry"),
                }
            }
            Ok(found)
        })
    }
}
