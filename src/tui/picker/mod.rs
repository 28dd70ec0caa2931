//! The resume picker: a full-screen list of past sessions, newest first, with a fuzzy search
//! over every session in the index and a preview of the selected one.
//!
//! What the first frame needs is read at once and little else: [`Picker::open`] reads one
//! page of the activity index (bounded, see `Store::recent_page`) and returns; the search
//! index is built on a background thread from one scan of the store's compact search table,
//! and once it is there the list comes from it too, so scrolling to the oldest of 100,000
//! sessions reads only the index entries on screen. No transcript is read to list sessions;
//! the preview reads the end of the selected one's journal (`Store::tail`), in the
//! background.
//!
//! Driving it: the app sends key events to [`Picker::handle_key`], which answers what the user
//! chose; background results arrive on a channel that [`Picker::poll`] drains (it returns
//! whether a redraw is needed). An app that waits on events rather than ticking sets a waker
//! with [`Picker::set_waker`], called from the background threads after each result, and
//! calls `poll` when woken. [`Picker::render`] draws into any area, down to a few cells.
//!
//! - [`index`]: the in-memory search index and the matching, pure.
//! - `background`: the search and loader threads.
//! - `preview`: what the preview shows of a journal's end, pure.
//! - `model`: the picker's state as the plain data the view draws.
//! - `view`: the drawing, from plain data.
//! - [`text`]: fitting text into cells, also used by the session tables `tern sessions`
//!   prints.

mod background;
pub mod index;
mod model;
mod preview;
#[cfg(test)]
mod tests;
pub mod text;
mod view;

use crate::domain::SessionId;
use crate::gateway::catalog::{Catalog, ListFilter, PageCursor, SessionMeta};
use background::{LoadRequest, PAGE_SCAN, Update, Workers};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use index::{Hit, Scope, SearchIndex, is_blank};
use preview::PreviewMessage;
use ratatui::Frame;
use ratatui::layout::Rect;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use super::Theme;

pub use background::Waker;

/// Rows read when the picker opens: more than a tall terminal shows.
const FIRST_PAGE: usize = 80;

/// Rows read per page after that.
const PAGE: usize = 100;

/// Index entries whose session index entry is kept for drawing, at most.
const META_CACHE: usize = 4096;

/// Previews kept, so going back and forth reads nothing again.
const PREVIEWS: usize = 32;

/// What the user chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PickerOutcome {
    /// Nothing yet: keep the picker open.
    Continue,
    /// Resume this session.
    Resume(SessionId),
    /// Start a new session.
    New,
    /// Close the picker without choosing.
    Cancel,
}

/// The resume picker's state: what is listed, the query, the selection, and the background
/// work behind them.
pub struct Picker {
    store: Arc<dyn Catalog>,
    project_dir: PathBuf,
    now_ms: i64,
    all_projects: bool,
    archived: bool,
    query: String,
    list: List,
    index: IndexState,
    search: Results,
    /// Index entries of rows drawn from the search index; `None` for a session removed since.
    metas: HashMap<Box<str>, Option<SessionMeta>>,
    previews: VecDeque<(SessionId, Preview)>,
    preview_pending: Option<SessionId>,
    selected: usize,
    offset: usize,
    /// Rows the list showed in the last frame.
    list_height: usize,
    /// Sessions stored, archived and all projects included.
    stored: u64,
    workers: Workers,
    updates: Receiver<Update>,
    /// Set when the background threads are gone.
    disconnected: bool,
}

/// The rows listed when there is no query.
struct List {
    generation: u64,
    rows: ListRows,
}

enum ListRows {
    /// Pages of the store's activity index, until the search index is built.
    Pages {
        rows: Vec<SessionMeta>,
        next: Option<PageCursor>,
        loading: bool,
        error: Option<String>,
    },
    /// The search index's entries that pass the filter, most recent first.
    Indexed(Vec<u32>),
}

enum IndexState {
    Building,
    Ready(Arc<SearchIndex>),
    Failed(String),
}

/// The results of the newest search, or of the one before while it runs.
struct Results {
    /// The newest search asked for.
    generation: u64,
    /// The search the hits belong to.
    shown: u64,
    hits: Arc<Vec<Hit>>,
    elsewhere: usize,
    done: bool,
}

