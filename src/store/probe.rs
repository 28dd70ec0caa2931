//! Checking an existing database file before opening it for real, without writing to it.
//!
//! A plain redb open writes to the file (it marks the database open, and repairs a file that
//! was not closed cleanly) and trusts the file's structure. For a file that is damaged or not a
//! database at all, that could alter what the user may still want to rescue, or panic. So
//! before the real open, the file is opened once more through [`OverlayBackend`]: reads come
//! from the file, writes land in memory, and redb's full integrity check runs on that view.
//! Only a file that passes is opened for real. The probe takes redb's locks through the real
//! file, so a database held by another process is reported as locked, never as damaged.
//!
//! The full check reads every page of the committed trees (about 1.5 ms per MB). When the
//! file is unchanged since tern's own clean close (see `clean`), the probe skips it and only
//! opens the file on the overlay, which still catches a damaged header or layout.

use super::error::{StoreError, from_open};
use super::schema;
use redb::backends::FileBackend;
use redb::{BackendError, Builder, Database, StorageBackend};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::ops::Bound;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The first bytes of every redb file.
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// The redb file format this build reads and writes.
const REDB_FILE_FORMAT: u8 = 3;

/// Where redb records the file format of each of its two commit slots: the first byte of each
/// 128-byte slot, which follow the 64-byte file header.
const REDB_FORMAT_OFFSETS: [usize; 2] = [64, 192];

/// Page cache for the probe: it reads each page once, so a large cache would only cost memory.
const PROBE_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// Granularity of the in-memory copy of written bytes.
const BLOCK: u64 = 4096;

/// Checks that the file at `path`, if it exists and is not empty, is a tern database this build
/// can open, leaving it byte-for-byte unchanged whatever the outcome. `thorough` runs redb's
/// integrity check over every page.
pub(super) fn verify(path: &Path, thorough: bool) -> Result<(), StoreError> {
    match open_overlay(path, thorough)? {
        Some(db) => schema::inspect(&db, path).map(drop),
        None => Ok(()),
    }
}

/// [`verify`] in a thread of its own, given `limit` to answer: a damaged file that sends the
/// storage engine round a loop is reported as damaged instead of holding tern's start for
/// ever (the thread is abandoned; the process ends soon after, since the open fails).
pub(super) fn verify_within(
    path: &Path,
    thorough: bool,
    limit: std::time::Duration,
) -> Result<(), StoreError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_owned();
    let spawned = std::thread::Builder::new()
        .name("tern-probe".to_owned())
        .spawn(move || {
            let _ = tx.send(verify(&owned, thorough));
        });
    if spawned.is_err() {
        return verify(path, thorough);
    }
    match rx.recv_timeout(limit) {
        Ok(outcome) => outcome,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "checking it did not finish within {} s, which a healthy file never needs",
                limit.as_secs()
            ),
        }),
        // The thread ended without an answer: the check panicked past its guard.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: "the storage engine failed while reading it".to_owned(),
        }),
    }
}

/// Opens the file at `path` as a database whose writes stay in memory, so the file is never
/// changed; `None` when it does not exist or is empty. `thorough` runs redb's integrity
/// check over every page.
pub(super) fn open_overlay(path: &Path, thorough: bool) -> Result<Option<Database>, StoreError> {
    let io_err = |action: &'static str, source: std::io::Error| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io_err("inspect", err)),
    };
    if len == 0 {
        return Ok(None);
    }
    check_header(path, len)?;

    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|err| io_err("open", err))?;
    let backend = FileBackend::new(file).map_err(|err| from_open(path, err))?;
    let overlay = OverlayBackend::new(backend, len);
    let mut builder = Builder::new();
    builder
        .set_cache_size(PROBE_CACHE_BYTES)
        .set_check_integrity_on_open(thorough);
    // redb promises errors rather than panics for a damaged file when the integrity check runs
    // on open; the unwind guard is a second line (and the only one when the check is skipped),
    // so that no file content can crash tern.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder.create_with_backend(overlay)
    }));
    match opened {
        Ok(Ok(db)) => Ok(Some(db)),
        Ok(Err(err)) => Err(from_open(path, err)),
        Err(_) => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: "the storage engine failed while reading it".to_owned(),
        }),
    }
}

