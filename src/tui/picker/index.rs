//! The picker's search index: the searchable text of every session in memory, laid out
//! compactly, and fuzzy matching over it with nucleo.
//!
//! Pure: the store fills an [`IndexBuilder`] through one scan of its search table (a
//! [`SearchSink`]), and a [`Search`] matches a query in steps, so the caller decides on which
//! thread it runs, when to give up (a newer query came) and when to show what it has found so
//! far.
//!
//! Layout: one `String` arena holds each session's title (only when the title is not simply
//! that of its first input, see `store::SearchEntry`) and the start of its first input; an
//! entry is 32 bytes of offsets, lengths, flags and the id, which for the usual UUID is kept
//! as its 16 bytes rather than 36 characters (any other id goes in the arena); project dirs
//! are interned, since a few dozen of them are shared by thousands of sessions. Entries are
//! kept most recently used first, so an entry's position is its recency and ties in score go
//! to the newer session. At 100,000 sessions it holds about 15 MiB.
//!
//! Matching: a query is split into words (nucleo atoms, smart case); every word must match
//! the title, the first input or the project dir of a session, and a session's score is the
//! sum of each word's best score over the three. A word's score against each project dir is
//! computed once per query, not once per session.

use crate::gateway::catalog::{SearchEntry, SearchSink};
use nucleo_matcher::pattern::{Atom, AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Entries a [`Search`] step looks at between checks for a newer query.
pub const STEP: usize = 2048;

const ARCHIVED: u8 = 1;
const TITLE_ASCII: u8 = 2;
const INPUT_ASCII: u8 = 4;
/// The id is a hyphenated lowercase UUID, kept in `Entry::uuid`.
const UUID_ID: u8 = 8;

/// Characters of a hyphenated UUID.
const UUID_CHARS: usize = 36;

/// Every session's searchable text, most recently used first.
#[derive(Debug, Default)]
pub struct SearchIndex {
    text: String,
    entries: Vec<Entry>,
    projects: Vec<Box<str>>,
}

/// Where one session's text lies in the arena (its id unless that is a UUID, then its title,
/// then its first input), and its id when it is a UUID.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u32,
    project: u32,
    id_len: u16,
    title_len: u16,
    input_len: u16,
    flags: u8,
    uuid: [u8; 16],
}

impl Entry {
    fn id_end(self) -> usize {
        self.start as usize + usize::from(self.id_len)
    }

    fn title_end(self) -> usize {
        self.id_end() + usize::from(self.title_len)
    }

    fn input_end(self) -> usize {
        self.title_end() + usize::from(self.input_len)
    }
}

impl SearchIndex {
    /// How many sessions it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The id of the session at `entry` (0 is the most recently used); empty for an entry
    /// out of range.
    pub fn id(&self, entry: u32) -> String {
        self.entries
            .get(entry as usize)
            .map_or_else(String::new, |e| self.with_id(e, str::to_owned))
    }

    /// The entry of the session `id`, if the index holds it.
    pub fn entry_of(&self, id: &str) -> Option<u32> {
        let uuid = compact_uuid(id);
        let position = self.entries.iter().position(|e| match uuid {
            Some(uuid) => e.flags & UUID_ID != 0 && e.uuid == uuid,
            None => e.flags & UUID_ID == 0 && &self.text[e.start as usize..e.id_end()] == id,
        })?;
        Some(position as u32)
    }

    /// Runs `f` on the id of `e`, spelled out on the stack when it is a UUID.
    fn with_id<R>(&self, e: &Entry, f: impl FnOnce(&str) -> R) -> R {
        if e.flags & UUID_ID != 0 {
            let mut buf = [0u8; UUID_CHARS];
            f(spell_uuid(&e.uuid, &mut buf))
        } else {
            f(&self.text[e.start as usize..e.id_end()])
        }
    }

