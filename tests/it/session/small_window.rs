//! Sessions on a small context window, as a local server gives them (llama.cpp with `-c
//! 4096`): the compact prompt chosen from the window and kept while it stays the same, a long
//! tool-using turn that never loses the request it answers, notes calls that fit the window,
//! and a reply stopped by a full window told apart from one stopped at its output limit.

use super::*;
use tern::config::ProviderKind;
use tern::domain::TurnStop;

const WINDOW: u64 = 4096;

/// An OpenAI-compatible server with a 4k window, compaction notes from `notes-model` on the
/// same mock, and `files` files of 1 to 2 KB in the project.
fn local_4k(files: usize) -> World {
    let mut world = World::new(ProviderKind::OpenAi);
    world.context_window = WINDOW;
    world.notes_model = Some("notes-model");
    for i in 0..files {
        let line = format!("{:0>59}\n", i);
        world
            .home
            .write_file(&format!("f{i}.txt"), &line.repeat(17 + i % 17));
    }
    world
}

fn compactions(events: &[SessionEvent]) -> usize {
    let compacted = |e: &&SessionEvent| matches!(e, SessionEvent::Compacted { .. });
    events.iter().filter(compacted).count()
}

fn system_text(request: &crate::support::RecordedRequest) -> String {
    request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Scripts notes for every compaction and three short turns reading `f0`–`f2`, so there is
/// history to cut.
fn script_notes_and_three_short_turns(world: &World) {
    for _ in 0..20 {
        world
            .mock
            .push_for_model("notes-model", Reply::text("NOTES: files were read."));
    }
    for i in 0..3 {
        world.mock.push_for_model(
            "primary-model",
            Reply::tool_call("file_read", json!({"path": format!("f{i}.txt")})),
        );
        world
            .mock
            .push_for_model("primary-model", Reply::text(format!("f{i} holds numbers")));
    }
}

/// Scripts a turn of ten rounds, each reading one of `f0`–`f9`, then the answer.
fn script_ten_rounds(world: &World) {
    for i in 0..10 {
        world.mock.push_for_model(
            "primary-model",
            Reply::text(format!("Reading f{i}."))
                .with_tool_call("file_read", json!({"path": format!("f{i}.txt")})),
        );
    }
    world
        .mock
        .push_for_model("primary-model", Reply::text("All ten hold numbers."));
}

#[tokio::test]
async fn a_ten_round_tool_turn_at_4k_keeps_its_request_in_every_call() {
    let world = local_4k(10);
    // Three short turns first, so there is history to cut.
    script_notes_and_three_short_turns(&world);
    let handle = world.create();
    for i in 0..3 {
        let events = turn(&handle, &format!("what is in f{i}.txt?")).await;
        assert!(completed(&events).is_some(), "{events:?}");
    }
    let before = world.mock.model_requests().len();

    // Then one turn of ten rounds, each reading a 1–2 KB file.
    const REQUEST: &str = "THE REQUEST: read all ten files, one at a time, then sum them up";
    script_ten_rounds(&world);
    let events = turn(&handle, REQUEST).await;
    assert_eq!(
        completed(&events).as_deref(),
        Some("All ten hold numbers."),
        "{:?}",
        failure(&events)
    );

    let requests: Vec<_> = world.mock.model_requests()[before..]
        .iter()
        .filter(|r| r.model() == Some("primary-model"))
        .cloned()
        .collect();
    assert_eq!(requests.len(), 11);
    for (i, request) in requests.iter().enumerate() {
        // The request is its own message (the chat format joins it to the user-role notes
        // and nudge before it), never only repeated inside the notes of a cut.
        let texts = request.texts();
        let own = format!("\n\n{REQUEST}");
        assert!(
            texts.iter().any(|t| t == REQUEST || t.ends_with(&own)),
            "call {i} lost the request: {texts:?}"
        );
        assert!(
            !texts.concat().contains("which is being answered now"),
            "call {i} cut the request out: {texts:?}"
        );
        assert_eq!(
            request.tool_use_ids(),
            request.tool_result_ids(),
            "call {i}"
        );
        let tokens = request.raw_body.len() as u64 / 4;
        assert!(tokens < WINDOW, "call {i} sent ~{tokens} tokens");
    }
    // The notes on the earlier turns are carried through every later compaction.
    let last = requests.last().expect("eleven calls").texts().concat();
    assert!(last.contains("NOTES: files were read."), "{last}");
    // Compaction makes room for several rounds at a time, not one.
    let done = compactions(&events);
    assert!((1..=5).contains(&done), "{done} compactions in ten rounds");
    // The notes calls fit the window: their output limit and their input together.
    let notes_calls: Vec<_> = world
        .mock
        .model_requests()
        .into_iter()
        .filter(|r| r.model() == Some("notes-model"))
        .collect();
    assert!(
        !notes_calls.is_empty(),
        "the earlier turns were cut with notes"
    );
    for notes in &notes_calls {
        let limit = notes.body["max_tokens"].as_u64().expect("a max_tokens");
        // A sixteenth of the window as the estimates see it: the server counted the
        // requests a little larger than estimated (the mock counts the JSON body).
        assert!((200..=256).contains(&limit), "{limit}");
        let input = notes.raw_body.len() as u64 / 4;
        assert!(input + limit <= WINDOW, "{input} + {limit}");
    }
}

#[tokio::test]
async fn the_compact_prompt_follows_the_window_and_stays_byte_identical() {
    let world = local_4k(0);
    for answer in ["one", "two", "three"] {
        world.mock.push(Reply::text(answer));
    }
    let handle = world.create();
    turn(&handle, "first").await;
    turn(&handle, "second").await;
    let requests = world.mock.model_requests();
    let (first, second) = (&requests[0], &requests[1]);
    assert_eq!(system_text(first), system_text(second), "the same bytes");
    assert_eq!(first.body["tools"], second.body["tools"]);
    assert!(
        system_text(first).starts_with("You are tern, a coding assistant in a developer's"),
        "the compact persona: {}",
        system_text(first)
    );
    let read = first.body["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["function"]["name"] == "file_read"))
        .expect("file_read is offered")["function"]
        .clone();
    assert_eq!(
        read["description"],
        "Read a text file with line numbers, whole or a range of lines."
    );
    assert_eq!(
        read["parameters"]["properties"]["path"],
        json!({"type": "string"})
    );

    // The same session on a model with a large window gets the full prompt, tier B included.
    let id = handle.id().clone();
    handle.close().await;
    let mut world = world;
    world.context_window = 200_000;
    let handle = world.resume(&id);
    turn(&handle, "third").await;
    let third = world.mock.model_requests().pop().unwrap();
    let system = system_text(&third);
    assert!(
        system.starts_with("You are tern, a coding assistant working"),
        "{system}"
    );
    assert!(system.contains("Each tool's full description"), "{system}");
    let described = third.body["tools"][0]["function"]["description"]
        .as_str()
        .unwrap_or_default()
        .len();
    assert!(described > 200, "the full description: {described} bytes");
}

/// A reply as llama.cpp's server streams it on its OpenAI endpoint when its window fills up:
/// a few words, then `finish_reason: "length"` with prompt and completion adding up to the
/// window, its `timings` beside the usage, and `[DONE]`.
const LLAMA_CPP_WINDOW_FULL: &str = concat!(
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}],\"created\":1764600000,\"id\":\"chatcmpl-Q3v9\",\"model\":\"qwen2.5-coder-0.5b-instruct-q8_0.gguf\",\"system_fingerprint\":\"b6450-cbd0f4a0\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"The tests\"}}],\"created\":1764600000,\"id\":\"chatcmpl-Q3v9\",\"model\":\"qwen2.5-coder-0.5b-instruct-q8_0.gguf\",\"system_fingerprint\":\"b6450-cbd0f4a0\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\" pass now\"}}],\"created\":1764600000,\"id\":\"chatcmpl-Q3v9\",\"model\":\"qwen2.5-coder-0.5b-instruct-q8_0.gguf\",\"system_fingerprint\":\"b6450-cbd0f4a0\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"created\":1764600001,\"id\":\"chatcmpl-Q3v9\",\"model\":\"qwen2.5-coder-0.5b-instruct-q8_0.gguf\",\"system_fingerprint\":\"b6450-cbd0f4a0\",\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":29,\"prompt_tokens\":4067,\"total_tokens\":4096},\"timings\":{\"cache_n\":3980,\"prompt_n\":87,\"prompt_ms\":412.7,\"prompt_per_token_ms\":4.74,\"prompt_per_second\":210.8,\"predicted_n\":29,\"predicted_ms\":1410.2,\"predicted_per_token_ms\":48.6,\"predicted_per_second\":20.6}}\n\n",
    "data: [DONE]\n\n",
);

