//! The only code that speaks to model providers over HTTP.
//!
//! A [`Provider`] turns a provider-neutral [`ChatRequest`] into one streamed HTTP call and
//! yields [`StreamEvent`]s decoded from the wire format (Anthropic Messages SSE, OpenAI Chat
//! Completions SSE, Ollama NDJSON). [`ModelClient`] sits above the providers: it drives a
//! stream to its end, assembles the reply, classifies failures, retries with jittered backoff
//! where retrying can help, and fails over to the fallback model.

mod anthropic;
mod assemble;
mod attach;
mod client;
mod cutoff;
pub mod decode;
mod error;
mod history;
pub(crate) mod http;
pub mod local;
mod marks;
mod ollama;
mod openai;
#[cfg(test)]
mod replay_tests;
mod retry;
mod retry_after;
pub mod served;
mod sse;
pub(crate) use sse::{SseDecoder, SseEvent};
#[cfg(test)]
mod test_server;
pub mod text_calls;

pub use anthropic::AnthropicProvider;
pub use client::{ModelClient, ModelReply, ModelRoute, StreamObserver};
pub use error::{LlmError, ResponseHeaders, classify_status};
pub use http::{Side, keep_connections_apart};
pub use ollama::OllamaProvider;
pub use openai::OpenAiProvider;
pub use retry::{RetryDecision, RetryPolicy, next_delay};
// The request types live in `domain`, where the prompt layers build them too.
pub use crate::domain::{ChatRequest, ToolSpec};

use crate::config::{ProviderKind, ProviderProfile};
use crate::domain::Usage;
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

    /// The ids of the models the server lists, or `None` for a provider that lists none:
    /// what `/model` compares a name with.
    fn list_models(&self) -> BoxFuture<'_, Result<Option<Vec<String>>, LlmError>> {
        Box::pin(async { Ok(None) })
    }

    /// The JSON body [`Provider::stream`] would send for `request`, for showing a user
    /// exactly what the model receives.
    fn wire_body(&self, request: &ChatRequest) -> serde_json::Value;

    /// Whether a reply that is nothing but tool calls written as text is read as those calls
    /// ([`text_calls`]): for servers of small local models, whose chat templates may leave a
    /// call as text. No by default.
    fn reads_calls_in_text(&self) -> bool {
        false
    }

    /// Whether the model takes images (the profile's `images`): tool results' images are
    /// sent with them only then. No by default.
    fn takes_images(&self) -> bool {
        false
    }
}
