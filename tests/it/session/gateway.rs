//! The session manager: inputs routed by session key, a session per key created on demand
//! and found again after a restart, invalid keys refused, a stopped actor restarted from its
//! journal.

use super::*;
use pretty_assertions::assert_eq;
use tern::gateway::{GatewayError, SendUserMessage, SessionManager};

pub(super) fn message(world: &World, key: &str, text: &str) -> SendUserMessage {
    SendUserMessage {
        key: key.into(),
        input: UserInput::local(text),
        project_dir: world.home.project().canonicalize().unwrap(),
    }
}

/// The running session `key` talks to.
pub(super) async fn session_of(
    manager: &SessionManager,
    world: &World,
    key: &str,
) -> SessionHandle {
    let project = world.home.project().canonicalize().unwrap();
    let key = tern::domain::SessionKey::parse(key).unwrap();
    manager.handle(&key, &project).await.unwrap()
}

/// Sends through the manager and waits until that session is idle again.
pub(super) async fn deliver(
    manager: &SessionManager,
    world: &World,
    key: &str,
    text: &str,
) -> SessionId {
    let delivered = manager
        .send(message(world, key, text))
        .await
        .expect("delivered");
    session_of(manager, world, key).await.state().await.unwrap();
    delivered.session
}

#[tokio::test]
async fn each_key_talks_to_its_own_session_and_finds_it_again_after_a_restart() {
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let manager = SessionManager::new(world.deps());
    let thread = "slack:T1/C1/1700000000.1";
    // A subscriber for the key before its session exists sees its turns.
    let project = world.home.project().canonicalize().unwrap();
    let mut events = manager
        .subscribe(thread, project, OutputFilter::ALL)
        .await
        .expect("subscribed");
    let first = deliver(&manager, &world, thread, "hello from the thread").await;
    let answered = until_turns_end(&mut events, 1).await;
    assert_eq!(completed(&answered).as_deref(), Some("ok"));
    let again = deliver(&manager, &world, thread, "still the thread").await;
    let other = deliver(&manager, &world, "discord:42/7", "hello from discord").await;
    assert_eq!(first, again);
    assert_ne!(first, other);
    assert_eq!(manager.live_sessions().await, 2);
    manager.close_all().await;

    // A new manager (a restart) routes the key to the same session, history whole.
    let manager = SessionManager::new(world.deps());
    let resumed = deliver(&manager, &world, thread, "after the restart").await;
    assert_eq!(resumed, first);
    let state = session_of(&manager, &world, thread)
        .await
        .state()
        .await
        .unwrap();
    assert_eq!(
        conversation(&state),
        [
            "hello from the thread",
            "ok",
            "still the thread",
            "ok",
            "after the restart",
            "ok"
        ]
    );
    let meta = world.store.meta(&first).unwrap().unwrap();
    assert_eq!(meta.key.as_str(), thread);
}

#[tokio::test]
async fn an_invalid_key_is_an_error_and_creates_nothing() {
    let world = World::anthropic();
    let manager = SessionManager::new(world.deps());
    for key in ["", "slack:only-team", "irc:#rust", "webhook:../../etc"] {
        let err = manager
            .send(message(&world, key, "hi"))
            .await
            .expect_err(key);
        assert!(matches!(err, GatewayError::InvalidKey(_)), "{key}: {err}");
        assert!(err.to_string().starts_with("INVALID_SESSION_KEY"), "{err}");
    }
    assert!(world.store.list().unwrap().is_empty());
    assert_eq!(manager.live_sessions().await, 0);
}

#[tokio::test]
async fn a_stopped_actor_is_restarted_from_its_journal_and_the_others_keep_running() {
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let manager = SessionManager::new(world.deps());
    let a = "webhook:ci/build-1";
    let b = "webhook:ci/build-2";
    let first = deliver(&manager, &world, a, "first").await;
    deliver(&manager, &world, b, "other").await;
    // Session a's actor stops behind the manager's back.
    let handle = session_of(&manager, &world, a).await;
    handle.close().await;
    let again = deliver(&manager, &world, a, "second").await;
    assert_eq!(again, first, "the same session, restarted");
    let state = session_of(&manager, &world, a).await.state().await.unwrap();
    assert_eq!(conversation(&state), ["first", "ok", "second", "ok"]);
    // Session b was never touched.
    let other = session_of(&manager, &world, b).await;
    assert_eq!(conversation(&other.state().await.unwrap()), ["other", "ok"]);
}

