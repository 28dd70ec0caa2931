//! Keeping stored sessions within their limits: age (`prune_after`), count (`max_entries`)
//! and disk bytes (`max_disk_bytes`, brought down to `high_water_bytes`). Planning is a pure
//! function of the index and what is on disk, so `warn` mode can report exactly what
//! `enforce` would remove.
//!
//! Order of removal: files on disk that belong to no session (orphans) first, then sessions
//! past `prune_after`, then the oldest beyond `max_entries`, then, while the total is over the
//! byte budget, the oldest archives and after them the oldest sessions until it is at or under
//! the high-water mark. The sessions named as in use are never removed.

use super::db::{Store, StoreChange, unknown};
use super::error::StoreError;
use super::schema::{DELETED, JOURNAL, SESSIONS, SNAPSHOTS};
use super::totals::Delta;
use crate::config::MaintenanceSettings;
use crate::domain::SessionId;
use redb::TableError;
use std::collections::HashSet;
use std::path::PathBuf;

/// A stored session as maintenance sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub id: SessionId,
    pub updated_at_ms: i64,
    /// Its journal and its folder on disk, in bytes.
    pub bytes: u64,
    /// Left behind by a reset: the first to go when room is needed.
    pub archived: bool,
}

/// A folder under `sessions/` that no session in the index owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub path: PathBuf,
    pub bytes: u64,
}

/// Why something is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Files that belong to no session.
    Orphaned,
    /// Not used for longer than `prune_after`.
    Stale,
    /// Beyond the newest `max_entries`.
    TooMany,
    /// The oldest, while the total is over the byte budget.
    OverBudget,
}

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "removal", rename_all = "snake_case")]
pub enum Removal {
    Session {
        id: SessionId,
        bytes: u64,
        reason: Reason,
    },
    Orphan {
        path: PathBuf,
        bytes: u64,
    },
}

impl Removal {
    pub fn bytes(&self) -> u64 {
        match self {
            Self::Session { bytes, .. } | Self::Orphan { bytes, .. } => *bytes,
        }
    }
}

/// What maintenance would remove, in order, and where that leaves the total.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub removals: Vec<Removal>,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Whether the byte budget is exceeded before the plan runs.
    pub over_budget: bool,
}

impl Plan {
    pub fn bytes_freed(&self) -> u64 {
        self.bytes_before - self.bytes_after
    }
}

