//! syntect's syntax definitions: loaded when first needed, let go when a reply ends.
//!
//! Decoding the definitions embedded in the binary takes a few milliseconds and about 1 MiB;
//! what costs is each language's patterns, which syntect compiles the first time the language
//! is highlighted: several MiB and tens of milliseconds a language (Rust's about 6 MiB). Kept
//! for the life of the process, that memory would stay long after the reply that needed it
//! had scrolled away. So when a reply ends the definitions are let go whole, compiled
//! patterns and all, and the languages that were highlighted are remembered: when the next
//! turn starts, [`claim_for_reply`] names them for a thread of its own to compile again while
//! the model thinks, so the blocks of the next reply do not wait for them.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use syntect::parsing::SyntaxSet;

/// How many languages are compiled ahead of a reply: the project's and those the last reply
/// showed, most replies needing one or two.
const PREPARED_AT_MOST: usize = 3;

#[derive(Default)]
struct Grammar {
    /// The definitions, while loaded; a highlighter holds its own reference, so letting go
    /// never pulls them from under one.
    set: Option<Arc<SyntaxSet>>,
    /// The languages (syntect's names) highlighted or being compiled since the set was
    /// loaded.
    compiled: Vec<String>,
    /// Those of the set let go last, to compile again for the next reply.
    remembered: Vec<String>,
}

static GRAMMAR: Mutex<Grammar> = Mutex::new(Grammar {
    set: None,
    compiled: Vec::new(),
    remembered: Vec::new(),
});

/// The grammar, even if a thread panicked while holding it: every change to it is whole.
fn grammar() -> MutexGuard<'static, Grammar> {
    GRAMMAR.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The syntax definitions, loaded if they are not.
pub(super) fn syntaxes() -> Arc<SyntaxSet> {
    grammar().syntaxes()
}

/// Notes that the language named `name` (syntect's name) is being highlighted, so its
/// patterns are compiled.
pub(super) fn note_compiled(name: &str) {
    grammar().note_compiled(name);
}

/// Lets go of the definitions and every compiled pattern, remembering which languages were
/// highlighted.
pub(super) fn let_go() -> Forgotten {
    grammar().let_go()
}

/// The languages to compile ahead of the next reply: `likely` (the project's, if it has one)
/// and those the last reply showed, less any compiled already; each is counted as compiled
/// from now on, so a second message sent meanwhile does not prepare it again.
pub(super) fn claim_for_reply(likely: Option<&str>) -> Vec<String> {
    grammar().claim_for_reply(likely)
}

/// Whether the definitions are loaded.
pub(super) fn loaded() -> bool {
    grammar().set.is_some()
}

/// What was let go: dropped, it frees the compiled patterns (a few milliseconds' work for a
/// big language), so drop it off the interface's thread.
#[must_use = "dropping it frees the compiled patterns: do that off the interface's thread"]
pub struct Forgotten {
    _set: Option<Arc<SyntaxSet>>,
}

impl Grammar {
    fn syntaxes(&mut self) -> Arc<SyntaxSet> {
        Arc::clone(
            self.set
                .get_or_insert_with(|| Arc::new(SyntaxSet::load_defaults_newlines())),
        )
    }

    fn note_compiled(&mut self, name: &str) {
        if !self.compiled.iter().any(|known| known == name) {
            self.compiled.push(name.to_owned());
        }
    }

    fn let_go(&mut self) -> Forgotten {
        if self.set.is_some() {
            self.remembered = std::mem::take(&mut self.compiled);
        }
        Forgotten {
            _set: self.set.take(),
        }
    }

    fn claim_for_reply(&mut self, likely: Option<&str>) -> Vec<String> {
        let mut wanted: Vec<String> = likely.map(str::to_owned).into_iter().collect();
        for name in &self.remembered {
            if !wanted.contains(name) {
                wanted.push(name.clone());
            }
        }
        wanted.retain(|name| !self.compiled.contains(name));
        wanted.truncate(PREPARED_AT_MOST);
        self.compiled.extend(wanted.iter().cloned());
        wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_s_end_lets_go_of_the_patterns_and_the_next_prepares_its_languages() {
        let mut grammar = Grammar::default();
        let set = grammar.syntaxes();
        grammar.note_compiled("Rust");
        grammar.note_compiled("Rust");
        let forgotten = grammar.let_go();
        assert!(grammar.set.is_none(), "nothing kept once the reply ended");
        // A highlighter that still holds the set keeps it until it is done; then dropping
        // what was let go frees it.
        assert_eq!(Arc::strong_count(&set), 2);
        drop(set);
        let kept = forgotten._set.as_ref().map(Arc::strong_count);
        assert_eq!(kept, Some(1), "the last reference is what was let go");
        drop(forgotten);
        // The next turn prepares the project's language and the last reply's, once.
        assert_eq!(grammar.claim_for_reply(Some("Python")), ["Python", "Rust"]);
        assert!(grammar.claim_for_reply(Some("Python")).is_empty());
        // Let go again, only what was compiled since is remembered.
        let _ = grammar.syntaxes();
        drop(grammar.let_go());
        assert_eq!(grammar.claim_for_reply(None), ["Python", "Rust"]);
        // Nothing loaded since: nothing to let go, and what is on its way is not asked again.
        drop(grammar.let_go());
        assert!(grammar.claim_for_reply(None).is_empty());
    }

    #[test]
    fn at_most_a_few_languages_are_prepared() {
        let mut grammar = Grammar::default();
        let _ = grammar.syntaxes();
        for name in ["Rust", "Python", "Go", "C", "Java"] {
            grammar.note_compiled(name);
        }
        drop(grammar.let_go());
        assert_eq!(
            grammar.claim_for_reply(Some("Rust")).len(),
            PREPARED_AT_MOST
        );
    }
}
