//! The session's timers on tokio's paused clock: each model watchdog fails the turn at exactly
//! its configured time, naming itself, and the next message works; an idle session is put to
//! rest after `idle_timeout` and its grace, unless a message comes first; a call waiting for a
//! person's approval outlasts every timer. The model is an
//! in-process provider that stalls on cue, so no network wait can move the clock.

use super::*;
use futures_util::{StreamExt, stream};
use std::collections::VecDeque;
use std::sync::Mutex;
use tern::domain::{TurnStop, Watchdog};
use tern::llm::{BoxFuture, ChatRequest, EventStream, LlmError, Provider, StopReason, StreamEvent};
use tokio::time::Instant;

/// What one model call does.
enum Step {
    /// No response headers, ever.
    Hang,
    /// These events, then silence.
    Stall(Vec<StreamEvent>),
    /// A thought every minute, never an answer.
    Think,
    /// A plain answer.
    Answer(&'static str),
    /// One tool call.
    Call(&'static str, serde_json::Value),
}

/// A provider playing `Step`s in order and noting when each call began.
struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    called_at: Mutex<Vec<Instant>>,
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        self.called_at.lock().unwrap().push(Instant::now());
        let step = self.steps.lock().unwrap().pop_front();
        Box::pin(async move {
            match step {
                Some(Step::Hang) => std::future::pending().await,
                Some(Step::Stall(events)) => Ok(Box::pin(
                    stream::iter(events.into_iter().map(Ok)).chain(stream::pending()),
                ) as EventStream),
                Some(Step::Think) => Ok(Box::pin(stream::unfold((), |()| async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Some((Ok(StreamEvent::ThinkingDelta("…".into())), ()))
                })) as EventStream),
                Some(Step::Answer(text)) => Ok(Box::pin(stream::iter([
                    Ok(StreamEvent::TextDelta(text.into())),
                    Ok(StreamEvent::Stop(StopReason::EndTurn)),
                ])) as EventStream),
                Some(Step::Call(name, args)) => Ok(Box::pin(stream::iter([
                    Ok(StreamEvent::ToolCallStart {
                        index: 0,
                        id: "call_scripted".into(),
                        name: name.into(),
                    }),
                    Ok(StreamEvent::ToolCallArgsDelta {
                        index: 0,
                        json: args.to_string(),
                    }),
                    Ok(StreamEvent::ToolCallEnd { index: 0 }),
                    Ok(StreamEvent::Stop(StopReason::ToolUse)),
                ])) as EventStream),
                None => Err(LlmError::new(
                    ErrorCategory::InvalidRequest,
                    "script ran out",
                )),
            }
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async { Ok("scripted".to_owned()) })
    }

    fn wire_body(&self, request: &ChatRequest) -> serde_json::Value {
        json!({"model": request.model})
    }
}

/// A session on `world` whose model plays `steps`.
fn session(world: &World, steps: Vec<Step>) -> (SessionHandle, Arc<Scripted>) {
    let (deps, provider) = scripted_deps(world, steps);
    let project = world.home.project().canonicalize().expect("project dir");
    let handle = SessionHandle::create(deps, project).expect("create session");
    (handle, provider)
}

/// The world's dependencies with a model that plays `steps`.
fn scripted_deps(world: &World, steps: Vec<Step>) -> (Arc<SessionDeps>, Arc<Scripted>) {
    let provider = Arc::new(Scripted {
        steps: Mutex::new(steps.into()),
        called_at: Mutex::new(Vec::new()),
    });
    let route = ModelRoute::new(provider.clone(), "scripted-model", 1000, 100_000);
    let policy = RetryPolicy::new(&RetrySettings::default(), &world.settings);
    let deps = Arc::new(SessionDeps {
        client: ModelClient::new(route, None, policy),
        ..Arc::try_unwrap(world.deps())
            .unwrap_or_else(|_| panic!("fresh dependencies are not shared"))
    });
    (deps, provider)
}

/// Sends `text` and collects the turn's events, waiting as long as the slowest watchdog.
async fn slow_turn(handle: &SessionHandle, text: &str) -> Vec<SessionEvent> {
    let mut events = handle
        .subscribe(OutputFilter::ALL)
        .await
        .expect("subscribe");
    handle.send(UserInput::local(text)).await.expect("send");
    let seen = until_turns_end_within(&mut events, 1, Duration::from_secs(4 * 3600)).await;
    handle.state().await.expect("session idle");
    seen
}

