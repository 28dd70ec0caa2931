//! Automatic resets through the session manager, on an injected clock: the first message a
//! person sends after the daily boundary or after `idle_minutes` gives the key a new session
//! and archives the old one; automation neither triggers a reset nor keeps a session fresh.
//! The lifecycle events that go with it.

use super::gateway::{deliver, message, session_of};
use super::*;
use pretty_assertions::assert_eq;
use std::sync::atomic::{AtomicI64, Ordering};
use tern::config::ResetSettings;
use tern::domain::InputKind;
use tern::gateway::{LifecycleEvent, ResetReason, SessionManager};
use tokio::sync::broadcast;

/// A clock the test moves by hand, starting at the real time (the store stamps events with
/// the real time, so the test clock only ever runs ahead of it).
#[derive(Clone)]
struct Hands(Arc<AtomicI64>);

impl Hands {
    fn now() -> Self {
        Self(Arc::new(AtomicI64::new(
            jiff::Timestamp::now().as_millisecond(),
        )))
    }

    fn set(&self, at: jiff::Timestamp) {
        self.0.store(at.as_millisecond(), Ordering::SeqCst);
    }

    fn manager(&self, world: &World) -> SessionManager {
        let ms = self.0.clone();
        let clock = Arc::new(move || {
            jiff::Timestamp::from_millisecond(ms.load(Ordering::SeqCst)).expect("a valid time")
        });
        SessionManager::with_clock(world.deps(), clock, jiff::tz::TimeZone::UTC)
    }
}

fn world_with(reset: ResetSettings) -> World {
    let mut world = World::anthropic();
    world.settings.reset = reset;
    world.mock.repeat(Reply::text("ok"));
    world
}

fn reminder(world: &World, key: &str, text: &str) -> tern::gateway::SendUserMessage {
    let mut message = message(world, key, text);
    message.input.kind = InputKind::Reminder;
    message
}

/// Delivers `message` and waits until the session it went to is idle again.
async fn settled(
    manager: &SessionManager,
    world: &World,
    message: tern::gateway::SendUserMessage,
) -> tern::gateway::Delivered {
    let key = message.key.clone();
    let delivered = manager.send(message).await.expect("delivered");
    session_of(manager, world, &key)
        .await
        .state()
        .await
        .unwrap();
    delivered
}

/// The names of the events received so far.
fn names(events: &mut broadcast::Receiver<LifecycleEvent>) -> Vec<&'static str> {
    std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| e.name())
        .collect()
}

#[tokio::test]
async fn the_first_message_after_the_daily_boundary_starts_a_new_session() {
    let world = world_with(ResetSettings {
        daily: true,
        ..ResetSettings::default()
    });
    let hands = Hands::now();
    let manager = hands.manager(&world);
    let mut events = manager.lifecycle();
    let key = "slack:T1/C1/1700000000.2";
    let first = deliver(&manager, &world, key, "before the boundary").await;

    // The next 04:00 UTC, and a minute past it.
    let now = jiff::Timestamp::now();
    let today = jiff::tz::TimeZone::UTC.to_datetime(now).date();
    let mut boundary = jiff::tz::TimeZone::UTC
        .to_timestamp(today.at(4, 0, 0, 0))
        .unwrap();
    if boundary <= now {
        boundary += jiff::SignedDuration::from_hours(24);
    }
    hands.set(boundary - jiff::SignedDuration::from_mins(1));
    assert_eq!(deliver(&manager, &world, key, "just before").await, first);
    hands.set(boundary + jiff::SignedDuration::from_mins(1));

    // A reminder after the boundary goes into the session it was set in.
    let reminded = settled(
        &manager,
        &world,
        reminder(&world, key, "stand-up in 5 minutes"),
    )
    .await;
    assert_eq!(
        (reminded.session.clone(), reminded.reset),
        (first.clone(), None)
    );

    let delivered = manager
        .send(message(&world, key, "good morning"))
        .await
        .expect("delivered");
    assert_eq!(delivered.reset, Some((first.clone(), ResetReason::Daily)));
    assert_ne!(delivered.session, first);
    let state = session_of(&manager, &world, key)
        .await
        .state()
        .await
        .unwrap();
    assert_eq!(conversation(&state), ["good morning", "ok"]);
    let old = world.store.meta(&first).unwrap().unwrap();
    assert!(old.archived_at_ms.is_some());
    assert_eq!(old.input_count, 3, "archived with its whole transcript");

    let seen = names(&mut events);
    let tail: Vec<&str> = seen
        .iter()
        .copied()
        .skip_while(|n| *n != "session.archived")
        .filter(|n| *n != "session.updated")
        .collect();
    assert_eq!(
        tail,
        ["session.archived", "session.created", "session.reset"]
    );
    assert_eq!(seen[0], "session.created");
    assert!(seen.contains(&"session.updated"), "turn ends: {seen:?}");
}

#[tokio::test]
async fn a_quiet_key_starts_afresh_after_idle_minutes_of_no_person() {
    let world = world_with(ResetSettings {
        idle: Some(Duration::from_secs(90 * 60)),
        ..ResetSettings::default()
    });
    let hands = Hands::now();
    let manager = hands.manager(&world);
    let key = "discord:100/200";
    let first = deliver(&manager, &world, key, "hello").await;
    let start = jiff::Timestamp::now();

    // 89 minutes on: still fresh. A job's result lands after 91 minutes without keeping it
    // fresh, and the person writing after that gets a new session.
    hands.set(start + jiff::SignedDuration::from_mins(89));
    assert_eq!(deliver(&manager, &world, key, "still here").await, first);
    let fresh_again = jiff::Timestamp::now();
    hands.set(fresh_again + jiff::SignedDuration::from_mins(91));
    let mut job = reminder(&world, key, "build finished");
    job.input.kind = InputKind::JobResult;
    let reported = settled(&manager, &world, job).await;
    assert_eq!((reported.session, reported.reset), (first.clone(), None));

    let delivered = manager
        .send(message(&world, key, "what happened?"))
        .await
        .expect("delivered");
    assert_eq!(delivered.reset, Some((first.clone(), ResetReason::Idle)));
    assert_ne!(delivered.session, first);
}

#[tokio::test]
async fn without_reset_settings_a_key_keeps_its_session() {
    let world = world_with(ResetSettings::default());
    let hands = Hands::now();
    let manager = hands.manager(&world);
    let key = "cli:keeps";
    let first = deliver(&manager, &world, key, "one").await;
    hands.set(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * 40));
    assert_eq!(
        deliver(&manager, &world, key, "forty days later").await,
        first
    );
}
