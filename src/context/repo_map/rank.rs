//! Which definitions matter: a graph of the files, each referring file pointing at the files
//! that define the names it uses, ranked with PageRank personalised by what the conversation
//! points at, then each file's rank shared among the definitions its referrers use.
//!
//! Everything here walks vectors in a fixed order (the one hash map is only looked up), so
//! the same files and focus give the same floating-point sums, hence the same ranking, in
//! every process.

use super::scan::ScannedFile;

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
/// The definitions of a file the conversation's words name share this much of its file's
/// rank, so the file's own outline shows beside what it uses without crowding it out.
const FOCUSED: f64 = 1.0;
/// A definition nobody refers to still gets this share of its file's rank, so the files that
/// matter show their other definitions before unimportant files do.
const UNREFERENCED: f64 = 1e-3;

/// What the conversation points at: files (recent, mentioned with `@`; a folder stands for
/// the files under it), as paths relative to the project, names (in its last messages,
/// written as code), and plain words of those messages (lower case), which focus the files
/// and folders named so (`scheduler` → `src/scheduler/`, `scheduler.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Focus {
    pub files: Vec<String>,
    pub names: Vec<String>,
    pub words: Vec<String>,
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
    let names = Names::of(files);
    let mentioned: std::collections::BTreeSet<&str> =
        focus.names.iter().map(String::as_str).collect();
    let graph = Graph::of(files, &names, &mentioned);
    let (personal, focused) = personalisation(files, focus, &mentioned, &names);
    let ranks = pagerank(&graph, &names, &personal);
    // What each (file, name) slot earned: what flowed to its name, less its file's own part.
    let out = graph.out(&ranks);
    let flowed = graph.flowed(&out);
    let mut earned: Vec<f64> = names.slot_name.iter().map(|&name| flowed[name]).collect();
    for (reference, slot) in &graph.selfs {
        let own = out[reference.file] * reference.weight;
        earned[*slot] = (earned[*slot] - own).max(0.0);
    }
    let mut ranked: Vec<RankedTag> = Vec::new();
    for (file, slots) in names.slot_of.iter().enumerate() {
        for (definition, &slot) in slots.iter().enumerate() {
            // A file that defines a name several times (`fmt` for each of its types)
            // shares what the name earned among them.
            let referred = earned[slot] / names.slot_defs[slot] as f64;
            // A name the conversation mentions is shown where it is defined, referred to
            // or not.
            let name = files[file].tags.definitions[definition].name.as_str();
            let own = if mentioned.contains(name) {
                1.0
            } else if focused[file] {
                FOCUSED / slots.len() as f64
            } else {
                UNREFERENCED
            };
            ranked.push(RankedTag {
                file,
                definition,
                score: referred + own * ranks[file],
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

/// The defined names, numbered, and where each is defined. A slot is one name in one file.
struct Names<'a> {
    /// Name → its number; only looked up, never walked, so its order cannot matter (and a
    /// hash that is fast on short keys does).
    ids: rustc_hash::FxHashMap<&'a str, usize>,
    /// By name number: the files defining it, in file order, with the name's slot there.
    definers: Vec<Vec<(usize, usize)>>,
    /// By file, then definition: its slot.
    slot_of: Vec<Vec<usize>>,
    /// By slot: how many definitions share it, the file and the name's number.
    slot_defs: Vec<usize>,
    slot_file: Vec<usize>,
    slot_name: Vec<usize>,
}

impl<'a> Names<'a> {
    fn of(files: &'a [ScannedFile]) -> Self {
        let mut names = Names {
            ids: rustc_hash::FxHashMap::default(),
            definers: Vec::new(),
            slot_of: Vec::with_capacity(files.len()),
            slot_defs: Vec::new(),
            slot_file: Vec::new(),
            slot_name: Vec::new(),
        };
        for (index, file) in files.iter().enumerate() {
            let mut slots = Vec::with_capacity(file.tags.definitions.len());
            for def in &file.tags.definitions {
                let next = names.definers.len();
                let id = *names.ids.entry(def.name.as_str()).or_insert(next);
                if id == next {
                    names.definers.push(Vec::new());
                }
                let list = &mut names.definers[id];
                let slot = match list.last() {
                    Some(&(file, slot)) if file == index => slot,
                    _ => {
                        let slot = names.slot_defs.len();
                        names.slot_defs.push(0);
                        names.slot_file.push(index);
                        names.slot_name.push(id);
                        list.push((index, slot));
                        slot
                    }
                };
                names.slot_defs[slot] += 1;
                slots.push(slot);
            }
            names.slot_of.push(slots);
        }
        names
    }
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
/// there are any, every file otherwise; a file the conversation points at in several ways
/// (`runtime/blocking/pool.rs` for "the blocking pool") weighs that many times more. Also
/// which files the conversation's plain words name: the model may not have seen them, so
/// their own outline is shown too.
fn personalisation(
    files: &[ScannedFile],
    focus: &Focus,
    mentioned: &std::collections::BTreeSet<&str>,
    names: &Names<'_>,
) -> (Vec<f64>, Vec<bool>) {
    // A focused folder focuses every file under it.
    let under = |path: &str, focused: &str| {
        let focused = focused.trim_end_matches('/');
        path.strip_prefix(focused)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    // Per file, how many plain words of the conversation name one of its folders or its
    // stem; a word naming most of the project (`src`) singles nothing out and is passed over.
    let names_part = |path: &str, word: &str| {
        path.split('/').any(|part| {
            let stem = part.split('.').next().unwrap_or(part);
            stem.eq_ignore_ascii_case(word)
        })
    };
    let mut words = vec![0usize; files.len()];
    for word in &focus.words {
        let named: Vec<bool> = files
            .iter()
            .map(|f| names_part(&f.candidate.path, word))
            .collect();
        if named.iter().filter(|n| **n).count() * 2 > files.len() {
            continue;
        }
        for (count, named) in words.iter_mut().zip(named) {
            *count += usize::from(named);
        }
    }
    let mut hits: Vec<usize> = files
        .iter()
        .zip(&words)
        .map(|(f, words)| {
            usize::from(focus.files.iter().any(|p| under(&f.candidate.path, p))) + words
        })
        .collect();
    for name in mentioned {
        if let Some(&id) = names.ids.get(name) {
            for &(file, _) in &names.definers[id] {
                hits[file] += 1;
            }
        }
    }
    let named: Vec<bool> = words.iter().map(|count| *count > 0).collect();
    let count: usize = hits.iter().sum();
    if count == 0 {
        let even = 1.0 / files.len().max(1) as f64;
        return (vec![even; files.len()], named);
    }
    let personal = hits.iter().map(|hit| *hit as f64 / count as f64).collect();
    (personal, named)
}

/// The PageRank of each file over the references of `graph`, restarting at `personal`; a
/// file that refers to nothing defined elsewhere hands its rank back by `personal` too.
fn pagerank(graph: &Graph, names: &Names<'_>, personal: &[f64]) -> Vec<f64> {
    let n = personal.len();
    let mut ranks = personal.to_vec();
    for _ in 0..MAX_ROUNDS {
        let dangling: f64 = (0..n)
            .filter(|&file| graph.total[file] <= 0.0)
            .map(|file| ranks[file])
            .sum();
        let mut next: Vec<f64> = personal
            .iter()
            .map(|p| (1.0 - DAMPING) * p + DAMPING * dangling * p)
            .collect();
        // What reaches a name goes to each file defining it, except back to the referrer.
        let out = graph.out(&ranks);
        let flowed = graph.flowed(&out);
        for (&file, &name) in names.slot_file.iter().zip(&names.slot_name) {
            next[file] += DAMPING * flowed[name];
        }
        for (reference, _) in &graph.selfs {
            let own = DAMPING * out[reference.file] * reference.weight;
            next[reference.file] = (next[reference.file] - own).max(0.0);
        }
        let moved: f64 = next.iter().zip(&ranks).map(|(a, b)| (a - b).abs()).sum();
        ranks = next;
        if moved < SETTLED {
            break;
        }
    }
    ranks
}

/// One file's references to one defined name: how much of the file's rank goes each of the
/// name's other definers' way, before the file's total is divided out.
#[derive(Debug, Clone, Copy)]
struct Reference {
    file: usize,
    name: usize,
    weight: f64,
}

/// The files' references to defined names, and each file's total weight out, so a round
/// costs one step per reference and one per definition rather than one per pair of files.
struct Graph {
    /// In the order of the files, then of their references.
    references: Vec<Reference>,
    /// The references of a file to a name it defines too (no rank goes back to itself), with
    /// the file's slot for the name.
    selfs: Vec<(Reference, usize)>,
    /// Per file: the weight of all it hands on, each definer counted.
    total: Vec<f64>,
    names: usize,
}

impl Graph {
    fn of(
        files: &[ScannedFile],
        names: &Names<'_>,
        mentioned: &std::collections::BTreeSet<&str>,
    ) -> Graph {
        let mut graph = Graph {
            references: Vec::new(),
            selfs: Vec::new(),
            total: vec![0.0; files.len()],
            names: names.definers.len(),
        };
        for (file, tags) in files.iter().map(|f| &f.tags).enumerate() {
            for (name, count) in &tags.references {
                let name: &str = name;
                let Some(&id) = names.ids.get(name) else {
                    continue;
                };
                let defined_in = &names.definers[id];
                // A name defined in several files could mean any of them: they share it.
                let weight = name_weight(name, defined_in.len(), mentioned.contains(name))
                    * f64::from(*count).sqrt()
                    / defined_in.len() as f64;
                let own_slot = defined_in
                    .iter()
                    .find(|(definer, _)| *definer == file)
                    .map(|(_, slot)| *slot);
                let others = defined_in.len() - usize::from(own_slot.is_some());
                // A name only this file defines hands nothing on.
                if others == 0 {
                    continue;
                }
                graph.total[file] += weight * others as f64;
                let reference = Reference {
                    file,
                    name: id,
                    weight,
                };
                if let Some(slot) = own_slot {
                    graph.selfs.push((reference, slot));
                }
                graph.references.push(reference);
            }
        }
        graph
    }

    /// Per file: its rank over its total weight out, which a reference's weight turns into
    /// what it hands each definer of its name.
    fn out(&self, ranks: &[f64]) -> Vec<f64> {
        ranks
            .iter()
            .zip(&self.total)
            .map(|(rank, total)| if *total > 0.0 { rank / total } else { 0.0 })
            .collect()
    }

    /// Per name: what reaches each of its definers from all the files referring to it.
    fn flowed(&self, out: &[f64]) -> Vec<f64> {
        let mut flowed = vec![0.0f64; self.names];
        for reference in &self.references {
            flowed[reference.name] += out[reference.file] * reference.weight;
        }
        flowed
    }
}
