//! Finding framed values in a file's raw bytes, page structure or not.
//!
//! The file is read front to back in chunks; wherever the frame magic appears, the frame there
//! is read and kept when its checksum holds. redb writes copy-on-write, so older copies of
//! the same value lie in freed pages too: identical copies are kept once. The scan never
//! loops: each position is looked at once, and it stops at its deadline, saying how far it
//! got.

use super::super::frame::{self, FrameError, Kind, MAGIC};
use std::collections::HashSet;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

/// Bytes read at a time.
const CHUNK: usize = 8 * 1024 * 1024;

/// A frame found in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub kind: Kind,
    pub id: String,
    /// The whole frame, as it can be stored again.
    pub bytes: Vec<u8>,
}

impl Found {
    /// The frame's JSON payload.
    pub fn payload(&self) -> &[u8] {
        frame::read_exact(&self.bytes).map_or(&[], |frame| frame.payload)
    }
}

/// What a scan found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// Distinct intact frames, in file order of their first copy.
    pub found: Vec<Found>,
    /// Places that start like a frame whose bytes are damaged or cut off.
    pub damaged: usize,
    /// How far the scan got, and the file's length.
    pub scanned: u64,
    pub len: u64,
    /// Set when the deadline stopped the scan before the end of the file.
    pub stopped_early: bool,
}

/// Scans the file at `path` for frames until `deadline`.
pub(super) fn scan(path: &Path, deadline: Instant) -> std::io::Result<Scan> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut scan = Scan {
        len,
        ..Scan::default()
    };
    let mut seen: HashSet<(Kind, String, u32, usize)> = HashSet::new();
    let mut buf = vec![0u8; CHUNK];
    // `buf[..filled]` holds the file from `base` on.
    let mut base = 0u64;
    let mut filled = 0usize;
    // Positions before this were looked at (or are inside a frame already taken).
    let mut next = 0u64;
    loop {
        if Instant::now() >= deadline {
            scan.stopped_early = base + (filled as u64) < len || next < len;
            break;
        }
        let read = read_full(&mut file, &mut buf[filled..])?;
        filled += read;
        let at_end = base + filled as u64 >= len || read == 0;
        // A magic cut by the end of the window is found in the next one, whose front keeps
        // the window's last bytes.
        let searchable = if at_end {
            filled
        } else {
            filled.saturating_sub(MAGIC.len() - 1)
        };
        let start = usize::try_from(next.saturating_sub(base)).unwrap_or(usize::MAX);
        if start < filled {
            for hit in memchr::memmem::find_iter(&buf[start..filled], &MAGIC) {
                let offset = base + (start + hit) as u64;
                if offset < next {
                    continue;
                }
                // Checked at every frame too: a damaged length can make one read a large one.
                if Instant::now() >= deadline {
                    scan.stopped_early = true;
                    break;
                }
                match frame_at(&file, &buf[..filled], base, offset, len) {
                    Ok(found) => {
                        next = offset + found.bytes.len() as u64;
                        let crc = u32::from_le_bytes([
                            found.bytes[11],
                            found.bytes[12],
                            found.bytes[13],
                            found.bytes[14],
                        ]);
                        let identity = (found.kind, found.id.clone(), crc, found.bytes.len());
                        if seen.insert(identity) {
                            scan.found.push(found);
                        }
                    }
                    Err(_) => scan.damaged += 1,
                }
            }
        }
        scan.scanned = base + searchable as u64;
        if scan.stopped_early {
            break;
        }
        if at_end {
            scan.scanned = len;
            break;
        }
        // Keep the unsearched tail (a possible partial magic) at the front.
        buf.copy_within(searchable..filled, 0);
        base += searchable as u64;
        filled -= searchable;
    }
    Ok(scan)
}

