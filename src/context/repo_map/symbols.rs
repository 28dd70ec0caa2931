//! Looking names up in a project's tags: where a name is defined, which files refer to it and
//! on which lines, names that look like one that is not there, and the outline of a file.

use super::scan::ScannedFile;
use super::tags::Definition;
use crate::tools::paths::edit_distance;

/// Where a name is defined and which files refer to it.
#[derive(Debug, Default)]
pub struct Found<'a> {
    /// In path order, then line.
    pub definitions: Vec<(&'a ScannedFile, &'a Definition)>,
    /// The files that refer to the name, with how many times; most references first, ties in
    /// path order.
    pub referrers: Vec<(&'a ScannedFile, u32)>,
}

/// Where `name` (exactly) is defined and referred to in `files`.
pub fn find<'a>(files: &'a [ScannedFile], name: &str) -> Found<'a> {
    let mut found = Found::default();
    for file in files {
        found.definitions.extend(
            file.tags
                .definitions
                .iter()
                .filter(|def| def.name == name)
                .map(|def| (file, def)),
        );
        let references = &file.tags.references;
        if let Ok(at) = references.binary_search_by(|(n, _)| (**n).cmp(name)) {
            found.referrers.push((file, references[at].1));
        }
    }
    // A stable sort keeps path order among equal counts.
    found
        .referrers
        .sort_by_key(|(_, count)| std::cmp::Reverse(*count));
    found
}

/// Up to `limit` defined names like `name` (a few edits from it, or containing it or
/// contained in it, ignoring case), the closest first, each with one place it is defined.
pub fn like<'a>(
    files: &'a [ScannedFile],
    name: &str,
    limit: usize,
) -> Vec<(&'a ScannedFile, &'a Definition)> {
    let wanted = name.to_lowercase();
    let near = (wanted.chars().count() / 3).max(2);
    let mut first: std::collections::BTreeMap<&str, (&ScannedFile, &Definition)> =
        std::collections::BTreeMap::new();
    for file in files {
        for def in &file.tags.definitions {
            first.entry(def.name.as_str()).or_insert((file, def));
        }
    }
    let mut scored: Vec<(usize, &str, (&ScannedFile, &Definition))> = first
        .into_iter()
        .filter_map(|(defined, place)| {
            let lower = defined.to_lowercase();
            let distance = edit_distance(&wanted, &lower);
            let contains = wanted.len() >= 3 && lower.contains(&wanted)
                || lower.len() >= 3 && wanted.contains(&lower);
            (distance <= near || contains).then_some((distance, defined, place))
        })
        .collect();
    scored.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, _, place)| place)
        .collect()
}

/// The lines of `source` (from 0) on which `name` stands as a whole word, with their text.
pub fn lines_naming<'s>(source: &'s str, name: &str) -> Vec<(u32, &'s str)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices(name).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + name.len()..].chars().next();
                !before.is_some_and(is_word) && !after.is_some_and(is_word)
            })
        })
        .map(|(number, line)| (u32::try_from(number).unwrap_or(u32::MAX), line))
        .collect()
}

/// One file's definitions, a line each: its number (from 1), kind and signature.
pub fn outline(definitions: &[Definition]) -> String {
    let width = definitions
        .iter()
        .map(|def| def.line + 1)
        .max()
        .map_or(1, |last| last.to_string().len());
    let mut text = String::new();
    for def in definitions {
        text.push_str(&format!(
            "{:>width$}  {:<9} {}\n",
            def.line + 1,
            def.kind.capture(),
            def.signature
        ));
    }
    text
}
