//! `tern doctor --repair` and `tern doctor`'s check: a damaged session database is moved
//! aside, never deleted, and everything still readable in it goes into a fresh one.
//!
//! The salvage follows SQLite's `.recover`: what the tables still give is taken first (read by
//! the storage engine in a worker that can be stopped, see `worker` and `dump`), then the
//! file's raw bytes are scanned for the self-checking frames every journal record, index entry
//! and tombstone is stored in (see `frame` and `scan`), which finds records whose tree is gone
//! and older copies in freed pages. The session index, its activity and search tables, the
//! keys and the totals are then built again from the recovered journals (see `rebuild`). It
//! never hangs (every step has a deadline), never lets a storage-engine panic out, and reports
//! counts that add up: for each session, the records found, recovered and lost.
//!
//! A database that is missing or empty while session folders exist beside it was lost, not
//! new: opening refuses it (`StoreError::Lost`) and the repair gives each folder an index
//! entry again.

mod check;
mod dump;
mod rebuild;
mod scan;
mod worker;

pub use check::{Health, HealthState, check};
pub use worker::{Limits, Task, Worker, serve};

use super::db::Store;
use super::error::StoreError;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a repair did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// The database checked healthy; nothing was touched.
    Healthy,
    /// A fresh database holds what could be recovered.
    Rebuilt(Salvage),
}

/// How a rebuild went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvage {
    /// Where the damaged file was moved; `None` when there was no file.
    pub moved_to: Option<PathBuf>,
    /// Set when the database was missing and `moved_to` is where an earlier repair, cut
    /// short, had moved it: salvaged again from there.
    pub earlier: bool,
    /// Every session of the new database.
    pub sessions: Vec<SessionSalvage>,
    /// What could not be read, in words.
    pub problems: Vec<String>,
    /// Places in the file that began like a record but whose bytes were damaged.
    pub damaged_copies: usize,
    /// Old copies of deleted sessions' records found in the file and left deleted.
    pub ignored_deleted: usize,
    /// Whether the scan of the file's bytes reached its end before its deadline.
    pub scan_complete: bool,
    pub took: Duration,
}

/// What one session got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSalvage {
    pub id: String,
    pub title: String,
    /// Journal records that existed: its highest seq seen, or its index entry's count.
    pub found: u64,
    /// Records in the new database.
    pub recovered: u64,
    /// Of those, the records only the scan of the file's bytes found.
    pub from_pages: u64,
    /// Where its index entry came from.
    pub index: Source,
}

impl SessionSalvage {
    /// Records that existed and could not be read.
    pub fn lost(&self) -> u64 {
        self.found.saturating_sub(self.recovered)
    }
}

/// Where a session's index entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The index table, intact.
    Table,
    /// An older copy in the file's pages.
    Pages,
    /// Made again from its journal records.
    Records,
    /// Only its folder was left.
    Folder,
}

impl Salvage {
    pub fn found(&self) -> u64 {
        self.sessions.iter().map(|s| s.found).sum()
    }

    pub fn recovered(&self) -> u64 {
        self.sessions.iter().map(|s| s.recovered).sum()
    }

    pub fn lost(&self) -> u64 {
        self.sessions.iter().map(SessionSalvage::lost).sum()
    }
}

/// How a repair runs.
#[derive(Debug, Clone)]
pub struct RepairOptions {
    /// Where the storage engine reads the damaged file.
    pub worker: Worker,
    /// Limits for the worker's check and table reading; by the file's size when `None`.
    pub limits: Option<Limits>,
    /// How long the scan of the file's bytes may take.
    pub scan_time: Duration,
}

impl RepairOptions {
    pub fn new(worker: Worker) -> Self {
        Self {
            worker,
            limits: None,
            scan_time: Duration::from_secs(300),
        }
    }
}

/// The folder of session folders beside the database at `db_path`.
pub fn sessions_dir(db_path: &Path) -> PathBuf {
    db_path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("sessions")
}

