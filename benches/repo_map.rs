//! The repository map's cold scan: every file's tags read from nothing, on all cores, for
//! real repositories on this machine (crates' sources under the cargo registry).
//!
//! Run with `cargo bench --bench repo_map` (`-- DIR…` for other trees). Reported per tree:
//! files read, files left out by why, definitions and references found, and the median of
//! three scans' wall time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tern::context::repo_map;

/// The registry's unpacked sources, where cargo keeps them.
fn registry() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.is_dir())
}

/// The newest unpacked version of each crate named.
fn crates(names: &[&str]) -> Vec<PathBuf> {
    let Some(registry) = registry() else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for name in names {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(&registry)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix(name))
                    .is_some_and(|rest| {
                        rest.starts_with('-') && rest[1..].starts_with(|c: char| c.is_ascii_digit())
                    })
            })
            .collect();
        versions.sort();
        found.extend(versions.pop());
    }
    found
}

fn main() {
    let given: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    let trees = if given.is_empty() {
        crates(&["tokio", "regex-automata", "syntect"])
    } else {
        given
    };
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    for tree in trees {
        let rounds = if benchmarking { 3 } else { 1 };
        let mut times: Vec<Duration> = Vec::new();
        let mut last = None;
        for _ in 0..rounds {
            let start = Instant::now();
            let scanned = repo_map::scan(&tree);
            times.push(start.elapsed());
            last = Some(scanned);
        }
        times.sort();
        let Some((files, skipped)) = last else {
            continue;
        };
        let definitions: usize = files.iter().map(|f| f.tags.definitions.len()).sum();
        let references: usize = files.iter().map(|f| f.tags.references.len()).sum();
        println!(
            "repo_map/scan {}: {} files read ({} left out: {} too large, {} binary, {} unparsable), \
             {definitions} definitions, {references} distinct names referred to per file; \
             median {:.0} ms",
            tree.display(),
            files.len(),
            skipped.total(),
            skipped.too_large,
            skipped.binary,
            skipped.unparsable,
            times[times.len() / 2].as_secs_f64() * 1000.0
        );
    }
}