#[tokio::test]
async fn a_reset_archives_the_keys_session_and_the_next_input_starts_afresh() {
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let manager = SessionManager::new(world.deps());
    let key = "mattermost:town-square/post1";
    let before = deliver(&manager, &world, key, "old topic").await;
    let project = world.home.project().canonicalize().unwrap();
    let fresh = manager.reset(key, project).await.expect("reset");
    assert_ne!(fresh, before);
    let after = deliver(&manager, &world, key, "new topic").await;
    assert_eq!(after, fresh);
    let old = world.store.meta(&before).unwrap().unwrap();
    assert!(old.archived_at_ms.is_some(), "the old session is archived");
    assert_eq!(old.input_count, 1, "with its transcript");
    let new = world.store.meta(&fresh).unwrap().unwrap();
    assert_eq!(new.archived_at_ms, None);
    let state = session_of(&manager, &world, key)
        .await
        .state()
        .await
        .unwrap();
    assert_eq!(conversation(&state), ["new topic", "ok"]);
}

/// A manager whose session for `key` is in its first model call (the mock holds the reply)
/// when it is drained; returns the drained sessions.
async fn drained_mid_turn(
    world: &World,
    key: &str,
    first: Reply,
) -> Vec<tern::gateway::DrainedSession> {
    world
        .mock
        .push(first.delay_before(Duration::from_millis(300)));
    let manager = SessionManager::new(world.deps());
    manager
        .send(message(world, key, "find the text files"))
        .await
        .expect("delivered");
    manager
        .drain(Duration::from_secs(30))
        .await
        .expect("drained")
}

#[tokio::test]
async fn a_drained_tool_loop_goes_on_by_itself_after_the_restart() {
    let world = World::anthropic();
    let key = "cli:drained-1";
    let drained = drained_mid_turn(
        &world,
        key,
        Reply::tool_call("glob", json!({"pattern": "*.txt"})),
    )
    .await;
    assert_eq!(drained.len(), 1);
    assert!(!drained[0].waiting);
    let journal = journal(&world, &drained[0].id);
    assert_eq!(
        journal.last().and_then(JournalEvent::turn_stop),
        Some(tern::domain::TurnStop::Drained)
    );
    assert!(world.home.home().join("data/drained.json").exists());

    world.mock.push(Reply::text("Found them."));
    let manager = SessionManager::new(world.deps());
    let warmed = manager.warm_up().await.expect("warmed up");
    assert_eq!(warmed.len(), 1);
    assert!(warmed[0].resumed);
    let handle = session_of(&manager, &world, key).await;
    // The resumed turn was asked for first, so the state comes once it has ended.
    let state = handle.state().await.unwrap();
    assert_eq!(conversation(&state).last().unwrap(), "Found them.");
    let resumed = world.mock.model_requests().pop().unwrap();
    let nudge = resumed.nudges().pop().unwrap();
    assert!(
        nudge.contains("[restart-notice]\ntern restarted"),
        "{nudge}"
    );
    assert!(!world.home.home().join("data/drained.json").exists());
}

#[tokio::test]
async fn a_drained_turn_that_already_said_something_is_not_resumed() {
    let world = World::anthropic();
    let key = "cli:drained-2";
    let first = Reply::tool_call("glob", json!({"pattern": "*.txt"})).with_text("Looking now.");
    drained_mid_turn(&world, key, first).await;
    let requests = world.mock.model_requests().len();
    let manager = SessionManager::new(world.deps());
    let warmed = manager.warm_up().await.expect("warmed up");
    assert_eq!(warmed.len(), 1);
    assert!(!warmed[0].resumed, "the person is told instead");
    assert_eq!(world.mock.model_requests().len(), requests, "no call made");
}

#[tokio::test]
async fn sessions_idle_at_the_drain_stay_cold() {
    let world = World::anthropic();
    world.mock.push(Reply::text("done"));
    let manager = SessionManager::new(world.deps());
    deliver(&manager, &world, "cli:idle-1", "quick question").await;
    let drained = manager.drain(Duration::from_secs(30)).await.unwrap();
    assert_eq!(drained.len(), 1);
    let manager = SessionManager::new(world.deps());
    assert!(manager.warm_up().await.unwrap().is_empty());
    assert_eq!(manager.live_sessions().await, 0);
}

