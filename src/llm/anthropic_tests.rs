//! Tests of the Anthropic request encoder, the event decoder and the HTTP round trip.

use super::*;
use crate::config::ProviderKind;
use crate::domain::{ErrorCategory, Message, ToolCall, ToolResult};
use crate::llm::test_server::{error_reply, ok_stream, serve_once};
use crate::llm::{ToolSpec, decode};
use futures_util::StreamExt;
use serde_json::json;
use std::time::Duration;

fn profile(base_url: &str) -> ProviderProfile {
    ProviderProfile {
        name: "anthropic".into(),
        kind: ProviderKind::Anthropic,
        base_url: base_url.into(),
        api_key_env: Some("ANTHROPIC_API_KEY".into()),
        api_key: Some("test-key".into()),
        default_model: "claude-test".into(),
        context_window: 200_000,
        max_output_tokens: 8192,
        written: Default::default(),
        images: false,
    }
}

fn request(messages: Vec<Message>, breakpoints: Vec<usize>) -> ChatRequest {
    ChatRequest {
        model: "claude-test".into(),
        system: vec!["be brief".into()],
        messages,
        tools: vec![
            ToolSpec {
                name: "read".into(),
                description: "read a file".into(),
                input_schema: json!({"type": "object"}),
            },
            ToolSpec {
                name: "write".into(),
                description: "write a file".into(),
                input_schema: json!({"type": "object"}),
            },
        ],
        max_output_tokens: 1024,
        context_window: 0,
        cache_breakpoints: breakpoints,
        cache_key: None,
        images: false,
    }
}

fn assistant(blocks: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::Assistant,
        content: blocks,
    }
}

fn user(blocks: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::User,
        content: blocks,
    }
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::Text { text: text.into() }
}

/// Paths of every block carrying `cache_control`, as `messages[i].content[j]`.
fn cache_marks(body: &Value) -> Vec<String> {
    let mut marks = Vec::new();
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if block.get("cache_control").is_some() {
                marks.push(format!("messages[{i}].content[{j}]"));
            }
        }
    }
    marks
}

#[test]
fn each_system_block_carries_cache_control_and_covers_the_tools() {
    let mut tiers = request(vec![Message::user_text("hi")], vec![]);
    tiers.system = vec!["tier a".into(), String::new(), "tier b".into()];
    let body = encode_request(&tiers);
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "tier a", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "tier b", "cache_control": {"type": "ephemeral"}},
        ])
    );
    // Tools come before the system prompt in the cached prefix.
    assert!(
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    let mut no_system = request(vec![Message::user_text("hi")], vec![]);
    no_system.system.clear();
    let body = encode_request(&no_system);
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn system_carries_cache_control() {
    let body = encode_request(&request(vec![Message::user_text("hi")], vec![]));
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(body["tools"][1].get("cache_control"), None);
    assert_eq!(body["tools"][1]["input_schema"], json!({"type": "object"}));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["max_tokens"], json!(1024));
    assert_eq!(body["model"], json!("claude-test"));
    assert!(cache_marks(&body).is_empty());
}

#[test]
fn consecutive_same_role_messages_merge() {
    let messages = vec![
        Message::user_text("one"),
        Message::user_text("two"),
        Message::assistant_text("three"),
    ];
    let body = encode_request(&request(messages, vec![]));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "three"}]},
        ])
    );
}

#[test]
fn thinking_tool_use_and_results_round_trip() {
    let messages = vec![
        Message::user_text("list files"),
        assistant(vec![
            ContentBlock::Thinking {
                thinking: "use ls".into(),
                signature: Some("sig==".into()),
            },
            ContentBlock::Thinking {
                thinking: "unsigned".into(),
                signature: None,
            },
            ContentBlock::ToolUse(ToolCall {
                id: "toolu_1".into(),
                name: "shell".into(),
                input: json!({"cmd": "ls"}),
            }),
        ]),
        user(vec![ContentBlock::ToolResult(ToolResult::error(
            "toolu_1", "denied",
        ))]),
    ];
    let body = encode_request(&request(messages, vec![]));
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "use ls", "signature": "sig=="},
            {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": "ls"}},
        ])
    );
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "denied", "is_error": true}])
    );
}

