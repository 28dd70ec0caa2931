//! The file walk behind `glob` and `grep`, so both see the same files: it honours `.gitignore`
//! and friends and skips hidden files, as ripgrep does, yields files only, and checks for
//! cancellation before every entry, so a walk over a huge tree stops promptly.

use super::path_text;
use ignore::{DirEntry, WalkBuilder};
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The error a search returns when its walk was cancelled.
pub(crate) const CANCELLED: &str = "Cancelled before the search finished.";

/// The order files come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Whatever order the directories list them in; for callers that sort the results.
    Unsorted,
    /// Sorted by file name within each directory, so the same search gives the same answer.
    ByName,
}

/// What the walk found next.
pub(crate) enum Step {
    /// A file (the root itself, when the root is a file).
    File(DirEntry),
    /// An entry that could not be read: no permission, a vanished directory, a link loop.
    Unreadable,
    /// The call was cancelled.
    Cancelled,
}

/// The files under `root`, as `rg --files` would list them. Once `cancel` fires, every further
/// entry comes out as [`Step::Cancelled`]; callers stop at the first.
pub(crate) fn files<'a>(
    root: &Path,
    order: Order,
    cancel: &'a CancellationToken,
) -> impl Iterator<Item = Step> + use<'a> {
    let mut builder = WalkBuilder::new(root);
    if order == Order::ByName {
        builder.sort_by_file_name(|a, b| a.cmp(b));
    }
    builder.build().filter_map(move |entry| match entry {
        _ if cancel.is_cancelled() => Some(Step::Cancelled),
        Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => Some(Step::File(entry)),
        Ok(_) => None,
        Err(_) => Some(Step::Unreadable),
    })
}

/// Up to `limit` files under `root`, as paths relative to it, in the walk's order (as
/// `rg --files` lists them) and as the tools show them: for completing file names as the
/// person types.
pub fn list_files(root: &Path, limit: usize) -> Vec<String> {
    let never = CancellationToken::new();
    files(root, Order::Unsorted, &never)
        .filter_map(|step| match step {
            Step::File(entry) => entry
                .path()
                .strip_prefix(root)
                .ok()
                .map(|p| path_text::encode(p).into_owned()),
            Step::Unreadable | Step::Cancelled => None,
        })
        .take(limit)
        .collect()
}
