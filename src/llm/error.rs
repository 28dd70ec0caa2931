//! Classified provider errors: what went wrong on a model call, in words a user can act on,
//! with the category that decides whether retrying or failing over can help.
//!
//! Two sources feed it: HTTP error replies ([`classify_status`], which reads the status, the
//! `retry-after` headers and the provider's own error body in any of the three shapes we
//! speak), and transport failures from the HTTP client ([`from_transport`]).

use super::retry_after::retry_after;
use crate::domain::{ErrorCategory, TurnStop, Watchdog};
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// A failed model call, classified so callers can decide whether to retry or fail over.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmError {
    /// What kind of failure; decides whether retrying or failing over can help.
    pub category: ErrorCategory,
    /// What happened and, where known, what to do about it.
    pub message: String,
    /// The HTTP status, when the failure came with one.
    pub status: Option<u16>,
    /// The pause the provider asked for (`retry-after`, `retry-after-ms`).
    pub retry_after: Option<Duration>,
    /// Which of tern's own timeouts ended the call, when one did.
    pub watchdog: Option<Watchdog>,
    /// The reply was cut at the output limit (and dropped).
    pub output_limit: bool,
    /// The reply was cut because the context window filled up, at this many tokens (prompt
    /// and reply together), as the server counted them: the window it really has, which may
    /// be smaller than the one configured.
    pub window_filled_at: Option<u64>,
    /// The text the model had written when the person interrupted the call: kept, marked
    /// as interrupted, so the conversation shows (and the model sees) what was said.
    pub interrupted_text: Option<String>,
}

impl LlmError {
    /// An error without an HTTP status or a requested pause.
    pub fn new(category: ErrorCategory, message: impl Into<String>) -> Self {
        Self {
            category,
            message: message.into(),
            status: None,
            retry_after: None,
            watchdog: None,
            output_limit: false,
            window_filled_at: None,
            interrupted_text: None,
        }
    }

    /// Why the turn this error ends stopped.
    pub fn turn_stop(&self) -> TurnStop {
        match (self.watchdog, self.category) {
            (Some(watchdog), _) => TurnStop::Timeout { watchdog },
            (None, _) if self.output_limit => TurnStop::OutputLimit,
            (None, ErrorCategory::Cancelled) => TurnStop::Interrupted,
            (None, category) => TurnStop::Error { category },
        }
    }

    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.category.is_retryable()
    }

    /// The same error with extra advice appended to its message.
    pub fn with_hint(mut self, hint: &str) -> Self {
        if !hint.is_empty() {
            self.message.push_str("; ");
            self.message.push_str(hint);
        }
        self
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.category, self.message)
    }
}

impl std::error::Error for LlmError {}

/// Read access to response headers, so classification works on a live reply's headers and on
/// headers recorded in a test file alike. Lookups ignore ASCII case.
pub trait ResponseHeaders {
    /// The first value of the named header, if present and valid text.
    fn header(&self, name: &str) -> Option<&str>;
}

impl ResponseHeaders for reqwest::header::HeaderMap {
    fn header(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|value| value.to_str().ok())
    }
}

