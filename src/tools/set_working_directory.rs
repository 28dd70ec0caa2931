//! `set_working_directory`: moves the session's working directory, against which relative
//! paths and shell commands resolve.
//!
//! The tool changes nothing itself: it checks the directory and returns a
//! [`ToolEffect::SetWorkingDirectory`] with the canonical path, which the session records.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::path_text;
use super::paths::{self, Access, PathArg};
use super::preview::{Preview, PreviewFuture};
use super::{ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput};
use crate::domain::{ApprovalDetail, Audience};
use serde_json::{Value, json};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// Changes the working directory.
pub struct SetWorkingDirectory;

impl Tool for SetWorkingDirectory {
    fn name(&self) -> &'static str {
        "set_working_directory"
    }

    fn summary(&self) -> &'static str {
        "Change the directory later tools and commands start in."
    }

    fn description(&self) -> &'static str {
        "Change the working directory used to resolve relative paths in every tool and to run \
         shell commands (a `cd` inside shell_execute lasts only for that command). The \
         directory must exist. Moving outside the project directory needs approval."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The new working directory, absolute or relative to the current one."}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    /// Not read-only: nothing on disk changes, but later calls depend on it, so it must not run
    /// concurrently with them.
    fn is_read_only(&self) -> bool {
        false
    }

    fn approval_need(&self, input: &Value, ctx: &ToolContext) -> ApprovalNeed {
        paths::need_for_input(ctx, self.name(), input, PathArg::Required, Access::Read)
    }

    /// The argument, and that the directory is there.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        Box::pin(async move {
            let path = parsed.map_err(|err| err.0)?;
            let shown = path_text::encode(&path).into_owned();
            check::blocking(move || check::present(&path, &shown, Wanted::Directory)).await
        })
    }

    /// Asked about only when the directory is outside the project: later calls would read
    /// there.
    fn preview<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> PreviewFuture<'a> {
        let preview = parse(self.name(), input, ctx).ok().map(|path| Preview {
            summary: format!("Work in {}", path_text::encode(&path)),
            detail: ApprovalDetail::Outside {
                path,
                access: "read".to_owned(),
            },
        });
        Box::pin(async move { preview })
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let path = match parse(self.name(), &input, ctx) {
                Ok(path) => path,
                Err(err) => return err.into(),
            };
            let shown = path_text::encode(&path);
            match tokio::fs::canonicalize(&path).await {
                // The session records the working directory as text, which must stay exact.
                Ok(canonical) if canonical.to_str().is_none() => ToolOutput::error(format!(
                    "{shown} leads to {}, whose name is not valid UTF-8 (shown with \\xhh \
                     escapes). The working directory is recorded as text, so it must be valid \
                     UTF-8: choose another directory, or ask the user to rename this one.",
                    path_text::encode(&canonical)
                )),
                Ok(canonical) if canonical.is_dir() => ToolOutput::ok(format!(
                    "The working directory is now {}.",
                    path_text::encode(&canonical)
                ))
                .with_effect(ToolEffect::SetWorkingDirectory(canonical)),
                Ok(_) => ToolOutput::error(format!("{shown} is a file, not a directory.")),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => ToolOutput::error(
                    format!("{shown} does not exist. Use glob to find the directory you mean."),
                ),
                Err(err) => ToolOutput::error(format!("Cannot use {shown}: {err}")),
            }
        })
    }
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<PathBuf, ArgError> {
    Args::new(tool, input)?.path("path", &ctx.cwd, PathArg::Required)
}
