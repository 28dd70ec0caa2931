//! Tests of the model client's retry, timeout, failover and assembly behaviour, against a
//! scripted provider.
//!
//! The crate's tokio has no `test-util` feature, so these run on the real clock with
//! millisecond policies. Each timing test is built so that only one outcome is possible
//! (a single watchdog can fire, or the margins are two orders of magnitude apart), which keeps
//! them deterministic on a loaded machine.

use super::*;
use crate::domain::{Message, ToolCall};
use crate::llm::{BoxFuture, EventStream};
use futures_util::stream;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::Mutex;

/// What one call to the scripted provider does.
enum Step {
    /// `stream()` fails with this error.
    Fail(LlmError),
    /// The stream yields these items and ends.
    Items(Vec<Result<StreamEvent, LlmError>>),
    /// `stream()` never returns.
    Hang,
    /// The stream yields these events, then stays silent forever.
    Stall(Vec<StreamEvent>),
    /// Each event arrives after its delay.
    Timed(Vec<(Duration, StreamEvent)>),
}

struct Scripted {
    name: String,
    steps: Mutex<VecDeque<Step>>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(name: &str, steps: Vec<Step>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            steps: Mutex::new(steps.into()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> usize {
        self.seen.lock().expect("test lock").len()
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        &self.name
    }

    fn wire_body(&self, request: &ChatRequest) -> serde_json::Value {
        serde_json::json!({"model": request.model})
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        self.seen.lock().expect("test lock").push(request.clone());
        let step = self.steps.lock().expect("test lock").pop_front();
        Box::pin(async move {
            match step {
                None => Err(LlmError::new(
                    ErrorCategory::InvalidRequest,
                    "script exhausted",
                )),
                Some(Step::Fail(err)) => Err(err),
                Some(Step::Items(items)) => Ok(Box::pin(stream::iter(items)) as EventStream),
                Some(Step::Hang) => futures_util::future::pending().await,
                Some(Step::Stall(events)) => Ok(Box::pin(
                    stream::iter(events.into_iter().map(Ok)).chain(stream::pending()),
                ) as EventStream),
                Some(Step::Timed(events)) => Ok(Box::pin(stream::unfold(
                    events.into_iter(),
                    |mut rest| async move {
                        let (delay, event) = rest.next()?;
                        tokio::time::sleep(delay).await;
                        Some((Ok(event), rest))
                    },
                )) as EventStream),
            }
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async { Ok("scripted".to_string()) })
    }
}

#[derive(Default)]
struct Recorder {
    events: Vec<StreamEvent>,
    retries: Vec<(u32, Duration, ErrorCategory)>,
    fallbacks: Vec<(String, ErrorCategory)>,
}

impl StreamObserver for Recorder {
    fn on_event(&mut self, event: &StreamEvent) {
        self.events.push(event.clone());
    }
    fn on_retry(&mut self, attempt: u32, delay: Duration, error: &LlmError) {
        self.retries.push((attempt, delay, error.category));
    }
    fn on_fallback(&mut self, route_model: &str, error: &LlmError) {
        self.fallbacks
            .push((route_model.to_string(), error.category));
    }
}

const MS: Duration = Duration::from_millis(1);

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: MS * 2,
        max_delay: MS * 100,
        prefill_timeout: MS * 400,
        first_token_timeout: MS * 300,
        no_progress_timeout: MS * 200,
    }
}

fn route(provider: &Arc<Scripted>, model: &str) -> ModelRoute {
    ModelRoute::new(provider.clone(), model, 1000, 100_000)
}

fn client(primary: &Arc<Scripted>, fallback: Option<&Arc<Scripted>>) -> ModelClient {
    ModelClient::new(
        route(primary, "main-model"),
        fallback.map(|f| route(f, "backup-model")),
        policy(),
    )
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "ignored".into(),
        system: Vec::new(),
        messages: vec![Message::user_text("hi")],
        tools: Vec::new(),
        max_output_tokens: 0,
        context_window: 0,
        cache_breakpoints: Vec::new(),
        cache_key: None,
        images: false,
    }
}

