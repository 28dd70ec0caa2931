//! Tool calls a model wrote as text. Small local models often answer a request for a tool
//! with the call itself as their whole reply, `{"name": "grep", "arguments": {...}}`, bare,
//! in a ```json fence or between `<tool_call>` tags, one call or several in a row, which a
//! server's chat template did not turn into real calls (llama.cpp's server passes such a
//! reply on as text). A reply that is nothing but such calls, at least one naming a tool the
//! request offered, is read as those calls (one naming another tool gets the usual "no such
//! tool" result); anything else stays text. A reply cut off at its output limit while it
//! wrote calls keeps the calls it finished. Only providers that serve such models ask for
//! this ([`super::Provider::reads_calls_in_text`]): Ollama, OpenAI-compatible servers, and
//! Anthropic-compatible ones on this machine or the local network; never OpenAI's or
//! Anthropic's own APIs.

use crate::domain::{ContentBlock, ToolCall};
use serde_json::{Map, Value};

/// The prefix of the ids given to calls read from text, followed by a random word shared by
/// the reply's calls (ids stay unique across the session) and the call's position.
const ID_PREFIX: &str = "text_call_";

/// How the reply's text ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The model finished it.
    Whole,
    /// The output limit cut it off: its last call may be unfinished, and is left out.
    Cut,
}

/// Replaces the text of `content` by the tool calls it spells, when the reply has no real
/// call and its text (thinking aside) is nothing but calls, at least one to a tool named in
/// `offered`. Returns how many calls were read; 0 leaves `content` as it was.
pub fn read_calls_in_text(
    content: &mut Vec<ContentBlock>,
    offered: &[&str],
    ending: Ending,
) -> usize {
    if offered.is_empty()
        || content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse(_)))
    {
        return 0;
    }
    let text = crate::domain::text_of(content);
    let Some(mut calls) = calls_in(&text, ending) else {
        return 0;
    };
    // A small model may write the same call over and over until its limit: once is enough.
    let mut seen = Vec::new();
    calls.retain(|call| {
        let first = !seen.contains(call);
        if first {
            seen.push(call.clone());
        }
        first
    });
    if !calls
        .iter()
        .any(|(name, _)| offered.contains(&name.as_str()))
    {
        return 0;
    }
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
/// JSON that follows the calls without being calls (a small model that goes on to write the
/// results it imagines, `{"response": ...}`) is left out, with everything after it.
fn calls_in(text: &str, ending: Ending) -> Option<Vec<(String, Value)>> {
    let mut calls = Vec::new();
    let mut imagined = false;
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (values, after) = match next_segment(rest) {
            Segment::Calls { values, after } => (values, after),
            Segment::Unfinished if ending == Ending::Cut || imagined => break,
            Segment::Unfinished | Segment::Other => return None,
        };
        for value in values.into_iter().flat_map(|value| match value {
            Value::Array(items) if !items.is_empty() => items,
            other => vec![other],
        }) {
            match call(value) {
                Some(found) if !imagined => calls.push(found),
                Some(_) => {}
                None if calls.is_empty() => return None,
                None => imagined = true,
            }
        }
        rest = after.trim_start();
    }
    (!calls.is_empty()).then_some(calls)
}

/// What the text starts with.
enum Segment<'a> {
    /// Whole JSON values (in tags, in a fence, or bare) and the text after them.
    Calls { values: Vec<Value>, after: &'a str },
    /// JSON or a wrapper the text ends inside of.
    Unfinished,
    /// Anything else.
    Other,
}

fn next_segment(text: &str) -> Segment<'_> {
    if let Some(inner) = text.strip_prefix("<tool_call>") {
        return match inner.find("</tool_call>") {
            Some(end) => wrapped(&inner[..end], &inner[end + "</tool_call>".len()..]),
            None => Segment::Unfinished,
        };
    }
    if let Some(inner) = text.strip_prefix("```") {
        let Some(newline) = inner.find('\n') else {
            return Segment::Unfinished;
        };
        let language = inner[..newline].trim();
        if !(language.is_empty() || language.eq_ignore_ascii_case("json")) {
            return Segment::Other;
        }
        let inner = &inner[newline + 1..];
        return match inner.find("```") {
            Some(end) => wrapped(&inner[..end], &inner[end + 3..]),
            None => Segment::Unfinished,
        };
    }
    if !text.starts_with(['{', '[']) {
        return Segment::Other;
    }
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Segment::Calls {
            values: vec![value],
            after: &text[values.byte_offset()..],
        },
        Some(Err(err)) if err.is_eof() => Segment::Unfinished,
        _ => Segment::Other,
    }
}

/// The values inside a closed wrapper: one or more, nothing else.
fn wrapped<'a>(body: &str, after: &'a str) -> Segment<'a> {
    let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(body)
        .into_iter::<Value>()
        .collect();
    match values {
        Ok(values) if !values.is_empty() => Segment::Calls { values, after },
        _ => Segment::Other,
    }
}

