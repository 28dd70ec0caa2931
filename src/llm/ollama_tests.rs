//! Tests of the Ollama request encoder, the NDJSON decoder and the HTTP round trip.

use super::*;
use crate::config::ProviderKind;
use crate::domain::{ContentBlock, ErrorCategory, Message, Role, ToolCall, ToolResult};
use crate::llm::test_server::{collect_stream, ok_stream, serve_once};
use crate::llm::{ToolSpec, decode};

fn profile(base_url: &str) -> ProviderProfile {
    ProviderProfile {
        name: "ollama".into(),
        kind: ProviderKind::Ollama,
        base_url: base_url.into(),
        api_key_env: None,
        api_key: None,
        default_model: "llama3.2".into(),
        context_window: 16_384,
        max_output_tokens: 2048,
        written: Default::default(),
        images: false,
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "llama3.2".into(),
        system: vec!["be brief".into()],
        messages,
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "weather".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_output_tokens: 300,
        context_window: 0,
        cache_breakpoints: Vec::new(),
        cache_key: None,
        images: false,
    }
}

#[test]
fn a_results_images_follow_the_tool_messages_in_a_user_messages_images() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut taking = request(crate::llm::attach::history_with_image(dir.path()));
    taking.images = true;
    let body = encode_request(&taking, 8192);
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[4]["role"], "user");
    assert_eq!(messages[4]["images"], json!(["iVBORw0KGgo="]));
    assert_eq!(messages[5]["content"], "what is it?");
    taking.images = false;
    assert!(!encode_request(&taking, 8192).to_string().contains("images"));
}

#[test]
fn history_becomes_ollama_messages() {
    let messages = vec![
        Message::user_text("weather in Tokyo?"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: "call_0_x".into(),
                name: "get_weather".into(),
                input: json!({"city": "Tokyo"}),
            })],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::ok(
                "call_0_x", "sunny",
            ))],
        },
    ];
    let body = encode_request(&request(messages), 16_384);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "weather in Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}
            ]},
            {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
        ])
    );
    assert_eq!(
        body["options"],
        json!({"num_predict": 300, "num_ctx": 16_384})
    );
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["tools"][0]["function"]["name"], json!("get_weather"));
}

fn events(input: &str) -> Vec<Decoded> {
    decode::ollama(input.as_bytes())
}

#[test]
fn thinking_text_and_a_length_stop() {
    let input = concat!(
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"hmm\"},\"done\":false}\r\n",
        "\n",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"done\":false}\n",
        "{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"length\",\"prompt_eval_count\":3,\"eval_count\":9}",
    );
    assert_eq!(
        events(input),
        vec![
            Ok(StreamEvent::ThinkingDelta("hmm".into())),
            Ok(StreamEvent::TextDelta("Hi".into())),
            Ok(StreamEvent::Usage(Usage {
                input_tokens: 3,
                output_tokens: 9,
                ..Usage::default()
            })),
            Ok(StreamEvent::Stop(StopReason::MaxTokens)),
        ]
    );
}

