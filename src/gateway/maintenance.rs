//! Keeping stored sessions within `[session.maintenance]` while tern runs, and the pieces
//! `tern sessions cleanup` shares with it.
//!
//! [`Inventory::take`] gathers what is stored (the index, each session's folder, folders of no
//! session); [`crate::store::plan`] decides, purely, what goes; [`carry_out`] removes it.
//! Checking on every write must cost next to nothing, so [`BudgetWatch`] only compares the
//! store's running totals (plus the folder bytes the last inventory measured) with the limits,
//! and wakes the maintenance task when they are crossed; the task does the slow part.

use super::events::{LifecycleBus, LifecycleEvent};
use crate::config::{MaintenanceMode, MaintenanceSettings};
use crate::domain::SessionId;
use crate::session::SessionDirs;
use crate::store::{
    Orphan, Plan, Removal, SessionMeta, Store, StoreError, StoredSession, Totals, plan,
};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What is stored, gathered for a maintenance plan.
#[derive(Debug, Default)]
pub struct Inventory {
    /// Every session in the index, most recently used first.
    pub metas: Vec<SessionMeta>,
    /// The same sessions as the plan sees them: journal plus folder bytes.
    pub stored: Vec<StoredSession>,
    /// Folders under `sessions/` that belong to no session.
    pub orphans: Vec<Orphan>,
    /// Each session's folder and its bytes.
    folders: HashMap<SessionId, (PathBuf, u64)>,
    folder_bytes: u64,
}

impl Inventory {
    /// Reads the whole index and measures every session folder: the slow, thorough pass.
    pub fn take(store: &Store, data_dir: &Path) -> Result<Self, StoreError> {
        let metas = store.list()?;
        let folders: HashMap<SessionId, (PathBuf, u64)> = metas
            .iter()
            .map(|m| {
                let dir = SessionDirs::locate(data_dir, m).0.session_dir;
                let bytes = dir_size(&dir);
                (m.id.clone(), (dir, bytes))
            })
            .collect();
        let stored = metas
            .iter()
            .map(|m| StoredSession {
                id: m.id.clone(),
                updated_at_ms: m.updated_at_ms,
                bytes: m.transcript_bytes + folders.get(&m.id).map_or(0, |f| f.1),
                archived: m.archived_at_ms.is_some(),
            })
            .collect();
        let known: HashSet<&Path> = folders.values().map(|f| f.0.as_path()).collect();
        let orphans: Vec<Orphan> = std::fs::read_dir(data_dir.join("sessions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| !known.contains(entry.path().as_path()))
            .map(|entry| Orphan {
                bytes: dir_size(&entry.path()),
                path: entry.path(),
            })
            .collect();
        let folder_bytes = folders.values().map(|f| f.1).sum::<u64>()
            + orphans.iter().map(|o| o.bytes).sum::<u64>();
        Ok(Self {
            metas,
            stored,
            orphans,
            folders,
            folder_bytes,
        })
    }

    /// The plan for these sessions at `now_ms`, never touching those `in_use`.
    pub fn plan(
        &self,
        limits: &MaintenanceSettings,
        now_ms: i64,
        in_use: &HashSet<SessionId>,
    ) -> Plan {
        plan(limits, now_ms, &self.stored, &self.orphans, in_use)
    }

    /// Bytes of every folder under `sessions/`, the orphans' included.
    pub fn folder_bytes(&self) -> u64 {
        self.folder_bytes
    }

    /// Folder bytes that carrying out `plan` frees.
    fn folder_bytes_freed(&self, plan: &Plan) -> u64 {
        plan.removals
            .iter()
            .map(|removal| match removal {
                Removal::Session { id, .. } => self.folders.get(id).map_or(0, |f| f.1),
                Removal::Orphan { bytes, .. } => *bytes,
            })
            .sum()
    }
}

/// Carries out `plan`: each session's folder goes, then its entry in the database; orphaned
/// folders go. Stops at the first failure, which names the path and what to check.
pub fn carry_out(store: &Store, inventory: &Inventory, plan: &Plan) -> Result<(), CleanupError> {
    for removal in &plan.removals {
        match removal {
            // The folder goes first: a session whose folder could not be removed stays in
            // the index for the next pass, and once `session.deleted` is told both are gone.
            Removal::Session { id, .. } => {
                if let Some((folder, _)) = inventory.folders.get(id) {
                    remove_dir(folder)?;
                }
                store.delete_session(id).map_err(CleanupError::Store)?;
            }
            Removal::Orphan { path, .. } => remove_dir(path)?,
        }
    }
    Ok(())
}

/// Why a cleanup stopped.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Store(StoreError),
    #[error("could not remove {path}: {source}; check its permissions")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn remove_dir(path: &Path) -> Result<(), CleanupError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CleanupError::Folder {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Bytes of the files under `path`, not following links; 0 when it does not exist.
pub fn dir_size(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| dir_size(&entry.path()))
        .sum()
}

/// What a write's check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Within,
    /// Over a limit for the first time since the last pass: the maintenance task is due.
    Crossed,
    /// Still over, and already reported.
    StillOver,
}