fn text_reply(text: &str) -> Step {
    Step::Items(vec![
        Ok(StreamEvent::TextDelta(text.into())),
        Ok(StreamEvent::Stop(StopReason::EndTurn)),
    ])
}

fn error(category: ErrorCategory) -> LlmError {
    LlmError::new(category, format!("{category} happened"))
}

async fn run(client: &ModelClient, observer: &mut Recorder) -> Result<ModelReply, LlmError> {
    client
        .complete(request(), observer, &CancellationToken::new())
        .await
}

#[tokio::test]
async fn a_reply_is_assembled_and_every_event_observed() {
    let provider = Scripted::new(
        "scripted",
        vec![Step::Items(vec![
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 10,
                ..Usage::default()
            })),
            Ok(StreamEvent::ThinkingDelta("hmm".into())),
            Ok(StreamEvent::ThinkingSignature("sig".into())),
            Ok(StreamEvent::TextDelta("Let me look.".into())),
            Ok(StreamEvent::ToolCallStart {
                index: 1,
                id: "c1".into(),
                name: "read".into(),
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 1,
                json: "{\"path\":\"a\"}".into(),
            }),
            Ok(StreamEvent::ToolCallEnd { index: 1 }),
            Ok(StreamEvent::ToolCallStart {
                index: 2,
                id: "c2".into(),
                name: "read".into(),
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 2,
                json: "{oops".into(),
            }),
            Ok(StreamEvent::ToolCallEnd { index: 2 }),
            Ok(StreamEvent::Usage(Usage {
                output_tokens: 7,
                ..Usage::default()
            })),
            Ok(StreamEvent::Stop(StopReason::ToolUse)),
        ])],
    );
    let mut observer = Recorder::default();
    let reply = run(&client(&provider, None), &mut observer)
        .await
        .expect("a reply");
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into())
            },
            ContentBlock::Text {
                text: "Let me look.".into()
            },
            ContentBlock::ToolUse(ToolCall {
                id: "c1".into(),
                name: "read".into(),
                input: json!({"path": "a"})
            }),
            ContentBlock::ToolUse(ToolCall {
                id: "c2".into(),
                name: "read".into(),
                input: json!({})
            }),
        ]
    );
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 10,
            output_tokens: 7,
            ..Usage::default()
        }
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.model, "main-model");
    assert_eq!(reply.provider, "scripted");
    assert!(reply.malformed_tool_args["c2"].contains("{oops"));
    assert_eq!(observer.events.len(), 12);
    // The route's model and output limit replace the request's.
    let seen = provider.seen.lock().expect("test lock")[0].clone();
    assert_eq!(
        (seen.model.as_str(), seen.max_output_tokens),
        ("main-model", 1000)
    );
}

#[tokio::test]
async fn retryable_failures_are_retried_with_backoff() {
    let provider = Scripted::new(
        "p",
        vec![
            Step::Fail(error(ErrorCategory::Overloaded)),
            Step::Items(vec![
                Ok(StreamEvent::TextDelta("partial".into())),
                Ok(StreamEvent::Error(error(ErrorCategory::Server))),
            ]),
            text_reply("done"),
        ],
    );
    let mut observer = Recorder::default();
    let started = tokio::time::Instant::now();
    let reply = run(&client(&provider, None), &mut observer)
        .await
        .expect("a reply");
    assert_eq!(
        reply.content,
        vec![ContentBlock::Text {
            text: "done".into()
        }]
    );
    assert_eq!(provider.calls(), 3);
    let attempts: Vec<(u32, ErrorCategory)> =
        observer.retries.iter().map(|(n, _, c)| (*n, *c)).collect();
    assert_eq!(
        attempts,
        vec![(2, ErrorCategory::Overloaded), (3, ErrorCategory::Server)]
    );
    assert!(observer.retries[0].1 <= MS * 2);
    assert!(observer.retries[1].1 <= MS * 4);
    let waited: Duration = observer.retries.iter().map(|(_, d, _)| *d).sum();
    assert!(started.elapsed() >= waited);
}

