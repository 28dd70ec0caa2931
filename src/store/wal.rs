//! The write-ahead log beside the database (`tern.redb.wal`): what makes an append durable
//! at the cost of one small write and an fdatasync, instead of a durable commit of the
//! database, which writes every page the commits since the last one touched.
//!
//! Every commit that is not durable (a session's creation, an append) also writes what it
//! stored here as one entry, in commit order. An append whose caller waits for the disk (an
//! input, a tool call) returns once the log is synced up to its entry. Syncs are shared like
//! commits: one fdatasync serves every entry written before it, and it runs beside the
//! database's next commit rather than inside it, so the two overlap. An entry written while
//! a sync runs does not wait for that one to end: a second starts beside it (at most
//! [`MAX_SYNCS`] at once). A sync's success counts once every sync beside it has ended well,
//! since the kernel reports a lost write to only one of the syncs running when it is found.
//!
//! The log is filled from its start. A durable commit of the database makes everything the
//! log holds redundant: the commit records a new epoch in the database, and the log is
//! filled again from its start under that epoch. After a crash, the open reads the entries
//! of the recorded epoch from the start up to the first that is torn, damaged or of another
//! epoch, and writes them again (see `lazy`), skipping what already landed. A log that would
//! pass [`MAX_BYTES`] takes no more entries: the commit that did not fit is made durable in
//! the database instead, which empties the log.
//!
//! An entry is `len: u32 | crc32: u32 | epoch: u64 | kind: u8 | payload`, little-endian; the
//! checksum covers the epoch, the kind and the payload. A payload is framed values as the
//! database stores them (an index entry, or journal records), each with its own checksum.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The most the log holds before commits go to the database durably instead.
pub(super) const MAX_BYTES: u64 = 1 << 20;

const HEADER_LEN: usize = 17;

/// The most syncs under way at once: a sync that starts while another runs need not wait
/// for it to end, which would put two syncs' time on its callers.
const MAX_SYNCS: u8 = 2;

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A session's index entry, as created.
    Created = 1,
    /// Journal records appended in one commit, in seq order.
    Appended = 2,
}

/// An entry read back from the log.
#[derive(Debug)]
pub(super) struct Entry {
    pub kind: Kind,
    pub payload: Vec<u8>,
}

pub(super) struct Wal {
    file: File,
    path: PathBuf,
    state: Mutex<State>,
    /// Woken when a sync ends.
    synced: Condvar,
}

struct State {
    epoch: u64,
    /// Where the next entry goes.
    offset: u64,
    /// Bytes written since the log was opened, across refills: an entry's place in time.
    written: u64,
    /// Of `written`, what is durable: synced, or made redundant by a durable commit.
    durable: u64,
    /// Syncs under way.
    syncing: u8,
    /// The furthest position any sync started so far makes durable once it ends well.
    covered: u64,
    /// The furthest position a sync that ended well made durable, confirmed (moved to
    /// `durable`) only once no other sync is under way: the kernel reports a lost write to
    /// one of the syncs running when it is found, not necessarily the earlier one.
    pending: u64,
    /// Set when an entry was refused or not written, or a sync failed: the log takes no
    /// entry and starts no sync until the next refill, so it never holds a later entry
    /// without an earlier one.
    broken: bool,
    /// Set when a sync failed: nothing is called durable until the next refill, since a
    /// later sync may succeed without what the failed one dropped.
    sync_failed: bool,
}

