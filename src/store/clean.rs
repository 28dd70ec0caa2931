//! The clean-close marker: what the database file looked like right after tern last closed it.
//!
//! The full integrity check that guards against opening a damaged file reads every page, which
//! costs about 1.5 ms per MB. When the file's identity, size and change times still match what
//! tern recorded after its own clean close, nothing has written to it since, so the open can
//! skip that check. The change time (ctime) cannot be set by ordinary tools, so a file edited,
//! truncated, replaced or restored from elsewhere never matches. The marker is only a hint: a
//! missing, unreadable or stale one just means the full check runs.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file attributes compared; any write to the file changes at least `ctime`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// Where the marker of the database at `db_path` lives.
pub(super) fn marker_path(db_path: &Path) -> PathBuf {
    super::db::beside(db_path, ".clean")
}

/// True when the database file is exactly as tern left it at its last clean close.
pub(super) fn unchanged_since_close(db_path: &Path) -> bool {
    let Some(now) = stamp(db_path) else {
        return false;
    };
    std::fs::read(marker_path(db_path))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<FileStamp>(&bytes).ok())
        .is_some_and(|recorded| recorded == now)
}

/// Records the file's current attributes after a clean close. Best effort.
pub(super) fn record(db_path: &Path) {
    let Some(now) = stamp(db_path) else {
        return;
    };
    let result = serde_json::to_vec(&now)
        .map_err(std::io::Error::other)
        .and_then(|json| std::fs::write(marker_path(db_path), json));
    if let Err(err) = result {
        tracing::debug!(path = %db_path.display(), %err, "could not record the clean-close marker");
    }
}

#[cfg(unix)]
fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let nanos = |secs: i64, nsecs: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsecs);
    Some(FileStamp {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
        ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
    })
}

/// Without a change time there is no trustworthy stamp: every open runs the full check.
#[cfg(not(unix))]
fn stamp(_path: &Path) -> Option<FileStamp> {
    None
}