    /// The title stored for the session at `entry`: empty when it is the title of its first
    /// input.
    pub fn title(&self, entry: u32) -> &str {
        self.entries
            .get(entry as usize)
            .map_or("", |e| &self.text[e.id_end()..e.title_end()])
    }

    /// The start of the first input of the session at `entry`.
    pub fn first_input(&self, entry: u32) -> &str {
        self.entries
            .get(entry as usize)
            .map_or("", |e| &self.text[e.title_end()..e.input_end()])
    }

    /// The project dir of the session at `entry`.
    pub fn project_dir(&self, entry: u32) -> &str {
        self.entries
            .get(entry as usize)
            .and_then(|e| self.projects.get(e.project as usize))
            .map_or("", |dir| dir)
    }

    /// Whether the session at `entry` is archived.
    pub fn is_archived(&self, entry: u32) -> bool {
        self.entries
            .get(entry as usize)
            .is_some_and(|e| e.flags & ARCHIVED != 0)
    }

    /// Bytes of memory the index holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.projects.capacity() * std::mem::size_of::<Box<str>>()
            + self.projects.iter().map(|p| p.len()).sum::<usize>()
    }

    fn project_id(&self, dir: &str) -> Option<u32> {
        self.projects
            .iter()
            .position(|p| &**p == dir)
            .map(|i| i as u32)
    }
}

/// Builds a [`SearchIndex`] from a scan of the store's search table.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    index: SearchIndex,
    /// Recency rank of each entry as the activity index gave it; `u32::MAX` until then.
    rank: Vec<u32>,
    ranked: u32,
    interned: HashMap<Box<str>, u32>,
    /// Whether entries came in id order, as the store hands them over.
    in_id_order: bool,
    /// Sessions the scan announced.
    expected: usize,
}

/// Bytes of arena reserved per session before a scan, about what a session takes; when it
/// runs out, more is reserved for the sessions still to come at the rate seen so far, so the
/// arena never doubles past what it needs.
const RESERVE_PER_SESSION: usize = 128;

impl IndexBuilder {
    pub fn new() -> Self {
        IndexBuilder {
            in_id_order: true,
            ..IndexBuilder::default()
        }
    }

    /// The index, most recently used first; sessions the activity index did not name go last.
    pub fn finish(self) -> SearchIndex {
        let IndexBuilder {
            mut index, rank, ..
        } = self;
        // Where each entry goes, applied in place, so the entries are never held twice.
        let mut order: Vec<u32> = (0..index.entries.len() as u32).collect();
        order.sort_unstable_by_key(|&i| (rank[i as usize], i));
        permute(&mut index.entries, &mut order);
        index.text.shrink_to_fit();
        index.projects.shrink_to_fit();
        index
    }

    fn intern(&mut self, dir: &str) -> u32 {
        if let Some(&id) = self.interned.get(dir) {
            return id;
        }
        let id = self.index.projects.len() as u32;
        self.index.projects.push(dir.into());
        self.interned.insert(dir.into(), id);
        id
    }

    fn find(&self, id: &str) -> Option<usize> {
        let index = &self.index;
        let uuid = compact_uuid(id);
        index
            .entries
            .binary_search_by(|e| match uuid {
                // Hyphenated lowercase UUIDs sort as their bytes do.
                Some(uuid) if e.flags & UUID_ID != 0 => e.uuid.cmp(&uuid),
                _ => index.with_id(e, |own| own.cmp(id)),
            })
            .ok()
    }
}

