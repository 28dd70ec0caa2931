//! Session keys: which session a key (`cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, …) is
//! currently talking to. Set when a session is created for the key; a reset will point the
//! key at a new session.

use super::db::{Access, Store, StoreChange, unknown};
use super::error::StoreError;
use super::meta::{Overrides, Permissions, SessionMeta};
use super::schema::{KEYS, SESSIONS};
use super::search;
use super::totals::Delta;
use crate::domain::{SessionId, SessionKey};
use redb::{ReadableDatabase, ReadableTable, TableError, WriteTransaction};

/// Points `key` at session `id`, inside the caller's transaction.
pub(super) fn bind(txn: &WriteTransaction, key: &str, id: &str) -> Result<(), redb::Error> {
    txn.open_table(KEYS)?.insert(key, id)?;
    Ok(())
}

impl Store {
    /// Marks a session archived at `at_ms`: kept with its transcript, listed apart, and the
    /// first to go when maintenance needs room.
    pub fn archive_session(&self, id: &SessionId, at_ms: i64) -> Result<(), StoreError> {
        self.update_meta(id, |meta| {
            meta.archived_at_ms.get_or_insert(at_ms);
        })?;
        self.committed(StoreChange::Archived(id), Delta::default());
        Ok(())
    }

    /// Records where the session's folder is (after its data dir moved).
    pub fn set_session_dir(&self, id: &SessionId, dir: &std::path::Path) -> Result<(), StoreError> {
        let dir = dir.to_owned();
        self.update_meta(id, move |meta| meta.session_dir = Some(dir.clone()))
    }

    /// Records the provider and model a session goes on with (asked for when resuming it),
    /// used again when it is resumed without either.
    pub fn set_overrides(&self, id: &SessionId, overrides: &Overrides) -> Result<(), StoreError> {
        let overrides = overrides.clone();
        self.update_meta(id, move |meta| meta.overrides = overrides.clone())
    }

    /// Changes what a session was given for itself (its approval mode, its tool set) as
    /// `change` says, in one transaction, so two changes at once both hold.
    pub fn change_permissions(
        &self,
        id: &SessionId,
        change: impl Fn(&mut Permissions),
    ) -> Result<(), StoreError> {
        self.update_meta(id, |meta| change(&mut meta.permissions))
    }

    /// Changes a session's index entry in place, durably; its activity time stays.
    fn update_meta(
        &self,
        id: &SessionId,
        change: impl Fn(&mut SessionMeta),
    ) -> Result<(), StoreError> {
        self.write(|txn, _| {
            let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let mut meta = match sessions.get(id.as_str()).map_err(|e| self.err(e))? {
                Some(value) => self.decode_meta(id.as_str(), value.value())?,
                None => return Err(unknown(id.as_str())),
            };
            let search_before = search::encode(&meta);
            change(&mut meta);
            meta.revision += 1;
            let json = super::db::encode(super::codec::encode_meta(&meta))?;
            sessions
                .insert(id.as_str(), json.as_slice())
                .map_err(|e| self.err(e))?;
            search::sync(txn, id.as_str(), Some(&search_before), Some(&meta))
                .map_err(|e| self.err(e))?;
            Ok(())
        })
    }

    /// Points `key` at session `id` (a past session resumed under its key), which is then no
    /// longer an archive.
    pub fn point_key(&self, key: &SessionKey, id: &SessionId) -> Result<(), StoreError> {
        self.update_meta(id, |meta| meta.archived_at_ms = None)?;
        self.write(|txn, _| bind(txn, key.as_str(), id.as_str()).map_err(|e| self.err(e)))
    }

    /// The session `key` currently talks to, if any.
    pub fn session_for_key(&self, key: &SessionKey) -> Result<Option<SessionMeta>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let keys = match txn.open_table(KEYS) {
                Ok(keys) => keys,
                Err(TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(err) => return Err(self.err(err)),
            };
            let Some(id) = keys.get(key.as_str()).map_err(|e| self.err(e))? else {
                return Ok(None);
            };
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let id = id.value().to_owned();
            match sessions.get(id.as_str()).map_err(|e| self.err(e))? {
                Some(value) => self.decode_meta(&id, value.value()).map(Some),
                // The session was removed (maintenance): the key starts afresh.
                None => Ok(None),
            }
        })
    }
}
