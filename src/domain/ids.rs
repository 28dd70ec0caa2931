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

    /// The key of the session a subagent run works in (`subagent:<run-id>`).
    pub fn subagent(run: &super::RunId) -> Self {
        Self(format!("subagent:{run}"))
    }

    /// A key from outside (a channel adapter, a webhook, a flag), checked against the shapes
    /// keys take: `cli:<id>`, `slack:<team>/<channel>/<thread_ts>`, `discord:<channel>/<thread>`,
    /// `mattermost:<channel>/<root_post>`, `webhook:<name>/<id>`, `subagent:<run-id>`. Each part is 1 to 128 of
    /// `A-Z a-z 0-9 . _ -`, and not `.` or `..`. An invalid key is an error, never a new session.
    pub fn parse(text: &str) -> Result<Self, InvalidSessionKey> {
        let invalid = |reason: String| InvalidSessionKey {
            key: text.chars().take(200).collect(),
            reason,
        };
        let Some((channel, rest)) = text.split_once(':') else {
            return Err(invalid("it has no channel before a `:`".to_owned()));
        };
        let parts = match channel {
            "cli" | "subagent" => 1,
            "slack" => 3,
            "discord" | "mattermost" | "webhook" => 2,
            other => return Err(invalid(format!("`{other}` is not a channel tern knows"))),
        };
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.len() != parts {
            return Err(invalid(format!(
                "a `{channel}` key has {parts} part{} after the `:`, this one {}",
                if parts == 1 { "" } else { "s" },
                segments.len()
            )));
        }
        for segment in segments {
            let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            if segment.is_empty() || segment.len() > 128 {
                return Err(invalid(
                    "a part is empty or longer than 128 characters".to_owned(),
                ));
            }
            if segment == "." || segment == ".." || !segment.chars().all(allowed) {
                return Err(invalid(format!(
                    "`{}` may only hold letters, digits, `.`, `_` and `-`",
                    segment.chars().take(40).collect::<String>()
                )));
            }
        }
        Ok(Self(text.to_owned()))
    }

    /// The channel the key belongs to: `cli`, `slack`, ….
    pub fn channel(&self) -> &str {
        self.0.split_once(':').map_or("", |(channel, _)| channel)
    }

    /// The chat platform or webhook the key's session talks to, if any (`slack`, `discord`,
    /// `mattermost`, `webhook`).
    pub fn chat_channel(&self) -> Option<&str> {
        let channel = self.channel();
        matches!(channel, "slack" | "discord" | "mattermost" | "webhook").then_some(channel)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A session key that does not have one of the shapes keys take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "INVALID_SESSION_KEY: `{key}` is not a session key: {reason}; keys look like cli:<id>, \
     slack:<team>/<channel>/<thread_ts>, discord:<channel>/<thread>, \
     mattermost:<channel>/<root_post> or webhook:<name>/<id>"
)]
pub struct InvalidSessionKey {
    pub key: String,
    pub reason: String,
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_each_channel_parse_and_malformed_ones_are_refused() {
        for key in [
            "cli:01a22950-b642-721d-b9dd-b98393eff67b",
            "slack:T024BE7LD/C024BE91L/1700000000.123456",
            "discord:123456789/987654321",
            "mattermost:town-square/abc123",
            "webhook:github/delivery-42",
        ] {
            let parsed = SessionKey::parse(key).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(parsed.as_str(), key);
        }
        assert_eq!(
            SessionKey::parse("slack:T/C/1.2").unwrap().channel(),
            "slack"
        );
        for (key, says) in [
            ("no-channel", "no channel"),
            ("irc:#rust", "not a channel tern knows"),
            ("slack:T/C", "3 parts after the `:`, this one 2"),
            ("discord:a/b/c", "2 parts"),
            ("cli:", "empty"),
            ("webhook:../x", "may only hold"),
            ("webhook:a b/c", "may only hold"),
            ("cli:a/b", "1 part after"),
        ] {
            let err = SessionKey::parse(key).expect_err(key);
            let text = err.to_string();
            assert!(text.starts_with("INVALID_SESSION_KEY: "), "{text}");
            assert!(text.contains(says), "{key}: {text}");
        }
    }
}