/// The check made on every write: the store's totals against the limits.
#[derive(Debug)]
pub struct BudgetWatch {
    limits: MaintenanceSettings,
    /// Folder bytes as the last inventory measured them.
    folder_bytes: AtomicU64,
    /// Set when a crossing was reported, cleared by the next pass that ends within limits.
    over: AtomicBool,
}

impl BudgetWatch {
    pub fn new(limits: MaintenanceSettings) -> Self {
        Self {
            limits,
            folder_bytes: AtomicU64::new(0),
            over: AtomicBool::new(false),
        }
    }

    pub fn limits(&self) -> &MaintenanceSettings {
        &self.limits
    }

    /// Compares `totals` with the byte budget and the session count. Two comparisons and
    /// an atomic swap: cheap enough for every write.
    pub fn check(&self, totals: Totals) -> Check {
        if !self.is_over(totals) {
            return Check::Within;
        }
        if self.over.swap(true, Ordering::AcqRel) {
            Check::StillOver
        } else {
            Check::Crossed
        }
    }

    /// Whether `totals` break the byte budget or the session count.
    pub fn is_over(&self, totals: Totals) -> bool {
        self.over_bytes(totals).is_some() || totals.sessions > self.limits.max_entries
    }

    /// Stored bytes and the budget, when the bytes are over it.
    pub fn over_bytes(&self, totals: Totals) -> Option<(u64, u64)> {
        let max = self.limits.max_disk_bytes?;
        let bytes = totals.transcript_bytes + self.folder_bytes.load(Ordering::Acquire);
        (bytes > max).then_some((bytes, max))
    }

    /// After a pass: the folder bytes it left. A crossing is reported again only after the
    /// store was back within its limits.
    fn passed(&self, folder_bytes: u64) {
        self.folder_bytes.store(folder_bytes, Ordering::Release);
    }

    /// Clears the crossing once `totals` are within the limits again.
    pub fn settle(&self, totals: Totals) {
        if !self.is_over(totals) {
            self.over.store(false, Ordering::Release);
        }
    }
}

/// What a pass that only reports (`warn` mode, at start or when a write crossed a limit)
/// can tell from the running totals and the oldest session, without reading the index: so
/// an idle start of a big store costs nothing. `tern sessions cleanup --dry-run` lists the
/// removals themselves.
pub fn report(store: &Store, watch: &BudgetWatch, bus: &LifecycleBus) -> Result<(), StoreError> {
    let limits = watch.limits();
    let totals = store.totals();
    if let Some((bytes, max)) = watch.over_bytes(totals) {
        bus.emit(LifecycleEvent::over_budget(bytes, max, limits.mode));
    }
    if totals.sessions > limits.max_entries {
        tracing::info!(
            sessions = totals.sessions,
            max_entries = limits.max_entries,
            "more sessions are stored than max_entries allows; `tern sessions cleanup --dry-run` \
             shows which would go (mode = \"warn\" removes nothing)"
        );
    }
    let prune_ms = i64::try_from(limits.prune_after.as_millis()).unwrap_or(i64::MAX);
    let cutoff = jiff::Timestamp::now()
        .as_millisecond()
        .saturating_sub(prune_ms);
    if store
        .oldest_activity_ms()?
        .is_some_and(|oldest| oldest < cutoff)
    {
        tracing::info!(
            "some sessions are older than prune_after; `tern sessions cleanup --dry-run` shows \
             which would go (mode = \"warn\" removes nothing)"
        );
    }
    Ok(())
}