/// Refuses a file that does not start like a redb database, or that a newer redb wrote,
/// reading only its first bytes.
///
/// redb itself reports a newer file format as corruption, which would tell the user to move
/// a healthy database aside; reading the format first turns it into advice to upgrade.
fn check_header(path: &Path, len: u64) -> Result<(), StoreError> {
    let header_len = REDB_FORMAT_OFFSETS[1] + 1;
    let mut head = Vec::with_capacity(header_len);
    File::open(path)
        .and_then(|file| {
            file.take(header_len as u64)
                .read_to_end(&mut head)
                .map(drop)
        })
        .map_err(|source| StoreError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        })?;
    if !head.starts_with(&REDB_MAGIC) {
        let detail = if len < REDB_MAGIC.len() as u64 {
            format!("it is only {len} bytes long")
        } else {
            "it does not start with a redb database header".to_owned()
        };
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail,
        });
    }
    // Slots cut off by a truncation are left to redb, which reports the file as damaged.
    let newest = REDB_FORMAT_OFFSETS
        .iter()
        .filter_map(|&offset| head.get(offset).copied())
        .max();
    match newest {
        Some(found) if found > REDB_FILE_FORMAT && plausibly_newer(&head, found) => {
            Err(StoreError::UnsupportedFormat {
                path: path.to_owned(),
                format: "file format",
                found: found.into(),
                supported: REDB_FILE_FORMAT.into(),
            })
        }
        Some(found) if found > REDB_FILE_FORMAT => Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: format!(
                "its header is damaged (it claims file format {found}, which no redb has written)"
            ),
        }),
        _ => Ok(()),
    }
}

/// Whether a header claiming file format `found` looks like one a newer redb wrote rather than
/// damage: a format only a little ahead of this build's, known flag bits in the god byte, and
/// a page size redb would choose. Random bytes rarely pass all three.
fn plausibly_newer(head: &[u8], found: u8) -> bool {
    let god_byte = head[REDB_MAGIC.len()];
    let page_size = head
        .get(12..16)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    found <= REDB_FILE_FORMAT + 8
        && god_byte < 16
        && page_size.is_power_of_two()
        && (512..=65536).contains(&page_size)
}

/// A storage backend that reads a real file and keeps every write in memory.
///
/// Locks go to the real file, so the probe excludes and is excluded by other openers exactly
/// as the real open would be.
#[derive(Debug)]
struct OverlayBackend {
    file: FileBackend,
    state: Mutex<Overlay>,
}

#[derive(Debug)]
struct Overlay {
    /// Length of the storage as redb sees it.
    len: u64,
    /// Bytes of the real file still visible: the file's length, lowered by every shrink so
    /// that regrowing reads zeros as a real file would.
    visible: u64,
    /// Written blocks, by index, each holding the block's full current content.
    blocks: HashMap<u64, Box<[u8]>>,
}

impl OverlayBackend {
    fn new(file: FileBackend, len: u64) -> Self {
        Self {
            file,
            state: Mutex::new(Overlay {
                len,
                visible: len,
                blocks: HashMap::new(),
            }),
        }
    }

    fn state(&self) -> Result<MutexGuard<'_, Overlay>, std::io::Error> {
        self.state
            .lock()
            .map_err(|_| std::io::Error::other("overlay state poisoned"))
    }

    /// Reads `out.len()` bytes at `offset` from the real file where it is visible, zeros past it.
    fn read_real(&self, visible: u64, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let real = usize::try_from(visible.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(out.len());
        let (from_file, past_end) = out.split_at_mut(real);
        if !from_file.is_empty() {
            self.file.read(offset, from_file)?;
        }
        past_end.fill(0);
        Ok(())
    }
}

