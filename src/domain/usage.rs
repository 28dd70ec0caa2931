//! Token usage as reported by a provider, and tern's own estimate of a text's tokens.

use serde::{Deserialize, Serialize};

/// The estimate's rate: providers' tokenizers average roughly four bytes of English or code
/// per token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// tern's estimate of the tokens `text` takes, one per four bytes begun: deterministic, and
/// what every budget of the prompt is measured by.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Tokens used by one model call. Providers report these piecemeal; `merge_max` folds a later
/// report into an earlier one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Every input token the request carried, cached or not: what fills the context window.
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// Folds a later report of the same call: Anthropic repeats counts in `message_delta`, so
    /// each field keeps the largest value seen rather than adding.
    pub fn merge_max(&mut self, later: &Usage) {
        self.input_tokens = self.input_tokens.max(later.input_tokens);
        self.output_tokens = self.output_tokens.max(later.output_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .max(later.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .max(later.cache_read_input_tokens);
    }

    /// Adds another call's usage, for per-turn and per-session totals.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }
}
