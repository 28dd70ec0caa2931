//! Which definitions matter: a graph of the files, each referring file pointing at the files
//! that define the names it uses, ranked with PageRank personalised by what the conversation
//! points at, then each file's rank shared among the definitions its referrers use.
//!
//! Everything here walks vectors and ordered maps in a fixed order, so the same files and
//! focus give the same floating-point sums, hence the same ranking, in every process.

use super::scan::ScannedFile;
use std::collections::BTreeMap;

/// PageRank's damping: the share of a file's rank that flows along its references.
const DAMPING: f64 = 0.85;
const MAX_ROUNDS: usize = 100;
/// The ranks have settled when a round moves them by less than this in all.
const SETTLED: f64 = 1e-12;

/// A name the conversation mentions weighs this many times more.
const MENTIONED: f64 = 10.0;
/// A long, distinctive name (`parse_config`, `SessionManager`) weighs this many times more.
const DISTINCTIVE: f64 = 10.0;
/// The length from which a name in snake, kebab or camel case counts as distinctive.
const DISTINCTIVE_LEN: usize = 8;
/// A private name (`_helper`) weighs this much.
const PRIVATE: f64 = 0.1;
/// A name defined in more than [`COMMON_DEFINERS`] files (`new`, `run`) weighs this much.
const COMMON: f64 = 0.1;
const COMMON_DEFINERS: usize = 5;
/// A definition nobody refers to still gets this share of its file's rank, so the files that
/// matter show their other definitions before unimportant files do.
const UNREFERENCED: f64 = 1e-3;

/// What the conversation points at: files (recent, mentioned with `@`) and names (in its
/// last messages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    pub files: Vec<String>,
    pub names: Vec<String>,
}

/// One definition's place in the ranking: `files[file].tags.definitions[definition]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedTag {
    pub file: usize,
    pub definition: usize,
    pub score: f64,
}

/// Every definition in `files`, most important first; ties go by path, line and name.
pub fn rank(files: &[ScannedFile], focus: &Focus) -> Vec<RankedTag> {
    let definers = definers(files);
    let mentioned: std::collections::BTreeSet<&str> =
        focus.names.iter().map(String::as_str).collect();
    // For each referring file: (defining file, name, weight), in name then file order.
    let flows: Vec<Vec<(usize, &str, f64)>> = files
        .iter()
        .enumerate()
        .map(|(from, file)| {
            let mut out = Vec::new();
            for (name, count) in &file.tags.references {
                let Some(defined_in) = definers.get(name.as_str()) else {
                    continue;
                };
                // A name defined in several files could mean any of them: they share it.
                let weight = name_weight(name, defined_in.len(), mentioned.contains(name.as_str()))
                    * f64::from(*count).sqrt()
                    / defined_in.len() as f64;
                for &to in defined_in {
                    if to != from {
                        out.push((to, name.as_str(), weight));
                    }
                }
            }
            out
        })
        .collect();
    let personal = personalisation(files, focus, &definers);
    let ranks = pagerank(&flows, &personal);
    let mut scores: BTreeMap<(usize, &str), f64> = BTreeMap::new();
    for (from, out) in flows.iter().enumerate() {
        let total: f64 = out.iter().map(|(_, _, w)| w).sum();
        if total <= 0.0 {
            continue;
        }
        for &(to, name, weight) in out {
            *scores.entry((to, name)).or_default() += ranks[from] * weight / total;
        }
    }
    let mut ranked: Vec<RankedTag> = Vec::new();
    for (file, scanned) in files.iter().enumerate() {
        // A file that defines a name several times (`fmt` for each of its types) shares
        // what the name earned among them.
        let mut same_name: BTreeMap<&str, usize> = BTreeMap::new();
        for def in &scanned.tags.definitions {
            *same_name.entry(def.name.as_str()).or_default() += 1;
        }
        for (definition, def) in scanned.tags.definitions.iter().enumerate() {
            let name = def.name.as_str();
            let referred = scores.get(&(file, name)).copied().unwrap_or(0.0)
                / same_name.get(name).copied().unwrap_or(1) as f64;
            ranked.push(RankedTag {
                file,
                definition,
                score: referred + UNREFERENCED * ranks[file],
            });
        }
    }
    ranked.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then_with(|| {
            let (fa, fb) = (&files[a.file], &files[b.file]);
            let (da, db) = (
                &fa.tags.definitions[a.definition],
                &fb.tags.definitions[b.definition],
            );
            (&fa.candidate.path, da.line, &da.name).cmp(&(&fb.candidate.path, db.line, &db.name))
        })
    });
    ranked
}