#[tokio::test]
async fn a_drained_turn_with_input_waiting_behind_it_is_not_resumed() {
    let world = World::anthropic();
    let key = "slack:T1/C9/1700000000.3";
    world.mock.push(
        Reply::tool_call("glob", json!({"pattern": "*.txt"}))
            .delay_before(Duration::from_millis(300)),
    );
    let manager = SessionManager::new(world.deps());
    manager
        .send(message(&world, key, "find the text files"))
        .await
        .expect("delivered");
    // Someone else writes in the thread while the turn runs: it waits for its own turn.
    let mut other = message(&world, key, "and me?");
    other.input.sender.id = "U2".into();
    other.input.sender.name = "colleague".into();
    let waiting = {
        let manager = &manager;
        async move { manager.send(other).await }
    };
    let drain = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        manager.drain(Duration::from_secs(30)).await
    };
    let (waited, drained) = tokio::join!(waiting, drain);
    assert!(
        waited.is_err(),
        "the waiting input is refused, never acknowledged: {waited:?}"
    );
    let drained = drained.expect("drained");
    assert_eq!(drained.len(), 1);
    assert!(drained[0].waiting);

    let manager = SessionManager::new(world.deps());
    let warmed = manager.warm_up().await.expect("warmed up");
    assert_eq!(warmed.len(), 1);
    assert!(!warmed[0].resumed, "the person is told instead");
    assert_eq!(world.mock.model_requests().len(), 1, "no call made");
}

#[tokio::test]
async fn a_past_session_picked_again_becomes_the_one_its_key_talks_to() {
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let manager = SessionManager::new(world.deps());
    let key = "cli:picked";
    let old = deliver(&manager, &world, key, "the old topic").await;
    let project = world.home.project().canonicalize().unwrap();
    let new = manager.reset(key, project).await.expect("reset");
    deliver(&manager, &world, key, "a new topic").await;
    // The archived one is picked: the key goes back to it, and it is no longer an archive.
    let meta = world.store.meta(&old).unwrap().unwrap();
    assert!(meta.archived_at_ms.is_some());
    let handle = manager.attach(&meta).await.expect("attached");
    assert_eq!(handle.id(), &old);
    assert_eq!(deliver(&manager, &world, key, "back to it").await, old);
    let meta = world.store.meta(&old).unwrap().unwrap();
    assert_eq!(meta.archived_at_ms, None);
    let state = session_of(&manager, &world, key)
        .await
        .state()
        .await
        .unwrap();
    assert_eq!(
        conversation(&state),
        ["the old topic", "ok", "back to it", "ok"]
    );
    assert_ne!(old, new);
}

#[tokio::test]
async fn a_reset_waiting_for_one_key_s_turn_holds_up_no_other_key() {
    let world = World::anthropic();
    let manager = Arc::new(SessionManager::new(world.deps()));
    let slow = "slack:T1/C1/1700000000.1";
    // The slow key's turn waits three seconds for its reply; the reset waits for the turn.
    world
        .mock
        .push(Reply::text("slow answer").delay_after_headers(Duration::from_secs(3)));
    manager
        .send(message(&world, slow, "take your time"))
        .await
        .expect("delivered");
    world
        .mock
        .wait_for_requests(1, Duration::from_secs(20))
        .await;
    let project = world.home.project().canonicalize().unwrap();
    let resetting = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.reset(slow, project).await })
    };
    // Let the reset start closing the slow key's session.
    tokio::time::sleep(Duration::from_millis(100)).await;
    world.mock.repeat(Reply::text("ok"));
    let other = manager
        .send(message(&world, "discord:42/7", "meanwhile"))
        .await
        .expect("delivered while the other key resets");
    assert!(
        !resetting.is_finished(),
        "the other key's input was taken before the slow turn ended"
    );
    let fresh = resetting.await.unwrap().expect("reset");
    assert_ne!(fresh, other.session);
    let old = world
        .store
        .session_for_key(&tern::domain::SessionKey::parse(slow).unwrap());
    assert_eq!(old.unwrap().map(|m| m.id), Some(fresh));
}
