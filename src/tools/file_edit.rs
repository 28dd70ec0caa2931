//! `file_edit`: replaces an exact string in a file and answers with a unified diff.
//!
//! The replacement works on bytes, so everything outside the replaced span (line endings,
//! encoding, a missing final newline) stays exactly as it was. The one allowance: when the
//! file uses CRLF line endings and `old_string` has bare `\n`s (models see lines, not their
//! endings), both strings are converted to CRLF before matching, which keeps the file's
//! endings consistent.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::cap_head_tail;
use super::paths::{self, Access, PathArg};
use super::preview::{self, Preview, PreviewFuture, diff_preview, unified_diff};
use super::regular_file::{self, FileError};
use super::{
    ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput, run_blocking_change,
};
use crate::domain::{ApprovalDetail, Audience};
use serde_json::{Value, json};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// The diff in the result is capped at this many bytes.
pub const MAX_DIFF_BYTES: usize = 20 * 1024;

/// Replaces an exact string in a file.
pub struct FileEdit;

impl Tool for FileEdit {
    fn name(&self) -> &'static str {
        "file_edit"
    }

    fn summary(&self) -> &'static str {
        "Replace exact text in a file (one unique match, or every one); returns the diff."
    }

    fn description(&self) -> &'static str {
        "Replace `old_string` with `new_string` in a file, matching exactly (whitespace and \
         indentation included; do not include the line numbers file_read shows). \
         `old_string` must occur exactly once, so include enough surrounding lines to make it \
         unique, or set `replace_all` to change every occurrence. Read the file first. \
         Returns a unified diff of the change. To create a file use file_write."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit, absolute or relative to the working directory."},
                "old_string": {"type": "string", "description": "The exact text to replace."},
                "new_string": {"type": "string", "description": "The text to put in its place (may be empty to delete)."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one. Default false."}
            },
            "required": ["path", "old_string", "new_string"],
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

    /// The arguments, the file, and (where the tools read freely) that the text to replace is
    /// there once and the edit changes something.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let request = match parse(self.name(), input, ctx) {
            Ok(request) => request,
            Err(err) => return Box::pin(async move { Err(err.0) }),
        };
        let content_too = check::readable_freely(ctx, &request.path);
        Box::pin(check::blocking(move || {
            if !content_too {
                return check::present(&request.path, &request.shown, Wanted::File);
            }
            let before = read_before(&request, &CancellationToken::new())?;
            replaced(&request, &before).map(drop)
        }))
    }

    fn preview<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> PreviewFuture<'a> {
        let request = parse(self.name(), input, ctx).ok();
        Box::pin(async move { preview::blocking(move || Some(preview(&request?))).await })
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let request = match parse(self.name(), &input, ctx) {
                Ok(request) => request,
                Err(err) => return err.into(),
            };
            let path = request.path.clone();
            if let Err(refused) = super::agents::claim(ctx, &path) {
                return refused;
            }
            let output = run_blocking_change(&cancel, move |token| edit(&request, token)).await;
            if output.is_error {
                output
            } else {
                output.with_effect(ToolEffect::Wrote(path))
            }
        })
    }
}

/// A checked call.
struct Request {
    path: PathBuf,
    shown: String,
    old: String,
    new: String,
    replace_all: bool,
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    let path = args.path("path", &ctx.cwd, PathArg::Required)?;
    let old = args.string("old_string")?.to_string();
    let new = args.string("new_string")?.to_string();
    let replace_all = args.opt_bool("replace_all")?.unwrap_or(false);
    if old.is_empty() {
        return Err(ArgError(format!(
            "{tool}: `old_string` is empty. Give the exact text to replace; to create a file or \
             replace all of it, use file_write."
        )));
    }
    if old == new {
        return Err(ArgError(format!(
            "{tool}: `old_string` and `new_string` are the same, so there is nothing to change."
        )));
    }
    Ok(Request {
        shown: paths::display(&ctx.cwd, &path),
        path,
        old,
        new,
        replace_all,
    })
}

