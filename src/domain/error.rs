//! The categories a failed model call falls into; retry and fallback decisions key off them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a model call or a turn failed. The category decides whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// The key is missing, wrong or lacks permission (401, 403).
    Auth,
    /// The provider asked us to slow down (429).
    RateLimit,
    /// The provider is temporarily out of capacity (529, `overloaded_error`, 503).
    Overloaded,
    /// The provider failed on its side (5xx).
    Server,
    /// The connection failed or was cut.
    Network,
    /// No answer within the configured time.
    Timeout,
    /// The request no longer fits the model's context window.
    ContextOverflow,
    /// The model answered in a way the turn cannot use (cut at the output limit, bad stream).
    ModelBehavior,
    /// The provider rejected the request as malformed (400, 404, 422): retrying cannot help.
    InvalidRequest,
    /// The turn was cancelled by the user or the process shutting down.
    Cancelled,
    /// The session journal could not be written (disk full, database gone).
    Storage,
    /// A bug in tern; the session was rebuilt from its journal.
    Internal,
}

impl ErrorCategory {
    /// Whether the same request may succeed if sent again after a pause.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::RateLimit | Self::Overloaded | Self::Server | Self::Network | Self::Timeout
        )
    }

    /// The snake_case name used in JSON output and the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::RateLimit => "rate_limit",
            Self::Overloaded => "overloaded",
            Self::Server => "server",
            Self::Network => "network",
            Self::Timeout => "timeout",
            Self::ContextOverflow => "context_overflow",
            Self::ModelBehavior => "model_behavior",
            Self::InvalidRequest => "invalid_request",
            Self::Cancelled => "cancelled",
            Self::Storage => "storage",
            Self::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
