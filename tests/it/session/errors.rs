//! Model calls that fail: each error class, retries, the fallback model, cut-off replies.

use super::*;
use pretty_assertions::assert_eq;
use tern::domain::{TurnStop, Watchdog};

#[tokio::test]
async fn an_auth_error_fails_at_once_without_retrying() {
    let world = World::anthropic();
    world.mock.push(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::Auth);
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert_eq!(world.mock.model_requests().len(), 1);
}

#[tokio::test]
async fn server_and_overload_errors_are_retried() {
    for status in [500, 529, 503] {
        let world = World::anthropic();
        world.mock.push(Reply::error(
            status,
            r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#,
        ));
        world.mock.push(Reply::text("recovered"));
        let handle = world.create();
        let events = turn(&handle, "hi").await;

        assert_eq!(
            completed(&events).as_deref(),
            Some("recovered"),
            "status {status}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, SessionEvent::Retry { .. })),
            "status {status}"
        );
        assert_eq!(world.mock.model_requests().len(), 2);
    }
}

#[tokio::test]
async fn rate_limits_wait_as_long_as_the_provider_asks() {
    let world = World::anthropic();
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    world
        .mock
        .push(Reply::error(429, body).header("retry-after-ms", "40"));
    world
        .mock
        .push(Reply::error(429, body).header("retry-after", "0"));
    world.mock.push(Reply::text("ok"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let delays: Vec<(ErrorCategory, Duration)> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Retry {
                category, delay, ..
            } => Some((*category, *delay)),
            _ => None,
        })
        .collect();
    assert_eq!(
        delays,
        [
            (ErrorCategory::RateLimit, Duration::from_millis(40)),
            (ErrorCategory::RateLimit, Duration::ZERO)
        ]
    );
    assert_eq!(completed(&events).as_deref(), Some("ok"));
}

#[tokio::test]
async fn a_stream_cut_mid_reply_is_retried_and_nothing_partial_is_kept() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("this reply will be cut somewhere in the middle").cut_after_events(4));
    world.mock.push(Reply::text("complete answer"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    assert_eq!(completed(&events).as_deref(), Some("complete answer"));
    let retry = events.iter().find_map(|e| match e {
        SessionEvent::Retry { category, .. } => Some(*category),
        _ => None,
    });
    assert_eq!(retry, Some(ErrorCategory::Network));
    let state = handle.state().await.unwrap();
    assert_eq!(conversation(&state), ["hi", "complete answer"]);
}

#[tokio::test]
async fn a_line_that_is_not_json_gives_a_clear_error_and_the_session_stays_usable() {
    let world = World::anthropic();
    for _ in 0..3 {
        world.mock.push(Reply::raw_sse(
            "event: message_start\ndata: {not json at all\n\n",
        ));
    }
    world.mock.push(Reply::text("fine now"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;
    let (_, message) = failure(&events).expect("turn failed");
    assert!(
        message.contains("not json at all") || message.contains("JSON"),
        "{message}"
    );

    let events = turn(&handle, "again").await;
    assert_eq!(completed(&events).as_deref(), Some("fine now"));
}

#[tokio::test]
async fn the_fallback_model_takes_over_when_the_primary_keeps_failing() {
    let mut world = World::anthropic();
    world.fallback = Some("fallback-model");
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    for _ in 0..3 {
        world
            .mock
            .push_for_model("primary-model", Reply::error(529, overloaded));
    }
    world
        .mock
        .push_for_model("fallback-model", Reply::text("from the fallback"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    assert_eq!(completed(&events).as_deref(), Some("from the fallback"));
    assert!(
        events.iter().any(
            |e| matches!(e, SessionEvent::Fallback { model, .. } if model == "fallback-model")
        )
    );
    let models: Vec<_> = world
        .mock
        .model_requests()
        .iter()
        .map(|r| r.model().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        models,
        [
            "primary-model",
            "primary-model",
            "primary-model",
            "fallback-model"
        ]
    );
}

#[tokio::test]
async fn a_reply_cut_at_the_output_limit_fails_and_is_not_kept() {
    let world = World::anthropic();
    world
        .mock
        .push(Reply::text("The answer is a long list: one, two, thr").stop_reason_max_tokens());
    let handle = world.create();
    let events = turn(&handle, "list").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::ModelBehavior);
    assert!(message.contains("output limit"), "{message}");
    let state = handle.state().await.unwrap();
    assert!(
        state.messages.iter().all(|m| m.role == Role::User),
        "{:?}",
        state.messages
    );
    assert!(
        !journal(&world, handle.id())
            .iter()
            .any(|e| matches!(e, JournalEvent::AssistantMessage { .. }))
    );
}

#[tokio::test]
async fn a_provider_that_stops_answering_fails_the_turn_naming_the_watchdog() {
    let mut world = World::anthropic();
    world.settings.first_token_timeout = Duration::from_millis(300);
    world
        .mock
        .push(Reply::text("too late").delay_after_headers(Duration::from_secs(5)));
    world.mock.push(Reply::text("on time"));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    // No retry: the watchdog already waited its whole time.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SessionEvent::Retry { .. }))
    );
    let stop = events.iter().find_map(|e| match e {
        SessionEvent::TurnFailed { stop, message, .. } => Some((*stop, message.clone())),
        _ => None,
    });
    let (stop, message) = stop.expect("the turn failed");
    assert_eq!(
        stop,
        TurnStop::Timeout {
            watchdog: Watchdog::FirstToken
        }
    );
    assert!(message.contains("first_token_timeout"), "{message}");
    // The session is Ready again and the next message works.
    let events = turn(&handle, "again").await;
    assert_eq!(completed(&events).as_deref(), Some("on time"));
    let journal = journal(&world, handle.id());
    let stops: Vec<_> = journal.iter().filter_map(JournalEvent::turn_stop).collect();
    assert_eq!(
        stops,
        [
            TurnStop::Timeout {
                watchdog: Watchdog::FirstToken
            },
            TurnStop::Completed
        ]
    );
}

#[tokio::test]
async fn a_context_overflow_is_reported_as_such_without_retrying() {
    let world = World::anthropic();
    world.mock.push(Reply::error(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
    ));
    let handle = world.create();
    let events = turn(&handle, "hi").await;

    let (category, message) = failure(&events).expect("turn failed");
    assert_eq!(category, ErrorCategory::ContextOverflow);
    assert!(message.contains("prompt is too long"), "{message}");
    assert_eq!(world.mock.model_requests().len(), 1);
}
