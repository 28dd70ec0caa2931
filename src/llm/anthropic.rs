//! The Anthropic Messages API: request encoding (with prompt-cache breakpoints) and the
//! decoder of its server-sent event stream.
//!
//! Anthropic allows four `cache_control` breakpoints per request. The prefix is cached in
//! the order tools, system, messages, so each system block (the persisted system prompt, then
//! the static context) takes one and covers the tools too; without a system prompt the tool
//! list takes one. The rest go to the latest message breakpoints the caller asked for, since a
//! later breakpoint covers more of the history. Tool call ids are rewritten into the form Anthropic accepts
//! ([`ToolIds`]), since a history may hold other providers' ids. The decoder follows
//! Anthropic's versioning promise that new event, block and delta types may appear at any
//! time: anything unknown is skipped.

use super::attach;
use super::decode::Decoded;
use super::error::{classify_stream_error, not_json};
use super::history::{Turn, merge_turns};
use super::http::{self, Endpoint};
use super::sse::{SseHandler, SseWire};
use super::{BoxFuture, ChatRequest, EventStream, LlmError, Provider, StopReason, StreamEvent};
use crate::config::ProviderProfile;
use crate::domain::{ContentBlock, ErrorCategory, Role, Usage};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// The API version this encoder and decoder were written against.
const API_VERSION: &str = "2023-06-01";

/// Anthropic's limit on `cache_control` breakpoints in one request.
const MAX_CACHE_BREAKPOINTS: usize = 4;

/// A provider speaking the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    name: String,
    messages: Endpoint,
    models: Endpoint,
    api_key: Option<String>,
    api_key_env: Option<String>,
    /// A server of this wire on this machine or the local network (llama.cpp's), whose small
    /// models may write a tool call as text.
    local: bool,
    /// The profile's `images`.
    images: bool,
}

impl AnthropicProvider {
    /// A provider for the profile's base URL (with or without a trailing `/` or `/v1`). Does
    /// no IO: the HTTP client is built on the first request.
    pub fn new(profile: &ProviderProfile) -> Self {
        Self {
            name: profile.name.clone(),
            messages: Endpoint::new(profile, &["/v1"], "/v1/messages"),
            models: Endpoint::new(profile, &["/v1"], "/v1/models"),
            api_key: profile.api_key.clone().filter(|key| !key.is_empty()),
            api_key_env: profile.api_key_env.clone(),
            local: profile.asks_server(),
            images: profile.images,
        }
    }

    /// A request to `endpoint` with the version and key headers set.
    fn request(
        &self,
        method: reqwest::Method,
        endpoint: &Endpoint,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let mut builder = endpoint
            .request(method)?
            .header("anthropic-version", API_VERSION);
        match (&self.api_key, &self.api_key_env) {
            (Some(key), _) => {
                builder = builder.header("x-api-key", http::secret_header(key, &self.name)?);
            }
            (None, Some(var)) => return Err(http::missing_key(&self.name, var)),
            // A keyless proxy in front of the API: let it decide.
            (None, None) => {}
        }
        Ok(builder)
    }

