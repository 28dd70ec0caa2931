//! OpenAI Chat Completions: request encoding and the decoder of its server-sent event stream.
//!
//! This one wire format reaches many servers (OpenAI, OpenRouter, llama.cpp's server, vLLM,
//! Ollama's `/v1`), and they differ in the details: reasoning arrives as `reasoning_content`
//! or `reasoning`, some send a tool call's `id` on every fragment and some never send an
//! `index`, some report `finish_reason: stop` after a tool call, errors may arrive inside the
//! stream. The decoder accepts all of these and keys tool calls by its own sequential index.
//! A call is opened only once a fragment names it; arguments that arrive first are held, and
//! dropped if no name ever follows, since a nameless call can be neither run nor answered.

use super::attach::{self, Inline};
use super::decode::Decoded;
use super::error::{classify_error_value, not_json};
use super::history::{joined_text, merge_turns};
use super::http::{self, Endpoint};
use super::sse::{SseHandler, SseWire};
use super::{BoxFuture, ChatRequest, EventStream, LlmError, Provider, StopReason, StreamEvent};
use crate::config::ProviderProfile;
use crate::domain::{ContentBlock, Role, ToolCall, ToolResult, Usage};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A provider speaking OpenAI Chat Completions.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    name: String,
    completions: Endpoint,
    models: Endpoint,
    api_key: Option<String>,
    api_key_env: Option<String>,
    /// Whether a request without a key is pointless (a remote server); local servers
    /// (llama.cpp, vLLM, Ollama's `/v1`) are called without one.
    needs_key: bool,
    /// OpenAI itself wants `max_completion_tokens`; compatible servers mostly only know the
    /// older `max_tokens`.
    official_api: bool,
    /// The profile's `images`.
    images: bool,
}

impl OpenAiProvider {
    /// A provider for the profile's base URL (`https://api.openai.com/v1`, or any compatible
    /// server's). Does no IO.
    pub fn new(profile: &ProviderProfile) -> Self {
        let endpoint = |path: &str| Endpoint::new(profile, &["/chat/completions"], path);
        let official_api = reqwest::Url::parse(profile.base_url.trim())
            .ok()
            .and_then(|url| url.host_str().map(|host| host == "api.openai.com"))
            .unwrap_or(false);
        Self {
            name: profile.name.clone(),
            completions: endpoint("/chat/completions"),
            models: endpoint("/models"),
            api_key: profile.api_key.clone().filter(|key| !key.is_empty()),
            api_key_env: profile.api_key_env.clone(),
            needs_key: profile.needs_key(),
            official_api,
            images: profile.images,
        }
    }

    fn request(
        &self,
        method: reqwest::Method,
        endpoint: &Endpoint,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let mut builder = endpoint.request(method)?;
        match (&self.api_key, &self.api_key_env) {
            (Some(key), _) => {
                let bearer = http::secret_header(&format!("Bearer {}", key.trim()), &self.name)?;
                builder = builder.header(reqwest::header::AUTHORIZATION, bearer);
            }
            (None, Some(var)) if self.needs_key => return Err(http::missing_key(&self.name, var)),
            // A local server, or a proxy that holds the key itself: let it decide.
            (None, _) => {}
        }
        Ok(builder)
    }

