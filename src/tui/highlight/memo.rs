//! The memo of highlighted code blocks: a small least-recently-used table.
//!
//! An exact match (same code, syntax and theme) is returned as it is. Otherwise the entry
//! whose code is the longest prefix of the new code, up to a line boundary, lets the
//! highlighter resume from that line with syntect's saved state: this is the block a reply is
//! still streaming, one token longer than at the last redraw. Lines are highlighted from the
//! state at their start only, so resuming gives exactly what starting over would.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, LazyLock, Mutex};

use syntect::highlighting::HighlightState;
use syntect::parsing::ParseState;

use super::HighlightedLine;

/// How many blocks are kept: every code block on screen plus the versions of the block being
/// streamed, which age out first since each is used once.
pub(super) const CAPACITY: usize = 64;
/// Highlighted lines kept in all (a line costs about a kilobyte): a block of thousands of
/// lines is highlighted again when it is laid out again rather than held for good, so what
/// the memo holds stays a few MiB whatever the replies were.
pub(super) const LINE_BUDGET: usize = 3_000;

/// Where a longer version of a block can pick up: the byte offset after a complete line, the
/// lines highlighted up to it (the first `count` of the block's lines, shared with its entry),
/// and syntect's state there.
#[derive(Clone)]
pub(super) struct Resume {
    pub offset: usize,
    pub lines: Arc<[HighlightedLine]>,
    pub count: usize,
    pub highlight: HighlightState,
    pub parse: ParseState,
}

/// What the memo knows about a block.
pub(super) enum Lookup {
    /// This very block, highlighted, and where a longer version of it resumes.
    Hit(Arc<[HighlightedLine]>, Option<Arc<Resume>>),
    /// An earlier, shorter version of it.
    Resume(Arc<Resume>),
    Miss,
}

struct Entry {
    code: String,
    syntax: String,
    theme: String,
    lines: Arc<[HighlightedLine]>,
    resume: Option<Arc<Resume>>,
    last_used: u64,
}

impl Entry {
    /// The highlighted lines it holds, counted against [`LINE_BUDGET`].
    fn weight(&self) -> usize {
        weight(&self.lines, self.resume.as_deref())
    }
}

/// Lines held: a resume point shares its block's lines, so only its own are counted.
fn weight(lines: &Arc<[HighlightedLine]>, resume: Option<&Resume>) -> usize {
    let apart = resume.filter(|r| !Arc::ptr_eq(&r.lines, lines));
    lines.len() + apart.map_or(0, |r| r.lines.len())
}

#[derive(Default)]
struct Memo {
    entries: HashMap<u64, Entry>,
    clock: u64,
}

static MEMO: LazyLock<Mutex<Memo>> = LazyLock::new(Mutex::default);

fn key(code: &str, syntax: &str, theme: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (code, syntax, theme).hash(&mut hasher);
    hasher.finish()
}

/// Looks a block up.
pub(super) fn lookup(code: &str, syntax: &str, theme: &str) -> Lookup {
    // A poisoned lock only means a thread panicked while updating a cache: do without it.
    let Ok(mut memo) = MEMO.lock() else {
        return Lookup::Miss;
    };
    memo.clock += 1;
    let now = memo.clock;
    if let Some(entry) = memo
        .entries
        .get_mut(&key(code, syntax, theme))
        .filter(|e| e.code == code && e.syntax == syntax && e.theme == theme)
    {
        entry.last_used = now;
        return Lookup::Hit(Arc::clone(&entry.lines), entry.resume.clone());
    }
    memo.entries
        .values()
        .filter(|e| e.syntax == syntax && e.theme == theme)
        .filter_map(|e| {
            let resume = e.resume.as_ref()?;
            let prefix = e.code.get(..resume.offset)?;
            code.starts_with(prefix).then_some(resume)
        })
        .max_by_key(|r| r.offset)
        .cloned()
        .map_or(Lookup::Miss, Lookup::Resume)
}

/// Stores a highlighted block, evicting the least recently used ones until it fits; a block
/// over the whole budget is not kept.
pub(super) fn store(
    code: &str,
    syntax: &str,
    theme: &str,
    lines: Arc<[HighlightedLine]>,
    resume: Option<Arc<Resume>>,
) {
    let Ok(mut memo) = MEMO.lock() else {
        return;
    };
    memo.clock += 1;
    let now = memo.clock;
    let hash = key(code, syntax, theme);
    memo.entries.remove(&hash);
    let needed = weight(&lines, resume.as_deref());
    if needed > LINE_BUDGET {
        return;
    }
    let mut held: usize = memo.entries.values().map(Entry::weight).sum();
    while memo.entries.len() >= CAPACITY || held + needed > LINE_BUDGET {
        let oldest = memo
            .entries
            .iter()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(h, _)| *h);
        let Some(entry) = oldest.and_then(|oldest| memo.entries.remove(&oldest)) else {
            break;
        };
        held -= entry.weight();
    }
    memo.entries.insert(
        hash,
        Entry {
            code: code.to_string(),
            syntax: syntax.to_string(),
            theme: theme.to_string(),
            lines,
            resume,
            last_used: now,
        },
    );
}

