//! An MCP server's tool as one of the session's tools: named `mcp__<server>__<tool>`, its
//! schema cut to what providers take, asked about like a command unless its server's
//! config says otherwise, kept from the Public audience unless the config lets it, and its
//! result turned into text capped like the output of tern's own tools.

use super::client::{CallError, ServerTool};
use super::server::Running;
use crate::config::{McpApprove, McpServer};
use crate::domain::{ApprovalNeed, Attachment, Audience};
use crate::tools::{Tool, ToolContext, ToolFuture, ToolOutput, cap_head_tail};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use tokio_util::sync::CancellationToken;

/// The most of a result kept in the history: as much as a command's output.
const RESULT_BYTES: usize = 30 * 1024;

/// The longest tool name providers take.
const NAME_CHARS: usize = 64;

pub struct McpTool {
    name: &'static str,
    /// The name the server knows it by.
    tool: String,
    description: String,
    schema: Value,
    need: ApprovalNeed,
    min_audience: Audience,
    server: Arc<Running>,
}

impl McpTool {
    pub(super) fn new(server: &McpServer, tool: &ServerTool, running: Arc<Running>) -> Self {
        let need = match server.approve_for(&tool.name) {
            McpApprove::Never => ApprovalNeed::None,
            McpApprove::Ask => ApprovalNeed::Exec,
            McpApprove::Always => ApprovalNeed::Person,
        };
        Self {
            name: intern(tool_name(&server.name, &tool.name)),
            tool: tool.name.clone(),
            description: describe(&server.name, &tool.description),
            // Cut to what providers take when the server listed it.
            schema: tool.input_schema.clone(),
            need,
            min_audience: if server.public {
                Audience::Public
            } else {
                Audience::Team
            },
            server: running,
        }
    }
}

/// `mcp__<server>__<tool>`, in the characters and length providers take: any other
/// character becomes `_`, and a name too long keeps its start.
pub fn tool_name(server: &str, tool: &str) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(NAME_CHARS)
        .collect();
    name
}

/// Names live as long as the process: each distinct name is kept once.
fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

fn describe(server: &str, description: &str) -> String {
    let description = description.trim();
    let text = if description.is_empty() {
        format!("A tool of the MCP server `{server}`.")
    } else {
        format!("{description} (MCP server `{server}`.)")
    };
    cap_head_tail(&text, 2048)
}

impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn min_audience(&self) -> Audience {
        self.min_audience
    }

    /// The server's own hint is not taken on trust: its calls run as ones that change things.
    fn is_read_only(&self) -> bool {
        false
    }

    fn approval_need(&self, _input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        self.need.clone()
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments = match input {
                Value::Object(map) => map,
                Value::Null => serde_json::Map::new(),
                other => {
                    return ToolOutput::error(format!(
                        "The arguments must be a JSON object, not {other}."
                    ));
                }
            };
            match self.server.call(&self.tool, arguments, &cancel).await {
                Ok(result) => output_of(&result, self.name, ctx),
                Err(CallError::Cancelled) => {
                    ToolOutput::error("Cancelled before the tool finished.")
                }
                Err(err) => ToolOutput::error(format!(
                    "The MCP server `{}` did not run `{}`: {err}.",
                    self.server.name(),
                    self.tool
                )),
            }
        })
    }
}

/// The text of a `tools/call` result: its text parts, then its structured content when no
/// text says it, other parts named; capped, the whole kept in a file when cut. Images are
/// saved as files the text names, and go with the result to models that take them.
fn output_of(result: &Value, tool: &str, ctx: &ToolContext) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for (at, block) in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        parts.push(describe_block(
            block,
            &Saving { tool, ctx, at },
            &mut images,
        ));
    }
    if parts.iter().all(|part| part.trim().is_empty())
        && let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
    {
        parts = vec![serde_json::to_string_pretty(structured).unwrap_or_default()];
    }
    let text = parts.join("\n");
    let text = if text.len() > RESULT_BYTES {
        let kept = keep_whole(&text, tool, ctx);
        let capped = cap_head_tail(&text, RESULT_BYTES);
        match kept {
            Some(path) => format!("{capped}\n[the whole result: {}]", path.display()),
            None => capped,
        }
    } else {
        text
    };
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    let output = match (failed, text.trim().is_empty()) {
        (true, _) => ToolOutput::error(text),
        (false, true) => ToolOutput::nothing_found("The tool returned nothing."),
        (false, false) => ToolOutput::ok(text),
    };
    ToolOutput { images, ..output }
}

/// Where a result's image or audio part is saved: the session's temporary folder, named
/// after the tool, the moment and the part's place in the result.
struct Saving<'a> {
    tool: &'a str,
    ctx: &'a ToolContext,
    at: usize,
}

