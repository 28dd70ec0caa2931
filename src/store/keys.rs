//! Session keys: which session a key (`cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, …) is
//! currently talking to. Set when a session is created for the key; a reset will point the
//! key at a new session.

use super::db::{Access, Store};
use super::error::StoreError;
use super::meta::SessionMeta;
use super::schema::{KEYS, SESSIONS};
use crate::domain::SessionKey;
use redb::{ReadableDatabase, TableError, WriteTransaction};

/// Points `key` at session `id`, inside the caller's transaction.
pub(super) fn bind(txn: &WriteTransaction, key: &str, id: &str) -> Result<(), redb::Error> {
    txn.open_table(KEYS)?.insert(key, id)?;
    Ok(())
}

impl Store {
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
