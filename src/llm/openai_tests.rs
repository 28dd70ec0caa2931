//! Tests of the Chat Completions request encoder, the chunk decoder and the HTTP round trip.

use super::*;
use crate::config::ProviderKind;
use crate::domain::{ContentBlock, ErrorCategory, Message, Role, ToolCall, ToolResult};
use crate::llm::test_server::{collect_stream, error_reply, ok_stream, serve_once};
use crate::llm::{ToolSpec, decode};
use futures_util::StreamExt;

fn profile(base_url: &str, key: Option<&str>) -> ProviderProfile {
    ProviderProfile {
        name: "local".into(),
        kind: ProviderKind::OpenAi,
        base_url: base_url.into(),
        api_key_env: key.map(|_| "LOCAL_API_KEY".to_string()),
        api_key: key.map(str::to_string),
        default_model: "qwen".into(),
        context_window: 32_000,
        max_output_tokens: 4096,
        written: Default::default(),
        images: false,
    }
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: "gpt-test".into(),
        system: vec!["be brief".into()],
        messages,
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "read a file".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_output_tokens: 512,
        context_window: 0,
        cache_breakpoints: vec![0],
        cache_key: None,
        images: false,
    }
}

#[test]
fn a_results_images_follow_the_tool_messages_as_a_user_message_when_taken() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut taking = request(crate::llm::attach::history_with_image(dir.path()));
    taking.images = true;
    let body = encode_request(&taking, true);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user", "user"]
    );
    assert_eq!(body["messages"][3]["content"], "a screenshot");
    let images = &body["messages"][4]["content"];
    assert_eq!(images[0]["type"], "text");
    assert_eq!(
        images[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}})
    );
    assert_eq!(body["messages"][5]["content"], "what is it?");

    taking.images = false;
    let body = encode_request(&taking, true);
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(5));
    assert!(!body.to_string().contains("iVBORw0KGgo="));
}

#[test]
fn history_becomes_chat_messages() {
    let messages = vec![
        Message::user_text("list"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    thinking: "private".into(),
                    signature: Some("s".into()),
                },
                ContentBlock::ToolUse(ToolCall {
                    id: "call_1".into(),
                    name: "read".into(),
                    input: json!({"path": "a"}),
                }),
            ],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::error(
                "call_1",
                "no such file",
            ))],
        },
        Message::user_text("try b"),
        Message::assistant_text("ok"),
    ];
    let body = encode_request(&request(messages), false);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Error: no such file"},
            {"role": "user", "content": "try b"},
            {"role": "assistant", "content": "ok"},
        ])
    );
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], json!(512));
    assert_eq!(body.get("max_completion_tokens"), None);
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "read", "description": "read a file", "parameters": {"type": "object"}}}])
    );
}

#[test]
fn only_openai_itself_gets_the_prompt_cache_key() {
    let mut keyed = request(vec![Message::user_text("x")]);
    keyed.cache_key = Some("session-1".into());
    assert_eq!(
        encode_request(&keyed, true)["prompt_cache_key"],
        json!("session-1")
    );
    // Compatible servers (vLLM, llama.cpp) may reject fields they do not know.
    assert_eq!(encode_request(&keyed, false).get("prompt_cache_key"), None);
    assert_eq!(
        encode_request(&request(vec![]), true).get("prompt_cache_key"),
        None
    );
}

#[test]
fn openai_itself_gets_max_completion_tokens() {
    let body = encode_request(&request(vec![Message::user_text("x")]), true);
    assert_eq!(body["max_completion_tokens"], json!(512));
    assert_eq!(body.get("max_tokens"), None);
    let official = OpenAiProvider::new(&profile("https://api.openai.com/v1/", Some("k")));
    assert!(official.official_api);
    assert_eq!(
        official.completions.url,
        "https://api.openai.com/v1/chat/completions"
    );
    let router = OpenAiProvider::new(&profile("https://openrouter.ai/api/v1", Some("k")));
    assert!(!router.official_api);
}

fn events(input: &str) -> Vec<Decoded> {
    decode::openai(input.as_bytes())
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let body = json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {body}\n\n")
}

