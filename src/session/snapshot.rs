//! Committing to the journal, and the snapshots that keep reopening fast.
//!
//! Every change to a session's state goes through [`commit`]: append durably, apply, and
//! every `snapshot_every` events (and right after a compaction) save the whole state as a
//! snapshot. [`recover`] rebuilds a session from its latest snapshot plus the events after
//! it, or from the whole journal when there is no usable snapshot.

use super::background;
use super::redact::Redactor;
use super::spool;
use super::state::{Replay, SessionState};
use crate::domain::SessionId;
use crate::store::{JournalEvent, JournalRecord, Store, StoreError, Unsynced};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The snapshot format this build writes; a snapshot of another version is not used (the
/// journal is replayed instead), so the format can change freely.
const SNAPSHOT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Encoding<'a> {
    version: u32,
    state: &'a SessionState,
}

#[derive(Deserialize)]
struct Decoding {
    version: u32,
    state: SessionState,
}

/// The snapshot encoding of `state`.
pub fn encode(state: &SessionState) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&Encoding {
        version: SNAPSHOT_VERSION,
        state,
    })
}

/// The state a snapshot holds, or `None` when it cannot be used.
pub fn decode(bytes: &[u8]) -> Option<SessionState> {
    match serde_json::from_slice::<Decoding>(bytes) {
        Ok(found) if found.version == SNAPSHOT_VERSION => Some(found.state),
        Ok(found) => {
            tracing::info!(
                version = found.version,
                "snapshot of another format; replaying"
            );
            None
        }
        Err(err) => {
            tracing::warn!(%err, "unreadable snapshot; replaying the journal");
            None
        }
    }
}

/// Appends `events` durably in one commit, applies them to `state`, and takes a snapshot when
/// one is due: `every` events after the last, or after a compaction.
pub fn commit(
    store: &Arc<Store>,
    every: u32,
    state: &mut SessionState,
    events: &[JournalEvent],
) -> Result<Vec<JournalRecord>, StoreError> {
    let records = appended(store, &state.id, events, Durable::Now)?;
    applied(store, every, state, events, records)
}

/// Whether an append waits for the disk.
#[derive(Clone, Copy)]
enum Durable {
    Now,
    Soon,
}

/// Appends `events` to session `id`'s journal, off the async threads, and at tern's own
/// priority when called from a turn that runs below it (see [`background::at_full_priority`]).
fn appended(
    store: &Arc<Store>,
    id: &SessionId,
    events: &[JournalEvent],
    durable: Durable,
) -> Result<Vec<JournalRecord>, StoreError> {
    let append = move |store: &Store, id: &SessionId, events: &[JournalEvent]| match durable {
        Durable::Now => store.append_batch(id, events),
        Durable::Soon => store.append_lazily(id, events),
    };
    if !background::lowered() {
        return crate::tools::off_async_threads(|| append(store, id, events));
    }
    let (shared, id, events) = (Arc::clone(store), id.clone(), events.to_vec());
    background::at_full_priority(move || append(&shared, &id, &events))
        .unwrap_or_else(|| Err(stopped()))
}

/// [`commit`] in two steps, awaited rather than blocked on, for a turn to start while the disk
/// syncs: the events are stored and applied to `state`, and what makes them durable is returned for
/// [`sync_awaited`]. Nothing may be acknowledged or done on their strength until then.
pub async fn commit_unsynced_awaited(
    store: &Arc<Store>,
    every: u32,
    state: &mut SessionState,
    events: Vec<JournalEvent>,
) -> Result<(Vec<JournalRecord>, Unsynced), StoreError> {
    let (shared, id) = (store.clone(), state.id.clone());
    let append = move || (shared.append_unsynced(&id, &events), events);
    let (stored, events) = if background::lowered() {
        background::at_full_priority(append).ok_or_else(stopped)?
    } else {
        blocking(append).await?
    };
    let (records, unsynced) = stored?;
    Ok((applied(store, every, state, &events, records)?, unsynced))
}