impl Store {
    /// Removes a session from the database: its index entry, journal and snapshot, in one
    /// durable transaction. Its folder on disk is the caller's to remove.
    pub fn delete_session(&self, id: &SessionId) -> Result<(), StoreError> {
        self.appends.snapshots.forget(id);
        let delta = self.write(|txn, _| {
            let mut sessions = txn.open_table(SESSIONS).map_err(|e| self.err(e))?;
            let Some(removed) = sessions.remove(id.as_str()).map_err(|e| self.err(e))? else {
                return Err(unknown(id.as_str()));
            };
            let meta = super::codec::decode_meta(id.as_str(), removed.value()).ok();
            drop(removed);
            let active = meta.as_ref().map(|meta| meta.updated_at_ms);
            super::activity::touch(txn, id.as_str(), active, None).map_err(|e| self.err(e))?;
            super::search::sync(txn, id.as_str(), None, None).map_err(|e| self.err(e))?;
            let mut journal = txn.open_table(JOURNAL).map_err(|e| self.err(e))?;
            journal
                .retain_in((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| false)
                .map_err(|e| self.err(e))?;
            let tombstone = super::db::encode(super::codec::encode_tombstone(
                id.as_str(),
                jiff::Timestamp::now().as_millisecond(),
            ))?;
            txn.open_table(DELETED)
                .map_err(|e| self.err(e))?
                .insert(id.as_str(), tombstone.as_slice())
                .map_err(|e| self.err(e))?;
            match txn.open_table(SNAPSHOTS) {
                Ok(mut snapshots) => {
                    snapshots.remove(id.as_str()).map_err(|e| self.err(e))?;
                }
                Err(TableError::TableDoesNotExist(_)) => {}
                Err(err) => return Err(self.err(err)),
            }
            let delta = Delta {
                sessions: -1,
                bytes: -(meta.map_or(0, |meta| meta.transcript_bytes) as i64),
            };
            super::totals::add(txn, delta).map_err(|e| self.err(e))?;
            Ok(delta)
        })?;
        super::deleted::record(self.path(), id.as_str());
        self.committed(StoreChange::Deleted(id), delta);
        Ok(())
    }
}

/// Plans what to remove from `sessions` and `orphans` at `now_ms` under `limits`, never
/// touching a session in `in_use`.
pub fn plan(
    limits: &MaintenanceSettings,
    now_ms: i64,
    sessions: &[StoredSession],
    orphans: &[Orphan],
    in_use: &HashSet<SessionId>,
) -> Plan {
    let bytes_before: u64 = sessions.iter().map(|s| s.bytes).sum::<u64>()
        + orphans.iter().map(|o| o.bytes).sum::<u64>();
    let mut total = bytes_before;
    let mut removals: Vec<Removal> = orphans
        .iter()
        .map(|o| Removal::Orphan {
            path: o.path.clone(),
            bytes: o.bytes,
        })
        .collect();
    total -= orphans.iter().map(|o| o.bytes).sum::<u64>();

    // Oldest first; the in-use ones stay whatever their age.
    let mut candidates: Vec<&StoredSession> = sessions
        .iter()
        .filter(|s| !in_use.contains(&s.id))
        .collect();
    candidates.sort_by_key(|s| (s.updated_at_ms, s.id.clone()));
    let mut removed: HashSet<&SessionId> = HashSet::new();
    let remove =
        |session: &StoredSession, reason: Reason, removals: &mut Vec<Removal>, total: &mut u64| {
            removals.push(Removal::Session {
                id: session.id.clone(),
                bytes: session.bytes,
                reason,
            });
            *total -= session.bytes;
        };

    let prune_ms = i64::try_from(limits.prune_after.as_millis()).unwrap_or(i64::MAX);
    let cutoff = now_ms.saturating_sub(prune_ms);
    for session in candidates.iter().filter(|s| s.updated_at_ms < cutoff) {
        remove(session, Reason::Stale, &mut removals, &mut total);
        removed.insert(&session.id);
    }

    let max_entries = usize::try_from(limits.max_entries).unwrap_or(usize::MAX);
    let mut kept = sessions.len() - removed.len();
    let remaining: Vec<&StoredSession> = candidates
        .iter()
        .copied()
        .filter(|s| !removed.contains(&s.id))
        .collect();
    for session in remaining {
        if kept <= max_entries {
            break;
        }
        remove(session, Reason::TooMany, &mut removals, &mut total);
        removed.insert(&session.id);
        kept -= 1;
    }

    let over_budget = limits.max_disk_bytes.is_some_and(|max| bytes_before > max);
    // Once over the budget, removal goes on down to the high-water mark, so the next few
    // writes do not cross it again at once.
    if let Some(max) = limits.max_disk_bytes
        && over_budget
    {
        let high_water = limits.high_water_bytes.unwrap_or(max / 10 * 8).min(max);
        let mut by_priority: Vec<&StoredSession> = candidates
            .iter()
            .copied()
            .filter(|s| !removed.contains(&s.id))
            .collect();
        // Archives first, each group oldest first (the sort is stable).
        by_priority.sort_by_key(|s| !s.archived);
        for session in by_priority {
            if total <= high_water {
                break;
            }
            remove(session, Reason::OverBudget, &mut removals, &mut total);
        }
    }
    Plan {
        removals,
        bytes_before,
        bytes_after: total,
        over_budget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const DAY_MS: i64 = 24 * 3600 * 1000;

    fn session(id: &str, days_ago: i64, bytes: u64) -> StoredSession {
        StoredSession {
            id: SessionId::from_string(id),
            updated_at_ms: 100 * DAY_MS - days_ago * DAY_MS,
            bytes,
            archived: false,
        }
    }

    fn ids(plan: &Plan) -> Vec<String> {
        plan.removals
            .iter()
            .map(|r| match r {
                Removal::Session { id, reason, .. } => format!("{id}:{reason:?}"),
                Removal::Orphan { path, .. } => format!("{}:orphan", path.display()),
            })
            .collect()
    }

    fn limits(
        max_entries: u64,
        max_disk: Option<u64>,
        high_water: Option<u64>,
    ) -> MaintenanceSettings {
        MaintenanceSettings {
            max_entries,
            max_disk_bytes: max_disk,
            high_water_bytes: high_water,
            ..MaintenanceSettings::default()
        }
    }

    #[test]
    fn stale_sessions_go_and_recent_ones_stay() {
        let sessions = [session("old", 31, 10), session("new", 29, 10)];
        let plan = plan(
            &limits(500, None, None),
            100 * DAY_MS,
            &sessions,
            &[],
            &HashSet::new(),
        );
        assert_eq!(ids(&plan), ["old:Stale"]);
        assert_eq!(plan.bytes_freed(), 10);
    }

    #[test]
    fn the_oldest_beyond_max_entries_go() {
        let sessions: Vec<_> = (0..5).map(|i| session(&format!("s{i}"), i, 1)).collect();
        let plan = plan(
            &limits(3, None, None),
            100 * DAY_MS,
            &sessions,
            &[],
            &HashSet::new(),
        );
        assert_eq!(ids(&plan), ["s4:TooMany", "s3:TooMany"]);
    }

    #[test]
    fn over_budget_orphans_go_first_then_the_oldest_down_to_the_high_water_mark() {
        let sessions = [
            session("a", 5, 400),
            session("b", 4, 300),
            session("c", 3, 200),
            session("d", 1, 100),
        ];
        let orphans = [Orphan {
            path: "sessions/ghost".into(),
            bytes: 150,
        }];
        // 1150 bytes against a 1000-byte budget: down to 800.
        let plan = plan(
            &limits(500, Some(1000), None),
            100 * DAY_MS,
            &sessions,
            &orphans,
            &HashSet::new(),
        );
        assert!(plan.over_budget);
        assert_eq!(ids(&plan), ["sessions/ghost:orphan", "a:OverBudget"]);
        assert_eq!(plan.bytes_after, 600);
        // A set high-water mark is honoured.
        let plan = plan_with_high_water(&sessions, &orphans, 500);
        assert_eq!(
            ids(&plan),
            ["sessions/ghost:orphan", "a:OverBudget", "b:OverBudget"]
        );
        assert_eq!(plan.bytes_after, 300);
    }

    fn plan_with_high_water(sessions: &[StoredSession], orphans: &[Orphan], high: u64) -> Plan {
        plan(
            &limits(500, Some(1000), Some(high)),
            100 * DAY_MS,
            sessions,
            orphans,
            &HashSet::new(),
        )
    }

    #[test]
    fn over_budget_archives_go_before_older_live_sessions() {
        let mut archived = session("archived", 2, 300);
        archived.archived = true;
        let sessions = [session("oldest", 9, 300), archived, session("new", 1, 300)];
        let plan = plan(
            &limits(500, Some(800), Some(600)),
            100 * DAY_MS,
            &sessions,
            &[],
            &HashSet::new(),
        );
        assert_eq!(ids(&plan), ["archived:OverBudget"]);
    }

    #[test]
    fn sessions_in_use_are_never_removed() {
        let sessions = [session("old", 90, 10_000), session("other", 60, 10)];
        let in_use: HashSet<_> = [SessionId::from_string("old")].into();
        let plan = plan(
            &limits(1, Some(100), None),
            100 * DAY_MS,
            &sessions,
            &[],
            &in_use,
        );
        assert_eq!(ids(&plan), ["other:Stale"]);
        assert_eq!(
            plan.bytes_after, 10_000,
            "still over: only the in-use session is left"
        );
    }

    #[test]
    fn within_every_limit_nothing_goes() {
        let sessions = [session("a", 1, 10)];
        let mut settings = limits(500, Some(1000), None);
        settings.prune_after = Duration::from_secs(30 * 24 * 3600);
        let plan = plan(&settings, 100 * DAY_MS, &sessions, &[], &HashSet::new());
        assert!(plan.removals.is_empty() && !plan.over_budget);
        assert_eq!(plan.bytes_freed(), 0);
    }
}
