//! Large tool-call arguments kept out of the history. A call's arguments stay whole while it
//! waits and runs; once it has its result, arguments over `[session] max_argument_bytes` are
//! replaced, largest first, by a placeholder naming the tool, the path and the size, and
//! where the full text is: the file a successful write left, or an artifact
//! ([`shorten_arguments`]). Compaction clears the large arguments of older calls as it clears
//! their results ([`clear_arguments`]), saving nothing: the journal keeps every call whole.
//!
//! The arguments stay a JSON object, the other values as they were, so every wire format
//! still pairs the call with its result and the model reads what the call was about.

use super::clear::format_size;
use crate::domain::ToolCall;
use crate::domain::call_text::clip;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A value no larger than this (as JSON) is never replaced: its placeholder would be about as
/// long.
pub const ARGUMENT_FLOOR: usize = 1024;

/// The key that stands for arguments that are not an object (a model's mistake), replaced
/// whole.
const WHOLE: &str = "arguments";

/// The arguments a successful call of a tool leaves in the file at its `path`, so the file
/// is where the model finds them again: a written file's content, an edit's new text.
const LEFT_IN_THE_FILE: [(&str, &str); 2] =
    [("file_write", "content"), ("file_edit", "new_string")];

/// Where a replaced argument's full text is.
enum Kept<'a> {
    /// In the file the call wrote, at this path.
    Written(&'a str),
    /// Saved beside the session, at this path.
    Saved(&'a Path),
    /// Not where the model can read it: it could not be saved, or compaction cleared it.
    Gone,
}

/// The arguments of `call` (whose result was an error unless `ok`) with their largest values
/// replaced by placeholders, largest first, until they take at most `limit` bytes as JSON;
/// `None` when they already do. A value left in the file the call wrote is named by that
/// file; any other is handed to `save` (its key and value), which returns where it kept the
/// full text, if it could.
pub fn shorten_arguments(
    call: &ToolCall,
    ok: bool,
    limit: usize,
    mut save: impl FnMut(&str, &Value) -> Option<PathBuf>,
) -> Option<Value> {
    let mut total = json_len(&call.input);
    if total <= limit {
        return None;
    }
    let Value::Object(map) = &call.input else {
        let saved = save(WHOLE, &call.input);
        let kept = saved.as_deref().map_or(Kept::Gone, Kept::Saved);
        let text = placeholder(call, WHOLE, value_len(&call.input), &kept, None);
        return Some(Value::Object(Map::from_iter([(
            WHOLE.to_owned(),
            text.into(),
        )])));
    };
    let mut largest: Vec<(&String, usize)> = map
        .iter()
        .map(|(key, value)| (key, json_len(value)))
        .filter(|(_, len)| *len > ARGUMENT_FLOOR)
        .collect();
    // Stable, so values of one size go in the order the model wrote them.
    largest.sort_by_key(|&(_, len)| std::cmp::Reverse(len));
    let path = path_of(call);
    let mut replaced: Map<String, Value> = Map::new();
    for (key, len) in largest {
        if total <= limit {
            break;
        }
        let value = &map[key.as_str()];
        let saved;
        let kept = match written_to(call, key, ok) {
            Some(path) => Kept::Written(path),
            None => {
                saved = save(key, value);
                saved.as_deref().map_or(Kept::Gone, Kept::Saved)
            }
        };
        let text = placeholder(call, key, value_len(value), &kept, path);
        total = total - len + json_len(&Value::String(text.clone()));
        replaced.insert(key.clone(), Value::String(text));
    }
    let shortened = map.iter().map(|(key, value)| {
        let value = replaced.remove(key).unwrap_or_else(|| value.clone());
        (key.clone(), value)
    });
    Some(Value::Object(shortened.collect()))
}

/// Clears every value of `call`'s arguments larger than [`ARGUMENT_FLOOR`] (all of them when
/// they are not an object), naming the file a successful write left it in (`ok`) where there
/// is one. Returns the bytes it saved; nothing changes when that is none.
pub fn clear_arguments(call: &mut ToolCall, ok: bool) -> usize {
    let before = json_len(&call.input);
    if before <= ARGUMENT_FLOOR {
        return 0;
    }
    // No size is small enough to stop at, so every value over the floor goes.
    let Some(input) = shorten_arguments(call, ok, 0, |_, _| None) else {
        return 0;
    };
    let after = json_len(&input);
    if after >= before {
        return 0;
    }
    call.input = input;
    before - after
}

/// The path `call` names, when it names one short enough to repeat.
fn path_of(call: &ToolCall) -> Option<&str> {
    let path = call.input.get("path")?.as_str()?;
    (path.len() <= ARGUMENT_FLOOR / 4).then_some(path)
}

/// The file `call` left the value of `key` in, when it succeeded and is a tool that does.
fn written_to<'a>(call: &'a ToolCall, key: &str, ok: bool) -> Option<&'a str> {
    let leaves = LEFT_IN_THE_FILE.contains(&(call.name.as_str(), key));
    if ok && leaves { path_of(call) } else { None }
}

/// The text standing in for the value of `key`, `bytes` long, of `call`.
fn placeholder(
    call: &ToolCall,
    key: &str,
    bytes: usize,
    kept: &Kept,
    path: Option<&str>,
) -> String {
    let size = format_size(bytes);
    let tool = clip(&call.name, 64);
    let of = match path {
        Some(path) => format!("{key} of {size} for {tool} on {path}"),
        None => format!("{key} of {size} for {tool}"),
    };
    match kept {
        Kept::Written(path) => {
            format!("[{key} of {size} written to {path} by {tool}; read the file to see it]")
        }
        Kept::Saved(saved) => format!(
            "[{of}, kept out of the history to save context; the full text is saved in {} and \
             can be read from there]",
            saved.display()
        ),
        Kept::Gone => format!("[{of}, cleared from the history to save context]"),
    }
}

