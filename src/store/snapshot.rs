//! Session snapshots: the latest encoded state of each session and the journal position it
//! was taken at, so reopening replays only the events after it. The store keeps the bytes
//! and does not read them; the session owns their format. A snapshot is an optimisation:
//! the journal stays the truth, so snapshots are written without an fsync of their own (the
//! next journal append makes them durable), a session's usually in the next commit of any
//! session rather than in one of their own, and one that is lost or unreadable only means a
//! longer replay.

use super::db::{Access, Store, unknown};
use super::error::StoreError;
use super::schema::{SESSIONS, SNAPSHOTS};
use crate::domain::SessionId;
use redb::{Durability, ReadableDatabase, ReadableTable, TableError, WriteTransaction};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A session's latest snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The last journal position the state includes.
    pub seq: u64,
    /// The session's encoding of its state.
    pub state: Vec<u8>,
}

/// A snapshot taken but not yet written: its session, the journal position it was taken at,
/// and the state.
pub(super) type DueSnapshot = (SessionId, u64, Vec<u8>);

/// Snapshots taken but not yet written, one per session (the latest), each with the
/// journal position it was taken at.
#[derive(Default)]
pub(super) struct Due(Mutex<HashMap<SessionId, (u64, Vec<u8>)>>);

impl Due {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, (u64, Vec<u8>)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `state`, unless a later snapshot of the session is kept already.
    fn keep(&self, id: &SessionId, seq: u64, state: Vec<u8>) {
        let mut due = self.lock();
        if due.get(id).is_none_or(|(held, _)| *held <= seq) {
            due.insert(id.clone(), (seq, state));
        }
    }

    /// Every snapshot kept, for a commit to write.
    pub(super) fn take(&self) -> Vec<DueSnapshot> {
        let mut due = self.lock();
        if due.is_empty() {
            return Vec::new();
        }
        due.drain()
            .map(|(id, (seq, state))| (id, seq, state))
            .collect()
    }

    /// Keeps again the snapshots a failed commit took, but none over a later one.
    pub(super) fn restore(&self, taken: Vec<DueSnapshot>) {
        for (id, seq, state) in taken {
            self.keep(&id, seq, state);
        }
    }

    fn get(&self, id: &SessionId) -> Option<Snapshot> {
        self.lock().get(id).map(|(seq, state)| Snapshot {
            seq: *seq,
            state: state.clone(),
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Drops the snapshot kept for a session that is gone.
    pub(super) fn forget(&self, id: &SessionId) {
        self.lock().remove(id);
    }
}

impl Store {
    /// Replaces the session's snapshot with `state`, taken after journal position `seq`,
    /// in a commit of its own (without an fsync).
    pub fn save_snapshot(&self, id: &SessionId, seq: u64, state: &[u8]) -> Result<(), StoreError> {
        let snapshot = [(id.clone(), seq, state.to_vec())];
        self.write_with(Durability::None, |txn, _| {
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            if sessions
                .get(id.as_str())
                .map_err(|e| self.err(e))?
                .is_none()
            {
                return Err(unknown(id.as_str()));
            }
            drop(sessions);
            self.put_snapshots(txn, &snapshot)
        })
    }

    /// Keeps `state` as the session's snapshot, taken after journal position `seq`, to be
    /// written with the next commit of any session (or when the store closes) rather than in
    /// a transaction of its own: the write that made it due is not held up by it, and the
    /// disk is not asked for one more commit. Meanwhile [`Store::latest_snapshot`] answers
    /// with it.
    pub fn save_snapshot_soon(&self, id: &SessionId, seq: u64, state: Vec<u8>) {
        self.appends.snapshots.keep(id, seq, state);
    }

    /// Writes `snapshots` in `txn`: each replaces its session's, unless that one was taken
    /// later; one of a session no longer stored is dropped.
    pub(super) fn put_snapshots(
        &self,
        txn: &WriteTransaction,
        snapshots: &[DueSnapshot],
    ) -> Result<(), StoreError> {
        if snapshots.is_empty() {
            return Ok(());
        }
        let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        let mut table = txn.open_table(SNAPSHOTS).map_err(|e| self.err(e))?;
        for (id, seq, state) in snapshots {
            if sessions
                .get(id.as_str())
                .map_err(|e| self.err(e))?
                .is_none()
            {
                continue;
            }
            let later = table
                .get(id.as_str())
                .map_err(|e| self.err(e))?
                .is_some_and(|held| held_seq(held.value()).is_some_and(|held| held > *seq));
            if later {
                continue;
            }
            let mut value = Vec::with_capacity(8 + state.len());
            value.extend_from_slice(&seq.to_le_bytes());
            value.extend_from_slice(state);
            table
                .insert(id.as_str(), value.as_slice())
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The session's latest snapshot, if it has one.
    pub fn latest_snapshot(&self, id: &SessionId) -> Result<Option<Snapshot>, StoreError> {
        if let Some(due) = self.appends.snapshots.get(id) {
            return Ok(Some(due));
        }
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

/// The journal position a stored snapshot value was taken at.
fn held_seq(value: &[u8]) -> Option<u64> {
    value.first_chunk::<8>().map(|seq| u64::from_le_bytes(*seq))
}