impl SearchSink for IndexBuilder {
    fn begin(&mut self, sessions: u64) {
        let sessions = usize::try_from(sessions).unwrap_or(0).min(10_000_000);
        *self = IndexBuilder::new();
        self.expected = sessions;
        self.index.entries.reserve_exact(sessions);
        self.rank.reserve_exact(sessions);
        self.index
            .text
            .reserve_exact(sessions * RESERVE_PER_SESSION);
    }

    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()> {
        let uuid = compact_uuid(entry.id);
        let id_text = if uuid.is_some() { "" } else { entry.id };
        let text = &self.index.text;
        let (Ok(id_len), Ok(title_len), Ok(input_len), Ok(start)) = (
            u16::try_from(id_text.len()),
            u16::try_from(entry.title.len()),
            u16::try_from(entry.first_input.len()),
            u32::try_from(text.len()),
        ) else {
            return ControlFlow::Continue(());
        };
        let end = text.len() + id_text.len() + entry.title.len() + entry.first_input.len();
        if u32::try_from(end).is_err() {
            // Four gigabytes of text: the rest stays out of the index.
            return ControlFlow::Break(());
        }
        if let Some(last) = self.index.entries.last()
            && self.index.with_id(last, |last| last >= entry.id)
        {
            self.in_id_order = false;
        }
        let added = end - self.index.text.len();
        if self.index.text.capacity() - self.index.text.len() < added {
            let seen = self.index.entries.len().max(1);
            let rate = self.index.text.len() / seen + 1;
            let to_come = self.expected.saturating_sub(seen);
            self.index
                .text
                .reserve_exact(added + to_come * (rate + rate / 8));
        }
        let text = &mut self.index.text;
        text.push_str(id_text);
        text.push_str(entry.title);
        text.push_str(entry.first_input);
        let mut flags = 0;
        if uuid.is_some() {
            flags |= UUID_ID;
        }
        if entry.archived {
            flags |= ARCHIVED;
        }
        if entry.title.is_ascii() {
            flags |= TITLE_ASCII;
        }
        if entry.first_input.is_ascii() {
            flags |= INPUT_ASCII;
        }
        let project = self.intern(entry.project_dir);
        self.index.entries.push(Entry {
            start,
            project,
            id_len,
            title_len,
            input_len,
            flags,
            uuid: uuid.unwrap_or_default(),
        });
        self.rank.push(u32::MAX);
        ControlFlow::Continue(())
    }

    fn activity(&mut self, _at_ms: i64, id: &str) -> ControlFlow<()> {
        if !self.in_id_order {
            // Every rank is still unset, so the entries can move without theirs.
            let mut entries = std::mem::take(&mut self.index.entries);
            let index = &self.index;
            entries.sort_by(|a, b| index.with_id(a, |a| index.with_id(b, |b| a.cmp(b))));
            self.index.entries = entries;
            self.in_id_order = true;
        }
        if let Some(i) = self.find(id)
            && self.rank[i] == u32::MAX
        {
            self.rank[i] = self.ranked;
            self.ranked += 1;
        }
        ControlFlow::Continue(())
    }
}

/// Which sessions a search shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only the sessions of this project dir, or all.
    pub project_dir: Option<String>,
    /// Archived sessions too.
    pub archived: bool,
}

/// A session that matched: its entry in the index and its score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub entry: u32,
    pub score: u32,
}

/// What a finished search leaves for the next one: a query that only adds to it can only
/// match fewer sessions, so it needs to look at these alone.
#[derive(Debug, Clone)]
pub struct Finished {
    query: String,
    archived: bool,
    /// Every entry that matched, whatever its project.
    matched: Arc<Vec<u32>>,
}

/// One query being matched against an index, a step at a time.
pub struct Search {
    query: String,
    scope: Scope,
    atoms: Vec<Atom>,
    /// The project the scope keeps, `None` for all; `Some(None)` for a project the index has
    /// no session of.
    project: Option<Option<u32>>,
    /// Each atom's score against each project dir: `project * atoms + atom`.
    project_scores: Vec<Option<u16>>,
    /// The entries to look at, when a previous search narrowed them; all otherwise.
    candidates: Option<Arc<Vec<u32>>>,
    total: usize,
    position: usize,
    hits: Vec<Hit>,
    matched: Vec<u32>,
    elsewhere: usize,
    matcher: Matcher,
    title_chars: Vec<char>,
    input_chars: Vec<char>,
}

impl std::fmt::Debug for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("query", &self.query)
            .field("scope", &self.scope)
            .field("position", &self.position)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

