//! The picker's two background threads, so that no keystroke waits on the store or on a
//! search:
//!
//! - the search thread builds the [`SearchIndex`] from one scan of the store's search table,
//!   then matches queries against it. Only the newest query counts: submitting one makes a
//!   search in progress stop at its next step, and queries submitted meanwhile are skipped.
//!   Partial results go out every [`PARTIAL_EVERY`] while a search runs, the full ranking
//!   when it ends.
//! - the loader thread reads pages of the session list and the previews of selected sessions.
//!   Requests that pile up while it reads are coalesced: only the newest page and the newest
//!   preview are read.
//!
//! Both send [`Update`]s to the picker over one channel and call the waker, if the app set
//! one, after each; they stop when the picker is dropped.

use super::index::{self, Finished, Hit, IndexBuilder, Scope, Search, SearchIndex};
use super::preview::{PreviewMessage, TAIL_RECORDS, preview_of};
use crate::domain::SessionId;
use crate::gateway::catalog::{
    Catalog, ListFilter, PageCursor, RecentPage, SearchEntry, SearchSink,
};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a running search shows what it has found so far.
pub const PARTIAL_EVERY: Duration = Duration::from_millis(25);

/// Activity index entries one page request looks at, at most: a few milliseconds of reading
/// even when few sessions pass the filter.
pub const PAGE_SCAN: usize = 4000;

/// Called after every update, so the app can wake up and call `Picker::poll`.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// What the background threads report.
#[derive(Debug)]
pub enum Update {
    /// The search index is built, or could not be (the store's message).
    Index(Result<Arc<SearchIndex>, String>),
    /// Results of search `generation` so far; `done` when it looked at every session.
    Results {
        generation: u64,
        hits: Arc<Vec<Hit>>,
        elsewhere: usize,
        done: bool,
    },
    /// Another page of list `generation`.
    Page {
        generation: u64,
        page: Result<RecentPage, String>,
    },
    /// The preview of a session.
    Preview {
        id: SessionId,
        preview: Result<Vec<PreviewMessage>, String>,
    },
}

/// What the loader is asked to read.
#[derive(Debug)]
pub enum LoadRequest {
    Page {
        generation: u64,
        filter: ListFilter,
        after: Option<PageCursor>,
        limit: usize,
    },
    Preview(SessionId),
}

/// The query the search thread should run next.
#[derive(Debug, Clone)]
struct Job {
    generation: u64,
    query: String,
    scope: Scope,
}

/// What the picker and the search thread share.
struct SearchShared {
    job: Mutex<Option<Job>>,
    wake: Condvar,
    /// The generation of the newest job: a running search stops when it changes.
    latest: AtomicU64,
    closed: AtomicBool,
}

/// Sends updates to the picker and wakes the app.
#[derive(Clone)]
struct Outbox {
    tx: Sender<Update>,
    waker: Arc<OnceLock<Waker>>,
}

impl Outbox {
    fn send(&self, update: Update) {
        if self.tx.send(update).is_ok()
            && let Some(wake) = self.waker.get()
        {
            wake();
        }
    }
}

/// The running background threads; dropping it stops them.
pub struct Workers {
    search: Arc<SearchShared>,
    loader: Option<Sender<LoadRequest>>,
    waker: Arc<OnceLock<Waker>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Starts both threads; their updates arrive on the returned receiver.
    pub fn start(store: Arc<dyn Catalog>) -> (Workers, Receiver<Update>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let waker = Arc::new(OnceLock::new());
        let outbox = Outbox {
            tx,
            waker: waker.clone(),
        };
        let search = Arc::new(SearchShared {
            job: Mutex::new(None),
            wake: Condvar::new(),
            latest: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let (load_tx, load_rx) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        let spawned = {
            let (store, shared, outbox) = (store.clone(), search.clone(), outbox.clone());
            std::thread::Builder::new()
                .name("picker-search".into())
                .spawn(move || search_thread(store.as_ref(), &shared, &outbox))
        };
        match spawned {
            Ok(handle) => threads.push(handle),
            Err(err) => outbox.send(Update::Index(Err(format!(
                "could not start the search: {err}"
            )))),
        }
        let spawned = {
            let outbox = outbox.clone();
            std::thread::Builder::new()
                .name("picker-loader".into())
                .spawn(move || loader_thread(store.as_ref(), &load_rx, &outbox))
        };
        match spawned {
            Ok(handle) => threads.push(handle),
            Err(err) => tracing::warn!(%err, "could not start the picker's loader"),
        }
        let workers = Workers {
            search,
            loader: Some(load_tx),
            waker,
            threads,
        };
        (workers, rx)
    }

    /// Sets the function called after each update (once; later calls are ignored).
    pub fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }

    /// Makes `query` within `scope` the one to search, as generation `generation` (which
    /// must grow); a search in progress stops.
    pub fn search(&self, generation: u64, query: &str, scope: &Scope) {
        let mut job = self
            .search
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *job = Some(Job {
            generation,
            query: query.to_owned(),
            scope: scope.clone(),
        });
        self.search.latest.store(generation, Ordering::Release);
        self.search.wake.notify_one();
    }

    /// Stops a search in progress without starting another.
    pub fn cancel_search(&self, generation: u64) {
        let mut job = self
            .search
            .job
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *job = None;
        self.search.latest.store(generation, Ordering::Release);
    }

    /// Asks the loader to read something; false when it is not running.
    pub fn load(&self, request: LoadRequest) -> bool {
        self.loader
            .as_ref()
            .is_some_and(|loader| loader.send(request).is_ok())
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.search.closed.store(true, Ordering::Release);
        self.search.latest.fetch_add(1, Ordering::AcqRel);
        {
            let _job = self
                .search
                .job
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.search.wake.notify_all();
        }
        self.loader = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Builds the index, then runs the newest query whenever there is one.
fn search_thread(store: &dyn Catalog, shared: &SearchShared, outbox: &Outbox) {
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(store, shared)));
    let index = match built {
        Ok(Ok(Some(index))) => Arc::new(index),
        Ok(Ok(None)) => return,
        Ok(Err(err)) => {
            outbox.send(Update::Index(Err(err)));
            return;
        }
        Err(_) => {
            outbox.send(Update::Index(Err(
                "the search index could not be built".into()
            )));
            return;
        }
    };
    // The scan's buffers are gone; what stays is the index.
    crate::tui::release_freed_memory();
    outbox.send(Update::Index(Ok(index.clone())));
    let mut previous: Option<Finished> = None;
    while let Some(job) = next_job(shared) {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_job(&index, &job, previous.as_ref(), shared, outbox)
        }));
        match ran {
            Ok(Some(finished)) => previous = finished,
            Ok(None) => {}
            Err(_) => {
                tracing::warn!(query = %job.query, "a picker search failed");
                previous = None;
            }
        }
    }
}

