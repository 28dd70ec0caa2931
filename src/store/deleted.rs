//! `tern.redb.deleted`: the ids of deleted sessions, one per line, outside the database.
//!
//! A deleted session's old records stay in the database file's freed pages, where a repair's
//! scan would find them. Its tombstone in the `deleted` table says it was deleted, but damage
//! can take that table's pages too; this file is the second witness, damaged or lost
//! independently of the database. Appended (and synced) after each deletion's commit; a
//! failure to write it is logged, since the tombstone inside the database still stands.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The list beside the database at `db_path`.
pub(super) fn list_path(db_path: &Path) -> PathBuf {
    super::db::beside(db_path, ".deleted")
}

/// Adds `id` to the list beside `db_path`.
pub(super) fn record(db_path: &Path, id: &str) {
    let path = list_path(db_path);
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&path).and_then(|mut file| {
        file.write_all(format!("{id}\n").as_bytes())
            .and_then(|()| file.sync_data())
    });
    if let Err(err) = written {
        tracing::warn!(path = %path.display(), %err, "could not add a deleted session to the list");
    }
}

/// The ids in the list beside `db_path` (none when it is missing or unreadable).
pub(super) fn read(db_path: &Path) -> Vec<String> {
    std::fs::read(list_path(db_path))
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