impl ResponseHeaders for [(String, String)] {
    fn header(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

impl ResponseHeaders for Vec<(String, String)> {
    fn header(&self, name: &str) -> Option<&str> {
        self.as_slice().header(name)
    }
}

/// Classifies an HTTP error reply from any provider we speak to.
///
/// `body` is the reply body as text (Anthropic `{type:error,error:{type,message}}`, OpenAI
/// `{error:{message,type,code}}`, Ollama `{error:"..."}`, or anything else); the provider's own
/// message is carried into ours, with anything that looks like a key redacted.
pub fn classify_status(
    status: u16,
    headers: &(impl ResponseHeaders + ?Sized),
    body: &str,
) -> LlmError {
    classify_status_at(status, headers, body, jiff::Timestamp::now())
}

/// [`classify_status`] with the current time given, so HTTP-date `retry-after` values can be
/// tested.
pub(crate) fn classify_status_at(
    status: u16,
    headers: &(impl ResponseHeaders + ?Sized),
    body: &str,
    now: jiff::Timestamp,
) -> LlmError {
    let detail = ErrorBody::parse(body);
    let said = detail.describe();
    let kind = detail.kind.as_deref().unwrap_or("");
    let (category, message) = match status {
        401 | 403 => (
            ErrorCategory::Auth,
            format!(
                "the provider refused the credentials (HTTP {status}{}); check that the API key \
                 is set, valid and allowed to use this model",
                suffix(&redact_secrets(&said))
            ),
        ),
        429 if kind == "insufficient_quota" => (
            // OpenAI answers 429 when the account is out of credit; waiting does not help.
            ErrorCategory::InvalidRequest,
            format!(
                "the provider says the account is out of quota (HTTP 429{}); check the plan \
                 and billing of this key",
                suffix(&said)
            ),
        ),
        429 => (
            ErrorCategory::RateLimit,
            format!("rate limited by the provider (HTTP 429{})", suffix(&said)),
        ),
        _ if kind == "overloaded_error" || status == 529 || status == 503 => (
            ErrorCategory::Overloaded,
            format!(
                "the provider is overloaded (HTTP {status}{}); this is usually brief",
                suffix(&said)
            ),
        ),
        408 => (
            ErrorCategory::Timeout,
            format!(
                "the provider timed out waiting for the request (HTTP 408{})",
                suffix(&said)
            ),
        ),
        413 => (
            ErrorCategory::ContextOverflow,
            overflow_message(Some(status), &said),
        ),
        400..=499 if kind == "request_too_large" || mentions_overflow(&said) => (
            ErrorCategory::ContextOverflow,
            overflow_message(Some(status), &said),
        ),
        404 => (
            ErrorCategory::InvalidRequest,
            format!(
                "the provider answered not found (HTTP 404{}); the model name may be wrong, or \
                 base_url may point at the wrong path",
                suffix(&said)
            ),
        ),
        400..=499 => (
            ErrorCategory::InvalidRequest,
            format!(
                "the provider rejected the request (HTTP {status}{})",
                suffix(&said)
            ),
        ),
        _ if mentions_unloadable_model(&said) => (
            ErrorCategory::InvalidRequest,
            unloadable_model_message(Some(status), &said),
        ),
        _ => (
            ErrorCategory::Server,
            format!(
                "the provider failed on its side (HTTP {status}{})",
                suffix(&said)
            ),
        ),
    };
    LlmError {
        status: Some(status),
        retry_after: retry_after(headers, now),
        ..LlmError::new(category, message)
    }
}

/// Classifies an error the provider reported inside a successful stream, by the error `type`
/// or `code` it named (Anthropic `overloaded_error`, OpenAI `rate_limit_exceeded`, …).
pub(crate) fn classify_stream_error(kind: &str, message: &str) -> LlmError {
    let said = if message.is_empty() { kind } else { message };
    let (category, text) = match kind {
        "overloaded_error" => (
            ErrorCategory::Overloaded,
            format!("the provider is overloaded ({said}); this is usually brief"),
        ),
        "rate_limit_error" | "rate_limit_exceeded" | "tokens" | "requests" => (
            ErrorCategory::RateLimit,
            format!("rate limited by the provider ({said})"),
        ),
        "authentication_error" | "permission_error" | "invalid_api_key" => (
            ErrorCategory::Auth,
            format!(
                "the provider refused the credentials ({}); check the API key",
                redact_secrets(said)
            ),
        ),
        "timeout_error" => (
            ErrorCategory::Timeout,
            format!("the provider timed out ({said})"),
        ),
        // llama.cpp's server: HTTP 400 `exceed_context_size_error`.
        "context_length_exceeded" | "request_too_large" | "exceed_context_size_error" => {
            (ErrorCategory::ContextOverflow, overflow_message(None, said))
        }
        "invalid_request_error" | "not_found_error" if mentions_overflow(said) => {
            (ErrorCategory::ContextOverflow, overflow_message(None, said))
        }
        "invalid_request_error" | "not_found_error" => (
            ErrorCategory::InvalidRequest,
            format!("the provider rejected the request ({said})"),
        ),
        _ if mentions_overflow(said) => {
            (ErrorCategory::ContextOverflow, overflow_message(None, said))
        }
        _ if mentions_unloadable_model(said) => (
            ErrorCategory::InvalidRequest,
            unloadable_model_message(None, said),
        ),
        _ => (
            ErrorCategory::Server,
            format!("the provider reported an error mid-reply ({said})"),
        ),
    };
    LlmError::new(category, text)
}

/// Classifies an `error` value a provider sent under status 200, inside a stream or as the
/// whole reply: Anthropic's and OpenAI's `{type, code, message}` objects, a proxy's
/// (OpenRouter's) with an HTTP status as its numeric `code`, or a bare string.
pub(crate) fn classify_error_value(error: &Value) -> LlmError {
    let text = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or_default();
    let message = error.as_str().unwrap_or_else(|| text("message"));
    let kind = match error.get("code").and_then(Value::as_u64) {
        Some(429) => "rate_limit_error",
        Some(503 | 529) => "overloaded_error",
        Some(401 | 403) => "authentication_error",
        Some(408) => "timeout_error",
        Some(413) => "request_too_large",
        Some(400..=499) => "invalid_request_error",
        Some(_) => "api_error",
        None if !text("code").is_empty() => text("code"),
        None => text("type"),
    };
    classify_stream_error(kind, message)
}

/// The error a whole JSON reply carries, if it is an error reply: `{"error": …}` in any of the
/// shapes [`classify_error_value`] reads, or vLLM's `{"object": "error", …}`.
pub(crate) fn classify_json_reply(reply: &Value) -> Option<LlmError> {
    match reply.get("error") {
        Some(error) if !error.is_null() => Some(classify_error_value(error)),
        _ if reply.get("object").and_then(Value::as_str) == Some("error") => {
            Some(classify_error_value(reply))
        }
        _ => None,
    }
}

/// Maps a transport failure of the HTTP client. `url` is the endpoint we tried and
/// `base_url_hint` names where its base URL comes from, for the "is the server running?"
/// advice.
pub(crate) fn from_transport(err: &reqwest::Error, url: &str, base_url_hint: &str) -> LlmError {
    let mut cause = root_cause(err);
    // The innermost error is occasionally reqwest's own, whose text names the full URL, with
    // any password or query in it.
    if let Some(full) = err.url() {
        cause = cause.replace(full.as_str(), &display_url(full.as_str()));
    }
    if err.is_timeout() {
        LlmError::new(
            ErrorCategory::Timeout,
            format!("the request to {url} timed out ({cause})"),
        )
    } else if err.is_connect() {
        LlmError::new(
            ErrorCategory::Network,
            format!(
                "could not reach {url}: is the server running? check {base_url_hint} ({cause})"
            ),
        )
    } else if err.is_body() || err.is_decode() {
        connection_cut(&cause)
    } else if err.is_builder() {
        LlmError::new(
            ErrorCategory::InvalidRequest,
            format!("could not build a request to {url}: check {base_url_hint} ({cause})"),
        )
    } else {
        LlmError::new(
            ErrorCategory::Network,
            format!("the request to {url} failed ({cause})"),
        )
    }
}

/// Whether `err` is a request whose connection ended before any byte of an answer came back:
/// the connection closed (hyper's "connection closed before message completed") or was reset
/// as the request went out. On a kept-alive connection that means the server had given the
/// connection up, not that it refused the request. A failed connect, a timeout or a reply cut
/// midway is something else.
pub(crate) fn closed_before_answer(err: &reqwest::Error) -> bool {
    if err.is_connect() || err.is_timeout() || err.is_body() || err.is_decode() {
        return false;
    }
    let mut cause = std::error::Error::source(err);
    while let Some(inner) = cause {
        if inner
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return true;
        }
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            return matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted);
        }
        cause = inner.source();
    }
    false
}

