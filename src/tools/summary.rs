//! One-line views of tool calls, for every front end that lists them (the line mode, the
//! transcript of `tern sessions show`, the terminal UI).

/// A one-line view of a tool call's arguments: the path, command or pattern when there is
/// one (first line only), otherwise compact JSON.
pub fn summarize_input(input: &serde_json::Value) -> String {
    for key in ["command", "path", "pattern"] {
        if let Some(value) = input.get(key).and_then(|v| v.as_str()) {
            let first = value.lines().next().unwrap_or("");
            let more = if value.lines().nth(1).is_some() {
                " …"
            } else {
                ""
            };
            return format!("{}{more}", clip(first, 100));
        }
    }
    clip(&input.to_string(), 100)
}

/// Cuts `text` to at most `max` characters, marking the cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
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
        assert_eq!(summarize_input(&json!({"n": 1})), "{\"n\":1}");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("ab", 3), "ab");
    }
}
