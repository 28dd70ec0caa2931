//! Long sessions: compaction before a call that would cross the threshold, notes written by
//! the compaction model (or its fallback) and the extractive cut when they fail, a context
//! overflow compacted and retried once, and compaction on demand.

use super::*;
use pretty_assertions::assert_eq;

/// A world whose model has a small window, so a few file reads fill it; compaction notes go
/// to `notes-model` on the same mock.
fn small_window() -> World {
    let mut world = World::anthropic();
    world.context_window = 10_000;
    world.notes_model = Some("notes-model");
    // 6 KB each, in lines short enough that file_read shows them whole.
    let line = |i: usize| format!("{}\n", format!("{i}").repeat(59));
    for i in 0..6 {
        world
            .home
            .write_file(&format!("big{i}.txt"), &line(i).repeat(100));
    }
    world
}

/// Scripts `turns` turns that each read one big file and answer.
fn script_reads(world: &World, turns: usize) {
    for i in 0..turns {
        world.mock.push(Reply::tool_call(
            "file_read",
            json!({"path": format!("big{i}.txt")}),
        ));
        world.mock.push(Reply::text(format!("read file {i}")));
    }
}

fn compactions(events: &[JournalEvent]) -> Vec<(usize, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            JournalEvent::Compacted { dropped, notes, .. } => Some((*dropped, notes.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_call_that_would_cross_the_threshold_is_preceded_by_a_compaction() {
    let world = small_window();
    script_reads(&world, 4);
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES: four files were read."));
    let handle = world.create();
    let mut seen = Vec::new();
    for i in 0..4 {
        seen.extend(turn(&handle, &format!("read big{i}.txt please")).await);
    }
    assert!(
        seen.iter()
            .all(|e| !matches!(e, SessionEvent::TurnFailed { .. })),
        "{seen:?}"
    );

    let journal = journal(&world, handle.id());
    let done = compactions(&journal);
    // Each turn adds about a sixth of the window, so compactions come every few turns; only
    // the first finds notes scripted (a later notes call fails and the cut stands).
    assert!(!done.is_empty(), "{done:?}");
    assert_eq!(done[0].1.as_deref(), Some("NOTES: four files were read."));
    assert!(
        done[1..].iter().all(|(_, notes)| notes.is_none()),
        "{done:?}"
    );
    // Tier B is rendered again right after each compaction.
    let tier_b = journal
        .iter()
        .filter(|e| matches!(e, JournalEvent::StaticContextSet { .. }))
        .count();
    assert_eq!(tier_b, 1 + done.len());
    let reported: Vec<(u64, bool)> = seen
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Compacted {
                tokens_after,
                notes,
                ..
            } => Some((*tokens_after, *notes)),
            _ => None,
        })
        .collect();
    assert_eq!(reported.len(), done.len());
    assert!(reported[0].1);
    for (tokens_after, _) in reported {
        assert!(
            tokens_after <= 5_000,
            "{tokens_after} is over half the window"
        );
    }

    // The notes call read the cut messages; it went to the compaction model.
    let notes_request = world
        .mock
        .model_requests()
        .into_iter()
        .find(|r| r.model() == Some("notes-model"))
        .expect("a notes request");
    let asked = notes_request.texts().concat();
    assert!(asked.contains("[transcript]"), "{asked}");
    assert!(asked.contains("read big0.txt please"), "{asked}");

    // Every request stays under 80% of the window, and the one after the compaction opens
    // with the notes, every call still paired with its result.
    let requests: Vec<_> = world
        .mock
        .model_requests()
        .into_iter()
        .filter(|r| r.model() == Some("primary-model"))
        .collect();
    for request in &requests {
        let tokens = request.raw_body.len() as u64 / 4;
        assert!(tokens <= 8_000, "a request of ~{tokens} tokens");
        assert_eq!(request.tool_use_ids(), request.tool_result_ids());
    }
    let after = requests
        .iter()
        .find(|r| {
            r.texts()
                .first()
                .is_some_and(|t| t.starts_with("[compaction notes"))
        })
        .expect("a request that opens with the notes");
    assert!(after.texts()[0].ends_with("NOTES: four files were read."));
    let state = handle.state().await.unwrap();
    assert_eq!(state.static_contexts.len(), 1);
}

#[tokio::test]
async fn when_the_notes_call_fails_the_extractive_cut_stands() {
    let world = small_window();
    script_reads(&world, 4);
    world.mock.push_for_model(
        "notes-model",
        Reply::error(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#,
        ),
    );
    let handle = world.create();
    for i in 0..4 {
        let events = turn(&handle, &format!("read big{i}.txt please")).await;
        assert!(completed(&events).is_some(), "{events:?}");
    }
    let done = compactions(&journal(&world, handle.id()));
    assert!(!done.is_empty());
    assert_eq!(done[0].1, None);
    let state = handle.state().await.unwrap();
    let first = state.messages[0].text();
    assert!(first.starts_with("[compaction: "), "{first}");
    assert!(
        first.contains("removed to fit the context window"),
        "{first}"
    );
}

#[tokio::test]
async fn the_fallback_model_writes_the_notes_when_the_compaction_model_keeps_failing() {
    let mut world = small_window();
    world.fallback = Some("fallback-model");
    script_reads(&world, 4);
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    for _ in 0..3 {
        world
            .mock
            .push_for_model("notes-model", Reply::error(529, overloaded));
    }
    world
        .mock
        .push_for_model("fallback-model", Reply::text("NOTES from the fallback"));
    let handle = world.create();
    for i in 0..4 {
        turn(&handle, &format!("read big{i}.txt please")).await;
    }
    let done = compactions(&journal(&world, handle.id()));
    assert!(!done.is_empty());
    assert_eq!(done[0].1.as_deref(), Some("NOTES from the fallback"));
}

#[tokio::test]
async fn a_context_overflow_compacts_and_retries_once() {
    let world = small_window();
    // Plenty of room by the window's numbers, but the provider says otherwise once.
    let mut world = world;
    world.context_window = 100_000;
    script_reads(&world, 2);
    world.mock.push(Reply::error(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    ));
    world.mock.push(Reply::text("fits now"));
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES: two files read."));
    let handle = world.create();
    turn(&handle, "read big0.txt please").await;
    turn(&handle, "read big1.txt please").await;
    let events = turn(&handle, "and now?").await;
    assert_eq!(completed(&events).as_deref(), Some("fits now"));
    let journal = journal(&world, handle.id());
    assert_eq!(compactions(&journal).len(), 1);
    let last = world.mock.model_requests().pop().unwrap();
    assert!(
        last.texts()[0].starts_with("[compaction notes"),
        "{:?}",
        last.texts()
    );
}

#[tokio::test]
async fn a_reply_the_window_cuts_mid_stream_is_voided_by_the_call_made_again() {
    let mut world = small_window();
    world.context_window = 100_000;
    script_reads(&world, 2);
    // Anthropic ends such a reply with its own stop reason after text was already streamed.
    world.mock.push(Reply::raw_sse(concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":99000,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Déjà vu: \"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"model_context_window_exceeded\"},\"usage\":{\"output_tokens\":3}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    )));
    world.mock.push(Reply::text("fits now"));
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES: two files read."));
    let handle = world.create();
    turn(&handle, "read big0.txt please").await;
    turn(&handle, "read big1.txt please").await;
    let events = turn(&handle, "and now?").await;
    assert_eq!(completed(&events).as_deref(), Some("fits now"));
    let retry = events
        .iter()
        .position(|e| matches!(e, SessionEvent::Retry { .. }))
        .expect("a retry event");
    let streamed: String = events[..retry]
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "Déjà vu: ");
    match &events[retry] {
        SessionEvent::Retry {
            category,
            discarded_chars,
            ..
        } => {
            assert_eq!(*category, ErrorCategory::ContextOverflow);
            assert_eq!(*discarded_chars, 9);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        events[..retry]
            .iter()
            .any(|e| matches!(e, SessionEvent::Compacted { .. })),
        "compacted before the call is made again"
    );
}

#[tokio::test]
async fn llama_cpp_s_overflow_error_compacts_and_retries_once() {
    let mut world = World::new(ProviderKind::OpenAi);
    world.notes_model = Some("notes-model");
    world
        .home
        .write_file("a.txt", &"a line of the file\n".repeat(50));
    world
        .mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    world.mock.push(Reply::text("read it"));
    world.mock.push(Reply::error(
        400,
        r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
    ));
    world.mock.push(Reply::text("fits now"));
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES: a.txt was read."));
    world.settings.keep_recent_messages = 2;
    let handle = world.create();
    turn(&handle, "read a.txt").await;
    let events = turn(&handle, "and now?").await;
    assert_eq!(completed(&events).as_deref(), Some("fits now"));
    assert_eq!(compactions(&journal(&world, handle.id())).len(), 1);
    // The durable working context survives the compaction.
    let state = handle.state().await.unwrap();
    assert!(
        state.recent_files.iter().any(|f| f.ends_with("a.txt")),
        "{:?}",
        state.recent_files
    );
}

/// A world with room to spare, whose compactions keep two messages.
fn keep_two() -> World {
    let mut world = small_window();
    world.context_window = 100_000;
    world.settings.keep_recent_messages = 2;
    world
}

/// A session with two file reads behind it, whose notes model answers only after 10 s; a
/// compaction keeping two messages has something to cut.
async fn two_reads_then_slow_notes(world: &World) -> SessionHandle {
    script_reads(world, 2);
    world.mock.push_for_model(
        "notes-model",
        Reply::text("too late").delay_before(Duration::from_secs(10)),
    );
    let handle = world.create();
    for i in 0..2 {
        turn(&handle, &format!("read big{i}.txt please")).await;
    }
    handle
}

#[tokio::test]
async fn notes_that_take_longer_than_the_sidecar_timeout_are_given_up() {
    let mut world = keep_two();
    world.settings.sidecar_llm_timeout = Duration::from_millis(200);
    let handle = two_reads_then_slow_notes(&world).await;
    assert!(handle.compact().await.expect("compacts"));
    let state = handle.state().await.unwrap();
    let first = state.messages[0].text();
    assert!(first.starts_with("[compaction: "), "{first}");
}

#[tokio::test]
async fn an_overflow_that_compacting_cannot_fix_fails_clearly_and_the_session_goes_on() {
    let world = World::anthropic();
    let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    world.mock.push(Reply::error(400, too_long));
    world.mock.push(Reply::text("short answer"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;
    let (category, message) = failure(&events).expect("the turn failed");
    assert_eq!(category, ErrorCategory::ContextOverflow);
    assert!(message.contains("did not make it fit"), "{message}");
    // One request only: with nothing to compact there is no second try.
    assert_eq!(world.mock.model_requests().len(), 1);
    let events = turn(&handle, "hello again").await;
    assert_eq!(completed(&events).as_deref(), Some("short answer"));
}

#[tokio::test]
async fn compaction_on_demand_cuts_the_history_and_reports_it() {
    let world = small_window();
    let mut world = world;
    world.context_window = 100_000;
    world.settings.keep_recent_messages = 2;
    script_reads(&world, 3);
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES on demand"));
    let handle = world.create();
    for i in 0..3 {
        turn(&handle, &format!("read big{i}.txt please")).await;
    }
    let before = handle.state().await.unwrap().messages.len();
    assert!(handle.compact().await.expect("compacts"));
    let state = handle.state().await.unwrap();
    assert!(
        state.messages.len() < before,
        "{} !< {before}",
        state.messages.len()
    );
    assert!(state.messages[0].text().ends_with("NOTES on demand"));
    assert!(state.static_contexts.len() == 1, "tier B rendered again");
    // A session with nothing to cut or clear reports no change.
    let fresh = world.create();
    assert!(!fresh.compact().await.expect("compacts"));
}

#[tokio::test]
async fn a_cancel_during_the_notes_call_leaves_the_history_as_it_was() {
    let world = keep_two();
    let handle = two_reads_then_slow_notes(&world).await;
    let before = handle.state().await.unwrap().messages;
    let compacting = handle.clone();
    let compaction = tokio::spawn(async move { compacting.compact().await });
    // Once the notes request is on its way, cancel.
    world
        .mock
        .wait_for_requests(5, Duration::from_secs(10))
        .await;
    handle.cancel().await.unwrap();
    let changed = compaction.await.unwrap().expect("the compaction answers");
    assert!(!changed);
    assert_eq!(handle.state().await.unwrap().messages, before);
    assert!(compactions(&journal(&world, handle.id())).is_empty());
}
