//! The repository map: the files and definitions that matter for the conversation, as
//! numbered signature lines within a token budget.
//!
//! `lang.rs` says which files are in which language and compiles each language's definition
//! query once per process; `tags.rs` reads one file's tags (definitions and the names it
//! refers to); `scan.rs` walks the project (as `rg --files` would) and parses its files on
//! every core, counting those it leaves out, and reuses the tags `cache.rs` kept of files
//! that did not change; `rank.rs` ranks the definitions (PageRank over
//! the files' references, personalised by the conversation's focus); `render.rs` writes the
//! most that fits the budget.

pub mod cache;
mod lang;
mod rank;
mod render;
mod scan;
pub mod symbols;
mod tags;

#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod rank_tests;
#[cfg(test)]
mod tests;

pub use lang::{LANGUAGES, Lang, QUERIES_VERSION, TagKind};
pub use rank::{Focus, RankedTag, rank};
pub use render::render;
pub use scan::{
    Candidate, Left, MAX_FILE_BYTES, MAX_FILES, Parsed, ScannedFile, Skipped, candidates,
    parse_all, tags_of,
};
pub use tags::{Definition, FileTags};

use std::num::NonZeroUsize;
use std::path::Path;
use std::time::{Duration, Instant};

/// A map, with what went into it and what each stage took.
#[derive(Debug, Clone, PartialEq)]
pub struct RepoMap {
    pub text: String,
    /// Files read, and definitions found in them.
    pub files: usize,
    pub definitions: usize,
    pub skipped: Skipped,
    /// Files whose tags came from the cache, and files parsed now.
    pub reuse: cache::Reuse,
    pub timings: Timings,
}

/// What each stage of a map took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub walk: Duration,
    /// Loading the tag cache, and writing it again when something changed.
    pub cache: Duration,
    pub parse: Duration,
    pub rank: Duration,
    pub render: Duration,
}

/// The map of the project at `root` for `focus`, within `budget` tokens, reusing (and then
/// updating) the tag cache in `cache_dir` when one is given.
pub fn build(root: &Path, focus: &Focus, budget: u64, cache_dir: Option<&Path>) -> RepoMap {
    let project = Project::read(root, cache_dir);
    let start = Instant::now();
    let ranked = rank(&project.files, focus);
    let ranked_at = Instant::now();
    let text = render(&project.files, &ranked, budget);
    let rendered = Instant::now();
    // Kept for the next map once this one is made, so writing it never delays its making.
    project.keep(root);
    let mut timings = project.timings;
    timings.rank = ranked_at - start;
    timings.render = rendered - ranked_at;
    timings.cache += rendered.elapsed();
    RepoMap {
        text,
        files: project.files.len(),
        definitions: ranked.len(),
        skipped: project.skipped,
        reuse: project.reuse,
        timings,
    }
}

/// Every file's tags under a project, read now or reused from the tag cache.
#[derive(Debug)]
pub struct Project {
    /// The files with tags, in path order.
    pub files: Vec<ScannedFile>,
    pub skipped: Skipped,
    pub reuse: cache::Reuse,
    /// The walk, the cache's load and the parse.
    pub timings: Timings,
    /// What [`Project::keep`] writes back, when anything changed since the cache was made.
    unsaved: Option<Unsaved>,
}

/// Tags not yet in the cache: its file, the files left out, and when the walk began.
#[derive(Debug)]
struct Unsaved {
    file: std::path::PathBuf,
    left: Vec<(Candidate, u64, Left)>,
    read_at_ns: i64,
}

impl Project {
    /// The tags of the project at `root`, reusing those the cache in `cache_dir` holds of
    /// files that did not change.
    pub fn read(root: &Path, cache_dir: Option<&Path>) -> Project {
        let start = Instant::now();
        let read_at_ns = cache::now_ns();
        let (files, mut skipped) = candidates(root);
        let walked = Instant::now();
        let cache_file = cache_dir.map(|dir| cache::file_for(dir, root));
        let cached = cache_file.as_deref().map(|file| cache::load(file, root));
        let loaded = Instant::now();
        let entries = cached.as_ref().map(|cache| cache.entries.len());
        let found = parse_all(&files, all_cores(), cached);
        skipped.add(found.skipped);
        let parsed = Instant::now();
        let changed = entries.is_some_and(|entries| {
            found.reuse.parsed + found.reuse.verified > 0 || entries != found.reuse.reused
        });
        Project {
            files: found.files,
            skipped,
            reuse: found.reuse,
            timings: Timings {
                walk: walked - start,
                cache: loaded - walked,
                parse: parsed - loaded,
                ..Timings::default()
            },
            unsaved: cache_file.filter(|_| changed).map(|file| Unsaved {
                file,
                left: found.left,
                read_at_ns,
            }),
        }
    }