#[test]
fn tool_results_open_a_merged_user_turn() {
    let messages = vec![
        Message::user_text("go"),
        assistant(vec![ContentBlock::ToolUse(ToolCall {
            id: "t".into(),
            name: "read".into(),
            input: json!({}),
        })]),
        Message::user_text("also check the tests"),
        user(vec![ContentBlock::ToolResult(ToolResult::ok("t", "ok"))]),
    ];
    let body = encode_request(&request(messages, vec![]));
    assert_eq!(
        body["messages"][2]["content"][0]["type"],
        json!("tool_result")
    );
    assert_eq!(body["messages"][2]["content"][1]["type"], json!("text"));
}

#[test]
fn message_breakpoints_land_on_the_last_block_of_the_message() {
    let messages = vec![
        Message::user_text("a"),
        Message::user_text("b"),
        Message::assistant_text("c"),
        Message::user_text("d"),
    ];
    // Message 0 was merged with message 1: its breakpoint goes on the first block of turn 0.
    let body = encode_request(&request(messages.clone(), vec![0, 3]));
    assert_eq!(
        cache_marks(&body),
        vec!["messages[0].content[0]", "messages[2].content[0]"]
    );
    // Out-of-range indices are ignored rather than guessed at.
    let body = encode_request(&request(messages, vec![1, 9]));
    assert_eq!(cache_marks(&body), vec!["messages[0].content[1]"]);
}

#[test]
fn at_most_four_breakpoints_keeping_the_latest() {
    let messages: Vec<Message> = (0..6)
        .map(|i| {
            if i % 2 == 0 {
                Message::user_text(format!("u{i}"))
            } else {
                Message::assistant_text(format!("a{i}"))
            }
        })
        .collect();
    // One system block leaves three for the history.
    let body = encode_request(&request(messages.clone(), vec![1, 3, 5, 0]));
    assert_eq!(
        cache_marks(&body),
        vec![
            "messages[1].content[0]",
            "messages[3].content[0]",
            "messages[5].content[0]"
        ]
    );
    // Tier A and tier B take one each, leaving two.
    let mut tiers = request(messages.clone(), vec![1, 3, 5, 0]);
    tiers.system = vec!["tier a".into(), "tier b".into()];
    let body = encode_request(&tiers);
    assert_eq!(
        cache_marks(&body),
        vec!["messages[3].content[0]", "messages[5].content[0]"]
    );
    // Without a system prompt the tool list takes one instead.
    let mut no_system = request(messages, vec![1, 3, 5, 0]);
    no_system.system.clear();
    let body = encode_request(&no_system);
    assert_eq!(body.get("system"), None);
    assert_eq!(cache_marks(&body).len(), 3);
}

#[test]
fn breakpoints_skip_thinking_blocks() {
    let messages = vec![
        Message::user_text("q"),
        assistant(vec![
            text("answer"),
            ContentBlock::Thinking {
                thinking: "late".into(),
                signature: Some("s".into()),
            },
        ]),
    ];
    let body = encode_request(&request(messages, vec![1]));
    assert_eq!(cache_marks(&body), vec!["messages[1].content[0]"]);
}

fn events(input: &str) -> Vec<Decoded> {
    decode::anthropic(input.as_bytes())
}

