//! A client's catalog: the picker's reads of stored sessions, each asked of the owner of the
//! store over its socket and waited for on the reader's thread.

use super::catalog::{Catalog, JournalRecord, ListFilter, PageCursor, RecentPage, SearchSink};
use super::service::{SessionService, unexpected};
use super::wire::{Call, Reply};
use crate::domain::SessionId;
use crate::store::{SearchEntry, SessionMeta};
use std::ops::ControlFlow;

/// A client's catalog: each read asked of the owner from the picker's thread.
pub(super) struct Asked {
    pub service: SessionService,
    pub runtime: tokio::runtime::Handle,
}

impl Asked {
    /// Asks the owner and waits: on a thread of the front end's own, or on an async worker
    /// (the picker's first page, the rows it shows), which then hands its other tasks on.
    fn ask(&self, call: Call) -> Result<Reply, String> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        let asked = || {
            self.runtime
                .block_on(self.service.ask(call))
                .map_err(|err| err.message)
        };
        match Handle::try_current() {
            Err(_) => asked(),
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(asked)
            }
            Ok(_) => Err("stored sessions cannot be read from this thread".to_owned()),
        }
    }
}

impl Catalog for Asked {
    fn stored_sessions(&self) -> u64 {
        match self.ask(Call::StoredSessions) {
            Ok(Reply::Count { count }) => count,
            _ => 0,
        }
    }

    fn recent_page(
        &self,
        filter: &ListFilter,
        after: Option<&PageCursor>,
        limit: usize,
        max_scanned: usize,
    ) -> Result<RecentPage, String> {
        let call = Call::RecentPage {
            filter: filter.clone(),
            after: after.cloned(),
            limit,
            max_scanned,
        };
        match self.ask(call)? {
            Reply::Page(page) => Ok(page),
            other => Err(unexpected(&other).message),
        }
    }

    fn scan_search(&self, sink: &mut dyn SearchSink) -> Result<bool, String> {
        let scan = match self.ask(Call::ScanSearch)? {
            Reply::Search(scan) => scan,
            other => return Err(unexpected(&other).message),
        };
        sink.begin(scan.entries.len() as u64);
        for entry in &scan.entries {
            let entry = SearchEntry {
                id: &entry.id,
                title: &entry.title,
                first_input: &entry.first_input,
                project_dir: &entry.project_dir,
                archived: entry.archived,
            };
            if sink.entry(entry) == ControlFlow::Break(()) {
                return Ok(false);
            }
        }
        for (at_ms, id) in &scan.activity {
            if sink.activity(*at_ms, id) == ControlFlow::Break(()) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn recent(&self, limit: usize, archived: bool) -> Result<Vec<SessionMeta>, String> {
        match self.ask(Call::Recent { limit, archived })? {
            Reply::Sessions { sessions } => Ok(sessions),
            other => Err(unexpected(&other).message),
        }
    }

    fn resolve(&self, prefix: &str) -> Result<SessionMeta, String> {
        let call = Call::Resolve {
            prefix: prefix.to_owned(),
        };
        match self.ask(call)? {
            Reply::Meta(meta) => Ok(*meta),
            other => Err(unexpected(&other).message),
        }
    }

    fn journal(&self, id: &SessionId) -> Result<Vec<JournalRecord>, String> {
        match self.ask(Call::Journal { id: id.clone() })? {
            Reply::Records { records } => Ok(records),
            other => Err(unexpected(&other).message),
        }
    }

    fn meta(&self, id: &SessionId) -> Result<Option<SessionMeta>, String> {
        match self.ask(Call::Lookup { id: id.clone() })? {
            Reply::MaybeMeta { meta } => Ok(meta.map(|meta| *meta)),
            other => Err(unexpected(&other).message),
        }
    }

    fn tail(&self, id: &SessionId, n: usize) -> Result<Vec<JournalRecord>, String> {
        match self.ask(Call::Tail { id: id.clone(), n })? {
            Reply::Records { records } => Ok(records),
            other => Err(unexpected(&other).message),
        }
    }
}
