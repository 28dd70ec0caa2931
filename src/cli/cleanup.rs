//! `tern sessions cleanup`: keeps stored sessions within `[session.maintenance]` (age, count,
//! disk bytes). Prints what it would remove and the bytes that frees; removes only with
//! `--enforce` (or `mode = "enforce"` in the config).

use super::Outcome;
use super::door;
use super::render::print_out;
use super::setup::{self, Loaded};
use crate::gateway::maintenance::{Cleanup, clean_up};
use crate::store::{Reason, Removal};
use crate::tools::output::human_bytes;
use crate::tui::picker::text::{fit, pad};
use std::collections::HashSet;

/// Whether to remove or only report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupMode {
    DryRun,
    Enforce,
    /// As `[session.maintenance] mode` says (`warn`: report only).
    FromConfig,
}

impl CleanupMode {
    /// Whether to remove: `None` leaves it to the config of whoever cleans up.
    pub fn enforce(self) -> Option<bool> {
        match self {
            CleanupMode::DryRun => Some(false),
            CleanupMode::Enforce => Some(true),
            CleanupMode::FromConfig => None,
        }
    }
}

/// Cleans up through the tern that owns the store when one runs (it never removes a session
/// it runs), or on the store itself; prints what was (or would be) removed.
pub async fn run(loaded: &Loaded, mode: CleanupMode) -> anyhow::Result<Outcome> {
    let cleanup = match door::owner(&loaded.paths).await? {
        Some(owner) => owner.clean_up(mode.enforce()).await?,
        None => {
            let store = setup::open_store(&loaded.paths)?;
            let data_dir = loaded.paths.data_dir.clone();
            let limits = loaded.config.session.maintenance.clone();
            let enforce = mode.enforce();
            tokio::task::spawn_blocking(move || {
                clean_up(&store, &data_dir, &limits, enforce, &HashSet::new())
            })
            .await??
        }
    };
    print_out(&report(&cleanup))?;
    Ok(Outcome::Success)
}

/// What a cleanup removed, or would remove, and the bytes that frees.
fn report(cleanup: &Cleanup) -> String {
    let planned = &cleanup.plan;
    let mut out = String::new();
    if planned.over_budget {
        out.push_str(&format!(
            "Stored sessions take {}, over the budget of {} (max_disk_bytes).\n",
            human_bytes(planned.bytes_before),
            human_bytes(cleanup.budget.unwrap_or(0))
        ));
    }
    if planned.removals.is_empty() {
        out.push_str(&format!(
            "Nothing to clean up: {} sessions, {}, within every limit.\n",
            cleanup.sessions,
            human_bytes(planned.bytes_before)
        ));
        return out;
    }
    let verb = if cleanup.enforced {
        "Removing"
    } else {
        "Would remove"
    };
    out.push_str(&format!("{verb}:\n"));
    for removal in &planned.removals {
        let line = match removal {
            Removal::Session { id, bytes, reason } => format!(
                "  session {} {} {:>9}  ({})\n",
                id.short(),
                // Measured in cells, as drawn, so the sizes line up under wide titles.
                pad(
                    &fit(
                        cleanup.titles.get(id.as_str()).map_or("", String::as_str),
                        40
                    ),
                    40
                ),
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
    if cleanup.enforced {
        out.push_str(&format!("Freed {}.\n", human_bytes(freed)));
    } else {
        out.push_str(&format!(
            "That would free {}. Nothing was removed: run `tern sessions cleanup --enforce` \
             (or set [session.maintenance] mode = \"enforce\").\n",
            human_bytes(freed)
        ));
    }
    out
}

fn why(reason: Reason) -> &'static str {
    match reason {
        Reason::Orphaned => "belongs to no session",
        Reason::Stale => "unused for longer than prune_after",
        Reason::TooMany => "beyond max_entries",
        Reason::OverBudget => "oldest while over max_disk_bytes",
    }
}