#[test]
fn unknown_events_blocks_and_deltas_are_ignored() {
    let input = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n",
        "event: brand_new\ndata: {\"type\":\"brand_new\",\"x\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"hologram\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"hologram_delta\",\"z\":2}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}",
    );
    let usage = Usage {
        input_tokens: 3,
        ..Usage::default()
    };
    assert_eq!(
        events(input),
        vec![
            Ok(StreamEvent::Usage(usage)),
            Ok(StreamEvent::TextDelta("hi".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[test]
fn a_data_line_that_is_not_json_fails_the_stream() {
    let long = "x".repeat(500);
    let input =
        format!("event: ping\ndata: {{\"type\":\"ping\"}}\n\ndata: <html>{long}\n\ndata: {{}}\n\n");
    let out = events(&input);
    assert_eq!(out.len(), 1, "{out:?}");
    let err = out[0].clone().expect_err("a decode error");
    assert_eq!(err.category, ErrorCategory::Server);
    assert!(err.is_retryable());
    assert!(err.message.contains("<html>xxx"), "{err}");
    assert!(err.message.len() < 400, "the excerpt is bounded: {err}");
}

#[test]
fn in_stream_errors_are_classified() {
    let out = events(
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}\n\n",
    );
    match out.as_slice() {
        [Ok(StreamEvent::Error(err))] => {
            assert_eq!(err.category, ErrorCategory::RateLimit);
            assert!(err.message.contains("slow down"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_stream_cut_after_the_stop_reason_still_stops() {
    let out = events(concat!(
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n",
    ));
    assert_eq!(
        out,
        vec![
            Ok(StreamEvent::ToolCallStart {
                index: 0,
                id: "t".into(),
                name: "n".into()
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 0,
                json: "{}".into()
            }),
            Ok(StreamEvent::ToolCallEnd { index: 0 }),
            Ok(StreamEvent::Stop(StopReason::ToolUse)),
        ]
    );
}

#[test]
fn tool_input_given_whole_at_block_start_is_used_once() {
    let out = events(concat!(
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{\"a\":1}}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n",
        "data: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
    ));
    let args: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallArgsDelta { json, .. }) => Some(json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, vec![r#"{"a":1}"#]);
}

#[tokio::test]
async fn streams_over_http_with_the_right_headers() {
    let sse = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"pong\"}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let (base, server) = serve_once(ok_stream("text/event-stream", sse.as_bytes())).await;
    // A base URL ending in /v1/ is tolerated.
    let provider = AnthropicProvider::new(&profile(&format!("{base}/v1/")));
    let req = request(vec![Message::user_text("ping")], vec![]);
    let stream = provider.stream(&req).await.expect("a stream");
    let got: Vec<Decoded> = stream.collect().await;
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.request_line, "POST /v1/messages HTTP/1.1");
    assert_eq!(recorded.header("x-api-key"), Some("test-key"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    assert!(
        recorded
            .header("user-agent")
            .is_some_and(|ua| ua.starts_with("tern/"))
    );
    assert_eq!(
        recorded.json()["messages"][0]["content"][0]["text"],
        json!("ping")
    );
    assert!(
        got.contains(&Ok(StreamEvent::TextDelta("pong".into()))),
        "{got:?}"
    );
    assert_eq!(
        got.last(),
        Some(&Ok(StreamEvent::Stop(StopReason::EndTurn)))
    );
}

#[tokio::test]
async fn error_replies_are_classified_with_retry_after() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"too fast"}}"#;
    let (base, server) = serve_once(error_reply(429, &[("retry-after", "3")], body)).await;
    let provider = AnthropicProvider::new(&profile(&base));
    let req = request(vec![Message::user_text("x")], vec![]);
    let err = match provider.stream(&req).await {
        Ok(_) => panic!("a 429 must fail"),
        Err(err) => err,
    };
    server.await.expect("the server task");
    assert_eq!(err.category, ErrorCategory::RateLimit);
    assert_eq!(err.retry_after, Some(Duration::from_secs(3)));
    assert!(err.message.contains("too fast"), "{err}");
}

#[tokio::test]
async fn a_missing_key_names_the_variable_without_a_request() {
    let mut keyless = profile("http://127.0.0.1:9");
    keyless.api_key = None;
    let provider = AnthropicProvider::new(&keyless);
    let req = request(vec![Message::user_text("x")], vec![]);
    let err = match provider.stream(&req).await {
        Ok(_) => panic!("no key, no request"),
        Err(err) => err,
    };
    assert_eq!(err.category, ErrorCategory::Auth);
    assert!(err.message.contains("ANTHROPIC_API_KEY"), "{err}");
}

#[test]
fn whitespace_only_replies_are_not_sent_back() {
    let messages = vec![
        Message::user_text("hi"),
        Message::assistant_text("\n\n"),
        Message::user_text("still there?"),
    ];
    let body = encode_request(&request(messages, vec![]));
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "text", "text": "still there?"},
        ]}])
    );
}

fn call_block(id: &str) -> ContentBlock {
    ContentBlock::ToolUse(ToolCall {
        id: id.into(),
        name: "read".into(),
        input: json!({}),
    })
}

fn result_block(id: &str, output: &str) -> ContentBlock {
    ContentBlock::ToolResult(ToolResult::ok(id, output))
}

/// The (call id, result id, result content) triples of an encoded request, in order.
fn wire_ids(body: &Value) -> (Vec<String>, Vec<(String, String)>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => calls.push(block["id"].as_str().unwrap_or("?").to_string()),
                Some("tool_result") => results.push((
                    block["tool_use_id"].as_str().unwrap_or("?").to_string(),
                    block["content"].as_str().unwrap_or("?").to_string(),
                )),
                _ => {}
            }
        }
    }
    (calls, results)
}

