//! Snapshots: taken every `snapshot_every` events and after a compaction, and used when a
//! session is reopened so only the events after them are replayed.

use super::*;
use pretty_assertions::assert_eq;
use tern::session::snapshot;

#[tokio::test]
async fn a_snapshot_is_taken_every_twenty_events_and_recovery_matches_a_full_replay() {
    let world = World::anthropic();
    world.home.write_file("a.txt", "AAA\n");
    for i in 0..6 {
        world
            .mock
            .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
        world.mock.push(Reply::text(format!("answer {i}")));
    }
    let handle = world.create();
    for i in 0..6 {
        turn(&handle, &format!("question {i}")).await;
    }
    let live = handle.state().await.unwrap();
    handle.close().await;

    let found = world
        .store
        .latest_snapshot(&live.id)
        .unwrap()
        .expect("a snapshot after this many events");
    let events = journal(&world, &live.id).len() as u64;
    assert!(
        found.seq >= 20 && found.seq <= events,
        "{} of {events}",
        found.seq
    );
    assert!(
        events - found.seq < 20,
        "the latest is at most 20 events old"
    );

    let recovered = snapshot::recover(
        &world.store,
        &live.id,
        live.project_dir.clone(),
        std::path::Path::new("/no-spool"),
        &Default::default(),
    )
    .unwrap();
    assert!(recovered.repairs.is_empty());
    let records = world.store.load(&live.id).unwrap();
    let full = SessionState::replay(live.id.clone(), live.project_dir.clone(), &records);
    let mut expected = full.state;
    expected.snapshot_seq = found.seq;
    assert_eq!(recovered.state, expected);
    assert_eq!(recovered.state.messages, live.messages);
}

#[tokio::test]
async fn reopening_starts_from_the_snapshot_and_replays_only_what_follows() {
    let world = World::anthropic();
    world.mock.push(Reply::text("first"));
    world.mock.push(Reply::text("second"));
    let handle = world.create();
    turn(&handle, "one").await;
    let id = handle.id().clone();
    handle.close().await;

    // A snapshot that says something the journal does not: reopening must take it as the
    // state up to its position, and apply only the later events on top.
    let records = world.store.load(&id).unwrap();
    let mut state = SessionState::replay(id.clone(), "/elsewhere".into(), &records).state;
    state.title = Some("from the snapshot".into());
    let at = state.last_seq;
    world
        .store
        .save_snapshot(&id, at, &snapshot::encode(&state).unwrap())
        .unwrap();
    world
        .store
        .append(
            &id,
            &JournalEvent::TitleChanged {
                title: "after it".into(),
            },
        )
        .unwrap();
    let project = world.home.project().canonicalize().unwrap();
    let recovered = snapshot::recover(
        &world.store,
        &id,
        project.clone(),
        std::path::Path::new("/no-spool"),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(recovered.state.title.as_deref(), Some("after it"));
    assert_eq!(recovered.state.project_dir, project);
    assert_eq!(recovered.state.last_seq, at + 1);

    // An unreadable snapshot is passed over: the journal is replayed in full.
    world
        .store
        .save_snapshot(&id, at, b"not a snapshot")
        .unwrap();
    let replayed = snapshot::recover(
        &world.store,
        &id,
        project,
        std::path::Path::new("/no-spool"),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(replayed.state.title.as_deref(), Some("after it"));
    assert_eq!(replayed.state.messages.len(), state.messages.len());

    // And the reopened session goes on as usual.
    let handle = world.resume(&id);
    let events = turn(&handle, "two").await;
    assert_eq!(completed(&events).as_deref(), Some("second"));
}

#[tokio::test]
async fn a_compaction_takes_a_snapshot_at_once() {
    let mut world = World::anthropic();
    world.settings.keep_recent_messages = 2;
    world.settings.snapshot_every = 1_000;
    world.notes_model = Some("notes-model");
    world.mock.push(Reply::text("a"));
    world.mock.push(Reply::text("b"));
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES"));
    let handle = world.create();
    turn(&handle, "one").await;
    turn(&handle, "two").await;
    assert!(world.store.latest_snapshot(handle.id()).unwrap().is_none());
    assert!(handle.compact().await.unwrap());
    let state = handle.state().await.unwrap();
    let found = world
        .store
        .latest_snapshot(handle.id())
        .unwrap()
        .expect("a snapshot");
    assert!(found.seq <= state.last_seq);
    let recovered = snapshot::decode(&found.state).expect("readable");
    assert!(recovered.messages[0].text().ends_with("NOTES"));
}
