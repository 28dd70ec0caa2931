//! Reading a repository's tags: the files come from the walk that honours `.gitignore` (as
//! `rg --files` lists them), in name order, and are parsed on every core at once; what cannot
//! be read is counted by why.

use super::cache::{self, Cache, Cached, Held, Reuse};
use super::lang::Lang;
use super::tags::{self, FileTags};
use crate::tools::path_text;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tree_sitter::Parser;

/// Files larger than this are left out: generated code, bundles and data, not code to map.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The walk stops after this many files in a language it reads: a directory this large (a
/// home directory, a monorepo's root) is mapped by its first files in name order.
pub const MAX_FILES: usize = 50_000;

/// How much of a file is looked at to tell a binary one (a NUL byte in it).
const BINARY_SNIFF_BYTES: usize = 8 << 10;

/// A file in a language the map reads, found by the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Relative to the root, as the tools show paths.
    pub path: String,
    pub absolute: PathBuf,
    pub lang: Lang,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when unknown).
    pub mtime_ns: i64,
}

/// A file's tags, with what identifies the version they were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScannedFile {
    pub candidate: Candidate,
    pub tags: FileTags,
    /// The hash of the content they were read from (see `cache::fnv64`).
    pub hash: u64,
}

/// How many files were left out, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    pub too_large: usize,
    pub binary: usize,
    pub unparsable: usize,
    /// Vanished or unreadable between the walk and the read.
    pub unreadable: usize,
    /// The walk stopped at [`MAX_FILES`].
    pub beyond_limit: bool,
}

impl Skipped {
    pub fn total(&self) -> usize {
        self.too_large + self.binary + self.unparsable + self.unreadable
    }

    pub fn add(&mut self, other: Skipped) {
        self.too_large += other.too_large;
        self.binary += other.binary;
        self.unparsable += other.unparsable;
        self.unreadable += other.unreadable;
        self.beyond_limit |= other.beyond_limit;
    }
}

/// The files under `root` in the languages the map reads, in name order, those over
/// [`MAX_FILE_BYTES`] already counted out.
pub fn candidates(root: &Path) -> (Vec<Candidate>, Skipped) {
    let mut skipped = Skipped::default();
    let mut found = Vec::new();
    let walk = ignore::WalkBuilder::new(root)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walk {
        let Ok(entry) = entry else {
            continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some(lang) = Lang::of(entry.path()) else {
            continue;
        };
        if found.len() >= MAX_FILES {
            skipped.beyond_limit = true;
            break;
        }
        let Ok(meta) = entry.metadata() else {
            skipped.unreadable += 1;
            continue;
        };
        if meta.len() > MAX_FILE_BYTES {
            skipped.too_large += 1;
            continue;
        }
        let relative = entry.path().strip_prefix(root).unwrap_or(entry.path());
        found.push(Candidate {
            path: path_text::encode(relative).into_owned(),
            absolute: entry.path().to_path_buf(),
            lang,
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
        });
    }
    (found, skipped)
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// What parsing a project's files found.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The files with tags, in the files' order.
    pub files: Vec<ScannedFile>,
    /// The files left out, with their content's hash and why (for the cache), in order.
    pub left: Vec<(Candidate, u64, Left)>,
    pub skipped: Skipped,
    pub reuse: Reuse,
}

/// Parses `files` on `threads` threads, reusing what `cache` still holds (taken out of it,
/// not copied); the results keep the files' order.
pub fn parse_all(files: &[Candidate], threads: NonZeroUsize, cache: Option<Cache>) -> Parsed {
    let mut parsed = Parsed::default();
    let mut ready: Vec<(usize, cache::Read)> = Vec::new();
    // The files to read now, each with the doubtful tags its content may confirm (taken by
    // the one thread that reads the file).
    let mut work: Vec<(usize, Mutex<Option<Cached>>)> = Vec::new();
    match cache {
        Some(mut cache) => {
            for (index, candidate) in files.iter().enumerate() {
                match cache::take(&mut cache, candidate) {
                    Held::Current(read) => ready.push((index, read)),
                    Held::Doubtful(cached) => work.push((index, Mutex::new(Some(cached)))),
                    Held::Nothing => work.push((index, Mutex::new(None))),
                }
            }
        }
        None => work.extend((0..files.len()).map(|index| (index, Mutex::new(None)))),
    }
    parsed.reuse.reused = ready.len();
    let next = AtomicUsize::new(0);
    let threads = threads.get().min(work.len().max(1));
    let mut parts: Vec<Part> = Vec::with_capacity(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| parse_some(files, &work, &next)))
            .collect();
        for worker in workers {
            // A worker that panicked (a grammar bug) loses its files, not the map.
            if let Ok(part) = worker.join() {
                parts.push(part);
            }
        }
    });
    let mut done = Vec::with_capacity(files.len());
    let mut left = Vec::new();
    for part in parts {
        ready.extend(part.done);
        parsed.skipped.add(part.skipped);
        parsed.reuse.add(part.reuse);
    }
    ready.sort_by_key(|(index, _)| *index);
    for (index, (tags, hash)) in ready {
        match tags {
            Ok(tags) => done.push(ScannedFile {
                candidate: files[index].clone(),
                tags,
                hash,
            }),
            Err(why) => {
                why.count(&mut parsed.skipped);
                left.push((files[index].clone(), hash, why));
            }
        }
    }
    parsed.files = done;
    parsed.left = left;
    parsed
}

/// What one thread did.
struct Part {
    done: Vec<(usize, cache::Read)>,
    skipped: Skipped,
    reuse: Reuse,
}

/// Takes files from `work` (by `next`) until none are left: confirms a file's doubtful tags
/// by its content, or reads it now.
fn parse_some(
    files: &[Candidate],
    work: &[(usize, Mutex<Option<Cached>>)],
    next: &AtomicUsize,
) -> Part {
    let mut parser = Parser::new();
    let mut part = Part {
        done: Vec::new(),
        skipped: Skipped::default(),
        reuse: Reuse::default(),
    };
    loop {
        let at = next.fetch_add(1, Ordering::Relaxed);
        let Some((index, slot)) = work.get(at) else {
            return part;
        };
        let index = *index;
        let candidate = &files[index];
        let doubtful = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(read) = doubtful.and_then(|cached| cache::verify(cached, candidate)) {
            part.reuse.reused += 1;
            part.reuse.verified += 1;
            part.done.push((index, read));
            continue;
        }
        match cache::read_fresh(candidate, &mut parser) {
            Some(fresh) => {
                part.reuse.parsed += 1;
                part.done.push((index, fresh));
            }
            None => part.skipped.unreadable += 1,
        }
    }
}

/// Why one file was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    TooLarge,
    Binary,
    Unparsable,
}

impl Left {
    pub(super) fn count(self, skipped: &mut Skipped) {
        match self {
            Left::TooLarge => skipped.too_large += 1,
            Left::Binary => skipped.binary += 1,
            Left::Unparsable => skipped.unparsable += 1,
        }
    }
}

/// The tags of `source`, a file in `lang`, unless it is too large, binary or unparsable.
pub fn tags_of(lang: Lang, source: &[u8], parser: &mut Parser) -> Result<FileTags, Left> {
    if source.len() as u64 > MAX_FILE_BYTES {
        return Err(Left::TooLarge);
    }
    if source[..source.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return Err(Left::Binary);
    }
    let grammar = lang.grammar().ok_or(Left::Unparsable)?;
    tags::extract(grammar, parser, source).map_err(|_| Left::Unparsable)
}
