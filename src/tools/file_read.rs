//! `file_read`: shows a range of a text file with line numbers, the way `cat -n` does.
//!
//! The file is streamed line by line, so showing the first lines of a huge log costs only those
//! lines, and a single enormous line (minified code) is kept only up to the display limit.
//! Everything that is not shown as is (a cut line, a capped result, invalid UTF-8, a binary
//! file) is named in a note, with the offset to continue from.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::{group_digits, human_bytes};
use super::paths::{self, Access, PathArg};
use super::regular_file::{self, FileError};
use super::{ApprovalNeed, Tool, ToolContext, ToolEffect, ToolFuture, ToolOutput, run_blocking};
use crate::domain::Audience;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// Lines shown when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Longer lines are cut to this many chars.
pub const MAX_LINE_CHARS: usize = 2000;
/// The result stops growing past this size.
pub const MAX_OUTPUT_BYTES: usize = 100 * 1024;
/// A NUL byte in this many leading bytes marks a file as binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Bytes kept per line: enough for `MAX_LINE_CHARS` chars of up to four bytes each.
const MAX_LINE_BYTES: usize = MAX_LINE_CHARS * 4;

/// Reads a file with line numbers.
pub struct FileRead;

impl Tool for FileRead {
    fn name(&self) -> &'static str {
        "file_read"
    }

    fn summary(&self) -> &'static str {
        "Read a text file with line numbers, whole or a range of lines."
    }

    fn description(&self) -> &'static str {
        "Read a text file. Lines are numbered like `cat -n` (line number, tab, text); the \
         numbers are not part of the file. By default shows up to 2000 lines from the start; \
         use `offset` (1-based line) and `limit` to read another range of a long file. Lines \
         over 2000 chars are cut, results over about 100 KB stop with a note saying which \
         offset to continue from, and binary files are not shown. Relative paths resolve \
         against the working directory."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read, absolute or relative to the working directory."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based). Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show. Default 2000."}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        // Public audiences get no tool that touches the host, reads included.
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn approval_need(&self, input: &Value, ctx: &ToolContext) -> ApprovalNeed {
        paths::need_for_input(ctx, self.name(), input, PathArg::Required, Access::Read)
    }

    /// The arguments, and that the file is there (asked about only outside the project, so
    /// never its content).
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        Box::pin(async move {
            let request = parsed.map_err(|err| err.0)?;
            check::blocking(move || check::present(&request.path, &request.shown, Wanted::File))
                .await
        })
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
            run_blocking(&cancel, move |token| read(&request, token)).await
        })
    }
}

/// A checked call.
struct Request {
    path: PathBuf,
    shown: String,
    offset: u64,
    limit: u64,
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    let path = args.path("path", &ctx.cwd, PathArg::Required)?;
    Ok(Request {
        shown: paths::display(&ctx.cwd, &path),
        path,
        offset: args.opt_u64("offset", 1)?.unwrap_or(1),
        limit: args.opt_u64("limit", 1)?.unwrap_or(DEFAULT_LIMIT),
    })
}

fn read(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    let shown = &request.shown;
    let (file, metadata) = match regular_file::open_for_reading(&request.path) {
        Ok(opened) => opened,
        Err(FileError::NotFound) => {
            return ToolOutput::error(paths::not_found_message(&request.path, shown));
        }
        Err(FileError::Directory) => {
            return ToolOutput::error(format!(
                "{shown} is a directory, not a file. Use glob to list its files (for example \
                 pattern \"*\" with path \"{shown}\")."
            ));
        }
        Err(FileError::NotRegular(kind)) => {
            return ToolOutput::error(format!(
                "{shown} is {kind}, not a regular file; file_read reads regular files only."
            ));
        }
        Err(err) => return ToolOutput::error(format!("Cannot read {shown}: {err}.")),
    };
    let effect = ToolEffect::Read(request.path.clone());
    match show_lines(file, metadata.len(), request.offset, request.limit, cancel) {
        Ok(Shown::Lines(text)) => ToolOutput::ok(text).with_effect(effect),
        Ok(Shown::Nothing(text)) => ToolOutput::nothing_found(text).with_effect(effect),
        Err(err) => ToolOutput::error(format!("Cannot read {shown}: {err}")),
    }
}

/// What a read shows.
enum Shown {
    /// Lines of the file, or a note standing for them (a binary file).
    Lines(String),
    /// A note that there was no line to show: an empty file, or an offset past its end.
    Nothing(String),
}

