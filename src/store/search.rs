//! The search table: for every session, the text the resume picker searches (its title, the
//! start of its first input, its project dir) and whether it is archived, as one compact
//! record, so that one raw scan gives the picker everything it matches on without decoding a
//! single index entry.
//!
//! The record is rewritten in the same transaction as the index entry whenever one of those
//! fields changes (creation, the first input, a title change, archiving), and removed with the
//! session; appends that change none of them leave it alone. It is built from the session
//! index when a database from before it is opened, and rebuilt by a repair.
//!
//! A record is `[version 1][flags][title length: u16 LE][first input length: u16 LE]`, then
//! the title, the first input and the project dir (the rest) as UTF-8. Flag bit 0: archived.
//! The title is left out (length 0) when it is what the first input would be titled anyway,
//! as it usually is: the first input already holds its words.

use super::db::{Access, Store};
use super::error::StoreError;
use super::meta::SessionMeta;
use super::schema;
use super::schema::{ACTIVITY, SEARCH};
use super::summary::title_from_input;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, WriteTransaction};
use std::cell::RefCell;
use std::ops::ControlFlow;
use std::path::Path;

/// Longest start of the first input a record keeps, in characters.
pub const SEARCH_INPUT_CHARS: usize = 160;

/// Longest title a record keeps, in characters.
const TITLE_CHARS: usize = 160;

const VERSION: u8 = 1;
const ARCHIVED: u8 = 1;
const HEADER: usize = 6;

/// One session's searchable text, borrowed from the search table during a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchEntry<'a> {
    pub id: &'a str,
    /// The title, when it is not simply the title of the first input (which the first input
    /// already covers); empty otherwise.
    pub title: &'a str,
    /// The start of the first input, at most [`SEARCH_INPUT_CHARS`] characters.
    pub first_input: &'a str,
    pub project_dir: &'a str,
    pub archived: bool,
}

