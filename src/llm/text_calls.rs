//! Tool calls a model wrote as text. Small local models often answer a request for a tool
//! with the call itself as their whole reply, `{"name": "grep", "arguments": {...}}`, bare,
//! in a ```json fence or between `<tool_call>` tags, which a server's chat template did not
//! turn into a real call (llama.cpp's server passes such a reply on as text). A reply that
//! is nothing but such calls, each naming a tool the request offered, is read as those
//! calls; anything else stays text. Only providers that serve such models ask for this
//! ([`super::Provider::reads_calls_in_text`]): Ollama, OpenAI-compatible servers, and
//! Anthropic-compatible ones on this machine or the local network; never OpenAI's or
//! Anthropic's own APIs.

use crate::domain::{ContentBlock, ToolCall};
use serde_json::{Map, Value};

/// The prefix of the ids given to calls read from text, followed by a random word shared by
/// the reply's calls (ids stay unique across the session) and the call's position.
const ID_PREFIX: &str = "text_call_";

/// Replaces the text of `content` by the tool calls it spells, when the reply has no real
/// call and its text (thinking aside) is nothing but calls to tools named in `offered`.
/// Returns how many calls were read; 0 leaves `content` as it was.
pub fn read_calls_in_text(content: &mut Vec<ContentBlock>, offered: &[&str]) -> usize {
    if offered.is_empty()
        || content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse(_)))
    {
        return 0;
    }
    let text: String = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let Some(calls) = calls_in(&text, offered) else {
        return 0;
    };
    let count = calls.len();
    let reply = fastrand::u32(..);
    content.retain(|block| !matches!(block, ContentBlock::Text { .. }));
    content.extend(calls.into_iter().enumerate().map(|(i, (name, input))| {
        ContentBlock::ToolUse(ToolCall {
            id: format!("{ID_PREFIX}{reply:08x}_{i}"),
            name,
            input,
        })
    }));
    count
}

/// The calls `text` consists of, or `None` when it is anything more or less than calls.
fn calls_in(text: &str, offered: &[&str]) -> Option<Vec<(String, Value)>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (body, after) = next_wrapped(rest)?;
        let value: Value = serde_json::from_str(body.trim()).ok()?;
        match value {
            Value::Array(items) if !items.is_empty() => {
                for item in items {
                    calls.push(call(item, offered)?);
                }
            }
            other => calls.push(call(other, offered)?),
        }
        rest = after.trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// The first JSON text of `text` and what follows it: inside `<tool_call>` tags, a code
/// fence (```json or bare ```), or the whole of it when bare.
fn next_wrapped(text: &str) -> Option<(&str, &str)> {
    if let Some(inner) = text.strip_prefix("<tool_call>") {
        let end = inner.find("</tool_call>")?;
        return Some((&inner[..end], &inner[end + "</tool_call>".len()..]));
    }
    if let Some(inner) = text.strip_prefix("```") {
        let newline = inner.find('\n')?;
        let language = inner[..newline].trim();
        if !(language.is_empty() || language.eq_ignore_ascii_case("json")) {
            return None;
        }
        let inner = &inner[newline + 1..];
        let end = inner.find("```")?;
        return Some((&inner[..end], &inner[end + 3..]));
    }
    text.starts_with(['{', '[']).then_some((text, ""))
}