#[test]
fn reasoning_fields_become_thinking() {
    let input = [
        chunk(json!({"reasoning_content": "think A"}), None),
        chunk(json!({"reasoning": "think B"}), None),
        chunk(json!({"content": "answer"}), None),
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    assert_eq!(
        events(&input),
        vec![
            Ok(StreamEvent::ThinkingDelta("think A".into())),
            Ok(StreamEvent::ThinkingDelta("think B".into())),
            Ok(StreamEvent::TextDelta("answer".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[test]
fn calls_sharing_index_zero_are_told_apart_by_id() {
    let call = |id: &str, name: &str, args: &str| json!({"tool_calls": [{"index": 0, "id": id, "function": {"name": name, "arguments": args}}]});
    let input = [
        chunk(call("a", "read", "{}"), None),
        chunk(call("b", "list", "{\"x\":1}"), None),
        chunk(json!({}), Some("stop")),
    ]
    .concat();
    // No [DONE]: the finish reason alone completes the reply; `stop` after calls means ToolUse.
    assert_eq!(
        events(&input),
        vec![
            Ok(StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "read".into()
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 0,
                json: "{}".into()
            }),
            Ok(StreamEvent::ToolCallEnd { index: 0 }),
            Ok(StreamEvent::ToolCallStart {
                index: 1,
                id: "b".into(),
                name: "list".into()
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 1,
                json: "{\"x\":1}".into()
            }),
            Ok(StreamEvent::ToolCallEnd { index: 1 }),
            Ok(StreamEvent::Stop(StopReason::ToolUse)),
        ]
    );
}

#[test]
fn finish_reasons_map() {
    let check = |reason: &str, expected: StopReason| {
        let input = [
            chunk(json!({"content": "x"}), Some(reason)),
            "data: [DONE]\n\n".into(),
        ]
        .concat();
        assert_eq!(
            events(&input).last(),
            Some(&Ok(StreamEvent::Stop(expected))),
            "{reason}"
        );
    };
    check("stop", StopReason::EndTurn);
    check("length", StopReason::MaxTokens);
    check("content_filter", StopReason::Refusal);
    check("tool_calls", StopReason::ToolUse);
    check("function_call", StopReason::ToolUse);
    check("eos", StopReason::Other("eos".into()));
}

#[test]
fn a_body_ending_without_finish_or_done_has_no_stop() {
    let out = events(&chunk(json!({"content": "half"}), None));
    assert_eq!(out, vec![Ok(StreamEvent::TextDelta("half".into()))]);
}

#[test]
fn errors_inside_the_stream() {
    let out =
        events("data: {\"error\":{\"message\":\"Provider returned error\",\"code\":502}}\n\n");
    match out.as_slice() {
        [Ok(StreamEvent::Error(err))] => assert_eq!(err.category, ErrorCategory::Server),
        other => panic!("unexpected {other:?}"),
    }
    let out = events(
        "data: {\"error\":{\"message\":\"slow\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n",
    );
    match out.as_slice() {
        [Ok(StreamEvent::Error(err))] => assert_eq!(err.category, ErrorCategory::RateLimit),
        other => panic!("unexpected {other:?}"),
    }
    let out = events("data: {not json\n\n");
    let err = out[0].clone().expect_err("a decode error");
    assert_eq!(err.category, ErrorCategory::Server);
}

#[test]
fn cached_tokens_are_split_out_of_the_prompt_count() {
    let out = events(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":80}}}\n\n",
    );
    assert_eq!(
        out,
        vec![Ok(StreamEvent::Usage(Usage {
            input_tokens: 20,
            output_tokens: 5,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 80,
        }))]
    );
}

#[test]
fn llama_cpp_timings_stand_in_for_a_missing_usage() {
    let timings = r#""timings":{"cache_n":4000,"prompt_n":67,"prompt_ms":310.2,"predicted_n":29,"predicted_ms":1201.5}"#;
    let only_timings = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}],{timings}}}\n\n"
    );
    let out = events(&only_timings);
    assert_eq!(
        out[0],
        Ok(StreamEvent::Usage(Usage {
            input_tokens: 67,
            output_tokens: 29,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 4000,
        }))
    );
    // With both, `usage` is what counts.
    let both = format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":4067,\"completion_tokens\":29}},{timings}}}\n\n"
    );
    assert_eq!(
        events(&both),
        vec![Ok(StreamEvent::Usage(Usage {
            input_tokens: 4067,
            output_tokens: 29,
            ..Usage::default()
        }))]
    );
}