    fn explain(&self, err: LlmError, model: &str) -> LlmError {
        http::explain(err, &self.name, self.api_key_env.as_deref(), model)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn reads_calls_in_text(&self) -> bool {
        self.local
    }

    fn takes_images(&self) -> bool {
        self.images
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let builder = self
                .request(reqwest::Method::POST, &self.messages)?
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(&encode_request(request));
            let decoder = SseWire::<AnthropicEvents>::default();
            http::open_stream(&self.messages, builder, decoder, |err| {
                self.explain(err, &request.model)
            })
            .await
        })
    }

    fn wire_body(&self, request: &ChatRequest) -> Value {
        encode_request(request)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Option<Vec<String>>, LlmError>> {
        Box::pin(async move {
            // One page of the most the API gives at once (20 unless asked) holds every
            // model it has.
            let mut page = self.models.clone();
            let joiner = if page.url.contains('?') { '&' } else { '?' };
            page.url = format!("{}{joiner}limit=1000", page.url);
            let builder = self.request(reqwest::Method::GET, &page)?;
            let response = http::probe(&page, builder, |err| self.explain(err, "")).await?;
            Ok(http::listed(response, "data", "id").await)
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async move {
            let builder = self.request(reqwest::Method::GET, &self.models)?;
            http::probe(&self.models, builder, |err| self.explain(err, "")).await?;
            Ok(format!(
                "{} answered and accepted the key",
                self.models.display
            ))
        })
    }
}

/// The JSON body of a streamed Messages request.
pub(crate) fn encode_request(request: &ChatRequest) -> Value {
    let ephemeral = || json!({"type": "ephemeral"});
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_output_tokens,
        "stream": true,
    });
    let mut breakpoints_left = MAX_CACHE_BREAKPOINTS;
    // The first and the last system block take a breakpoint (the persisted system prompt
    // and the static context); blocks between them ride on the last one's.
    let blocks: Vec<&str> = request.system_blocks().collect();
    let system: Vec<Value> = blocks
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let mut block = json!({"type": "text", "text": text});
            if i == 0 || i + 1 == blocks.len() {
                block["cache_control"] = ephemeral();
                breakpoints_left -= 1;
            }
            block
        })
        .collect();
    let system_cached = !system.is_empty();
    if system_cached {
        body["system"] = Value::Array(system);
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        if !system_cached && let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
            breakpoints_left -= 1;
        }
        body["tools"] = Value::Array(tools);
    }

    // A thinking block is only accepted back with the signature that proves it unedited;
    // one without (from another provider, or cut short) is left out.
    let mut turns = merge_turns(&request.messages, |block| match block {
        ContentBlock::Thinking { signature, .. } => {
            signature.as_deref().is_some_and(|sig| !sig.is_empty())
        }
        _ => true,
    });
    for turn in turns.iter_mut().filter(|turn| turn.role == Role::User) {
        // Tool results must open the user turn that answers a tool call; a note merged in
        // ahead of them would make the request invalid.
        turn.blocks
            .sort_by_key(|(_, block)| !matches!(block, ContentBlock::ToolResult(_)));
    }

    let mut ids = ToolIds::default();
    let mut encoded: Vec<Vec<Value>> = Vec::with_capacity(turns.len());
    for (turn_index, turn) in turns.iter().enumerate() {
        let blocks = turn
            .blocks
            .iter()
            .map(|(_, block)| encode_block(block, turn_index, &mut ids, request.images))
            .collect();
        encoded.push(blocks);
    }
    let requested: Vec<usize> = request
        .cache_breakpoints
        .iter()
        .copied()
        .filter(|&index| index < request.messages.len())
        .collect();
    for (turn, position) in cache_targets(&turns, &requested, breakpoints_left) {
        if let Some(block) = encoded
            .get_mut(turn)
            .and_then(|blocks| blocks.get_mut(position))
        {
            block["cache_control"] = ephemeral();
        }
    }
    body["messages"] = Value::Array(
        turns
            .iter()
            .zip(encoded)
            .map(|(turn, content)| {
                let role = match turn.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": content})
            })
            .collect(),
    );
    body
}

