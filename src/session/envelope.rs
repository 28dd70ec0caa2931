//! Where a session keeps files outside the database: its folder under the data dir and its
//! temp dir, exported as `TMPDIR` to the commands it runs.

use crate::domain::{SessionId, SessionKey};
use std::path::{Path, PathBuf};

/// The folders that belong to one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDirs {
    /// `<data>/sessions/<id>/`
    pub session_dir: PathBuf,
    /// Files the session produced or set aside (oversized messages).
    pub artifact_dir: PathBuf,
    pub log_dir: PathBuf,
    /// `/tmp/tern-<uid>/<key>/p`, private to the session.
    pub temp_dir: PathBuf,
}

impl SessionDirs {
    pub fn new(data_dir: &Path, id: &SessionId, key: &SessionKey) -> Self {
        let session_dir = data_dir.join("sessions").join(id.as_str());
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let key = key.as_str().replace(['/', '\\'], "_");
        Self {
            artifact_dir: session_dir.join("artifacts"),
            log_dir: session_dir.join("logs"),
            session_dir,
            temp_dir: std::env::temp_dir()
                .join(format!("tern-{uid}"))
                .join(key)
                .join("p"),
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