fn edit(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    let shown = &request.shown;
    let before = match read_before(request, cancel) {
        Ok(bytes) => bytes,
        Err(message) => return ToolOutput::error(message),
    };
    let (after, count) = match replaced(request, &before) {
        Ok(done) => done,
        Err(message) => return ToolOutput::error(message),
    };
    if let Err(err) = regular_file::replace(&request.path, &after, cancel) {
        return ToolOutput::error(write_failure_message(shown, &err));
    }
    let occurrences = if count == 1 {
        "occurrence"
    } else {
        "occurrences"
    };
    let diff = unified_diff(Some(&before), &after, shown);
    ToolOutput::ok(format!(
        "Edited {shown}: replaced {count} {occurrences}.\n{}",
        cap_head_tail(&diff, MAX_DIFF_BYTES)
    ))
}

/// What a person approving the call is shown: the diff the edit would make. An edit the
/// check could not judge (a file outside what the tools read freely) may not apply: then the
/// summary says why and the diff is of the two texts alone.
fn preview(request: &Request) -> Preview {
    let shown = &request.shown;
    let made = read_before(request, &CancellationToken::new())
        .and_then(|before| replaced(request, &before).map(|(after, _)| (before, after)));
    let (summary, diff) = match made {
        Ok((before, after)) => {
            let diff = diff_preview(Some(&before), &after, shown);
            (diff.summarise(&format!("Edit {shown}")), diff)
        }
        Err(why) => {
            let why = why.split(". ").next().unwrap_or(&why).trim_end_matches('.');
            // Whole lines, so the diff does not speak of missing final newlines.
            let line = |text: &str| match text.ends_with('\n') {
                true => text.to_owned(),
                false => format!("{text}\n"),
            };
            let (old, new) = (line(&request.old), line(&request.new));
            let texts = diff_preview(Some(old.as_bytes()), new.as_bytes(), shown);
            (format!("Edit {shown}, which will fail: {why}"), texts)
        }
    };
    Preview {
        summary,
        detail: ApprovalDetail::Edit {
            path: request.path.clone(),
            diff: diff.text,
        },
    }
}

/// The file's content before the edit, or why it cannot be edited.
fn read_before(request: &Request, cancel: &CancellationToken) -> Result<Vec<u8>, String> {
    let shown = &request.shown;
    match regular_file::open_for_reading(&request.path)
        .and_then(|(mut file, meta)| regular_file::read_all(&mut file, meta.len(), cancel))
    {
        Ok(bytes) => Ok(bytes),
        Err(FileError::NotFound) => Err(format!(
            "{} To create a new file use file_write.",
            paths::not_found_message(&request.path, shown)
        )),
        Err(FileError::Directory) => Err(format!("{shown} is a directory, not a file.")),
        Err(err) => Err(read_failure_message(shown, &err)),
    }
}

/// The content after the replacement and how many occurrences it replaced, or why the edit
/// does not apply.
fn replaced(request: &Request, before: &[u8]) -> Result<(Vec<u8>, usize), String> {
    let shown = &request.shown;
    let (mut old, mut new) = (request.old.clone(), request.new.clone());
    let mut found = find_all(before, old.as_bytes());
    if found.is_empty() && uses_crlf(before) && old.contains('\n') && !old.contains('\r') {
        old = old.replace('\n', "\r\n");
        new = new.replace("\r\n", "\n").replace('\n', "\r\n");
        found = find_all(before, old.as_bytes());
    }
    match found.len() {
        0 => return Err(no_match_message(before, &request.old, shown)),
        1 => {}
        n if !request.replace_all => {
            let lines: Vec<String> = found
                .iter()
                .take(10)
                .map(|&at| line_number(before, at).to_string())
                .collect();
            let more = if n > 10 { ", …" } else { "" };
            return Err(format!(
                "`old_string` occurs {n} times in {shown} (at lines {}{more}), so the edit is \
                 ambiguous. Include more surrounding lines to make it unique, or set \
                 replace_all to true to change every occurrence.",
                lines.join(", ")
            ));
        }
        _ => {}
    }
    Ok((
        replace_at(before, &found, old.len(), new.as_bytes()),
        found.len(),
    ))
}

/// Why the file could not be read for an edit.
fn read_failure_message(shown: &str, err: &FileError) -> String {
    match err {
        FileError::NotRegular(kind) => {
            format!("{shown} is {kind}, not a regular file; file_edit edits regular files only.")
        }
        FileError::Cancelled => format!("Cancelled before {shown} was edited; it is untouched."),
        err => format!("Cannot read {shown}: {err}."),
    }
}

