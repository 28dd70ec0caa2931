//! Commits that are not durable yet, kept in memory until one is.
//!
//! A session's creation and the records a lazy append writes (see
//! [`Store::append_lazily`]) are committed without an fsync; the next durable commit, a
//! flush or the clean close makes them durable. A crash before then loses them, which costs
//! nothing acknowledged. But an I/O failure while the process goes on (a full disk) reopens
//! the file, and redb rolls it back to its last durable commit: what was kept here is then
//! written again, in order and durably, before any other write, so the file matches what
//! the sessions in memory were told.

use super::append::Append;
use super::codec;
use super::db::{Attempt, Store, encode};
use super::error::StoreError;
use super::meta::SessionMeta;
use super::schema::SESSIONS;
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
                    // have changed it since).
                    let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
                    let there = sessions
                        .get(meta.id.as_str())
                        .map_err(|e| self.err(e))?
                        .is_some();
                    drop(sessions);
                    if !there {
                        let json = encode(codec::encode_meta(meta))?;
                        self.create_in(&txn, Attempt::First, meta, &json)?;
                    }
                }
                Lazy::Appended(append) => {
                    // A retry: records already where they were written are not written twice.
                    let base = Cell::new(append.base.get().copied());
                    self.append_in(&txn, Attempt::Retry, append, &base)?;
                }
            }
        }
        txn.commit().map_err(|e| self.err(e))?;
        tracing::info!(
            commits = lazy.len(),
            "wrote again what the reopen rolled back"
        );
        lazy.clear();
        Ok(())
    }
}
