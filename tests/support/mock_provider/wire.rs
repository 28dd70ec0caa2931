//! Rendering a [`Reply`] into the bytes of one wire format: Anthropic Messages SSE, OpenAI
//! Chat Completions SSE or Ollama NDJSON, streamed or whole. The shapes follow recorded
//! provider responses, including the details decoders trip on: Anthropic's pings between
//! blocks and its empty first `input_json_delta`, OpenAI's tool-call id and name on the first
//! fragment only and its `choices: []` usage chunk, Ollama's whole-object tool arguments.

use super::DEFAULT_MODEL;
use super::http::Outgoing;
use super::reply::{Block, Body, Message, Reply, Stop};
use serde_json::{Value, json};

/// The wire format a model request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    Anthropic,
    OpenAi,
    Ollama,
}

/// A fixed timestamp: the mock's output is byte-for-byte the same on every run.
const CREATED_AT: &str = "2025-01-01T00:00:00Z";
const CREATED: u64 = 1_735_689_600;

/// `[input, output, cache_read, cache_creation]` token counts.
type Usage = [u64; 4];

/// The provider's error body shape, for errors the mock itself raises.
pub(super) fn error_body(wire: Wire, kind: &str, message: &str) -> Value {
    match wire {
        Wire::Anthropic => json!({
            "type": "error",
            "error": { "type": kind, "message": message }
        }),
        Wire::OpenAi => json!({
            "error": { "message": message, "type": kind, "param": null, "code": null }
        }),
        Wire::Ollama => json!({ "error": message }),
    }
}

/// Ollama's `GET /api/tags`.
pub(super) fn ollama_tags(names: &[String]) -> Value {
    let models: Vec<Value> = names
        .iter()
        .map(|name| {
            json!({
                "name": name, "model": name, "size": 0, "digest": "mock", "modified_at": CREATED_AT
            })
        })
        .collect();
    json!({ "models": models })
}

/// `GET /v1/models`: one listing that OpenAI's and Anthropic's model-list decoders both accept.
pub(super) fn model_list(names: &[String]) -> Value {
    let data: Vec<Value> = names
        .iter()
        .map(|id| {
            json!({
                "id": id, "object": "model", "type": "model", "display_name": id,
                "created": CREATED, "created_at": CREATED_AT, "owned_by": "mock"
            })
        })
        .collect();
    json!({
        "object": "list", "data": data, "has_more": false,
        "first_id": names.first(), "last_id": names.last()
    })
}

/// What rendering needs to know about the request.
pub(super) struct Ctx {
    wire: Wire,
    seq: usize,
    model: String,
    stream: bool,
    include_usage: bool,
    /// The request's size in tokens, as the server counts them.
    input_tokens: u64,
    /// The output limit the request asked for, when it named one.
    max_output: Option<u64>,
}

impl Ctx {
    pub(super) fn new(wire: Wire, seq: usize, body: &Value, input_tokens: u64) -> Self {
        let stream_flag = body.get("stream").and_then(Value::as_bool);
        // Mirrors the real servers: Ollama streams unless told not to, the others only when
        // asked, so a provider that forgets `"stream": true` fails here as it would for real.
        let stream = match wire {
            Wire::Ollama => stream_flag != Some(false),
            Wire::Anthropic | Wire::OpenAi => stream_flag == Some(true),
        };
        let include_usage = body.pointer("/stream_options/include_usage") == Some(&json!(true));
        let model = body.get("model").and_then(Value::as_str);
        let model = model.unwrap_or(DEFAULT_MODEL).to_owned();
        let max_output = [
            "/max_tokens",
            "/max_completion_tokens",
            "/options/num_predict",
        ]
        .iter()
        .find_map(|pointer| body.pointer(pointer).and_then(Value::as_u64));
        Ctx {
            wire,
            seq,
            model,
            stream,
            include_usage,
            input_tokens,
            max_output,
        }
    }
}

