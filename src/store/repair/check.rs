//! `tern doctor`'s check of the database, read-only, in a worker (see `worker`).
//!
//! The quick check is redb's own: the header, the format, and the checksum of every page of
//! every committed tree (about 1.5 ms per MB). The deep check then decodes every journal
//! record and index entry (their frames' checksums, their JSON) and compares each index
//! entry's counts with its journal, which finds damage inside values and an index that
//! disagrees with its journal.

use super::super::codec;
use super::super::error::StoreError;
use super::super::probe;
use super::super::schema::{JOURNAL, SESSIONS};
use super::worker::{self, Limits, Task, Worker};
use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// Stream tags of this task.
mod tag {
    /// Value: the `Health` as JSON.
    pub const OUTCOME: u8 = 1;
    /// Sent now and then during a long deep check, so the caller sees progress.
    pub const PROGRESS: u8 = 2;
}

/// Entries a deep check reads between progress entries.
const PROGRESS_EVERY: u64 = 10_000;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub state: HealthState,
    /// The store's own message when it is not healthy: cause and what to do.
    #[serde(default)]
    pub detail: String,
    /// Sessions and journal records a deep check read.
    #[serde(default)]
    pub sessions: u64,
    #[serde(default)]
    pub records: u64,
    /// What a deep check found wrong, one line each.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// Whether the database can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    Healthy,
    /// No database yet (or an empty file) and nothing that says one was lost.
    Absent,
    /// Damaged: `tern doctor --repair` salvages it.
    Damaged,
    /// Another process holds it; it cannot be checked meanwhile.
    Locked,
    /// A newer tern wrote it.
    Newer,
    /// The check itself failed (no answer in time, an I/O error).
    Unknown,
}

impl Health {
    fn of(state: HealthState, detail: impl Into<String>) -> Health {
        Health {
            state,
            detail: detail.into(),
            sessions: 0,
            records: 0,
            problems: Vec::new(),
        }
    }
}

/// Checks the database at `path` in `worker` within `limits`; `deep` decodes every value.
pub fn check(path: &Path, deep: bool, worker: &Worker, limits: Limits) -> Health {
    let task = if deep { Task::CheckDeep } else { Task::Check };
    // redb's check of every page sends nothing until it ends, and a large healthy file on a
    // slow disk may take a while: only the deadline, scaled to the file, bounds it.
    let limits = Limits {
        stall: limits.stall.max(limits.total),
        ..limits
    };
    let mut outcome = None;
    let stopped = worker::run(worker, task, path, limits, |tag, _, value| {
        if tag == tag::OUTCOME {
            outcome = serde_json::from_slice::<Health>(&value).ok();
        }
    });
    match (outcome, stopped) {
        (Some(health), _) => health,
        // The storage engine crashed or hung on the file: that is damage.
        (None, Err(why)) if why.is_damage() => Health::of(
            HealthState::Damaged,
            format!("the storage engine could not check it: {why}"),
        ),
        (None, Err(why)) => Health::of(HealthState::Unknown, why.to_string()),
        (None, Ok(())) => Health::of(HealthState::Unknown, "the check gave no answer"),
    }
}

/// The worker's side: checks the database at `path` and streams the outcome.
pub(super) fn write(path: &Path, deep: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let mut health = match probe::verify(path, true) {
        Ok(()) if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == 0 => {
            Health::of(HealthState::Absent, "")
        }
        Ok(()) => Health::of(HealthState::Healthy, ""),
        Err(err) => {
            let state = match &err {
                StoreError::Locked { .. } => HealthState::Locked,
                StoreError::UnsupportedFormat { .. } => HealthState::Newer,
                StoreError::Corrupt { .. } => HealthState::Damaged,
                _ => HealthState::Unknown,
            };
            Health::of(state, err.to_string())
        }
    };
    if deep && health.state == HealthState::Healthy {
        examine(path, &mut health, out)?;
        if !health.problems.is_empty() {
            health.state = HealthState::Damaged;
        }
    }
    let json = serde_json::to_vec(&health).map_err(std::io::Error::other)?;
    worker::entry(out, tag::OUTCOME, b"", &json)
}

/// Decodes every index entry and journal record and compares their counts.
fn examine(path: &Path, health: &mut Health, out: &mut dyn Write) -> std::io::Result<()> {
    let problem = |health: &mut Health, text: String| {
        // A badly damaged file could list thousands; the first ones say enough.
        if health.problems.len() < 50 {
            health.problems.push(text);
        }
    };
    let db = match probe::open_overlay(path, false) {
        Ok(Some(db)) => db,
        Ok(None) => return Ok(()),
        Err(err) => {
            problem(health, err.to_string());
            return Ok(());
        }
    };
    let failed = |e: &dyn std::fmt::Display| format!("the database could not be read: {e}");
    let txn = match db.begin_read() {
        Ok(txn) => txn,
        Err(err) => {
            problem(health, failed(&err));
            return Ok(());
        }
    };
    // Per session: what its index entry says (records, bytes) and what its journal holds.
    let mut said: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut held: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let read = (|| -> Result<(), redb::Error> {
        for item in txn.open_table(SESSIONS)?.iter()? {
            let (id, value) = item?;
            match codec::decode_meta(id.value(), value.value()) {
                Ok(meta) => {
                    said.insert(
                        id.value().to_owned(),
                        (meta.event_count, meta.transcript_bytes),
                    );
                }
                Err(why) => problem(
                    health,
                    format!("the index entry of {} is unreadable: {why}", id.value()),
                ),
            }
        }
        for item in txn.open_table(JOURNAL)?.iter()? {
            let (key, value) = item?;
            let (id, seq) = key.value();
            health.records += 1;
            if health.records.is_multiple_of(PROGRESS_EVERY) {
                worker::entry(out, tag::PROGRESS, b"", &health.records.to_le_bytes())
                    .map_err(redb::StorageError::Io)?;
            }
            match codec::decode_record(id, value.value()) {
                Ok(record) if record.seq == seq => {}
                Ok(record) => problem(
                    health,
                    format!(
                        "record {seq} of session {id} says it is record {}",
                        record.seq
                    ),
                ),
                Err(why) => problem(
                    health,
                    format!("record {seq} of session {id} is unreadable: {why}"),
                ),
            }
            let entry = held.entry(id.to_owned()).or_default();
            entry.0 += 1;
            entry.1 += value.value().len() as u64;
        }
        Ok(())
    })();
    if let Err(err) = read {
        problem(health, failed(&err));
    }
    health.sessions = said.len() as u64;
    for (id, &(events, bytes)) in &said {
        let (count, size) = held.get(id).copied().unwrap_or_default();
        if (count, size) != (events, bytes) {
            problem(
                health,
                format!(
                    "the index entry of session {id} counts {events} records ({bytes} bytes); \
                     its journal holds {count} ({size} bytes)"
                ),
            );
        }
    }
    let stray: u64 = held
        .iter()
        .filter(|(id, _)| !said.contains_key(*id))
        .map(|(_, (count, _))| count)
        .sum();
    if stray > 0 {
        problem(
            health,
            format!("{stray} journal records belong to no session in the index"),
        );
    }
    std::mem::forget(txn);
    std::mem::forget(db);
    Ok(())
}