/// The error for a reply whose connection closed before it was complete.
pub(crate) fn connection_cut(cause: &str) -> LlmError {
    let mut message = String::from("connection closed before the reply finished");
    if !cause.is_empty() {
        message.push_str(&format!(" ({cause})"));
    }
    LlmError::new(ErrorCategory::Network, message)
}

/// The error for a stream line longer than [`super::decode::MAX_LINE`]: a peer that never ends
/// its lines would otherwise grow our buffer without bound.
pub(crate) fn line_too_long() -> LlmError {
    LlmError::new(
        ErrorCategory::Server,
        format!(
            "the provider sent a line over {} MiB without ending it; the reply was abandoned",
            super::decode::MAX_LINE / (1024 * 1024)
        ),
    )
}

/// The error for a stream line that should have been JSON and was not.
pub(crate) fn not_json(what: &str, line: &str) -> LlmError {
    LlmError::new(
        ErrorCategory::Server,
        format!(
            "the provider sent {what} that is not valid JSON: {:?}",
            excerpt(line, 200)
        ),
    )
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The error reply as far as we could read it.
#[derive(Debug, Default, PartialEq)]
struct ErrorBody {
    /// The provider's error type or code (`rate_limit_error`, `context_length_exceeded`).
    kind: Option<String>,
    message: Option<String>,
}

impl ErrorBody {
    fn parse(body: &str) -> Self {
        let body = body.trim();
        let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
            return Self {
                kind: None,
                message: (!body.is_empty()).then(|| plain_text_excerpt(body)),
            };
        };
        let text = |v: Option<&serde_json::Value>| -> Option<String> {
            match v? {
                serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            }
        };
        match value.get("error") {
            Some(serde_json::Value::Object(error)) => {
                let kind = text(error.get("type"))
                    .filter(|kind| kind != "error")
                    .or_else(|| text(error.get("code")));
                // OpenAI puts the specific reason in `code` and a broad one in `type`; prefer
                // the specific one when both are present.
                let kind = match (text(error.get("code")), kind) {
                    (Some(code), Some(_)) if code.parse::<u16>().is_err() => Some(code),
                    (_, kind) => kind,
                };
                Self {
                    kind,
                    message: text(error.get("message")),
                }
            }
            Some(serde_json::Value::String(message)) => Self {
                kind: None,
                message: Some(message.clone()),
            },
            // vLLM and some proxies answer `{"object":"error","message":…,"type":…}`.
            _ => Self {
                kind: text(value.get("type")).filter(|kind| kind != "error"),
                message: text(value.get("message")).or_else(|| text(value.get("detail"))),
            },
        }
    }

    /// The provider's words, for quoting in our message.
    fn describe(&self) -> String {
        match (&self.kind, &self.message) {
            (Some(kind), Some(message)) => format!("{kind}: {}", excerpt(message, 500)),
            (None, Some(message)) => excerpt(message, 500),
            (Some(kind), None) => kind.clone(),
            (None, None) => String::new(),
        }
    }
}

