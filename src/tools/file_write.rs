//! `file_write`: creates a file or replaces its whole content, creating parent directories.
//!
//! The file is written in place rather than through a temporary file and a rename, so an
//! existing file keeps its permissions, owner and hard links, and a symlink keeps pointing
//! where it did (the project check already followed it).

use super::args::{ArgError, Args};
use super::output::group_digits;
use super::paths::{self, Access, PathArg};
use super::{ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput};
use crate::domain::Audience;
use serde_json::{Value, json};
use std::io;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// Writes a whole file.
pub struct FileWrite;

impl Tool for FileWrite {
    fn name(&self) -> &'static str {
        "file_write"
    }

    fn description(&self) -> &'static str {
        "Create a file, or replace the whole content of an existing one, with `content`. \
         Missing parent directories are created. To change part of an existing file prefer \
         file_edit, which shows a diff and cannot lose the parts you did not mean to touch. \
         Relative paths resolve against the working directory."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to write, absolute or relative to the working directory."},
                "content": {"type": "string", "description": "The complete new content of the file."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn approval_need(&self, input: &Value, ctx: &ToolContext) -> ApprovalNeed {
        paths::need_for_input(ctx, self.name(), input, PathArg::Required, Access::Write)
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let (path, content) = match parse(self.name(), &input, ctx) {
                Ok(parsed) => parsed,
                Err(err) => return err.into(),
            };
            let shown = paths::display(&ctx.cwd, &path);
            // A write is not abandoned half-way on cancel: it is short, and a torn file is
            // worse than a finished one.
            let target = path.clone();
            let written =
                tokio::task::spawn_blocking(move || write(&target, content.as_bytes())).await;
            match written {
                Ok(Ok(outcome)) => {
                    ToolOutput::ok(outcome.describe(&shown)).with_effect(ToolEffect::Wrote(path))
                }
                Ok(Err(err)) => ToolOutput::error(format!("Cannot write {shown}: {err}")),
                Err(err) => ToolOutput::error(format!("Cannot write {shown}: {err}")),
            }
        })
    }
}

fn parse(
    tool: &'static str,
    input: &Value,
    ctx: &ToolContext,
) -> Result<(PathBuf, String), ArgError> {
    let args = Args::new(tool, input)?;
    let path = args.path("path", &ctx.cwd, PathArg::Required)?;
    let content = args.string("content")?.to_string();
    Ok((path, content))
}

/// What a write did, for the result text.
struct Written {
    created: bool,
    bytes: usize,
    lines: usize,
}

impl Written {
    fn describe(&self, shown: &str) -> String {
        let verb = if self.created { "Created" } else { "Replaced" };
        let bytes = if self.bytes == 1 { "byte" } else { "bytes" };
        let lines = if self.lines == 1 { "line" } else { "lines" };
        format!(
            "{verb} {shown} ({} {bytes}, {} {lines}).",
            group_digits(self.bytes as u64),
            group_digits(self.lines as u64)
        )
    }
}

fn write(path: &std::path::Path, content: &[u8]) -> io::Result<Written> {
    if path.is_dir() {
        return Err(io::Error::other(
            "it is a directory; give the path of a file inside it",
        ));
    }
    let created = !path.exists();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, content)?;
    Ok(Written {
        created,
        bytes: content.len(),
        lines: line_count(content),
    })
}

/// Lines as an editor counts them: a final line without `\n` still counts.
fn line_count(content: &[u8]) -> usize {
    let newlines = content.iter().filter(|&&b| b == b'\n').count();
    match content.last() {
        None => 0,
        Some(b'\n') => newlines,
        Some(_) => newlines + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_count_counts_an_unterminated_last_line() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
    }
}
