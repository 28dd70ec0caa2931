//! Deciding what a repaired database holds, from what the tables still gave (`dump`), the
//! frames found in the file's pages (`scan`) and the session folders on disk, and writing it.
//!
//! The rules, session by session:
//! - A session deleted before the damage stays deleted: its tombstone (from the table or from
//!   the pages) outweighs any old copy of its records in freed pages.
//! - A journal record comes from the table when its value there is intact, else from the
//!   pages. Copies in the pages are identical for one (session, seq) unless a crash threw away
//!   a commit that wrote it; then the later copy is the one that was kept.
//! - The index entry comes from the table, else the most advanced copy in the pages, else it
//!   is made from the records (the project folder from a working-context note), and then
//!   every count in it is folded again from the records recovered, so it agrees with its
//!   journal.
//! - Seqs are dense from 1, so a session's records found are as many as its highest seq (or
//!   its index entry's count, when that is higher): what is missing below it was lost.
//! - Every session folder gets an entry, so maintenance never takes a folder whose index entry
//!   was lost for an orphan and removes it.

use super::super::codec;
use super::super::db::{Attempt, Store, encode};
use super::super::error::StoreError;
use super::super::event::{JournalEvent, JournalRecord};
use super::super::frame::{self, Kind};
use super::super::meta::{Lifecycle, SessionMeta};
use super::super::schema::{DELETED, JOURNAL, KEYS, SESSIONS, SNAPSHOTS};
use super::super::totals::{self, Delta};
use super::super::{activity, search, summary};
use super::dump::TreeDump;
use super::scan::Scan;
use super::{SessionSalvage, Source};
use crate::domain::{SessionId, SessionKey, Usage};
use redb::Durability;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Journal bytes written per commit while the new database is built.
const BATCH_BYTES: u64 = 16 * 1024 * 1024;

/// A record as found, with what choosing between copies needs.
#[derive(Debug, Clone)]
struct Copy {
    /// The framed value, as stored again.
    bytes: Vec<u8>,
    at_ms: i64,
    from_table: bool,
}

/// Just enough of a record's JSON to place it.
#[derive(Deserialize)]
struct Position {
    seq: u64,
    at_ms: i64,
}

/// A session folder on disk: `sessions/<id>-<hash>` or `sessions/<id>`.
#[derive(Debug, Clone)]
pub(super) struct Folder {
    pub id: String,
    pub path: PathBuf,
    pub modified_ms: i64,
}

/// One session as it will be written.
struct Planned {
    meta: SessionMeta,
    records: BTreeMap<u64, Copy>,
    snapshot: Option<Vec<u8>>,
    salvage: SessionSalvage,
}

/// What the repaired database will hold.
pub(super) struct Rebuild {
    sessions: Vec<Planned>,
    keys: BTreeMap<String, String>,
    deleted: BTreeSet<String>,
    /// Copies in the pages of sessions that were deleted, left deleted.
    pub ignored_deleted: usize,
}