#[test]
fn tool_ids_are_made_valid_and_unique_and_stay_paired() {
    let messages = vec![
        Message::user_text("go"),
        assistant(vec![call_block("functions.read:0"), call_block("dup")]),
        user(vec![
            result_block("functions.read:0", "first"),
            result_block("dup", "second"),
        ]),
        // Another provider's reply reusing both ids.
        assistant(vec![call_block("dup"), call_block("functions.read:0")]),
        user(vec![
            result_block("functions.read:0", "fourth"),
            result_block("dup", "third"),
        ]),
        // One turn repeating an id: results pair with calls in order.
        assistant(vec![call_block("dup"), call_block("dup")]),
        user(vec![
            result_block("dup", "fifth"),
            result_block("dup", "sixth"),
        ]),
    ];
    let body = encode_request(&request(messages.clone(), vec![]));
    let (calls, results) = wire_ids(&body);
    assert_eq!(
        calls,
        [
            "functions_read_0",
            "dup",
            "dup_2",
            "functions_read_0_2",
            "dup_3",
            "dup_4"
        ]
    );
    let paired: Vec<(&str, &str)> = results
        .iter()
        .map(|(id, content)| (id.as_str(), content.as_str()))
        .collect();
    assert_eq!(
        paired,
        [
            ("functions_read_0", "first"),
            ("dup", "second"),
            ("functions_read_0_2", "fourth"),
            ("dup_2", "third"),
            ("dup_3", "fifth"),
            ("dup_4", "sixth"),
        ]
    );
    // The same history encodes the same, and a longer one keeps the shared prefix intact.
    assert_eq!(encode_request(&request(messages.clone(), vec![])), body);
    let mut longer = messages;
    longer.push(assistant(vec![call_block("dup")]));
    let longer_body = encode_request(&request(longer, vec![]));
    let prefix = body["messages"].as_array().expect("messages");
    assert_eq!(
        &longer_body["messages"].as_array().expect("messages")[..prefix.len()],
        prefix.as_slice()
    );
    assert_eq!(
        wire_ids(&longer_body).0.last().map(String::as_str),
        Some("dup_5")
    );
}

#[test]
fn a_full_context_window_fails_the_reply() {
    let out = events(concat!(
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"The answer is\"}}\n\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"model_context_window_exceeded\"},\"usage\":{\"output_tokens\":3}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    ));
    match out.as_slice() {
        [Ok(StreamEvent::TextDelta(_)), Ok(StreamEvent::Error(err))] => {
            assert_eq!(err.category, ErrorCategory::ContextOverflow);
            assert!(err.message.contains("context window is full"), "{err}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn redirects_are_reported_not_followed() {
    let response = concat!(
        "HTTP/1.1 307 Temporary Redirect\r\n",
        "location: https://other.example/anthropic/v1/messages?session=s3cret\r\n",
        "content-length: 0\r\nconnection: close\r\n\r\n",
    );
    let (base, server) = serve_once(response.as_bytes().to_vec()).await;
    let provider = AnthropicProvider::new(&profile(&base));
    let req = request(vec![Message::user_text("x")], vec![]);
    let err = match provider.stream(&req).await {
        Ok(_) => panic!("a redirect must fail"),
        Err(err) => err,
    };
    server.await.expect("the server task");
    assert_eq!(err.category, ErrorCategory::InvalidRequest, "{err}");
    assert!(!err.is_retryable());
    assert!(
        err.message
            .contains("base_url redirects to https://other.example/anthropic (HTTP 307)"),
        "{err}"
    );
    assert!(err.message.contains("to that address"), "{err}");
    assert!(!err.message.contains("s3cret"), "{err}");
}
