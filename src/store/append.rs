//! Appending to journals, with group commit: an append that finds no commit under way
//! writes, in one transaction, every append waiting by then, from any session and any
//! thread. While that commit runs, the appends that arrive wait for it and then go together
//! in the next one.
//!
//! The transaction itself is not durable: its records also go to the write-ahead log
//! (`wal`), and an append whose caller waits for the disk returns once the log is synced up
//! to them, one fdatasync shared by every append written before it, run beside the next
//! group's commit. Without room in the log, the group is made durable in the database.
//!
//! An append that fails (an unknown session, a path that is not UTF-8) must not take the
//! others down with it: a group whose transaction fails is written again one append at a
//! time, so each gets its own outcome and all or none of an append's records are stored.

use super::db::{Attempt, Store, check_utf8, encode, now_ms, unknown};
use super::error::StoreError;
use super::event::{JournalEvent, JournalRecord};
use super::lazy::Lazy;
use super::schema::{JOURNAL, SESSIONS};
use super::snapshot::DueSnapshot;
use super::totals::{self, Delta};
use super::{StoreChange, activity, codec, search, summary};
use crate::domain::SessionId;
use redb::{Durability, ReadableTable, WriteTransaction};
use std::cell::Cell;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// The appends waiting for a commit, and whether one is under way.
#[derive(Default)]
pub(super) struct Appends {
    queue: Mutex<Queue>,
    /// Woken when a commit ends: its appends have their outcomes, and the next may start.
    ended: Condvar,
    /// Snapshots waiting to go with the next commit (see [`Store::save_snapshot_soon`]).
    pub(super) snapshots: super::snapshot::Due,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Arc<Append>>,
    writing: bool,
}

/// One caller's append, and its outcome once a commit has run it.
pub(super) struct Append {
    id: SessionId,
    events: Vec<JournalEvent>,
    at_ms: i64,
    /// Whether the caller waits for the disk; a group is durable when one of its appends is.
    durable: bool,
    /// The journal's last seq before this append's records, once committed.
    pub(super) base: OnceLock<u64>,
    /// The records as stored, one frame after the other: what the write-ahead log keeps.
    pub(super) stored: Mutex<Vec<u8>>,
    /// How the commit that wrote this append reached the disk, once it has.
    pub(super) logged: Mutex<Option<Logged>>,
    outcome: Mutex<Option<Result<Vec<JournalRecord>, StoreError>>>,
}

/// How a commit's writes are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Logged {
    /// The commit was durable itself.
    Durable,
    /// In the write-ahead log, durable once it is synced up to this position.
    At(u64),
    /// Neither: durable with the next durable commit of the database.
    Later,
}

impl Append {
    fn new(id: &SessionId, events: Vec<JournalEvent>, at_ms: i64, durable: bool) -> Append {
        Append {
            id: id.clone(),
            events,
            at_ms,
            durable,
            base: OnceLock::new(),
            stored: Mutex::new(Vec::new()),
            logged: Mutex::new(None),
            outcome: Mutex::new(None),
        }
    }

    /// An append read back from the write-ahead log: `events` go after seq `base`.
    pub(super) fn restored(
        id: SessionId,
        events: Vec<JournalEvent>,
        at_ms: i64,
        base: u64,
    ) -> Append {
        let append = Append::new(&id, events, at_ms, false);
        let _ = append.base.set(base);
        append
    }
}

type Outcome = Result<Vec<JournalRecord>, StoreError>;

/// Records stored but not yet durable, for [`Store::sync`].
#[derive(Debug)]
#[must_use = "the records are not durable until synced"]
pub struct Unsynced(Logged);

impl Appends {
    /// How many appends wait for the commit under way.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        lock(&self.queue).waiting.len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the commit under way when dropped, even by a panic: an append of its group left
/// without an outcome is failed, so no waiter waits for ever.
struct Writing<'a> {
    appends: &'a Appends,
    group: &'a [Arc<Append>],
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        for append in self.group {
            let mut outcome = lock(&append.outcome);
            if outcome.is_none() {
                *outcome = Some(Err(StoreError::Internal(
                    "the commit holding this append stopped".to_owned(),
                )));
            }
        }
        lock(&self.appends.queue).writing = false;
        self.appends.ended.notify_all();
    }
}

