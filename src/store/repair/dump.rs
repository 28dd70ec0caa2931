//! The `dump` task: every entry of the tables that the storage engine can still read, from a
//! worker (see `worker`), and what the repairing side makes of the stream.
//!
//! The worker opens the file on an in-memory overlay, so the file is never written, and walks
//! each table in key order. A read error ends that table; so does a key that is not greater
//! than the one before, which is a loop in a damaged tree that would otherwise never end.

use super::super::probe;
use super::super::schema::{DELETED, JOURNAL, KEYS, SESSIONS, SNAPSHOTS};
use super::worker::{self, Limits, Task, Worker};
use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableHandle};
use std::io::Write;
use std::path::Path;

/// Stream tags of this task.
mod tag {
    pub const SESSION: u8 = 1;
    /// Key: the seq (u64 LE) then the session id.
    pub const JOURNAL: u8 = 2;
    pub const SNAPSHOT: u8 = 3;
    pub const DELETED: u8 = 4;
    /// Key: the session key; value: the session id.
    pub const KEY: u8 = 5;
    /// Key: a table's name; value: why it could not be read (further).
    pub const TABLE_FAILED: u8 = 0x10;
    /// Value: why the database could not be opened at all.
    pub const OPEN_FAILED: u8 = 0x11;
}

/// Entries read from the tables, as stored.
#[derive(Debug, Default)]
pub(super) struct TreeDump {
    pub sessions: Vec<(String, Vec<u8>)>,
    pub journal: Vec<((String, u64), Vec<u8>)>,
    pub snapshots: Vec<(String, Vec<u8>)>,
    pub deleted: Vec<String>,
    pub keys: Vec<(String, String)>,
    /// What could not be read, in words, for the report.
    pub problems: Vec<String>,
}

/// Runs the dump of `path` in `worker` within `limits`.
pub(super) fn collect(worker: &Worker, path: &Path, limits: Limits) -> TreeDump {
    let mut dump = TreeDump::default();
    let mut table = "sessions";
    let stopped = worker::run(worker, Task::Dump, path, limits, |tag, key, value| {
        if let Some(from) = dump.take(tag, key, value) {
            table = from;
        }
    });
    if let Err(why) = stopped {
        dump.problems.push(format!(
            "reading the tables stopped in the {table} table: {why}"
        ));
    }
    dump
}

impl TreeDump {
    /// Files one entry; returns the table it came from.
    fn take(&mut self, tag: u8, key: Vec<u8>, value: Vec<u8>) -> Option<&'static str> {
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).ok();
        match tag {
            tag::SESSION => {
                self.sessions.push((text(key)?, value));
                Some("sessions")
            }
            tag::JOURNAL if key.len() > 8 => {
                let (seq, id) = key.split_at(8);
                let seq = u64::from_le_bytes(seq.try_into().ok()?);
                self.journal.push(((text(id.to_vec())?, seq), value));
                Some("journal")
            }
            tag::SNAPSHOT => {
                self.snapshots.push((text(key)?, value));
                Some("snapshots")
            }
            tag::DELETED => {
                self.deleted.push(text(key)?);
                Some("deleted")
            }
            tag::KEY => {
                self.keys.push((text(key)?, text(value)?));
                Some("keys")
            }
            tag::TABLE_FAILED => {
                let table = String::from_utf8_lossy(&key).into_owned();
                let why = String::from_utf8_lossy(&value);
                self.problems
                    .push(format!("the {table} table could not be read whole: {why}"));
                None
            }
            tag::OPEN_FAILED => {
                let why = String::from_utf8_lossy(&value);
                self.problems
                    .push(format!("the storage engine could not open it: {why}"));
                None
            }
            _ => None,
        }
    }
}

/// The worker's side: streams the tables of the database at `path` to `out`.
pub(super) fn write(path: &Path, out: &mut dyn Write) -> std::io::Result<()> {
    let db = match probe::open_overlay(path, false) {
        Ok(Some(db)) => db,
        Ok(None) => return Ok(()),
        Err(err) => return worker::entry(out, tag::OPEN_FAILED, b"", err.to_string().as_bytes()),
    };
    let txn = match db.begin_read() {
        Ok(txn) => txn,
        Err(err) => return worker::entry(out, tag::OPEN_FAILED, b"", err.to_string().as_bytes()),
    };
    let bytes =
        |kind: u8| move |id: &str, value: &[u8]| (kind, id.as_bytes().to_vec(), value.to_vec());
    table(&txn, SESSIONS, out, bytes(tag::SESSION))?;
    table(&txn, JOURNAL, out, |(id, seq), value| {
        let mut key = seq.to_le_bytes().to_vec();
        key.extend_from_slice(id.as_bytes());
        (tag::JOURNAL, key, value.to_vec())
    })?;
    table(&txn, SNAPSHOTS, out, bytes(tag::SNAPSHOT))?;
    table(&txn, DELETED, out, bytes(tag::DELETED))?;
    table(&txn, KEYS, out, |key, id| {
        (tag::KEY, key.as_bytes().to_vec(), id.as_bytes().to_vec())
    })?;
    // Closing a damaged database can fail in ways that would only cut the stream short; the
    // worker ends right after.
    std::mem::forget(txn);
    std::mem::forget(db);
    Ok(())
}

/// Streams every readable entry of `source`, ending it at a read error or where its keys
/// stop rising.
fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    source: TableDefinition<K, V>,
    out: &mut dyn Write,
    entry_of: impl for<'a> Fn(K::SelfType<'a>, V::SelfType<'a>) -> (u8, Vec<u8>, Vec<u8>),
) -> std::io::Result<()> {
    let name = source.name().to_owned();
    let failed = |out: &mut dyn Write, why: String| {
        worker::entry(out, tag::TABLE_FAILED, name.as_bytes(), why.as_bytes())
    };
    let opened = match txn.open_table(source) {
        Ok(opened) => opened,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(err) => return failed(out, err.to_string()),
    };
    let entries = match opened.iter() {
        Ok(entries) => entries,
        Err(err) => return failed(out, err.to_string()),
    };
    let mut last: Option<Vec<u8>> = None;
    for item in entries {
        let (key, value) = match item {
            Ok(pair) => pair,
            Err(err) => return failed(out, err.to_string()),
        };
        let raw = K::as_bytes(&key.value()).as_ref().to_vec();
        if let Some(last) = &last
            && K::compare(&raw, last) != std::cmp::Ordering::Greater
        {
            return failed(
                out,
                "its entries stop being in order (a loop in its damaged tree)".to_owned(),
            );
        }
        let (kind, stream_key, stream_value) = entry_of(key.value(), value.value());
        worker::entry(out, kind, &stream_key, &stream_value)?;
        last = Some(raw);
    }
    Ok(())
}