/// Whether `query` holds no word to match.
pub fn is_blank(query: &str) -> bool {
    query.trim().is_empty()
}

impl Search {
    /// A search for `query` within `scope`. When `previous` finished a query that this one
    /// only adds to, with the same archived setting, only the sessions it matched are looked
    /// at.
    pub fn new(
        index: &SearchIndex,
        query: &str,
        scope: &Scope,
        previous: Option<&Finished>,
    ) -> Search {
        let pattern = Pattern::new(
            query,
            CaseMatching::Smart,
            Normalization::Smart,
            AtomKind::Fuzzy,
        );
        let matcher = Matcher::new(Config::DEFAULT);
        let mut path_matcher = Matcher::new(Config::DEFAULT.match_paths());
        let mut chars = Vec::new();
        let atoms = pattern.atoms;
        let mut project_scores = Vec::with_capacity(index.projects.len() * atoms.len());
        for dir in &index.projects {
            let haystack = Utf32Str::new(dir, &mut chars);
            for atom in &atoms {
                project_scores.push(atom.score(haystack, &mut path_matcher));
            }
        }
        let project = scope
            .project_dir
            .as_deref()
            .map(|dir| index.project_id(dir));
        let candidates = previous
            .filter(|p| p.archived == scope.archived && extends(query, &p.query))
            .map(|p| p.matched.clone());
        let total = candidates.as_ref().map_or(index.len(), |c| c.len());
        Search {
            query: query.to_owned(),
            scope: scope.clone(),
            atoms,
            project,
            project_scores,
            candidates,
            total,
            position: 0,
            hits: Vec::new(),
            matched: Vec::new(),
            elsewhere: 0,
            matcher,
            title_chars: Vec::new(),
            input_chars: Vec::new(),
        }
    }

