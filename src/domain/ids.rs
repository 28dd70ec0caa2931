//! Session identifiers: the stable `SessionId` and the routing `SessionKey`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A session's unique, time-ordered identifier (a UUIDv7 in its hyphenated form), so that
/// sorting ids sorts sessions by creation time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// A fresh id for a new session.
    pub fn generate() -> Self {
        Self(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    /// Wraps an id read back from storage or typed by the user.
    pub fn from_string(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first eight characters, enough to tell sessions apart in listings.
    pub fn short(&self) -> &str {
        self.0.get(..8).unwrap_or(&self.0)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a session's input comes from: `cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, …
/// One key maps to one current session id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionKey(String);

impl SessionKey {
    /// The key of a session started from the terminal (TUI or headless).
    pub fn cli(id: &SessionId) -> Self {
        Self(format!("cli:{id}"))
    }

    pub fn from_string(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