/// Each defined name, with the files that define it (in file order, once each).
fn definers(files: &[ScannedFile]) -> BTreeMap<&str, Vec<usize>> {
    let mut definers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, file) in files.iter().enumerate() {
        for def in &file.tags.definitions {
            let list = definers.entry(def.name.as_str()).or_default();
            if list.last() != Some(&index) {
                list.push(index);
            }
        }
    }
    definers
}

/// How much a reference by `name` weighs.
fn name_weight(name: &str, definers: usize, mentioned: bool) -> f64 {
    let mut weight = 1.0;
    if mentioned {
        weight *= MENTIONED;
    }
    if distinctive(name) {
        weight *= DISTINCTIVE;
    }
    if name.starts_with('_') {
        weight *= PRIVATE;
    }
    if definers > COMMON_DEFINERS {
        weight *= COMMON;
    }
    weight
}

/// A long name in snake, kebab or camel case: one that names one thing.
fn distinctive(name: &str) -> bool {
    if name.chars().count() < DISTINCTIVE_LEN {
        return false;
    }
    let cased = name.chars().any(char::is_lowercase) && name.chars().any(char::is_uppercase);
    name.contains('_') || name.contains('-') || cased
}

/// Where a random walk restarts: the focused files and those defining a focused name when
/// there are any, every file otherwise.
fn personalisation(
    files: &[ScannedFile],
    focus: &Focus,
    definers: &BTreeMap<&str, Vec<usize>>,
) -> Vec<f64> {
    let focused: std::collections::BTreeSet<&str> =
        focus.files.iter().map(String::as_str).collect();
    let mut hits: Vec<bool> = files
        .iter()
        .map(|f| focused.contains(f.candidate.path.as_str()))
        .collect();
    for name in &focus.names {
        for &file in definers.get(name.as_str()).into_iter().flatten() {
            hits[file] = true;
        }
    }
    let count = hits.iter().filter(|hit| **hit).count();
    if count == 0 {
        let even = 1.0 / files.len().max(1) as f64;
        return vec![even; files.len()];
    }
    hits.iter()
        .map(|hit| if *hit { 1.0 / count as f64 } else { 0.0 })
        .collect()
}

/// The PageRank of each file over the weighted edges `flows`, restarting at `personal`; a
/// file that refers to nothing hands its rank back by `personal` too.
fn pagerank(flows: &[Vec<(usize, &str, f64)>], personal: &[f64]) -> Vec<f64> {
    let n = flows.len();
    // Each file's edges merged by target, with their share of its outgoing weight.
    let edges: Vec<Vec<(usize, f64)>> = flows
        .iter()
        .map(|out| {
            let mut merged: BTreeMap<usize, f64> = BTreeMap::new();
            for &(to, _, weight) in out {
                *merged.entry(to).or_default() += weight;
            }
            let total: f64 = merged.values().sum();
            merged
                .into_iter()
                .filter(|_| total > 0.0)
                .map(|(to, weight)| (to, weight / total))
                .collect()
        })
        .collect();
    let mut ranks = personal.to_vec();
    for _ in 0..MAX_ROUNDS {
        let dangling: f64 = (0..n)
            .filter(|i| edges[*i].is_empty())
            .map(|i| ranks[i])
            .sum();
        let mut next: Vec<f64> = personal
            .iter()
            .map(|p| (1.0 - DAMPING) * p + DAMPING * dangling * p)
            .collect();
        for (from, out) in edges.iter().enumerate() {
            for &(to, share) in out {
                next[to] += DAMPING * ranks[from] * share;
            }
        }
        let moved: f64 = next.iter().zip(&ranks).map(|(a, b)| (a - b).abs()).sum();
        ranks = next;
        if moved < SETTLED {
            break;
        }
    }
    ranks
}
