//! Maps between places in the config text and the keys found there, so every error can name
//! both the line and the dotted key.
//!
//! The toml crate reports a byte span with each error but not, publicly, the key path. A
//! second, spanned parse of the document ([`toml::de::DeTable`]) fills that gap: the deepest
//! key whose name or value covers the error's offset is the key at fault. Validation errors
//! go the other way, from a known key path to its span. When the document does not parse
//! (syntax errors), the key is recovered from the text: the last table header before the
//! offset and the key on the offending line.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A config document with the positions of its keys and values.
pub(crate) struct Document<'a> {
    text: &'a str,
    table: Option<Spanned<DeTable<'a>>>,
}

impl<'a> Document<'a> {
    /// Parses `text` for positions; a document that does not parse still gives line numbers.
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            table: DeTable::parse(text).ok(),
        }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub(crate) fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &self.text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.matches('\n').count() + 1;
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    /// The span of the value at `path`, or of the deepest part of it that exists (a missing
    /// key is reported where its table is). `None` when not even the first key exists.
    pub(crate) fn span_of(&self, path: &[&str]) -> Option<Range<usize>> {
        let mut table = self.table.as_ref()?.get_ref();
        let mut found = None;
        for segment in path {
            let Some((key, value)) = table.get_key_value(*segment) else {
                break;
            };
            // Tables opened by a `[header]` span the header; implicit ones (from dotted keys)
            // have no useful value span, so their key is the better place to point at.
            found = Some(if value.span().is_empty() {
                key.span()
            } else {
                value.span()
            });
            match value.get_ref() {
                DeValue::Table(inner) => table = inner,
                _ => break,
            }
        }
        found
    }

    /// The dotted key path at a byte offset, as segments.
    pub(crate) fn path_at(&self, offset: usize) -> Vec<String> {
        match &self.table {
            Some(table) => {
                let mut best = Vec::new();
                search_table(table.get_ref(), offset, &mut Vec::new(), &mut best);
                best
            }
            None => self.path_from_text(offset),
        }
    }

    /// The key at `offset` read from the raw text: the last `[header]` before its line plus
    /// the key on the line itself.
    fn path_from_text(&self, offset: usize) -> Vec<String> {
        let (line_number, _) = self.line_column(offset);
        let mut header: Vec<String> = Vec::new();
        for (index, line) in self.text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                let inner = trimmed.trim_start_matches('[');
                let inner = inner.split(']').next().unwrap_or_default();
                header = split_dotted(inner);
                if index + 1 == line_number {
                    return header;
                }
                continue;
            }
            if index + 1 == line_number {
                if let Some((key, _)) = trimmed.split_once('=') {
                    header.extend(split_dotted(key));
                }
                return header;
            }
        }
        header
    }
}

/// Walks every key and value, keeping the deepest path whose key or value covers `offset`.
/// Tables opened by a header do not span their contents, so the walk never prunes.
fn search_table(
    table: &DeTable<'_>,
    offset: usize,
    path: &mut Vec<String>,
    best: &mut Vec<String>,
) {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        search_value(key.span(), value, offset, path, best);
        path.pop();
    }
}

fn search_value(
    key_span: Range<usize>,
    value: &Spanned<DeValue<'_>>,
    offset: usize,
    path: &mut Vec<String>,
    best: &mut Vec<String>,
) {
    let covers =
        |span: Range<usize>| span.contains(&offset) || (span.is_empty() && span.start == offset);
    if (covers(key_span) || covers(value.span())) && path.len() > best.len() {
        best.clone_from(path);
    }
    match value.get_ref() {
        DeValue::Table(inner) => search_table(inner, offset, path, best),
        // Items of an array are reported as the array's key: `session` reads better than
        // `session.0` in a message about `[[session]]`.
        DeValue::Array(items) => {
            for item in items.iter() {
                if let DeValue::Table(inner) = item.get_ref() {
                    search_table(inner, offset, path, best);
                }
            }
        }
        _ => {}
    }
}

/// Splits `a.b."c.d"` into its keys; quotes are removed, whitespace around dots ignored.
fn split_dotted(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '.') => keys.push(std::mem::take(&mut current).trim().to_owned()),
            _ => current.push(c),
        }
    }
    keys.push(current.trim().to_owned());
    keys.retain(|k| !k.is_empty());
    keys
}

/// Joins key segments for display, quoting those that are not bare TOML keys.
pub(crate) fn dotted(path: &[impl AsRef<str>]) -> String {
    path.iter()
        .map(|segment| {
            let segment = segment.as_ref();
            let bare = !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if bare {
                segment.to_owned()
            } else {
                format!("{segment:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "top = 1\n\n[session]\nidle_timeout = 3\n\n[session.maintenance]\nmode = \"warn\"\n\n[providers.\"my.work\"]\nkind = \"x\"\n";

    fn offset_of(needle: &str) -> usize {
        DOC.find(needle).unwrap()
    }

    #[test]
    fn path_at_finds_nested_keys() {
        let doc = Document::new(DOC);
        assert_eq!(
            doc.path_at(offset_of("idle_timeout")),
            ["session", "idle_timeout"]
        );
        assert_eq!(
            doc.path_at(offset_of("\"warn\"")),
            ["session", "maintenance", "mode"]
        );
        assert_eq!(
            doc.path_at(offset_of("\"x\"")),
            ["providers", "my.work", "kind"]
        );
        assert_eq!(doc.path_at(offset_of("top")), ["top"]);
    }

    #[test]
    fn span_of_points_at_values_and_headers() {
        let doc = Document::new(DOC);
        let line = |path: &[&str]| doc.span_of(path).map(|s| doc.line_column(s.start));
        assert_eq!(line(&["session", "idle_timeout"]), Some((4, 16)));
        assert_eq!(line(&["session", "maintenance", "missing"]), Some((6, 1)));
        assert_eq!(line(&["providers", "my.work", "kind"]), Some((10, 8)));
        assert_eq!(line(&["nothing"]), None);
    }

    #[test]
    fn broken_documents_fall_back_to_the_text() {
        let text = "[session]\nidle_timeout = 3\nidle_timeout = 4\n";
        let doc = Document::new(text);
        let offset = text.rfind("idle_timeout").unwrap();
        assert_eq!(doc.path_at(offset), ["session", "idle_timeout"]);
        assert_eq!(doc.line_column(offset), (3, 1));
        assert_eq!(split_dotted(" a . \"b.c\" "), ["a", "b.c"]);
    }

    #[test]
    fn dotted_quotes_odd_segments() {
        assert_eq!(
            dotted(&["providers", "my.work", "kind"]),
            "providers.\"my.work\".kind"
        );
    }
}