/// Receives a scan of the search table (see [`Store::scan_search`]).
pub trait SearchSink {
    /// The scan starts: about `sessions` entries follow. Called again when an I/O failure
    /// made the scan start over, so everything received before is to be forgotten.
    fn begin(&mut self, sessions: u64);
    /// One session's entry; entries come in id order. `Break` ends the scan.
    fn entry(&mut self, entry: SearchEntry<'_>) -> ControlFlow<()>;
    /// After the entries, every session's last activity, most recent first. `Break` ends the
    /// scan.
    fn activity(&mut self, at_ms: i64, id: &str) -> ControlFlow<()>;
}

/// The record of `meta`.
pub(super) fn encode(meta: &SessionMeta) -> Vec<u8> {
    let input = cut(&meta.first_input, SEARCH_INPUT_CHARS);
    let title = if meta.title == title_from_input(input) {
        ""
    } else {
        cut(&meta.title, TITLE_CHARS)
    };
    // Paths are checked to be UTF-8 before a session is stored.
    let project = meta.project_dir.to_str().unwrap_or_default();
    let mut record = Vec::with_capacity(HEADER + title.len() + input.len() + project.len());
    record.push(VERSION);
    record.push(if meta.archived_at_ms.is_some() {
        ARCHIVED
    } else {
        0
    });
    // Both fit: each is at most 160 characters of at most 4 bytes.
    record.extend_from_slice(&(title.len() as u16).to_le_bytes());
    record.extend_from_slice(&(input.len() as u16).to_le_bytes());
    record.extend_from_slice(title.as_bytes());
    record.extend_from_slice(input.as_bytes());
    record.extend_from_slice(project.as_bytes());
    record
}

/// The entry a record holds, or `None` for one this build cannot read.
pub(super) fn decode<'a>(id: &'a str, record: &'a [u8]) -> Option<SearchEntry<'a>> {
    let (&[version, flags, t0, t1, i0, i1], rest) = record.split_first_chunk::<HEADER>()?;
    if version != VERSION {
        return None;
    }
    let title_len = usize::from(u16::from_le_bytes([t0, t1]));
    let input_len = usize::from(u16::from_le_bytes([i0, i1]));
    let title = rest.get(..title_len)?;
    let input = rest.get(title_len..title_len.checked_add(input_len)?)?;
    let project = rest.get(title_len + input_len..)?;
    Some(SearchEntry {
        id,
        title: std::str::from_utf8(title).ok()?,
        first_input: std::str::from_utf8(input).ok()?,
        project_dir: std::str::from_utf8(project).ok()?,
        archived: flags & ARCHIVED != 0,
    })
}

/// At most `chars` characters of the start of `text`.
fn cut(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// Brings the record of session `id` in step with its index entry going from `before` to
/// `after` (`None`: absent), inside the caller's transaction. Writes only when the record
/// changes.
pub(super) fn sync(
    txn: &WriteTransaction,
    id: &str,
    before: Option<&[u8]>,
    after: Option<&SessionMeta>,
) -> Result<(), redb::Error> {
    match after {
        Some(meta) => {
            let record = encode(meta);
            if before != Some(record.as_slice()) {
                txn.open_table(SEARCH)?.insert(id, record.as_slice())?;
            }
        }
        None => {
            txn.open_table(SEARCH)?.remove(id)?;
        }
    }
    Ok(())
}

/// Creates the table from the session index when the database has none yet.
pub(super) fn ensure(db: &Database, path: &Path) -> Result<(), StoreError> {
    if !schema::is_missing(db, path, SEARCH)? {
        return Ok(());
    }
    schema::derive_from_index(db, path, SEARCH, |search, id, meta| {
        // An entry that does not decode is listed by nothing anyway.
        if let Some(meta) = meta {
            search.insert(id, encode(&meta).as_slice())?;
        }
        Ok(())
    })
}

impl Store {
    /// Hands every session's search record to `sink` (in id order), then every session's
    /// last activity (most recent first), all from one read snapshot. Returns `false` when
    /// the sink ended the scan early. Records this build cannot read are skipped.
    pub fn scan_search(&self, sink: &mut dyn SearchSink) -> Result<bool, StoreError> {
        let sink = RefCell::new(sink);
        self.run(Access::Read, |db, _| {
            let mut sink = sink.borrow_mut();
            let txn = db.begin_read().map_err(|e| self.err(e))?;
            let search = txn.open_table(SEARCH).map_err(|e| self.err(e))?;
            sink.begin(search.len().map_err(|e| self.err(e))?);
            for item in search.iter().map_err(|e| self.err(e))? {
                let (key, value) = item.map_err(|e| self.err(e))?;
                let Some(entry) = decode(key.value(), value.value()) else {
                    continue;
                };
                if sink.entry(entry).is_break() {
                    return Ok(false);
                }
            }
            let activity = txn.open_table(ACTIVITY).map_err(|e| self.err(e))?;
            for item in activity.iter().map_err(|e| self.err(e))?.rev() {
                let (key, _) = item.map_err(|e| self.err(e))?;
                let (at_ms, id) = key.value();
                if sink.activity(at_ms, id).is_break() {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionId, SessionKey};

    fn meta(title: &str, first_input: &str, project: &str) -> SessionMeta {
        let id = SessionId::from_string("s");
        SessionMeta {
            title: title.into(),
            first_input: first_input.into(),
            ..SessionMeta::new(id.clone(), SessionKey::cli(&id), project.into(), 1)
        }
    }

    fn check(meta: &SessionMeta, title: &str, first_input: &str) {
        let record = encode(meta);
        let entry = decode("s", &record).expect("decodes");
        assert_eq!(entry.title, title);
        assert_eq!(entry.first_input, first_input);
        assert_eq!(entry.project_dir, meta.project_dir.to_str().unwrap());
        assert_eq!(entry.archived, meta.archived_at_ms.is_some());
    }

    #[test]
    fn a_title_taken_from_the_first_input_is_not_stored_twice() {
        check(
            &meta("fix the build", "fix the build\nplease", "/p"),
            "",
            "fix the build\nplease",
        );
        check(
            &meta("Build fixes", "fix the build", "/p"),
            "Build fixes",
            "fix the build",
        );
        check(&meta("", "", ""), "", "");
    }

    #[test]
    fn long_text_is_capped_at_a_character_boundary() {
        let long = "é".repeat(500);
        let record = encode(&meta(&long, &long, "/p/ü"));
        let entry = decode("s", &record).expect("decodes");
        assert_eq!(entry.first_input.chars().count(), SEARCH_INPUT_CHARS);
        assert_eq!(entry.title.chars().count(), TITLE_CHARS);
        assert_eq!(entry.project_dir, "/p/ü");
    }

    #[test]
    fn archived_sessions_are_flagged() {
        let mut archived = meta("t", "x", "/p");
        archived.archived_at_ms = Some(5);
        check(&archived, "t", "x");
    }

    #[test]
    fn damaged_records_are_refused_not_misread() {
        let good = encode(&meta("title", "input", "/p"));
        assert!(decode("s", &good).is_some());
        for len in 0..good.len() {
            // Cut short: either refused, or the project dir is shorter; never a panic.
            let _ = decode("s", &good[..len]);
        }
        assert_eq!(decode("s", &good[..HEADER - 1]), None);
        let mut bad_version = good.clone();
        bad_version[0] = 9;
        assert_eq!(decode("s", &bad_version), None);
        let mut bad_length = good.clone();
        bad_length[2] = 0xff;
        assert_eq!(decode("s", &bad_length), None);
        let mut bad_utf8 = good;
        bad_utf8[HEADER] = 0xff;
        assert_eq!(decode("s", &bad_utf8), None);
    }
}