impl Store {
    /// Appends one event to the session's journal and updates its index entry, durably, in
    /// one transaction. Returns the record with its assigned seq and time.
    pub fn append(
        &self,
        id: &SessionId,
        event: &JournalEvent,
    ) -> Result<JournalRecord, StoreError> {
        let mut records = self.append_batch(id, std::slice::from_ref(event))?;
        records.pop().ok_or_else(|| {
            StoreError::Internal("an append of one event produced no record".to_owned())
        })
    }

    /// Appends several events in order, durably, in one transaction: all or none are stored.
    /// Appends from other callers that wait at the same time share the transaction.
    pub fn append_batch(&self, id: &SessionId, events: &[JournalEvent]) -> Outcome {
        self.submit(id, events, true)
    }

    /// [`Store::append_batch`] without waiting for the disk: the records are stored, in
    /// order, and become durable with the next durable commit (of any session) or
    /// [`Store::flush`]. A crash before then loses them, and nothing after them.
    pub fn append_lazily(&self, id: &SessionId, events: &[JournalEvent]) -> Outcome {
        self.submit(id, events, false)
    }

    /// [`Store::append_batch`] in two steps, for a caller with work to start while the disk
    /// syncs: the records are stored as [`Store::append_lazily`] stores them, and returned
    /// with what [`Store::sync`] makes durable. Until it has, nothing may treat them as
    /// durable: not an acknowledgement, not a side effect.
    pub fn append_unsynced(
        &self,
        id: &SessionId,
        events: &[JournalEvent],
    ) -> Result<(Vec<JournalRecord>, Unsynced), StoreError> {
        let (records, logged) = self.store_append(id, events, false)?;
        Ok((records, Unsynced(logged)))
    }

    /// Waits until the records [`Store::append_unsynced`] stored are durable (one fsync,
    /// shared with every append waiting for the disk by then).
    pub fn sync(&self, unsynced: Unsynced) -> Result<(), StoreError> {
        self.make_durable(unsynced.0)
    }

    fn submit(&self, id: &SessionId, events: &[JournalEvent], durable: bool) -> Outcome {
        let (records, logged) = self.store_append(id, events, durable)?;
        if durable {
            self.make_durable(logged)?;
        }
        Ok(records)
    }

    /// Stores `events` through the group commit; returns their records and how the commit
    /// reached the disk.
    fn store_append(
        &self,
        id: &SessionId,
        events: &[JournalEvent],
        durable: bool,
    ) -> Result<(Vec<JournalRecord>, Logged), StoreError> {
        if events.is_empty() {
            return Ok((Vec::new(), Logged::Durable));
        }
        for event in events {
            if let Some(path) = event.path() {
                check_utf8(path)?;
            }
        }
        let mine = Arc::new(Append::new(id, events.to_vec(), now_ms(), durable));
        let records = self.enqueue(mine.clone())?;
        let logged = *lock(&mine.logged);
        Ok((records, logged.unwrap_or(Logged::Later)))
    }

    /// Waits until a commit that reached the disk as `logged` is durable.
    fn make_durable(&self, logged: Logged) -> Result<(), StoreError> {
        let synced = match (logged, &self.wal) {
            (Logged::Durable, _) => return Ok(()),
            (Logged::At(upto), Some(wal)) => wal.sync(upto),
            (_, _) => return self.flush_now(),
        };
        match synced {
            Ok(true) => {
                self.count_sync();
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(err) => {
                // The log could not be synced: the database's own durable commit instead.
                tracing::warn!(path = %self.wal_path().display(), %err, "could not sync the write-ahead log");
                self.flush_now()
            }
        }
    }

    /// Makes every commit so far durable (one fsync, shared with the appends waiting with
    /// it), if one is not yet: what a lazy append or a session's creation left for later. A
    /// sync of the write-ahead log when it holds every such commit, else a durable commit of
    /// the database.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.flush_done();
        if !self.flush_pending() {
            return Ok(());
        }
        match &self.wal {
            // Everything since the last durable commit is in the log: syncing it is enough.
            Some(wal) if !self.unlogged.load(std::sync::atomic::Ordering::Acquire) => {
                self.make_durable(Logged::At(wal.written()))
            }
            _ => self.flush_now(),
        }
    }

