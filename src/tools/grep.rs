//! `grep`: regex search over files with ripgrep's own crates.
//!
//! The walk honours `.gitignore` and friends and skips hidden files, like `rg`; files with a
//! NUL byte are treated as binary and skipped whole. Results come in path order so that the
//! same search gives the same answer, and they are capped by count and by size, with a note
//! when anything was left out.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::group_digits;
use super::paths::{self, Access, PathArg};
use super::walk::{self, Order, Step};
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput, run_blocking};
use crate::domain::Audience;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use serde_json::{Value, json};
use std::io;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Results shown when the call gives no `max_results`.
pub const DEFAULT_MAX_RESULTS: u64 = 200;
/// The result stops growing past this size.
pub const MAX_OUTPUT_BYTES: usize = 50 * 1024;
/// Matched lines are cut to this many chars (minified files have enormous lines).
const MAX_LINE_CHARS: usize = 500;
/// The most context lines around a match.
const MAX_CONTEXT: u64 = 20;

/// Searches file contents with a regular expression.
pub struct Grep;

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn summary(&self) -> &'static str {
        "Search file contents by regular expression, skipping ignored files."
    }

    fn description(&self) -> &'static str {
        "Search file contents with a regular expression (Rust regex syntax, like ripgrep). \
         Searches the working directory, or `path` (a directory or one file), skipping hidden \
         files, binary files and whatever .gitignore excludes. `glob` filters file names \
         (`*.rs`; a glob with a `/` matches the path relative to the search root, as in \
         `src/**/*.rs`). output_mode `content` (default) shows `path:line:text` lines, with \
         `context` lines around each match shown as `path-line-text`; `files_with_matches` \
         lists matching files; `count` gives `path:count`. Results stop at `max_results` \
         (default 200)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {"type": "string", "description": "Directory or file to search. Default: the working directory."},
                "glob": {"type": "string", "description": "Only search files whose name (or, with a '/', relative path) matches this glob."},
                "case_insensitive": {"type": "boolean", "description": "Ignore upper/lower case. Default false."},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "What to return. Default content."},
                "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match (content mode). Default 0."},
                "max_results": {"type": "integer", "minimum": 1, "description": "Most matching lines (content) or files (other modes) to return. Default 200."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn approval_need(&self, input: &Value, ctx: &ToolContext) -> ApprovalNeed {
        paths::need_for_input(ctx, self.name(), input, PathArg::Optional, Access::Read)
    }

    /// The pattern and options, and that the path searched is there.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        Box::pin(async move {
            let request = parsed.map_err(|err| err.0)?;
            let shown = paths::display(&request.cwd, &request.root);
            check::blocking(move || check::present(&request.root, &shown, Wanted::Existing)).await
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
            run_blocking(&cancel, move |token| search(&request, token)).await
        })
    }
}

/// What to return for the matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content,
    Files,
    Count,
}

/// A checked call, with the matcher and glob already built.
struct Request {
    pattern: String,
    matcher: RegexMatcher,
    root: PathBuf,
    cwd: PathBuf,
    glob: Option<(GlobMatcher, bool)>,
    mode: Mode,
    context: usize,
    max_results: u64,
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    let pattern = args.string("pattern")?.to_string();
    let root = args.path("path", &ctx.cwd, PathArg::Optional)?;
    let mode = match args.opt_string("output_mode")? {
        None | Some("content") => Mode::Content,
        Some("files_with_matches") => Mode::Files,
        Some("count") => Mode::Count,
        Some(other) => {
            return Err(ArgError(format!(
                "{tool}: argument `output_mode` must be one of content, files_with_matches, \
                 count; got {other:?}"
            )));
        }
    };
    let context = args.opt_u64("context", 0)?.unwrap_or(0).min(MAX_CONTEXT) as usize;
    let max_results = args
        .opt_u64("max_results", 1)?
        .unwrap_or(DEFAULT_MAX_RESULTS);
    let case_insensitive = args.opt_bool("case_insensitive")?.unwrap_or(false);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        // Searching line by line lets the searcher use its fast path, and makes a pattern
        // that needs to span lines an error rather than a silent miss.
        .line_terminator(Some(b'\n'))
        .build(&pattern)
        .map_err(|e| {
            ArgError(format!(
                "{tool}: invalid regular expression {pattern:?}: {e}"
            ))
        })?;
    let glob = match args.opt_string("glob")? {
        None => None,
        Some(glob) => {
            let by_path = glob.contains('/');
            let built = GlobBuilder::new(glob.trim_start_matches("./"))
                .literal_separator(by_path)
                .build()
                .map_err(|e| ArgError(format!("{tool}: invalid glob {glob:?}: {e}")))?;
            Some((built.compile_matcher(), by_path))
        }
    };
    Ok(Request {
        pattern,
        matcher,
        root,
        cwd: paths::normalize(&ctx.cwd),
        glob,
        mode,
        context,
        max_results,
    })
}

