//! Conversation messages in a provider-neutral shape. `llm/` translates them to each wire
//! format; `store/` journals them as they are.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One message of the history: a role and its content blocks in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The message's text blocks joined, ignoring thinking and tool blocks.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// The tool calls this message makes, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse(call) => Some(call),
            _ => None,
        })
    }

    /// The tool results this message carries, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some(result),
            _ => None,
        })
    }
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// Extended thinking. The signature must be sent back unchanged with the block.
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    ToolUse(ToolCall),
    ToolResult(ToolResult),
}

/// A tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; results refer back to it.
    pub id: String,
    pub name: String,
    /// The arguments as a JSON object. When the model sent text that is not valid JSON this
    /// is an empty object and the call's result is an error that says so.
    pub input: serde_json::Value,
}

/// The outcome of one tool call, paired with it by `tool_use_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_use_id: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
    /// Images the tool returned, kept as files; sent as images to models that take them
    /// (the content names each file for those that do not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Attachment>,
}

/// An image kept as a file beside the session, named by the result that returned it. The
/// journal holds where it is, never its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`: the kinds every provider that
    /// takes images accepts.
    pub media_type: String,
    pub path: std::path::PathBuf,
    pub bytes: u64,
}

impl Attachment {
    /// Tokens a model spends on an image, as an estimate: Anthropic's figure for an image at
    /// the largest size it keeps (about 1.15 megapixels, `width * height / 750`); larger
    /// images are scaled down to it, smaller ones cost less.
    pub const TOKENS: u64 = 1_600;

    /// The largest image sent: 3.75 MB, whose base64 is the 5 MB a provider accepts.
    pub const MAX_BYTES: u64 = 3_750_000;

    /// Whether `media_type` is one every provider that takes images accepts.
    pub fn sendable(media_type: &str) -> bool {
        matches!(
            media_type,
            "image/png" | "image/jpeg" | "image/gif" | "image/webp"
        )
    }
}

impl ToolResult {
    pub fn ok(tool_use_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    pub fn error(tool_use_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }

    /// What the result weighs in a request, in bytes of text: its content, and each image as
    /// the text its estimated tokens would be ([`Attachment::TOKENS`]).
    pub fn weight(&self) -> usize {
        let image = (Attachment::TOKENS * super::BYTES_PER_TOKEN) as usize;
        self.content.len() + self.images.len() * image
    }

    /// Stands `placeholder` in for the content and drops the images, when that makes the
    /// result lighter; the weight it saved, if it did.
    pub fn replace_with(&mut self, placeholder: String) -> Option<usize> {
        let before = self.weight();
        if placeholder.len() >= before {
            return None;
        }
        self.content = placeholder;
        self.images.clear();
        Some(before - self.content.len())
    }
}

/// The text blocks of `content` joined, ignoring thinking and tool blocks.
pub fn text_of(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        if let ContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}