impl Wal {
    /// Opens (creating) the log at `path` for `epoch`, the one the database records. When
    /// `recover` is set, returns the entries of that epoch it holds, and appends after them;
    /// otherwise the log is filled from its start.
    pub(super) fn open(
        path: &Path,
        epoch: u64,
        recover: bool,
    ) -> std::io::Result<(Wal, Vec<Entry>)> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let existed = path.exists();
        let file = options.open(path)?;
        if !existed {
            // The entry in the folder must outlast a crash as surely as what is synced into it.
            sync_folder(path)?;
        }
        let (entries, offset) = if recover {
            read_entries(&file, epoch)?
        } else {
            (Vec::new(), 0)
        };
        let wal = Wal {
            file,
            path: path.to_owned(),
            state: Mutex::new(State {
                epoch,
                offset,
                written: 0,
                durable: 0,
                syncing: 0,
                covered: 0,
                pending: 0,
                broken: false,
                sync_failed: false,
            }),
            synced: Condvar::new(),
        };
        Ok((wal, entries))
    }

    /// Empties the log for good: for a database made anew, whose epochs start again.
    pub(super) fn clear(&self) -> std::io::Result<()> {
        let mut state = self.lock();
        if self.file.metadata()?.len() == 0 {
            return Ok(());
        }
        self.file.set_len(0)?;
        self.file.sync_all()?;
        state.offset = 0;
        Ok(())
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The epoch entries are written under now.
    pub(super) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// The position a sync must reach to make every entry written so far durable.
    pub(super) fn written(&self) -> u64 {
        self.lock().written
    }

    /// Writes `entries` (not synced) after the last one; returns the position a sync must
    /// reach to make them durable, or `None` when the log has no room for them.
    pub(super) fn write(&self, entries: &[(Kind, &[u8])]) -> std::io::Result<Option<u64>> {
        if entries.is_empty() {
            return Ok(Some(0));
        }
        let mut state = self.lock();
        let mut bytes = Vec::with_capacity(
            entries
                .iter()
                .map(|(_, payload)| HEADER_LEN + payload.len())
                .sum(),
        );
        for (kind, payload) in entries {
            encode_entry(&mut bytes, state.epoch, *kind, payload);
        }
        let len = bytes.len() as u64;
        if state.broken || state.offset + len > MAX_BYTES {
            state.broken = true;
            return Ok(None);
        }
        // Under the lock: a refill must not start below a write still going on.
        if let Err(err) = self.file.write_all_at(&bytes, state.offset) {
            state.broken = true;
            return Err(err);
        }
        state.offset += len;
        state.written += len;
        Ok(Some(state.written))
    }

    /// Takes no entry until the next refill: one that should have been written was not.
    pub(super) fn refuse(&self) {
        self.lock().broken = true;
    }

    /// Returns once everything written up to `upto` is durable: synced by this call, by
    /// another one it waited for, or made redundant by a durable commit.
    pub(super) fn sync(&self, upto: u64) -> std::io::Result<bool> {
        let mut state = self.lock();
        let mut synced_here = false;
        loop {
            match state.next_step(upto) {
                // True when a sync of this call covered `upto` (it was written before).
                Step::Done => return Ok(synced_here),
                Step::Failed => {
                    return Err(std::io::Error::other(
                        "an earlier write or sync of the write-ahead log failed",
                    ));
                }
                Step::Wait => {
                    state = self
                        .synced
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Step::Sync => {
                    let target = state.sync_started();
                    drop(state);
                    #[cfg(test)]
                    held::wait_while_held(&self.path);
                    let synced = self.file.sync_data();
                    state = self.lock();
                    state.sync_ended(target, synced.is_ok());
                    self.synced.notify_all();
                    synced?;
                    synced_here = true;
                }
            }
        }
    }

    /// After a durable commit of the database, which recorded `epoch`: what the log holds is
    /// redundant, and it is filled again from its start.
    pub(super) fn refill(&self, epoch: u64) {
        let mut state = self.lock();
        state.epoch = epoch;
        state.offset = 0;
        state.durable = state.written;
        state.broken = false;
        state.sync_failed = false;
        self.synced.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a caller of [`Wal::sync`] does next.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// What it waits for is durable.
    Done,
    /// The log refuses entries, or a sync failed, since its last refill: the caller makes its
    /// entries durable another way (a durable commit of the database).
    Failed,
    /// A sync under way covers it, or as many run as may: wait for one to end.
    Wait,
    /// Start a sync of its own, beside any under way.
    Sync,
}

impl State {
    fn next_step(&self, upto: u64) -> Step {
        if self.durable >= upto {
            Step::Done
        } else if self.broken || self.sync_failed {
            Step::Failed
        } else if self.covered >= upto || self.syncing >= MAX_SYNCS || self.pending > self.durable {
            // A success waiting for the sync beside it to end starts no new sync, so that
            // its confirmation is not put off again and again.
            Step::Wait
        } else {
            Step::Sync
        }
    }

    /// A sync starts: returns the position it will make durable, all written by now.
    fn sync_started(&mut self) -> u64 {
        self.syncing += 1;
        self.covered = self.covered.max(self.written);
        self.written
    }

    /// A sync that started at `target` ended. Its success counts once every sync that ran
    /// beside it has ended well too: a lost write is reported to one of them only.
    fn sync_ended(&mut self, target: u64, ok: bool) {
        self.syncing -= 1;
        if ok {
            self.pending = self.pending.max(target);
        } else {
            self.sync_failed = true;
        }
        if self.syncing == 0 && !self.sync_failed {
            self.durable = self.durable.max(self.pending);
        }
    }
}

fn encode_entry(out: &mut Vec<u8>, epoch: u64, kind: Kind, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let epoch = epoch.to_le_bytes();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum(&epoch, kind as u8, payload).to_le_bytes());
    out.extend_from_slice(&epoch);
    out.push(kind as u8);
    out.extend_from_slice(payload);
}

fn checksum(epoch: &[u8], kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(epoch);
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

/// The entries of `epoch` from the log's start, and where the next one goes. Reading stops
/// at the first entry that is torn, damaged or of another epoch: the log's end.
fn read_entries(file: &File, epoch: u64) -> std::io::Result<(Vec<Entry>, u64)> {
    let len = file.metadata()?.len().min(MAX_BYTES);
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    let mut entries = Vec::new();
    let mut at = 0;
    while let Some((entry, next)) = decode_entry(&bytes, at, epoch) {
        entries.push(entry);
        at = next;
    }
    Ok((entries, at as u64))
}

fn decode_entry(bytes: &[u8], at: usize, epoch: u64) -> Option<(Entry, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER_LEN)?)?;
    let len = u32::from_le_bytes(header[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    let found = u64::from_le_bytes(header[8..16].try_into().ok()?);
    let kind = match header[16] {
        1 => Kind::Created,
        2 => Kind::Appended,
        _ => return None,
    };
    let start = at + HEADER_LEN;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    if found != epoch || len == 0 || checksum(&header[8..16], header[16], payload) != crc {
        return None;
    }
    let entry = Entry {
        kind,
        payload: payload.to_vec(),
    };
    Some((entry, start + len))
}

fn sync_folder(path: &Path) -> std::io::Result<()> {
    let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    match File::open(folder).and_then(|dir| dir.sync_all()) {
        // Some file systems cannot sync a folder; the file is there all the same.
        Err(err) if err.kind() == ErrorKind::InvalidInput => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new log of `epoch` holding one entry, and the position a sync must reach for it.
    fn with_entry(epoch: u64, payload: &[u8]) -> (tempfile::TempDir, Wal, u64) {
        let (dir, path) = temp();
        let (wal, _) = Wal::open(&path, epoch, false).expect("open");
        let at = wal
            .write(&[(Kind::Appended, payload)])
            .expect("write")
            .expect("room");
        (dir, wal, at)
    }

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("tern.redb.wal");
        (dir, path)
    }

    fn state(written: u64) -> State {
        State {
            epoch: 1,
            offset: written,
            written,
            durable: 0,
            syncing: 0,
            covered: 0,
            pending: 0,
            broken: false,
            sync_failed: false,
        }
    }

    #[test]
    fn an_entry_written_while_a_sync_runs_starts_its_own_beside_it() {
        let mut state = state(100);
        assert_eq!(state.next_step(100), Step::Sync);
        assert_eq!(state.sync_started(), 100);
        // Covered by the sync under way: wait for it.
        assert_eq!(state.next_step(100), Step::Wait);
        state.written = 250;
        assert_eq!(state.next_step(250), Step::Sync, "not behind the first");
        assert_eq!(state.sync_started(), 250);
        state.written = 300;
        assert_eq!(state.next_step(300), Step::Wait, "two at most");
        state.sync_ended(100, true);
        assert_eq!(state.durable, 0, "not while the other runs");
        state.sync_ended(250, true);
        assert_eq!(state.durable, 250);
        assert_eq!(state.next_step(100), Step::Done);
        assert_eq!(state.next_step(300), Step::Sync);
    }

    #[test]
    fn a_sync_that_ends_well_counts_only_once_the_one_beside_it_ended_well_too() {
        // The later sync ends first and well; the earlier one then reports the lost write
        // (the kernel tells one of them only): neither is confirmed.
        let mut state = state(100);
        state.sync_started();
        state.written = 200;
        state.sync_started();
        state.sync_ended(200, true);
        assert_eq!(state.durable, 0);
        assert_eq!(state.next_step(300), Step::Wait, "no new sync meanwhile");
        state.sync_ended(100, false);
        assert_eq!(state.durable, 0);
        assert_eq!(state.next_step(200), Step::Failed);
        // The other way round too.
        let mut state = self::state(100);
        state.sync_started();
        state.written = 200;
        state.sync_started();
        state.sync_ended(100, false);
        state.sync_ended(200, true);
        assert_eq!(state.durable, 0);
        assert_eq!(state.next_step(200), Step::Failed);
    }

    #[test]
    fn an_entry_refused_while_a_sync_runs_leaves_that_sync_good() {
        let (_dir, wal, at) = with_entry(1, b"kept");
        let target = wal.lock().sync_started();
        // The log fills (or an entry is refused) while the sync runs.
        wal.refuse();
        wal.lock().sync_ended(target, true);
        assert!(!wal.sync(at).expect("synced before the refusal"));
        let refused = wal.write(&[(Kind::Appended, b"later")]).expect("write");
        assert_eq!(refused, None, "no entry until the next refill");
        wal.refill(2);
        assert!(
            wal.write(&[(Kind::Appended, b"again")])
                .expect("write")
                .is_some()
        );
    }

    #[test]
    fn appends_synced_from_many_threads_are_all_durable_and_no_sync_is_left_under_way() {
        let (_dir, path) = temp();
        let (wal, _) = Wal::open(&path, 1, false).expect("open");
        let synced = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        let at = wal
                            .write(&[(Kind::Appended, b"a record of forty bytes or so....")])
                            .expect("write")
                            .expect("room");
                        if wal.sync(at).expect("sync") {
                            synced.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        let state = wal.lock();
                        assert!(state.durable >= at && state.syncing <= MAX_SYNCS);
                    }
                });
            }
        });
        let state = wal.lock();
        assert_eq!((state.durable, state.syncing), (state.written, 0));
        let synced = synced.into_inner();
        assert!(synced >= 1, "every call waited for another's sync");
    }

    #[test]
    fn entries_of_the_epoch_read_back_in_order_and_the_next_goes_after_them() {
        let (_dir, path) = temp();
        let (wal, found) = Wal::open(&path, 3, true).expect("open");
        assert!(found.is_empty());
        let at = wal
            .write(&[(Kind::Created, b"one"), (Kind::Appended, b"two")])
            .expect("write")
            .expect("room");
        assert!(wal.sync(at).expect("sync"), "this call synced");
        assert!(!wal.sync(at).expect("sync"), "nothing left to sync");
        drop(wal);
        let (wal, found) = Wal::open(&path, 3, true).expect("open");
        let read: Vec<_> = found
            .iter()
            .map(|e| (e.kind, e.payload.as_slice()))
            .collect();
        assert_eq!(
            read,
            [(Kind::Created, &b"one"[..]), (Kind::Appended, &b"two"[..])]
        );
        wal.write(&[(Kind::Appended, b"three")]).expect("write");
        drop(wal);
        let (_, found) = Wal::open(&path, 3, true).expect("open");
        assert_eq!(found.len(), 3);
        assert_eq!(found[2].payload, b"three");
    }

    #[test]
    fn a_refill_leaves_the_old_entries_unread_even_where_they_are_not_overwritten() {
        let (_dir, path) = temp();
        let (wal, _) = Wal::open(&path, 1, true).expect("open");
        wal.write(&[(Kind::Appended, b"old and long entry")])
            .expect("write");
        wal.write(&[(Kind::Appended, b"old two")]).expect("write");
        wal.refill(2);
        let at = wal
            .write(&[(Kind::Appended, b"new")])
            .expect("write")
            .expect("room");
        wal.sync(at).expect("sync");
        drop(wal);
        let (_, found) = Wal::open(&path, 2, true).expect("open");
        let read: Vec<_> = found.iter().map(|e| e.payload.as_slice()).collect();
        assert_eq!(read, [&b"new"[..]]);
        let (_, found) = Wal::open(&path, 1, true).expect("open");
        assert!(
            found.is_empty(),
            "the old epoch's first entry was overwritten"
        );
    }

    #[test]
    fn a_torn_or_damaged_entry_ends_the_log() {
        let (_dir, path) = temp();
        let (wal, _) = Wal::open(&path, 0, true).expect("open");
        wal.write(&[(Kind::Appended, b"whole")]).expect("write");
        wal.write(&[(Kind::Appended, b"damaged")]).expect("write");
        wal.write(&[(Kind::Appended, b"after")]).expect("write");
        drop(wal);
        let mut bytes = std::fs::read(&path).expect("read");
        let second = HEADER_LEN + 5;
        bytes[second + HEADER_LEN + 2] ^= 0xff;
        std::fs::write(&path, &bytes).expect("write");
        let (_, found) = Wal::open(&path, 0, true).expect("open");
        assert_eq!(found.len(), 1);
        std::fs::write(&path, &bytes[..second + 4]).expect("truncate");
        let (wal, found) = Wal::open(&path, 0, true).expect("open");
        assert_eq!(found.len(), 1);
        // The next entry goes where the torn one began.
        wal.write(&[(Kind::Appended, b"next")]).expect("write");
        drop(wal);
        let (_, found) = Wal::open(&path, 0, true).expect("open");
        assert_eq!(found[1].payload, b"next");
    }

    #[test]
    fn a_log_without_room_refuses_the_entry_until_it_is_refilled() {
        let (_dir, path) = temp();
        let (wal, _) = Wal::open(&path, 0, false).expect("open");
        let big = vec![7u8; (MAX_BYTES as usize) / 2];
        assert!(
            wal.write(&[(Kind::Appended, &big)])
                .expect("write")
                .is_some()
        );
        assert!(
            wal.write(&[(Kind::Appended, &big)])
                .expect("write")
                .is_none()
        );
        // A small entry would fit, but it would follow a refused one: no gap in the log.
        let small = wal.write(&[(Kind::Appended, b"small")]).expect("write");
        assert!(small.is_none());
        wal.refill(1);
        assert!(
            wal.write(&[(Kind::Appended, &big)])
                .expect("write")
                .is_some(),
            "room again"
        );
    }

    #[test]
    fn a_refill_makes_what_was_written_before_it_durable_without_a_sync() {
        let (_dir, wal, at) = with_entry(0, b"x");
        wal.refill(1);
        assert!(!wal.sync(at).expect("sync"), "no fdatasync needed");
    }
}

/// Syncs of a log held back by a test, to see what goes on while the disk is slow.
#[cfg(test)]
pub(crate) mod held {
    use std::path::{Path, PathBuf};
    use std::sync::{Condvar, Mutex, PoisonError};

    static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    static LET_GO: Condvar = Condvar::new();

    /// Holds every sync of the log at `path` until dropped.
    pub(crate) struct Hold(PathBuf);

    pub(crate) fn hold(path: &Path) -> Hold {
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(path.to_owned());
        Hold(path.to_owned())
    }

    impl Drop for Hold {
        fn drop(&mut self) {
            let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
            held.retain(|path| path != &self.0);
            LET_GO.notify_all();
        }
    }

    pub(super) fn wait_while_held(path: &Path) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        while held.iter().any(|kept| kept == path) {
            held = LET_GO.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
    }
}