/// The index from the store's search table; `None` when the picker closed meanwhile.
fn build(store: &dyn Catalog, shared: &SearchShared) -> Result<Option<SearchIndex>, String> {
    let mut sink = Stoppable {
        builder: IndexBuilder::new(),
        closed: &shared.closed,
        seen: 0,
    };
    match store.scan_search(&mut sink) {
        Ok(true) => Ok(Some(sink.builder.finish())),
        Ok(false) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}

/// An index builder that stops the scan once the picker is closed.
struct Stoppable<'a> {
    builder: IndexBuilder,
    closed: &'a AtomicBool,
    seen: usize,
}

impl Stoppable<'_> {
    fn go_on(&mut self) -> ControlFlow<()> {
        self.seen += 1;
        if self.seen.is_multiple_of(1024) && self.closed.load(Ordering::Acquire) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl SearchSink for Stoppable<'_> {
    fn begin(&mut self, sessions: u64) {
        self.builder.begin(sessions);
    }

    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()> {
        self.go_on()?;
        self.builder.entry(entry)
    }

    fn activity(&mut self, at_ms: i64, id: &str) -> ControlFlow<()> {
        self.go_on()?;
        self.builder.activity(at_ms, id)
    }
}

/// Waits for a job; `None` once the picker is closed.
fn next_job(shared: &SearchShared) -> Option<Job> {
    let mut job = shared.job.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if shared.closed.load(Ordering::Acquire) {
            return None;
        }
        if let Some(next) = job.take() {
            return Some(next);
        }
        job = shared
            .wake
            .wait(job)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// Runs one query, sending partial and final results; returns what a next query may narrow
/// from (`Some(None)` when it ran to the end but leaves nothing), `None` when a newer query
/// stopped it.
fn run_job(
    index: &SearchIndex,
    job: &Job,
    previous: Option<&Finished>,
    shared: &SearchShared,
    outbox: &Outbox,
) -> Option<Option<Finished>> {
    let mut search = Search::new(index, &job.query, &job.scope, previous);
    let mut last_sent = Instant::now();
    let stale = || shared.latest.load(Ordering::Acquire) != job.generation;
    let finished = index::run(&mut search, index, stale, |search| {
        if !search.is_done() && last_sent.elapsed() >= PARTIAL_EVERY {
            outbox.send(Update::Results {
                generation: job.generation,
                hits: Arc::new(search.ranked()),
                elsewhere: search.elsewhere(),
                done: false,
            });
            last_sent = Instant::now();
        }
    });
    if !finished {
        return None;
    }
    let elsewhere = search.elsewhere();
    let (hits, finished) = search.finish();
    outbox.send(Update::Results {
        generation: job.generation,
        hits: Arc::new(hits),
        elsewhere,
        done: true,
    });
    Some(finished)
}

/// Reads what the picker asks for, newest first when requests pile up.
fn loader_thread(store: &dyn Catalog, requests: &Receiver<LoadRequest>, outbox: &Outbox) {
    while let Ok(first) = requests.recv() {
        let mut page = None;
        let mut preview = None;
        for request in std::iter::once(first).chain(requests.try_iter()) {
            match request {
                LoadRequest::Page { .. } => page = Some(request),
                LoadRequest::Preview(id) => preview = Some(id),
            }
        }
        if let Some(LoadRequest::Page {
            generation,
            filter,
            after,
            limit,
        }) = page
        {
            let page = store
                .recent_page(&filter, after.as_ref(), limit, PAGE_SCAN)
                .map_err(|err| err.to_string());
            outbox.send(Update::Page { generation, page });
        }
        if let Some(id) = preview {
            let preview = store
                .tail(&id, TAIL_RECORDS)
                .map(|records| preview_of(&records))
                .map_err(|err| err.to_string());
            outbox.send(Update::Preview { id, preview });
        }
    }
}
