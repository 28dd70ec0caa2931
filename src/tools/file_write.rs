//! `file_write`: creates a file or replaces its whole content, creating parent directories.
//!
//! The content goes through a temporary file renamed over the target (see `regular_file`), so
//! a full disk or a crash never leaves a truncated file; an existing file keeps its
//! permissions, and a symlink keeps pointing where it did, at the updated file.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::group_digits;
use super::paths::{self, Access, PathArg};
use super::preview::{self, Preview, PreviewFuture, diff_preview};
use super::regular_file::{self, FileError};
use super::{
    ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput, run_blocking_change,
};
use crate::domain::{ApprovalDetail, Audience};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Writes a whole file.
pub struct FileWrite;

impl Tool for FileWrite {
    fn name(&self) -> &'static str {
        "file_write"
    }

    fn summary(&self) -> &'static str {
        "Create a file, or replace a whole file's content."
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

    /// The arguments, and that the path is not a directory.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        let cwd = ctx.cwd.clone();
        Box::pin(async move {
            let (path, _) = parsed.map_err(|err| err.0)?;
            let shown = paths::display(&cwd, &path);
            check::blocking(move || check::present(&path, &shown, Wanted::NotDirectory)).await
        })
    }

    fn preview<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> PreviewFuture<'a> {
        let parsed = parse(self.name(), input, ctx).ok();
        let cwd = ctx.cwd.clone();
        Box::pin(async move {
            let (path, content) = parsed?;
            preview::blocking(move || preview(&path, &paths::display(&cwd, &path), &content)).await
        })
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let (path, content) = match parse(self.name(), &input, ctx) {
                Ok(parsed) => parsed,
                Err(err) => return err.into(),
            };
            let shown = paths::display(&ctx.cwd, &path);
            if let Err(refused) = super::agents::claim(ctx, &path) {
                return refused;
            }
            run_blocking_change(&cancel, move |token| {
                match regular_file::replace(&path, content.as_bytes(), token) {
                    Ok(replaced) => {
                        let written = Written {
                            created: replaced.created,
                            bytes: content.len(),
                            lines: line_count(content.as_bytes()),
                        };
                        ToolOutput::ok(written.describe(&shown))
                            .with_effect(ToolEffect::Wrote(path))
                    }
                    Err(err) => ToolOutput::error(failure_message(&shown, &err)),
                }
            })
            .await
        })
    }
}

/// The diff writing `content` to `path` would make: from empty for a new file, and for a
/// file whose current content cannot be read (the summary says so).
fn preview(path: &Path, shown: &str, content: &str) -> Option<Preview> {
    let cancel = CancellationToken::new();
    let mut unreadable = false;
    let (before, summary) = match regular_file::open_for_reading(path)
        .and_then(|(mut file, meta)| regular_file::read_all(&mut file, meta.len(), &cancel))
    {
        Ok(bytes) => (Some(bytes), format!("Replace {shown}")),
        Err(FileError::NotFound) => (None, format!("Create {shown}")),
        Err(err) => {
            unreadable = true;
            (
                None,
                format!("Write {shown} (its content now cannot be shown: {err})"),
            )
        }
    };
    let diff = diff_preview(before.as_deref(), content.as_bytes(), shown);
    Some(Preview {
        // Counts against content that could not be read would say nothing was removed.
        summary: if unreadable {
            summary
        } else {
            diff.summarise(&summary)
        },
        detail: ApprovalDetail::Edit {
            path: path.to_path_buf(),
            diff: diff.text,
        },
    })
}

/// Why a write failed, and that the file is as it was.
fn failure_message(shown: &str, err: &FileError) -> String {
    match err {
        FileError::Directory => {
            format!("Cannot write {shown}: it is a directory; give the path of a file inside it.")
        }
        FileError::NotRegular(kind) => {
            format!("{shown} is {kind}, not a regular file; file_write writes regular files only.")
        }
        FileError::Cancelled => format!("Cancelled before {shown} was written; it is untouched."),
        err => format!(
            "Cannot write {shown}: {err}. {shown} is untouched: its original content, if it had \
             any, is intact."
        ),
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