/// Where the message breakpoints land: for each of the latest `limit` requested message
/// indices, the last block (in wire order) that came from that message or an earlier one.
/// Thinking blocks cannot carry `cache_control`, so they are passed over.
fn cache_targets(
    turns: &[Turn<'_>],
    requested: &[usize],
    limit: usize,
) -> BTreeSet<(usize, usize)> {
    // Every block that may carry a breakpoint, in wire order, with the message it came from.
    let candidates: Vec<(usize, (usize, usize))> = turns
        .iter()
        .enumerate()
        .flat_map(|(turn_index, turn)| {
            turn.blocks
                .iter()
                .enumerate()
                .filter(|(_, (_, block))| !matches!(block, ContentBlock::Thinking { .. }))
                .map(move |(position, (origin, _))| (*origin, (turn_index, position)))
        })
        .collect();
    let mut marks: Vec<usize> = requested.to_vec();
    marks.sort_unstable();
    marks.dedup();
    let skip = marks.len().saturating_sub(limit);
    marks
        .into_iter()
        .skip(skip)
        .filter_map(|mark| {
            candidates
                .iter()
                .rev()
                .find(|(origin, _)| *origin <= mark)
                .map(|&(_, target)| target)
        })
        .collect()
}

/// Rewrites tool call ids into what Anthropic accepts: only `[a-zA-Z0-9_-]`, and unique
/// within the request. Other providers' ids (`functions.read:0`) break the first rule, and a
/// history spanning several providers or sessions can repeat an id. Invalid characters become
/// `_`; an id already handed out gets `_2`, `_3`, … in order of appearance. Each result takes
/// the id of its own call: the call with that original id in the latest assistant turn (in
/// order, when one turn repeats an id). The rewrite of an id depends only on what precedes
/// it, so a growing history keeps its encoded prefix byte for byte and the prompt cache holds.
#[derive(Debug, Default)]
struct ToolIds {
    /// Every id handed out so far.
    used: HashSet<String>,
    /// Original id → the turn of the latest calls with it and their rewritten ids, in order.
    latest: HashMap<String, (usize, VecDeque<String>)>,
}

impl ToolIds {
    /// The id for a call with `original` id, made in assistant turn `turn`.
    fn call(&mut self, original: &str, turn: usize) -> String {
        let base = valid_tool_id(original);
        let mut id = base.clone();
        let mut n = 2;
        while self.used.contains(&id) {
            id = format!("{base}_{n}");
            n += 1;
        }
        self.used.insert(id.clone());
        let entry = self
            .latest
            .entry(original.to_string())
            .or_insert_with(|| (turn, VecDeque::new()));
        if entry.0 != turn {
            *entry = (turn, VecDeque::new());
        }
        entry.1.push_back(id.clone());
        id
    }

    /// The id for a result answering `original`.
    fn result(&mut self, original: &str) -> String {
        match self.latest.get_mut(original) {
            Some((_, ids)) if ids.len() > 1 => ids.pop_front().unwrap_or_default(),
            Some((_, ids)) if !ids.is_empty() => ids[0].clone(),
            // A result without a call; Anthropic will say so, in terms the user can find.
            _ => valid_tool_id(original),
        }
    }
}

/// `id` with every character outside `[a-zA-Z0-9_-]` replaced by `_`.
fn valid_tool_id(id: &str) -> String {
    if id.is_empty() {
        return "tool".to_string();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn encode_block(block: &ContentBlock, turn: usize, ids: &mut ToolIds, images: bool) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            signature,
        } => json!({
            "type": "thinking",
            "thinking": thinking,
            "signature": signature.as_deref().unwrap_or_default(),
        }),
        ContentBlock::ToolUse(call) => {
            let input = if call.input.is_object() {
                call.input.clone()
            } else {
                json!({})
            };
            let id = ids.call(&call.id, turn);
            json!({"type": "tool_use", "id": id, "name": call.name, "input": input})
        }
        ContentBlock::ToolResult(result) => {
            let id = ids.result(&result.tool_use_id);
            let mut block = json!({"type": "tool_result", "tool_use_id": id});
            let images = attach::images_of(result, images);
            if !images.is_empty() {
                // Text and images together: the content becomes a list of blocks.
                let text = (!result.content.is_empty())
                    .then(|| json!({"type": "text", "text": result.content}));
                let images = images.into_iter().map(|image| {
                    json!({
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": image.media_type,
                            "data": image.data,
                        },
                    })
                });
                block["content"] = text.into_iter().chain(images).collect();
            } else if !result.content.is_empty() {
                block["content"] = json!(result.content);
            }
            if result.is_error {
                block["is_error"] = json!(true);
            }
            block
        }
    }
}

/// Reads the Messages event stream into [`StreamEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct AnthropicEvents {
    /// Content indices of open tool_use blocks.
    open_tools: BTreeSet<usize>,
    /// Tool blocks whose input came whole in `content_block_start`; deltas for them would
    /// duplicate it.
    tools_with_input: BTreeSet<usize>,
    stop_reason: Option<StopReason>,
    /// `message_stop` arrived: the reply is complete and anything after it is ignored.
    stopped: bool,
}