    /// Writes the tags back to the cache when they changed, for the next reader.
    pub fn keep(&self, root: &Path) {
        let Some(unsaved) = &self.unsaved else {
            return;
        };
        let Unsaved {
            file,
            left,
            read_at_ns,
        } = unsaved;
        if let Err(err) = cache::save(file, root, &self.files, left, *read_at_ns) {
            tracing::warn!(file = %file.display(), %err, "could not keep the repository map's tags");
        }
    }
}

/// How long a session's prompt waits for its map: longer, and the map is left out this time
/// (the work goes on, so the cache is warm for the next).
pub const MAP_BUDGET: Duration = Duration::from_secs(2);

/// What tier B says where the map would be when it was not ready in time.
pub const MAP_PENDING: &str =
    "not ready yet (the repository is being read); it comes with a later turn";

/// The map for a session's prompt, within `budget` of waiting: `None` when the project has
/// nothing to map, [`MAP_PENDING`] when the map was not ready in time. The map is made on a
/// thread of its own; this blocks the caller up to `budget` (a caller on an async worker
/// hands that worker's other tasks on meanwhile).
pub fn for_prompt(
    root: &Path,
    focus: Focus,
    tokens: u64,
    cache_dir: &Path,
    budget: Duration,
) -> Option<String> {
    // A map of this project still being made (one that overran its budget) is not made
    // twice at once: on a project too large for the budget, threads would pile up.
    let Some(ticket) = Building::begin(root) else {
        return Some(MAP_PENDING.to_owned());
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (root, cache_dir) = (root.to_path_buf(), cache_dir.to_path_buf());
    let started = std::thread::Builder::new()
        .name("tern-repo-map".into())
        .spawn(move || {
            // Long work, whichever thread asked for it.
            crate::priority::ordinary_slice();
            let map = build(&root, &focus, tokens, Some(&cache_dir));
            drop(ticket);
            let _ = tx.send(map.text);
        });
    if let Err(err) = started {
        tracing::warn!(%err, "no thread for the repository map");
        return None;
    }
    match rx.recv_timeout(budget) {
        Ok(text) if text.is_empty() => None,
        Ok(text) => Some(text),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Some(MAP_PENDING.to_owned()),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
    }
}

/// The projects whose map is being made, in this process.
static BUILDING: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// One map being made; dropping it (when the map is done) lets the next start.
struct Building(std::path::PathBuf);

impl Building {
    fn begin(root: &Path) -> Option<Building> {
        let mut building = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        building
            .insert(root.to_path_buf())
            .then(|| Building(root.to_path_buf()))
    }
}

impl Drop for Building {
    fn drop(&mut self) {
        BUILDING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}

/// The plain words of `text` that may name a part of the project (`scheduler`, `parser`):
/// words of letters only, at least four long, in lower case, without the commonest words of
/// English requests; each once, in order.
pub fn words_in(text: &str) -> Vec<String> {
    const COMMON: &[&str] = &[
        "about", "after", "again", "also", "because", "before", "being", "could", "does", "doesn",
        "done", "each", "even", "from", "have", "here", "into", "just", "like", "look", "make",
        "more", "most", "much", "need", "only", "other", "please", "really", "same", "should",
        "some", "than", "that", "their", "them", "then", "there", "these", "they", "this", "those",
        "through", "very", "want", "were", "what", "when", "where", "which", "while", "with",
        "without", "would", "your",
    ];
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
        if word.chars().count() < 4 || !word.chars().all(char::is_alphabetic) {
            continue;
        }
        let lower = word.to_lowercase();
        if !COMMON.contains(&lower.as_str()) && !words.contains(&lower) {
            words.push(lower);
        }
    }
    words
}

/// Names in `text` that read as code: a word of letters, digits and underscores, at least
/// four long, with an underscore or a capital after its first letter (`parse_config`,
/// `SessionManager`), or any such word in backticks.
pub fn names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut quoted = false;
    let mut word = String::new();
    let flush = |word: &mut String, quoted: bool, names: &mut Vec<String>| {
        let code_like = word.contains('_') || word.chars().skip(1).any(char::is_uppercase);
        let starts_well = word
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_');
        if word.len() >= 4 && starts_well && (code_like || quoted) && !names.contains(word) {
            names.push(word.clone());
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, quoted, &mut names);
        if c == '`' {
            quoted = !quoted;
        }
    }
    flush(&mut word, quoted, &mut names);
    names
}

fn all_cores() -> NonZeroUsize {
    std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}
