//! Splitting a worktree into parts of similar size, so its status can be counted on several
//! threads at once.
//!
//! libgit2 checks a worktree on one thread, while `git status` checks the index against the
//! files on several; on a big worktree that alone made the git working context about 1.75x
//! slower than `git status`. Counting disjoint parts of the worktree on separate threads, each
//! limited to its part by a path list, closes the gap. Counts add up across parts because
//! rename detection is off, so no change spans two parts.
//!
//! A part is a set of pieces: top-level names, and for a top-level directory too big to leave
//! whole, the names one level down. Pieces are weighed by the tracked files under them. Every
//! path a status can report must fall under some piece, so the pieces are the union of what the
//! index tracks, what is on disk and what HEAD holds (a file deleted from both the index and
//! the disk exists only in HEAD).

use std::collections::{BTreeMap, BTreeSet};

/// Tracked files per top-level name and per name one level down, gathered from index paths.
#[derive(Debug, Default)]
pub(crate) struct TrackedCounts {
    top: BTreeMap<Vec<u8>, Tracked>,
}

#[derive(Debug, Default)]
struct Tracked {
    files: usize,
    children: BTreeMap<Vec<u8>, usize>,
}

impl TrackedCounts {
    /// Counts one index path, such as `src/context/git.rs`.
    pub(crate) fn add(&mut self, path: &[u8]) {
        let mut components = path.splitn(3, |&b| b == b'/');
        let Some(top) = components.next() else {
            return;
        };
        let tracked = match self.top.get_mut(top) {
            Some(tracked) => tracked,
            None => self.top.entry(top.to_vec()).or_default(),
        };
        tracked.files += 1;
        if let Some(child) = components.next() {
            match tracked.children.get_mut(child) {
                Some(files) => *files += 1,
                None => {
                    tracked.children.insert(child.to_vec(), 1);
                }
            }
        }
    }
}

/// Splits the worktree into at most `parts` path lists of similar weight.
///
/// `names` holds the top-level names found outside the index (on disk, in HEAD). `children`
/// lists what is under a top-level directory outside the index, or returns `None` when the
/// name must stay whole (it is a file or a symlink on disk). An empty result, or a single
/// list, means the worktree is not worth splitting: count it in one go, with no path list.
pub(crate) fn split(
    tracked: TrackedCounts,
    names: BTreeSet<Vec<u8>>,
    mut children: impl FnMut(&[u8]) -> Option<BTreeSet<Vec<u8>>>,
    parts: usize,
) -> Vec<Vec<Vec<u8>>> {
    if parts < 2 {
        return Vec::new();
    }
    let mut top = tracked.top;
    for name in names {
        top.entry(name).or_default();
    }
    let total: usize = top.values().map(|t| t.files.max(1)).sum();
    // A piece heavier than half a fair share is worth breaking up, if it is a directory.
    let too_heavy = total / (2 * parts);

    let mut pieces: Vec<(usize, Vec<u8>)> = Vec::with_capacity(top.len());
    for (name, entry) in top {
        let listed = if entry.files > too_heavy && !entry.children.is_empty() {
            children(&name)
        } else {
            None
        };
        let Some(listed) = listed else {
            pieces.push((entry.files.max(1), name));
            continue;
        };
        let mut under = entry.children;
        for child in listed {
            under.entry(child).or_insert(0);
        }
        for (child, files) in under {
            let mut path = Vec::with_capacity(name.len() + 1 + child.len());
            path.extend_from_slice(&name);
            path.push(b'/');
            path.extend_from_slice(&child);
            pieces.push((files.max(1), path));
        }
    }
    if pieces.len() < 2 {
        return Vec::new();
    }

    // Heaviest first, each to the lightest part so far: within 4/3 of the best split.
    pieces.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut bins: Vec<(usize, Vec<Vec<u8>>)> = vec![(0, Vec::new()); parts.min(pieces.len())];
    for (weight, path) in pieces {
        if let Some(lightest) = bins.iter_mut().min_by_key(|(load, _)| *load) {
            lightest.0 += weight;
            lightest.1.push(path);
        }
    }
    bins.into_iter()
        .map(|(_, mut paths)| {
            paths.sort();
            paths
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked(paths: &[&str]) -> TrackedCounts {
        let mut counts = TrackedCounts::default();
        for path in paths {
            counts.add(path.as_bytes());
        }
        counts
    }

    fn set(names: &[&str]) -> BTreeSet<Vec<u8>> {
        names.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    fn strings(parts: Vec<Vec<Vec<u8>>>) -> Vec<Vec<String>> {
        parts
            .into_iter()
            .map(|paths| {
                paths
                    .into_iter()
                    .map(|p| String::from_utf8(p).expect("utf-8"))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn balances_top_level_names_and_adds_untracked_ones() {
        let paths = ["a/1", "a/2", "a/3", "b/1", "b/2", "c/1", "d"];
        let got = split(tracked(&paths), set(&["new-dir", "d"]), |_| None, 2);
        assert_eq!(
            strings(got),
            vec![vec!["a", "d"], vec!["b", "c", "new-dir"]]
        );
    }

    #[test]
    fn a_dominant_directory_is_split_one_level_down() {
        let mut paths: Vec<String> = (0..8).map(|i| format!("src/m{i}/f.rs")).collect();
        paths.push("README.md".to_owned());
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let mut asked = Vec::new();
        let got = split(
            tracked(&paths),
            set(&["README.md", "src"]),
            |name| {
                asked.push(String::from_utf8_lossy(name).into_owned());
                Some(set(&["m0", "untracked-here"]))
            },
            2,
        );
        assert_eq!(asked, vec!["src"]);
        let all: BTreeSet<String> = strings(got.clone()).into_iter().flatten().collect();
        let expected: BTreeSet<String> = (0..8)
            .map(|i| format!("src/m{i}"))
            .chain(["src/untracked-here".to_owned(), "README.md".to_owned()])
            .collect();
        assert_eq!(all, expected);
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|part| part.len() >= 4), "{got:?}");
    }

    #[test]
    fn a_directory_that_is_not_one_on_disk_stays_whole() {
        let paths = ["src/a", "src/b", "src/c", "x"];
        let got = split(tracked(&paths), BTreeSet::new(), |_| None, 2);
        assert_eq!(strings(got), vec![vec!["src"], vec!["x"]]);
    }

    #[test]
    fn nothing_to_split() {
        assert!(split(tracked(&["only"]), BTreeSet::new(), |_| None, 4).is_empty());
        assert!(split(tracked(&["a", "b"]), BTreeSet::new(), |_| None, 1).is_empty());
        assert!(split(TrackedCounts::default(), BTreeSet::new(), |_| None, 2).is_empty());
    }
}
