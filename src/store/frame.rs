//! The self-checking framing of the values a repair must be able to find without the
//! database's tree: journal records, session index entries and deletion tombstones.
//!
//! A framed value names its kind and its session and carries a checksum, so a scan of a
//! damaged file's raw bytes can recognise each one wherever it lies, tell whose it is, and
//! know that its bytes are intact, even when no table leads to it any more:
//!
//! ```text
//! 0   magic     F5 74 72 6E   (0xF5 never occurs in UTF-8, so never inside the JSON payload)
//! 4   kind      u8            1 journal record, 2 session index entry, 3 tombstone
//! 5   id_len    u16 LE        bytes of the session id
//! 7   body_len  u32 LE        bytes of the payload
//! 11  crc       u32 LE        CRC-32 of bytes 4..11, the id and the payload
//! 15  id        id_len bytes  the session id, UTF-8
//!     payload   body_len bytes JSON (a `JournalRecord`, a `SessionMeta`, a tombstone)
//! ```
//!
//! Values written before the framing existed are plain JSON; [`payload`] reads both.

/// The first bytes of every frame.
pub(super) const MAGIC: [u8; 4] = [0xF5, b't', b'r', b'n'];

/// Bytes before the session id.
pub(super) const HEADER_LEN: usize = 15;

/// The largest payload a frame may claim; anything larger is noise (a compaction's whole
/// history is a few MiB at most).
pub(super) const MAX_BODY: usize = 256 * 1024 * 1024;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Kind {
    /// A `JournalRecord` of the session.
    Record = 1,
    /// The session's index entry, a `SessionMeta`.
    Meta = 2,
    /// The session was deleted: its records found anywhere stay deleted.
    Tombstone = 3,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Record),
            2 => Some(Kind::Meta),
            3 => Some(Kind::Tombstone),
            _ => None,
        }
    }
}

/// A frame read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Frame<'a> {
    pub kind: Kind,
    pub id: &'a str,
    pub payload: &'a [u8],
}

/// Why bytes that start like a frame are not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FrameError {
    /// Not a frame at all (no magic).
    NotFramed,
    /// Cut short: the frame claims more bytes than there are.
    Truncated,
    /// The checksum does not match: the bytes were damaged.
    Checksum,
    /// An unknown kind, an id that is not UTF-8, or an impossible length.
    Malformed,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotFramed => "it is not framed",
            Self::Truncated => "it is cut short",
            Self::Checksum => "its checksum does not match (the bytes were damaged)",
            Self::Malformed => "its framing is malformed",
        })
    }
}

