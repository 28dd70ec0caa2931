//! One model call put together: system blocks, the history made safe to send, the tools, and
//! where the prompt cache should break.

use super::history::pair_tool_calls;
use crate::domain::Message;
use crate::domain::{ChatRequest, ToolSpec};

/// The parts of a request that do not come from the history.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFrame<'a> {
    pub model: &'a str,
    pub max_output_tokens: u32,
    /// Shared by every request of a session (OpenAI's `prompt_cache_key`): the session id.
    pub cache_key: &'a str,
}

/// Assembles one model call. `system` holds tier A and tier B, each of which ends a cached
/// prefix. Two history breakpoints follow: on the last stable message (the end of the history
/// before the latest run of same-role messages, which the previous request already cached)
/// and on the last message, so the next request finds this one in the cache.
pub fn build_request(
    system: Vec<String>,
    messages: &[Message],
    tools: Vec<ToolSpec>,
    frame: &RequestFrame<'_>,
) -> ChatRequest {
    let messages = pair_tool_calls(messages);
    let cache_breakpoints = history_breakpoints(&messages);
    ChatRequest {
        model: frame.model.to_owned(),
        system,
        messages,
        tools,
        max_output_tokens: frame.max_output_tokens,
        // The model client fills in the route's window.
        context_window: 0,
        cache_breakpoints,
        cache_key: Some(frame.cache_key.to_owned()),
        images: false,
    }
}

/// The last message of the run before the final one, and the final message.
fn history_breakpoints(messages: &[Message]) -> Vec<usize> {
    let Some(last) = messages.len().checked_sub(1) else {
        return Vec::new();
    };
    let final_role = messages[last].role;
    let stable = messages.iter().rposition(|m| m.role != final_role);
    stable.into_iter().chain([last]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: RequestFrame<'static> = RequestFrame {
        model: "m",
        max_output_tokens: 10,
        cache_key: "k",
    };

    #[test]
    fn breakpoints_sit_on_the_last_stable_message_and_the_last() {
        let messages = vec![
            Message::user_text("a"),
            Message::assistant_text("b"),
            Message::user_text("[system: now]"),
            Message::user_text("c"),
        ];
        let request = build_request(vec!["s".into()], &messages, vec![], &FRAME);
        assert_eq!(request.cache_breakpoints, vec![1, 3]);
        assert_eq!(request.cache_key.as_deref(), Some("k"));
        let first = build_request(vec![], &messages[..1], vec![], &FRAME);
        assert_eq!(first.cache_breakpoints, vec![0]);
        assert!(
            build_request(vec![], &[], vec![], &FRAME)
                .cache_breakpoints
                .is_empty()
        );
    }

    #[test]
    fn the_same_state_gives_the_same_request() {
        let messages = vec![Message::user_text("a")];
        let one = build_request(vec!["s".into()], &messages, vec![], &FRAME);
        let two = build_request(vec!["s".into()], &messages, vec![], &FRAME);
        assert_eq!(one, two);
    }
}
