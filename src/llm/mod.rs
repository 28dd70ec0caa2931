//! The only code that speaks to model providers over HTTP.
//!
//! A [`Provider`] turns a provider-neutral [`ChatRequest`] into one streamed HTTP call and
//! yields [`StreamEvent`]s decoded from the wire format (Anthropic Messages SSE, OpenAI Chat
//! Completions SSE, Ollama NDJSON). [`ModelClient`] sits above the providers: it drives a
//! stream to its end, assembles the reply, classifies failures, retries with jittered backoff
//! where retrying can help, and fails over to the fallback model.

mod anthropic;
mod assemble;
mod client;
mod cutoff;
pub mod decode;
mod error;
mod history;
mod http;
pub mod local;
mod ollama;
mod openai;
#[cfg(test)]
mod replay_tests;
mod retry;
mod retry_after;
pub mod served;
mod sse;
#[cfg(test)]
mod test_server;
pub mod text_calls;

pub use anthropic::AnthropicProvider;
pub use client::{ModelClient, ModelReply, ModelRoute, StreamObserver};
pub use error::{LlmError, ResponseHeaders, classify_status};
pub use ollama::OllamaProvider;
pub use openai::OpenAiProvider;
pub use retry::{RetryDecision, RetryPolicy, next_delay};

use crate::config::{ProviderKind, ProviderProfile};
use crate::domain::{Message, Usage};
use futures_util::Stream;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The provider for a configured profile, speaking the profile's wire format. Cheap: no IO
/// happens until the first request.
pub fn provider_for(profile: &ProviderProfile) -> Arc<dyn Provider> {
    match profile.kind {
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(profile)),
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(profile)),
        ProviderKind::Ollama => Arc::new(OllamaProvider::new(profile)),
    }
}

/// A tool as the model sees it on the request: name, description and JSON schema.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Everything one model call needs, independent of the wire format.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    /// The system prompt as blocks in order: the persisted system prompt, then the static
    /// context. Each non-empty block ends a cacheable prefix (Anthropic gives each its own
    /// `cache_control`); formats with one system message join them with a blank line.
    pub system: Vec<String>,
    /// History in order; consecutive messages of the same role are merged by the encoders.
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_output_tokens: u32,
    /// The context window the request is made for; zero means the provider's configured
    /// one. Ollama's own API needs it on every request (`num_ctx`); the others ignore it.
    pub context_window: u64,
    /// Indices into `messages` whose last block carries a prompt-cache breakpoint (Anthropic
    /// `cache_control`). Each system block gets one as well (the tool list instead, when
    /// there is no system prompt).
    pub cache_breakpoints: Vec<usize>,
    /// Requests with the same key share a prompt cache (OpenAI `prompt_cache_key`); the
    /// session id, so one session's turns land on the same cache.
    pub cache_key: Option<String>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    /// Cut at the output limit: the reply is incomplete and must not be kept as an answer.
    MaxTokens,
    StopSequence,
    Refusal,
    /// A reason this version does not know, kept verbatim.
    Other(String),
}

/// One decoded piece of a streamed reply. Indices name content positions as the provider
/// numbered them, so interleaved tool calls stay apart.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// The signature that closes a thinking block; it must be echoed back verbatim.
    ThinkingSignature(String),
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// A fragment of the call's JSON arguments; Ollama sends the whole object as one fragment.
    ToolCallArgsDelta {
        index: usize,
        json: String,
    },
    ToolCallEnd {
        index: usize,
    },
    Usage(Usage),
    Stop(StopReason),
    /// The provider reported an error inside an otherwise successful (HTTP 200) stream.
    Error(LlmError),
}

/// A stream of decoded events; it ends after `Stop` or with an `Err`.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A boxed future, so that `Provider` stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model provider speaking one wire format.
pub trait Provider: Send + Sync {
    /// The profile name this provider was built from (`anthropic`, `openai`, `local`, …).
    fn name(&self) -> &str;

    /// Sends the request and returns the decoded event stream once response headers arrived
    /// with a success status. HTTP errors come back as a classified [`LlmError`].
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>>;

    /// A cheap request that proves the endpoint answers and the key is accepted (for
    /// `tern doctor`). Returns a short description of what answered.
    fn probe(&self) -> BoxFuture<'_, Result<String, LlmError>>;

    /// The JSON body [`Provider::stream`] would send for `request`, for showing a user
    /// exactly what the model receives.
    fn wire_body(&self, request: &ChatRequest) -> serde_json::Value;

    /// Whether a reply that is nothing but tool calls written as text is read as those calls
    /// ([`text_calls`]): for servers of small local models, whose chat templates may leave a
    /// call as text. No by default.
    fn reads_calls_in_text(&self) -> bool {
        false
    }
}

impl ChatRequest {
    /// The system blocks that are not empty, in order.
    pub fn system_blocks(&self) -> impl Iterator<Item = &str> {
        self.system
            .iter()
            .map(String::as_str)
            .filter(|block| !block.is_empty())
    }

    /// The system prompt as one text, for formats that take a single system message.
    pub fn joined_system(&self) -> String {
        self.system_blocks().collect::<Vec<_>>().join("\n\n")
    }
}
