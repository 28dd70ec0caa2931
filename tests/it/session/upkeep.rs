//! Maintenance while tern runs: every write is checked against `[session.maintenance]` from
//! the store's running totals; a write that crosses the byte budget or the session count
//! wakes a pass that, in `enforce` mode, removes archives first and then the oldest sessions
//! down to the high-water mark, never a running one. In `warn` mode it only reports, once.

use super::gateway::deliver;
use super::*;
use pretty_assertions::assert_eq;
use std::collections::HashSet;
use tern::config::{MaintenanceMode, MaintenanceSettings};
use tern::gateway::maintenance::dir_size;
use tern::gateway::{LifecycleEvent, SessionManager};
use tern::store::Removal;
use tokio::sync::broadcast;

/// Bytes session `id` takes: its journal plus its folder.
fn stored_bytes(world: &World, id: &SessionId) -> u64 {
    let meta = world.store.meta(id).unwrap().unwrap();
    meta.transcript_bytes + dir_size(meta.session_dir.as_ref().unwrap())
}

/// The ids of every session in the index.
fn stored_ids(world: &World) -> HashSet<SessionId> {
    world
        .store
        .list()
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect()
}

/// Sessions a (large, oldest), b (large, archived) and c (small), none of them running.
async fn three_stored(world: &World) -> [SessionId; 3] {
    let manager = SessionManager::new(world.deps());
    let big = "x".repeat(100 * 1024);
    let a = deliver(&manager, world, "cli:a", &format!("first {big}")).await;
    let b = deliver(&manager, world, "cli:b", &format!("second {big}")).await;
    let c = deliver(&manager, world, "cli:c", "small").await;
    manager.close_all().await;
    world.store.archive_session(&b, 1).unwrap();
    [a, b, c]
}

/// Waits for `n` events called `name`, and returns every event seen on the way.
async fn until_events(
    events: &mut broadcast::Receiver<LifecycleEvent>,
    name: &str,
    n: usize,
) -> Vec<LifecycleEvent> {
    let mut seen = Vec::new();
    let wait = async {
        while seen
            .iter()
            .filter(|e: &&LifecycleEvent| e.name() == name)
            .count()
            < n
        {
            seen.push(events.recv().await.expect("the bus is open"));
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("waited for {n} {name}; saw {seen:?}"));
    seen
}

fn budget(world: &mut World, mode: MaintenanceMode, max: u64, high_water: u64) {
    world.settings.maintenance = MaintenanceSettings {
        mode,
        max_disk_bytes: Some(max),
        high_water_bytes: Some(high_water),
        ..MaintenanceSettings::default()
    };
}

#[tokio::test]
async fn a_write_over_the_budget_removes_archives_then_the_oldest_down_to_the_high_water_mark() {
    let mut world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let [a, b, c] = three_stored(&world).await;
    let total: u64 = [&a, &b, &c].iter().map(|id| stored_bytes(&world, id)).sum();
    // Just room for what is there; a new session's first write goes over. Down to c plus
    // room for the new one, which needs a and b gone: b first (archived), then a (oldest).
    let high_water = stored_bytes(&world, &c) + 64 * 1024;
    budget(&mut world, MaintenanceMode::Enforce, total + 1, high_water);
    let manager = SessionManager::new(world.deps());
    let plan = manager.maintain().await.expect("a pass");
    assert!(plan.removals.is_empty(), "within the budget: {plan:?}");
    let mut events = manager.lifecycle();

    let d = deliver(&manager, &world, "cli:d", "one more").await;
    let seen = until_events(&mut events, "session.deleted", 2).await;
    let deleted: Vec<&SessionId> = seen
        .iter()
        .filter_map(|e| match e {
            LifecycleEvent::Deleted { id } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [&b, &a]);
    assert!(
        seen.iter().any(|e| matches!(
            e,
            LifecycleEvent::DiskBudgetExceeded { mode, .. } if mode == "enforce"
        )),
        "{seen:?}"
    );
    let left = stored_ids(&world);
    assert_eq!(left, HashSet::from([c.clone(), d.clone()]));
    for gone in [&a, &b] {
        let folders = std::fs::read_dir(world.home.home().join("data/sessions")).unwrap();
        assert!(
            !folders
                .flatten()
                .any(|f| f.file_name().to_string_lossy().starts_with(gone.as_str())),
            "the folder of {gone} went too"
        );
    }
    let totals = world.store.totals();
    assert_eq!(totals.sessions, 2);
}

#[tokio::test]
async fn in_warn_mode_the_crossing_is_reported_once_and_nothing_is_removed() {
    let mut world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let [a, b, c] = three_stored(&world).await;
    let total: u64 = [&a, &b, &c].iter().map(|id| stored_bytes(&world, id)).sum();
    budget(&mut world, MaintenanceMode::Warn, total + 1, total / 2);
    let manager = SessionManager::new(world.deps());
    manager.maintain().await.expect("a pass");
    let mut events = manager.lifecycle();
    for n in 0..3 {
        deliver(&manager, &world, "cli:d", &format!("write {n}")).await;
    }
    let seen = until_events(&mut events, "disk_budget.exceeded", 1).await;
    assert!(
        seen.iter().any(
            |e| matches!(e, LifecycleEvent::DiskBudgetExceeded { mode, .. } if mode == "warn")
        ),
        "{seen:?}"
    );
    // Later writes while still over say nothing more (a pass they woke would have).
    deliver(&manager, &world, "cli:d", "write 3").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = std::iter::from_fn(|| events.try_recv().ok())
        .filter(|e| e.name() == "disk_budget.exceeded")
        .count();
    assert_eq!(again, 0, "reported once per crossing");
    // What enforcing would remove, and that nothing went.
    let plan = manager.maintain().await.expect("a pass");
    let planned: Vec<&SessionId> = plan
        .removals
        .iter()
        .filter_map(|r| match r {
            Removal::Session { id, .. } => Some(id),
            Removal::Orphan { .. } => None,
        })
        .collect();
    assert_eq!(planned, [&b, &a]);
    assert_eq!(world.store.list().unwrap().len(), 4);
}

#[tokio::test]
async fn a_new_session_beyond_max_entries_removes_the_oldest_but_never_a_running_one() {
    let mut world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let [a, b, c] = three_stored(&world).await;
    world.settings.maintenance = MaintenanceSettings {
        mode: MaintenanceMode::Enforce,
        max_entries: 3,
        ..MaintenanceSettings::default()
    };
    let manager = SessionManager::new(world.deps());
    manager.maintain().await.expect("a pass");
    // a runs again, so the oldest that may go is b.
    deliver(&manager, &world, "cli:a", "back to a").await;
    let mut events = manager.lifecycle();
    deliver(&manager, &world, "cli:d", "a fourth").await;
    let seen = until_events(&mut events, "session.deleted", 1).await;
    assert!(
        seen.contains(&LifecycleEvent::Deleted { id: b.clone() }),
        "{seen:?}"
    );
    let left = stored_ids(&world);
    assert!(
        left.contains(&a) && left.contains(&c) && !left.contains(&b),
        "{left:?}"
    );
}
