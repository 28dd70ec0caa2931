//! Classified provider errors.

use crate::domain::ErrorCategory;
use std::fmt;
use std::time::Duration;

/// A failed model call, classified so callers can decide whether to retry or fail over.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmError {
    pub category: ErrorCategory,
    /// What happened and, where known, what to do about it.
    pub message: String,
    /// The HTTP status, when the failure came with one.
    pub status: Option<u16>,
    /// The pause the provider asked for (`retry-after`, `retry-after-ms`).
    pub retry_after: Option<Duration>,
}

impl LlmError {
    pub fn new(category: ErrorCategory, message: impl Into<String>) -> Self {
        Self {
            category,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.category, self.message)
    }
}

impl std::error::Error for LlmError {}