/// Two turns reading files, then a third whose first reply is stopped by the full window.
async fn third_turn_meets_a_full_window(world: &World) -> Vec<SessionEvent> {
    for i in 0..2 {
        world.mock.push_for_model(
            "primary-model",
            Reply::tool_call("file_read", json!({"path": format!("f{i}.txt")})),
        );
        world
            .mock
            .push_for_model("primary-model", Reply::text(format!("read f{i}")));
    }
    world
        .mock
        .push_for_model("primary-model", Reply::raw_sse(LLAMA_CPP_WINDOW_FULL));
    world
        .mock
        .push_for_model("primary-model", Reply::text("The tests pass now."));
    world
        .mock
        .push_for_model("notes-model", Reply::text("NOTES: two files were read."));
    let handle = world.create();
    turn(&handle, "read f0.txt").await;
    turn(&handle, "read f1.txt").await;
    turn(&handle, "do the tests pass?").await
}

/// The retry a full window caused, and what it says.
fn window_retry(events: &[SessionEvent]) -> String {
    let retry = events.iter().position(|e| {
        matches!(
            e,
            SessionEvent::Retry {
                category: ErrorCategory::ContextOverflow,
                ..
            }
        )
    });
    let retry = retry.expect("a context-overflow retry");
    assert!(
        events[..retry]
            .iter()
            .any(|e| matches!(e, SessionEvent::Compacted { .. })),
        "compacted before the call is made again"
    );
    match &events[retry] {
        SessionEvent::Retry {
            message,
            discarded_chars,
            ..
        } => {
            assert_eq!(*discarded_chars, "The tests pass now".len() as u64);
            message.clone()
        }
        _ => unreachable!("found as a retry"),
    }
}

