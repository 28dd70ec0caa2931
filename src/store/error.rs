//! What can go wrong with the session database, each message naming the cause and the fix.
//!
//! Callers branch on the variant (a locked database is reported differently from a damaged
//! one); the `Display` text is what the user reads, so it always ends with what to do.

use super::owner::LockOwner;
use crate::domain::SessionId;
use std::path::{Path, PathBuf};

/// Most candidates listed when a session prefix is ambiguous.
const MAX_LISTED_CANDIDATES: usize = 5;

/// An error from the session store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (or another `Store` in this one) holds the database.
    #[error("{}", locked_message(path, owner.as_ref()))]
    Locked {
        path: PathBuf,
        /// The holder named by its owner sidecar, when that process is still alive.
        owner: Option<LockOwner>,
    },

    /// The file is not a readable tern database. It was not modified.
    #[error(
        "the session database {} is damaged or is not a tern database ({detail}). It was left \
         untouched. `tern doctor --repair` moves it aside (it is kept, never deleted) and \
         copies what can still be read into a fresh one; or move it aside yourself: `mv {} {}`",
        path.display(),
        shell_quote(path),
        shell_quote(&backup_path(path))
    )]
    Corrupt { path: PathBuf, detail: String },

    /// The database was written by a newer tern whose storage format this build cannot read:
    /// either tern's own tables or the storage engine's file format.
    #[error(
        "the session database {} was written by a newer version of tern (its {format} is \
         {found}; this tern reads {supported} at most); upgrade tern to open it; the file was \
         left untouched. To keep using this version meanwhile, set TERN_HOME to use a separate \
         data folder",
        path.display()
    )]
    UnsupportedFormat {
        path: PathBuf,
        /// Which format is newer: "table format" (tern's) or "file format" (redb's).
        format: &'static str,
        found: u64,
        supported: u64,
    },

    /// Reading or writing the database or its folder failed.
    #[error(
        "could not {action} {}: {source}. Check the folder's permissions and free disk space, \
         or set TERN_HOME to use another data folder",
        path.display()
    )]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },

    /// No session has this id (or id prefix).
    #[error(
        "no session matches `{id}`. Run `tern sessions` to list them and pass one of their ids"
    )]
    UnknownSession { id: String },

    /// The prefix names more than one session.
    #[error(
        "`{prefix}` matches {} sessions ({}). Type more of the id to pick one",
        candidates.len(),
        list_candidates(candidates)
    )]
    AmbiguousSession {
        prefix: String,
        candidates: Vec<SessionId>,
    },

    /// The prefix is too short to pick a session safely.
    #[error(
        "`{prefix}` is too short to pick a session: type at least {min} characters of its id \
         (`tern sessions` lists them)"
    )]
    PrefixTooShort { prefix: String, min: usize },

    /// `create_session` was given an id that is already taken.
    #[error(
        "session {id} already exists. Start a new session with a freshly generated id, or \
         append to the existing one"
    )]
    SessionExists { id: SessionId },

    /// Writing failed, and failed again after the database was reopened: usually a full disk.
    /// Everything committed before stays; the next operation tries again.
    #[error(
        "the session database could not be written ({cause}); free disk space, then try again \
         — nothing already acknowledged was lost. The database is {}",
        path.display()
    )]
    Unwritable { path: PathBuf, cause: String },

    /// A path in an event or session entry is not valid UTF-8; nothing was stored.
    #[error(
        "the path {} is not valid UTF-8 and cannot be recorded in the session journal; nothing \
         was stored. Rename it, or use a folder whose path is valid UTF-8",
        path.display()
    )]
    NonUtf8Path { path: PathBuf },

    /// The database file is missing or empty while session folders exist beside it: it was
    /// lost (deleted, truncated), not never made. Starting afresh would leave those folders
    /// without sessions, so nothing is created.
    #[error(
        "the session database {} is {}, but {folders} session folders exist in {}: the \
         database was lost or cut short. Nothing was changed. `tern doctor --repair` builds a \
         new index from what remains (each folder becomes a session again); to start afresh \
         instead, move that folder away",
        path.display(),
        if *missing { "missing" } else { "empty" },
        sessions_dir.display()
    )]
    Lost {
        path: PathBuf,
        missing: bool,
        folders: usize,
        sessions_dir: PathBuf,
    },

    /// A repair moved the damaged database aside and stopped before the new one was in place.
    #[error(
        "the session database {} is not in place: a repair moved the damaged file to {} and \
         did not finish. Nothing was changed. Run `tern doctor --repair` again to finish it",
        path.display(),
        moved_to.display()
    )]
    RepairUnfinished { path: PathBuf, moved_to: PathBuf },

    /// A repair that could not tell whether the database is damaged, so left it alone.
    #[error("the session database {} was not repaired: {detail}", path.display())]
    CheckFailed { path: PathBuf, detail: String },

    /// Any other failure of the storage engine.
    #[error(
        "the session database failed unexpectedly: {0}. Retry; if it keeps failing, run \
         `tern doctor`"
    )]
    Internal(String),
}