impl Rebuild {
    /// Works out the repaired database from everything found.
    pub fn plan(dump: &TreeDump, scan: &Scan, folders: &[Folder]) -> Rebuild {
        let mut deleted: BTreeSet<String> = dump.deleted.iter().cloned().collect();
        deleted.extend(
            scan.found
                .iter()
                .filter(|f| f.kind == Kind::Tombstone)
                .map(|f| f.id.clone()),
        );
        let mut ignored_deleted = 0;

        // Records: the table's intact values first, then the pages' copies.
        let mut records: BTreeMap<String, BTreeMap<u64, Copy>> = BTreeMap::new();
        // The highest seq known to have existed, readable or not.
        let mut known: HashMap<String, u64> = HashMap::new();
        for ((id, seq), value) in &dump.journal {
            let known = known.entry(id.clone()).or_default();
            *known = (*known).max(*seq);
            if let Some(copy) = table_copy(id, *seq, value) {
                records.entry(id.clone()).or_default().insert(*seq, copy);
            }
        }
        for found in scan.found.iter().filter(|f| f.kind == Kind::Record) {
            if deleted.contains(&found.id) {
                ignored_deleted += 1;
                continue;
            }
            let Ok(position) = serde_json::from_slice::<Position>(found.payload()) else {
                continue;
            };
            let copy = Copy {
                bytes: found.bytes.clone(),
                at_ms: position.at_ms,
                from_table: false,
            };
            let slot = records.entry(found.id.clone()).or_default();
            match slot.get(&position.seq) {
                Some(kept) if kept.from_table || kept.at_ms >= copy.at_ms => {}
                _ => {
                    slot.insert(position.seq, copy);
                }
            }
        }

        // Index entries: the table's, else the most advanced copy from the pages.
        let mut metas: BTreeMap<String, (SessionMeta, Source)> = BTreeMap::new();
        for (id, value) in &dump.sessions {
            if let Ok(meta) = codec::decode_meta(id, value) {
                metas.insert(id.clone(), (meta, Source::Table));
            }
        }
        for found in scan.found.iter().filter(|f| f.kind == Kind::Meta) {
            let Ok(meta) = codec::decode_meta(&found.id, &found.bytes) else {
                continue;
            };
            let newer = |kept: &SessionMeta| {
                (meta.revision, meta.event_count, meta.updated_at_ms)
                    > (kept.revision, kept.event_count, kept.updated_at_ms)
            };
            match metas.get(&found.id) {
                Some((_, Source::Table)) => {}
                Some((kept, _)) if !newer(kept) => {}
                _ => {
                    metas.insert(found.id.clone(), (meta, Source::Pages));
                }
            }
        }

        let snapshots: HashMap<&str, &Vec<u8>> = dump
            .snapshots
            .iter()
            .map(|(id, bytes)| (id.as_str(), bytes))
            .collect();
        let folders_by_id: HashMap<&str, &Folder> =
            folders.iter().map(|f| (f.id.as_str(), f)).collect();
        let ids: BTreeSet<String> = metas
            .keys()
            .chain(records.keys())
            .chain(folders.iter().map(|f| &f.id))
            .filter(|id| !deleted.contains(*id))
            .cloned()
            .collect();

        let mut sessions = Vec::with_capacity(ids.len());
        for id in ids {
            let found_records = records.remove(&id).unwrap_or_default();
            let (base, source) = match metas.remove(&id) {
                Some((meta, source)) => (Some(meta), source),
                None if found_records.is_empty() => (None, Source::Folder),
                None => (None, Source::Records),
            };
            let folder = folders_by_id.get(id.as_str()).copied();
            let highest = found_records.keys().next_back().copied().unwrap_or(0);
            let found = highest
                .max(known.get(&id).copied().unwrap_or(0))
                .max(base.as_ref().map_or(0, |m| m.event_count));
            let meta = refold(&id, base, &found_records, folder);
            let complete = found_records.len() as u64 == found;
            let snapshot = snapshots
                .get(id.as_str())
                .filter(|_| complete)
                .map(|bytes| bytes.to_vec());
            let from_pages = found_records.values().filter(|c| !c.from_table).count();
            sessions.push(Planned {
                salvage: SessionSalvage {
                    id: id.clone(),
                    title: meta.title.clone(),
                    found,
                    recovered: found_records.len() as u64,
                    from_pages: from_pages as u64,
                    index: source,
                },
                meta,
                records: found_records,
                snapshot,
            });
        }

        let keys = bind_keys(&dump.keys, &sessions);
        Rebuild {
            sessions,
            keys,
            deleted,
            ignored_deleted,
        }
    }

    /// What each session got back.
    pub fn salvage(&self) -> Vec<SessionSalvage> {
        self.sessions.iter().map(|s| s.salvage.clone()).collect()
    }

