//! Bringing a database of an older storage format up to this build's, once, as it is opened.
//!
//! Format 2 frames journal records and index entries (see `frame`) so a repair can find them
//! without the tables. The payloads stay byte for byte what they were; only the frame is
//! added. The journal goes over in batches of its own commits, so a large store does not
//! build one huge transaction, and a migration cut short by a crash simply goes on at the next
//! open (values already framed are left alone, and reading accepts both). The index entries,
//! whose byte counts grow with the frames, the running totals and the format marker follow in
//! one last commit.

use super::codec;
use super::db::encode;
use super::error::{StoreError, from_redb};
use super::frame::{self, Kind};
use super::schema::{DELETED, FORMAT_KEY, FORMAT_VERSION, INFO, JOURNAL, SESSIONS, TOTALS};
use redb::{Database, Durability, ReadableTable, WriteTransaction};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::Path;

/// Journal values framed per commit.
const BATCH: usize = 5_000;

/// Frames every unframed value of the journal and the index, then records format 2.
pub(super) fn frame_values(db: &Database, path: &Path) -> Result<(), StoreError> {
    let err = |e: redb::Error| from_redb(path, e);
    let started = std::time::Instant::now();
    // Bytes each session's journal takes once framed, for its index entry.
    let mut bytes: HashMap<String, u64> = HashMap::new();
    let mut framed = 0u64;
    let mut cursor: Option<(String, u64)> = None;
    loop {
        let txn = begin(db).map_err(err)?;
        let seen = {
            let mut journal = txn.open_table(JOURNAL).map_err(|e| err(e.into()))?;
            let batch = next_batch(&journal, cursor.as_ref()).map_err(err)?;
            for ((id, seq), value) in &batch {
                let stored = if frame::is_framed(value) {
                    value.len()
                } else {
                    let value = encode(frame::encode(Kind::Record, id, value))?;
                    journal
                        .insert((id.as_str(), *seq), value.as_slice())
                        .map_err(|e| err(e.into()))?;
                    framed += 1;
                    value.len()
                };
                *bytes.entry(id.clone()).or_default() += stored as u64;
            }
            cursor = batch.last().map(|(key, _)| key.clone());
            batch.len()
        };
        txn.commit().map_err(|e| err(e.into()))?;
        if seen < BATCH {
            break;
        }
    }

    let txn = begin(db).map_err(err)?;
    {
        let mut sessions = txn.open_table(SESSIONS).map_err(|e| err(e.into()))?;
        let entries: Vec<(String, Vec<u8>)> = sessions
            .iter()
            .map_err(|e| err(e.into()))?
            .map(|entry| entry.map(|(k, v)| (k.value().to_owned(), v.value().to_vec())))
            .collect::<Result<_, _>>()
            .map_err(|e| err(e.into()))?;
        for (id, value) in entries {
            let Ok(mut meta) = codec::decode_meta(&id, &value) else {
                // An entry nothing can read stays as it was; listings skip it already.
                continue;
            };
            meta.transcript_bytes = bytes.get(&id).copied().unwrap_or(0);
            let value = encode(codec::encode_meta(&meta))?;
            sessions
                .insert(id.as_str(), value.as_slice())
                .map_err(|e| err(e.into()))?;
        }
        txn.open_table(DELETED).map_err(|e| err(e.into()))?;
        txn.open_table(INFO)
            .map_err(|e| err(e.into()))?
            .insert(FORMAT_KEY, FORMAT_VERSION)
            .map_err(|e| err(e.into()))?;
    }
    // The totals are built again from the entries on the way through the open.
    txn.delete_table(TOTALS).map_err(|e| err(e.into()))?;
    txn.commit().map_err(|e| err(e.into()))?;
    tracing::info!(
        path = %path.display(),
        records = framed,
        ms = started.elapsed().as_millis() as u64,
        "framed the journal for storage format {FORMAT_VERSION}"
    );
    Ok(())
}

fn begin(db: &Database) -> Result<WriteTransaction, redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    Ok(txn)
}

type Entry = ((String, u64), Vec<u8>);

/// Up to [`BATCH`] journal entries after `cursor`, in key order.
fn next_batch(
    journal: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    cursor: Option<&(String, u64)>,
) -> Result<Vec<Entry>, redb::Error> {
    let start = match cursor {
        Some((id, seq)) => Bound::Excluded((id.as_str(), *seq)),
        None => Bound::Unbounded,
    };
    let mut batch = Vec::with_capacity(BATCH);
    for entry in journal.range::<(&str, u64)>((start, Bound::Unbounded))? {
        let (key, value) = entry?;
        let (id, seq) = key.value();
        batch.push(((id.to_owned(), seq), value.value().to_vec()));
        if batch.len() == BATCH {
            break;
        }
    }
    Ok(batch)
}