/// A session's preview as the loader read it.
type Preview = Result<Arc<Vec<PreviewMessage>>, String>;

impl Picker {
    /// Opens the picker on the sessions of `project_dir` (as the index stores it), reading
    /// the first page now and building the search index on a background thread. `now` is
    /// the time the "ago" column counts from.
    pub fn open(store: Arc<dyn Catalog>, project_dir: PathBuf, now: jiff::Timestamp) -> Picker {
        let (workers, updates) = Workers::start(store.clone());
        let stored = store.stored_sessions();
        let mut picker = Picker {
            store,
            project_dir,
            now_ms: now.as_millisecond(),
            all_projects: false,
            archived: false,
            query: String::new(),
            list: List {
                generation: 0,
                rows: ListRows::Indexed(Vec::new()),
            },
            index: IndexState::Building,
            search: Results {
                generation: 0,
                shown: 0,
                hits: Arc::new(Vec::new()),
                elsewhere: 0,
                done: true,
            },
            metas: HashMap::new(),
            previews: VecDeque::new(),
            preview_pending: None,
            selected: 0,
            offset: 0,
            list_height: 0,
            stored,
            workers,
            updates,
            disconnected: false,
        };
        picker.relist();
        picker.after_change();
        picker
    }

    /// Sets the function the background threads call after each result they send, so an
    /// app waiting on events knows to call [`Picker::poll`]. It must be quick and must not
    /// call into the picker (send a message to the app's loop, say). Only the first call
    /// counts.
    pub fn set_waker(&mut self, waker: Waker) {
        self.workers.set_waker(waker);
    }

    /// Handles one key press and says what the user chose.
    pub fn handle_key(&mut self, key: KeyEvent) -> PickerOutcome {
        if key.kind == KeyEventKind::Release {
            return PickerOutcome::Continue;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let page = self.list_height.max(2) - 1;
        match key.code {
            KeyCode::Esc => return PickerOutcome::Cancel,
            KeyCode::Char('c') if ctrl => return PickerOutcome::Cancel,
            KeyCode::Char('n') if ctrl => return PickerOutcome::New,
            KeyCode::Enter => {
                return match self.selected_id() {
                    Some(id) => PickerOutcome::Resume(SessionId::from_string(id)),
                    None => PickerOutcome::Continue,
                };
            }
            KeyCode::Tab | KeyCode::BackTab => {
                self.all_projects = !self.all_projects;
                self.rescope();
            }
            KeyCode::Char('a') if ctrl => {
                self.archived = !self.archived;
                self.rescope();
            }
            KeyCode::Up => self.select(self.selected.saturating_sub(1)),
            KeyCode::Char('p') if ctrl => self.select(self.selected.saturating_sub(1)),
            KeyCode::Down => self.select(self.selected.saturating_add(1)),
            KeyCode::PageUp => self.select(self.selected.saturating_sub(page)),
            KeyCode::PageDown => self.select(self.selected.saturating_add(page)),
            KeyCode::Home => self.select(0),
            KeyCode::End => self.select(usize::MAX),
            KeyCode::Backspace if !self.query.is_empty() => {
                self.query.pop();
                self.query_changed();
            }
            KeyCode::Char('u') if ctrl => {
                self.query.clear();
                self.query_changed();
            }
            KeyCode::Char('w') if ctrl => {
                let kept = self
                    .query
                    .trim_end()
                    .rfind(' ')
                    .map_or(0, |space| space + 1);
                self.query.truncate(kept);
                self.query_changed();
            }
            // Control and Alt together is AltGr on some terminals: a character to type.
            KeyCode::Char(c) if ctrl == alt && !c.is_control() => {
                self.query.push(c);
                self.query_changed();
            }
            _ => {}
        }
        self.after_change();
        PickerOutcome::Continue
    }

    /// Adds pasted text to the query, its line breaks and other control characters as
    /// spaces.
    pub fn paste(&mut self, text: &str) {
        let flat: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if flat.is_empty() {
            return;
        }
        self.query.push_str(&flat);
        self.query_changed();
        self.after_change();
    }

    /// Takes what the background threads sent; true when the picker should be drawn again.
    pub fn poll(&mut self) -> bool {
        let mut changed = false;
        loop {
            match self.updates.try_recv() {
                Ok(update) => {
                    self.apply(update);
                    changed = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    changed |= self.lost_workers();
                    break;
                }
            }
        }
        if changed {
            self.after_change();
        }
        changed
    }

    /// Waits up to `timeout` for the background work asked for so far (the index, the
    /// current search, a page, the selected session's preview) to arrive, and takes it.
    /// Returns whether nothing is outstanding. For tests and benchmarks: an app calls
    /// [`Picker::poll`] instead, which never waits.
    pub fn settle(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll();
            if !self.is_busy() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.updates.recv_timeout(left) {
                Ok(update) => {
                    self.apply(update);
                    self.after_change();
                }
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => {
                    self.lost_workers();
                    return !self.is_busy();
                }
            }
        }
    }