/// Waits, off the caller's thread, until what [`commit_unsynced_awaited`] stored is durable.
pub async fn sync_awaited(store: &Arc<Store>, unsynced: Unsynced) -> Result<(), StoreError> {
    let shared = store.clone();
    let sync = move || shared.sync(unsynced);
    if background::lowered() {
        return background::at_full_priority(sync).ok_or_else(stopped)?;
    }
    blocking(sync).await?
}

/// Runs `work` on the blocking pool and awaits it.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Ok(done),
        // As if it had panicked here: the commit may have landed, so nothing may go on as
        // though it had not.
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => Err(StoreError::Internal(format!("an append stopped: {err}"))),
    }
}

fn stopped() -> StoreError {
    StoreError::Internal("the thread committing this append stopped".to_owned())
}

/// [`commit`] without waiting for the disk, for records whose loss in a crash only ends the
/// turn as interrupted (the layers before a model call, a reply with no calls, a turn's end,
/// a title): they become durable with the next durable commit, or a flush within
/// [`FLUSH_AFTER`]. A record that comes before a side effect (a tool call) or after one (its
/// result), and an input, are committed durably instead.
pub fn commit_soon(
    store: &Arc<Store>,
    every: u32,
    state: &mut SessionState,
    events: &[JournalEvent],
) -> Result<Vec<JournalRecord>, StoreError> {
    let records = appended(store, &state.id, events, Durable::Soon)?;
    if !records.is_empty() {
        flush_soon(store);
    }
    applied(store, every, state, events, records)
}

/// How long a lazy commit waits for a durable one before it is flushed: a `tern run` closes
/// the store (which makes it durable) well within it.
pub const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Makes the store's lazy commits durable after [`FLUSH_AFTER`], unless a durable commit did
/// meanwhile (the flush is then nothing); one flush serves every lazy commit before it.
fn flush_soon(store: &Arc<Store>) {
    if !store.schedule_flush() {
        return;
    }
    let weak = Arc::downgrade(store);
    // Asked from a lowered thread: kept at tern's own priority, since a flush is a commit
    // every session's appends may wait for.
    let later = weak.clone();
    if background::later_at_full_priority(FLUSH_AFTER, move || flush_now(&later)) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        flush_now(&weak);
        return;
    };
    runtime.spawn(async move {
        tokio::time::sleep(FLUSH_AFTER).await;
        let _ = tokio::task::spawn_blocking(move || flush_now(&weak)).await;
    });
}

/// Makes the store's lazy commits durable, if the store is still open.
fn flush_now(store: &std::sync::Weak<Store>) {
    if let Some(store) = store.upgrade()
        && let Err(err) = store.flush()
    {
        tracing::warn!(%err, "could not make the journal durable");
    }
}

/// Applies committed `records` to `state`, and takes a snapshot when one is due: `every`
/// events after the last, or after a compaction.
fn applied(
    store: &Store,
    every: u32,
    state: &mut SessionState,
    events: &[JournalEvent],
    records: Vec<JournalRecord>,
) -> Result<Vec<JournalRecord>, StoreError> {
    if records.is_empty() {
        return Ok(records);
    }
    for record in &records {
        state.apply(&record.event);
        state.set_last_seq(record.seq);
    }
    let compacted = events
        .iter()
        .any(|event| matches!(event, JournalEvent::Compacted { .. }));
    let due = state.last_seq >= state.snapshot_seq.saturating_add(u64::from(every.max(1)));
    if compacted || due {
        snapshot(store, state);
    }
    Ok(records)
}

/// Saves `state` as the session's snapshot, with the next commit of the store (see
/// [`Store::save_snapshot_soon`]), so the record that made it due is not held up by it.
pub fn snapshot(store: &Store, state: &mut SessionState) {
    match encode(state) {
        Ok(bytes) => {
            store.save_snapshot_soon(&state.id, state.last_seq, bytes);
            state.snapshot_seq = state.last_seq;
        }
        Err(err) => tracing::warn!(session = %state.id, %err, "snapshot not saved"),
    }
}