#[tokio::test]
async fn streams_over_http_with_a_bearer_key() {
    let sse = [
        chunk(json!({"content": "pong"}), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (base, server) = serve_once(ok_stream("text/event-stream", sse.as_bytes())).await;
    let provider = OpenAiProvider::new(&profile(&format!("{base}/v1"), Some("sk-test")));
    let got: Vec<Decoded> =
        collect_stream(&provider, &request(vec![Message::user_text("ping")])).await;
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(recorded.json()["model"], json!("gpt-test"));
    assert_eq!(
        got,
        vec![
            Ok(StreamEvent::TextDelta("pong".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn keyless_servers_get_no_authorization_header() {
    let sse = [
        chunk(json!({"content": "hi"}), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (base, server) = serve_once(ok_stream("text/event-stream", sse.as_bytes())).await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let stream = provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
        .expect("a stream");
    let _: Vec<Decoded> = stream.collect().await;
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.header("authorization"), None);
}

#[tokio::test]
async fn a_remote_server_without_its_key_is_not_called() {
    let mut remote = profile("https://api.openai.com/v1", None);
    remote.api_key_env = Some("OPENAI_API_KEY".into());
    let provider = OpenAiProvider::new(&remote);
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("no key, no request"),
        Err(err) => err,
    };
    assert_eq!(err.category, ErrorCategory::Auth);
    assert!(err.message.contains("set OPENAI_API_KEY"), "{err}");
}

#[tokio::test]
async fn a_body_cut_mid_stream_is_a_network_error() {
    let sse = chunk(json!({"content": "half"}), None);
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        sse.len() + 500
    )
    .into_bytes();
    response.extend_from_slice(sse.as_bytes());
    let (base, server) = serve_once(response).await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let got: Vec<Decoded> =
        collect_stream(&provider, &request(vec![Message::user_text("x")])).await;
    server.await.expect("the server task");
    assert_eq!(got[0], Ok(StreamEvent::TextDelta("half".into())));
    let err = got.last().cloned().expect("an item").expect_err("the cut");
    assert_eq!(err.category, ErrorCategory::Network);
    assert!(
        err.message
            .contains("connection closed before the reply finished"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_server_says_where_to_look() {
    // Bind and drop a listener to get a port that refuses connections.
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        listener.local_addr().expect("an address").port()
    };
    let provider = OpenAiProvider::new(&profile(&format!("http://127.0.0.1:{port}/v1"), None));
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("nothing listens there"),
        Err(err) => err,
    };
    assert_eq!(err.category, ErrorCategory::Network);
    assert!(err.message.contains("could not reach"), "{err}");
    assert!(err.message.contains("is the server running?"), "{err}");
    assert!(
        err.message.contains("base_url of provider `local`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_404_names_the_model() {
    let body = r#"{"error":{"message":"The model `gpt-test` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#;
    let (base, server) = serve_once(error_reply(404, &[], body)).await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("a 404 must fail"),
        Err(err) => err,
    };
    server.await.expect("the server task");
    assert_eq!(err.category, ErrorCategory::InvalidRequest);
    assert!(err.message.contains("model name may be wrong"), "{err}");
    assert!(err.message.contains("`gpt-test`"), "{err}");
}

fn call_starts(out: &[Decoded]) -> Vec<(usize, String, String)> {
    out.iter()
        .filter_map(|item| match item {
            Ok(StreamEvent::ToolCallStart { index, id, name }) => {
                Some((*index, id.clone(), name.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn made_up_call_ids_differ_between_replies() {
    let input = [
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": "{}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
    ]
    .concat();
    let first = call_starts(&events(&input));
    let second = call_starts(&events(&input));
    assert_eq!(first.len(), 1);
    assert!(first[0].1.starts_with("call_0_"), "{first:?}");
    assert_ne!(
        first[0].1, second[0].1,
        "ids must not repeat across replies"
    );
}

#[test]
fn argument_fragments_without_a_name_never_make_a_call() {
    let fragment = |index: u64, function: Value| {
        chunk(
            json!({"tool_calls": [{"index": index, "function": function}]}),
            None,
        )
    };
    let input = [
        // Index 1 is never named: dropped.
        fragment(1, json!({"arguments": "{\"x\":"})),
        // Index 0 gets its id and arguments before its name: held, then opened whole.
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c0", "function": {"arguments": "{\"a\""}}]}),
            None,
        ),
        fragment(0, json!({"name": "read", "arguments": ":1}"})),
        fragment(1, json!({"arguments": "2}"})),
        chunk(json!({}), Some("tool_calls")),
    ]
    .concat();
    assert_eq!(
        events(&input),
        vec![
            Ok(StreamEvent::ToolCallStart {
                index: 0,
                id: "c0".into(),
                name: "read".into()
            }),
            Ok(StreamEvent::ToolCallArgsDelta {
                index: 0,
                json: "{\"a\":1}".into()
            }),
            Ok(StreamEvent::ToolCallEnd { index: 0 }),
            Ok(StreamEvent::Stop(StopReason::ToolUse)),
        ]
    );
}

#[tokio::test]
async fn a_json_error_under_status_200_is_classified_not_retried_as_a_cut() {
    let body = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    let (base, server) = serve_once(ok_stream("application/json", body.as_bytes())).await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("an error document is not a stream"),
        Err(err) => err,
    };
    server.await.expect("the server task");
    assert_eq!(err.category, ErrorCategory::ContextOverflow, "{err}");
    assert!(err.message.starts_with("local: "), "{err}");
}

#[tokio::test]
async fn a_whole_completion_instead_of_a_stream_says_so() {
    let body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    })
    .to_string();
    let (base, server) = serve_once(ok_stream(
        "application/json; charset=utf-8",
        body.as_bytes(),
    ))
    .await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("a whole completion is not a stream"),
        Err(err) => err,
    };
    server.await.expect("the server task");
    assert_eq!(err.category, ErrorCategory::InvalidRequest, "{err}");
    assert!(!err.is_retryable());
    assert!(err.message.contains("answered without streaming"), "{err}");
    assert!(
        err.message.contains("points at a streaming chat endpoint"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_labelled_json_is_still_decoded() {
    let sse = [
        chunk(json!({"content": "pong"}), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let (base, server) = serve_once(ok_stream("application/json", sse.as_bytes())).await;
    let provider = OpenAiProvider::new(&profile(&base, None));
    let got: Vec<Decoded> =
        collect_stream(&provider, &request(vec![Message::user_text("ping")])).await;
    server.await.expect("the server task");
    assert_eq!(
        got,
        vec![
            Ok(StreamEvent::TextDelta("pong".into())),
            Ok(StreamEvent::Stop(StopReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn credentials_and_query_in_base_url_stay_out_of_messages() {
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        listener.local_addr().expect("an address").port()
    };
    let base = format!("http://admin:hunter2@127.0.0.1:{port}/v1?key=topsecret");
    let provider = OpenAiProvider::new(&profile(&base, None));
    let err = match provider
        .stream(&request(vec![Message::user_text("x")]))
        .await
    {
        Ok(_) => panic!("nothing listens there"),
        Err(err) => err,
    };
    assert!(
        err.message
            .contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")),
        "{err}"
    );
    for secret in ["admin", "hunter2", "topsecret"] {
        assert!(!err.message.contains(secret), "{err}");
    }
}

#[test]
fn system_blocks_join_into_one_system_message() {
    let mut tiers = request(vec![Message::user_text("hi")]);
    tiers.system = vec!["tier a".into(), String::new(), "tier b".into()];
    let body = encode_request(&tiers, true);
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "tier a\n\ntier b"})
    );
    tiers.system.clear();
    let body = encode_request(&tiers, true);
    assert_eq!(body["messages"][0]["role"], json!("user"));
}

#[tokio::test]
async fn the_models_a_server_lists_are_read_with_the_key() {
    let list = r#"{"object":"list","data":[{"id":"gpt-4o","object":"model"},{"id":"o3"}]}"#;
    let (base, server) = serve_once(ok_stream("application/json", list.as_bytes())).await;
    let provider = OpenAiProvider::new(&profile(&format!("{base}/v1"), Some("sk-test")));
    let listed = provider.list_models().await.expect("a listing");
    let recorded = server.await.expect("the server task");
    assert_eq!(recorded.request_line, "GET /v1/models HTTP/1.1");
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(listed, Some(vec!["gpt-4o".to_owned(), "o3".to_owned()]));
    // A body that is no listing says nothing.
    let (base, _server) = serve_once(ok_stream("text/html", b"<html></html>")).await;
    let provider = OpenAiProvider::new(&profile(&format!("{base}/v1"), None));
    assert_eq!(provider.list_models().await.expect("an answer"), None);
}