/// Frames `payload` as `kind` of session `id`. Ids longer than 65,535 bytes cannot be framed;
/// tern's ids are 36.
pub(super) fn encode(kind: Kind, id: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    let id_len =
        u16::try_from(id.len()).map_err(|_| format!("session id of {} bytes", id.len()))?;
    let body_len = u32::try_from(payload.len())
        .ok()
        .filter(|&n| n as usize <= MAX_BODY)
        .ok_or_else(|| format!("a record of {} bytes", payload.len()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + id.len() + payload.len());
    out.extend_from_slice(&MAGIC);
    out.push(kind as u8);
    out.extend_from_slice(&id_len.to_le_bytes());
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(payload);
    let crc = checksum(&out[4..11], &out[HEADER_LEN..]);
    out[11..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Reads the frame at the start of `bytes`; returns it and how many bytes it takes. Bytes
/// after it are not looked at, so a scan can call this at any position of a page.
pub(super) fn read(bytes: &[u8]) -> Result<(Frame<'_>, usize), FrameError> {
    if !bytes.starts_with(&MAGIC) {
        return Err(FrameError::NotFramed);
    }
    let header = bytes.get(..HEADER_LEN).ok_or(FrameError::Truncated)?;
    let kind = Kind::from_byte(header[4]).ok_or(FrameError::Malformed)?;
    let id_len = usize::from(u16::from_le_bytes([header[5], header[6]]));
    let body_len = u32::from_le_bytes([header[7], header[8], header[9], header[10]]) as usize;
    if body_len > MAX_BODY || id_len == 0 {
        return Err(FrameError::Malformed);
    }
    let total = HEADER_LEN + id_len + body_len;
    let rest = bytes.get(HEADER_LEN..total).ok_or(FrameError::Truncated)?;
    let crc = u32::from_le_bytes([header[11], header[12], header[13], header[14]]);
    if checksum(&header[4..11], rest) != crc {
        return Err(FrameError::Checksum);
    }
    let (id, payload) = rest.split_at(id_len);
    let id = std::str::from_utf8(id).map_err(|_| FrameError::Malformed)?;
    Ok((Frame { kind, id, payload }, total))
}

/// Reads a whole stored value as one frame: nothing may follow it.
pub(super) fn read_exact(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    match read(bytes)? {
        (frame, len) if len == bytes.len() => Ok(frame),
        _ => Err(FrameError::Malformed),
    }
}

/// The JSON payload of a stored value of `kind` for session `id`: the frame's payload, or the
/// whole value when it was written before framing. A frame of another kind or session, or a
/// damaged one, is an error.
pub(super) fn payload<'a>(bytes: &'a [u8], kind: Kind, id: &str) -> Result<&'a [u8], FrameError> {
    match read_exact(bytes) {
        Ok(frame) if frame.kind == kind && frame.id == id => Ok(frame.payload),
        Ok(_) => Err(FrameError::Malformed),
        Err(FrameError::NotFramed) => Ok(bytes),
        Err(err) => Err(err),
    }
}

/// Whether a stored value is framed (written by a tern that frames values).
pub(super) fn is_framed(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

fn checksum(header: &[u8], rest: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header);
    hasher.update(rest);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_as_written() {
        let bytes = encode(Kind::Record, "s-1", br#"{"seq":1}"#).expect("encode");
        let (frame, len) = read(&bytes).expect("read");
        assert_eq!(len, bytes.len());
        assert_eq!(frame.kind, Kind::Record);
        assert_eq!(frame.id, "s-1");
        assert_eq!(frame.payload, br#"{"seq":1}"#);
        assert_eq!(
            payload(&bytes, Kind::Record, "s-1"),
            Ok(&br#"{"seq":1}"#[..])
        );
    }

    #[test]
    fn any_damaged_byte_is_noticed() {
        let bytes = encode(Kind::Meta, "session", b"{\"title\":\"x\"}").expect("encode");
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(read_exact(&damaged).is_err(), "flip at {at} went unnoticed");
        }
    }

    #[test]
    fn a_frame_is_found_with_bytes_after_it_and_not_when_cut() {
        let bytes = encode(Kind::Tombstone, "gone", b"{}").expect("encode");
        let mut page = bytes.clone();
        page.extend_from_slice(&[0xAB; 40]);
        assert_eq!(read(&page).map(|(_, len)| len), Ok(bytes.len()));
        assert_eq!(read_exact(&page), Err(FrameError::Malformed));
        assert_eq!(read(&bytes[..bytes.len() - 1]), Err(FrameError::Truncated));
    }

    #[test]
    fn values_from_before_framing_read_as_they_are() {
        let legacy = br#"{"seq":3,"at_ms":1,"event":{"type":"title_changed","title":"t"}}"#;
        assert!(!is_framed(legacy));
        assert_eq!(payload(legacy, Kind::Record, "s"), Ok(&legacy[..]));
    }

    #[test]
    fn a_frame_of_another_session_or_kind_is_refused() {
        let bytes = encode(Kind::Record, "a", b"{}").expect("encode");
        assert!(payload(&bytes, Kind::Record, "b").is_err());
        assert!(payload(&bytes, Kind::Meta, "a").is_err());
    }
}