/// Appends the repairs a replay found needed (already applied to its state), so the journal
/// matches the state again; the spools of the calls they answer in `spool_dir` go then.
pub fn store_repairs(
    store: &Store,
    replay: &mut Replay,
    spool_dir: &Path,
) -> Result<(), StoreError> {
    if replay.repairs.is_empty() {
        return Ok(());
    }
    let records = store.append_batch(&replay.state.id, &replay.repairs)?;
    if let Some(last) = records.last() {
        replay.state.set_last_seq(last.seq);
    }
    for event in &replay.repairs {
        if let JournalEvent::ToolResults { results, .. } = event {
            for result in results {
                spool::remove(spool_dir, &result.tool_use_id);
            }
        }
    }
    Ok(())
}

/// Rebuilds a session: its latest usable snapshot, then the journal after it (or the whole
/// journal), with the repairs a crash left needed. `project_dir` is the session's current
/// one, which wins over the snapshot's. What a call that was running had printed comes from
/// its spool in `spool_dir`, without the credentials `redactor` knows.
pub fn recover(
    store: &Store,
    id: &SessionId,
    project_dir: PathBuf,
    spool_dir: &Path,
    redactor: &Redactor,
) -> Result<Replay, StoreError> {
    let from_snapshot = store
        .latest_snapshot(id)?
        .and_then(|found| decode(&found.state).map(|state| (found.seq, state)))
        .filter(|(seq, state)| state.id == *id && state.last_seq == *seq);
    let (mut base, after) = match from_snapshot {
        Some((seq, state)) => (state, seq),
        None => (SessionState::new(id.clone(), project_dir.clone()), 0),
    };
    base.snapshot_seq = after;
    base.project_dir = project_dir;
    let records = store.load_after(id, after)?;
    let captured =
        |call_id: &str| spool::captured(spool_dir, call_id).map(|text| redactor.credentials(&text));
    Ok(SessionState::replay_onto(base, &records, &captured))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::domain::SessionKey;
    use crate::store::SessionMeta;
    use std::sync::Mutex;

    fn nice() -> i32 {
        // SAFETY: reads the calling thread's own priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn appends_asked_from_a_lowered_thread_are_written_at_tern_s_own_priority() {
        let dir = tempfile::tempdir().expect("a folder");
        let store = Arc::new(Store::open(&dir.path().join("tern.redb")).expect("a store"));
        let id = SessionId::generate();
        let meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), PathBuf::from("/p"), 0);
        store.create_session(&meta).expect("a session");
        // The store tells its observer from the thread that wrote each group.
        let writers = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&writers);
        store.observe(Arc::new(move |_, _| seen.lock().unwrap().push(nice())));
        let runtime = background::runtime().expect("the runs' runtime starts");
        let shared = Arc::clone(&store);
        let asked = runtime.spawn(async move {
            let lowered = nice();
            let mut state = SessionState::new(id, PathBuf::from("/p"));
            let title = |title: &str| JournalEvent::TitleChanged {
                title: title.to_owned(),
            };
            commit(&shared, 100, &mut state, &[title("a turn's call")]).expect("durable");
            commit_soon(&shared, 100, &mut state, &[title("a turn's reply")]).expect("lazy");
            let (_, unsynced) =
                commit_unsynced_awaited(&shared, 100, &mut state, vec![title("a run's input")])
                    .await
                    .expect("stored");
            sync_awaited(&shared, unsynced).await.expect("synced");
            lowered
        });
        let lowered = runtime.block_on(asked).expect("the task ran");
        let ours = nice();
        assert_eq!(lowered, (ours + 10).min(19));
        assert_eq!(*writers.lock().unwrap(), [ours, ours, ours]);
    }
}