/// Formats lines `offset..offset+limit` of `file`.
fn show_lines(
    mut file: File,
    size: u64,
    offset: u64,
    limit: u64,
    cancel: &CancellationToken,
) -> io::Result<Shown> {
    let mut sniff = Vec::with_capacity(BINARY_SNIFF_BYTES);
    (&mut file)
        .take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut sniff)?;
    if sniff.contains(&0) {
        return Ok(Shown::Lines(format!(
            "[binary file, {} bytes, not shown]",
            group_digits(size)
        )));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, io::Cursor::new(sniff).chain(file));

    let mut line = Vec::new();
    let mut number: u64 = 0;
    while number + 1 < offset {
        if number.is_multiple_of(4096) && cancel.is_cancelled() {
            return Err(io::Error::other("cancelled"));
        }
        match next_line(&mut reader, &mut line, 0, cancel)? {
            Some(_) => number += 1,
            None => break,
        }
    }
    if number + 1 < offset || (offset > 1 && reader.fill_buf()?.is_empty()) {
        let lines = if number == 1 { "line" } else { "lines" };
        return Ok(Shown::Nothing(format!(
            "[the file has only {number} {lines}; offset {offset} is past the end]"
        )));
    }

    let mut out = String::new();
    let mut notes = Notes::default();
    let mut last_shown = None;
    // Saturating: `limit` comes from the model and may be as large as u64 allows.
    let end = (offset - 1).saturating_add(limit);
    while number < end {
        let Some(total_len) = next_line(&mut reader, &mut line, MAX_LINE_BYTES, cancel)? else {
            break;
        };
        number += 1;
        let formatted = format_line(number, &line, total_len, &mut notes);
        if out.len() + formatted.len() > MAX_OUTPUT_BYTES && last_shown.is_some() {
            notes.capped = true;
            break;
        }
        out.push_str(&formatted);
        last_shown = Some(number);
    }

    let Some(last) = last_shown else {
        return Ok(Shown::Nothing("[empty file]".to_string()));
    };
    let more = notes.capped || !reader.fill_buf()?.is_empty();
    if notes.capped {
        out.push_str(&format!(
            "[output capped at {}: showed lines {offset}-{last}; continue with offset={}]\n",
            human_bytes(MAX_OUTPUT_BYTES as u64),
            last + 1
        ));
    } else if more {
        out.push_str(&format!(
            "[showed lines {offset}-{last}; the file continues ({} in total): use offset={} \
             to read on]\n",
            human_bytes(size),
            last + 1
        ));
    }
    if notes.long_lines > 0 {
        out.push_str(&format!(
            "[{} long line(s) were cut at {MAX_LINE_CHARS} chars]\n",
            notes.long_lines
        ));
    }
    if notes.invalid_utf8 {
        out.push_str("[the file is not valid UTF-8; invalid bytes are shown as \u{FFFD}]\n");
    }
    if notes.crlf {
        out.push_str("[the file has CRLF line endings, not shown above; file_edit keeps them]\n");
    }
    Ok(Shown::Lines(out))
}

/// What the notes after the lines must mention.
#[derive(Default)]
struct Notes {
    capped: bool,
    long_lines: usize,
    invalid_utf8: bool,
    crlf: bool,
}

/// One numbered line, `cat -n` style, cut to `MAX_LINE_CHARS`.
fn format_line(number: u64, raw: &[u8], total_len: u64, notes: &mut Notes) -> String {
    let truncated = total_len > raw.len() as u64;
    let mut bytes = raw;
    if !truncated && let Some(rest) = bytes.strip_suffix(b"\n") {
        bytes = rest;
        if let Some(rest) = bytes.strip_suffix(b"\r") {
            bytes = rest;
            notes.crlf = true;
        }
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        // A sequence cut off by the per-line limit is not the file's fault.
        Err(err) if truncated && err.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..err.valid_up_to()])
        }
        Err(_) => {
            notes.invalid_utf8 = true;
            String::from_utf8_lossy(bytes)
        }
    };
    let cut_at = text.char_indices().nth(MAX_LINE_CHARS).map(|(i, _)| i);
    match cut_at {
        Some(end) => {
            notes.long_lines += 1;
            format!(
                "{number:>6}\t{}… [line cut: {} bytes in total]\n",
                &text[..end],
                group_digits(total_len)
            )
        }
        None if truncated => {
            notes.long_lines += 1;
            format!(
                "{number:>6}\t{text}… [line cut: {} bytes in total]\n",
                group_digits(total_len)
            )
        }
        None => format!("{number:>6}\t{text}\n"),
    }
}

/// Reads the next line (with its `\n`, if any) into `line`, keeping at most `keep` bytes of it,
/// and returns its full length; `None` at the end of the file. Memory stays bounded whatever
/// the line's length, and a cancel is noticed between buffers, even inside one huge line.
fn next_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
    cancel: &CancellationToken,
) -> io::Result<Option<u64>> {
    line.clear();
    let mut total: u64 = 0;
    loop {
        // Checked only once a line outgrows a buffer, so ordinary lines cost nothing extra.
        if total > 0 && cancel.is_cancelled() {
            return Err(io::Error::other("cancelled"));
        }
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        total += take as u64;
        reader.consume(take);
        if done {
            return Ok(Some(total));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(text: &[u8], keep: usize) -> Vec<(Vec<u8>, u64)> {
        let mut reader = BufReader::with_capacity(4, text);
        let mut line = Vec::new();
        let mut out = Vec::new();
        let cancel = CancellationToken::new();
        while let Some(total) = next_line(&mut reader, &mut line, keep, &cancel).unwrap() {
            out.push((line.clone(), total));
        }
        out
    }

    #[test]
    fn next_line_splits_and_bounds_lines() {
        assert_eq!(
            lines_of(b"ab\ncdefgh\nlast", 3),
            vec![
                (b"ab\n".to_vec(), 3),
                (b"cde".to_vec(), 7),
                (b"las".to_vec(), 4)
            ]
        );
        assert!(lines_of(b"", 10).is_empty());
    }

    #[test]
    fn format_line_numbers_and_strips_line_endings() {
        let mut notes = Notes::default();
        assert_eq!(
            format_line(7, b"fn a()\r\n", 8, &mut notes),
            "     7\tfn a()\n"
        );
        assert!(notes.crlf);
        assert!(!notes.invalid_utf8);
        assert_eq!(
            format_line(8, b"caf\xe9\n", 5, &mut notes),
            "     8\tcaf\u{FFFD}\n"
        );
        assert!(notes.invalid_utf8);
    }

    #[test]
    fn format_line_cuts_long_lines_with_a_note() {
        let mut notes = Notes::default();
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let shown = format_line(1, long.as_bytes(), long.len() as u64, &mut notes);
        assert!(
            shown.ends_with("… [line cut: 2,010 bytes in total]\n"),
            "{shown}"
        );
        assert_eq!(notes.long_lines, 1);
    }
}
