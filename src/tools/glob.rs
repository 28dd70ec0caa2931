//! `glob`: finds files by name pattern, newest first.
//!
//! The walk honours `.gitignore` and skips hidden files, like `rg --files`. Newest-first order
//! puts the files someone is working on at the top. Only the newest [`MAX_RESULTS`] are kept
//! while walking, so a huge tree costs bounded memory, and the list stops at
//! [`MAX_OUTPUT_BYTES`], so paths deep enough to be kilobytes each cost the model no more than
//! a list of short ones. Names that are not UTF-8 are listed in
//! the escaped form the other tools read back (see `path_text`).

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::group_digits;
use super::path_text;
use super::paths::{self, Access, PathArg};
use super::walk::{self, Order, Step};
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput, run_blocking};
use crate::domain::Audience;
use globset::{GlobBuilder, GlobMatcher};
use serde_json::{Value, json};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::time::SystemTime;
use tokio_util::sync::CancellationToken;

/// The most paths returned.
pub const MAX_RESULTS: usize = 500;
/// The list stops growing past this size (the note after it aside).
pub const MAX_OUTPUT_BYTES: usize = 50 * 1024;

/// Lists files matching a glob.
pub struct Glob;

impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn summary(&self) -> &'static str {
        "Find files by glob pattern (`**/*.rs`), newest first, skipping ignored files."
    }

    fn description(&self) -> &'static str {
        "Find files by glob pattern, such as `**/*.rs` or `src/**/test_*.py`, matched against \
         paths relative to the search root (`*` stays within one directory, `**` crosses \
         directories). Searches the working directory, or `path`. Hidden files and whatever \
         .gitignore excludes are skipped. Returns paths relative to the search root, most \
         recently modified first, at most 500 (or about 50 KB of paths)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob matched against paths relative to the search root."},
                "path": {"type": "string", "description": "Directory to search. Default: the working directory."}
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

    /// The pattern, and that the directory searched is there.
    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        Box::pin(async move {
            let request = parsed.map_err(|err| err.0)?;
            check::blocking(move || {
                check::present(&request.root, &request.shown_root, Wanted::Directory)
            })
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
            run_blocking(&cancel, move |token| find(&request, token)).await
        })
    }
}

/// A checked call.
struct Request {
    pattern: String,
    matcher: GlobMatcher,
    root: PathBuf,
    shown_root: String,
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    let pattern = args.string("pattern")?.to_string();
    let root = args.path("path", &ctx.cwd, PathArg::Optional)?;
    if pattern.starts_with('/') {
        return Err(ArgError(format!(
            "{tool}: the pattern {pattern:?} is absolute; patterns match paths relative to the \
             search root. Put the directory in `path` and a relative pattern in `pattern`."
        )));
    }
    let matcher = GlobBuilder::new(pattern.trim_start_matches("./"))
        .literal_separator(true)
        .build()
        .map_err(|e| ArgError(format!("{tool}: invalid glob {pattern:?}: {e}")))?
        .compile_matcher();
    Ok(Request {
        shown_root: paths::display(&ctx.cwd, &root),
        pattern,
        matcher,
        root,
    })
}

/// Walks the root and keeps the newest matches; blocking.
fn find(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    let root = &request.root;
    let shown_root = &request.shown_root;
    if !root.is_dir() {
        let problem = if root.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return ToolOutput::error(format!(
            "{shown_root} {problem}. Give an existing directory as `path`."
        ));
    }
    // A min-heap of the newest results: the oldest kept one is at the top, ready to be
    // replaced. Ties go to the path that sorts first.
    let mut newest: BinaryHeap<Reverse<(SystemTime, Reverse<String>)>> = BinaryHeap::new();
    let mut total: u64 = 0;
    for step in walk::files(root, Order::Unsorted, cancel) {
        let entry = match step {
            Step::File(entry) => entry,
            Step::Unreadable => continue,
            Step::Cancelled => return ToolOutput::error(walk::CANCELLED),
        };
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if !request.matcher.is_match(relative) {
            continue;
        }
        total += 1;
        let modified = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let key = (modified, Reverse(path_text::encode(relative).into_owned()));
        if newest.len() < MAX_RESULTS {
            newest.push(Reverse(key));
        } else if newest.peek().is_some_and(|Reverse(oldest)| key > *oldest) {
            newest.pop();
            newest.push(Reverse(key));
        }
    }
    if total == 0 {
        return ToolOutput::nothing_found(format!(
            "No files match {:?} under {shown_root} (hidden and .gitignored files are \
             skipped).",
            request.pattern
        ));
    }
    // `into_sorted_vec` sorts ascending by `Reverse(key)`, which is newest first.
    let sorted = newest.into_sorted_vec();
    let mut out = String::new();
    let mut listed: u64 = 0;
    for Reverse((_, Reverse(path))) in &sorted {
        if out.len() + path.len() + 1 > MAX_OUTPUT_BYTES {
            break;
        }
        out.push_str(path);
        out.push('\n');
        listed += 1;
    }
    if total > listed {
        out.push_str(&format!(
            "[showing the {} most recently modified of {} matching files; narrow the pattern \
             or path to see the rest]\n",
            group_digits(listed),
            group_digits(total)
        ));
    }
    ToolOutput::ok(out)
}