#[tokio::test]
async fn retry_after_is_waited_exactly() {
    let limited = LlmError {
        retry_after: Some(MS * 70),
        ..error(ErrorCategory::RateLimit)
    };
    let provider = Scripted::new("p", vec![Step::Fail(limited), text_reply("ok")]);
    let mut observer = Recorder::default();
    let started = tokio::time::Instant::now();
    run(&client(&provider, None), &mut observer)
        .await
        .expect("a reply");
    assert_eq!(
        observer.retries,
        vec![(2, MS * 70, ErrorCategory::RateLimit)]
    );
    assert!(started.elapsed() >= MS * 70);
}

#[tokio::test]
async fn a_retry_after_beyond_max_delay_stops_and_says_when() {
    let limited = LlmError {
        retry_after: Some(Duration::from_secs(3600)),
        ..error(ErrorCategory::RateLimit)
    };
    let provider = Scripted::new("p", vec![Step::Fail(limited), text_reply("never")]);
    let mut observer = Recorder::default();
    let err = run(&client(&provider, None), &mut observer)
        .await
        .expect_err("gives up");
    assert_eq!(err.category, ErrorCategory::RateLimit);
    assert!(
        err.message.contains("wait 1 h 0 min; try again after"),
        "{err}"
    );
    assert_eq!(provider.calls(), 1);
    assert!(observer.retries.is_empty());
}

#[tokio::test]
async fn a_stream_without_a_stop_is_a_network_error_and_attempts_run_out() {
    let cut = || Step::Items(vec![Ok(StreamEvent::TextDelta("half".into()))]);
    let provider = Scripted::new("p", vec![cut(), cut(), cut()]);
    let mut observer = Recorder::default();
    let err = run(&client(&provider, None), &mut observer)
        .await
        .expect_err("fails");
    assert_eq!(err.category, ErrorCategory::Network);
    assert!(
        err.message
            .contains("connection closed before the reply finished"),
        "{err}"
    );
    assert!(err.message.contains("gave up after 3 attempts"), "{err}");
    assert_eq!(provider.calls(), 3);
}

#[tokio::test]
async fn the_fallback_takes_over_when_the_primary_keeps_failing() {
    let primary = Scripted::new(
        "primary",
        vec![
            Step::Fail(error(ErrorCategory::Overloaded)),
            Step::Fail(error(ErrorCategory::Overloaded)),
            Step::Fail(error(ErrorCategory::Overloaded)),
        ],
    );
    let backup = Scripted::new("backup", vec![text_reply("from backup")]);
    let mut observer = Recorder::default();
    let reply = run(&client(&primary, Some(&backup)), &mut observer)
        .await
        .expect("a reply");
    assert_eq!(reply.model, "backup-model");
    assert_eq!(reply.provider, "backup");
    assert_eq!(
        observer.fallbacks,
        vec![("backup-model".to_string(), ErrorCategory::Overloaded)]
    );
    assert_eq!(observer.retries.len(), 2);
    assert_eq!(
        backup.seen.lock().expect("test lock")[0].model,
        "backup-model"
    );
}

#[tokio::test]
async fn a_failing_fallback_reports_both_failures() {
    let primary = Scripted::new("primary", vec![Step::Fail(error(ErrorCategory::Server))]);
    let backup = Scripted::new(
        "backup",
        vec![Step::Fail(error(ErrorCategory::InvalidRequest))],
    );
    let client = ModelClient {
        policy: RetryPolicy {
            max_attempts: 1,
            ..policy()
        },
        ..client(&primary, Some(&backup))
    };
    let err = run(&client, &mut Recorder::default())
        .await
        .expect_err("both fail");
    assert_eq!(err.category, ErrorCategory::InvalidRequest);
    assert!(
        err.message
            .contains("after `main-model` failed: server happened"),
        "{err}"
    );
}