#[test]
fn tool_calls_get_unique_ids_and_whole_arguments() {
    let input = "{\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"a\",\"arguments\":{\"x\":1}}},{\"function\":{\"name\":\"b\",\"arguments\":\"{\\\"y\\\":2}\"}}]},\"done\":false}\n{\"done\":true}\n";
    let first = events(input);
    let ids: Vec<String> = first
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallStart { id, .. }) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(
        ids[0].starts_with("call_0_") && ids[1].starts_with("call_1_"),
        "{ids:?}"
    );
    let args: Vec<&str> = first
        .iter()
        .filter_map(|e| match e {
            Ok(StreamEvent::ToolCallArgsDelta { json, .. }) => Some(json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, vec![r#"{"x":1}"#, r#"{"y":2}"#]);
    assert_eq!(
        first.last(),
        Some(&Ok(StreamEvent::Stop(StopReason::ToolUse)))
    );
    // Another reply's calls get different ids, so histories never hold duplicates.
    let second = events(input);
    assert_ne!(first, second);
}

#[test]
fn bad_lines_fail_and_error_lines_are_events() {
    let out =
        events("{\"response\":\"a\",\"done\":false}\nnot json at all\n{\"response\":\"b\"}\n");
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], Ok(StreamEvent::TextDelta("a".into())));
    let err = out[1].clone().expect_err("a decode error");
    assert_eq!(err.category, ErrorCategory::Server);
    assert!(err.message.contains("not json at all"), "{err}");

    let out = events("{\"error\":\"model crashed\"}\n");
    match out.as_slice() {
        [Ok(StreamEvent::Error(err))] => {
            assert_eq!(err.category, ErrorCategory::Server);
            assert!(err.message.contains("model crashed"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn streams_over_http() {
    let ndjson = "{\"message\":{\"role\":\"assistant\",\"content\":\"pong\"},\"done\":false}\n{\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\"}\n";
    let (base, server) = serve_once(ok_stream("application/x-ndjson", ndjson.as_bytes())).await;
    let provider = OllamaProvider::new(&profile(&format!("{base}/")));
    let got: Vec<Decoded> =
        collect_stream(&provider, &request(vec![Message::user_text("ping")])).await;
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.request_line, "POST /api/chat HTTP/1.1");
    assert_eq!(recorded.header("authorization"), None);
    assert_eq!(recorded.json()["options"]["num_ctx"], json!(16_384));
    assert_eq!(
        got,
        vec![
            Ok(StreamEvent::TextDelta("pong".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[test]
fn a_line_that_never_ends_is_cut_off_at_the_cap() {
    let mib = vec![b'x'; 1024 * 1024];
    let chunks = std::iter::repeat_n(mib.as_slice(), 9);
    let out = decode::decode_chunks(decode::WireFormat::Ollama, chunks);
    assert_eq!(out.len(), 1, "one error and nothing else");
    let err = out[0].clone().expect_err("the cap is 8 MiB");
    assert!(err.message.contains("a line over 8 MiB"), "{err}");
}

#[test]
fn a_model_that_does_not_fit_in_memory_is_not_retried() {
    let out = events(
        "{\"error\":\"model requires more system memory (12.3 GiB) than is available (8.0 GiB)\"}\n",
    );
    match out.as_slice() {
        [Ok(StreamEvent::Error(err))] => {
            assert_eq!(err.category, ErrorCategory::InvalidRequest, "{err}");
            assert!(err.message.contains("requires more system memory"), "{err}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn ndjson_labelled_json_is_still_decoded() {
    let ndjson = "{\"message\":{\"role\":\"assistant\",\"content\":\"po\"},\"done\":false}\n{\"message\":{\"role\":\"assistant\",\"content\":\"ng\"},\"done\":false}\n{\"done\":true,\"done_reason\":\"stop\"}\n";
    let (base, server) = serve_once(ok_stream("application/json", ndjson.as_bytes())).await;
    let provider = OllamaProvider::new(&profile(&base));
    let got: Vec<Decoded> =
        collect_stream(&provider, &request(vec![Message::user_text("ping")])).await;
    server.await.expect("the server task");
    assert_eq!(
        got,
        vec![
            Ok(StreamEvent::TextDelta("po".into())),
            Ok(StreamEvent::TextDelta("ng".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn the_models_ollama_lists_are_read_from_its_tags() {
    let tags = r#"{"models":[{"name":"llama3.2:latest","size":1},{"name":"qwen2.5-coder:7b"}]}"#;
    let (base, server) = serve_once(ok_stream("application/json", tags.as_bytes())).await;
    let provider = OllamaProvider::new(&profile(&format!("{base}/v1")));
    let listed = provider.list_models().await.expect("a listing");
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.request_line, "GET /api/tags HTTP/1.1");
    assert_eq!(
        listed,
        Some(vec![
            "llama3.2:latest".to_owned(),
            "qwen2.5-coder:7b".to_owned()
        ])
    );
}
