//! `tern sessions cleanup`: keeps stored sessions within `[session.maintenance]` (age, count,
//! disk bytes). Prints what it would remove and the bytes that frees; removes only with
//! `--enforce` (or `mode = "enforce"` in the config).

use super::Outcome;
use super::render::{clip, print_out};
use super::setup::Loaded;
use crate::config::MaintenanceMode;
use crate::session::SessionDirs;
use crate::store::{Orphan, Reason, Removal, Store, StoredSession, plan};
use crate::tools::output::human_bytes;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Whether to remove or only report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupMode {
    DryRun,
    Enforce,
    /// As `[session.maintenance] mode` says (`warn`: report only).
    FromConfig,
}

/// Plans the cleanup, prints it, and carries it out when enforcing.
pub fn run(loaded: &Loaded, store: &Store, mode: CleanupMode) -> anyhow::Result<Outcome> {
    let limits = &loaded.config.session.maintenance;
    let enforce = match mode {
        CleanupMode::DryRun => false,
        CleanupMode::Enforce => true,
        CleanupMode::FromConfig => limits.mode == MaintenanceMode::Enforce,
    };
    let sessions_dir = loaded.paths.data_dir.join("sessions");
    let metas = store.list()?;
    let folders: HashMap<&str, PathBuf> = metas
        .iter()
        .map(|m| {
            let (dirs, _) = SessionDirs::locate(&loaded.paths.data_dir, m);
            (m.id.as_str(), dirs.session_dir)
        })
        .collect();
    let titles: HashMap<&str, &str> = metas
        .iter()
        .map(|m| (m.id.as_str(), m.title.as_str()))
        .collect();
    let stored: Vec<StoredSession> = metas
        .iter()
        .map(|m| StoredSession {
            id: m.id.clone(),
            updated_at_ms: m.updated_at_ms,
            bytes: m.transcript_bytes + folders.get(m.id.as_str()).map_or(0, |d| dir_size(d)),
            archived: m.archived_at_ms.is_some(),
        })
        .collect();
    let known: HashSet<&Path> = folders.values().map(PathBuf::as_path).collect();
    let orphans: Vec<Orphan> = std::fs::read_dir(&sessions_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| !known.contains(entry.path().as_path()))
        .map(|entry| Orphan {
            bytes: dir_size(&entry.path()),
            path: entry.path(),
        })
        .collect();
    let now = jiff::Timestamp::now().as_millisecond();
    let planned = plan(limits, now, &stored, &orphans, &HashSet::new());

    let mut out = String::new();
    if planned.over_budget {
        out.push_str(&format!(
            "Stored sessions take {}, over the budget of {} (max_disk_bytes).\n",
            human_bytes(planned.bytes_before),
            human_bytes(limits.max_disk_bytes.unwrap_or(0))
        ));
    }
    if planned.removals.is_empty() {
        out.push_str(&format!(
            "Nothing to clean up: {} sessions, {}, within every limit.\n",
            metas.len(),
            human_bytes(planned.bytes_before)
        ));
        print_out(&out)?;
        return Ok(Outcome::Success);
    }
    let verb = if enforce { "Removing" } else { "Would remove" };
    out.push_str(&format!("{verb}:\n"));
    for removal in &planned.removals {
        let line = match removal {
            Removal::Session { id, bytes, reason } => format!(
                "  session {} {:<40} {:>9}  ({})\n",
                id.short(),
                clip(titles.get(id.as_str()).copied().unwrap_or(""), 40),
                human_bytes(*bytes),
                why(*reason)
            ),
            Removal::Orphan { path, bytes } => format!(
                "  folder {} {:>9}  (belongs to no session)\n",
                path.display(),
                human_bytes(*bytes)
            ),
        };
        out.push_str(&line);
    }
    let freed = planned.bytes_freed();
    if enforce {
        for removal in &planned.removals {
            match removal {
                Removal::Session { id, .. } => {
                    store.delete_session(id)?;
                    if let Some(folder) = folders.get(id.as_str()) {
                        remove_dir(folder)?;
                    }
                }
                Removal::Orphan { path, .. } => remove_dir(path)?,
            }
        }
        out.push_str(&format!("Freed {}.\n", human_bytes(freed)));
    } else {
        out.push_str(&format!(
            "That would free {}. Nothing was removed: run `tern sessions cleanup --enforce` \
             (or set [session.maintenance] mode = \"enforce\").\n",
            human_bytes(freed)
        ));
    }
    print_out(&out)?;
    Ok(Outcome::Success)
}

fn why(reason: Reason) -> &'static str {
    match reason {
        Reason::Orphaned => "belongs to no session",
        Reason::Stale => "unused for longer than prune_after",
        Reason::TooMany => "beyond max_entries",
        Reason::OverBudget => "oldest while over max_disk_bytes",
    }
}

fn remove_dir(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => {
            anyhow::bail!(
                "could not remove {}: {err}; check its permissions",
                path.display()
            )
        }
    }
}

/// Bytes of the files under `path`, not following links; 0 when it does not exist.
fn dir_size(path: &Path) -> u64 {
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
