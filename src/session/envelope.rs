//! Where a session keeps files outside the database: its folder under the data dir and its
//! temp dir, exported as `TMPDIR` to the commands it runs.

use crate::domain::{SessionId, SessionKey};
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The session log's file name inside `logs/`.
pub const LOG_FILE: &str = "session.log";

/// The folders that belong to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDirs {
    /// `<data>/sessions/<id>/`
    pub session_dir: PathBuf,
    /// Files the session produced or set aside (oversized messages).
    pub artifact_dir: PathBuf,
    pub log_dir: PathBuf,
    /// `logs/session.log`: one line per event, tool arguments redacted.
    pub log_path: PathBuf,
    /// Where extra git worktrees of the session go.
    pub worktree_dir: PathBuf,
    /// `/tmp/tern-<uid>/<key>/p`, private to the session.
    pub temp_dir: PathBuf,
    /// `/tmp/tern-<uid>`: must be this user's own, closed to everyone else.
    temp_root: PathBuf,
}

impl SessionDirs {
    pub fn new(data_dir: &Path, id: &SessionId, key: &SessionKey) -> Self {
        let session_dir = data_dir.join("sessions").join(id.as_str());
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let key = key.as_str().replace(['/', '\\'], "_");
        let temp_root = std::env::temp_dir().join(format!("tern-{uid}"));
        let log_dir = session_dir.join("logs");
        Self {
            artifact_dir: session_dir.join("artifacts"),
            log_path: log_dir.join(LOG_FILE),
            log_dir,
            worktree_dir: session_dir.join("worktrees"),
            session_dir,
            temp_dir: temp_root.join(key).join("p"),
            temp_root,
        }
    }

    /// Creates the temp dir and returns it. On a shared machine another user could create
    /// `/tmp/tern-<uid>` first and then swap folders inside it; so the root must be a real
    /// directory owned by this user with no access for others, or the session's own folder
    /// holds its temp dir instead.
    pub fn prepare_temp_dir(&self) -> PathBuf {
        let private = |dir: &Path| DirBuilder::new().recursive(true).mode(0o700).create(dir);
        if private(&self.temp_root).is_ok() && owned_and_closed(&self.temp_root) {
            if private(&self.temp_dir).is_ok() {
                return self.temp_dir.clone();
            }
        } else {
            tracing::warn!(root = %self.temp_root.display(), "temp root is not private; using the session folder");
        }
        let fallback = self.session_dir.join("tmp");
        if let Err(err) = private(&fallback) {
            tracing::warn!(%err, dir = %fallback.display(), "could not create the temp dir");
        }
        fallback
    }

    /// The temp dir [`Self::prepare_temp_dir`] would return, without creating anything.
    pub fn planned_temp_dir(&self) -> PathBuf {
        if owned_and_closed(&self.temp_root) || !self.temp_root.exists() {
            self.temp_dir.clone()
        } else {
            self.session_dir.join("tmp")
        }
    }

    /// Saves `text` as an artifact and returns its path, or `None` when it cannot be saved.
    pub fn save_artifact(&self, name: &str, text: &str) -> Option<PathBuf> {
        std::fs::create_dir_all(&self.artifact_dir).ok()?;
        let path = self.artifact_dir.join(name);
        std::fs::write(&path, text).ok()?;
        Some(path)
    }
}

/// Whether `dir` is a directory (not a link to one) owned by this user that no one else may
/// enter.
fn owned_and_closed(dir: &Path) -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.file_type().is_dir() && m.uid() == uid && m.mode() & 0o077 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dirs(tmp: &Path) -> SessionDirs {
        let id = SessionId::from_string("s1");
        let mut dirs = SessionDirs::new(&tmp.join("data"), &id, &SessionKey::cli(&id));
        dirs.temp_root = tmp.join("root");
        dirs.temp_dir = dirs.temp_root.join("cli:s1").join("p");
        dirs
    }

    #[test]
    fn the_temp_dir_is_created_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = dirs(tmp.path());
        assert_eq!(dirs.prepare_temp_dir(), dirs.temp_dir);
        let mode = std::fs::metadata(&dirs.temp_root)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_root_others_can_enter_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = dirs(tmp.path());
        std::fs::create_dir(&dirs.temp_root).unwrap();
        std::fs::set_permissions(&dirs.temp_root, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(dirs.prepare_temp_dir(), dirs.session_dir.join("tmp"));
    }

    #[test]
    fn a_root_that_is_a_link_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = dirs(tmp.path());
        let elsewhere = tmp.path().join("elsewhere");
        DirBuilder::new().mode(0o700).create(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dirs.temp_root).unwrap();
        assert_eq!(dirs.prepare_temp_dir(), dirs.session_dir.join("tmp"));
    }
}
