//! The session service: subscriptions from a journal position (the seam between the replay
//! and the live events, a feed that falls behind), approvals named by session and call, `!`
//! lines and the project's files, all through the one handle a front end holds.

use super::*;
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;
use tern::domain::Answer;
use tern::gateway::{Feed, FeedItem, SessionManager, SessionService};
use tern::session::Stamped;
use tern::store::JournalRecord;

fn service(world: &World) -> SessionService {
    SessionService::local(Arc::new(SessionManager::new(world.deps())))
}

/// What a feed brought until the turn ended or the feed stopped.
#[derive(Default)]
struct Fed {
    replayed: Vec<JournalRecord>,
    live_from: Option<u64>,
    events: Vec<Stamped>,
    end: Option<FeedItem>,
}

/// Where reading a feed stops.
#[derive(PartialEq)]
enum Until {
    TurnEnd,
    /// The replay is over.
    Live,
    /// The feed ended or was dropped.
    End,
}

async fn read_feed(feed: &mut Feed, until: Until) -> Fed {
    let mut fed = Fed::default();
    let read = async {
        while let Some(item) = feed.next().await {
            match item {
                FeedItem::Replay { mut records } => fed.replayed.append(&mut records),
                FeedItem::Live { at } => {
                    fed.live_from = Some(at);
                    if until == Until::Live {
                        return;
                    }
                }
                FeedItem::Event(stamped) => {
                    let ended = matches!(
                        stamped.event,
                        SessionEvent::TurnCompleted { .. } | SessionEvent::TurnFailed { .. }
                    );
                    fed.events.push(stamped);
                    if ended && until == Until::TurnEnd {
                        return;
                    }
                }
                end => {
                    fed.end = Some(end);
                    return;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .expect("the feed went on in time");
    fed
}

fn words(n: usize) -> String {
    (0..n).map(|i| format!("w{i} ")).collect()
}

#[tokio::test]
async fn a_feed_from_the_start_during_a_turn_holds_every_record_once() {
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo seam" }),
    ));
    world
        .mock
        .push(Reply::text(words(200)).delay_between_events(Duration::from_millis(2)));
    let service = service(&world);
    let project = world.home.project().canonicalize().unwrap();
    let delivered = service
        .send("cli:seam-1", &project, UserInput::local("run it"))
        .await
        .expect("delivered");
    // The reply is streaming: what came before is in the journal, the rest still to come.
    world
        .mock
        .wait_for_requests(2, Duration::from_secs(10))
        .await;
    let mut feed = service
        .subscribe(&delivered.session, Some(0), OutputFilter::ALL, 100_000)
        .await
        .expect("subscribed");
    let fed = read_feed(&mut feed, Until::TurnEnd).await;

    let journal = world.store.load(&delivered.session).unwrap();
    let live_from = fed.live_from.expect("the replay ended");
    let replayed: Vec<u64> = fed.replayed.iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (1..=live_from).collect();
    assert_eq!(
        replayed, expected,
        "the journal up to the seam, each record once"
    );
    assert!(
        fed.replayed
            .iter()
            .any(|r| matches!(r.event, JournalEvent::ToolResults { .. })),
        "the tool round came from the journal"
    );
    for stamped in &fed.events {
        assert!(stamped.at >= live_from, "no event from before the seam");
        if stamped.event.is_journaled() {
            assert!(
                stamped.at > live_from,
                "nothing journaled twice: {stamped:?}"
            );
        }
    }
    let streamed: String = fed
        .events
        .iter()
        .filter_map(|s| match &s.event {
            SessionEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let SessionEvent::TurnCompleted { text, .. } = &fed.events.last().unwrap().event else {
        panic!("the turn completed");
    };
    assert!(
        text.ends_with(&streamed),
        "the live deltas are the reply's end, with no gap"
    );
    assert!(!streamed.is_empty(), "some of the reply came live");
    let last = journal.last().unwrap().seq;
    assert_eq!(
        fed.events.last().unwrap().at,
        last,
        "the turn's end is the journal's"
    );
}

#[tokio::test]
async fn a_feed_that_falls_behind_is_dropped_and_resubscribing_misses_nothing() {
    let world = World::anthropic();
    world.mock.push(Reply::tool_calls([
        ("shell_execute", json!({ "command": "echo one" })),
        ("shell_execute", json!({ "command": "echo two" })),
    ]));
    world.mock.push(Reply::text(words(600)));
    let service = service(&world);
    let project = world.home.project().canonicalize().unwrap();
    let id = service
        .open_key("cli:slow-1", &project)
        .await
        .expect("opened");
    // A reader that reads nothing while the turn runs, with room for two items.
    let mut slow = service
        .subscribe(&id, Some(0), OutputFilter::ALL, 2)
        .await
        .expect("subscribed");
    let mut watcher = service
        .subscribe(&id, None, OutputFilter::ALL, 100_000)
        .await
        .expect("subscribed");
    service
        .send("cli:slow-1", &project, UserInput::local("go"))
        .await
        .expect("delivered");
    let seen = read_feed(&mut watcher, Until::TurnEnd).await;
    assert!(seen.end.is_none(), "a quick reader is never dropped");

    let first = read_feed(&mut slow, Until::End).await;
    let Some(FeedItem::Dropped(dropped)) = first.end else {
        panic!("the slow reader was dropped, not {:?}", first.end);
    };
    assert!(dropped.reason.contains("fell behind"), "{}", dropped.reason);
    let mut again = service
        .subscribe(&id, Some(dropped.last_at), OutputFilter::ALL, 100_000)
        .await
        .expect("subscribed again");
    let second = read_feed(&mut again, Until::Live).await;
    assert!(second.end.is_none(), "the new feed follows on");

    // Every record is there once: journaled events up to the drop, the journal after it.
    let journal: Vec<u64> = world
        .store
        .load(&id)
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    let mut covered = BTreeSet::new();
    for stamped in first.events.iter().filter(|s| s.event.is_journaled()) {
        assert!(
            stamped.at <= dropped.last_at,
            "sent after the position it names: {stamped:?} {dropped:?}"
        );
        covered.insert(stamped.at);
    }
    for record in &second.replayed {
        assert!(record.seq > dropped.last_at, "nothing replayed twice");
        assert!(covered.insert(record.seq), "record {} twice", record.seq);
    }
    let replayed_to = second.replayed.last().map_or(dropped.last_at, |r| r.seq);
    assert_eq!(
        replayed_to,
        *journal.last().unwrap(),
        "the replay reaches the end"
    );
    let seen_events: BTreeSet<u64> = seen
        .events
        .iter()
        .filter(|s| s.event.is_journaled())
        .map(|s| s.at)
        .collect();
    assert!(
        seen_events.is_subset(&covered.iter().copied().chain(1..=dropped.last_at).collect()),
        "whatever the quick reader saw, the slow one has"
    );
}

#[tokio::test]
async fn an_approval_names_its_session_and_the_first_answer_wins() {
    let world = super::approvals::asking_world();
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo approved" }),
    ));
    world.mock.push(Reply::text("It ran."));
    let service = service(&world);
    let project = world.home.project().canonicalize().unwrap();
    let id = service.open_key("cli:ask-1", &project).await.unwrap();
    let mut one = service
        .subscribe(&id, None, OutputFilter::ALL, 4096)
        .await
        .unwrap();
    let mut two = service
        .subscribe(&id, None, OutputFilter::ALL, 4096)
        .await
        .unwrap();
    service
        .send("cli:ask-1", &project, UserInput::local("run it"))
        .await
        .unwrap();
    let mut call_ids = Vec::new();
    for feed in [&mut one, &mut two] {
        loop {
            let Some(FeedItem::Event(stamped)) = feed.next().await else {
                continue;
            };
            if let SessionEvent::ApprovalRequested { call_id, .. } = stamped.event {
                call_ids.push(call_id);
                break;
            }
        }
    }
    assert_eq!(call_ids[0], call_ids[1], "both readers are asked the same");
    let other = SessionId::generate();
    assert!(
        service
            .answer(&other, &call_ids[0], Answer::Once)
            .await
            .is_err(),
        "an answer names the session it is for"
    );
    service
        .answer(&id, &call_ids[1], Answer::Once)
        .await
        .expect("the first answer is taken");
    let late = service
        .answer(&id, &call_ids[0], Answer::Deny { reason: None })
        .await;
    assert!(late.is_err(), "the second answer finds nothing waiting");
    let fed = read_feed(&mut one, Until::TurnEnd).await;
    assert!(fed.events.iter().any(|s| matches!(
        &s.event,
        SessionEvent::ApprovalDecided {
            answer: Answer::Once,
            ..
        }
    )));
}

#[tokio::test]
async fn a_shell_line_runs_in_the_project_and_the_files_skip_ignored_ones() {
    let world = World::anthropic();
    let service = service(&world);
    let project = world.home.project().canonicalize().unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join("src/lib.rs"), "").unwrap();
    std::fs::write(project.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(project.join("target")).unwrap();
    std::fs::write(project.join("target/out"), "").unwrap();
    let run = service.shell(&project, "pwd && ls src").await.unwrap();
    assert!(run.ok, "{}", run.output);
    assert!(
        run.output.contains(project.to_str().unwrap()),
        "{}",
        run.output
    );
    assert!(run.output.contains("lib.rs"), "{}", run.output);
    let mut files = service.files(project.clone()).await;
    files.sort();
    assert_eq!(
        files,
        ["src/lib.rs"],
        "hidden and ignored files are left out"
    );
}

#[tokio::test]
async fn two_sessions_call_models_of_their_own_at_once() {
    let world = World::new(ProviderKind::Anthropic);
    world.mock.repeat(Reply::text("ok"));
    let manager = SessionManager::new(world.deps());
    let profile = world.profile();
    manager.set_models(Arc::new(move |overrides: &tern::store::Overrides| {
        let model = overrides
            .model
            .clone()
            .unwrap_or_else(|| "primary-model".into());
        let route = ModelRoute::new(llm::provider_for(&profile), model, 1000, 200_000);
        let policy = RetryPolicy::new(&RetrySettings::default(), &SessionSettings::default());
        Ok(ModelClient::new(route, None, policy))
    }));
    let service = SessionService::local(Arc::new(manager));
    let dir = world.home.project();
    let first = service.open_key("cli:first", dir).await.unwrap();
    let second = service.open_key("cli:second", dir).await.unwrap();
    let other = tern::store::Overrides {
        provider: None,
        model: Some("other-model".into()),
    };
    let shown = service.set_model(&second, other).await.unwrap();
    assert_eq!(shown.model, "other-model");
    assert_eq!(shown.provider, "mock");
    for (id, text) in [(&first, "to the first"), (&second, "to the second")] {
        service.send_to(id, UserInput::local(text)).await.unwrap();
    }
    for id in [&first, &second] {
        service.idle(id).await.unwrap();
    }
    let model_of = |text: &str| {
        let requests = world.mock.model_requests();
        let asked = requests
            .iter()
            .find(|r| r.texts().iter().any(|t| t == text))
            .unwrap_or_else(|| panic!("no request with {text:?}"));
        asked.model().map(str::to_owned)
    };
    assert_eq!(model_of("to the first").as_deref(), Some("primary-model"));
    assert_eq!(model_of("to the second").as_deref(), Some("other-model"));
    // The session keeps it when it is opened again.
    let meta = service.meta(&second).await.unwrap();
    assert_eq!(meta.overrides.model.as_deref(), Some("other-model"));
}

/// A client of `owner`, which serves at `socket`; it never takes the store over.
async fn client_of(socket: &std::path::Path) -> SessionService {
    use tern::gateway::Reached;
    use tern::gateway::remote::{Notify, Takeover};
    let takeover: Takeover = Arc::new(|| Box::pin(async { Ok(None) }));
    let quiet: Notify = Arc::new(|_| {});
    match SessionService::connect(socket, takeover, quiet).await {
        Ok(Reached::Owner(service)) => service,
        _ => panic!("no owner at {}", socket.display()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_feed_read_slowly_is_dropped_without_holding_up_the_connection() {
    let world = World::anthropic();
    world.mock.push(Reply::text(words(600)));
    let owner = service(&world);
    let socket = world.home.home().join("data/run/tern.sock");
    owner.serve(&socket).expect("serving");
    let client = client_of(&socket).await;
    let project = world.home.project().canonicalize().unwrap();
    let id = client.open_key("cli:remote-slow", &project).await.unwrap();
    let mut slow = client
        .subscribe(&id, Some(0), OutputFilter::ALL, 2)
        .await
        .expect("subscribed over the socket");
    client
        .send_to(&id, UserInput::local("go"))
        .await
        .expect("delivered");
    client.idle(&id).await.expect("the turn ended");
    // The unread feed holds up nothing else on the connection.
    let meta = client
        .meta(&id)
        .await
        .expect("answered while the feed waits");
    assert_eq!(meta.input_count, 1);

    let first = read_feed(&mut slow, Until::End).await;
    let Some(FeedItem::Dropped(dropped)) = first.end else {
        panic!("the slow reader was dropped, not {:?}", first.end);
    };
    for stamped in first.events.iter().filter(|s| s.event.is_journaled()) {
        assert!(stamped.at <= dropped.last_at, "{stamped:?} {dropped:?}");
    }
    let mut again = client
        .subscribe(&id, Some(dropped.last_at), OutputFilter::ALL, 100_000)
        .await
        .expect("subscribed again");
    let second = read_feed(&mut again, Until::Live).await;
    let last = world.store.load(&id).unwrap().last().unwrap().seq;
    let replayed_to = second.replayed.last().map_or(dropped.last_at, |r| r.seq);
    assert_eq!(replayed_to, last, "the replay reaches the end");
    assert!(
        second.replayed.iter().all(|r| r.seq > dropped.last_at),
        "nothing replayed twice"
    );
}

#[tokio::test]
async fn a_session_offered_fewer_tools_is_asked_with_only_those() {
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let service = service(&world);
    let dir = world.home.project();
    let narrow = service.open_key("cli:narrow", dir).await.unwrap();
    let wide = service.open_key("cli:wide", dir).await.unwrap();
    let refused = service
        .set_tools(&narrow, Some(vec!["file_read".into(), "teleport".into()]))
        .await
        .expect_err("an unknown tool");
    assert!(refused.message.contains("teleport"), "{}", refused.message);
    assert!(
        refused.message.contains("file_read"),
        "names the tools: {}",
        refused.message
    );
    service
        .set_tools(&narrow, Some(vec!["file_read".into(), "grep".into()]))
        .await
        .unwrap();
    for (id, text) in [(&narrow, "to the narrow one"), (&wide, "to the wide one")] {
        service.send_to(id, UserInput::local(text)).await.unwrap();
        service.idle(id).await.unwrap();
    }
    let tools_of = |text: &str| -> Vec<String> {
        let requests = world.mock.model_requests();
        let asked = requests
            .iter()
            .find(|r| r.texts().iter().any(|t| t == text))
            .unwrap_or_else(|| panic!("no request with {text:?}"));
        offered_tools(&asked.body)
    };
    assert_eq!(tools_of("to the narrow one"), ["file_read", "grep"]);
    assert!(
        tools_of("to the wide one").len() > 2,
        "the other keeps them all"
    );
}

#[tokio::test]
async fn a_turn_handed_over_goes_on_with_the_approval_its_input_carried() {
    // The process serves with `never`; the input allows everything.
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo one" }),
    ));
    world
        .mock
        .push(Reply::text("never finished").delay_before(Duration::from_secs(30)));
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo after-the-handover" }),
    ));
    world.mock.push(Reply::text("done"));
    let manager = Arc::new(SessionManager::new(world.deps()));
    let first = SessionService::local(manager.clone());
    let project = world.home.project().canonicalize().unwrap();
    let id = first.open_key("cli:handed", &project).await.unwrap();
    let mut input = UserInput::local("go");
    input.approval = Some(tern::tools::ApprovalMode::All);
    first.send_to(&id, input).await.unwrap();
    // The second model call is in flight when the sessions are handed over.
    world
        .mock
        .wait_for_requests(2, Duration::from_secs(20))
        .await;
    let drained = manager.hand_over(Duration::from_secs(10)).await.unwrap();
    assert_eq!(drained.len(), 1);
    assert_eq!(drained[0].approval, Some(tern::tools::ApprovalMode::All));
    drop((first, manager));

    // The next owner, serving with `never` too, resumes it as the input allowed.
    let next = SessionService::local(Arc::new(SessionManager::new(world.deps())));
    let warmed = next.warm_up().await.unwrap();
    assert!(warmed[0].resumed, "{warmed:?}");
    let mut feed = next
        .subscribe(&id, Some(0), OutputFilter::ALL, 100_000)
        .await
        .unwrap();
    loop {
        let fed = read_feed(&mut feed, Until::TurnEnd).await;
        if fed.events.iter().any(|s| {
            matches!(
                &s.event,
                SessionEvent::TurnCompleted { text, .. } if text == "done"
            )
        }) {
            break;
        }
    }
    let ran = tool_results(&world, &id);
    assert!(
        ran.iter()
            .any(|(failed, text)| !failed && text.contains("after-the-handover")),
        "the command ran, not refused: {ran:?}"
    );
}

#[tokio::test]
async fn a_sessions_own_approval_and_tools_hold_in_the_next_process() {
    // Both processes serve with `never`; the session was allowed everything for itself.
    let world = World::anthropic();
    world.mock.push(Reply::tool_call(
        "shell_execute",
        json!({ "command": "echo allowed-after-reopening" }),
    ));
    world.mock.push(Reply::text("done"));
    let first = service(&world);
    let project = world.home.project().canonicalize().unwrap();
    let id = first.open_key("cli:own", &project).await.unwrap();
    first
        .set_approval(&id, tern::tools::ApprovalMode::All)
        .await
        .unwrap();
    first
        .set_tools(&id, Some(vec!["shell_execute".into(), "file_read".into()]))
        .await
        .unwrap();
    first.close_all().await;
    drop(first);

    let next = service(&world);
    next.send_to(&id, UserInput::local("run it")).await.unwrap();
    next.idle(&id).await.unwrap();
    let requests = world.mock.model_requests();
    assert_eq!(
        offered_tools(&requests[0].body),
        ["file_read", "shell_execute"]
    );
    let ran = tool_results(&world, &id);
    assert!(
        ran.iter()
            .any(|(failed, text)| !failed && text.contains("allowed-after-reopening")),
        "ran with the session's own approval, not refused: {ran:?}"
    );
    let meta = next.meta(&id).await.unwrap();
    assert_eq!(
        meta.permissions.approval,
        Some(tern::tools::ApprovalMode::All)
    );
}

/// The next lifecycle event `events` bring within `bound`, if any.
async fn next_event(
    events: &mut tokio::sync::broadcast::Receiver<tern::gateway::LifecycleEvent>,
    bound: Duration,
) -> Option<tern::gateway::LifecycleEvent> {
    tokio::time::timeout(bound, events.recv()).await.ok()?.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_the_lifecycle_events_of_each_owner_in_turn() {
    use tern::gateway::LifecycleEvent;
    let world = World::anthropic();
    world.mock.repeat(Reply::text("ok"));
    let socket = world.home.home().join("data/run/tern.sock");
    let owner = service(&world);
    owner.serve(&socket).expect("serving");
    let client = client_of(&socket).await;
    let mut events = client.lifecycle();
    let project = world.home.project().canonicalize().unwrap();
    // The stream is open once an event made after asking for it comes through.
    let mut first = None;
    for n in 0..100 {
        let id = owner
            .open_key(&format!("cli:first-{n}"), &project)
            .await
            .unwrap();
        owner.send_to(&id, UserInput::local("hi")).await.unwrap();
        if let Some(event) = next_event(&mut events, Duration::from_millis(100)).await {
            first = Some(event);
            break;
        }
    }
    assert!(
        matches!(
            first,
            Some(LifecycleEvent::Created { .. } | LifecycleEvent::Updated { .. })
        ),
        "{first:?}"
    );

    // The owner leaves; the next one serves the same store, and the client follows it.
    owner.close_all().await;
    drop(owner);
    let next = service(&world);
    next.serve(&socket).expect("serving again");
    let mut created = Vec::new();
    let mut seen = Vec::new();
    for n in 0..100 {
        let id = next
            .open_key(&format!("cli:second-{n}"), &project)
            .await
            .unwrap();
        next.send_to(&id, UserInput::local("hi")).await.unwrap();
        created.push(id);
        while let Some(event) = next_event(&mut events, Duration::from_millis(100)).await {
            seen.push(event);
        }
        if seen
            .iter()
            .any(|e| matches!(e, LifecycleEvent::Created { id, .. } if created.contains(id)))
        {
            return;
        }
    }
    panic!("no event of the second owner reached the client: {seen:?}");
}
