//! The repository map: the files and definitions that matter for the conversation, as
//! numbered signature lines within a token budget.
//!
//! `lang.rs` says which files are in which language and compiles each language's definition
//! query once per process; `tags.rs` reads one file's tags (definitions and the names it
//! refers to); `scan.rs` walks the project (as `rg --files` would) and parses its files on
//! every core, counting those it leaves out; `rank.rs` ranks the definitions (PageRank over
//! the files' references, personalised by the conversation's focus); `render.rs` writes the
//! most that fits the budget.

mod lang;
mod rank;
mod render;
mod scan;
mod tags;

#[cfg(test)]
mod rank_tests;
#[cfg(test)]
mod tests;

pub use lang::{Lang, QUERIES_VERSION, TagKind};
pub use rank::{Focus, RankedTag, rank};
pub use render::render;
pub use scan::{Candidate, MAX_FILE_BYTES, ScannedFile, Skipped, candidates, parse_all};
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
    pub timings: Timings,
}

/// What each stage of a map took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub walk: Duration,
    pub parse: Duration,
    pub rank: Duration,
    pub render: Duration,
}

/// The map of the project at `root` for `focus`, within `budget` tokens.
pub fn build(root: &Path, focus: &Focus, budget: u64) -> RepoMap {
    let start = Instant::now();
    let (files, mut skipped) = candidates(root);
    let walked = Instant::now();
    let threads = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let (scanned, left) = parse_all(&files, threads);
    skipped.add(left);
    let parsed = Instant::now();
    let ranked = rank(&scanned, focus);
    let ranked_at = Instant::now();
    let text = render(&scanned, &ranked, budget);
    let done = Instant::now();
    RepoMap {
        text,
        files: scanned.len(),
        definitions: ranked.len(),
        skipped,
        timings: Timings {
            walk: walked - start,
            parse: parsed - walked,
            rank: ranked_at - parsed,
            render: done - ranked_at,
        },
    }
}

/// Every file's tags under `root`, and what was left out.
pub fn scan(root: &Path) -> (Vec<ScannedFile>, Skipped) {
    let (files, mut skipped) = candidates(root);
    let threads = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let (scanned, left) = parse_all(&files, threads);
    skipped.add(left);
    (scanned, skipped)
}