/// How many session folders exist beside the database at `db_path` when the database file is
/// missing or empty (it was lost, not never made); `None` otherwise.
pub fn lost_with_folders(db_path: &Path) -> Option<usize> {
    let empty = match std::fs::metadata(db_path) {
        Ok(meta) => meta.len() == 0,
        Err(err) => err.kind() == std::io::ErrorKind::NotFound,
    };
    if !empty {
        return None;
    }
    let folders = rebuild::folders(&sessions_dir(db_path)).len();
    (folders > 0).then_some(folders)
}

/// Checks the database at `path` and, when it is damaged (or lost beside session folders),
/// rebuilds it as described above. A healthy, locked or newer database is left as it is: the
/// first is reported healthy, the others as the error they are.
pub fn repair(path: &Path, options: &RepairOptions) -> Result<Repair, StoreError> {
    let started = Instant::now();
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    let limits = || options.limits.unwrap_or_else(|| Limits::for_file(len));
    let lost = lost_with_folders(path).is_some();
    if !lost {
        let health = check(path, false, &options.worker, limits());
        match health.state {
            check::HealthState::Healthy | check::HealthState::Absent => return Ok(Repair::Healthy),
            check::HealthState::Damaged => {}
            // Locked, newer, or the check failed for another reason: the file may be fine, so
            // it is not moved; the message says why.
            _ => return Err(refusal(path, &health)),
        }
    }
    let io = |action: &'static str, path: &Path, source| StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let earlier = !path.exists();
    let moved_to = if earlier {
        // No database: a repair that did not finish may have moved a damaged one aside
        // already; salvage that again rather than only the folders.
        latest_damaged(path)
    } else {
        let moved_to = super::db::beside(path, &format!(".damaged-{stamp}"));
        std::fs::rename(path, &moved_to).map_err(|e| io("move aside", path, e))?;
        Some(moved_to)
    };
    let (dump, scan) = match &moved_to {
        Some(moved) => {
            let dump = dump::collect(&options.worker, moved, limits());
            let scan = scan::scan(moved, Instant::now() + options.scan_time)
                .map_err(|e| io("read", moved, e))?;
            (dump, scan)
        }
        None => (dump::TreeDump::default(), scan::Scan::default()),
    };
    let folders = rebuild::folders(&sessions_dir(path));
    let mut dump = dump;
    dump.deleted.extend(super::deleted::read(path));
    let plan = rebuild::Rebuild::plan(&dump, &scan, &folders);
    // Built beside the database and moved into place whole, so a repair cut short never
    // leaves a half-built database that would pass for a healthy one.
    let building = super::db::beside(path, ".rebuilding");
    let _ = std::fs::remove_file(&building);
    let store = Store::open_fresh(&building)?;
    plan.write(&store)?;
    drop(store);
    let _ = std::fs::remove_file(super::clean::marker_path(&building));
    std::fs::rename(&building, path).map_err(|e| io("move into place", &building, e))?;
    let mut problems = dump.problems;
    if scan.stopped_early {
        problems.push(format!(
            "the scan of the file's bytes stopped after {} s, {} of {} bytes in",
            options.scan_time.as_secs(),
            scan.scanned,
            scan.len
        ));
    }
    Ok(Repair::Rebuilt(Salvage {
        earlier: earlier && moved_to.is_some(),
        moved_to,
        sessions: plan.salvage(),
        problems,
        damaged_copies: scan.damaged,
        ignored_deleted: plan.ignored_deleted,
        scan_complete: !scan.stopped_early,
        took: started.elapsed(),
    }))
}

/// The error for a database the repair leaves alone.
fn refusal(path: &Path, health: &Health) -> StoreError {
    match health.state {
        check::HealthState::Locked | check::HealthState::Newer if !health.detail.is_empty() => {
            StoreError::CheckFailed {
                path: path.to_owned(),
                detail: health.detail.clone(),
            }
        }
        _ => StoreError::CheckFailed {
            path: path.to_owned(),
            detail: format!(
                "it could not be checked ({}); nothing was changed",
                if health.detail.is_empty() {
                    "no answer"
                } else {
                    &health.detail
                }
            ),
        },
    }
}

/// The most recent file a repair moved aside from `path`, if any.
fn latest_damaged(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let prefix = format!("{}.damaged-", path.file_name()?.to_str()?);
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .max_by_key(|entry| entry.file_name())
        .map(|entry| entry.path())
}
