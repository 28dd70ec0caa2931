//! The session's own log, `logs/session.log` in its folder: one line per thing that
//! happened, readable with `tail -f` while a turn runs. Tool arguments are redacted (a long
//! string shows only as its length and a hash), so the log never holds file contents or
//! secrets a model passed along.

use super::events::SessionEvent;
use crate::domain::TurnStop;
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Strings up to this many characters are logged as they are; longer ones are redacted.
const KEEP_CHARS: usize = 64;

/// An append-only log file, opened with the first line to write; writing is best effort and
/// never fails a session.
pub struct SessionLog {
    dir: PathBuf,
    /// `None` until first used; `Some(None)` once opening failed.
    file: Option<Option<File>>,
}

impl SessionLog {
    /// The log `session.log` in `dir`; nothing is created until there is a line to write.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            file: None,
        }
    }

    /// Writes the line for `event`, if it gets one (streamed deltas and phase changes do not).
    pub fn record(&mut self, event: &SessionEvent) {
        let Some(line) = describe(event) else {
            return;
        };
        let dir = &self.dir;
        let file = self.file.get_or_insert_with(|| {
            let opened = std::fs::create_dir_all(dir).and_then(|()| {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(super::envelope::LOG_FILE))
            });
            if let Err(err) = &opened {
                tracing::warn!(%err, dir = %dir.display(), "session log unavailable");
            }
            opened.ok()
        });
        if let Some(file) = file {
            let now = jiff::Timestamp::now();
            let _ = writeln!(file, "{now:.3} {line}");
        }
    }
}

/// One log line for an event.
fn describe(event: &SessionEvent) -> Option<String> {
    Some(match event {
        SessionEvent::InputAccepted { seq, text } => {
            format!("input #{seq} accepted ({} bytes)", text.len())
        }
        SessionEvent::ToolCall { id, name, input } => {
            format!("tool call {name} {id} {}", redact(input))
        }
        SessionEvent::ToolResult {
            id,
            name,
            content,
            is_error,
        } => {
            let outcome = if *is_error { "error" } else { "ok" };
            format!(
                "tool result {name} {id} {outcome} ({} bytes)",
                content.len()
            )
        }
        SessionEvent::Usage { model, usage } => format!(
            "usage {model}: input {} (cache read {}, cache write {}), output {}",
            usage.input_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
            usage.output_tokens
        ),
        SessionEvent::Retry {
            attempt,
            delay,
            category,
            message,
        } => format!(
            "retry: attempt {attempt} in {} ms after {category}: {message}",
            delay.as_millis()
        ),
        SessionEvent::Fallback { model, message } => format!("fallback to {model}: {message}"),
        SessionEvent::TurnCompleted { text, stop, .. } if *stop == TurnStop::Completed => {
            format!("turn completed ({} bytes of answer)", text.len())
        }
        SessionEvent::TurnCompleted { text, stop, .. } => {
            format!("turn ended: {stop} ({} bytes of answer)", text.len())
        }
        SessionEvent::TurnFailed { message, stop, .. } => {
            format!("turn failed ({stop}): {message}")
        }
        SessionEvent::Compacted {
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
            results_cleared,
            notes,
            ..
        } => format!(
            "compacted: {messages_before} → {messages_after} messages, ~{tokens_before} → \
             ~{tokens_after} tokens, {results_cleared} tool results cleared, notes: {notes}"
        ),
        SessionEvent::TextDelta { .. }
        | SessionEvent::ThinkingDelta { .. }
        | SessionEvent::PhaseChanged { .. } => return None,
    })
}

/// Tool arguments with every long string replaced by its length and a hash, so two calls
/// with the same content can still be told apart.
fn redact(value: &Value) -> String {
    fn walk(value: &Value) -> Value {
        match value {
            Value::String(s) if s.chars().count() > KEEP_CHARS => Value::String(format!(
                "<{} chars, fnv {:016x}>",
                s.chars().count(),
                fnv1a(s)
            )),
            Value::Array(items) => Value::Array(items.iter().map(walk).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), walk(v))).collect())
            }
            other => other.clone(),
        }
    }
    walk(value).to_string()
}

/// FNV-1a, 64 bits: enough to recognise a repeated argument, not meant to resist attack.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_strings_in_arguments_are_redacted_short_ones_kept() {
        let content = "secret file content ".repeat(10);
        let line = redact(&json!({"path": "src/main.rs", "content": content, "n": 3}));
        assert!(line.contains("\"path\":\"src/main.rs\""), "{line}");
        assert!(line.contains("<200 chars, fnv "), "{line}");
        assert!(!line.contains("secret"), "{line}");
        assert!(line.contains("\"n\":3"), "{line}");
    }

    #[test]
    fn the_log_gets_a_line_per_event_and_none_for_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SessionLog::new(dir.path());
        log.record(&SessionEvent::TextDelta { text: "x".into() });
        log.record(&SessionEvent::ToolCall {
            id: "t1".into(),
            name: "file_write".into(),
            input: json!({"path": "a", "content": "y".repeat(100)}),
        });
        let text = std::fs::read_to_string(dir.path().join("session.log")).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.contains("tool call file_write t1"), "{text}");
        assert!(!text.contains(&"y".repeat(100)), "{text}");
    }
}
