//! A model request as tern builds it, before any wire format: what the prompt layers produce
//! and the providers encode. Plain data, so `prompt/` and `llm/` share it without either
//! depending on the other.

use super::Message;

/// A tool as the model sees it on the request: name, description and JSON schema.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Everything one model call needs, independent of the wire format.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// Whether the model takes images: tool results' images go with them only then. The
    /// model client fills it in from the provider.
    #[serde(default)]
    pub images: bool,
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