/// Turns a reply into a response for the request's wire format. Tool calls without a fixed
/// id get the next one from `next_tool`; every id sent is appended to `ids`.
pub(super) fn render(
    ctx: &Ctx,
    reply: Reply,
    next_tool: &mut u64,
    ids: &mut Vec<String>,
) -> Outgoing {
    let mut outgoing = match reply.body {
        Body::Error { status, body } => Outgoing::full(status, "application/json", body),
        Body::Raw { content_type, body } => {
            let events = body.split_inclusive("\n\n").map(str::to_owned).collect();
            Outgoing::events(&content_type, events)
        }
        Body::Message(mut message) => {
            message.blocks.sort_by_key(Block::rank);
            let prefix = if ctx.wire == Wire::Anthropic {
                "toolu"
            } else {
                "call"
            };
            for block in &mut message.blocks {
                // Ollama's format has no tool-call ids; the client makes its own.
                if let Block::Tool { id, .. } = block
                    && ctx.wire != Wire::Ollama
                {
                    let id = id.get_or_insert_with(|| {
                        *next_tool += 1;
                        format!("{prefix}_mock_{next_tool}")
                    });
                    ids.push(id.clone());
                }
            }
            let usage = resolve_usage(ctx, &message);
            match (ctx.wire, ctx.stream) {
                (Wire::Anthropic, true) => sse(anthropic_events(ctx, &message, usage)),
                (Wire::OpenAi, true) => sse(openai_events(ctx, &message, usage)),
                (Wire::Ollama, true) => {
                    Outgoing::events("application/x-ndjson", ollama_lines(ctx, &message, usage))
                }
                (wire, false) => Outgoing::json(200, whole_message(ctx, wire, &message, usage)),
            }
        }
    };
    outgoing.headers.extend(reply.headers);
    outgoing.pacing = reply.pacing;
    outgoing
}

fn sse(events: Vec<String>) -> Outgoing {
    let mut outgoing = Outgoing::events("text/event-stream; charset=utf-8", events);
    outgoing
        .headers
        .push(("cache-control".to_owned(), "no-cache".to_owned()));
    outgoing
}

/// The scripted usage, or an estimate: input from the request size, output from the reply;
/// a reply stopped at the output limit used up the limit the request asked for, as with a
/// real server.
fn resolve_usage(ctx: &Ctx, message: &Message) -> Usage {
    message.usage.unwrap_or_else(|| {
        if let (Some(Stop::MaxTokens), Some(limit)) = (message.stop, ctx.max_output) {
            return [ctx.input_tokens, limit, 0, 0];
        }
        let chars: usize = message
            .blocks
            .iter()
            .map(|block| match block {
                Block::Thinking { text, .. } | Block::Text(text) => text.chars().count(),
                Block::Tool { name, args, .. } => name.len() + args.to_string().len(),
            })
            .sum();
        [ctx.input_tokens, (chars / 4).max(1) as u64, 0, 0]
    })
}

fn stop_name(wire: Wire, message: &Message) -> &'static str {
    let has_tools = message
        .blocks
        .iter()
        .any(|b| matches!(b, Block::Tool { .. }));
    let default = if has_tools {
        Stop::ToolUse
    } else {
        Stop::EndTurn
    };
    match (wire, message.stop.unwrap_or(default)) {
        (Wire::Anthropic, Stop::EndTurn) => "end_turn",
        (Wire::Anthropic, Stop::ToolUse) => "tool_use",
        (Wire::Anthropic, Stop::MaxTokens) => "max_tokens",
        (Wire::Anthropic, Stop::Refusal) => "refusal",
        (Wire::OpenAi, Stop::EndTurn) => "stop",
        (Wire::OpenAi, Stop::ToolUse) => "tool_calls",
        (Wire::OpenAi, Stop::MaxTokens) => "length",
        (Wire::OpenAi, Stop::Refusal) => "content_filter",
        (Wire::Ollama, Stop::MaxTokens) => "length",
        (Wire::Ollama, _) => "stop",
    }
}

