//! The IO half of keeping large tool-call arguments out of the history
//! ([`compaction::shorten_arguments`] decides): once calls have their results, the arguments
//! over `[session] max_argument_bytes` that no written file holds are saved in the session's
//! `artifacts/`, and the calls' shortened arguments are journaled in the same commit as their
//! results, so a replay, a snapshot and a reopened session all hold the same history.

use super::compaction;
use super::turn::Turn;
use crate::domain::{ToolCall, ToolResult};
use crate::store::JournalEvent;
use serde_json::Value;
use std::collections::BTreeMap;

impl Turn<'_> {
    /// The event that shortens the arguments of `calls` (answered by `results`, in the same
    /// order) over the limit, saving what the placeholders stand for; `None` when every
    /// call's arguments are within it.
    pub(super) fn shortened_arguments(
        &self,
        calls: &[ToolCall],
        results: &[ToolResult],
    ) -> Option<JournalEvent> {
        let limit = self.deps.settings.max_argument_bytes;
        let mut inputs = BTreeMap::new();
        for (call, result) in calls.iter().zip(results) {
            let save = |key: &str, value: &Value| {
                let stem = format!("call-{}-{}", file_safe(&call.id), file_safe(key));
                match value {
                    Value::String(text) => self.dirs.save_new_artifact(&stem, text),
                    other => self.dirs.save_new_artifact(&stem, &other.to_string()),
                }
            };
            if let Some(input) = compaction::shorten_arguments(call, !result.is_error, limit, save)
            {
                inputs.insert(call.id.clone(), input);
            }
        }
        (!inputs.is_empty()).then_some(JournalEvent::ArgumentsShortened { inputs })
    }
}

/// `text` as part of a file name: letters, digits, `-` and `_` kept, anything else `_`, at
/// most 64 characters (call ids come from the provider).
fn file_safe(text: &str) -> String {
    text.chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect()
}