/// Lets go of every block held: once a reply has ended, the versions of its blocks as they
/// streamed are of no more use, and a block on screen is highlighted again at most once.
pub(super) fn clear() {
    if let Ok(mut memo) = MEMO.lock() {
        memo.entries = HashMap::new();
    }
}

#[cfg(test)]
pub(super) fn len() -> usize {
    MEMO.lock().map(|m| m.entries.len()).unwrap_or(0)
}

#[cfg(test)]
fn lines_held() -> usize {
    MEMO.lock()
        .map(|m| m.entries.values().map(Entry::weight).sum())
        .unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Held by the tests that look at what the memo holds, which the others' blocks (the
    /// memo is one for the process) would evict.
    static CONTENTS: Mutex<()> = Mutex::new(());

    /// Holds the memo's contents for a test that counts on what it keeps.
    pub(crate) fn contents() -> std::sync::MutexGuard<'static, ()> {
        CONTENTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[test]
    fn forgetting_lets_go_of_every_block() {
        let _contents = contents();
        let code = "let held_until_the_reply_ends = 1;\n";
        let theme = "base16-ocean.dark";
        super::super::highlight(code, "rust", theme);
        assert!(matches!(lookup(code, "Rust", theme), Lookup::Hit(..)));
        super::super::forget_highlighted();
        assert!(matches!(lookup(code, "Rust", theme), Lookup::Miss));
    }

    #[test]
    fn stays_bounded() {
        let _contents = contents();
        for i in 0..(CAPACITY + 10) {
            super::super::highlight(&format!("let v{i} = {i};"), "rust", "base16-ocean.dark");
        }
        assert!(len() <= CAPACITY);
    }

    #[test]
    fn holds_no_more_lines_than_its_budget() {
        let _contents = contents();
        let block = |lines: usize, tag: &str| -> String {
            (0..lines)
                .map(|i| format!("let {tag}{i} = {i};\n"))
                .collect()
        };
        // Blocks that fit are kept and evict the oldest; a block over the budget is not kept.
        for round in 0..4 {
            super::super::highlight(
                &block(LINE_BUDGET / 3, &format!("r{round}x")),
                "rust",
                "base16-ocean.dark",
            );
            assert!(lines_held() <= LINE_BUDGET, "{} lines held", lines_held());
        }
        let big = block(LINE_BUDGET + 1, "big");
        let first = super::super::highlight(&big, "rust", "base16-ocean.dark");
        assert!(lines_held() <= LINE_BUDGET, "{} lines held", lines_held());
        assert!(matches!(
            lookup(&big, "Rust", "base16-ocean.dark"),
            Lookup::Miss | Lookup::Resume(_)
        ));
        // Highlighted again, it is the same.
        assert_eq!(
            super::super::highlight(&big, "rust", "base16-ocean.dark"),
            first
        );
    }

    #[test]
    fn a_longer_version_resumes_after_the_last_complete_line() {
        let _contents = contents();
        let syntax = "Python";
        let theme = "InspiredGitHub";
        super::super::highlight("x = 1\ny = (2", "python", theme);
        match lookup("x = 1\ny = (2,\n 3)\n", syntax, theme) {
            Lookup::Resume(resume) => {
                assert_eq!(resume.offset, "x = 1\n".len());
                assert_eq!(resume.count, 1);
            }
            _ => panic!("expected to resume"),
        }
        // Code that differs before the saved line cannot resume from it.
        assert!(matches!(
            lookup("z = 1\ny = (2", syntax, theme),
            Lookup::Miss
        ));
        assert!(matches!(
            lookup("x = 1\ny = (2", syntax, theme),
            Lookup::Hit(..)
        ));
    }

    #[test]
    fn a_resume_point_shares_its_blocks_lines() {
        let _contents = contents();
        let theme = "InspiredGitHub";
        let lines = super::super::highlight_shared("a = 1\nb = 2\n", "python", theme);
        match lookup("a = 1\nb = 2\nc = 3\n", "Python", theme) {
            Lookup::Resume(resume) => {
                assert!(Arc::ptr_eq(&resume.lines, &lines), "shared, not copied");
                assert_eq!(resume.count, 2);
            }
            _ => panic!("expected to resume"),
        }
    }
}
