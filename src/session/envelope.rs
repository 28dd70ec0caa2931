//! Where a session keeps files outside the database: its folder under the data dir
//! (`sessions/<id>-<hash>/`, the hash from its key) with the sub-folders each feature writes
//! to, and its temp dir, exported as `TMPDIR`, `TMP` and `TEMP` to the commands it runs.
//!
//! The index records each session's folder. When the data dir was moved, the recorded path
//! no longer lies under the current `sessions/` folder; [`SessionDirs::locate`] then re-roots
//! it there and says so, so a moved data dir keeps its sessions' files.

use super::redact::fnv1a;
use crate::domain::{SessionId, SessionKey};
use crate::store::SessionMeta;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The session log's file name inside `logs/`.
pub const LOG_FILE: &str = "session.log";

/// The folders that belong to one session. Only the log's and the temp dir are made when
/// the session starts; the others when something is first written to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDirs {
    /// `<data>/sessions/<id>-<hash>/`
    pub session_dir: PathBuf,
    /// Scratch space of the session's own, kept with it.
    pub workspace_dir: PathBuf,
    /// Attachments received, before the session takes them in.
    pub attachment_dir: PathBuf,
    /// Files the session produced or set aside (oversized messages).
    pub artifact_dir: PathBuf,
    pub log_dir: PathBuf,
    /// `logs/session.log`: one line per event, tool arguments redacted.
    pub log_path: PathBuf,
    /// `logs/calls/`: what running commands print, kept as it comes (see `spool`).
    pub spool_dir: PathBuf,
    /// Where extra git worktrees of the session go.
    pub worktree_dir: PathBuf,
    /// `subagents/<run-id>/` per subagent run.
    pub subagents_dir: PathBuf,
    /// `/tmp/tern-<uid>/<key>/p`, private to the session.
    pub temp_dir: PathBuf,
    /// `/tmp/tern-<uid>`: must be this user's own, closed to everyone else.
    temp_root: PathBuf,
}

/// The folders of one subagent run, inside the parent session's `subagents/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentDirs {
    pub dir: PathBuf,
    /// What the subagent was asked.
    pub task_path: PathBuf,
    /// What it answered.
    pub result_path: PathBuf,
    pub artifact_dir: PathBuf,
    pub log_dir: PathBuf,
}

/// A session folder recorded under another data dir, found again under the current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerooted {
    pub from: PathBuf,
    pub to: PathBuf,
}

impl SessionDirs {
    /// The folders of a new session `id` that `key` talks to.
    pub fn new(data_dir: &Path, id: &SessionId, key: &SessionKey) -> Self {
        Self::at(folder_for(data_dir, id, key), key)
    }

    /// The folders of a stored session: where the index says its folder is, re-rooted onto
    /// `data_dir` when the index names a folder under another data dir (the data dir was
    /// moved). Entries from before folders were recorded use `sessions/<id>/`.
    pub fn locate(data_dir: &Path, meta: &SessionMeta) -> (Self, Option<Rerooted>) {
        let sessions = data_dir.join("sessions");
        let (dir, moved) = match &meta.session_dir {
            None => (sessions.join(meta.id.as_str()), None),
            Some(stored) if stored.parent() == Some(sessions.as_path()) => (stored.clone(), None),
            Some(stored) => {
                let name = stored
                    .file_name()
                    .map_or_else(|| meta.id.as_str().into(), ToOwned::to_owned);
                let to = sessions.join(name);
                let moved = Rerooted {
                    from: stored.clone(),
                    to: to.clone(),
                };
                (to, Some(moved))
            }
        };
        (Self::at(dir, &meta.key), moved)
    }

    fn at(session_dir: PathBuf, key: &SessionKey) -> Self {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let key = key.as_str().replace(['/', '\\'], "_");
        let temp_root = std::env::temp_dir().join(format!("tern-{uid}"));
        let log_dir = session_dir.join("logs");
        Self {
            workspace_dir: session_dir.join("workspace"),
            attachment_dir: session_dir.join("attachment-staging"),
            artifact_dir: session_dir.join("artifacts"),
            log_path: log_dir.join(LOG_FILE),
            spool_dir: log_dir.join("calls"),
            log_dir,
            worktree_dir: session_dir.join("worktrees"),
            subagents_dir: session_dir.join("subagents"),
            session_dir,
            temp_dir: temp_root.join(key).join("p"),
            temp_root,
        }
    }

    /// The folders of subagent run `run_id`, created (private to the user) on the way.
    pub fn subagent(&self, run_id: &str) -> std::io::Result<SubagentDirs> {
        let dir = self.subagents_dir.join(run_id.replace(['/', '\\'], "_"));
        let run = SubagentDirs {
            task_path: dir.join("task.md"),
            result_path: dir.join("result.md"),
            artifact_dir: dir.join("artifacts"),
            log_dir: dir.join("logs"),
            dir,
        };
        private_dir(&run.artifact_dir)?;
        private_dir(&run.log_dir)?;
        Ok(run)
    }

