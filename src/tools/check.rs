//! Checking a call before a person is asked about it ([`super::Tool::check`]): a call that
//! cannot work (arguments that do not parse, a file that is not there, an edit whose text is
//! missing or that would change nothing) fails at once with the reason, so nobody is asked to
//! approve a call that would only fail after their yes.
//!
//! A check is cheap and has no side effects, and it never reads what lies in a file the model
//! may not read without approval: its answer goes to the model, and "the text was not found in
//! /etc/shadow" would tell it about a file nobody let it read. Outside what the tools read
//! freely, a check looks only at what is there (a file, a directory, nothing), which the path
//! shown for approval tells anyway; the call itself has the last word.

use super::paths::{self, Access};
use super::{ApprovalNeed, ToolContext};
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;

/// A boxed future of a check, so that `Tool` stays object-safe: `Err` with the reason the call
/// cannot work, for the model.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// A check that finds nothing wrong: the call may work.
pub(crate) fn passes<'a>() -> CheckFuture<'a> {
    Box::pin(async { Ok(()) })
}

/// Runs blocking check work (looking at files) off the async threads. A check that could not
/// finish says nothing against the call, which then meets its own error.
pub(crate) async fn blocking<F>(work: F) -> Result<(), String>
where
    F: FnOnce() -> Result<(), String> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.unwrap_or(Ok(()))
}

/// Whether the tools may read `path` without asking anyone: inside the project, or in the
/// session's own folders. Only then may a check look at what the file holds.
pub(crate) fn readable_freely(ctx: &ToolContext, path: &Path) -> bool {
    paths::access_need(ctx, path, Access::Read) == ApprovalNeed::None
}

/// What a path must be for the call to work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// An existing file (or something that is not a directory: the call says more).
    File,
    /// An existing directory.
    Directory,
    /// Anything that exists.
    Existing,
    /// Nothing, or a file: anything but a directory (a file about to be written).
    NotDirectory,
}

/// That `path` (shown to the model as `shown`) is what the call needs: its metadata only,
/// never its content.
pub(crate) fn present(path: &Path, shown: &str, wanted: Wanted) -> Result<(), String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => Some(meta),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        // Unreadable metadata (permissions): the call itself will say what it meets.
        Err(_) => return Ok(()),
    };
    match (wanted, meta) {
        (Wanted::NotDirectory, None) => Ok(()),
        (Wanted::File | Wanted::Directory | Wanted::Existing, None) => Err(format!(
            "{shown} does not exist. Use glob to find what you mean."
        )),
        (Wanted::File | Wanted::NotDirectory, Some(meta)) if meta.is_dir() => Err(format!(
            "{shown} is a directory, not a file; give the path of a file."
        )),
        (Wanted::Directory, Some(meta)) if !meta.is_dir() => {
            Err(format!("{shown} is a file, not a directory."))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_is_judged_by_metadata() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "x").expect("a file");
        let missing = dir.path().join("nothing");
        assert_eq!(present(&file, "f.txt", Wanted::File), Ok(()));
        assert_eq!(present(dir.path(), "d", Wanted::Directory), Ok(()));
        assert_eq!(present(&missing, "nothing", Wanted::NotDirectory), Ok(()));
        assert_eq!(present(&file, "f.txt", Wanted::Existing), Ok(()));
        assert!(present(&missing, "nothing", Wanted::Existing).is_err());
        let err = present(&missing, "nothing", Wanted::File).unwrap_err();
        assert!(err.starts_with("nothing does not exist."), "{err}");
        let err = present(dir.path(), "d", Wanted::NotDirectory).unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
        let err = present(&file, "f.txt", Wanted::Directory).unwrap_err();
        assert!(err.contains("is a file, not a directory"), "{err}");
    }
}
