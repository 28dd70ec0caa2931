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
mod tags;

#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod rank_tests;
#[cfg(test)]
mod tests;

pub use lang::{Lang, QUERIES_VERSION, TagKind};
pub use rank::{Focus, RankedTag, rank};
pub use render::render;
pub use scan::{Candidate, MAX_FILE_BYTES, Parsed, ScannedFile, Skipped, candidates, parse_all};
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
    let start = Instant::now();
    let (files, mut skipped) = candidates(root);
    let walked = Instant::now();
    let cache_file = cache_dir.map(|dir| cache::file_for(dir, root));
    let cached = cache_file.as_deref().map(|file| cache::load(file, root));
    let loaded = Instant::now();
    let threads = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let found = parse_all(&files, threads, cached.as_ref());
    skipped.add(found.skipped);
    let (scanned, reuse) = (found.files, found.reuse);
    let parsed = Instant::now();
    let ranked = rank(&scanned, focus);
    let ranked_at = Instant::now();
    let text = render(&scanned, &ranked, budget);
    let rendered = Instant::now();
    // Kept for the next map once this one is made, so writing it never delays this one.
    let changed = cached
        .as_ref()
        .is_some_and(|c| reuse.parsed > 0 || c.entries.len() != reuse.reused);
    if let (Some(file), true) = (&cache_file, changed)
        && let Err(err) = cache::save(file, root, &scanned, &found.left)
    {
        tracing::warn!(file = %file.display(), %err, "could not keep the repository map's tags");
    }
    let saved = Instant::now();
    RepoMap {
        text,
        files: scanned.len(),
        definitions: ranked.len(),
        skipped,
        reuse,
        timings: Timings {
            walk: walked - start,
            cache: (loaded - walked) + (saved - rendered),
            parse: parsed - loaded,
            rank: ranked_at - parsed,
            render: rendered - ranked_at,
        },
    }
}

/// Every file's tags under `root`, and what was left out, read now.
pub fn scan(root: &Path) -> (Vec<ScannedFile>, Skipped) {
    let (files, mut skipped) = candidates(root);
    let threads = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let found = parse_all(&files, threads, None);
    skipped.add(found.skipped);
    (found.files, skipped)
}
