//! The repository map end to end, on real repositories on this machine (crates' sources
//! under the cargo registry, and the largest Python package of those tried in
//! site-packages): a cold map (an empty tag cache), a warm one (the cache filled, nothing
//! changed), and one after a file changed; the stages of each, whether the same inputs gave
//! the same bytes, and how full the budget is.
//!
//! Run with `cargo bench --bench repo_map` (`-- DIR…` for other trees). Each tree is copied
//! once under `target/bench-repos/` so a file of it can be changed. Medians of 3 cold and 7
//! warm maps; the whole process (start, map, exit) is measured with
//! `/usr/bin/time target/release/tern debug repo-map DIR`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tern::context::repo_map::{self, Focus, RepoMap};
use tern::domain::estimate_tokens;

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

/// The largest Python package of a few well-known ones in this Python's site-packages.
fn python_package() -> Option<PathBuf> {
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .ok()?;
    let site = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    ["sympy", "cfnlint", "moto", "networkx", "pip"]
        .iter()
        .map(|name| site.join(name))
        .find(|path| path.is_dir())
}

/// `tree` copied under `target/bench-repos/` (once), so the benchmark may change a file.
fn copy_of(tree: &Path) -> Option<PathBuf> {
    let name = tree.file_name()?;
    let copy = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-repos/repo-map")
        .join(name);
    if !copy.is_dir() {
        std::fs::create_dir_all(copy.parent()?).ok()?;
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(tree)
            .arg(&copy)
            .status()
            .ok()?;
        status.success().then_some(())?;
    }
    Some(copy)
}

/// The first file the map reads in `tree` (the one the benchmark changes).
fn first_source(tree: &Path) -> Option<PathBuf> {
    repo_map::candidates(tree)
        .0
        .into_iter()
        .map(|candidate| candidate.absolute)
        .next()
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

fn stages(map: &RepoMap) -> String {
    let t = map.timings;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "walk {:.1}, cache {:.1}, parse {:.1}, rank {:.1}, render {:.1} ms",
        ms(t.walk),
        ms(t.cache),
        ms(t.parse),
        ms(t.rank),
        ms(t.render)
    )
}

fn main() {
    let given: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    let trees = if given.is_empty() {
        let mut trees = crates(&["tokio", "web-sys", "regex-automata", "syntect"]);
        trees.extend(python_package());
        trees
    } else {
        given
    };
    let benchmarking = std::env::args().any(|arg| arg == "--bench");
    let (cold_rounds, warm_rounds) = if benchmarking { (3, 7) } else { (1, 1) };
    const BUDGET: u64 = 1_024;
    for tree in trees {
        let Some(tree) = copy_of(&tree) else {
            println!("repo_map {}: could not copy it; skipped", tree.display());
            continue;
        };
        let focus = Focus::default();
        let mut cold = Vec::new();
        let mut texts = Vec::new();
        let mut last = None;
        for _ in 0..cold_rounds {
            let cache = tempfile::tempdir().expect("a cache folder");
            let start = Instant::now();
            let map = repo_map::build(&tree, &focus, BUDGET, Some(cache.path()));
            cold.push(start.elapsed());
            texts.push(map.text.clone());
            last = Some(map);
        }
        let Some(cold_map) = last else {
            continue;
        };
        let cache = tempfile::tempdir().expect("a cache folder");
        repo_map::build(&tree, &focus, BUDGET, Some(cache.path()));
        let mut warm = Vec::new();
        let mut warm_map = None;
        for _ in 0..warm_rounds {
            let start = Instant::now();
            let map = repo_map::build(&tree, &focus, BUDGET, Some(cache.path()));
            warm.push(start.elapsed());
            texts.push(map.text.clone());
            warm_map = Some(map);
        }
        // One file changed (a line added, then taken out again).
        let mut changed = Vec::new();
        if let Some(file) = first_source(&tree)
            && let Ok(original) = std::fs::read(&file)
        {
            for round in 0..warm_rounds {
                let mut edited = original.clone();
                edited.extend_from_slice(format!("\n// edit {round}\n").as_bytes());
                let _ = std::fs::write(&file, &edited);
                let start = Instant::now();
                repo_map::build(&tree, &focus, BUDGET, Some(cache.path()));
                changed.push(start.elapsed());
            }
            let _ = std::fs::write(&file, &original);
        }
        let same = texts.windows(2).all(|pair| pair[0] == pair[1]);
        let used = estimate_tokens(&cold_map.text);
        println!(
            "repo_map {}: {} files, {} definitions, {} left out\n  \
             cold median {:.0} ms ({}); warm median {:.1} ms ({}); one file changed median \
             {:.1} ms\n  the same bytes every time: {same}; {used} of {BUDGET} tokens ({:.1}% \
             under)",
            tree.display(),
            cold_map.files,
            cold_map.definitions,
            cold_map.skipped.total(),
            median(cold),
            stages(&cold_map),
            median(warm),
            warm_map.as_ref().map(stages).unwrap_or_default(),
            if changed.is_empty() {
                f64::NAN
            } else {
                median(changed)
            },
            100.0 * (BUDGET - used.min(BUDGET)) as f64 / BUDGET as f64
        );
    }
}
