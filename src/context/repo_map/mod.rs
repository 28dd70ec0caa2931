//! The repository map's raw material: the tags (definitions and references) of every file
//! of the project in a language tree-sitter reads, gathered on every core.
//!
//! `lang.rs` says which files are in which language and compiles each language's definition
//! query once per process; `tags.rs` reads one file's tags; `scan.rs` walks the project (as
//! `rg --files` would) and parses its files in parallel, counting those it leaves out.

mod lang;
mod scan;
mod tags;

#[cfg(test)]
mod tests;

pub use lang::{Lang, QUERIES_VERSION, TagKind};
pub use scan::{Candidate, MAX_FILE_BYTES, ScannedFile, Skipped, candidates, parse_all};
pub use tags::{Definition, FileTags};

use std::num::NonZeroUsize;
use std::path::Path;

/// Every file's tags under `root`, and what was left out.
pub fn scan(root: &Path) -> (Vec<ScannedFile>, Skipped) {
    let (files, mut skipped) = candidates(root);
    let threads = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let (scanned, left) = parse_all(&files, threads);
    skipped.add(left);
    (scanned, skipped)
}