/// Splits text into word-sized deltas, each keeping its leading whitespace, the way models
/// stream tokens.
fn word_deltas(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() && current.chars().any(|p| !p.is_whitespace()) {
            pieces.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Splits a string into up to three pieces on character boundaries, so that decoders must
/// join JSON arguments across fragments.
fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// The concatenated text and thinking of a message, for the non-streaming formats.
fn joined(message: &Message) -> (String, String) {
    let (mut text, mut thinking) = (String::new(), String::new());
    for block in &message.blocks {
        match block {
            Block::Text(t) => text.push_str(t),
            Block::Thinking { text: t, .. } => thinking.push_str(t),
            Block::Tool { .. } => {}
        }
    }
    (text, thinking)
}

fn anthropic_event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("unknown").to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

fn anthropic_usage(usage: Usage) -> Value {
    let [input, output, cache_read, cache_creation] = usage;
    json!({
        "input_tokens": input,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output
    })
}

fn anthropic_events(ctx: &Ctx, message: &Message, usage: Usage) -> Vec<String> {
    let mut start_usage = anthropic_usage(usage);
    start_usage["output_tokens"] = json!(1);
    let mut events = vec![
        anthropic_event(json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_mock_{}", ctx.seq), "type": "message", "role": "assistant",
                "model": ctx.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": start_usage
            }
        })),
        anthropic_event(json!({ "type": "ping" })),
    ];
    for (index, block) in message.blocks.iter().enumerate() {
        if index > 0 {
            // Real streams interleave pings anywhere; decoders must skip them.
            events.push(anthropic_event(json!({ "type": "ping" })));
        }
        let (start, deltas) = match block {
            Block::Thinking { text, signature } => {
                let mut deltas: Vec<Value> = word_deltas(text)
                    .into_iter()
                    .map(|piece| json!({ "type": "thinking_delta", "thinking": piece }))
                    .collect();
                deltas.push(json!({ "type": "signature_delta", "signature": signature }));
                (
                    json!({ "type": "thinking", "thinking": "", "signature": "" }),
                    deltas,
                )
            }
            Block::Text(text) => {
                let deltas = word_deltas(text)
                    .into_iter()
                    .map(|piece| json!({ "type": "text_delta", "text": piece }))
                    .collect();
                (json!({ "type": "text", "text": "" }), deltas)
            }
            Block::Tool { id, name, args } => {
                // The API's first fragment is always empty.
                let deltas = std::iter::once(String::new())
                    .chain(thirds(&args.to_string()))
                    .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }))
                    .collect();
                (
                    json!({ "type": "tool_use", "id": id, "name": name, "input": {} }),
                    deltas,
                )
            }
        };
        events.push(anthropic_event(json!({
            "type": "content_block_start", "index": index, "content_block": start
        })));
        for delta in deltas {
            events.push(anthropic_event(json!({
                "type": "content_block_delta", "index": index, "delta": delta
            })));
        }
        events.push(anthropic_event(
            json!({ "type": "content_block_stop", "index": index }),
        ));
    }
    if let Some((kind, text)) = &message.stream_error {
        events.push(anthropic_event(error_body(Wire::Anthropic, kind, text)));
        return events;
    }
    events.push(anthropic_event(json!({
        "type": "message_delta",
        "delta": { "stop_reason": stop_name(Wire::Anthropic, message), "stop_sequence": null },
        "usage": anthropic_usage(usage)
    })));
    events.push(anthropic_event(json!({ "type": "message_stop" })));
    events
}

fn openai_usage(usage: Usage) -> Value {
    let [input, output, cache_read, cache_creation] = usage;
    // OpenAI counts cached tokens inside prompt_tokens and has no cache-write figure.
    let prompt = input + cache_read + cache_creation;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": { "cached_tokens": cache_read }
    })
}