impl SseHandler for AnthropicEvents {
    fn event(&mut self, name: &str, data: &str, out: &mut Vec<Decoded>) -> Result<(), LlmError> {
        if self.stopped {
            return Ok(());
        }
        let value: Value =
            serde_json::from_str(data).map_err(|_| not_json("a stream event", data))?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(name);
        let index = value
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage").and_then(parse_usage) {
                    out.push(Ok(StreamEvent::Usage(usage)));
                }
            }
            "content_block_start" => {
                if let Some(block) = value.get("content_block") {
                    self.block_start(index, block, out);
                }
            }
            "content_block_delta" => {
                if let Some(delta) = value.get("delta") {
                    self.block_delta(index, delta, out);
                }
            }
            // Only tool blocks have an end event; the guard also forgets the closed block.
            "content_block_stop" if self.open_tools.remove(&index) => {
                out.push(Ok(StreamEvent::ToolCallEnd { index }));
            }
            "message_delta" => {
                let reason = value.pointer("/delta/stop_reason").and_then(Value::as_str);
                if reason == Some("model_context_window_exceeded") {
                    // The reply was cut short like at the output limit, but no larger limit
                    // helps: the prompt left no room. It must not be kept as an answer.
                    out.push(Ok(StreamEvent::Error(context_window_full())));
                    self.stopped = true;
                    return Ok(());
                }
                if let Some(reason) = reason {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = value.get("usage").and_then(parse_usage) {
                    out.push(Ok(StreamEvent::Usage(usage)));
                }
            }
            "message_stop" => {
                self.close_tools(out);
                let reason = self.stop_reason.take().unwrap_or(StopReason::EndTurn);
                out.push(Ok(StreamEvent::Stop(reason)));
                self.stopped = true;
            }
            "error" => {
                let text = |pointer: &str| {
                    value
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                };
                let err = classify_stream_error(text("/error/type"), text("/error/message"));
                out.push(Ok(StreamEvent::Error(err)));
            }
            // `ping` and event types newer than this decoder.
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<Decoded>) {
        // A stream cut after the stop reason but before `message_stop` still carried the
        // whole reply. (`message_stop` itself takes the reason.)
        if let Some(reason) = self.stop_reason.take() {
            self.close_tools(out);
            out.push(Ok(StreamEvent::Stop(reason)));
        }
    }
}

impl AnthropicEvents {
    fn block_start(&mut self, index: usize, block: &Value, out: &mut Vec<Decoded>) {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "text" => out.extend(fragment(block, "text").map(|t| Ok(StreamEvent::TextDelta(t)))),
            "thinking" => {
                out.extend(fragment(block, "thinking").map(|t| Ok(StreamEvent::ThinkingDelta(t))));
                out.extend(
                    fragment(block, "signature").map(|s| Ok(StreamEvent::ThinkingSignature(s))),
                );
            }
            "tool_use" => {
                self.open_tools.insert(index);
                out.push(Ok(StreamEvent::ToolCallStart {
                    index,
                    id: text("id").to_string(),
                    name: text("name").to_string(),
                }));
                if let Some(input) = block.get("input").and_then(Value::as_object)
                    && !input.is_empty()
                {
                    self.tools_with_input.insert(index);
                    out.push(Ok(StreamEvent::ToolCallArgsDelta {
                        index,
                        json: Value::Object(input.clone()).to_string(),
                    }));
                }
            }
            _ => {}
        }
    }

    fn block_delta(&self, index: usize, delta: &Value, out: &mut Vec<Decoded>) {
        let kind = delta
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let event = match kind {
            "text_delta" => fragment(delta, "text").map(StreamEvent::TextDelta),
            "thinking_delta" => fragment(delta, "thinking").map(StreamEvent::ThinkingDelta),
            "signature_delta" => fragment(delta, "signature").map(StreamEvent::ThinkingSignature),
            "input_json_delta" if !self.tools_with_input.contains(&index) => {
                fragment(delta, "partial_json")
                    .map(|json| StreamEvent::ToolCallArgsDelta { index, json })
            }
            _ => None,
        };
        out.extend(event.map(Ok));
    }

    fn close_tools(&mut self, out: &mut Vec<Decoded>) {
        for index in std::mem::take(&mut self.open_tools) {
            out.push(Ok(StreamEvent::ToolCallEnd { index }));
        }
    }
}

/// The text under `key`, unless it is absent or empty: empty fragments (the first
/// `input_json_delta` of every call, an empty opening text block) say nothing.
fn fragment(object: &Value, key: &str) -> Option<String> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

/// Reads a usage object; every field is optional, and absent ones count as zero (the model
/// client keeps the largest value seen for each).
fn parse_usage(value: &Value) -> Option<Usage> {
    let usage = value.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input_tokens: count("input_tokens"),
        output_tokens: count("output_tokens"),
        cache_creation_input_tokens: count("cache_creation_input_tokens"),
        cache_read_input_tokens: count("cache_read_input_tokens"),
    })
}

/// The error for a reply Anthropic stopped because the context window filled up.
fn context_window_full() -> LlmError {
    LlmError::new(
        ErrorCategory::ContextOverflow,
        "the reply was cut off because the context window is full; nothing partial was kept; \
         compact the session or use a model with a larger window",
    )
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

#[cfg(test)]
#[path = "anthropic_tests.rs"]
mod tests;