#[tokio::test]
async fn errors_retrying_cannot_fix_neither_retry_nor_fail_over() {
    let primary = Scripted::new("primary", vec![Step::Fail(error(ErrorCategory::Auth))]);
    let backup = Scripted::new("backup", vec![text_reply("unused")]);
    let mut observer = Recorder::default();
    let err = run(&client(&primary, Some(&backup)), &mut observer)
        .await
        .expect_err("fails");
    assert_eq!(err.category, ErrorCategory::Auth);
    assert_eq!((primary.calls(), backup.calls()), (1, 0));
    assert!(observer.retries.is_empty() && observer.fallbacks.is_empty());
}

#[tokio::test]
async fn a_reply_cut_at_the_output_limit_fails_without_partial_content() {
    let provider = Scripted::new(
        "p",
        vec![Step::Items(vec![
            Ok(StreamEvent::TextDelta("The answer is".into())),
            Ok(StreamEvent::Stop(StopReason::MaxTokens)),
        ])],
    );
    let mut request = request();
    request.max_output_tokens = 256;
    let err = client(&provider, None)
        .complete(request, &mut Recorder::default(), &CancellationToken::new())
        .await
        .expect_err("cut off");
    assert_eq!(err.category, ErrorCategory::ModelBehavior);
    assert!(err.message.contains("output limit of 256 tokens"), "{err}");
    assert!(err.message.contains("nothing partial was kept"), "{err}");
    assert_eq!(provider.calls(), 1);
}

#[tokio::test]
async fn cancellation_aborts_a_silent_stream_promptly() {
    let provider = Scripted::new(
        "p",
        vec![Step::Stall(vec![StreamEvent::TextDelta("a".into())])],
    );
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(MS * 20).await;
        trigger.cancel();
    });
    let err = client(&provider, None)
        .complete(request(), &mut Recorder::default(), &cancel)
        .await
        .expect_err("cancelled");
    // The no-progress watchdog (200 ms) would have said Timeout.
    assert_eq!(err.category, ErrorCategory::Cancelled);
}

#[tokio::test]
async fn cancellation_interrupts_a_backoff() {
    let limited = LlmError {
        retry_after: Some(MS * 90),
        ..error(ErrorCategory::RateLimit)
    };
    let provider = Scripted::new("p", vec![Step::Fail(limited), text_reply("late")]);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(MS * 10).await;
        trigger.cancel();
    });
    let err = client(&provider, None)
        .complete(request(), &mut Recorder::default(), &cancel)
        .await
        .expect_err("cancelled");
    assert_eq!(err.category, ErrorCategory::Cancelled);
    assert_eq!(provider.calls(), 1);
}

/// Runs one attempt (no retries) and returns the timeout message and when it fired.
async fn timeout_of(step: Step) -> (String, Duration) {
    let provider = Scripted::new("p", vec![step]);
    let client = ModelClient {
        policy: RetryPolicy {
            max_attempts: 1,
            ..policy()
        },
        ..client(&provider, None)
    };
    let started = tokio::time::Instant::now();
    let err = run(&client, &mut Recorder::default())
        .await
        .expect_err("times out");
    assert_eq!(err.category, ErrorCategory::Timeout, "{err}");
    (err.message, started.elapsed())
}

#[tokio::test]
async fn each_watchdog_fires_at_its_own_limit() {
    let (message, after) = timeout_of(Step::Hang).await;
    assert!(message.contains("prefill_timeout"), "{message}");
    assert!(after >= MS * 400, "{after:?}");

    let (message, after) = timeout_of(Step::Stall(Vec::new())).await;
    assert!(message.contains("first_token_timeout"), "{message}");
    assert!(after >= MS * 300, "{after:?}");

    let (message, after) = timeout_of(Step::Stall(vec![StreamEvent::TextDelta("a".into())])).await;
    assert!(message.contains("no_progress_timeout"), "{message}");
    assert!(after >= MS * 200, "{after:?}");
}

#[tokio::test]
async fn a_stream_that_only_thinks_stops_at_three_times_no_progress() {
    // A thought every 2 ms keeps the 200 ms no-progress watchdog quiet, but never answers.
    let thoughts: Vec<(Duration, StreamEvent)> = (0..10_000)
        .map(|_| (MS * 2, StreamEvent::ThinkingDelta("…".into())))
        .collect();
    let (message, after) = timeout_of(Step::Timed(thoughts)).await;
    assert!(message.contains("without writing an answer"), "{message}");
    assert!(after >= MS * 600, "{after:?}");
}