#[tokio::test]
async fn a_reply_the_server_s_full_window_stopped_compacts_and_is_made_again() {
    let world = local_4k(2);
    let events = third_turn_meets_a_full_window(&world).await;
    assert_eq!(
        completed(&events).as_deref(),
        Some("The tests pass now."),
        "{:?}",
        failure(&events)
    );
    let message = window_retry(&events);
    assert!(
        message.contains("after 29 tokens because the context window of 4096 tokens is full"),
        "{message}"
    );
    assert!(!message.contains("output limit"), "{message}");
}

#[tokio::test]
async fn a_server_window_smaller_than_configured_is_named_and_compacted_for() {
    // tern was told 128,000; the server runs with 4,096 and fills up after 29 tokens.
    let mut world = local_4k(2);
    world.context_window = 128_000;
    let events = third_turn_meets_a_full_window(&world).await;
    assert_eq!(
        completed(&events).as_deref(),
        Some("The tests pass now."),
        "{:?}",
        failure(&events)
    );
    let message = window_retry(&events);
    assert!(
        message.contains(
            "far short of its limit of 1000: the server's context window filled up at about \
             4096 tokens (4067 of prompt), while tern counts with a window of 128000"
        ),
        "{message}"
    );
    assert!(message.contains("set context_window"), "{message}");
    // The compaction worked to the window the server showed: the call made again is well
    // inside it.
    let requests = world.mock.model_requests();
    let last = requests.last().unwrap();
    let tokens = last.raw_body.len() as u64 / 4;
    assert!(tokens < 4096 * 3 / 4, "~{tokens} tokens");
    // The calls before it offered the full tools; the one made again, the small window's.
    let tool_names = |body: &serde_json::Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    let first = tool_names(&requests[0].body);
    assert!(first.iter().any(|name| name == "job_kill"), "{first:?}");
    let retried = tool_names(&last.body);
    assert!(!retried.is_empty(), "{:?}", last.body["tools"]);
    assert!(
        !retried.iter().any(|name| name == "job_kill"),
        "{retried:?}"
    );
}