fn openai_events(ctx: &Ctx, message: &Message, usage: Usage) -> Vec<String> {
    let chunk = |choices: Value, usage: Value| {
        let mut chunk = json!({
            "id": format!("chatcmpl-mock-{}", ctx.seq), "object": "chat.completion.chunk",
            "created": CREATED, "model": ctx.model, "system_fingerprint": "fp_mock",
            "choices": choices
        });
        // With include_usage every chunk carries `usage`, null until the last one.
        if ctx.include_usage {
            chunk["usage"] = usage;
        }
        format!("data: {chunk}\n\n")
    };
    let choice = |delta: Value, finish: Value| {
        let choice =
            json!({ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish });
        chunk(json!([choice]), Value::Null)
    };
    let delta = |delta: Value| choice(delta, Value::Null);

    let mut events = vec![delta(json!({ "role": "assistant", "content": "" }))];
    let mut tool_index = 0;
    for block in &message.blocks {
        match block {
            // The field DeepSeek, vLLM and llama.cpp use for reasoning on this API.
            Block::Thinking { text, .. } => {
                for piece in word_deltas(text) {
                    events.push(delta(json!({ "reasoning_content": piece })));
                }
            }
            Block::Text(text) => {
                for piece in word_deltas(text) {
                    events.push(delta(json!({ "content": piece })));
                }
            }
            Block::Tool { id, name, args } => {
                events.push(delta(json!({ "tool_calls": [{
                    "index": tool_index, "id": id, "type": "function",
                    "function": { "name": name, "arguments": "" }
                }] })));
                for piece in thirds(&args.to_string()) {
                    events.push(delta(json!({ "tool_calls": [{
                        "index": tool_index, "function": { "arguments": piece }
                    }] })));
                }
                tool_index += 1;
            }
        }
    }
    if let Some((kind, text)) = &message.stream_error {
        events.push(format!(
            "data: {}\n\n",
            error_body(Wire::OpenAi, kind, text)
        ));
        return events;
    }
    events.push(choice(json!({}), json!(stop_name(Wire::OpenAi, message))));
    if ctx.include_usage {
        events.push(chunk(json!([]), openai_usage(usage)));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn ollama_lines(ctx: &Ctx, message: &Message, usage: Usage) -> Vec<String> {
    let line = |message: Value| {
        let line = json!({
            "model": ctx.model, "created_at": CREATED_AT, "message": message, "done": false
        });
        format!("{line}\n")
    };
    let mut lines = Vec::new();
    let mut calls = Vec::new();
    for block in &message.blocks {
        match block {
            Block::Thinking { text, .. } => {
                for piece in word_deltas(text) {
                    let message = json!({ "role": "assistant", "content": "", "thinking": piece });
                    lines.push(line(message));
                }
            }
            Block::Text(text) => {
                for piece in word_deltas(text) {
                    lines.push(line(json!({ "role": "assistant", "content": piece })));
                }
            }
            Block::Tool { name, args, .. } => {
                calls.push(json!({ "function": { "name": name, "arguments": args } }));
            }
        }
    }
    // Ollama sends all tool calls whole, in one message.
    if !calls.is_empty() {
        lines.push(line(
            json!({ "role": "assistant", "content": "", "tool_calls": calls }),
        ));
    }
    if let Some((_, text)) = &message.stream_error {
        lines.push(format!("{}\n", error_body(Wire::Ollama, "", text)));
        return lines;
    }
    let done = ollama_done(
        ctx,
        message,
        usage,
        json!({ "role": "assistant", "content": "" }),
    );
    lines.push(format!("{done}\n"));
    lines
}

fn ollama_done(ctx: &Ctx, message: &Message, usage: Usage, reply: Value) -> Value {
    let [input, output, cache_read, cache_creation] = usage;
    json!({
        "model": ctx.model, "created_at": CREATED_AT, "message": reply, "done": true,
        "done_reason": stop_name(Wire::Ollama, message),
        "total_duration": 1_000_000, "load_duration": 1_000,
        "prompt_eval_count": input + cache_read + cache_creation, "prompt_eval_duration": 1_000,
        "eval_count": output, "eval_duration": 1_000
    })
}

/// The non-streaming response body of each format.
fn whole_message(ctx: &Ctx, wire: Wire, message: &Message, usage: Usage) -> Value {
    let (text, thinking) = joined(message);
    let tools = message.blocks.iter().filter_map(|b| match b {
        Block::Tool { id, name, args } => Some((id, name, args)),
        _ => None,
    });
    match wire {
        Wire::Anthropic => {
            let content: Vec<Value> = message
                .blocks
                .iter()
                .map(|block| match block {
                    Block::Thinking { text, signature } => {
                        json!({ "type": "thinking", "thinking": text, "signature": signature })
                    }
                    Block::Text(text) => json!({ "type": "text", "text": text }),
                    Block::Tool { id, name, args } => {
                        json!({ "type": "tool_use", "id": id, "name": name, "input": args })
                    }
                })
                .collect();
            json!({
                "id": format!("msg_mock_{}", ctx.seq), "type": "message", "role": "assistant",
                "model": ctx.model, "content": content,
                "stop_reason": stop_name(wire, message), "stop_sequence": null,
                "usage": anthropic_usage(usage)
            })
        }
        Wire::OpenAi => {
            let content = if text.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let mut reply = json!({ "role": "assistant", "content": content });
            let calls: Vec<Value> = tools
                .map(|(id, name, args)| {
                    json!({
                        "id": id, "type": "function",
                        "function": { "name": name, "arguments": args.to_string() }
                    })
                })
                .collect();
            if !calls.is_empty() {
                reply["tool_calls"] = json!(calls);
            }
            if !thinking.is_empty() {
                reply["reasoning_content"] = json!(thinking);
            }
            json!({
                "id": format!("chatcmpl-mock-{}", ctx.seq), "object": "chat.completion",
                "created": CREATED, "model": ctx.model, "system_fingerprint": "fp_mock",
                "choices": [{
                    "index": 0, "message": reply, "logprobs": null,
                    "finish_reason": stop_name(wire, message)
                }],
                "usage": openai_usage(usage)
            })
        }
        Wire::Ollama => {
            let mut reply = json!({ "role": "assistant", "content": text });
            let calls: Vec<Value> = tools
                .map(|(_, name, args)| json!({ "function": { "name": name, "arguments": args } }))
                .collect();
            if !calls.is_empty() {
                reply["tool_calls"] = json!(calls);
            }
            if !thinking.is_empty() {
                reply["thinking"] = json!(thinking);
            }
            ollama_done(ctx, message, usage, reply)
        }
    }
}