#[tokio::test]
async fn thinking_followed_by_text_is_not_stopped() {
    // Two runs of thinking, each about 400 ms (under the 600 ms limit), 800 ms in all.
    let thought = || (MS * 50, StreamEvent::ThinkingDelta("…".into()));
    let mut events: Vec<(Duration, StreamEvent)> = (0..8).map(|_| thought()).collect();
    events.push((MS * 5, StreamEvent::TextDelta("answer".into())));
    events.extend((0..8).map(|_| thought()));
    events.push((MS, StreamEvent::Stop(StopReason::EndTurn)));
    let provider = Scripted::new("p", vec![Step::Timed(events)]);
    let reply = run(&client(&provider, None), &mut Recorder::default())
        .await
        .expect("a reply");
    assert_eq!(reply.content.len(), 3);
}

#[tokio::test]
async fn opening_usage_does_not_end_the_first_token_wait() {
    // Anthropic reports usage in `message_start`, before any of the reply.
    let usage = StreamEvent::Usage(Usage {
        input_tokens: 10,
        ..Usage::default()
    });
    let (message, after) = timeout_of(Step::Stall(vec![usage])).await;
    assert!(message.contains("first_token_timeout"), "{message}");
    assert!(after >= MS * 300, "{after:?}");
}

#[tokio::test]
async fn a_watchdog_ends_the_call_without_retry_or_fallback() {
    let primary = Scripted::new("primary", vec![Step::Hang, text_reply("too late")]);
    let backup = Scripted::new("backup", vec![text_reply("from backup")]);
    let client = ModelClient {
        policy: RetryPolicy {
            max_attempts: 3,
            prefill_timeout: MS * 50,
            ..policy()
        },
        ..client(&primary, Some(&backup))
    };
    let mut observer = Recorder::default();
    let err = run(&client, &mut observer).await.expect_err("times out");
    assert_eq!(err.category, ErrorCategory::Timeout);
    assert_eq!(err.watchdog, Some(Watchdog::Prefill));
    assert_eq!((primary.calls(), backup.calls()), (1, 0));
    assert!(observer.retries.is_empty() && observer.fallbacks.is_empty());
}

/// Each watchdog at its configured default, on tokio's paused clock: the call fails at that
/// exact moment, not a millisecond earlier or later.
#[tokio::test(start_paused = true)]
async fn each_watchdog_fires_at_exactly_its_default() {
    let settings = crate::config::SessionSettings::default();
    let defaults = RetryPolicy::new(&crate::config::RetrySettings::default(), &settings);
    let thoughts: Vec<(Duration, StreamEvent)> = (0..100_000)
        .map(|_| {
            (
                Duration::from_secs(60),
                StreamEvent::ThinkingDelta("…".into()),
            )
        })
        .collect();
    let cases = [
        (Step::Hang, Watchdog::Prefill, 1800),
        (Step::Stall(Vec::new()), Watchdog::FirstToken, 600),
        (
            Step::Stall(vec![StreamEvent::TextDelta("a".into())]),
            Watchdog::NoProgress,
            1200,
        ),
        // Thinking starts with the first thought, a minute in; 3 × 1200 s later it stops.
        (Step::Timed(thoughts), Watchdog::ThinkingOnly, 60 + 3600),
    ];
    for (step, watchdog, secs) in cases {
        let provider = Scripted::new("p", vec![step]);
        let client = ModelClient {
            policy: defaults.clone(),
            ..client(&provider, None)
        };
        let started = tokio::time::Instant::now();
        let err = run(&client, &mut Recorder::default())
            .await
            .expect_err("times out");
        assert_eq!(err.watchdog, Some(watchdog), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(secs), "{watchdog}");
        assert!(err.message.contains(watchdog.setting()), "{err}");
    }
}
