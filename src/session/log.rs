//! The session's own log, `logs/session.log` in its folder: one line per thing that
//! happened, readable with `tail -f` while a turn runs. Tool arguments are redacted (a long
//! string shows only as its length and a hash) and secrets are replaced wherever they
//! could appear (see [`Redactor`]), so the log never holds file contents or keys a model,
//! a command or a provider's message passed along.

use super::events::SessionEvent;
use super::redact::Redactor;
use crate::domain::{Answer, ApprovalDetail, TurnStop};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An append-only log file, opened with the first line to write; writing is best effort and
/// never fails a session.
pub struct SessionLog {
    dir: PathBuf,
    redactor: Arc<Redactor>,
    /// `None` until first used; `Some(None)` once opening failed.
    file: Option<Option<File>>,
}

impl SessionLog {
    /// The log `session.log` in `dir`; nothing is created until there is a line to write.
    pub fn new(dir: &Path, redactor: Arc<Redactor>) -> Self {
        Self {
            dir: dir.to_path_buf(),
            redactor,
            file: None,
        }
    }

    /// Writes the line for `event`, if it gets one (streamed deltas and phase changes do not).
    pub fn record(&mut self, event: &SessionEvent) {
        let Some(line) = describe(event, &self.redactor) else {
            return;
        };
        self.write(&line);
    }

    /// Writes one line, already free of secrets.
    fn write(&mut self, line: &str) {
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
fn describe(event: &SessionEvent, redactor: &Redactor) -> Option<String> {
    Some(match event {
        SessionEvent::InputAccepted { seq, text, .. } => {
            format!("input #{seq} accepted ({} bytes)", text.len())
        }
        SessionEvent::ToolCall { id, name, input } => {
            format!("tool call {name} {id} {}", redactor.arguments(input))
        }
        SessionEvent::ToolResult {
            id,
            name,
            content,
            is_error,
            duration_ms,
        } => {
            let outcome = if *is_error { "error" } else { "ok" };
            let took = duration_ms.map_or(String::new(), |ms| format!(", {ms} ms"));
            format!(
                "tool result {name} {id} {outcome} ({} bytes{took})",
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
            discarded_chars,
            ..
        } => format!(
            "retry: attempt {attempt} in {} ms after {category} ({discarded_chars} characters \
             of answer discarded): {}",
            delay.as_millis(),
            redactor.text(message)
        ),
        SessionEvent::TextReadAsCalls { discarded_chars } => {
            format!(
                "the reply's text was tool calls written as text ({discarded_chars} characters of answer discarded)"
            )
        }
        SessionEvent::Fallback {
            model,
            message,
            discarded_chars,
            ..
        } => format!(
            "fallback to {model} ({discarded_chars} characters of answer discarded): {}",
            redactor.text(message)
        ),
        SessionEvent::TurnCompleted { text, stop, .. } if *stop == TurnStop::Completed => {
            format!("turn completed ({} bytes of answer)", text.len())
        }
        SessionEvent::TurnCompleted { text, stop, .. } => {
            format!("turn ended: {stop} ({} bytes of answer)", text.len())
        }
        SessionEvent::TurnFailed { message, stop, .. } => {
            format!("turn failed ({stop}): {}", redactor.text(message))
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
        // The summary quotes the arguments, which the log keeps out: the kind of detail says
        // enough to follow what happened.
        SessionEvent::ApprovalRequested {
            call_id,
            tool,
            detail,
            always,
            ..
        } => {
            let kind = match detail {
                ApprovalDetail::Command { .. } => "a command",
                ApprovalDetail::Edit { .. } => "a file change",
                ApprovalDetail::Outside { .. } => "access outside the project",
                ApprovalDetail::Other { .. } => "a call",
            };
            let always = if always.is_some() {
                ""
            } else {
                ", always not offered"
            };
            format!("approval asked: {tool} {call_id} ({kind}{always})")
        }
        SessionEvent::ApprovalDecided { call_id, answer } => match answer {
            Answer::Once => format!("approval {call_id}: once"),
            Answer::Always => format!("approval {call_id}: always"),
            Answer::Deny { reason } => format!(
                "approval {call_id}: denied{}",
                reason
                    .as_deref()
                    .map(|r| format!(" ({})", redactor.text(r)))
                    .unwrap_or_default()
            ),
        },
        SessionEvent::TitleChanged { title } => {
            format!("title changed ({} chars)", title.chars().count())
        }
        SessionEvent::TextDelta { .. }
        | SessionEvent::ThinkingDelta { .. }
        | SessionEvent::PhaseChanged { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_log_gets_a_line_per_event_and_none_for_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let redactor = Arc::new(Redactor::new(["configured-key-123".to_owned()]));
        let mut log = SessionLog::new(dir.path(), redactor);
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

    #[test]
    fn secrets_never_reach_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let redactor = Arc::new(Redactor::new(["configured-key-123".to_owned()]));
        let mut log = SessionLog::new(dir.path(), redactor);
        log.record(&SessionEvent::ToolCall {
            id: "t1".into(),
            name: "shell_execute".into(),
            input: json!({"command": "curl -u me:configured-key-123 https://x"}),
        });
        log.record(&SessionEvent::TurnFailed {
            category: crate::domain::ErrorCategory::Auth,
            message: "invalid x-api-key sk-ant-api03-0123456789abcdefghij".into(),
            stop: TurnStop::Error {
                category: crate::domain::ErrorCategory::Auth,
            },
        });
        let text = std::fs::read_to_string(dir.path().join("session.log")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(!text.contains("configured-key-123"), "{text}");
        assert!(!text.contains("sk-ant"), "{text}");
        assert!(text.contains("<secret>"), "{text}");
    }
}
