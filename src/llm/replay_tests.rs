//! Recorded provider replies served over real HTTP on 127.0.0.1 into
//! [`ModelClient::complete`]: the whole path a live call takes (request, status and content
//! type checks, chunked decoding, assembly, the client's verdict) against real bytes.
//!
//! The recordings are read from `../shared/fixtures/providers` next to the crate, as the
//! conformance tests do; when that folder is absent those tests print a notice and pass. The
//! tests with bodies written here always run.

use super::test_server::{ok_stream, serve_once};
use super::{
    AnthropicProvider, ChatRequest, LlmError, ModelClient, ModelReply, ModelRoute, OpenAiProvider,
    Provider, RetryPolicy, StopReason,
};
use crate::config::{ProviderKind, ProviderProfile};
use crate::domain::{ContentBlock, ErrorCategory, Message, ToolCall, Usage};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A recorded body, or `None` (with a printed notice) when the fixture folder is absent.
fn fixture(name: &str) -> Option<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/providers");
    if !dir.is_dir() {
        eprintln!(
            "notice: {} is absent; replay of {name} skipped",
            dir.display()
        );
        return None;
    }
    let path = dir.join(name);
    Some(std::fs::read(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display())))
}

fn profile(kind: ProviderKind, base_url: &str) -> ProviderProfile {
    ProviderProfile {
        name: "replay".into(),
        kind,
        base_url: base_url.into(),
        api_key_env: None,
        api_key: Some("test-key".into()),
        default_model: "recorded".into(),
        context_window: 200_000,
        max_output_tokens: 1024,
        written: Default::default(),
        images: false,
    }
}

/// Serves `response` once and runs one call through a client whose only route is
/// `provider` built on the server's base URL.
async fn complete_against(
    response: Vec<u8>,
    provider: impl FnOnce(&str) -> Arc<dyn Provider>,
) -> Result<ModelReply, LlmError> {
    let (base, server) = serve_once(response).await;
    let route = ModelRoute::new(provider(&base), "recorded", 1024, 100_000);
    let client = ModelClient::new(route, None, RetryPolicy::default());
    let request = ChatRequest {
        model: String::new(),
        system: vec!["be brief".into()],
        messages: vec![Message::user_text("What is the weather?")],
        tools: Vec::new(),
        max_output_tokens: 0,
        context_window: 0,
        cache_breakpoints: Vec::new(),
        cache_key: None,
        images: false,
    };
    let result = client
        .complete(request, &mut (), &CancellationToken::new())
        .await;
    server.await.expect("the server task");
    result
}

fn anthropic(base: &str) -> Arc<dyn Provider> {
    Arc::new(AnthropicProvider::new(&profile(
        ProviderKind::Anthropic,
        base,
    )))
}

fn openai(base: &str) -> Arc<dyn Provider> {
    Arc::new(OpenAiProvider::new(&profile(ProviderKind::OpenAi, base)))
}

fn call(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    })
}

#[tokio::test]
async fn a_recorded_anthropic_tool_use_reply_assembles() {
    let Some(body) = fixture("anthropic/a2_anthropic_tool_use_recorded.sse") else {
        return;
    };
    let reply = complete_against(ok_stream("text/event-stream", &body), anthropic)
        .await
        .expect("a reply");
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::Text {
                text: "I'll get the current weather in San Francisco for you in Fahrenheit.".into()
            },
            call(
                "toolu_01RaX2WYWRWCbaeFHssmGJXG",
                "get_weather",
                json!({"city": "San Francisco", "units": "fahrenheit"})
            ),
        ]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        (reply.usage.input_tokens, reply.usage.output_tokens),
        (397, 89)
    );
    assert!(reply.malformed_tool_args.is_empty());
}

#[tokio::test]
async fn a_recorded_openai_parallel_tool_call_reply_assembles() {
    let Some(body) = fixture("openai/o2_openai_parallel_tool_calls_recorded.sse") else {
        return;
    };
    let reply = complete_against(ok_stream("text/event-stream; charset=utf-8", &body), openai)
        .await
        .expect("a reply");
    assert_eq!(
        reply.content,
        vec![
            call(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                json!({"city": "Edinburgh", "country": "GB", "units": "c"})
            ),
            call(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                json!({"ticker": "AAPL", "exchange": "NASDAQ"})
            ),
        ]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 149,
            output_tokens: 60,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn a_recorded_openai_text_reply_assembles() {
    let Some(body) = fixture("openai/o1_openai_text_recorded.sse") else {
        return;
    };
    let reply = complete_against(ok_stream("text/event-stream", &body), openai)
        .await
        .expect("a reply");
    match reply.content.as_slice() {
        [ContentBlock::Text { text }] => {
            assert!(
                text.starts_with("I'm unable to provide real-time"),
                "{text}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn a_reply_cut_by_a_full_context_window_fails_without_partial_content() {
    let sse = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":199990,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"The fix is to\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"model_context_window_exceeded\"},\"usage\":{\"output_tokens\":10}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let err = complete_against(ok_stream("text/event-stream", sse.as_bytes()), anthropic)
        .await
        .expect_err("cut off");
    assert_eq!(err.category, ErrorCategory::ContextOverflow, "{err}");
    assert!(
        err.message
            .contains("the reply was cut off because the context window is full"),
        "{err}"
    );
}

#[tokio::test]
async fn a_json_error_under_status_200_fails_once_with_its_own_category() {
    // The server answers one connection only: a retry would fail to connect (Network).
    let body = r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens"}}"#;
    let err = complete_against(ok_stream("application/json", body.as_bytes()), openai)
        .await
        .expect_err("an error reply");
    assert_eq!(err.category, ErrorCategory::ContextOverflow, "{err}");
    assert!(!err.message.contains("connection closed"), "{err}");
}
