//! Session snapshots: the latest encoded state of each session and the journal position it
//! was taken at, so reopening replays only the events after it. The store keeps the bytes
//! and does not read them; the session owns their format. A snapshot is an optimisation:
//! the journal stays the truth, so snapshots are written without an fsync of their own (the
//! next journal append makes them durable) and one that is lost or unreadable only means a
//! longer replay.

use super::db::{Access, Store, unknown};
use super::error::StoreError;
use super::schema::{SESSIONS, SNAPSHOTS};
use crate::domain::SessionId;
use redb::{Durability, ReadableDatabase, ReadableTable, TableError};

/// A session's latest snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The last journal position the state includes.
    pub seq: u64,
    /// The session's encoding of its state.
    pub state: Vec<u8>,
}

impl Store {
    /// Replaces the session's snapshot with `state`, taken after journal position `seq`.
    pub fn save_snapshot(&self, id: &SessionId, seq: u64, state: &[u8]) -> Result<(), StoreError> {
        let mut value = Vec::with_capacity(8 + state.len());
        value.extend_from_slice(&seq.to_le_bytes());
        value.extend_from_slice(state);
        self.write_with(Durability::None, |txn, _| {
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            if sessions
                .get(id.as_str())
                .map_err(|e| self.err(e))?
                .is_none()
            {
                return Err(unknown(id.as_str()));
            }
            let mut snapshots = txn.open_table(SNAPSHOTS).map_err(|e| self.err(e))?;
            snapshots
                .insert(id.as_str(), value.as_slice())
                .map_err(|e| self.err(e))?;
            Ok(())
        })
    }

    /// The session's latest snapshot, if it has one.
    pub fn latest_snapshot(&self, id: &SessionId) -> Result<Option<Snapshot>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let snapshots = match txn.open_table(SNAPSHOTS) {
                Ok(table) => table,
                // A database from before snapshots, or none taken yet.
                Err(TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(err) => return Err(self.err(err)),
            };
            let Some(value) = snapshots.get(id.as_str()).map_err(|e| self.err(e))? else {
                return Ok(None);
            };
            let bytes = value.value();
            let Some((seq, state)) = bytes.split_first_chunk::<8>() else {
                tracing::warn!(session = %id, "ignoring a snapshot too short to hold its position");
                return Ok(None);
            };
            Ok(Some(Snapshot {
                seq: u64::from_le_bytes(*seq),
                state: state.to_vec(),
            }))
        })
    }
}