#[tokio::test(start_paused = true)]
async fn each_model_watchdog_ends_the_turn_at_its_time_and_the_next_message_works() {
    let cases = [
        (Step::Hang, Watchdog::Prefill, 1800),
        (Step::Stall(Vec::new()), Watchdog::FirstToken, 600),
        (
            Step::Stall(vec![StreamEvent::TextDelta("par".into())]),
            Watchdog::NoProgress,
            1200,
        ),
        // Thinking starts with the first thought, a minute in; 3 × 1200 s later it stops.
        (Step::Think, Watchdog::ThinkingOnly, 60 + 3600),
    ];
    for (step, watchdog, secs) in cases {
        let world = World::anthropic();
        let (handle, provider) = session(&world, vec![step, Step::Answer("fine")]);
        let events = slow_turn(&handle, "hi").await;
        let failed_at = Instant::now();
        let stop = events.iter().find_map(|e| match e {
            SessionEvent::TurnFailed { stop, message, .. } => Some((*stop, message.clone())),
            _ => None,
        });
        let (stop, message) = stop.expect("the turn failed");
        assert_eq!(stop, TurnStop::Timeout { watchdog }, "{message}");
        assert!(message.contains(watchdog.setting()), "{message}");
        let called_at = provider.called_at.lock().unwrap()[0];
        assert_eq!(
            failed_at - called_at,
            Duration::from_secs(secs),
            "{watchdog}"
        );
        // The session is Ready again: the next message is answered.
        let events = slow_turn(&handle, "again").await;
        assert_eq!(completed(&events).as_deref(), Some("fine"), "{watchdog}");
        assert_eq!(provider.called_at.lock().unwrap().len(), 2, "no retry");
    }
}

/// Events until the subscription ends (the actor stopped) or `limit` passes, each with when it
/// arrived.
async fn timed_events(events: &mut Subscription, limit: Duration) -> Vec<(Instant, SessionEvent)> {
    let mut seen = Vec::new();
    let collect = async {
        while let Some(event) = events.recv().await {
            seen.push((Instant::now(), event));
        }
    };
    let _ = tokio::time::timeout(limit, collect).await;
    seen
}

