//! How journal records, session index entries and tombstones are stored: JSON inside the
//! self-checking frame of `frame`, so a repair can find each of them in a damaged file's raw
//! pages. Reading accepts the plain JSON written before framing.

use super::event::{JournalEvent, JournalRecord};
use super::frame::{self, Kind};
use super::meta::SessionMeta;
use serde::{Deserialize, Serialize};

/// A record as written: like `JournalRecord` but borrowing the event, so appending does not
/// clone it before encoding. Serialises to the same JSON.
#[derive(Serialize)]
struct RecordRef<'a> {
    seq: u64,
    at_ms: i64,
    event: &'a JournalEvent,
}

/// What a tombstone says: when its session was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Tombstone {
    pub deleted_at_ms: i64,
}

/// The stored bytes of record `seq` of session `id`.
pub(super) fn encode_record(
    id: &str,
    seq: u64,
    at_ms: i64,
    event: &JournalEvent,
) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(&RecordRef { seq, at_ms, event })
        .map_err(|err| format!("could not encode a record: {err}"))?;
    frame::encode(Kind::Record, id, &json)
}

/// Reads a stored record of session `id`, framed or from before framing.
pub(super) fn decode_record(id: &str, bytes: &[u8]) -> Result<JournalRecord, String> {
    let json = frame::payload(bytes, Kind::Record, id).map_err(|err| err.to_string())?;
    serde_json::from_slice(json).map_err(|err| err.to_string())
}

/// The stored bytes of a session's index entry.
pub(super) fn encode_meta(meta: &SessionMeta) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(meta)
        .map_err(|err| format!("could not encode an index entry: {err}"))?;
    frame::encode(Kind::Meta, meta.id.as_str(), &json)
}

/// Reads a stored index entry of session `id`, framed or from before framing.
pub(super) fn decode_meta(id: &str, bytes: &[u8]) -> Result<SessionMeta, String> {
    let json = frame::payload(bytes, Kind::Meta, id).map_err(|err| err.to_string())?;
    serde_json::from_slice(json).map_err(|err| err.to_string())
}

/// The stored bytes of the tombstone of session `id`.
pub(super) fn encode_tombstone(id: &str, deleted_at_ms: i64) -> Result<Vec<u8>, String> {
    let json = serde_json::to_vec(&Tombstone { deleted_at_ms })
        .map_err(|err| format!("could not encode a tombstone: {err}"))?;
    frame::encode(Kind::Tombstone, id, &json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionId, SessionKey};

    #[test]
    fn records_and_entries_round_trip_and_old_json_still_reads() {
        let event = JournalEvent::TitleChanged { title: "t".into() };
        let bytes = encode_record("s", 4, 9, &event).expect("encode");
        let record = decode_record("s", &bytes).expect("decode");
        assert_eq!(
            (record.seq, record.at_ms, record.event),
            (4, 9, event.clone())
        );
        let old = serde_json::to_vec(&JournalRecord {
            seq: 4,
            at_ms: 9,
            event,
        })
        .expect("json");
        assert_eq!(decode_record("s", &old).expect("old").seq, 4);

        let id = SessionId::from_string("s");
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 5);
        let bytes = encode_meta(&meta).expect("encode");
        assert_eq!(decode_meta("s", &bytes).expect("decode"), meta);
        assert!(decode_meta("other", &bytes).is_err());
    }
}