    /// Creates `dir` (one of this session's folders) if it is missing, private to the user,
    /// and returns it.
    pub fn ensure<'a>(&self, dir: &'a Path) -> std::io::Result<&'a Path> {
        private_dir(dir)?;
        Ok(dir)
    }

    /// Creates the temp dir and returns it. On a shared machine another user could create
    /// `/tmp/tern-<uid>` first and then swap folders inside it; so the root must be a real
    /// directory owned by this user with no access for others, or the session's own folder
    /// holds its temp dir instead.
    pub fn prepare_temp_dir(&self) -> PathBuf {
        if private_dir(&self.temp_root).is_ok() && owned_and_closed(&self.temp_root) {
            if private_dir(&self.temp_dir).is_ok() {
                return self.temp_dir.clone();
            }
        } else {
            tracing::warn!(root = %self.temp_root.display(), "temp root is not private; using the session folder");
        }
        let fallback = self.session_dir.join("tmp");
        if let Err(err) = private_dir(&fallback) {
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

    /// Saves `text` as a new artifact named `stem.txt`, or `stem-2.txt` and so on when that
    /// name is taken (a provider may use a call's id again in a later reply), never over
    /// another; its path, or `None` when it cannot be saved.
    pub fn save_new_artifact(&self, stem: &str, text: &str) -> Option<PathBuf> {
        use std::io::Write;
        private_dir(&self.artifact_dir).ok()?;
        for n in 1..=1000 {
            let name = match n {
                1 => format!("{stem}.txt"),
                n => format!("{stem}-{n}.txt"),
            };
            let path = self.artifact_dir.join(name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => return file.write_all(text.as_bytes()).ok().map(|()| path),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Saves `text` as an artifact and returns its path, or `None` when it cannot be saved.
    pub fn save_artifact(&self, name: &str, text: &str) -> Option<PathBuf> {
        private_dir(&self.artifact_dir).ok()?;
        let path = self.artifact_dir.join(name);
        std::fs::write(&path, text).ok()?;
        Some(path)
    }
}

/// `<data>/sessions/<id>-<hash>`: the hash (of the key, 8 hex digits) tells at a glance which
/// folders belong to the same conversation across resets.
pub fn folder_for(data_dir: &Path, id: &SessionId, key: &SessionKey) -> PathBuf {
    let hash = fnv1a(key.as_str()) as u32;
    data_dir
        .join("sessions")
        .join(format!("{}-{hash:08x}", id.as_str()))
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
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
    fn a_new_artifact_never_writes_over_one_of_the_same_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = dirs(tmp.path());
        let first = dirs.save_new_artifact("call-1-content", "first").unwrap();
        let second = dirs.save_new_artifact("call-1-content", "second").unwrap();
        assert_eq!(first, dirs.artifact_dir.join("call-1-content.txt"));
        assert_eq!(second, dirs.artifact_dir.join("call-1-content-2.txt"));
        assert_eq!(std::fs::read_to_string(first).unwrap(), "first");
        assert_eq!(std::fs::read_to_string(second).unwrap(), "second");
    }

    #[test]
    fn a_new_session_folder_is_named_by_id_and_key_hash() {
        let id = SessionId::from_string("0190abcd");
        let key = SessionKey::from_string("slack:T1/C2/1700000000.1");
        let dirs = SessionDirs::new(Path::new("/data"), &id, &key);
        let name = dirs.session_dir.file_name().unwrap().to_str().unwrap();
        assert_eq!(name, format!("0190abcd-{:08x}", fnv1a(key.as_str()) as u32));
        assert_eq!(dirs.session_dir.parent(), Some(Path::new("/data/sessions")));
        for (dir, leaf) in [
            (&dirs.workspace_dir, "workspace"),
            (&dirs.attachment_dir, "attachment-staging"),
            (&dirs.artifact_dir, "artifacts"),
            (&dirs.worktree_dir, "worktrees"),
            (&dirs.subagents_dir, "subagents"),
            (&dirs.log_dir, "logs"),
        ] {
            assert_eq!(dir, &dirs.session_dir.join(leaf));
        }
        assert_eq!(dirs.log_path, dirs.session_dir.join("logs/session.log"));
        // The temp dir's name keeps the key readable but never as nested folders.
        assert!(dirs.temp_dir.ends_with("slack:T1_C2_1700000000.1/p"));
    }

    fn stored(dir: Option<&str>) -> SessionMeta {
        let id = SessionId::from_string("s9");
        let mut meta = SessionMeta::new(id.clone(), SessionKey::cli(&id), "/p".into(), 0);
        meta.session_dir = dir.map(PathBuf::from);
        meta
    }

    #[test]
    fn stored_folders_are_found_and_re_rooted_when_the_data_dir_moved() {
        let data = Path::new("/new/data");
        let (dirs, moved) = SessionDirs::locate(data, &stored(Some("/new/data/sessions/s9-ab")));
        assert_eq!(dirs.session_dir, data.join("sessions/s9-ab"));
        assert_eq!(moved, None);

        let (dirs, moved) =
            SessionDirs::locate(data, &stored(Some("/old/home/data/sessions/s9-ab")));
        assert_eq!(dirs.session_dir, data.join("sessions/s9-ab"));
        assert_eq!(
            moved,
            Some(Rerooted {
                from: "/old/home/data/sessions/s9-ab".into(),
                to: data.join("sessions/s9-ab"),
            })
        );

        // Entries from before folders were recorded.
        let (dirs, moved) = SessionDirs::locate(data, &stored(None));
        assert_eq!(dirs.session_dir, data.join("sessions/s9"));
        assert_eq!(moved, None);
    }

    #[test]
    fn folders_are_made_when_needed_private_to_the_user() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = dirs(tmp.path());
        assert!(!dirs.session_dir.exists(), "nothing is made up front");
        let workspace = dirs.ensure(&dirs.workspace_dir).unwrap();
        assert!(workspace.is_dir());
        let mode = std::fs::metadata(workspace).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let run = dirs.subagent("run-1").unwrap();
        assert_eq!(run.dir, dirs.subagents_dir.join("run-1"));
        assert!(run.artifact_dir.is_dir() && run.log_dir.is_dir());
        assert_eq!(run.task_path, run.dir.join("task.md"));
        assert_eq!(run.result_path, run.dir.join("result.md"));
        // A run id cannot climb out of subagents/.
        let odd = dirs.subagent("../x").unwrap();
        assert!(odd.dir.starts_with(&dirs.subagents_dir));
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