    /// Writes everything into the fresh database `store`.
    pub fn write(&self, store: &Store) -> Result<(), StoreError> {
        // Sessions go in groups of about BATCH_BYTES, committed without an fsync each: the
        // database is moved into place only after the last, durable, commit below, so a
        // crash before it leaves nothing that counts.
        let mut group: Vec<&Planned> = Vec::new();
        let mut bytes = 0;
        for planned in &self.sessions {
            group.push(planned);
            bytes += planned.meta.transcript_bytes;
            if bytes >= BATCH_BYTES {
                store.restore(&group)?;
                group.clear();
                bytes = 0;
            }
        }
        if !group.is_empty() {
            store.restore(&group)?;
        }
        let tombstones: Vec<(String, Vec<u8>)> = self
            .deleted
            .iter()
            .map(|id| Ok((id.clone(), encode(codec::encode_tombstone(id, 0))?)))
            .collect::<Result<_, StoreError>>()?;
        store.write(|txn, attempt| {
            store.first_attempt(attempt)?;
            let mut keys = txn.open_table(KEYS).map_err(|e| store.err(e))?;
            for (key, id) in &self.keys {
                keys.insert(key.as_str(), id.as_str())
                    .map_err(|e| store.err(e))?;
            }
            let mut deleted = txn.open_table(DELETED).map_err(|e| store.err(e))?;
            for (id, tombstone) in &tombstones {
                deleted
                    .insert(id.as_str(), tombstone.as_slice())
                    .map_err(|e| store.err(e))?;
            }
            Ok(())
        })
    }
}

/// The table's value for (`id`, `seq`) as a copy to keep, when it is intact: a frame whose
/// checksum holds, or JSON from before framing, naming the same seq.
fn table_copy(id: &str, seq: u64, value: &[u8]) -> Option<Copy> {
    let json = frame::payload(value, Kind::Record, id).ok()?;
    let position = serde_json::from_slice::<Position>(json).ok()?;
    if position.seq != seq {
        return None;
    }
    let bytes = if frame::is_framed(value) {
        value.to_vec()
    } else {
        encode(frame::encode(Kind::Record, id, json)).ok()?
    };
    Some(Copy {
        bytes,
        at_ms: position.at_ms,
        from_table: true,
    })
}

/// The index entry of session `id`: `base` (or one made from the records and the folder)
/// with every count folded again from `records`.
fn refold(
    id: &str,
    base: Option<SessionMeta>,
    records: &BTreeMap<u64, Copy>,
    folder: Option<&Folder>,
) -> SessionMeta {
    let decoded: Vec<JournalRecord> = records
        .values()
        .filter_map(|copy| codec::decode_record(id, &copy.bytes).ok())
        .collect();
    let first_at = decoded.first().map(|r| r.at_ms);
    let mut meta = base.unwrap_or_else(|| {
        let session = SessionId::from_string(id);
        let project = project_from_notes(&decoded)
            .or_else(|| folder.map(|f| f.path.clone()))
            .unwrap_or_else(|| PathBuf::from("/"));
        let created = first_at.or(folder.map(|f| f.modified_ms)).unwrap_or(0);
        let mut meta =
            SessionMeta::new(session.clone(), SessionKey::cli(&session), project, created);
        meta.session_dir = folder.map(|f| f.path.clone());
        if decoded.is_empty() {
            meta.title = "(recovered folder; transcript lost)".to_owned();
        }
        meta
    });
    let kept_title = std::mem::take(&mut meta.title);
    meta.updated_at_ms = meta.created_at_ms;
    meta.last_activity_ms = meta.created_at_ms;
    meta.event_count = 0;
    meta.input_count = 0;
    meta.message_count = 0;
    meta.first_input.clear();
    meta.transcript_bytes = 0;
    meta.tokens = Usage::default();
    meta.compaction_count = 0;
    meta.lifecycle = Lifecycle::Idle;
    for record in &decoded {
        summary::apply(&mut meta, &record.event, record.at_ms);
    }
    meta.event_count = records.len() as u64;
    meta.transcript_bytes = records.values().map(|c| c.bytes.len() as u64).sum();
    if meta.title.is_empty() {
        meta.title = kept_title;
    }
    meta
}

/// The project folder a working-context note names (`project_dir: …`), if any note does.
fn project_from_notes(records: &[JournalRecord]) -> Option<PathBuf> {
    records.iter().find_map(|record| match &record.event {
        JournalEvent::NudgeAdded { text } => text
            .lines()
            .find_map(|line| line.trim().strip_prefix("project_dir: "))
            .map(PathBuf::from),
        _ => None,
    })
}

