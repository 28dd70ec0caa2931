//! The activity index: (last activity, session id) for every session, so the most recently
//! used sessions come first from one short range read, without decoding the whole index. It is
//! kept in the same transaction as every change to a session's entry, and built from the
//! session index when a database from before it is opened.

use super::db::{Access, Store};
use super::error::StoreError;
use super::meta::SessionMeta;
use super::schema;
use super::schema::{ACTIVITY, SEARCH, SESSIONS};
use super::search;
use redb::{Database, ReadableDatabase, ReadableTable, WriteTransaction};
use std::path::{Path, PathBuf};

/// Which sessions [`Store::recent_page`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListFilter {
    /// Only the sessions started in this project dir (compared as stored), or all.
    pub project_dir: Option<PathBuf>,
    /// Archived sessions too.
    pub archived: bool,
}

/// Where a page of [`Store::recent_page`] stopped: the next page goes on after it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageCursor {
    at_ms: i64,
    id: String,
}

/// One page of the most recently used sessions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecentPage {
    pub sessions: Vec<SessionMeta>,
    /// Where to go on from, or `None` when the index has nothing older.
    pub next: Option<PageCursor>,
}

/// Creates the index from the session index when the database has none yet.
pub(super) fn ensure(db: &Database, path: &Path) -> Result<(), StoreError> {
    if !schema::is_missing(db, path, ACTIVITY)? {
        return Ok(());
    }
    schema::derive_from_index(db, path, ACTIVITY, |activity, id, meta| {
        // An entry that does not decode is listed by nothing anyway.
        if let Some(meta) = meta {
            activity.insert((meta.updated_at_ms, id), ())?;
        }
        Ok(())
    })
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
    /// When the least recently used session was last used, if there is any: what tells
    /// cheaply whether anything is past `prune_after`.
    pub fn oldest_activity_ms(&self) -> Result<Option<i64>, StoreError> {
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let activity = txn.open_table(ACTIVITY).map_err(|e| self.err(e))?;
            let first = activity.first().map_err(|e| self.err(e))?;
            Ok(first.map(|(key, _)| key.value().0))
        })
    }

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

    /// Up to `limit` sessions that `filter` accepts, most recently used first, going on
    /// after `after` (from the most recent when `None`). It looks at no more than
    /// `max_scanned` entries of the activity index, so a page costs a bounded time even
    /// when few sessions pass the filter; such a page may hold fewer than `limit` with more
    /// to come (`next` is set). The filter is checked on the compact search records, so only
    /// the index entries returned are decoded.
    pub fn recent_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
        max_scanned: usize,
    ) -> Result<RecentPage, StoreError> {
        // Stored paths are UTF-8: one that is not matches nothing.
        let project = match &filter.project_dir {
            Some(dir) => match dir.to_str() {
                Some(dir) => Some(dir),
                None => return Ok(RecentPage::default()),
            },
            None => None,
        };
        self.run(Access::Read, |db, _| {
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let records = txn.open_table(SEARCH).map_err(|e| self.err(e))?;
            let activity = txn.open_table(ACTIVITY).map_err(|e| self.err(e))?;
            let entries = match after {
                Some(cursor) => activity.range(..(cursor.at_ms, cursor.id.as_str())),
                None => activity.range::<(i64, &str)>(..),
            }
            .map_err(|e| self.err(e))?;
            let mut page = RecentPage::default();
            let mut last = None;
            let mut exhausted = true;
            for (scanned, entry) in entries.rev().enumerate() {
                if page.sessions.len() >= limit || scanned >= max_scanned {
                    exhausted = false;
                    break;
                }
                let (key, _) = entry.map_err(|e| self.err(e))?;
                let (at_ms, id) = key.value();
                last = Some((at_ms, id.to_owned()));
                let record = records.get(id).map_err(|e| self.err(e))?;
                let passes = record
                    .as_ref()
                    .and_then(|record| search::decode(id, record.value()))
                    .map(|entry| {
                        (filter.archived || !entry.archived)
                            && project.is_none_or(|dir| dir == entry.project_dir)
                    });
                // Without a readable record, the index entry decides.
                if passes == Some(false) {
                    continue;
                }
                let Some(value) = sessions.get(id).map_err(|e| self.err(e))? else {
                    continue;
                };
                match self.decode_meta(id, value.value()) {
                    Ok(meta)
                        if passes.is_some()
                            || ((filter.archived || meta.archived_at_ms.is_none())
                                && project
                                    .is_none_or(|dir| meta.project_dir == Path::new(dir))) =>
                    {
                        page.sessions.push(meta)
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(%err, "skipping a session index entry"),
                }
            }
            if !exhausted {
                page.next = last
                    .map(|(at_ms, id)| PageCursor { at_ms, id })
                    .or_else(|| after.cloned());
            }
            Ok(page)
        })
    }
}
