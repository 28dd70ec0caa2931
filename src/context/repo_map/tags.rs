//! The tags of one file: what it defines (name, kind, line, the line's text as a signature)
//! and which names it refers to, how often.

use super::lang::{Grammar, Lang, TagKind};
use std::collections::{BTreeMap, HashMap};
use tree_sitter::{Node, Parser, QueryCursor, StreamingIterator};

/// A signature line longer than this many characters is cut.
const SIGNATURE_MAX_CHARS: usize = 160;

/// One definition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Definition {
    pub name: String,
    pub kind: TagKind,
    /// The line the definition starts on, from 0.
    pub line: u32,
    /// That line's text, without its indentation's end or trailing blanks.
    pub signature: String,
}

/// What one file defines and refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTags {
    pub lang: Lang,
    /// In the order they appear.
    pub definitions: Vec<Definition>,
    /// Each name the file refers to (other than its own definitions' names where they are
    /// defined), with how many times, sorted by name. Shared: a project's files name the
    /// same things, and the cache gives each name one allocation for all of them.
    pub references: References,
}

/// Names referred to, each with how many times, sorted by name.
pub type References = Vec<(std::sync::Arc<str>, u32)>;

/// Why a file gave no tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// tree-sitter could make nothing of it: no tree, or a tree of errors with no definition.
    Unparsable,
}

/// The tags of `source`, a file in `grammar`'s language. `parser` is the calling thread's,
/// reused from file to file.
pub fn extract(
    grammar: &Grammar,
    parser: &mut Parser,
    source: &[u8],
) -> Result<FileTags, Unreadable> {
    parser
        .set_language(&grammar.language)
        .map_err(|_| Unreadable::Unparsable)?;
    let tree = parser.parse(source, None).ok_or(Unreadable::Unparsable)?;
    let root = tree.root_node();
    let (definitions, references) = walk(grammar, root, source);
    if root.has_error() && definitions.is_empty() {
        return Err(Unreadable::Unparsable);
    }
    Ok(FileTags {
        lang: grammar.lang,
        definitions,
        references,
    })
}

/// A definition a pattern matched, before the patterns that matched one name are weighed.
struct Candidate {
    pattern: usize,
    start_byte: usize,
    definition: Definition,
}

/// One walk over the tree: the definitions (the query run at each node a pattern may start
/// at, and nowhere else), in the order they start, and every identifier-like leaf that is
/// not a definition's name, counted by name. Where several patterns match one name, the
/// first pattern in the query's text says what it is. Names of one character are left out
/// of the references: they never tell which definition is meant.
fn walk(grammar: &Grammar, root: Node<'_>, source: &[u8]) -> (Vec<Definition>, References) {
    let mut query_cursor = QueryCursor::new();
    // Patterns start at the node they run at; the cursor goes no deeper than they reach.
    query_cursor.set_max_start_depth(Some(0));
    let mut found: HashMap<usize, Candidate> = HashMap::new();
    let mut counts: BTreeMap<&[u8], u32> = BTreeMap::new();
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        if grammar.starts_pattern(node) {
            matches_at(grammar, &mut query_cursor, node, source, &mut found);
        }
        if cursor.goto_first_child() {
            continue;
        }
        // A leaf: a definition's name was met (at its pattern's start) before it.
        let range = node.byte_range();
        if range.len() > 1 && grammar.is_reference(node) && !found.contains_key(&node.id()) {
            *counts.entry(&source[range]).or_default() += 1;
        }
        loop {
            if cursor.goto_next_sibling() {
                continue 'walk;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    let mut all: Vec<Candidate> = found.into_values().collect();
    all.sort_by(|a, b| (a.start_byte, &a.definition.name).cmp(&(b.start_byte, &b.definition.name)));
    let definitions = all.into_iter().map(|c| c.definition).collect();
    let references = counts
        .into_iter()
        .map(|(name, n)| (std::sync::Arc::from(String::from_utf8_lossy(name)), n))
        .collect();
    (definitions, references)
}

/// The definitions the patterns starting at `node` match, into `found` by their name's node.
fn matches_at(
    grammar: &Grammar,
    cursor: &mut QueryCursor,
    node: Node<'_>,
    source: &[u8],
    found: &mut HashMap<usize, Candidate>,
) {
    let mut matches = cursor.matches(&grammar.query, node, source);
    while let Some(m) = matches.next() {
        let mut name = None;
        let mut kind = None;
        for capture in m.captures() {
            if capture.index == grammar.name_capture {
                name = Some(capture.node);
            } else if let Some(Some(k)) = grammar.kinds.get(capture.index as usize) {
                kind = Some((*k, capture.node));
            }
        }
        let (Some(name), Some((kind, node))) = (name, kind) else {
            continue;
        };
        let text = String::from_utf8_lossy(&source[name.byte_range()]).into_owned();
        if text.is_empty() || (kind == TagKind::Constant && !reads_as_constant(grammar.lang, &text))
        {
            continue;
        }
        let row = node.start_position().row;
        let candidate = Candidate {
            pattern: m.pattern_index,
            start_byte: node.start_byte(),
            definition: Definition {
                name: text,
                kind,
                line: u32::try_from(row).unwrap_or(u32::MAX),
                signature: signature(source, node.start_byte()),
            },
        };
        match found.get(&name.id()) {
            Some(seen) if seen.pattern <= candidate.pattern => {}
            _ => {
                found.insert(name.id(), candidate);
            }
        }
    }
}

/// Whether a name an assignment defines reads as a constant: in languages whose syntax
/// does not say so, only names without lower-case letters (`MAX_SIZE`) count.
fn reads_as_constant(lang: Lang, name: &str) -> bool {
    match lang {
        Lang::Python
        | Lang::Java
        | Lang::Bash
        | Lang::JavaScript
        | Lang::TypeScript
        | Lang::Tsx => {
            !name.chars().any(char::is_lowercase) && name.chars().any(char::is_alphabetic)
        }
        _ => true,
    }
}

/// The text of the line of `source` holding byte `at`, trimmed and cut to
/// [`SIGNATURE_MAX_CHARS`]; found from `at` itself, so a file of many definitions costs
/// each only its own line.
fn signature(source: &[u8], at: usize) -> String {
    let at = at.min(source.len());
    let start = source[..at]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |newline| newline + 1);
    let end = source[at..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(source.len(), |newline| at + newline);
    let line = &source[start..end];
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end();
    match text.char_indices().nth(SIGNATURE_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