impl Saving<'_> {
    /// Saves a part's base64 `data` as a file; its path and size, or why it was not saved.
    fn save(&self, data: &str, mime: &str) -> Result<(std::path::PathBuf, usize), String> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| "its data is not base64".to_owned())?;
        let extension = match mime {
            "image/png" => "png",
            "image/jpeg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            "image/svg+xml" => "svg",
            "audio/wav" | "audio/x-wav" => "wav",
            "audio/mpeg" => "mp3",
            "audio/ogg" => "ogg",
            _ => "bin",
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let dir = &self.ctx.temp_dir;
        let path = dir.join(format!("{}-{stamp}-{}.{extension}", self.tool, self.at));
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, &bytes))
            .map_err(|err| format!("it could not be saved in {}: {err}", dir.display()))?;
        Ok((path, bytes.len()))
    }
}

fn describe_block(block: &Value, saving: &Saving<'_>, images: &mut Vec<Attachment>) -> String {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let text = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match kind {
        "text" => text("text"),
        // Kept as a file the person can open and the tools can name; an image of a kind the
        // providers take also goes to the model as an image, where it takes them.
        "image" | "audio" => {
            let mime = text("mimeType");
            match saving.save(&text("data"), &mime) {
                Ok((path, bytes)) => {
                    let named = format!(
                        "[{kind} {mime}, {bytes} bytes, saved as {}]",
                        path.display()
                    );
                    if kind == "image" && Attachment::sendable(&mime) {
                        images.push(Attachment {
                            media_type: mime,
                            path,
                            bytes: bytes as u64,
                        });
                    }
                    named
                }
                Err(why) => format!("[{kind} {mime}: {why}]"),
            }
        }
        "resource" => match block.get("resource") {
            Some(resource) => match resource.get("text").and_then(Value::as_str) {
                Some(body) => body.to_owned(),
                None => format!(
                    "[resource {}]",
                    resource.get("uri").and_then(Value::as_str).unwrap_or("")
                ),
            },
            None => String::new(),
        },
        "resource_link" => format!("[resource link: {} {}]", text("name"), text("uri")),
        other => format!("[content of type `{other}`]"),
    }
}

/// Writes a result too long for the history beside the session's other temporary files.
fn keep_whole(text: &str, tool: &str, ctx: &ToolContext) -> Option<std::path::PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let path = ctx.temp_dir.join(format!("{tool}-{stamp}.txt"));
    std::fs::create_dir_all(&ctx.temp_dir).ok()?;
    std::fs::write(&path, text).ok()?;
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(extra: &str) -> McpServer {
        let text = format!("[mcp.servers.s]\ncommand = \"x\"\n{extra}");
        let env = crate::config::Environment::default();
        crate::config::load_from_str(&text, std::path::Path::new("c.toml"), &env)
            .expect("a valid config")
            .mcp
            .servers
            .remove(0)
    }

    fn tool_of(server: &McpServer) -> McpTool {
        let listed = ServerTool {
            name: "t".to_owned(),
            description: "Does t.".to_owned(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
        };
        let running = Arc::new(Running::new(
            server.clone(),
            Vec::new(),
            std::time::Duration::from_secs(600),
        ));
        McpTool::new(server, &listed, running)
    }

    #[test]
    fn strangers_see_a_servers_tools_only_when_its_config_says_so() {
        assert_eq!(tool_of(&server("")).min_audience(), Audience::Team);
        assert_eq!(
            tool_of(&server("public = true\n")).min_audience(),
            Audience::Public
        );
    }

    #[test]
    fn calls_are_asked_about_like_commands_unless_the_server_says_never() {
        let ctx_free = |tool: &McpTool| tool.need.clone();
        assert_eq!(ctx_free(&tool_of(&server(""))), ApprovalNeed::Exec);
        assert_eq!(
            ctx_free(&tool_of(&server("approve = \"never\"\n"))),
            ApprovalNeed::None
        );
        let per_tool = server("approve = \"never\"\napprove_tools = { t = \"ask\" }\n");
        assert_eq!(ctx_free(&tool_of(&per_tool)), ApprovalNeed::Exec);
        assert!(!tool_of(&server("")).is_read_only());
    }

    #[test]
    fn an_image_in_a_result_is_saved_as_a_file_the_result_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ctx = super::super::tests::context(dir.path());
        let result = serde_json::json!({"content": [
            {"type": "text", "text": "Here it is:"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
        ]});
        let out = output_of(&result, "mcp__s__t", &ctx);
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines[0], "Here it is:");
        let path = lines[1]
            .strip_prefix("[image image/png, 8 bytes, saved as ")
            .and_then(|rest| rest.strip_suffix(']'))
            .expect("the saved file named");
        assert!(path.ends_with(".png"), "{path}");
        assert_eq!(std::fs::read(path).expect("saved"), b"\x89PNG\r\n\x1a\n");
        assert_eq!(lines[2], "[image image/png: its data is not base64]");
    }

    #[test]
    fn names_keep_to_what_providers_take() {
        assert_eq!(tool_name("git", "git_status"), "mcp__git__git_status");
        assert_eq!(tool_name("fs", "read.file"), "mcp__fs__read_file");
        assert_eq!(tool_name("x", &"a".repeat(100)).len(), NAME_CHARS);
    }

    #[test]
    fn interned_names_are_kept_once() {
        let a = intern("mcp__a__b".to_owned());
        let b = intern("mcp__a__b".to_owned());
        assert!(std::ptr::eq(a, b));
    }
}