/// The byte range of block `index` that overlaps `[offset, offset + len)`, as (start within
/// the block, start within the range, length).
fn overlap(index: u64, offset: u64, len: u64) -> (usize, usize, usize) {
    let block_start = index * BLOCK;
    let start = block_start.max(offset);
    let end = (block_start + BLOCK).min(offset + len);
    // Each value is below BLOCK or below `len`, which came from a slice length.
    (
        (start - block_start) as usize,
        (start - offset) as usize,
        (end - start) as usize,
    )
}

impl StorageBackend for OverlayBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.state()?.len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let state = self.state()?;
        let len = out.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > state.len) {
            return Err(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at {offset} is past the end of the file"),
            ));
        }
        self.read_real(state.visible, offset, out)?;
        if len > 0 && !state.blocks.is_empty() {
            for index in offset / BLOCK..=(offset + len - 1) / BLOCK {
                if let Some(block) = state.blocks.get(&index) {
                    let (in_block, in_out, n) = overlap(index, offset, len);
                    out[in_out..in_out + n].copy_from_slice(&block[in_block..in_block + n]);
                }
            }
        }
        Ok(())
    }

    fn set_len(&self, new_len: u64) -> Result<(), std::io::Error> {
        let mut state = self.state()?;
        if new_len < state.len {
            state.visible = state.visible.min(new_len);
            state.blocks.retain(|index, _| index * BLOCK < new_len);
            let tail = new_len / BLOCK;
            let cut = (new_len % BLOCK) as usize;
            if let Some(block) = state.blocks.get_mut(&tail) {
                block[cut..].fill(0);
            }
        }
        state.len = new_len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut state = self.state()?;
        let len = data.len() as u64;
        let Some(end) = offset.checked_add(len) else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "write past the largest offset",
            ));
        };
        if len == 0 {
            return Ok(());
        }
        for index in offset / BLOCK..=(end - 1) / BLOCK {
            if !state.blocks.contains_key(&index) {
                let mut block = vec![0; BLOCK as usize].into_boxed_slice();
                let visible = state.visible;
                self.read_real(visible, index * BLOCK, &mut block)?;
                state.blocks.insert(index, block);
            }
            let (in_block, in_data, n) = overlap(index, offset, len);
            if let Some(block) = state.blocks.get_mut(&index) {
                block[in_block..in_block + n].copy_from_slice(&data[in_data..in_data + n]);
            }
        }
        state.len = state.len.max(end);
        Ok(())
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay_over(bytes: &[u8]) -> (tempfile::TempDir, OverlayBackend) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).expect("write");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let backend = FileBackend::new(file).expect("backend");
        (dir, OverlayBackend::new(backend, bytes.len() as u64))
    }

    fn read(overlay: &OverlayBackend, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0xEE; len];
        overlay.read(offset, &mut out).expect("read");
        out
    }

    #[test]
    fn writes_stay_in_memory_and_reads_see_them() {
        let original: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let (dir, overlay) = overlay_over(&original);
        overlay.write(4090, &[1; 12]).expect("write");
        let got = read(&overlay, 4088, 16);
        let mut want = original[4088..4104].to_vec();
        want[2..14].fill(1);
        assert_eq!(got, want);
        assert_eq!(std::fs::read(dir.path().join("f")).expect("read"), original);
    }

    #[test]
    fn shrink_then_grow_reads_zeros_and_reads_past_the_end_fail() {
        let (_dir, overlay) = overlay_over(&[7; 9000]);
        overlay.write(8000, &[9; 100]).expect("write");
        overlay.set_len(5000).expect("shrink");
        overlay.set_len(9000).expect("grow");
        assert_eq!(read(&overlay, 4998, 4), vec![7, 7, 0, 0]);
        assert_eq!(read(&overlay, 8000, 4), vec![0; 4]);
        let mut out = [0; 8];
        assert!(overlay.read(8996, &mut out).is_err());
    }
}
