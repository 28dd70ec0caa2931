//! A request shown to a person, layer by layer (`tern run --print-prompt`), so they can see
//! exactly what the model receives and which parts are cached.

use crate::domain::ChatRequest;
use crate::domain::{ContentBlock, Message, Role};

const TIER_NAMES: [&str; 2] = ["tier A · system prompt", "tier B · static context"];

/// The request as labelled text: the tools by name, each system block, then every message
/// with its role, the turn's nudge (at `nudge_at` in `request.messages`) and the latest user
/// message marked, and where cache breakpoints fall.
pub fn describe_request(request: &ChatRequest, nudge_at: Option<usize>) -> String {
    let mut out = format!("model: {}\n", request.model);
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    out.push_str(&format!(
        "\n━━ tools: {} (full schemas go in the request's tool parameter) ━━\n{}\n",
        names.len(),
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    ));
    for (i, block) in request.system_blocks().enumerate() {
        let name = TIER_NAMES.get(i).copied().unwrap_or("system");
        out.push_str(&format!(
            "\n━━ {name} · cache breakpoint ━━\n{}\n",
            block.trim_end()
        ));
    }
    let history_len = nudge_at.unwrap_or(request.messages.len());
    if history_len > 0 {
        out.push_str(&format!(
            "\n━━ tier C · history: {history_len} message{} ━━\n",
            if history_len == 1 { "" } else { "s" }
        ));
    }
    let last = request.messages.len().checked_sub(1);
    for (i, message) in request.messages.iter().enumerate() {
        let mut label = match (Some(i) == nudge_at, message.role) {
            (true, _) => "tier D · turn nudge (user role)".to_owned(),
            (false, Role::User) if Some(i) == last && nudge_at.is_some_and(|n| n < i) => {
                "latest user message".to_owned()
            }
            (false, Role::User) => "user".to_owned(),
            (false, Role::Assistant) => "assistant".to_owned(),
        };
        if request.cache_breakpoints.contains(&i) {
            label.push_str(" · cache breakpoint");
        }
        let rule = if Some(i) == nudge_at || label.starts_with("latest") {
            "━━"
        } else {
            "──"
        };
        out.push_str(&format!(
            "\n{rule} {label} {rule}\n{}",
            message_body(message, request.images)
        ));
    }
    out
}

/// A message's blocks as text, one after another.
fn message_body(message: &Message, request_images: bool) -> String {
    let mut out = String::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => out.push_str(&format!("{}\n", text.trim_end())),
            ContentBlock::Thinking { thinking, .. } => {
                out.push_str(&format!("(thinking) {}\n", thinking.trim_end()));
            }
            ContentBlock::ToolUse(call) => {
                out.push_str(&format!("▸ {} [{}] {}\n", call.name, call.id, call.input));
            }
            ContentBlock::ToolResult(result) => {
                let mark = if result.is_error { "✗" } else { "✓" };
                out.push_str(&format!(
                    "◂ {mark} [{}] {}\n",
                    result.tool_use_id,
                    result.content.trim_end()
                ));
                for image in &result.images {
                    let sent = if request_images {
                        "sent as an image"
                    } else {
                        "not sent"
                    };
                    out.push_str(&format!(
                        "  (image {} {}: {sent})\n",
                        image.media_type,
                        image.path.display()
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::{RequestFrame, build_request};

    #[test]
    fn every_layer_is_labelled_and_breakpoints_marked() {
        let messages = vec![
            Message::user_text("first"),
            Message::assistant_text("reply"),
            Message::user_text("[system: now]"),
            Message::user_text("second"),
        ];
        let frame = RequestFrame {
            model: "m",
            max_output_tokens: 1,
            cache_key: "k",
        };
        let request = build_request(vec!["A".into(), "B".into()], &messages, vec![], &frame);
        let text = describe_request(&request, Some(2));
        let order = [
            "model: m\n",
            "━━ tools: 0 (full schemas go in the request's tool parameter) ━━\n(none)\n",
            "━━ tier A · system prompt · cache breakpoint ━━\nA\n",
            "━━ tier B · static context · cache breakpoint ━━\nB\n",
            "━━ tier C · history: 2 messages ━━\n",
            "── user ──\nfirst\n",
            "── assistant · cache breakpoint ──\nreply\n",
            "━━ tier D · turn nudge (user role) ━━\n[system: now]\n",
            "━━ latest user message · cache breakpoint ━━\nsecond\n",
        ];
        crate::prompt::assert_in_order(&text, &order);
    }
}