    fn explain(&self, err: LlmError, model: &str) -> LlmError {
        http::explain(err, &self.name, self.api_key_env.as_deref(), model)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn takes_images(&self) -> bool {
        self.images
    }

    /// Every compatible server but OpenAI's own: llama.cpp, vLLM, LM Studio, gateways.
    fn reads_calls_in_text(&self) -> bool {
        !self.official_api
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let builder = self
                .request(reqwest::Method::POST, &self.completions)?
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(&encode_request(request, self.official_api));
            let decoder = SseWire::<OpenAiEvents>::default();
            http::open_stream(&self.completions, builder, decoder, |err| {
                self.explain(err, &request.model)
            })
            .await
        })
    }

    fn wire_body(&self, request: &ChatRequest) -> Value {
        encode_request(request, self.official_api)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Option<Vec<String>>, LlmError>> {
        Box::pin(async move {
            let builder = self.request(reqwest::Method::GET, &self.models)?;
            let response = http::probe(&self.models, builder, |err| self.explain(err, "")).await?;
            Ok(http::listed(response, "data", "id").await)
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async move {
            let builder = self.request(reqwest::Method::GET, &self.models)?;
            http::probe(&self.models, builder, |err| self.explain(err, "")).await?;
            Ok(format!("{} answered", self.models.display))
        })
    }
}

/// The JSON body of a streamed Chat Completions request. `official_api` selects OpenAI's own
/// name for the output limit and its `prompt_cache_key`, which compatible servers may not
/// accept.
pub(crate) fn encode_request(request: &ChatRequest, official_api: bool) -> Value {
    let tool_message = |result: &ToolResult| {
        json!({
            "role": "tool",
            "tool_call_id": result.tool_use_id,
            "content": tool_result_text(result),
        })
    };
    let assistant_message = |text: String, calls: Vec<&ToolCall>| {
        let mut message = json!({"role": "assistant"});
        message["content"] = if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            json!(text)
        };
        if !calls.is_empty() {
            let calls = calls.iter().map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.input.to_string()},
                })
            });
            message["tool_calls"] = calls.collect();
        }
        message
    };
    let images_message = |images: Vec<Inline>| {
        let images = images
            .iter()
            .map(|image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}));
        let note = json!({"type": "text", "text": attach::IMAGES_NOTE});
        json!({"role": "user", "content": std::iter::once(note).chain(images).collect::<Value>()})
    };
    let messages = chat_messages(request, tool_message, images_message, assistant_message);
    let limit_field = if official_api {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    body[limit_field] = json!(request.max_output_tokens);
    if official_api && let Some(key) = &request.cache_key {
        body["prompt_cache_key"] = json!(key);
    }
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(request.tools.iter().map(function_tool).collect());
    }
    body
}

/// A tool in the `{type: function, function: {…}}` shape Chat Completions and Ollama share.
pub(crate) fn function_tool(tool: &super::ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    })
}

/// The `messages` of a request in the chat shape Chat Completions and Ollama share: the
/// system prompt first, reasoning left out (Chat Completions cannot take it back), and each
/// user turn's tool results as `tool` messages ahead of its text, since they must directly
/// follow the assistant message that made the calls. A tool message cannot hold an image: when
/// the request takes images, those the results returned follow them in one user message. The
/// formats differ in how a tool result, that message of images and an assistant turn (its
/// joined text and its calls) are written.
pub(crate) fn chat_messages(
    request: &ChatRequest,
    tool_message: impl Fn(&ToolResult) -> Value,
    images_message: impl Fn(Vec<Inline>) -> Value,
    assistant_message: impl Fn(String, Vec<&ToolCall>) -> Value,
) -> Vec<Value> {
    let mut messages = Vec::new();
    let system = request.joined_system();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    let turns = merge_turns(&request.messages, |block| {
        !matches!(block, ContentBlock::Thinking { .. })
    });
    for turn in &turns {
        let text = joined_text(turn);
        match turn.role {
            Role::User => {
                let mut images = Vec::new();
                for (_, block) in &turn.blocks {
                    if let ContentBlock::ToolResult(result) = block {
                        messages.push(tool_message(result));
                        images.extend(attach::images_of(result, request.images));
                    }
                }
                if !images.is_empty() {
                    messages.push(images_message(images));
                }
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let calls = turn
                    .blocks
                    .iter()
                    .filter_map(|(_, block)| match block {
                        ContentBlock::ToolUse(call) => Some(call),
                        _ => None,
                    })
                    .collect();
                messages.push(assistant_message(text, calls));
            }
        }
    }
    messages
}

/// A tool result's text; formats without an error flag get the failure said in words.
pub(crate) fn tool_result_text(result: &ToolResult) -> String {
    if result.is_error {
        format!("Error: {}", result.content)
    } else {
        result.content.clone()
    }
}

/// One tool call being streamed.
#[derive(Debug)]
struct OpenCall {
    id: String,
    open: bool,
}

