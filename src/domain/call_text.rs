//! One-line views of tool calls, for every front end that lists them (the line mode, the
//! transcript of `tern sessions show`, the terminal UI).

/// A one-line view of a tool call's arguments: the path, command or pattern when there is
/// one, otherwise every argument as `name: value`; only the first line of a text.
pub fn summarize_input(input: &serde_json::Value) -> String {
    for key in ["command", "path", "pattern"] {
        if let Some(value) = input.get(key).and_then(|v| v.as_str()) {
            return clip(&first_line(value), 100);
        }
    }
    let pairs: Vec<String> = argument_pairs(input)
        .iter()
        .map(|(name, value)| format!("{name}: {}", first_line(value)))
        .collect();
    clip(&pairs.join(", "), 100)
}

/// The first line of `text`, with ` …` when more lines follow.
fn first_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    match lines.next() {
        Some(_) => format!("{first} …"),
        None => first.to_owned(),
    }
}

/// A call's arguments as `(name, value)` pairs for a person to read, in the order sent: text
/// as it is (its lines kept), any other value as compact JSON. Arguments that are not an
/// object (a model's mistake) come as one pair named `arguments`.
pub fn argument_pairs(input: &serde_json::Value) -> Vec<(String, String)> {
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match input {
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        serde_json::Value::Null => Vec::new(),
        other => vec![("arguments".to_owned(), text(other))],
    }
}

/// Cuts `text` to at most `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// What a JSON value is ("a string", "an array"), for messages that name a value's type
/// without repeating the value.
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_summary_names_what_the_call_is_about() {
        assert_eq!(
            summarize_input(&json!({"path": "src/a.rs", "offset": 3})),
            "src/a.rs"
        );
        assert_eq!(
            summarize_input(&json!({"command": "cargo test\necho done"})),
            "cargo test …"
        );
        assert_eq!(
            summarize_input(&json!({"url": "https://x.example", "n": 1, "note": "a\nb"})),
            "url: https://x.example, n: 1, note: a …"
        );
        assert_eq!(clip("abcdef", 3), "abc…");
        let pairs = argument_pairs(&json!({"query": "a\nb", "limit": 3, "tags": ["x"]}));
        let expected = [("query", "a\nb"), ("limit", "3"), ("tags", "[\"x\"]")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(pairs, expected);
        assert_eq!(argument_pairs(&json!(null)), Vec::new());
        assert_eq!(
            argument_pairs(&json!([1])),
            [("arguments".to_owned(), "[1]".to_owned())]
        );
        assert_eq!(clip("ab", 3), "ab");
    }
}