/// The frame at `offset`, read from `window` (the file from `base` on) when it lies inside,
/// else from the file.
fn frame_at(
    file: &File,
    window: &[u8],
    base: u64,
    offset: u64,
    len: u64,
) -> Result<Found, FrameError> {
    let in_window = (offset - base) as usize;
    let found = |bytes: &[u8]| -> Result<Found, FrameError> {
        let (frame, total) = frame::read(bytes)?;
        Ok(Found {
            kind: frame.kind,
            id: frame.id.to_owned(),
            bytes: bytes[..total].to_vec(),
        })
    };
    match found(&window[in_window..]) {
        Err(FrameError::Truncated) => {}
        other => return other,
    }
    // The frame runs past the window: read its header for its length, then all of it.
    let mut header = [0u8; frame::HEADER_LEN];
    file.read_exact_at(&mut header, offset)
        .map_err(|_| FrameError::Truncated)?;
    let id_len = u64::from(u16::from_le_bytes([header[5], header[6]]));
    let body_len = u64::from(u32::from_le_bytes([
        header[7], header[8], header[9], header[10],
    ]));
    let total = frame::HEADER_LEN as u64 + id_len + body_len;
    if body_len as usize > frame::MAX_BODY || offset + total > len {
        return Err(FrameError::Truncated);
    }
    let mut bytes = vec![0u8; total as usize];
    file.read_exact_at(&mut bytes, offset)
        .map_err(|_| FrameError::Truncated)?;
    found(&bytes)
}

/// Reads until `buf` is full or the file ends.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut total = 0;
    while total < buf.len() {
        match file.read(&mut buf[total..]) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn frame(kind: Kind, id: &str, payload: &str) -> Vec<u8> {
        frame::encode(kind, id, payload.as_bytes()).expect("encode")
    }

    fn scan_bytes(bytes: &[u8]) -> Scan {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).expect("write");
        scan(&path, Instant::now() + Duration::from_secs(60)).expect("scan")
    }

    #[test]
    fn frames_are_found_among_noise_once_each_and_damaged_ones_counted() {
        let a = frame(Kind::Record, "s1", r#"{"seq":1}"#);
        let b = frame(Kind::Meta, "s1", r#"{"id":"s1"}"#);
        let mut damaged = frame(Kind::Record, "s2", r#"{"seq":7}"#);
        let last = damaged.len() - 2;
        damaged[last] ^= 1;
        let mut file = vec![0x55; 1000];
        file.extend_from_slice(&a);
        file.extend_from_slice(&[0; 300]);
        file.extend_from_slice(&b);
        file.extend_from_slice(&damaged);
        file.extend_from_slice(&a);
        file.extend_from_slice(&MAGIC);
        let scan = scan_bytes(&file);
        let ids: Vec<(Kind, &str)> = scan.found.iter().map(|f| (f.kind, f.id.as_str())).collect();
        assert_eq!(ids, [(Kind::Record, "s1"), (Kind::Meta, "s1")]);
        assert_eq!(scan.found[0].payload(), br#"{"seq":1}"#);
        assert_eq!(
            scan.damaged, 2,
            "the flipped frame and the lone magic at the end"
        );
        assert!(!scan.stopped_early);
        assert_eq!(scan.scanned, file.len() as u64);
    }

    #[test]
    fn frames_across_chunk_boundaries_and_larger_than_a_chunk_are_found() {
        let big = "x".repeat(CHUNK + 100);
        let large = frame(Kind::Record, "big", &format!(r#"{{"t":"{big}"}}"#));
        let small = frame(Kind::Record, "edge", r#"{"seq":2}"#);
        let mut file = vec![0u8; CHUNK - 5];
        file.extend_from_slice(&small);
        file.extend_from_slice(&large);
        file.extend_from_slice(&[1; 64]);
        let scan = scan_bytes(&file);
        let ids: Vec<&str> = scan.found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["edge", "big"]);
        assert_eq!(scan.found[1].bytes, large);
        assert_eq!(scan.damaged, 0);
    }

    #[test]
    fn a_past_deadline_stops_the_scan_and_says_so() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![0u8; 4096]).expect("write");
        let scan = scan(&path, Instant::now()).expect("scan");
        assert!(scan.stopped_early);
        assert_eq!(scan.found.len(), 0);
    }
}
