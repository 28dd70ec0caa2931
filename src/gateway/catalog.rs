//! What the front ends may read about stored sessions, and the plain data it comes in: the
//! picker's pages, search scan and previews, a session's meta, the end of a journal.
//!
//! [`Catalog`] is a blocking interface, for the threads of a front end (the picker's) or the
//! service's blocking tasks, never for an async thread. The store answers it in the process
//! that owns the database; a client's answers come from the owner.

use crate::domain::SessionId;
use crate::store::Store;
pub use crate::store::{
    JournalEvent, JournalRecord, Lifecycle, ListFilter, Overrides, PageCursor, RecentPage,
    SearchEntry, SearchSink, SessionMeta,
};

/// Reading stored sessions, for front ends. Errors are the reader's message.
pub trait Catalog: Send + Sync {
    /// How many sessions are stored.
    fn stored_sessions(&self) -> u64;
    /// One page of the sessions by recent activity under `filter`, after `after`, looking
    /// at no more than `max_scanned` index entries.
    fn recent_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
        max_scanned: usize,
    ) -> Result<RecentPage, String>;
    /// Every session's search entry and the activity order, into `sink`; `Ok(false)` when
    /// the sink ended it early.
    fn scan_search(&self, sink: &mut dyn SearchSink) -> Result<bool, String>;
    /// A session's meta, `None` when it is not stored.
    fn meta(&self, id: &SessionId) -> Result<Option<SessionMeta>, String>;
    /// The last `n` records of a session's journal.
    fn tail(&self, id: &SessionId, n: usize) -> Result<Vec<JournalRecord>, String>;
    /// The `limit` most recently used sessions: the archived ones, or the others.
    fn recent(&self, limit: usize, archived: bool) -> Result<Vec<SessionMeta>, String>;
    /// A session's whole journal.
    fn journal(&self, id: &SessionId) -> Result<Vec<JournalRecord>, String>;
    /// The session an id, or a unique prefix of one, names.
    fn resolve(&self, prefix: &str) -> Result<SessionMeta, String>;
}

impl Catalog for Store {
    fn stored_sessions(&self) -> u64 {
        self.totals().sessions
    }

    fn recent_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
        max_scanned: usize,
    ) -> Result<RecentPage, String> {
        Store::recent_page(self, filter, after, limit, max_scanned).map_err(|err| err.to_string())
    }

    fn scan_search(&self, sink: &mut dyn SearchSink) -> Result<bool, String> {
        Store::scan_search(self, sink).map_err(|err| err.to_string())
    }

    fn meta(&self, id: &SessionId) -> Result<Option<SessionMeta>, String> {
        Store::meta(self, id).map_err(|err| err.to_string())
    }

    fn tail(&self, id: &SessionId, n: usize) -> Result<Vec<JournalRecord>, String> {
        Store::tail(self, id, n).map_err(|err| err.to_string())
    }

    fn recent(&self, limit: usize, archived: bool) -> Result<Vec<SessionMeta>, String> {
        Store::recent(self, limit, |meta| {
            meta.archived_at_ms.is_some() == archived
        })
        .map_err(|err| err.to_string())
    }

    fn journal(&self, id: &SessionId) -> Result<Vec<JournalRecord>, String> {
        Store::load(self, id).map_err(|err| err.to_string())
    }

    fn resolve(&self, prefix: &str) -> Result<SessionMeta, String> {
        Store::resolve(self, prefix).map_err(|err| err.to_string())
    }
}

/// A catalog on a real store in a folder, filled by the unit tests of front ends that read
/// through a [`Catalog`].
#[cfg(test)]
pub mod filled {
    use super::{Catalog, JournalEvent, SessionMeta};
    use crate::domain::SessionId;
    use crate::store::Store;
    use std::path::Path;
    use std::sync::Arc;

    pub struct Filled {
        store: Arc<Store>,
    }

    impl Filled {
        pub fn open(path: &Path) -> Self {
            Self {
                store: Arc::new(Store::open(path).expect("open a store")),
            }
        }

        pub fn create(&self, meta: &SessionMeta) {
            self.store.create_session(meta).expect("create a session");
        }

        pub fn append(&self, id: &SessionId, events: &[JournalEvent]) {
            self.store.append_batch(id, events).expect("append");
        }

        pub fn catalog(&self) -> Arc<dyn Catalog> {
            self.store.clone()
        }
    }
}