/// Which session each key talks to: the table's binding where its session came back, else
/// the latest active session of the key.
fn bind_keys(table: &[(String, String)], sessions: &[Planned]) -> BTreeMap<String, String> {
    let present: HashMap<&str, &SessionMeta> = sessions
        .iter()
        .map(|s| (s.meta.id.as_str(), &s.meta))
        .collect();
    let mut keys: BTreeMap<String, String> = table
        .iter()
        .filter(|(_, id)| present.contains_key(id.as_str()))
        .cloned()
        .collect();
    let mut latest: BTreeMap<&str, &SessionMeta> = BTreeMap::new();
    for meta in present.values().filter(|m| m.archived_at_ms.is_none()) {
        let slot = latest.entry(meta.key.as_str()).or_insert(meta);
        if (meta.created_at_ms, meta.id.as_str()) > (slot.created_at_ms, slot.id.as_str()) {
            *slot = meta;
        }
    }
    for (key, meta) in latest {
        keys.entry(key.to_owned())
            .or_insert_with(|| meta.id.as_str().to_owned());
    }
    keys
}

/// The session folders under `sessions_dir`.
pub(super) fn folders(sessions_dir: &Path) -> Vec<Folder> {
    let Ok(entries) = std::fs::read_dir(sessions_dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let modified_ms = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            Some(Folder {
                id: id_of_folder(&name).to_owned(),
                path: entry.path(),
                modified_ms,
            })
        })
        .collect()
}

/// The session id in a folder name: `<id>-<8 hex digits of the key's hash>`, or the bare id
/// of folders from before the hash.
fn id_of_folder(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((id, hash))
            if hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()) && !id.is_empty() =>
        {
            id
        }
        _ => name,
    }
}

impl Store {
    /// Refuses to go on after a write failed and the database was reopened: a reopen takes it
    /// back to its last durable commit, which would silently drop the groups written since.
    fn first_attempt(&self, attempt: Attempt) -> Result<(), StoreError> {
        match attempt {
            Attempt::First => Ok(()),
            Attempt::Retry => Err(StoreError::Unwritable {
                path: self.path().to_owned(),
                cause: "a write failed while the new database was built, so the repair stopped \
                        before it lost any part of it"
                    .to_owned(),
            }),
        }
    }

    /// Writes recovered sessions, their records and snapshots, with their activity, search
    /// records and totals, in one commit that waits for no fsync.
    fn restore(&self, group: &[&Planned]) -> Result<(), StoreError> {
        let values: Vec<Vec<u8>> = group
            .iter()
            .map(|planned| encode(codec::encode_meta(&planned.meta)))
            .collect::<Result<_, _>>()?;
        let delta = Delta {
            sessions: group.len() as i64,
            bytes: group.iter().map(|p| p.meta.transcript_bytes as i64).sum(),
        };
        self.write_with(Durability::None, |txn, attempt| {
            self.first_attempt(attempt)?;
            let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let mut journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
            let mut snapshots = txn.open_table(SNAPSHOTS).map_err(|e| self.err(e))?;
            for (planned, value) in group.iter().zip(&values) {
                let meta = &planned.meta;
                let id = meta.id.as_str();
                sessions
                    .insert(id, value.as_slice())
                    .map_err(|e| self.err(e))?;
                for (seq, copy) in &planned.records {
                    journal
                        .insert((id, *seq), copy.bytes.as_slice())
                        .map_err(|e| self.err(e))?;
                }
                if let Some(snapshot) = &planned.snapshot {
                    snapshots
                        .insert(id, snapshot.as_slice())
                        .map_err(|e| self.err(e))?;
                }
                activity::touch(txn, id, None, Some(meta.updated_at_ms))
                    .map_err(|e| self.err(e))?;
                search::sync(txn, id, None, Some(meta)).map_err(|e| self.err(e))?;
            }
            totals::add(txn, delta).map_err(|e| self.err(e))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_give_their_session_ids() {
        assert_eq!(
            id_of_folder("0198c1a2-7b3c-7d4e-8f90-123456789abc-1a2b3c4d"),
            "0198c1a2-7b3c-7d4e-8f90-123456789abc"
        );
        assert_eq!(
            id_of_folder("0198c1a2-7b3c-7d4e-8f90-123456789abc"),
            "0198c1a2-7b3c-7d4e-8f90-123456789abc"
        );
        assert_eq!(id_of_folder("s1-deadbeef"), "s1");
        assert_eq!(id_of_folder("plain"), "plain");
    }
}