    /// Draws the picker into `area` of `frame`.
    pub fn render(&mut self, frame: &mut Frame<'_>, area: Rect, theme: &Theme) {
        let area = area.intersection(frame.area());
        let areas = view::layout(area);
        self.list_height = usize::from(areas.list.height);
        self.scroll();
        self.fetch_visible_metas();
        let model = self.view_model();
        let cursor = view::draw(frame.buffer_mut(), &areas, &model, theme);
        if let Some(cursor) = cursor {
            frame.set_cursor_position(cursor);
        }
        // The first frame tells how many rows a screen holds.
        self.want_rows();
    }

    /// The query typed so far.
    pub fn query(&self) -> &str {
        &self.query
    }

    /// The id of the selected session, if any row is listed.
    pub fn selected(&self) -> Option<SessionId> {
        self.selected_id().map(SessionId::from_string)
    }

    /// Bytes the search index holds, once it is built: for measurements.
    pub fn search_index_bytes(&self) -> Option<usize> {
        match &self.index {
            IndexState::Ready(index) => Some(index.heap_bytes()),
            _ => None,
        }
    }

    /// Whether background work asked for is still outstanding.
    fn is_busy(&self) -> bool {
        if self.disconnected {
            return false;
        }
        let index_building = matches!(self.index, IndexState::Building);
        let searching = self.searching()
            && !matches!(self.index, IndexState::Failed(_))
            && (self.search.shown != self.search.generation || !self.search.done);
        let loading = matches!(&self.list.rows, ListRows::Pages { loading: true, .. });
        index_building || searching || loading || self.preview_pending.is_some()
    }

    fn searching(&self) -> bool {
        !is_blank(&self.query)
    }

    fn scope(&self) -> Scope {
        Scope {
            project_dir: (!self.all_projects)
                .then(|| self.project_dir.to_string_lossy().into_owned()),
            archived: self.archived,
        }
    }

    fn filter(&self) -> ListFilter {
        ListFilter {
            project_dir: (!self.all_projects).then(|| self.project_dir.clone()),
            archived: self.archived,
        }
    }

    /// Lists the rows of the current filter afresh: from the search index when it is built,
    /// else a first page read now.
    fn relist(&mut self) {
        self.list.generation += 1;
        self.list.rows = match &self.index {
            IndexState::Ready(index) => ListRows::Indexed(self.listing(index)),
            _ => {
                let filter = self.filter();
                match self.store.recent_page(&filter, None, FIRST_PAGE, PAGE_SCAN) {
                    Ok(page) => ListRows::Pages {
                        rows: page.sessions,
                        next: page.next,
                        loading: false,
                        error: None,
                    },
                    Err(err) => ListRows::Pages {
                        rows: Vec::new(),
                        next: None,
                        loading: false,
                        error: Some(err.to_string()),
                    },
                }
            }
        };
    }

    /// The index entries the current filter passes, most recent first.
    fn listing(&self, index: &SearchIndex) -> Vec<u32> {
        let project = self.project_dir.to_string_lossy();
        (0..index.len() as u32)
            .filter(|&e| {
                (self.archived || !index.is_archived(e))
                    && (self.all_projects || index.project_dir(e) == project)
            })
            .collect()
    }