fn phase_at(seen: &[(Instant, SessionEvent)], phase: tern::session::Phase) -> Option<Instant> {
    seen.iter().find_map(|(at, e)| match e {
        SessionEvent::PhaseChanged { phase: p } if *p == phase => Some(*at),
        _ => None,
    })
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_is_put_to_rest_and_wakes_from_its_snapshot() {
    let mut world = World::anthropic();
    world.settings.idle_timeout = Duration::from_secs(3600);
    let (deps, _) = scripted_deps(&world, vec![Step::Answer("one"), Step::Answer("two")]);
    let project = world.home.project().canonicalize().unwrap();
    let handle = SessionHandle::create(deps.clone(), project).unwrap();
    slow_turn(&handle, "hi").await;
    let idle_from = Instant::now();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    let seen = timed_events(&mut events, Duration::from_secs(4 * 3600)).await;
    let resting = phase_at(&seen, tern::session::Phase::Passivating).expect("put to rest");
    assert_eq!(resting - idle_from, Duration::from_secs(3600));
    // After the 5 s grace the actor stopped: the subscription ended, sends are refused.
    let stopped = Instant::now();
    assert_eq!(stopped - resting, Duration::from_secs(5));
    assert!(matches!(
        handle.send(UserInput::local("late")).await,
        Err(SessionError::Closed)
    ));
    let journal = journal(&world, handle.id());
    assert!(matches!(
        journal.last(),
        Some(JournalEvent::Passivated { idle_secs: 3600 })
    ));
    let snapshot = world.store.latest_snapshot(handle.id()).unwrap().unwrap();
    assert_eq!(
        snapshot.seq as usize,
        journal.len(),
        "the snapshot covers everything"
    );

    // The next message wakes it: resumed from the snapshot, history whole.
    let meta = world.store.meta(handle.id()).unwrap().unwrap();
    let woken = SessionHandle::resume(deps, &meta).unwrap();
    let events = slow_turn(&woken, "again").await;
    assert_eq!(completed(&events).as_deref(), Some("two"));
    assert_eq!(
        conversation(&woken.state().await.unwrap()),
        ["hi", "one", "again", "two"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_during_the_grace_keeps_the_session_up() {
    let mut world = World::anthropic();
    world.settings.idle_timeout = Duration::from_secs(60);
    let (handle, _) = session(&world, vec![Step::Answer("one"), Step::Answer("two")]);
    slow_turn(&handle, "hi").await;
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    // Wait for the rest to begin, then write within the grace.
    loop {
        match events.recv().await.expect("the session runs") {
            SessionEvent::PhaseChanged {
                phase: tern::session::Phase::Passivating,
            } => break,
            _ => continue,
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answered = slow_turn(&handle, "still here").await;
    assert_eq!(completed(&answered).as_deref(), Some("two"));
    let journal = journal(&world, handle.id());
    assert!(
        !journal
            .iter()
            .any(|e| matches!(e, JournalEvent::Passivated { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_timeout_of_zero_never_puts_a_session_to_rest() {
    let mut world = World::anthropic();
    world.settings.idle_timeout = Duration::ZERO;
    let (handle, _) = session(&world, vec![Step::Answer("one"), Step::Answer("two")]);
    slow_turn(&handle, "hi").await;
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    let seen = timed_events(&mut events, Duration::from_secs(48 * 3600)).await;
    assert_eq!(phase_at(&seen, tern::session::Phase::Passivating), None);
    let answered = slow_turn(&handle, "a day later").await;
    assert_eq!(completed(&answered).as_deref(), Some("two"));
}

#[tokio::test(start_paused = true)]
async fn work_that_keeps_the_session_awake_defers_rest_until_it_ends() {
    let mut world = World::anthropic();
    world.settings.idle_timeout = Duration::from_secs(600);
    let (handle, _) = session(&world, vec![Step::Answer("one")]);
    slow_turn(&handle, "start the job").await;
    // A background job runs on for two hours after the turn.
    let job = handle.keep_awake();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    let seen = timed_events(&mut events, Duration::from_secs(2 * 3600)).await;
    assert_eq!(
        phase_at(&seen, tern::session::Phase::Passivating),
        None,
        "no rest while the job lives"
    );
    let ended = Instant::now();
    drop(job);
    let seen = timed_events(&mut events, Duration::from_secs(3600)).await;
    let resting = phase_at(&seen, tern::session::Phase::Passivating).expect("rests after it");
    assert_eq!(
        resting - ended,
        Duration::from_secs(600),
        "idle counts from the job's end"
    );
}

#[tokio::test(start_paused = true)]
async fn work_started_during_the_grace_keeps_the_session_up() {
    let mut world = World::anthropic();
    world.settings.idle_timeout = Duration::from_secs(60);
    let (handle, _) = session(&world, vec![Step::Answer("one")]);
    slow_turn(&handle, "hi").await;
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    loop {
        if let SessionEvent::PhaseChanged {
            phase: tern::session::Phase::Passivating,
        } = events.recv().await.expect("the session runs")
        {
            break;
        }
    }
    let _job = handle.keep_awake();
    let seen = timed_events(&mut events, Duration::from_secs(3600)).await;
    assert!(
        phase_at(&seen, tern::session::Phase::Ready).is_some(),
        "back to ready: {seen:?}"
    );
    assert!(
        !journal(&world, handle.id())
            .iter()
            .any(|e| matches!(e, JournalEvent::Passivated { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_approval_outlasts_every_timer() {
    let mut world = World::anthropic();
    world.approval = ApprovalMode::Ask;
    world.settings.idle_timeout = Duration::from_secs(60);
    world.settings.tool_execution_timeout = Duration::from_secs(90);
    let write = json!({"path": "late.txt", "content": "worth the wait\n"});
    let (handle, provider) = session(
        &world,
        vec![Step::Call("file_write", write), Step::Answer("written")],
    );
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    handle.send(UserInput::local("write it")).await.unwrap();
    let call_id = loop {
        if let SessionEvent::ApprovalRequested { call_id, .. } =
            events.recv().await.expect("the session runs")
        {
            break call_id;
        }
    };
    // A day without an answer: no watchdog, no rest, the turn still waits.
    let seen = timed_events(&mut events, Duration::from_secs(24 * 3600)).await;
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(provider.called_at.lock().unwrap().len(), 1);
    handle
        .answer(&call_id, tern::domain::Answer::Once)
        .await
        .unwrap();
    let rest = until_turns_end_within(&mut events, 1, Duration::from_secs(3600)).await;
    assert_eq!(completed(&rest).as_deref(), Some("written"), "{rest:?}");
    assert_eq!(world.home.read_file("late.txt"), "worth the wait\n");
}

#[tokio::test(start_paused = true)]
async fn a_title_call_that_never_answers_is_given_up_after_the_sidecar_timeout() {
    let mut world = World::anthropic();
    world.settings.sidecar_titles = true;
    world.settings.sidecar_llm_timeout = Duration::from_secs(90);
    world.settings.idle_timeout = Duration::from_secs(30);
    let (handle, provider) = session(&world, vec![Step::Answer("done"), Step::Hang]);
    let events = slow_turn(&handle, "name this session").await;
    assert_eq!(completed(&events).as_deref(), Some("done"), "not held up");
    let ended = Instant::now();
    let mut events = handle.subscribe(OutputFilter::ALL).await.unwrap();
    let seen = timed_events(&mut events, Duration::from_secs(4 * 3600)).await;
    // The title call began as the turn ended and hung; the session rests only once it is
    // given up, at the sidecar timeout rather than the shorter idle timeout.
    let called_at = provider.called_at.lock().unwrap().clone();
    assert_eq!(called_at.len(), 2);
    assert_eq!(called_at[1], ended);
    let resting = phase_at(&seen, tern::session::Phase::Passivating).expect("put to rest");
    assert_eq!(resting - ended, Duration::from_secs(90));
    assert!(
        !seen
            .iter()
            .any(|(_, e)| matches!(e, SessionEvent::TitleChanged { .. })),
        "{seen:?}"
    );
    let meta = world.store.meta(handle.id()).unwrap().unwrap();
    assert_eq!(meta.title, "name this session");
}
