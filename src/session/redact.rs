//! Keeping secrets and file contents out of what tern writes to its logs.
//!
//! Two rules. A secret never appears: the keys named in the config (the providers' keys, as
//! loaded) and anything shaped like a common token (`sk-…`, `ghp_…`, `xoxb-…`, `AKIA…`,
//! JWTs, the value after `Bearer` or after a name such as `password=`; the shapes are
//! `domain::secret_shapes`, shared with the commands' environment filter) become `<secret>`.
//! And tool arguments keep only their short strings: a long one shows as its length and a
//! hash, so two calls with the same content can still be told apart.

use crate::domain::secret_shapes::{is_token_char, looks_like_token};
use serde_json::Value;

/// Strings up to this many characters are logged as they are; longer ones are redacted.
const KEEP_CHARS: usize = 64;

/// Known secrets shorter than this are not searched for: they would match ordinary words.
const MIN_SECRET_CHARS: usize = 8;

/// What a redacted secret is shown as.
const SECRET: &str = "<secret>";

/// Names whose value (after `=` or `:`) is a secret, compared without case.
const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "api-key",
    "authorization",
];

/// Replaces secrets in text and arguments; shared by every session of a process.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Secrets known by value, longest first so one that contains another goes whole.
    known: Vec<String>,
}

impl Redactor {
    /// A redactor that also removes each of `secrets` wherever it appears.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut known: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
            .collect();
        known.sort_by_key(|s| std::cmp::Reverse(s.len()));
        known.dedup();
        Self { known }
    }

    /// `text` with every secret known by value replaced by `<secret>`, and nothing else
    /// changed: for what tools return, where a token-shaped word may be the file's content
    /// the model needs back as it is.
    pub fn credentials(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.known {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), SECRET);
            }
        }
        out
    }

    /// `text` with every secret replaced by `<secret>`.
    pub fn text(&self, text: &str) -> String {
        redact_shapes(&self.credentials(text))
    }

    /// Tool arguments as one line of JSON: secrets replaced, long strings shown as their
    /// length and hash, the values of keys named like secrets hidden.
    pub fn arguments(&self, value: &Value) -> String {
        self.walk(value).to_string()
    }

    fn walk(&self, value: &Value) -> Value {
        match value {
            Value::String(s) if s.chars().count() > KEEP_CHARS => Value::String(format!(
                "<{} chars, fnv {:016x}>",
                s.chars().count(),
                fnv1a(s)
            )),
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.walk(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let hidden = is_secret_name(k) && !matches!(v, Value::Null);
                        let v = if hidden {
                            Value::String(SECRET.to_owned())
                        } else {
                            self.walk(v)
                        };
                        (k.clone(), v)
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// FNV-1a, 64 bits: enough to recognise a repeated argument, not meant to resist attack.
pub fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|n| lower.contains(n))
}

/// Replaces the words of `text` shaped like tokens, and the value after `Bearer` or a
/// secret's name.
fn redact_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Whether the previous word makes the next one a secret (`Bearer x`, `password: x`).
    let mut next_is_secret = false;
    while let Some(start) = rest.find(is_token_char) {
        let (gap, tail) = rest.split_at(start);
        out.push_str(gap);
        let end = tail.find(|c| !is_token_char(c)).unwrap_or(tail.len());
        let (word, after) = tail.split_at(end);
        if gap.contains('\n') {
            next_is_secret = false;
        }
        let lower = word.to_ascii_lowercase();
        let scheme = matches!(lower.as_str(), "bearer" | "basic" | "token");
        if next_is_secret && !scheme && word.len() >= 4 {
            out.push_str(SECRET);
            next_is_secret = false;
        } else if let Some(name) = assigned_secret(word) {
            out.push_str(name);
            out.push_str(SECRET);
        } else if looks_like_token(word) {
            out.push_str(SECRET);
        } else {
            out.push_str(word);
            // `Bearer x`, `password: x`, `token = x`: the next word is the secret.
            next_is_secret = scheme
                || (is_secret_name(&lower)
                    && after
                        .trim_start_matches([' ', '"', '\''])
                        .starts_with([':', '=']));
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `name=` of a `name=value` word whose value is a secret: named like one, or shaped like a
/// token (`GH=ghp_…`).
fn assigned_secret(word: &str) -> Option<&str> {
    let eq = word.find('=')?;
    let (name, value) = (&word[..eq], &word[eq + 1..]);
    let secret = (value.len() >= 4 && is_secret_name(name)) || looks_like_token(value);
    secret.then(|| &word[..=eq])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(text: &str, expected: &str) {
        assert_eq!(Redactor::default().text(text), expected, "input: {text:?}");
    }

    #[test]
    fn token_shapes_are_replaced() {
        check(
            "key sk-ant-api03-abcdefghijklmnop1234 ok",
            "key <secret> ok",
        );
        check(
            "export GH=ghp_1234567890abcdefghijABCDEFGHIJ0123",
            "export GH=<secret>",
        );
        check("slack xoxb-1234567890-abcdefghijkl", "slack <secret>");
        check("AKIAIOSFODNN7EXAMPLE1", "<secret>");
        check(
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "jwt <secret>",
        );
        check(
            "curl -H 'Authorization: Bearer abc123def456ghi' x",
            "curl -H 'Authorization: Bearer <secret>' x",
        );
        check("PGPASSWORD=hunter22 psql", "PGPASSWORD=<secret> psql");
        check("password: hunter22", "password: <secret>");
    }

    #[test]
    fn ordinary_text_stays() {
        check(
            "git show 3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f",
            "git show 3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f",
        );
        check("cargo test --lib tokens", "cargo test --lib tokens");
        check("the token is valid", "the token is valid");
        check("src/session/redact.rs:12", "src/session/redact.rs:12");
        check("", "");
    }

    #[test]
    fn known_secrets_go_wherever_they_appear() {
        let redactor = Redactor::new(["local-key-1234".to_owned(), "short".to_owned()]);
        assert_eq!(
            redactor.text("echo local-key-1234; echo short"),
            "echo <secret>; echo short",
            "too short a secret would match ordinary words"
        );
    }

    #[test]
    fn arguments_keep_short_strings_and_hide_long_ones_and_secrets() {
        let redactor = Redactor::default();
        let content = "secret file content ".repeat(10);
        let line = redactor.arguments(&json!({
            "path": "src/main.rs",
            "content": content,
            "n": 3,
            "command": "curl -H 'x-api-key: sk-ant-0123456789abcdefXYZ' https://x",
            "password": "hunter2",
        }));
        assert!(line.contains("\"path\":\"src/main.rs\""), "{line}");
        assert!(line.contains("<200 chars, fnv "), "{line}");
        assert!(!line.contains("secret file"), "{line}");
        assert!(line.contains("\"n\":3"), "{line}");
        assert!(!line.contains("sk-ant"), "{line}");
        assert!(!line.contains("hunter2"), "{line}");
    }
}