fn suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    }
}

fn unloadable_model_message(status: Option<u16>, said: &str) -> String {
    let inner = match status {
        Some(status) => format!("HTTP {status}: {said}"),
        None => said.to_string(),
    };
    format!(
        "the server cannot load the model ({inner}); free memory on the server or choose a \
         smaller model"
    )
}

fn overflow_message(status: Option<u16>, said: &str) -> String {
    let inner = match (status, said.is_empty()) {
        (None, true) => String::new(),
        (Some(status), true) => format!(" (HTTP {status})"),
        (None, false) => format!(" ({said})"),
        (Some(status), false) => format!(" (HTTP {status}: {said})"),
    };
    format!(
        "the prompt is too long for the model's context window{inner}; compact the session or \
         use a model with a larger window"
    )
}

/// Whether a provider's message says the prompt does not fit the context window. Providers word
/// this differently; these phrases cover Anthropic, OpenAI, OpenRouter, vLLM and llama.cpp.
fn mentions_overflow(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context_length_exceeded",
        "maximum context length",
        "too many tokens",
        "context window",
        "context length",
        "exceeds the available context",
        // Anthropic: "input length and `max_tokens` exceed context limit: 199759 + 8192 >
        // 200000".
        "context limit",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// Whether a server's message says it cannot load or run the model at all (Ollama's "model
/// requires more system memory", llama.cpp's "failed to load model"). Asking again gets the
/// same answer, so these are not worth retrying even when they come as a 500.
fn mentions_unloadable_model(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    [
        "requires more system memory",
        "failed to load model",
        "unable to load model",
        "error loading model",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// A non-JSON body (an HTML error page from a proxy, plain text) shortened to one line.
fn plain_text_excerpt(body: &str) -> String {
    if body.starts_with('<') {
        return "an HTML page instead of an API error; check base_url".to_string();
    }
    let one_line: Vec<&str> = body.split_whitespace().collect();
    excerpt(&one_line.join(" "), 200)
}

/// Replaces words that look like API keys, masked or not, so that an error message shown or
/// logged never carries one.
fn redact_secrets(message: &str) -> String {
    let looks_secret = |word: &str| {
        let core = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '*');
        core.contains('*')
            || core.starts_with("sk-")
            || core.starts_with("sk_")
            || (core.len() >= 32
                && core
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
    };
    let words: Vec<&str> = message
        .split(' ')
        .map(|word| {
            if looks_secret(word) {
                "[redacted]"
            } else {
                word
            }
        })
        .collect();
    words.join(" ")
}

/// `url` without the parts that may carry secrets (a user name and password, the query) or
/// say nothing useful (a fragment): the form every message and log line shows.
pub(crate) fn display_url(url: &str) -> String {
    let url = url.trim();
    if let Ok(mut parsed) = reqwest::Url::parse(url) {
        // Both fail only for URLs that cannot have credentials, which then have none.
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        parsed.set_query(None);
        parsed.set_fragment(None);
        return parsed.to_string();
    }
    // Not a URL the client could use either; cut the same parts by hand.
    let url = url.split(['?', '#']).next().unwrap_or_default();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}{host}{path}")
}

/// The innermost cause of an error: reqwest's own message is "error sending request for url
/// (…)", repeating the URL we already name, while the useful part (connection refused, a DNS
/// failure, a certificate problem) sits at the end of the source chain.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