/// Fragments of a call not yet named: a call can only be opened once its name is known.
#[derive(Debug, Default)]
struct UnnamedCall {
    /// The id, if a fragment carried one.
    id: String,
    arguments: String,
}

/// Reads the Chat Completions chunk stream into [`StreamEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct OpenAiEvents {
    /// Calls in the order they started; the position is the event index.
    calls: Vec<OpenCall>,
    /// The server's `index` of a call → its position in `calls`.
    by_wire_index: HashMap<u64, usize>,
    /// Fragments for server indices that no fragment has named yet. A name arriving later
    /// opens the call with them; when none does, they are dropped.
    unnamed: HashMap<u64, UnnamedCall>,
    /// Makes the ids made up for calls that came without one unique across replies, as the
    /// Ollama decoder does; chosen when first needed.
    id_suffix: String,
    finish: Option<StopReason>,
    /// `[DONE]` arrived; nothing after it counts.
    done: bool,
}

/// The wire index used for the legacy single `function_call` delta.
const LEGACY_FUNCTION_CALL: u64 = u64::MAX;

impl SseHandler for OpenAiEvents {
    fn event(&mut self, _name: &str, data: &str, out: &mut Vec<Decoded>) -> Result<(), LlmError> {
        if self.done {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            self.conclude(true, out);
            return Ok(());
        }
        let value: Value =
            serde_json::from_str(data).map_err(|_| not_json("a stream chunk", data))?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            out.push(Ok(StreamEvent::Error(classify_error_value(error))));
            return Ok(());
        }
        for choice in value
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            self.choice(choice, out);
        }
        // llama.cpp's server also reports `timings`, the counts of its own prompt cache and
        // decoding: usage enough to tell a full window from the output limit when a build
        // sends no `usage`.
        let usage = match value.get("usage").and_then(parse_usage) {
            Some(usage) => Some(usage),
            None => value.get("timings").and_then(parse_timings),
        };
        if let Some(usage) = usage {
            out.push(Ok(StreamEvent::Usage(usage)));
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<Decoded>) {
        if !self.done {
            self.conclude(false, out);
        }
    }
}