    fn rescope(&mut self) {
        self.relist();
        if self.searching() {
            self.submit_search();
        }
        self.selected = 0;
        self.offset = 0;
    }

    fn query_changed(&mut self) {
        if self.searching() {
            self.submit_search();
        } else {
            self.search.generation += 1;
            self.workers.cancel_search(self.search.generation);
            self.search.hits = Arc::new(Vec::new());
            self.search.shown = self.search.generation;
            self.search.done = true;
            self.search.elsewhere = 0;
            self.selected = 0;
            self.offset = 0;
        }
    }

    fn submit_search(&mut self) {
        self.search.generation += 1;
        self.workers
            .search(self.search.generation, &self.query, &self.scope());
    }

    fn apply(&mut self, update: Update) {
        match update {
            Update::Index(Ok(index)) => {
                let keep = self.selected_id();
                self.index = IndexState::Ready(index.clone());
                self.list.generation += 1;
                self.list.rows = ListRows::Indexed(self.listing(&index));
                if !self.searching() {
                    self.reselect(keep.as_deref());
                }
            }
            Update::Index(Err(err)) => {
                tracing::warn!(%err, "the picker's search index could not be built");
                self.index = IndexState::Failed(err);
            }
            Update::Results {
                generation,
                hits,
                elsewhere,
                done,
            } => {
                if generation != self.search.generation || !self.searching() {
                    return;
                }
                let first = self.search.shown != generation;
                let keep = (!first).then(|| self.selected_id());
                self.search.shown = generation;
                self.search.hits = hits;
                self.search.elsewhere = elsewhere;
                self.search.done = done;
                match keep {
                    Some(keep) => self.reselect(keep.as_deref()),
                    None => {
                        self.selected = 0;
                        self.offset = 0;
                    }
                }
            }
            Update::Page { generation, page } => {
                if generation != self.list.generation {
                    return;
                }
                if let ListRows::Pages {
                    rows,
                    next,
                    loading,
                    error,
                } = &mut self.list.rows
                {
                    *loading = false;
                    match page {
                        Ok(page) => {
                            rows.extend(page.sessions);
                            *next = page.next;
                        }
                        Err(err) => {
                            *next = None;
                            *error = Some(err);
                        }
                    }
                }
            }
            Update::Preview { id, preview } => {
                if self.preview_pending.as_ref() == Some(&id) {
                    self.preview_pending = None;
                }
                self.previews.retain(|(cached, _)| *cached != id);
                if self.previews.len() >= PREVIEWS {
                    self.previews.pop_front();
                }
                self.previews.push_back((id, preview.map(Arc::new)));
            }
        }
    }

    /// The background threads ended (they only do when they fail to start or panic): what
    /// they owed will not come. Returns whether anything changed.
    fn lost_workers(&mut self) -> bool {
        if self.disconnected {
            return false;
        }
        self.disconnected = true;
        if matches!(self.index, IndexState::Building) {
            self.index = IndexState::Failed("the search stopped".into());
        }
        if let ListRows::Pages { loading, .. } = &mut self.list.rows {
            *loading = false;
        }
        self.preview_pending = None;
        true
    }

    /// Moves the selection to `row`, within the rows listed.
    fn select(&mut self, row: usize) {
        self.selected = row.min(self.row_count().saturating_sub(1));
    }

    /// Selects the row of session `id` if it is listed, else the first row.
    fn reselect(&mut self, id: Option<&str>) {
        let found = id.and_then(|id| match (&self.list.rows, &self.index) {
            (_, IndexState::Ready(index)) if self.searching() => {
                let entry = index.entry_of(id)?;
                self.search.hits.iter().position(|hit| hit.entry == entry)
            }
            (ListRows::Indexed(entries), IndexState::Ready(index)) => {
                let entry = index.entry_of(id)?;
                entries.iter().position(|&listed| listed == entry)
            }
            (ListRows::Pages { rows, .. }, _) if !self.searching() => {
                rows.iter().position(|meta| meta.id.as_str() == id)
            }
            _ => None,
        });
        match found {
            Some(row) => self.selected = row,
            None => {
                self.selected = 0;
                self.offset = 0;
            }
        }
    }