/// One call: an object with a `name` the request offered and `arguments` (or `parameters`),
/// an object or a string holding one; no arguments at all is an empty object. Any other key
/// makes it something else than a call.
fn call(value: Value, offered: &[&str]) -> Option<(String, Value)> {
    let Value::Object(mut object) = value else {
        return None;
    };
    let name = object.remove("name")?.as_str()?.to_owned();
    if !offered.contains(&name.as_str()) {
        return None;
    }
    let arguments = match (object.remove("arguments"), object.remove("parameters")) {
        (Some(args), None) | (None, Some(args)) => args,
        (None, None) => Value::Object(Map::new()),
        (Some(_), Some(_)) => return None,
    };
    if !object.is_empty() {
        return None;
    }
    let arguments = match arguments {
        Value::String(text) => serde_json::from_str(&text).ok()?,
        other => other,
    };
    arguments.is_object().then_some((name, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OFFERED: [&str; 3] = ["grep", "file_read", "glob"];

    fn read(text: &str) -> Vec<ContentBlock> {
        let mut content = vec![ContentBlock::Text { text: text.into() }];
        read_calls_in_text(&mut content, &OFFERED);
        content
    }

    fn call_of(block: &ContentBlock) -> (&str, &Value) {
        match block {
            ContentBlock::ToolUse(call) => (call.name.as_str(), &call.input),
            other => panic!("not a call: {other:?}"),
        }
    }

    #[test]
    fn a_bare_fenced_or_tagged_call_is_read() {
        for text in [
            r#"{"name": "grep", "arguments": {"pattern": "tiny"}}"#,
            "```json\n{\n  \"name\": \"grep\",\n  \"arguments\": {\"pattern\": \"tiny\"}\n}\n```",
            "```\n{\"name\": \"grep\", \"parameters\": {\"pattern\": \"tiny\"}}\n```\n",
            "<tool_call>\n{\"name\": \"grep\", \"arguments\": \"{\\\"pattern\\\": \\\"tiny\\\"}\"}\n</tool_call>",
        ] {
            let content = read(text);
            assert_eq!(content.len(), 1, "{text}");
            assert_eq!(
                call_of(&content[0]),
                ("grep", &json!({"pattern": "tiny"})),
                "{text}"
            );
        }
    }

    #[test]
    fn several_calls_are_read_in_order_with_their_own_ids() {
        let content = read(
            "<tool_call>{\"name\": \"glob\", \"arguments\": {\"pattern\": \"*.py\"}}</tool_call>\n\
             <tool_call>{\"name\": \"file_read\", \"arguments\": {\"path\": \"a.py\"}}</tool_call>",
        );
        let names: Vec<&str> = content.iter().map(|b| call_of(b).0).collect();
        assert_eq!(names, ["glob", "file_read"]);
        let ids: Vec<&str> = content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolUse(call) => call.id.as_str(),
                _ => "",
            })
            .collect();
        assert!(
            ids[0].starts_with("text_call_") && ids[0].ends_with("_0"),
            "{ids:?}"
        );
        assert_eq!(ids[1], format!("{}1", ids[0].trim_end_matches('0')));
        let again = read("{\"name\": \"glob\", \"arguments\": {}}");
        let ContentBlock::ToolUse(call) = &again[0] else {
            panic!("not a call");
        };
        assert_ne!(call.id, ids[0], "another reply's calls get other ids");
        let listed = read(r#"[{"name": "glob", "arguments": {"pattern": "*"}}]"#);
        assert_eq!(call_of(&listed[0]).0, "glob");
    }

    #[test]
    fn anything_more_or_other_than_calls_stays_text() {
        for text in [
            "Here is the call: {\"name\": \"grep\", \"arguments\": {}}",
            "{\"name\": \"grep\", \"arguments\": {}} and then I will read it",
            "{\"name\": \"rm_rf\", \"arguments\": {}}",
            "{\"name\": \"grep\", \"arguments\": {}, \"why\": \"because\"}",
            "{\"name\": \"grep\", \"arguments\": [1, 2]}",
            "```python\n{\"name\": \"grep\", \"arguments\": {}}\n```",
            "{\"name\": \"grep\", \"arguments\": {",
            "{\"pattern\": \"tiny\"}",
            "[]",
            "",
            "The answer is 42.",
        ] {
            let content = read(text);
            assert_eq!(
                content,
                vec![ContentBlock::Text { text: text.into() }],
                "{text}"
            );
        }
    }

    #[test]
    fn a_reply_with_a_real_call_or_no_tools_offered_is_left_alone() {
        let text = ContentBlock::Text {
            text: r#"{"name": "grep", "arguments": {}}"#.into(),
        };
        let real = ContentBlock::ToolUse(ToolCall {
            id: "call_1".into(),
            name: "glob".into(),
            input: json!({}),
        });
        let mut content = vec![text.clone(), real.clone()];
        assert_eq!(read_calls_in_text(&mut content, &OFFERED), 0);
        assert_eq!(content, [text.clone(), real]);
        let mut content = vec![text.clone()];
        assert_eq!(read_calls_in_text(&mut content, &[]), 0);
        assert_eq!(content, [text]);
    }

    #[test]
    fn only_servers_of_small_models_are_read_this_way() {
        use crate::config::{ProviderKind, ProviderProfile};
        let reads = |kind, base_url: &str| {
            crate::llm::provider_for(&ProviderProfile {
                name: "p".into(),
                kind,
                base_url: base_url.into(),
                api_key_env: None,
                api_key: Some("k".into()),
                default_model: "m".into(),
                context_window: 4096,
                max_output_tokens: 1024,
                written: Default::default(),
            })
            .reads_calls_in_text()
        };
        assert!(!reads(ProviderKind::OpenAi, "https://api.openai.com/v1"));
        assert!(!reads(ProviderKind::Anthropic, "https://api.anthropic.com"));
        assert!(reads(ProviderKind::OpenAi, "http://127.0.0.1:8080/v1"));
        assert!(reads(ProviderKind::Anthropic, "http://127.0.0.1:8080"));
        assert!(reads(ProviderKind::Ollama, "http://127.0.0.1:11434"));
    }

    #[test]
    fn thinking_stays_before_the_calls() {
        let thinking = ContentBlock::Thinking {
            thinking: "I should search.".into(),
            signature: None,
        };
        let mut content = vec![
            thinking.clone(),
            ContentBlock::Text {
                text: r#"{"name": "grep", "arguments": {"pattern": "x"}}"#.into(),
            },
        ];
        assert_eq!(read_calls_in_text(&mut content, &OFFERED), 1);
        assert_eq!(content[0], thinking);
        assert_eq!(call_of(&content[1]).0, "grep");
    }
}