/// Runs the search; blocking.
fn search(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    let root = &request.root;
    let shown_root = paths::display(&request.cwd, root);
    if !root.exists() {
        return ToolOutput::error(format!(
            "{shown_root} does not exist. Give an existing directory or file as `path`."
        ));
    }
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(request.context)
        .after_context(request.context)
        .build();
    let mut report = Report::default();
    for step in walk::files(root, Order::ByName, cancel) {
        let entry = match step {
            Step::File(entry) => entry,
            Step::Unreadable => {
                report.unreadable += 1;
                continue;
            }
            Step::Cancelled => return ToolOutput::error(walk::CANCELLED),
        };
        let path = entry.path();
        let explicit = entry.depth() == 0;
        if !explicit && !glob_allows(request.glob.as_ref(), root, path) {
            continue;
        }
        let mut sink = FileSink {
            shown: paths::display(&request.cwd, path),
            mode: request.mode,
            lines: Vec::new(),
            matches: 0,
            budget: request.max_results - report.matches,
            binary: false,
            cancel,
        };
        if searcher
            .search_path(&request.matcher, path, &mut sink)
            .is_err()
        {
            report.unreadable += 1;
            continue;
        }
        if sink.binary || sink.matches == 0 {
            continue;
        }
        report.add(&sink, request);
        if report.stopped.is_some() {
            break;
        }
    }
    let empty = report.out.is_empty() && report.stopped.is_none();
    let text = report.finish(request, &shown_root);
    if empty {
        ToolOutput::nothing_found(text)
    } else {
        ToolOutput::ok(text)
    }
}

/// Whether the call's glob lets `path` be searched.
fn glob_allows(glob: Option<&(GlobMatcher, bool)>, root: &Path, path: &Path) -> bool {
    match glob {
        None => true,
        Some((glob, true)) => glob.is_match(path.strip_prefix(root).unwrap_or(path)),
        Some((glob, false)) => path.file_name().is_some_and(|name| glob.is_match(name)),
    }
}

/// Collects one file's results.
struct FileSink<'a> {
    shown: String,
    mode: Mode,
    lines: Vec<String>,
    matches: u64,
    /// Matching lines still allowed in content mode.
    budget: u64,
    binary: bool,
    cancel: &'a CancellationToken,
}

impl FileSink<'_> {
    fn push_line(&mut self, separator: char, number: Option<u64>, bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((end, _)) => format!("{}… [line cut]", &text[..end]),
            None => text.to_string(),
        };
        let number = number.unwrap_or(0);
        self.lines.push(format!(
            "{}{separator}{number}{separator}{text}",
            self.shown
        ));
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.matches += 1;
        match self.mode {
            // One match is enough to list the file.
            Mode::Files => Ok(false),
            Mode::Count => Ok(true),
            Mode::Content => {
                self.push_line(':', mat.line_number(), mat.bytes());
                Ok(self.matches < self.budget)
            }
        }
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.mode == Mode::Content && !matches!(context.kind(), SinkContextKind::Other) {
            self.push_line('-', context.line_number(), context.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        if self.mode == Mode::Content {
            self.lines.push("--".to_string());
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Why results stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    MaxResults,
    Size,
}

/// The results so far, across files.
#[derive(Default)]
struct Report {
    out: String,
    files: u64,
    matches: u64,
    unreadable: u64,
    stopped: Option<Stopped>,
}

impl Report {
    fn add(&mut self, sink: &FileSink<'_>, request: &Request) {
        self.files += 1;
        let lines: Vec<String> = match request.mode {
            Mode::Content => {
                self.matches += sink.matches;
                let mut lines = sink.lines.clone();
                if request.context > 0 && !self.out.is_empty() {
                    lines.insert(0, "--".to_string());
                }
                lines
            }
            Mode::Files => {
                self.matches += 1;
                vec![sink.shown.clone()]
            }
            Mode::Count => {
                self.matches += 1;
                vec![format!("{}:{}", sink.shown, sink.matches)]
            }
        };
        for line in lines {
            if self.out.len() + line.len() + 1 > MAX_OUTPUT_BYTES {
                self.stopped = Some(Stopped::Size);
                return;
            }
            self.out.push_str(&line);
            self.out.push('\n');
        }
        if self.matches >= request.max_results {
            self.stopped = Some(Stopped::MaxResults);
        }
    }

    fn finish(mut self, request: &Request, shown_root: &str) -> String {
        if self.out.is_empty() && self.stopped.is_none() {
            let mut msg = format!(
                "No matches for {:?} in {shown_root} (hidden, binary and .gitignored files \
                 are skipped).",
                request.pattern
            );
            if self.unreadable > 0 {
                msg.push_str(&format!(" {} paths could not be read.", self.unreadable));
            }
            return msg;
        }
        let what = match request.mode {
            Mode::Content => "matching lines",
            Mode::Files | Mode::Count => "files",
        };
        match self.stopped {
            Some(Stopped::MaxResults) => self.out.push_str(&format!(
                "[stopped at {} {what} (max_results); there may be more. Narrow the pattern, \
                 path or glob, or raise max_results]\n",
                group_digits(request.max_results)
            )),
            Some(Stopped::Size) => self.out.push_str(&format!(
                "[stopped at {} KB of results; there are more. Narrow the pattern, path or \
                 glob, or use output_mode files_with_matches]\n",
                MAX_OUTPUT_BYTES / 1024
            )),
            None => {}
        }
        if self.unreadable > 0 {
            self.out
                .push_str(&format!("[{} paths could not be read]\n", self.unreadable));
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_without_slash_matches_names_at_any_depth() {
        let check = |glob: &str, path: &str, expected: bool| {
            let by_path = glob.contains('/');
            let matcher = GlobBuilder::new(glob)
                .literal_separator(by_path)
                .build()
                .unwrap()
                .compile_matcher();
            let allowed = glob_allows(Some(&(matcher, by_path)), Path::new("/r"), Path::new(path));
            assert_eq!(allowed, expected, "{glob} {path}");
        };
        check("*.rs", "/r/src/deep/a.rs", true);
        check("*.rs", "/r/a.txt", false);
        check("src/*.rs", "/r/src/a.rs", true);
        check("src/*.rs", "/r/src/deep/a.rs", false);
        check("src/**/*.rs", "/r/src/deep/a.rs", true);
    }
}
