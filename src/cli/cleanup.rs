//! `tern sessions cleanup`: keeps stored sessions within `[session.maintenance]` (age, count,
//! disk bytes). Prints what it would remove and the bytes that frees; removes only with
//! `--enforce` (or `mode = "enforce"` in the config).

use super::Outcome;
use super::render::print_out;
use super::setup::Loaded;
use crate::config::MaintenanceMode;
use crate::gateway::maintenance::{Inventory, carry_out};
use crate::store::{Reason, Removal, Store};
use crate::tools::output::human_bytes;
use crate::tui::picker::text::{fit, pad};
use std::collections::{HashMap, HashSet};

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
    let inventory = Inventory::take(store, &loaded.paths.data_dir)?;
    let titles: HashMap<&str, &str> = inventory
        .metas
        .iter()
        .map(|m| (m.id.as_str(), m.title.as_str()))
        .collect();
    let now = jiff::Timestamp::now().as_millisecond();
    let planned = inventory.plan(limits, now, &HashSet::new());

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
            inventory.metas.len(),
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
                "  session {} {} {:>9}  ({})\n",
                id.short(),
                // Measured in cells, as drawn, so the sizes line up under wide titles.
                pad(&fit(titles.get(id.as_str()).copied().unwrap_or(""), 40), 40),
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
        carry_out(store, &inventory, &planned)?;
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