/// Why the edited content could not be written, and that the file is as it was.
fn write_failure_message(shown: &str, err: &FileError) -> String {
    match err {
        FileError::NotRegular(kind) => {
            format!("{shown} is {kind}, not a regular file; file_edit edits regular files only.")
        }
        FileError::Cancelled => format!("Cancelled before {shown} was edited; it is untouched."),
        err => format!("Cannot write {shown}: {err}. The original is untouched."),
    }
}

/// Start offsets of the non-overlapping occurrences of `needle`.
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut found = Vec::new();
    if needle.is_empty() {
        return found;
    }
    // Valid UTF-8 (nearly every source file) gets the standard library's fast substring search.
    if let Ok(text) = std::str::from_utf8(haystack)
        && let Ok(needle) = std::str::from_utf8(needle)
    {
        return text.match_indices(needle).map(|(at, _)| at).collect();
    }
    let mut at = 0;
    while at + needle.len() <= haystack.len() {
        if haystack[at..].starts_with(needle) {
            found.push(at);
            at += needle.len();
        } else {
            at += 1;
        }
    }
    found
}

/// `haystack` with each occurrence (starting at `starts`, each `old_len` long) replaced.
fn replace_at(haystack: &[u8], starts: &[usize], old_len: usize, new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len() + starts.len() * new.len());
    let mut copied = 0;
    for &at in starts {
        out.extend_from_slice(&haystack[copied..at]);
        out.extend_from_slice(new);
        copied = at + old_len;
    }
    out.extend_from_slice(&haystack[copied..]);
    out
}

fn uses_crlf(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"\r\n")
}

/// The 1-based line of byte offset `at`.
fn line_number(bytes: &[u8], at: usize) -> usize {
    bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Why nothing matched, with the likeliest cause when it can be found cheaply.
fn no_match_message(file: &[u8], old: &str, shown: &str) -> String {
    let first_line = old.lines().find(|l| !l.trim().is_empty()).unwrap_or(old);
    let mut msg = format!(
        "`old_string` was not found in {shown}. It must match the file exactly, including \
         whitespace and indentation, and without file_read's line-number prefixes."
    );
    let text = String::from_utf8_lossy(file);
    if squash_whitespace(&text).contains(&squash_whitespace(old)) {
        msg.push_str(
            " The text does occur if whitespace is ignored: check indentation (tabs or \
             spaces), trailing spaces and blank lines.",
        );
    } else if text.to_lowercase().contains(&old.to_lowercase()) {
        msg.push_str(" The text occurs with different upper/lower case.");
    } else if let Some(line) = text
        .lines()
        .position(|l| !first_line.trim().is_empty() && l.contains(first_line.trim()))
    {
        msg.push_str(&format!(
            " Its first line, `{}`, occurs at line {}; the lines after it differ.",
            first_line.trim(),
            line + 1
        ));
    } else {
        msg.push_str(&format!(
            " Not even its first line, `{}`, occurs.",
            first_line.trim()
        ));
    }
    msg.push_str(" Read the file again with file_read (it may have changed), then retry.");
    msg
}

/// `s` with every run of whitespace reduced to one space.
fn squash_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_all_finds_non_overlapping_occurrences() {
        assert_eq!(find_all(b"aaaa", b"aa"), vec![0, 2]);
        assert_eq!(find_all(b"abc", b"d"), Vec::<usize>::new());
        assert_eq!(find_all(b"x\xffab\xffab", b"ab"), vec![2, 5]);
    }

    #[test]
    fn replace_at_keeps_everything_else() {
        let out = replace_at(b"one two one", &[0, 8], 3, b"1");
        assert_eq!(out, b"1 two 1");
    }

    #[test]
    fn no_match_explains_whitespace_differences() {
        let msg = no_match_message(b"fn a() {\n\tx();\n}\n", "fn a() {\n    x();", "a.rs");
        assert!(msg.contains("whitespace is ignored"), "{msg}");
        let msg = no_match_message(b"fn a() {\n}\n", "fn b() {", "a.rs");
        assert!(msg.contains("Not even its first line, `fn b() {`"), "{msg}");
    }

    #[test]
    fn diff_has_headers_and_context() {
        let diff = unified_diff(Some(b"1\n2\n3\n4\n5\n"), b"1\n2\nthree\n4\n5\n", "n.txt");
        assert_eq!(
            diff,
            "--- a/n.txt\n+++ b/n.txt\n@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+three\n 4\n 5\n"
        );
    }
}