impl OpenAiEvents {
    fn choice(&mut self, choice: &Value, out: &mut Vec<Decoded>) {
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, out);
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
            self.close_calls(out);
        }
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<Decoded>) {
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let reasoning = match text("reasoning_content") {
            "" => text("reasoning"),
            some => some,
        };
        if !reasoning.is_empty() {
            out.push(Ok(StreamEvent::ThinkingDelta(reasoning.to_string())));
        }
        if !text("content").is_empty() {
            out.push(Ok(StreamEvent::TextDelta(text("content").to_string())));
        }
        let calls = delta.get("tool_calls").and_then(Value::as_array);
        for (position, call) in calls.into_iter().flatten().enumerate() {
            let wire_index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            self.call_fragment(wire_index, call, call.get("function"), out);
        }
        if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
            self.call_fragment(LEGACY_FUNCTION_CALL, delta, Some(function), out);
        }
    }

    /// One fragment of a tool call: `call` holds the `id`, `function` the `name` and the next
    /// piece of `arguments`.
    fn call_fragment(
        &mut self,
        wire_index: u64,
        call: &Value,
        function: Option<&Value>,
        out: &mut Vec<Decoded>,
    ) {
        let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
        let field = |key: &str| {
            function
                .and_then(|f| f.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let (name, arguments) = (field("name"), field("arguments"));
        let existing = self.by_wire_index.get(&wire_index).copied();
        // Some servers number every call 0 and tell them apart only by id.
        let restarted = existing.is_some_and(|slot| {
            !id.is_empty() && !self.calls[slot].id.is_empty() && self.calls[slot].id != id
        });
        match existing {
            Some(slot) if !restarted => {
                if !arguments.is_empty() && self.calls[slot].open {
                    out.push(Ok(StreamEvent::ToolCallArgsDelta {
                        index: slot,
                        json: arguments.to_string(),
                    }));
                }
                return;
            }
            Some(old) => {
                self.close(old, out);
                self.by_wire_index.remove(&wire_index);
            }
            None => {}
        }
        let held = self.unnamed.entry(wire_index).or_default();
        if !id.is_empty() && !held.id.is_empty() && held.id != id {
            tracing::debug!(
                wire_index,
                id = %held.id,
                "dropping the arguments of a tool call that never got a name"
            );
            *held = UnnamedCall::default();
        }
        if held.id.is_empty() {
            held.id = id.to_string();
        }
        held.arguments.push_str(arguments);
        if name.is_empty() {
            return;
        }
        let held = self.unnamed.remove(&wire_index).unwrap_or_default();
        let slot = self.calls.len();
        let id = if held.id.is_empty() {
            self.generated_id(slot)
        } else {
            held.id
        };
        out.push(Ok(StreamEvent::ToolCallStart {
            index: slot,
            id: id.clone(),
            name: name.to_string(),
        }));
        if !held.arguments.is_empty() {
            out.push(Ok(StreamEvent::ToolCallArgsDelta {
                index: slot,
                json: held.arguments,
            }));
        }
        self.calls.push(OpenCall { id, open: true });
        self.by_wire_index.insert(wire_index, slot);
    }

    /// An id for a call the server sent without one.
    fn generated_id(&mut self, slot: usize) -> String {
        if self.id_suffix.is_empty() {
            self.id_suffix = std::iter::repeat_with(fastrand::alphanumeric)
                .take(8)
                .collect();
        }
        format!("call_{slot}_{}", self.id_suffix)
    }

    fn close(&mut self, slot: usize, out: &mut Vec<Decoded>) {
        if let Some(call) = self.calls.get_mut(slot)
            && call.open
        {
            call.open = false;
            out.push(Ok(StreamEvent::ToolCallEnd { index: slot }));
        }
    }

    /// Closes every open call and drops fragments that never got a name: a call without a
    /// name cannot be run, and the model would be told about a call it did not make.
    fn close_calls(&mut self, out: &mut Vec<Decoded>) {
        for slot in 0..self.calls.len() {
            self.close(slot, out);
        }
        for (wire_index, held) in self.unnamed.drain() {
            tracing::debug!(
                wire_index,
                id = %held.id,
                bytes = held.arguments.len(),
                "dropping the arguments of a tool call that never got a name"
            );
        }
    }

    /// Ends the reply: closes open calls and emits the stop reason. A server that sent
    /// `[DONE]` (`clean`) vouches that the reply is complete even without a finish reason; a
    /// body that merely ended does not.
    fn conclude(&mut self, clean: bool, out: &mut Vec<Decoded>) {
        self.close_calls(out);
        let reason = match self.finish.take() {
            // A few servers say `stop` after making tool calls; the calls are what matters.
            Some(StopReason::EndTurn) | None if clean && !self.calls.is_empty() => {
                Some(StopReason::ToolUse)
            }
            Some(StopReason::EndTurn) if !self.calls.is_empty() => Some(StopReason::ToolUse),
            None if clean => Some(StopReason::EndTurn),
            other => other,
        };
        if let Some(reason) = reason {
            out.push(Ok(StreamEvent::Stop(reason)));
        }
    }
}

/// Reads the usage of the final chunk. OpenAI counts cached tokens inside `prompt_tokens`;
/// ours are disjoint, so they are subtracted from the uncached input.
fn parse_usage(value: &Value) -> Option<Usage> {
    let usage = value.as_object()?;
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cached = value
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(Usage {
        input_tokens: count("prompt_tokens").saturating_sub(cached),
        output_tokens: count("completion_tokens"),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
    })
}

/// Reads llama.cpp's `timings`: `prompt_n` tokens of the prompt evaluated, `cache_n` more
/// served from its cache, `predicted_n` generated.
fn parse_timings(value: &Value) -> Option<Usage> {
    let timings = value.as_object()?;
    let count = |key: &str| timings.get(key).and_then(Value::as_u64);
    let (prompt, predicted) = (count("prompt_n")?, count("predicted_n")?);
    let cached = count("cache_n").unwrap_or(0);
    Some(Usage {
        input_tokens: prompt,
        output_tokens: predicted,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached,
    })
}

fn finish_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
