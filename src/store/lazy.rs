//! Commits that are not durable yet, kept in memory until one is.
//!
//! A session's creation and the records a lazy append writes (see
//! [`Store::append_lazily`]) are committed without an fsync; the next durable commit, a
//! flush or the clean close makes them durable. A crash before then loses them, which costs
//! nothing acknowledged. But an I/O failure while the process goes on (a full disk) reopens
//! the file, and redb rolls it back to its last durable commit: what was kept here is then
//! written again, in order and durably, before any other write, so the file matches what
//! the sessions in memory were told.
//!
//! The same writing again recovers, at the open after a crash, what the write-ahead log
//! (`wal`) kept of those commits: acknowledged inputs whose commit was not durable yet.

use super::append::Append;
use super::db::{Attempt, Store, encode};
use super::error::StoreError;
use super::meta::SessionMeta;
use super::schema::{DELETED, SESSIONS};
use super::wal::{Entry, Kind};
use super::{codec, frame};
use crate::domain::SessionId;
use redb::{Database, Durability, ReadableTable};
use std::cell::Cell;
use std::sync::{Arc, PoisonError};

/// What a commit that is not durable yet wrote.
pub(crate) enum Lazy {
    Created(Box<SessionMeta>),
    Appended(Arc<Append>),
}

impl Store {
    /// Commits `body` without waiting for the disk; `kept` says what it wrote.
    pub(super) fn write_lazily<T>(
        &self,
        kept: impl Fn() -> Vec<Lazy>,
        body: impl Fn(&redb::WriteTransaction, Attempt) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.commit_with(Durability::None, kept, body)
    }

    /// Writes again on `db`, just reopened, what the commits that were not durable wrote.
    pub(super) fn restore_lazy(&self, db: &Database) -> Result<(), StoreError> {
        let mut lazy = self.lazy.lock().unwrap_or_else(PoisonError::into_inner);
        if lazy.is_empty() {
            return Ok(());
        }
        let mut txn = db.begin_write().map_err(|e| self.err(e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| self.err(e))?;
        for kept in lazy.iter() {
            match kept {
                Lazy::Created(meta) => {
                    // Already there when the commit that failed landed after all (and may
                    // have changed it since); a session deleted since stays deleted.
                    let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
                    let deleted = txn.open_table(DELETED).map_err(|e| self.err(e))?;
                    let id = meta.id.as_str();
                    let there = sessions.get(id).map_err(|e| self.err(e))?.is_some()
                        || deleted.get(id).map_err(|e| self.err(e))?.is_some();
                    drop((sessions, deleted));
                    if !there {
                        let json = encode(codec::encode_meta(meta))?;
                        self.create_in(&txn, Attempt::First, meta, &json)?;
                    }
                }
                Lazy::Appended(append) => {
                    // A retry: records already where they were written are not written twice.
                    let base = Cell::new(append.base.get().copied());
                    match self.append_in(&txn, Attempt::Retry, append, &base) {
                        // Deleted since: nothing of it is written again.
                        Err(StoreError::UnknownSession { id }) => {
                            tracing::debug!(%id, "not writing again the records of a session deleted since");
                        }
                        other => drop(other?),
                    }
                }
            }
        }
        let epoch = self.next_epoch(&txn)?;
        txn.commit().map_err(|e| self.err(e))?;
        tracing::info!(commits = lazy.len(), "wrote again what was not durable yet");
        self.after_durable(&mut lazy, epoch);
        Ok(())
    }

    /// Writes again, durably, what the write-ahead log kept of commits that were not durable
    /// when the last process stopped: what it read at the open.
    pub(super) fn recover_logged(&self, found: Vec<Entry>) -> Result<(), StoreError> {
        if found.is_empty() {
            return Ok(());
        }
        let mut kept = Vec::with_capacity(found.len());
        for entry in &found {
            match self.decode_logged(entry) {
                Ok(lazy) => kept.push(lazy),
                // Checksummed, so written by a tern that stored otherwise: what follows
                // cannot be trusted to follow it.
                Err(detail) => {
                    tracing::warn!(path = %self.wal_path().display(), %detail, "the write-ahead log ends at an entry that cannot be read");
                    break;
                }
            }
        }
        *self.lazy.lock().unwrap_or_else(PoisonError::into_inner) = kept;
        self.run(super::db::Access::Write, |db, _| {
            self.restore_lazy(db)?;
            // The totals were read before what was written again counted in them.
            self.reload_totals(db)
        })
    }

    fn decode_logged(&self, entry: &Entry) -> Result<Lazy, String> {
        match entry.kind {
            Kind::Created => {
                let (frame, _) = frame::read(&entry.payload).map_err(|e| e.to_string())?;
                let meta = codec::decode_meta(frame.id, &entry.payload)?;
                Ok(Lazy::Created(Box::new(meta)))
            }
            Kind::Appended => {
                let mut rest = entry.payload.as_slice();
                let (mut id, mut events, mut first) = (None, Vec::new(), None);
                while !rest.is_empty() {
                    let (frame, len) = frame::read(rest).map_err(|e| e.to_string())?;
                    let record = codec::decode_record(frame.id, &rest[..len])?;
                    if id.as_ref().is_some_and(|id: &String| id != frame.id) {
                        return Err("records of two sessions in one entry".to_owned());
                    }
                    id.get_or_insert_with(|| frame.id.to_owned());
                    first.get_or_insert((record.seq, record.at_ms));
                    events.push(record.event);
                    rest = &rest[len..];
                }
                let (Some(id), Some((seq, at_ms))) = (id, first) else {
                    return Err("an entry with no records".to_owned());
                };
                let base = seq.saturating_sub(1);
                let append = Append::restored(SessionId::from_string(id), events, at_ms, base);
                Ok(Lazy::Appended(Arc::new(append)))
            }
        }
    }
}
