//! Ollama's native chat API (`/api/chat`): request encoding and the decoder of its
//! newline-delimited JSON stream.
//!
//! Ollama sends one JSON object per line. Tool calls arrive whole (arguments as an object, no
//! id), so the decoder gives each one an id and emits start, arguments and end at once. An
//! error after the reply started comes as an `{"error": …}` line under status 200. The
//! decoder also reads `/api/generate` lines (`response` instead of `message`), which share
//! the framing.

use super::attach::{self, Inline};
use super::decode::{Decoded, MAX_LINE, WireDecoder};
use super::error::{classify_stream_error, line_too_long, not_json};
use super::http::{self, Endpoint};
use super::openai::{chat_messages, function_tool, tool_result_text};
use super::{BoxFuture, ChatRequest, EventStream, LlmError, Provider, StopReason, StreamEvent};
use crate::config::ProviderProfile;
use crate::domain::{ToolCall, ToolResult, Usage};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A provider speaking Ollama's native API.
#[derive(Debug, Clone)]
pub struct OllamaProvider {
    name: String,
    chat: Endpoint,
    version: Endpoint,
    tags: Endpoint,
    /// Sent as `num_ctx` unless the request names its own window (what the server said):
    /// Ollama otherwise runs every model with a small default window and silently drops the
    /// start of a longer prompt.
    context_window: u64,
    /// For an Ollama behind an authenticating proxy or a hosted one; usually `None`.
    api_key: Option<String>,
    /// The profile's `images`.
    images: bool,
}

impl OllamaProvider {
    /// A provider for the profile's base URL (`http://127.0.0.1:11434`). Does no IO.
    pub fn new(profile: &ProviderProfile) -> Self {
        // A base URL copied from an OpenAI-compatible setup (`…/v1`) or with `/api` still
        // points at the same server.
        let endpoint = |path: &str| Endpoint::new(profile, &["/v1", "/api"], path);
        Self {
            name: profile.name.clone(),
            chat: endpoint("/api/chat"),
            version: endpoint("/api/version"),
            tags: endpoint("/api/tags"),
            context_window: profile.context_window,
            api_key: profile.api_key.clone().filter(|key| !key.is_empty()),
            images: profile.images,
        }
    }

    fn request(
        &self,
        method: reqwest::Method,
        endpoint: &Endpoint,
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let mut builder = endpoint.request(method)?;
        if let Some(key) = &self.api_key {
            let bearer = http::secret_header(&format!("Bearer {}", key.trim()), &self.name)?;
            builder = builder.header(reqwest::header::AUTHORIZATION, bearer);
        }
        Ok(builder)
    }

    /// The window to ask Ollama for: the request's, else the profile's.
    fn window_for(&self, request: &ChatRequest) -> u64 {
        match request.context_window {
            0 => self.context_window,
            window => window,
        }
    }

    fn explain(&self, err: LlmError, model: &str) -> LlmError {
        let not_found = err.status == Some(404) && !model.is_empty();
        let err = http::explain(err, &self.name, None, model);
        if not_found {
            err.with_hint(&format!(
                "if it is not pulled yet, run `ollama pull {model}`"
            ))
        } else {
            err
        }
    }
}

impl Provider for OllamaProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn takes_images(&self) -> bool {
        self.images
    }

    fn reads_calls_in_text(&self) -> bool {
        true
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let builder = self
                .request(reqwest::Method::POST, &self.chat)?
                .json(&encode_request(request, self.window_for(request)));
            http::open_stream(&self.chat, builder, OllamaDecoder::new(), |err| {
                self.explain(err, &request.model)
            })
            .await
        })
    }

    fn wire_body(&self, request: &ChatRequest) -> Value {
        encode_request(request, self.window_for(request))
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Option<Vec<String>>, LlmError>> {
        Box::pin(async move {
            let builder = self.request(reqwest::Method::GET, &self.tags)?;
            let response = http::probe(&self.tags, builder, |err| self.explain(err, "")).await?;
            Ok(http::listed(response, "models", "name").await)
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>> {
        Box::pin(async move {
            let builder = self.request(reqwest::Method::GET, &self.version)?;
            let response = http::probe(&self.version, builder, |err| self.explain(err, "")).await?;
            let version = response
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v.get("version").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| "(unknown version)".to_string());
            Ok(format!("ollama {version} at {}", self.version.display))
        })
    }
}

/// The JSON body of a streamed `/api/chat` request.
pub(crate) fn encode_request(request: &ChatRequest, context_window: u64) -> Value {
    // Ollama names the tool a result belongs to, not the call: find each call's tool name.
    let tool_names: HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|message| message.tool_calls())
        .map(|call| (call.id.as_str(), call.name.as_str()))
        .collect();
    let tool_message = |result: &ToolResult| {
        let mut message = json!({"role": "tool", "content": tool_result_text(result)});
        if let Some(name) = tool_names.get(result.tool_use_id.as_str()) {
            message["tool_name"] = json!(name);
        }
        message
    };
    let assistant_message = |text: String, calls: Vec<&ToolCall>| {
        let mut message = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            let calls = calls.iter().map(|call| {
                let arguments = if call.input.is_object() {
                    call.input.clone()
                } else {
                    json!({})
                };
                json!({"function": {"name": call.name, "arguments": arguments}})
            });
            message["tool_calls"] = calls.collect();
        }
        message
    };
    let images_message = |images: Vec<Inline>| {
        let images: Vec<String> = images.into_iter().map(|image| image.data).collect();
        json!({"role": "user", "content": attach::IMAGES_NOTE, "images": images})
    };
    let messages = chat_messages(request, tool_message, images_message, assistant_message);
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
        "options": {
            "num_predict": request.max_output_tokens,
            "num_ctx": context_window,
        },
    });
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(request.tools.iter().map(function_tool).collect());
    }
    body
}