#[tokio::test]
async fn a_reply_that_used_up_its_output_limit_is_still_an_output_limit() {
    let world = local_4k(0);
    world.mock.push(
        Reply::text("A long list: one, two, thr")
            .stop_reason_max_tokens()
            .usage(900, 1000, 0, 0),
    );
    let handle = world.create();
    let events = turn(&handle, "list everything").await;
    let stop = events.iter().find_map(|e| match e {
        SessionEvent::TurnFailed { stop, message, .. } => Some((*stop, message.clone())),
        _ => None,
    });
    let (stop, message) = stop.expect("the turn failed");
    assert_eq!(stop, TurnStop::OutputLimit);
    assert!(
        message.contains("cut off at the output limit of 1000 tokens"),
        "{message}"
    );
    assert_eq!(
        compactions(&events),
        0,
        "no compaction gives a reply more room"
    );
    assert_eq!(world.mock.model_requests().len(), 1, "and no second try");
}

#[tokio::test]
async fn a_turn_that_cannot_fit_the_window_fails_naming_it_and_keeps_the_request() {
    let world = local_4k(0);
    world.mock.push(Reply::text("never asked"));
    let handle = world.create();
    // About 5,000 tokens of input: more than a 4k window holds with room for a reply.
    let huge = format!("please review: {}", "word ".repeat(4_000));
    let events = turn(&handle, &huge).await;
    let (category, message) = failure(&events).expect("the turn failed");
    assert_eq!(category, ErrorCategory::ContextOverflow);
    assert!(
        message.contains("no longer fits the context window of 4096 tokens"),
        "{message}"
    );
    assert!(world.mock.model_requests().is_empty(), "nothing was sent");
    let state = handle.state().await.unwrap();
    assert!(
        conversation(&state).iter().any(|text| text == &huge),
        "the request is kept"
    );
}

#[tokio::test]
async fn a_server_that_counts_more_than_the_estimate_is_compacted_for_in_time() {
    // llama.cpp with `-c 4096` whose tokenizer and template take two bytes of the request a
    // token: more than twice tern's estimate, so a request estimated at 2,000 tokens is
    // refused. Without measuring that, the turn fails after its retry.
    let world = local_4k(10);
    world.mock.count_like_a_server(2.0, WINDOW);
    script_notes_and_three_short_turns(&world);
    script_ten_rounds(&world);
    let handle = world.create();
    let mut retries = 0;
    for i in 0..3 {
        let events = turn(&handle, &format!("what is in f{i}.txt?")).await;
        assert!(completed(&events).is_some(), "{:?}", failure(&events));
        retries += overflow_retries(&events);
    }
    let events = turn(
        &handle,
        "read all ten files, one at a time, then sum them up",
    )
    .await;
    assert_eq!(
        completed(&events).as_deref(),
        Some("All ten hold numbers."),
        "{:?}",
        failure(&events)
    );
    retries += overflow_retries(&events);
    let refused = world
        .mock
        .model_requests()
        .iter()
        .filter(|r| r.status == 400)
        .count();
    assert_eq!(
        refused, retries,
        "every refusal was compacted for and retried"
    );
    // The first refusal shows the server counts more; after it the turns compact in time.
    assert!(refused <= 1, "{refused} requests refused for their size");
}

/// How many calls a turn made again after the window refused them.
fn overflow_retries(events: &[SessionEvent]) -> usize {
    let overflow = |e: &&SessionEvent| {
        matches!(
            e,
            SessionEvent::Retry {
                category: ErrorCategory::ContextOverflow,
                ..
            }
        )
    };
    events.iter().filter(overflow).count()
}
