//! Images from tool results, read from their files for a request to a model that takes
//! them. The history holds only where each image is; its bytes are read for each request.

use base64::Engine;

use crate::domain::{Attachment, ToolResult};

/// An image as a request carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inline {
    pub media_type: String,
    /// The file's bytes in standard base64.
    pub data: String,
}

impl Inline {
    /// The `data:` URL Chat Completions takes an image as.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

/// The images of `result` to send with it when the request takes images: each one a provider
/// accepts whose file is still there and small enough. The others are left out; the result's
/// text names their files, so the model still knows of them.
pub(crate) fn images_of(result: &ToolResult, takes_images: bool) -> Vec<Inline> {
    if !takes_images {
        return Vec::new();
    }
    result.images.iter().filter_map(read).collect()
}

fn read(image: &Attachment) -> Option<Inline> {
    if !Attachment::sendable(&image.media_type) || image.bytes > Attachment::MAX_BYTES {
        return None;
    }
    let bytes = std::fs::read(&image.path).ok()?;
    if bytes.len() as u64 > Attachment::MAX_BYTES {
        return None;
    }
    Some(Inline {
        media_type: image.media_type.clone(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// The text that comes with images sent apart from the results they belong to (the chat
/// formats cannot put an image in a tool message).
pub(crate) const IMAGES_NOTE: &str = "The images the tool calls above returned, in order.";

/// A history whose one tool call returned an image, saved in `dir`: for the encoders' tests.
#[cfg(test)]
pub(crate) fn history_with_image(dir: &std::path::Path) -> Vec<crate::domain::Message> {
    use crate::domain::{ContentBlock, Message, Role, ToolCall};
    let path = dir.join("shot.png");
    std::fs::write(&path, b"\x89PNG\r\n\x1a\n").expect("written");
    let result = ToolResult {
        images: vec![Attachment {
            media_type: "image/png".to_owned(),
            path,
            bytes: 8,
        }],
        ..ToolResult::ok("call_1", "a screenshot")
    };
    vec![
        Message::user_text("look"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolCall {
                id: "call_1".into(),
                name: "shoot".into(),
                input: serde_json::json!({}),
            })],
        },
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult(result),
                ContentBlock::Text {
                    text: "what is it?".into(),
                },
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result_with(path: &std::path::Path, media_type: &str, bytes: u64) -> ToolResult {
        ToolResult {
            images: vec![Attachment {
                media_type: media_type.to_owned(),
                path: path.to_owned(),
                bytes,
            }],
            ..ToolResult::ok("t1", "[image saved]")
        }
    }

    #[test]
    fn an_image_is_read_only_for_a_model_that_takes_images() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("a.png");
        std::fs::write(&path, b"\x89PNG\r\n\x1a\n").expect("written");
        let result = result_with(&path, "image/png", 8);
        let sent = images_of(&result, true);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].data, "iVBORw0KGgo=");
        assert_eq!(sent[0].data_url(), "data:image/png;base64,iVBORw0KGgo=");
        assert!(images_of(&result, false).is_empty());
    }

    #[test]
    fn a_missing_oversized_or_unsendable_image_is_left_out() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let gone = result_with(&dir.path().join("gone.png"), "image/png", 8);
        assert!(images_of(&gone, true).is_empty());
        let path = dir.path().join("a.svg");
        std::fs::write(&path, "<svg/>").expect("written");
        assert!(images_of(&result_with(&path, "image/svg+xml", 6), true).is_empty());
        let big = result_with(&path, "image/png", Attachment::MAX_BYTES + 1);
        assert!(images_of(&big, true).is_empty());
    }
}
