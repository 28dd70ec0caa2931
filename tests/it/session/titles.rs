//! Session titles: after the first turn completes, one side call names the session (on the
//! compaction model when one is set); its failure keeps the title the first input gave, and
//! it never holds up the turn's end or the next input. The timeout is in `watchdogs.rs`.

use super::*;
use pretty_assertions::assert_eq;

/// A world that names its sessions, with a notes model when `notes` is set.
fn titling_world(notes: Option<&'static str>) -> World {
    let mut world = World::anthropic();
    world.settings.sidecar_titles = true;
    world.notes_model = notes;
    world
}

/// Whether `request` is the title call (its instructions ask for a title).
fn asks_for_a_title(request: &crate::support::RecordedRequest) -> bool {
    request
        .raw_body
        .contains("Reply with a title of 3 to 7 words")
}

/// Collects events until a title change; returns them all, the title change last.
async fn until_titled(events: &mut Subscription) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    let wait = async {
        while let Some(event) = events.recv().await {
            let titled = matches!(event, SessionEvent::TitleChanged { .. });
            seen.push(event);
            if titled {
                return;
            }
        }
        panic!("the session stopped before a title came: {seen:?}");
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("titled in time");
    seen
}

fn titles(world: &World, id: &SessionId) -> Vec<String> {
    journal(world, id)
        .into_iter()
        .filter_map(|e| match e {
            JournalEvent::TitleChanged { title } => Some(title),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_first_turn_is_named_by_a_side_call_on_the_notes_model() {
    let world = titling_world(Some("notes-model"));
    world
        .mock
        .push(Reply::text("Fixed: the test waited on the real clock."));
    world.mock.push_for_model(
        "notes-model",
        Reply::text("\"Fix the flaky CI test.\"\nIt was about timing."),
    );
    world.mock.push(Reply::text("You're welcome."));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle
        .send(UserInput::local(
            "the CI test fails one time in ten, fix it",
        ))
        .await
        .unwrap();
    let seen = until_titled(&mut events).await;
    // The turn's end was out, and the session idle, before the title came.
    let tail: Vec<&SessionEvent> = seen.iter().rev().take(3).rev().collect();
    assert!(
        matches!(
            tail[..],
            [
                SessionEvent::TurnCompleted { .. },
                SessionEvent::PhaseChanged {
                    phase: tern::session::Phase::Ready
                },
                SessionEvent::TitleChanged { .. }
            ]
        ),
        "{seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&SessionEvent::TitleChanged {
            title: "Fix the flaky CI test".into()
        })
    );
    let meta = world.store.meta(handle.id()).unwrap().unwrap();
    assert_eq!(meta.title, "Fix the flaky CI test");

    // The title call is its own request, on the notes model, about the first exchange.
    let asked: Vec<_> = world
        .mock
        .model_requests()
        .into_iter()
        .filter(asks_for_a_title)
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].model(), Some("notes-model"));
    let text = asked[0].texts().join("\n");
    assert!(text.contains("the CI test fails one time in ten"), "{text}");
    assert!(text.contains("waited on the real clock"), "{text}");
    assert_eq!(
        asked[0].body["tools"],
        Value::Null,
        "no tools on a title call"
    );

    // Later turns ask no more.
    turn(&handle, "thanks").await;
    let later = world.mock.model_requests();
    assert_eq!(later.iter().filter(|r| asks_for_a_title(r)).count(), 1);
    assert_eq!(
        titles(&world, handle.id()),
        [
            "the CI test fails one time in ten, fix it",
            "Fix the flaky CI test"
        ]
    );
}

#[tokio::test]
async fn a_failing_title_call_on_the_conversation_model_keeps_the_derived_title() {
    let world = titling_world(None);
    // Without a notes model the conversation model is asked, so its queue holds the title
    // call's answer between the two turns'.
    world
        .mock
        .push_for_model("primary-model", Reply::text("Done."));
    world.mock.push_for_model(
        "primary-model",
        Reply::error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"no titles today"}}"#,
        ),
    );
    world
        .mock
        .push_for_model("primary-model", Reply::text("Still here."));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    turn(&handle, "rename the module").await;
    let requests = world
        .mock
        .wait_for_requests(2, Duration::from_secs(20))
        .await;
    assert!(asks_for_a_title(&requests[1]), "{:?}", requests[1].raw_body);
    assert_eq!(requests[1].status, 400);

    let answered = turn(&handle, "and now?").await;
    assert_eq!(completed(&answered).as_deref(), Some("Still here."));
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, SessionEvent::TitleChanged { .. })),
        "{seen:?}"
    );
    assert_eq!(titles(&world, handle.id()), ["rename the module"]);
    let meta = world.store.meta(handle.id()).unwrap().unwrap();
    assert_eq!(meta.title, "rename the module");
}

#[tokio::test]
async fn an_input_sent_meanwhile_goes_first_and_the_title_follows_its_turn() {
    let world = titling_world(Some("notes-model"));
    world.mock.push(Reply::text("one"));
    world.mock.push_for_model(
        "notes-model",
        Reply::text("Counting to two").delay_before(Duration::from_millis(100)),
    );
    // The second turn outlasts the title call, which comes back while that turn holds the
    // session's state.
    world
        .mock
        .push(Reply::text("two").delay_before(Duration::from_millis(600)));
    let handle = world.create();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle.send(UserInput::local("count")).await.unwrap();
    until_turns_end(&mut events, 1).await;
    handle.send(UserInput::local("go on")).await.unwrap();
    let seen = until_titled(&mut events).await;
    assert_eq!(completed(&seen).as_deref(), Some("two"));
    let kinds: Vec<&str> = journal(&world, handle.id())
        .iter()
        .rev()
        .take(2)
        .map(|e| match e {
            JournalEvent::TitleChanged { .. } => "title",
            JournalEvent::TurnCompleted { .. } => "completed",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["title", "completed"], "journaled after the turn");
    assert_eq!(
        handle.state().await.unwrap().title.as_deref(),
        Some("Counting to two")
    );
}