    /// After a key or an update: the selection within bounds, the pages and the preview it
    /// needs asked for.
    fn after_change(&mut self) {
        self.select(self.selected);
        self.want_rows();
        self.want_preview();
    }

    /// Asks for another page when the list is read page by page and the selection nears
    /// the end of what was read.
    fn want_rows(&mut self) {
        let wanted = self.selected + 2 * self.list_height.max(20);
        let generation = self.list.generation;
        let filter = self.filter();
        if let ListRows::Pages {
            rows,
            next: Some(next),
            loading,
            ..
        } = &mut self.list.rows
            && !*loading
            && rows.len() < wanted
        {
            *loading = self.workers.load(LoadRequest::Page {
                generation,
                filter,
                after: Some(next.clone()),
                limit: PAGE,
            });
        }
    }

    fn want_preview(&mut self) {
        let Some(id) = self.selected_id() else {
            return;
        };
        if self
            .preview_pending
            .as_ref()
            .is_some_and(|p| p.as_str() == id)
            || self
                .previews
                .iter()
                .any(|(cached, _)| cached.as_str() == id)
        {
            return;
        }
        let id = SessionId::from_string(id);
        if self.workers.load(LoadRequest::Preview(id.clone())) {
            self.preview_pending = Some(id);
        }
    }

    fn row_count(&self) -> usize {
        if self.searching() {
            return self.search.hits.len();
        }
        match &self.list.rows {
            ListRows::Pages { rows, .. } => rows.len(),
            ListRows::Indexed(entries) => entries.len(),
        }
    }

    /// The index entry behind row `row`, when the rows come from the search index.
    fn row_entry(&self, row: usize) -> Option<u32> {
        if self.searching() {
            return self.search.hits.get(row).map(|hit| hit.entry);
        }
        match &self.list.rows {
            ListRows::Indexed(entries) => entries.get(row).copied(),
            ListRows::Pages { .. } => None,
        }
    }

    fn row_id(&self, row: usize) -> Option<String> {
        if let (Some(entry), IndexState::Ready(index)) = (self.row_entry(row), &self.index) {
            return Some(index.id(entry));
        }
        match &self.list.rows {
            ListRows::Pages { rows, .. } if !self.searching() => {
                rows.get(row).map(|meta| meta.id.to_string())
            }
            _ => None,
        }
    }

    fn row_meta(&self, row: usize) -> Option<&SessionMeta> {
        match &self.list.rows {
            ListRows::Pages { rows, .. } if !self.searching() => rows.get(row),
            _ => self.metas.get(self.row_id(row)?.as_str())?.as_ref(),
        }
    }

    fn selected_id(&self) -> Option<String> {
        self.row_id(self.selected)
    }

    /// Keeps the selected row on screen.
    fn scroll(&mut self) {
        let height = self.list_height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
        let last_screen = self.row_count().saturating_sub(height);
        self.offset = self.offset.min(last_screen).min(self.selected);
    }

    /// Reads the index entries of the rows on screen that come from the search index.
    fn fetch_visible_metas(&mut self) {
        let end = (self.offset + self.list_height).min(self.row_count());
        let missing: Vec<String> = (self.offset..end)
            .filter_map(|row| self.row_entry(row).and_then(|_| self.row_id(row)))
            .filter(|id| !self.metas.contains_key(id.as_str()))
            .collect();
        if missing.is_empty() {
            return;
        }
        if self.metas.len() + missing.len() > META_CACHE {
            self.metas.clear();
        }
        for id in missing {
            let meta = match self.store.meta(&SessionId::from_string(id.as_str())) {
                Ok(meta) => meta,
                Err(err) => {
                    tracing::warn!(%err, session = %id, "the picker could not read a session");
                    None
                }
            };
            self.metas.insert(id.into_boxed_str(), meta);
        }
    }
}

impl std::fmt::Debug for Picker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Picker")
            .field("project_dir", &self.project_dir)
            .field("query", &self.query)
            .field("all_projects", &self.all_projects)
            .field("archived", &self.archived)
            .field("selected", &self.selected)
            .finish_non_exhaustive()
    }
}