    pub fn query(&self) -> &str {
        &self.query
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Whether every session has been looked at.
    pub fn is_done(&self) -> bool {
        self.position >= self.total
    }

    /// How many sessions this search looks at in all (fewer than the index holds when a
    /// previous search narrowed them).
    pub fn total(&self) -> usize {
        self.total
    }

    /// Looks at up to `budget` more sessions; returns whether the search is done.
    pub fn step(&mut self, index: &SearchIndex, budget: usize) -> bool {
        let end = self.position.saturating_add(budget).min(self.total);
        for k in self.position..end {
            let entry = match &self.candidates {
                Some(candidates) => candidates[k],
                None => k as u32,
            };
            let Some(&e) = index.entries.get(entry as usize) else {
                continue;
            };
            if e.flags & ARCHIVED != 0 && !self.scope.archived {
                continue;
            }
            let Some(score) = self.score(index, e) else {
                continue;
            };
            self.matched.push(entry);
            match self.project {
                Some(wanted) if wanted != Some(e.project) => self.elsewhere += 1,
                _ => self.hits.push(Hit { entry, score }),
            }
        }
        self.position = end;
        self.is_done()
    }

    /// Sessions that matched but lie outside the scope's project, so far.
    pub fn elsewhere(&self) -> usize {
        self.elsewhere
    }

    /// The hits so far, best first: by score, then the most recently used.
    pub fn ranked(&self) -> Vec<Hit> {
        let mut hits = self.hits.clone();
        rank(&mut hits);
        hits
    }

    /// The ranked hits, and what the next search may narrow from when this one is done.
    pub fn finish(self) -> (Vec<Hit>, Option<Finished>) {
        let done = self.is_done();
        let mut hits = self.hits;
        rank(&mut hits);
        let finished = done.then(|| Finished {
            query: self.query,
            archived: self.scope.archived,
            matched: Arc::new(self.matched),
        });
        (hits, finished)
    }

    /// The session's score: every atom must match its title, first input or project dir.
    fn score(&mut self, index: &SearchIndex, e: Entry) -> Option<u32> {
        let title = &index.text[e.id_end()..e.title_end()];
        let input = &index.text[e.title_end()..e.input_end()];
        let title = haystack(title, e.flags & TITLE_ASCII != 0, &mut self.title_chars);
        let input = haystack(input, e.flags & INPUT_ASCII != 0, &mut self.input_chars);
        let projects = &self.project_scores;
        let base = e.project as usize * self.atoms.len();
        let mut total = 0u32;
        for (a, atom) in self.atoms.iter().enumerate() {
            let mut best = projects.get(base + a).copied().flatten();
            if !title.is_empty() {
                best = best.max(atom.score(title, &mut self.matcher));
            }
            if !input.is_empty() {
                best = best.max(atom.score(input, &mut self.matcher));
            }
            total += u32::from(best?);
        }
        Some(total)
    }
}

/// `text` as nucleo takes it: its bytes when ASCII, else its characters in `chars`.
fn haystack<'a>(text: &'a str, ascii: bool, chars: &'a mut Vec<char>) -> Utf32Str<'a> {
    if ascii {
        Utf32Str::Ascii(text.as_bytes())
    } else {
        Utf32Str::new(text, chars)
    }
}

/// Reorders `items` so that position `k` holds what was at `order[k]`, in place, following
/// each cycle of the permutation; `order` is used up.
fn permute<T: Copy>(items: &mut [T], order: &mut [u32]) {
    const DONE: u32 = u32::MAX;
    for start in 0..items.len().min(order.len()) {
        if order[start] == DONE {
            continue;
        }
        let first = items[start];
        let mut at = start;
        loop {
            let from = order[at] as usize;
            order[at] = DONE;
            if from == start || from >= items.len() {
                items[at] = first;
                break;
            }
            items[at] = items[from];
            at = from;
        }
    }
}

/// The 16 bytes of `id` when it is a hyphenated lowercase UUID (what `SessionId::generate`
/// makes), so that spelling them out gives `id` back.
fn compact_uuid(id: &str) -> Option<[u8; 16]> {
    let bytes = id.as_bytes();
    if bytes.len() != UUID_CHARS {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibble = 0;
    for (i, &c) in bytes.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            if c != b'-' {
                return None;
            }
            continue;
        }
        let value = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        out[nibble / 2] |= if nibble % 2 == 0 { value << 4 } else { value };
        nibble += 1;
    }
    Some(out)
}

/// The hyphenated lowercase spelling of `uuid`, in `buf`.
fn spell_uuid<'a>(uuid: &[u8; 16], buf: &'a mut [u8; UUID_CHARS]) -> &'a str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut at = 0;
    for (i, byte) in uuid.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            buf[at] = b'-';
            at += 1;
        }
        buf[at] = HEX[usize::from(byte >> 4)];
        buf[at + 1] = HEX[usize::from(byte & 0xf)];
        at += 2;
    }
    // Only ASCII hex digits and hyphens were written.
    std::str::from_utf8(buf).unwrap_or_default()
}

/// Best first: by score, then by entry, which is the most recently used first.
fn rank(hits: &mut [Hit]) {
    hits.sort_unstable_by(|a, b| b.score.cmp(&a.score).then(a.entry.cmp(&b.entry)));
}

/// Whether every session `query` matches is also matched by `previous`: it only adds
/// characters. A trailing backslash could turn into an escaped space, which is not narrower.
fn extends(query: &str, previous: &str) -> bool {
    query.starts_with(previous) && !previous.ends_with('\\') && !is_blank(previous)
}

/// Runs `search` to its end in steps of [`STEP`] sessions, asking `stale` before each step
/// whether a newer query made it pointless and calling `progress` after each; returns
/// whether it ran to the end.
pub fn run(
    search: &mut Search,
    index: &SearchIndex,
    mut stale: impl FnMut() -> bool,
    mut progress: impl FnMut(&Search),
) -> bool {
    loop {
        if stale() {
            return false;
        }
        let done = search.step(index, STEP);
        progress(search);
        if done {
            return true;
        }
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