    /// A durable commit of the database now (shared with the appends waiting with it).
    fn flush_now(&self) -> Result<(), StoreError> {
        let nothing = Append::new(
            &SessionId::from_string(String::new()),
            Vec::new(),
            now_ms(),
            true,
        );
        self.enqueue(Arc::new(nothing)).map(drop)
    }

    /// Waits for the commit that holds `mine`, writing it (and every append waiting by
    /// then) when no commit is under way.
    fn enqueue(&self, mine: Arc<Append>) -> Outcome {
        let appends = &self.appends;
        let mut queue = lock(&appends.queue);
        queue.waiting.push(mine.clone());
        loop {
            if let Some(outcome) = lock(&mine.outcome).take() {
                return outcome;
            }
            if !queue.writing {
                queue.writing = true;
                let group = std::mem::take(&mut queue.waiting);
                drop(queue);
                let writing = Writing {
                    appends,
                    group: &group,
                };
                self.commit_group(&group);
                drop(writing);
                queue = lock(&appends.queue);
                continue;
            }
            queue = appends
                .ended
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Writes `group`, and the snapshots due, in one transaction and gives each append its
    /// outcome.
    fn commit_group(&self, group: &[Arc<Append>]) {
        let snapshots = self.appends.snapshots.take();
        let alone = group.len() == 1 && snapshots.is_empty();
        match self.commit_appends(group, &snapshots) {
            Ok(all) => {
                for (append, records) in group.iter().zip(all) {
                    *lock(&append.outcome) = Some(Ok(records));
                }
            }
            Err(err) if alone => *lock(&group[0].outcome) = Some(Err(err)),
            // Something failed: each append again on its own, so only one that fails itself
            // fails; the snapshots wait for the next commit.
            Err(_) => {
                self.appends.snapshots.restore(snapshots);
                for append in group {
                    let outcome = self
                        .commit_appends(std::slice::from_ref(append), &[])
                        .map(|mut all| all.pop().unwrap_or_default());
                    *lock(&append.outcome) = Some(outcome);
                }
            }
        }
    }

    /// Stores `appends` in one transaction, in order, logged ahead or durable (a flush, or
    /// without a log); after it, tells the observer of each.
    fn commit_appends(
        &self,
        appends: &[Arc<Append>],
        snapshots: &[DueSnapshot],
    ) -> Result<Vec<Vec<JournalRecord>>, StoreError> {
        // The last seq each first attempt found, so a retry can tell whether its commit landed.
        let bases: Vec<Cell<Option<u64>>> = appends.iter().map(|_| Cell::new(None)).collect();
        let flush = appends.iter().any(|append| append.events.is_empty());
        let waited = appends.iter().any(|append| append.durable);
        let durability = if flush || (waited && self.wal.is_none()) {
            Durability::Immediate
        } else {
            Durability::None
        };
        let kept = || {
            appends
                .iter()
                .map(|append| Lazy::Appended(append.clone()))
                .collect()
        };
        // The snapshots due go with the appends, at no transaction of their own.
        let (written, logged) = self.commit_logged(durability, kept, |txn, attempt| {
            self.put_snapshots(txn, snapshots)?;
            appends
                .iter()
                .zip(&bases)
                .map(|(append, base)| self.append_in(txn, attempt, append, base))
                .collect::<Result<Vec<_>, _>>()
        })?;
        for append in appends {
            *lock(&append.logged) = Some(logged);
        }
        let mut all = Vec::with_capacity(written.len());
        for (append, (records, added)) in appends.iter().zip(written) {
            if records.is_empty() {
                all.push(records);
                continue;
            }
            let delta = Delta {
                sessions: 0,
                bytes: added as i64,
            };
            let change = StoreChange::Appended {
                id: &append.id,
                events: &append.events,
            };
            self.committed(change, delta);
            all.push(records);
        }
        Ok(all)
    }

    /// Writes one append's records and its session's index entry in `txn`; its records and
    /// their bytes.
    pub(super) fn append_in(
        &self,
        txn: &WriteTransaction,
        attempt: Attempt,
        append: &Append,
        first_base: &Cell<Option<u64>>,
    ) -> Result<(Vec<JournalRecord>, u64), StoreError> {
        let (id, events, at_ms) = (&append.id, &append.events, append.at_ms);
        // A flush: the commit's durability is all it asks for.
        if events.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
        let mut meta = match sessions.get(id.as_str()).map_err(|e| self.err(e))? {
            Some(bytes) => self.decode_meta(id.as_str(), bytes.value())?,
            None => return Err(unknown(id.as_str())),
        };
        let active_before = meta.updated_at_ms;
        let search_before = search::encode(&meta);
        let mut journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
        // The journal's last key is the authority on seq, not the index's count.
        let mut seq = journal
            .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
            .map_err(|e| self.err(e))?
            .next_back()
            .transpose()
            .map_err(|e| self.err(e))?
            .map_or(0, |(key, _)| key.value().1);
        match (attempt, first_base.get()) {
            (Attempt::First, _) => {
                first_base.set(Some(seq));
                // Where a restore after a reopen looks for these records.
                let _ = append.base.set(seq);
            }
            (Attempt::Retry, Some(base)) => {
                let mut stored = lock(&append.stored);
                if let Some(landed) =
                    self.landed(&journal, id, (base, seq), at_ms, events, &mut stored)?
                {
                    return Ok(landed);
                }
            }
            (Attempt::Retry, None) => {}
        }
        let mut records = Vec::with_capacity(events.len());
        let mut added = 0;
        let mut stored = lock(&append.stored);
        stored.clear();
        for event in events {
            seq += 1;
            let json = encode(codec::encode_record(id.as_str(), seq, at_ms, event))?;
            journal
                .insert((id.as_str(), seq), json.as_slice())
                .map_err(|e| self.err(e))?;
            stored.extend_from_slice(&json);
            summary::apply(&mut meta, event, at_ms);
            added += json.len() as u64;
            meta.transcript_bytes += json.len() as u64;
            records.push(JournalRecord {
                seq,
                at_ms,
                event: event.clone(),
            });
        }
        meta.revision += 1;
        let json = encode(codec::encode_meta(&meta))?;
        sessions
            .insert(id.as_str(), json.as_slice())
            .map_err(|e| self.err(e))?;
        if meta.updated_at_ms != active_before {
            let (old, new) = (Some(active_before), Some(meta.updated_at_ms));
            activity::touch(txn, id.as_str(), old, new).map_err(|e| self.err(e))?;
        }
        search::sync(txn, id.as_str(), Some(&search_before), Some(&meta))
            .map_err(|e| self.err(e))?;
        let delta = Delta {
            sessions: 0,
            bytes: added as i64,
        };
        totals::add(txn, delta).map_err(|e| self.err(e))?;
        Ok((records, added))
    }

    /// On a retry, the records (and their bytes) of the first attempt if its commit landed after all (a failed
    /// fsync can report an error for a commit already in the file), so that they are not
    /// appended twice. `base` is the last seq the first attempt found, `last` the current one.
    fn landed(
        &self,
        journal: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        id: &SessionId,
        (base, last): (u64, u64),
        at_ms: i64,
        events: &[JournalEvent],
        stored: &mut Vec<u8>,
    ) -> Result<Option<(Vec<JournalRecord>, u64)>, StoreError> {
        stored.clear();
        // The records may be followed by later ones of the same session that landed too
        // (a lazy append written again after a reopen): only their own places are checked.
        if base
            .checked_add(events.len() as u64)
            .is_none_or(|end| end > last)
        {
            return Ok(None);
        }
        let mut records = Vec::with_capacity(events.len());
        let mut bytes = 0;
        for (seq, event) in (base + 1..).zip(events) {
            let expected = encode(codec::encode_record(id.as_str(), seq, at_ms, event))?;
            let there = journal.get((id.as_str(), seq)).map_err(|e| self.err(e))?;
            if there.is_none_or(|bytes| bytes.value() != expected.as_slice()) {
                stored.clear();
                return Ok(None);
            }
            bytes += expected.len() as u64;
            stored.extend_from_slice(&expected);
            records.push(JournalRecord {
                seq,
                at_ms,
                event: event.clone(),
            });
        }
        Ok(Some((records, bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SessionMeta, Store, StoreError};
    use crate::domain::{Message, SessionId, SessionKey};
    use crate::store::{JournalEvent, StoreChange};
    use std::sync::{Arc, Barrier, Mutex};
    use std::time::{Duration, Instant};

    fn note(text: &str) -> JournalEvent {
        JournalEvent::Message {
            message: Message::user_text(text),
        }
    }

    fn session(store: &Store) -> SessionId {
        let id = SessionId::generate();
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 1);
        store.create_session(&meta).expect("create");
        id
    }

    /// A store whose first append's commit is held (in its observer) until `release` is
    /// waited at, so the appends made meanwhile must wait for the next commit.
    fn held(dir: &std::path::Path) -> (Arc<Store>, Arc<Barrier>, Arc<Barrier>) {
        let store = Arc::new(Store::open(&dir.join("tern.redb")).expect("open"));
        let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let first = Mutex::new(true);
        let (in_commit, go) = (entered.clone(), release.clone());
        store.observe(Arc::new(move |change, _| {
            if matches!(change, StoreChange::Appended { .. })
                && std::mem::replace(&mut *first.lock().unwrap(), false)
            {
                in_commit.wait();
                go.wait();
            }
        }));
        (store, entered, release)
    }

    fn wait_until(what: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !what() {
            assert!(Instant::now() < deadline, "the appends never queued");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn appends_that_wait_together_share_one_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (store, entered, release) = held(dir.path());
        let ids: Vec<SessionId> = (0..8).map(|_| session(&store)).collect();
        let before = store.durable_commits();
        let mut threads = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let (store, id) = (store.clone(), id.clone());
            threads.push(std::thread::spawn(move || {
                store.append_batch(&id, &[note(&format!("{i}a")), note(&format!("{i}b"))])
            }));
            if i == 0 {
                entered.wait();
            }
        }
        // The first commit is held; the seven others wait for the next one.
        wait_until(|| store.appends.waiting() == 7);
        release.wait();
        for thread in threads {
            let records = thread.join().unwrap().expect("appended");
            assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
        }
        // One sync for the first and one for the rest, or one for all when the first's
        // sync starts after the rest were written to the log.
        let synced = store.durable_commits() - before;
        assert!((1..=2).contains(&synced), "{synced} syncs for two commits");
        for (i, id) in ids.iter().enumerate() {
            let stored = store.load(id).unwrap();
            assert_eq!(stored.len(), 2);
            assert_eq!(stored[1].event, note(&format!("{i}b")));
        }
    }

    #[test]
    fn a_failing_append_in_a_group_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (store, entered, release) = held(dir.path());
        let first = session(&store);
        let (good, same) = (session(&store), first.clone());
        let missing = SessionId::generate();
        let blocked = {
            let store = store.clone();
            std::thread::spawn(move || store.append(&first, &note("held")))
        };
        entered.wait();
        let threads: Vec<_> = [good.clone(), missing, same.clone()]
            .into_iter()
            .map(|id| {
                let store = store.clone();
                std::thread::spawn(move || store.append(&id, &note("grouped")))
            })
            .collect();
        wait_until(|| store.appends.waiting() == 3);
        release.wait();
        assert_eq!(blocked.join().unwrap().unwrap().seq, 1);
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(outcomes[0].as_ref().unwrap().seq, 1);
        assert!(
            matches!(outcomes[1], Err(StoreError::UnknownSession { .. })),
            "{:?}",
            outcomes[1]
        );
        // Two appends to one session in a row keep their order.
        assert_eq!(outcomes[2].as_ref().unwrap().seq, 2);
        assert_eq!(store.load(&good).unwrap().len(), 1);
        assert_eq!(store.load(&same).unwrap().len(), 2);
    }
}
