//! MCP prompts as slash commands: `/mcp__<server>__<prompt> ARGS` in an input is replaced,
//! before it is journaled, by the text of the messages the server's `prompts/get` returns.
//! The words after the command fill the prompt's arguments in the order it lists them, the
//! last one taking the rest of the line, so `/mcp__gh__review 42 look at the tests` gives
//! `number = 42` and `focus = look at the tests`.

use serde_json::{Map, Value};

/// The server and prompt a line names, and the rest of the line; `None` for a line that is
/// not a prompt command.
pub fn named(line: &str) -> Option<(&str, &str, &str)> {
    let line = line.trim_start();
    let command = line.strip_prefix("/mcp__")?;
    let (command, rest) = match command.split_once(char::is_whitespace) {
        Some((command, rest)) => (command, rest.trim()),
        None => (command, ""),
    };
    let (server, prompt) = command.split_once("__")?;
    (!server.is_empty() && !prompt.is_empty()).then_some((server, prompt, rest))
}

/// The arguments `rest` gives a prompt that takes `declared` (name, required), in order.
pub fn arguments(
    command: &str,
    declared: &[(String, bool)],
    rest: &str,
) -> Result<Map<String, Value>, String> {
    let mut words = rest;
    let mut given = Map::new();
    for (at, (name, _)) in declared.iter().enumerate() {
        let words_left = words.trim_start();
        if words_left.is_empty() {
            break;
        }
        let word = if at + 1 == declared.len() {
            words_left.trim_end()
        } else {
            words_left
                .split_once(char::is_whitespace)
                .map_or(words_left, |(word, _)| word)
        };
        words = &words_left[word.len()..];
        given.insert(name.clone(), Value::String(word.to_owned()));
    }
    if declared.is_empty() && !rest.is_empty() {
        return Err(format!("{command} takes no arguments; send it alone"));
    }
    let missing: Vec<&str> = declared
        .iter()
        .filter(|(name, required)| *required && !given.contains_key(name))
        .map(|(name, _)| name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{command} needs {}: write {command} {}",
            missing.join(", "),
            usage(declared)
        ));
    }
    Ok(given)
}

/// How the arguments are written: `NAME` when required, `[NAME]` when not.
pub fn usage(declared: &[(String, bool)]) -> String {
    declared
        .iter()
        .map(|(name, required)| match required {
            true => name.to_uppercase(),
            false => format!("[{}]", name.to_uppercase()),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The input a `prompts/get` result makes: its messages' text in order, the assistant's
/// marked as such; an embedded resource gives its text, anything else a note of what it was.
pub fn text_of(result: &Value) -> String {
    let messages = result["messages"].as_array().map_or(&[][..], Vec::as_slice);
    let mut parts = Vec::with_capacity(messages.len());
    for message in messages {
        let content = &message["content"];
        let text = match content["type"].as_str() {
            Some("text") => content["text"].as_str().unwrap_or_default().to_owned(),
            Some("resource") => match content["resource"]["text"].as_str() {
                Some(text) => text.to_owned(),
                None => format!(
                    "[resource {}]",
                    content["resource"]["uri"]
                        .as_str()
                        .unwrap_or("without an address")
                ),
            },
            Some("resource_link") => {
                format!("[resource {}]", content["uri"].as_str().unwrap_or_default())
            }
            Some(kind) => format!("[{kind}]"),
            None => continue,
        };
        match message["role"].as_str() {
            Some("assistant") => parts.push(format!("(Assistant:) {text}")),
            _ => parts.push(text),
        }
    }
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared(args: &[(&str, bool)]) -> Vec<(String, bool)> {
        args.iter().map(|(n, r)| ((*n).to_owned(), *r)).collect()
    }

    #[test]
    fn a_prompt_command_names_its_server_and_prompt() {
        assert_eq!(
            named("/mcp__gh__review 42 the tests"),
            Some(("gh", "review", "42 the tests"))
        );
        assert_eq!(named("/mcp__gh__review"), Some(("gh", "review", "")));
        assert_eq!(named("/mcp__gh"), None);
        assert_eq!(named("/mcp____x"), None);
        assert_eq!(named("please run /mcp__gh__review"), None);
        assert_eq!(named("/map"), None);
    }

    #[test]
    fn words_fill_the_arguments_in_order_and_the_last_takes_the_rest() {
        let args = declared(&[("number", true), ("focus", false)]);
        let given = arguments("/mcp__gh__review", &args, "42  look at the tests ").unwrap();
        assert_eq!(given["number"], "42");
        assert_eq!(given["focus"], "look at the tests");
        let given = arguments("/mcp__gh__review", &args, "42").unwrap();
        assert!(!given.contains_key("focus"));
        let missing = arguments("/mcp__gh__review", &args, "").unwrap_err();
        assert_eq!(
            missing,
            "/mcp__gh__review needs number: write /mcp__gh__review NUMBER [FOCUS]"
        );
        let none = arguments("/mcp__gh__list", &[], "extra").unwrap_err();
        assert!(none.contains("takes no arguments"), "{none}");
    }

    #[test]
    fn a_results_messages_become_one_input() {
        let result = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "Say hello."}},
            {"role": "assistant", "content": {"type": "text", "text": "Gladly."}},
            {"role": "user", "content": {"type": "resource",
                "resource": {"uri": "memo://one", "text": "The memo."}}},
            {"role": "user", "content": {"type": "image", "data": "", "mimeType": "image/png"}},
        ]});
        assert_eq!(
            text_of(&result),
            "Say hello.\n\n(Assistant:) Gladly.\n\nThe memo.\n\n[image]"
        );
    }
}