/// How large a value is for a person: a text's bytes, anything else's as JSON.
fn value_len(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        other => json_len(other),
    }
}

/// The length of `value` written as compact JSON, without writing it anywhere.
pub fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            input,
        }
    }

    /// Shortens `call` under `limit`, answering saves with `saved_to`; returns the new
    /// arguments and the keys handed to the save.
    fn shorten(
        call: &ToolCall,
        ok: bool,
        limit: usize,
        saved_to: Option<&str>,
    ) -> (Option<Value>, Vec<String>) {
        let mut asked = Vec::new();
        let out = shorten_arguments(call, ok, limit, |key, _| {
            asked.push(key.to_owned());
            saved_to.map(PathBuf::from)
        });
        (out, asked)
    }

    #[test]
    fn a_written_file_s_content_is_named_by_the_file_and_nothing_is_saved() {
        let write = call(
            "file_write",
            json!({"path": "src/x.rs", "content": "x".repeat(5 * 1024 * 1024)}),
        );
        let (out, asked) = shorten(&write, true, 32 * 1024, Some("/a/call.txt"));
        assert_eq!(
            out,
            Some(json!({
                "path": "src/x.rs",
                "content": "[content of 5.0 MiB written to src/x.rs by file_write; read the \
                            file to see it]"
            }))
        );
        assert!(asked.is_empty(), "the file holds it: {asked:?}");
    }

    #[test]
    fn an_argument_no_file_holds_is_saved_and_the_placeholder_says_where() {
        let write = call(
            "file_write",
            json!({"path": "src/x.rs", "content": "x".repeat(40 * 1024)}),
        );
        // A write that failed left nothing in the file.
        let (out, asked) = shorten(&write, false, 32 * 1024, Some("/a/call-c1-content.txt"));
        assert_eq!(asked, ["content"]);
        assert_eq!(
            out.unwrap()["content"],
            "[content of 40.0 KiB for file_write on src/x.rs, kept out of the history to save \
             context; the full text is saved in /a/call-c1-content.txt and can be read from there]"
        );
        let shell = call("shell_execute", json!({"command": "y".repeat(40 * 1024)}));
        let (out, _) = shorten(&shell, true, 32 * 1024, None);
        assert_eq!(
            out,
            Some(json!({
                "command": "[command of 40.0 KiB for shell_execute, cleared from the history to \
                            save context]"
            }))
        );
    }

    #[test]
    fn arguments_within_the_limit_stay_whole() {
        let edit = call(
            "file_edit",
            json!({"path": "a", "old_string": "o".repeat(30 * 1024), "new_string": "n"}),
        );
        assert_eq!(shorten(&edit, true, 32 * 1024, None), (None, Vec::new()));
    }

    #[test]
    fn the_largest_values_go_first_until_the_rest_fits() {
        let edit = call(
            "file_edit",
            json!({
                "path": "a.rs",
                "old_string": "o".repeat(20 * 1024),
                "new_string": "n".repeat(24 * 1024),
                "replace_all": true,
            }),
        );
        let (out, asked) = shorten(&edit, true, 32 * 1024, Some("/s/old.txt"));
        let out = out.unwrap();
        // The new text is in the file now; the old text, under the limit alone, stays.
        assert!(asked.is_empty(), "{asked:?}");
        assert_eq!(out["old_string"], "o".repeat(20 * 1024));
        assert_eq!(
            out["new_string"],
            "[new_string of 24.0 KiB written to a.rs by file_edit; read the file to see it]"
        );
        assert_eq!(out["replace_all"], true);
        assert!(json_len(&out) <= 32 * 1024);
    }

    #[test]
    fn arguments_that_are_not_an_object_become_one() {
        let odd = call("glob", Value::String("z".repeat(4096)));
        let (out, asked) = shorten(&odd, false, 1024, None);
        assert_eq!(asked, ["arguments"]);
        let out = out.unwrap();
        assert!(out.is_object(), "{out}");
        assert!(
            out["arguments"]
                .as_str()
                .unwrap()
                .starts_with("[arguments of 4.0 KiB for glob")
        );
    }

    #[test]
    fn clearing_takes_every_large_value_once_and_keeps_the_small_ones() {
        let mut edit = call(
            "file_edit",
            json!({
                "path": "a.rs",
                "old_string": "o".repeat(20 * 1024),
                "new_string": "n".repeat(2 * 1024),
            }),
        );
        let before = json_len(&edit.input);
        let saved = clear_arguments(&mut edit, true);
        assert_eq!(saved, before - json_len(&edit.input));
        assert_eq!(edit.input["path"], "a.rs");
        assert_eq!(
            edit.input["old_string"],
            "[old_string of 20.0 KiB for file_edit on a.rs, cleared from the history to save \
             context]"
        );
        assert_eq!(
            edit.input["new_string"],
            "[new_string of 2.0 KiB written to a.rs by file_edit; read the file to see it]"
        );
        assert_eq!(clear_arguments(&mut edit, true), 0, "placeholders stay");
        let mut small = call("glob", json!({"pattern": "**/*.rs"}));
        assert_eq!(clear_arguments(&mut small, true), 0);
        assert_eq!(small.input, json!({"pattern": "**/*.rs"}));
    }
}