/// One call: an object with a `name` and `arguments` (or `parameters`), an object or a
/// string holding one; no arguments at all is an empty object. Any other key makes it
/// something else than a call.
fn call(value: Value) -> Option<(String, Value)> {
    let Value::Object(mut object) = value else {
        return None;
    };
    let name = object.remove("name")?.as_str()?.to_owned();
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
        read_calls_in_text(&mut content, &OFFERED, Ending::Whole);
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
    fn bare_calls_in_a_row_are_read_and_other_names_go_along() {
        // As Qwen2.5-Coder 0.5B writes them in the terminal interface: one after another,
        // one of them naming a tool that does not exist.
        let content = read(
            "{\"name\": \"grep\", \"arguments\": {\"pattern\": \"x\"}} \
             {\"name\": \"git\", \"arguments\": {\"branch\": \"master\"}}\n\
             {\"name\": \"glob\", \"arguments\": {\"pattern\": \"*\"}}",
        );
        let names: Vec<&str> = content.iter().map(|b| call_of(b).0).collect();
        assert_eq!(names, ["grep", "git", "glob"]);
        let mixed =
            read("{\"name\": \"grep\", \"arguments\": {}}\n```json\n{\"name\": \"glob\"}\n```");
        let names: Vec<&str> = mixed.iter().map(|b| call_of(b).0).collect();
        assert_eq!(names, ["grep", "glob"]);
        // Not one of them a tool the request offered: it is text.
        let text = "{\"name\": \"git\", \"arguments\": {}} {\"name\": \"ls\"}";
        assert_eq!(read(text), vec![ContentBlock::Text { text: text.into() }]);
    }

    #[test]
    fn results_a_model_imagines_after_its_call_are_left_out() {
        // As Qwen2.5-Coder 0.5B writes it: the call, then the result it expects.
        let content = read(
            "{\"name\": \"grep\", \"arguments\": {\"pattern\": \"tiny\"}} \
             {\"response\": \"tiny\\n\"} {\"message\": \"Found it.\"} \
             {\"name\": \"glob\", \"arguments\": {}}",
        );
        assert_eq!(content.len(), 1);
        assert_eq!(call_of(&content[0]).0, "grep");
        // Prose after the call is still not a reply of calls.
        let prose = "{\"name\": \"grep\", \"arguments\": {}} {\"response\": 1} and so on";
        assert_eq!(read(prose), vec![ContentBlock::Text { text: prose.into() }]);
        // Nor is JSON that starts with something other than a call.
        let data = "{\"response\": 1} {\"name\": \"grep\", \"arguments\": {}}";
        assert_eq!(read(data), vec![ContentBlock::Text { text: data.into() }]);
    }

    #[test]
    fn a_reply_cut_off_while_writing_calls_keeps_the_finished_ones() {
        let cut = |text: &str| {
            let mut content = vec![ContentBlock::Text { text: text.into() }];
            let read = read_calls_in_text(&mut content, &OFFERED, Ending::Cut);
            (read, content)
        };
        let (count, content) = cut(
            "{\"name\": \"grep\", \"arguments\": {\"pattern\": \"x\"}} {\"name\": \"glob\", \"argu",
        );
        assert_eq!(count, 1);
        assert_eq!(call_of(&content[0]).0, "grep");
        let same = r#"{"name": "grep", "arguments": {"pattern": "x"}} "#;
        let (count, content) = cut(&format!("{}{{\"name\": \"gr", same.repeat(25)));
        assert_eq!(count, 1, "the same call written over and over is one call");
        assert_eq!(content.len(), 1);
        let tagged = cut("<tool_call>{\"name\": \"glob\"}</tool_call>\n<tool_call>{\"na");
        assert_eq!(tagged.0, 1);
        let fenced = cut("```json\n{\"name\": \"glob\"}\n```\n```json\n{\"name\"");
        assert_eq!(fenced.0, 1);
        // Nothing finished, or prose: nothing read.
        assert_eq!(cut("{\"name\": \"grep\", \"argu").0, 0);
        assert_eq!(cut("Let me look at the {\"name\": \"grep\"}").0, 0);
        // A whole reply that ends inside a call is not calls.
        let unfinished = "{\"name\": \"grep\", \"arguments\": {}} {\"name\": \"gl";
        assert_eq!(
            read(unfinished),
            vec![ContentBlock::Text {
                text: unfinished.into()
            }]
        );
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
        assert_eq!(read_calls_in_text(&mut content, &OFFERED, Ending::Whole), 0);
        assert_eq!(content, [text.clone(), real]);
        let mut content = vec![text.clone()];
        assert_eq!(read_calls_in_text(&mut content, &[], Ending::Whole), 0);
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
                images: false,
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
        assert_eq!(read_calls_in_text(&mut content, &OFFERED, Ending::Whole), 1);
        assert_eq!(content[0], thinking);
        assert_eq!(call_of(&content[1]).0, "grep");
    }
}
