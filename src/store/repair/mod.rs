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
use std::os::unix::ffi::{OsStrExt, OsStringExt};
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
    /// Decide on damage with the deep check (every record decoded), not only redb's.
    pub deep: bool,
}

impl RepairOptions {
    pub fn new(worker: Worker) -> Self {
        Self {
            worker,
            limits: None,
            scan_time: Duration::from_secs(300),
            deep: false,
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
///
/// The damaged file is moved aside under a name no other file has, and a marker
/// (`tern.redb.repairing`) names it until the new database is in place: a repair cut short
/// is finished by the next one from that file, and meanwhile tern refuses to start a fresh
/// database where the old one was.
pub fn repair(path: &Path, options: &RepairOptions) -> Result<Repair, StoreError> {
    let started = Instant::now();
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    let limits = || options.limits.unwrap_or_else(|| Limits::for_file(len));
    let marker = super::db::beside(path, REPAIRING);
    let unfinished = unfinished_repair(path);
    if unfinished.is_none() {
        // A marker left by a repair whose new database did get into place.
        let _ = std::fs::remove_file(&marker);
    }
    if unfinished.is_none() && lost_with_folders(path).is_none() {
        let health = check(path, options.deep, &options.worker, limits());
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
    let earlier = unfinished.is_some();
    let moved_to = match unfinished {
        Some(moved) => Some(moved),
        None if path.exists() => {
            let moved = free_name(path);
            write_marker(&marker, &moved).map_err(|e| io("write", &marker, e))?;
            std::fs::rename(path, &moved).map_err(|e| io("move aside", path, e))?;
            Some(moved)
        }
        None => None,
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
    // The rebuilt file's own log holds nothing its close did not write; the damaged file's
    // log goes with that file, so it is never read into the rebuilt one.
    let _ = std::fs::remove_file(super::db::beside(&building, ".wal"));
    let old_log = super::db::beside(path, ".wal");
    if old_log.exists() {
        let _ = match &moved_to {
            Some(moved) => std::fs::rename(&old_log, super::db::beside(moved, ".wal")),
            None => std::fs::remove_file(&old_log),
        };
    }
    std::fs::rename(&building, path).map_err(|e| io("move into place", &building, e))?;
    let _ = std::fs::remove_file(&marker);
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
        earlier,
        moved_to,
        sessions: plan.salvage(),
        problems,
        damaged_copies: scan.damaged,
        ignored_deleted: plan.ignored_deleted,
        scan_complete: !scan.stopped_early,
        took: started.elapsed(),
    }))
}

/// The marker a repair leaves while the database is not in place, naming where it moved the
/// damaged file.
const REPAIRING: &str = ".repairing";

/// Where an unfinished repair moved the damaged database, when one left its marker and no
/// database is in place.
pub fn unfinished_repair(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return None;
    }
    let named = std::fs::read(super::db::beside(path, REPAIRING)).ok()?;
    let moved = PathBuf::from(std::ffi::OsString::from_vec(named));
    moved.exists().then_some(moved)
}

/// Writes the marker naming `moved`, durably, before the database is moved there.
fn write_marker(marker: &Path, moved: &Path) -> std::io::Result<()> {
    let mut file = std::fs::File::create(marker)?;
    std::io::Write::write_all(&mut file, moved.as_os_str().as_bytes())?;
    file.sync_all()
}

/// `tern.redb.damaged-<time>`, with a number added when a file of that name exists: a file
/// set aside is never overwritten.
fn free_name(path: &Path) -> PathBuf {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let first = super::db::beside(path, &format!(".damaged-{stamp}"));
    (1..)
        .map(|n| match n {
            1 => first.clone(),
            n => super::db::beside(path, &format!(".damaged-{stamp}-{n}")),
        })
        .find(|candidate| !candidate.exists())
        .unwrap_or(first)
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