/// Maps a redb failure during normal use (after the open) to a store error.
pub(super) fn from_redb(path: &Path, err: impl Into<redb::Error>) -> StoreError {
    match err.into() {
        redb::Error::Corrupted(detail) => StoreError::Corrupt {
            path: path.to_owned(),
            detail,
        },
        redb::Error::Io(source) => StoreError::Io {
            action: "read or write",
            path: path.to_owned(),
            source,
        },
        // An earlier write failed and redb refuses this handle from now on; the store reopens
        // the database and tries again before anyone sees this.
        redb::Error::PreviousIo => StoreError::Unwritable {
            path: path.to_owned(),
            cause: "an earlier write to it failed".to_owned(),
        },
        redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => {
            StoreError::Locked {
                path: path.to_owned(),
                owner: super::owner::read_live(&super::owner::sidecar_path(path)),
            }
        }
        other => StoreError::Internal(other.to_string()),
    }
}

/// Maps a failure to open the database. Anything that says the content cannot be read
/// becomes `Corrupt`; the lock becomes `Locked` naming the holder.
pub(super) fn from_open(path: &Path, err: redb::DatabaseError) -> StoreError {
    use std::io::ErrorKind;
    let corrupt = |detail: String| StoreError::Corrupt {
        path: path.to_owned(),
        detail,
    };
    match err {
        redb::DatabaseError::UpgradeRequired(version) => corrupt(format!(
            "it uses redb file format {version}, which this build cannot read"
        )),
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
            corrupt(format!("the storage engine reports: {detail}"))
        }
        redb::DatabaseError::Storage(redb::StorageError::ValueTooLarge(len)) => {
            corrupt(format!("it claims a value of {len} bytes"))
        }
        // A read past the end (a truncated file) or a malformed header surfaces as I/O.
        redb::DatabaseError::Storage(redb::StorageError::Io(source))
            if matches!(
                source.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::InvalidData | ErrorKind::InvalidInput
            ) =>
        {
            corrupt(source.to_string())
        }
        redb::DatabaseError::Storage(redb::StorageError::Io(source)) => StoreError::Io {
            action: "open",
            path: path.to_owned(),
            source,
        },
        other => from_redb(path, other),
    }
}

/// Where `mv` should put a database the user sets aside.
fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// The path as a shell word the user can paste: quoted only when it needs to be.
fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn locked_message(path: &Path, owner: Option<&LockOwner>) -> String {
    let holder = match owner {
        Some(owner) if owner.pid == std::process::id() => {
            format!("this same tern process ({owner})")
        }
        Some(owner) => format!("another tern process ({owner})"),
        None => "another process".to_owned(),
    };
    format!(
        "the session database {} is in use by {holder}. Wait for it to finish or stop it; or \
         set TERN_HOME to use a separate data folder",
        path.display()
    )
}

fn list_candidates(candidates: &[SessionId]) -> String {
    let mut listed: Vec<&str> = candidates
        .iter()
        .take(MAX_LISTED_CANDIDATES)
        .map(SessionId::as_str)
        .collect();
    if candidates.len() > MAX_LISTED_CANDIDATES {
        listed.push("…");
    }
    listed.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_message_says_untouched_and_how_to_move_aside() {
        let err = StoreError::Corrupt {
            path: PathBuf::from("/data/my dir/tern.redb"),
            detail: "not a redb file".into(),
        };
        let text = err.to_string();
        assert!(text.contains("damaged or is not a tern database"), "{text}");
        assert!(text.contains("left untouched"), "{text}");
        assert!(
            text.contains("`mv '/data/my dir/tern.redb' '/data/my dir/tern.redb.bak'`"),
            "{text}"
        );
    }

    #[test]
    fn previous_io_is_unwritable_and_says_to_free_disk_space() {
        let err = from_redb(Path::new("/x/tern.redb"), redb::StorageError::PreviousIo);
        assert!(matches!(err, StoreError::Unwritable { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "the session database could not be written (an earlier write to it failed); free \
             disk space, then try again — nothing already acknowledged was lost. The database \
             is /x/tern.redb"
        );
    }

    #[test]
    fn locked_message_without_owner_still_says_what_to_do() {
        let err = StoreError::Locked {
            path: PathBuf::from("/x/tern.redb"),
            owner: None,
        };
        assert_eq!(
            err.to_string(),
            "the session database /x/tern.redb is in use by another process. Wait for it to \
             finish or stop it; or set TERN_HOME to use a separate data folder"
        );
    }

    #[test]
    fn ambiguous_lists_at_most_five() {
        let candidates = (0..7)
            .map(|i| SessionId::from_string(format!("abcd{i}")))
            .collect();
        let err = StoreError::AmbiguousSession {
            prefix: "abcd".into(),
            candidates,
        };
        assert_eq!(
            err.to_string(),
            "`abcd` matches 7 sessions (abcd0, abcd1, abcd2, abcd3, abcd4, …). Type more of the \
             id to pick one"
        );
    }
}
