//! Pure functions from session state to a provider request: the system prompt, the tool
//! list the audience may see, the history made safe to send, and cache breakpoints.
//!
//! Nothing here does IO; the session gathers the inputs and this module arranges them, so
//! the same state always yields byte-identical requests (the provider's prompt cache depends
//! on it).

mod history;

pub use history::pair_tool_calls;

use crate::context::ProjectInstructions;
use crate::domain::{Audience, Message, Role};
use crate::llm::{ChatRequest, ToolSpec};
use crate::tools::ToolRegistry;
use std::path::Path;

const SOUL: &str = include_str!("../../assets/SOUL.md");
const AGENTS_CORE: &str = include_str!("../../assets/AGENTS.md");

/// The system prompt: persona, operating rules, where the project lives, and the project's
/// own instructions when it has them.
pub fn system_prompt(project_dir: &Path, instructions: Option<&ProjectInstructions>) -> String {
    let mut prompt = format!(
        "{}\n{}\n# Project\n\nThe project directory is {}. Relative paths resolve against the \
         current working directory, which starts there.\n",
        SOUL.trim_end(),
        AGENTS_CORE
            .trim_end()
            .replace("# How you work", "\n# How you work"),
        project_dir.display()
    );
    if let Some(found) = instructions {
        prompt.push_str(&format!(
            "\n# Project instructions (from {})\n\n{}\n",
            found.file.display(),
            found.text.trim_end()
        ));
        if let Some(size) = found.cut_from {
            prompt.push_str(&format!(
                "\n[the file is {size} bytes; only its first {} are shown here. Read the rest with \
                 file_read when it matters]\n",
                found.text.len()
            ));
        }
    }
    prompt
}

/// The schemas of the tools `audience` may call, in the registry's stable order.
pub fn tool_specs(registry: &ToolRegistry, audience: Audience) -> Vec<ToolSpec> {
    registry
        .visible(audience)
        .into_iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            input_schema: tool.input_schema(),
        })
        .collect()
}

/// Assembles one model call. Cache breakpoints go on the last two user messages, so that the
/// next request finds this one's prefix in the cache.
pub fn build_request(
    system: String,
    messages: &[Message],
    tools: Vec<ToolSpec>,
    model: &str,
    max_output_tokens: u32,
    cache_key: &str,
) -> ChatRequest {
    let messages = pair_tool_calls(messages);
    let cache_breakpoints = messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    ChatRequest {
        model: model.to_owned(),
        system,
        messages,
        tools,
        max_output_tokens,
        cache_breakpoints,
        cache_key: Some(cache_key.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakpoints_sit_on_the_last_two_user_messages() {
        let messages = vec![
            Message::user_text("a"),
            Message::assistant_text("b"),
            Message::user_text("c"),
            Message::assistant_text("d"),
            Message::user_text("e"),
        ];
        let request = build_request("s".into(), &messages, vec![], "m", 10, "k");
        assert_eq!(request.cache_breakpoints, vec![2, 4]);
    }

    #[test]
    fn cut_instructions_say_how_much_is_shown() {
        let found = ProjectInstructions {
            file: "AGENTS.md".into(),
            text: "rules".into(),
            cut_from: Some(40_000),
        };
        let prompt = system_prompt(Path::new("/p"), Some(&found));
        assert!(
            prompt.contains("# Project instructions (from AGENTS.md)\n\nrules\n"),
            "{prompt}"
        );
        assert!(
            prompt.contains("the file is 40000 bytes; only its first 5 are shown"),
            "{prompt}"
        );
    }

    #[test]
    fn the_same_state_gives_the_same_request() {
        let messages = vec![Message::user_text("a")];
        let one = build_request(
            system_prompt(Path::new("/p"), None),
            &messages,
            vec![],
            "m",
            10,
            "k",
        );
        let two = build_request(
            system_prompt(Path::new("/p"), None),
            &messages,
            vec![],
            "m",
            10,
            "k",
        );
        assert_eq!(one, two);
    }
}