/// A cleanup asked for (`tern sessions cleanup`), as plain data for the front end to show.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cleanup {
    pub plan: Plan,
    /// The titles of the sessions the plan removes, by id.
    pub titles: HashMap<String, String>,
    /// Sessions stored before it.
    pub sessions: usize,
    /// `max_disk_bytes`, if set.
    pub budget: Option<u64>,
    /// Whether the plan was carried out, or only reported.
    pub enforced: bool,
}

/// Plans a cleanup under `limits`, never touching the sessions `in_use`, and carries it out
/// when `enforce` says so (`None`: as the limits' mode says). Blocking.
pub fn clean_up(
    store: &Store,
    data_dir: &Path,
    limits: &MaintenanceSettings,
    enforce: Option<bool>,
    in_use: &HashSet<SessionId>,
) -> Result<Cleanup, CleanupError> {
    let enforced = enforce.unwrap_or(limits.mode == MaintenanceMode::Enforce);
    let inventory = Inventory::take(store, data_dir).map_err(CleanupError::Store)?;
    let now = jiff::Timestamp::now().as_millisecond();
    let plan = inventory.plan(limits, now, in_use);
    let removed: HashSet<&str> = plan
        .removals
        .iter()
        .filter_map(|removal| match removal {
            Removal::Session { id, .. } => Some(id.as_str()),
            Removal::Orphan { .. } => None,
        })
        .collect();
    let titles = inventory
        .metas
        .iter()
        .filter(|meta| removed.contains(meta.id.as_str()))
        .map(|meta| (meta.id.as_str().to_owned(), meta.title.clone()))
        .collect();
    if enforced && !plan.removals.is_empty() {
        carry_out(store, &inventory, &plan)?;
    }
    Ok(Cleanup {
        plan,
        titles,
        sessions: inventory.metas.len(),
        budget: limits.max_disk_bytes,
        enforced,
    })
}

/// One maintenance pass while tern runs: take the inventory, plan around the sessions in
/// use, report, and in `enforce` mode remove. Blocking; run it off the async threads.
pub fn pass(
    store: &Store,
    data_dir: &Path,
    watch: &BudgetWatch,
    bus: &LifecycleBus,
    in_use: &HashSet<SessionId>,
) -> Result<Plan, CleanupError> {
    let limits = watch.limits();
    let inventory = Inventory::take(store, data_dir).map_err(CleanupError::Store)?;
    let now = jiff::Timestamp::now().as_millisecond();
    let planned = inventory.plan(limits, now, in_use);
    if let Some(max) = limits.max_disk_bytes
        && planned.over_budget
    {
        bus.emit(LifecycleEvent::over_budget(
            planned.bytes_before,
            max,
            limits.mode,
        ));
    }
    let enforce = limits.mode == MaintenanceMode::Enforce;
    if !planned.removals.is_empty() {
        let verb = if enforce { "removing" } else { "would remove" };
        tracing::info!(
            removals = planned.removals.len(),
            bytes = planned.bytes_freed(),
            "maintenance {verb} what is over [session.maintenance]{}",
            if enforce {
                ""
            } else {
                " (mode = \"warn\"; `tern sessions cleanup --enforce` removes it)"
            }
        );
    }
    let mut folder_bytes = inventory.folder_bytes();
    if enforce {
        carry_out(store, &inventory, &planned)?;
        folder_bytes -= inventory.folder_bytes_freed(&planned);
    }
    watch.passed(folder_bytes);
    Ok(planned)
}