/// Decodes Ollama's NDJSON stream into [`StreamEvent`]s.
#[derive(Debug)]
pub(crate) struct OllamaDecoder {
    line: Vec<u8>,
    /// Tool calls seen so far; the next call's index.
    calls: usize,
    /// Makes generated call ids unique across replies: the history may hold many replies'
    /// calls, and another provider may later be sent that history.
    id_suffix: String,
    /// The `done` line arrived, or a line was too long: nothing after it counts.
    done: bool,
}

impl OllamaDecoder {
    pub fn new() -> Self {
        let id_suffix: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(8)
            .collect();
        Self {
            line: Vec::new(),
            calls: 0,
            id_suffix,
            done: false,
        }
    }

    fn end_line(&mut self, out: &mut Vec<Decoded>) {
        let bytes = std::mem::take(&mut self.line);
        if self.done {
            return;
        }
        let line = String::from_utf8_lossy(&bytes);
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        if let Err(err) = self.read_line(line, out) {
            out.push(Err(err));
        }
    }

    /// Reads one non-empty line; an `Err` is yielded as the item that ends the stream.
    fn read_line(&mut self, line: &str, out: &mut Vec<Decoded>) -> Result<(), LlmError> {
        let value: Value =
            serde_json::from_str(line).map_err(|_| not_json("a stream line", line))?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            let message = error
                .as_str()
                .or_else(|| error.get("message").and_then(Value::as_str))
                .unwrap_or("unknown error");
            out.push(Ok(StreamEvent::Error(classify_stream_error("", message))));
            return Ok(());
        }
        let message = value.get("message");
        let text = |key: &str| {
            message
                .and_then(|m| m.get(key))
                .or_else(|| value.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        if !text("thinking").is_empty() {
            out.push(Ok(StreamEvent::ThinkingDelta(text("thinking").to_string())));
        }
        let content = match text("content") {
            "" => value
                .get("response")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            content => content,
        };
        if !content.is_empty() {
            out.push(Ok(StreamEvent::TextDelta(content.to_string())));
        }
        for call in message
            .and_then(|m| m.get("tool_calls"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call(call, out);
        }
        if value.get("done").and_then(Value::as_bool) == Some(true) {
            self.finish_reply(&value, out);
        }
        Ok(())
    }

    /// The `done` line: the usage counts and the stop reason.
    fn finish_reply(&mut self, value: &Value, out: &mut Vec<Decoded>) {
        self.done = true;
        let count = |key: &str| value.get(key).and_then(Value::as_u64);
        if count("prompt_eval_count").is_some() || count("eval_count").is_some() {
            out.push(Ok(StreamEvent::Usage(Usage {
                input_tokens: count("prompt_eval_count").unwrap_or(0),
                output_tokens: count("eval_count").unwrap_or(0),
                ..Usage::default()
            })));
        }
        let reason = match value.get("done_reason").and_then(Value::as_str) {
            Some("length") => StopReason::MaxTokens,
            _ if self.calls > 0 => StopReason::ToolUse,
            _ => StopReason::EndTurn,
        };
        out.push(Ok(StreamEvent::Stop(reason)));
    }

    fn tool_call(&mut self, call: &Value, out: &mut Vec<Decoded>) {
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => "{}".to_string(),
            Some(other) => other.to_string(),
        };
        let index = self.calls;
        self.calls += 1;
        out.push(Ok(StreamEvent::ToolCallStart {
            index,
            id: format!("call_{index}_{}", self.id_suffix),
            name: name.to_string(),
        }));
        out.push(Ok(StreamEvent::ToolCallArgsDelta {
            index,
            json: arguments,
        }));
        out.push(Ok(StreamEvent::ToolCallEnd { index }));
    }
}

impl WireDecoder for OllamaDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Decoded>) {
        for &byte in chunk {
            if self.done {
                // After the `done` line (or a failure) nothing counts; don't even buffer it.
                return;
            }
            if byte == b'\n' {
                self.end_line(out);
            } else if self.line.len() >= MAX_LINE {
                self.line = Vec::new();
                self.done = true;
                out.push(Err(line_too_long()));
            } else {
                self.line.push(byte);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<Decoded>) {
        self.end_line(out);
    }
}

#[cfg(test)]
#[path = "ollama_tests.rs"]
mod tests;
