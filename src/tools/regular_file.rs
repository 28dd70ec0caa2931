//! Opening and replacing regular files safely: what `file_read`, `file_write` and `file_edit`
//! do to the files they touch.
//!
//! Opening never blocks. A named pipe opened for reading waits for a writer, and a device can
//! wait for anything, so files are opened with `O_NONBLOCK` and the opened handle is checked to
//! be a regular file before anything is read from it.
//!
//! Replacing never truncates. The new content goes to a temporary file next to the target,
//! which is flushed to disk, given the old file's permissions (and, where allowed, its owner
//! and group), and only then renamed over the target. A full disk, a crash or a cancel leaves
//! the old content whole. The price: the target's directory must be writable, and the file
//! becomes a new inode, so hard links to it keep the old content and extended attributes are
//! not carried over. Symlinks are resolved first, so a symlink keeps pointing at the file it
//! named, which is the one updated.

use super::paths;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Content is written, and read back, in pieces of this size, checking for cancel in between.
const CHUNK_BYTES: usize = 1024 * 1024;

/// Why a path could not be opened or replaced as a regular file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    #[error("it does not exist")]
    NotFound,
    #[error("it is a directory")]
    Directory,
    /// Something else that is not a regular file; the payload names what, with its article
    /// ("a named pipe").
    #[error("it is {0}, not a regular file")]
    NotRegular(&'static str),
    #[error("its symlinks lead in a loop, or one of them cannot be read")]
    LinkLoop,
    #[error("cancelled")]
    Cancelled,
    /// An IO error, with what was being done.
    #[error("{0}: {1}")]
    Io(&'static str, io::Error),
}

/// What a file type is, for a message; `None` for a regular file.
fn kind_name(meta: &Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a named pipe")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// The error for metadata that is not a regular file's.
fn refuse(meta: &Metadata) -> Option<FileError> {
    match kind_name(meta) {
        None => None,
        Some(_) if meta.is_dir() => Some(FileError::Directory),
        Some(kind) => Some(FileError::NotRegular(kind)),
    }
}

/// Opens `path` for reading if it is a regular file, without ever blocking on a pipe or a
/// device. Returns the file and its metadata, taken from the opened handle.
pub(crate) fn open_for_reading(path: &Path) -> Result<(File, Metadata), FileError> {
    // Looking first keeps devices and sockets from being opened at all (opening a socket fails
    // with an unhelpful "No such device or address"); the check on the handle below is the one
    // that holds if the path changes in between.
    match fs::metadata(path) {
        Ok(meta) => {
            if let Some(err) = refuse(&meta) {
                return Err(err);
            }
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(FileError::NotFound),
        Err(err) => return Err(FileError::Io("cannot open it", err)),
    }
    // O_NONBLOCK makes opening a named pipe return at once; on a regular file it changes
    // nothing, so it can stay set for the reads.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| match err.kind() {
            io::ErrorKind::NotFound => FileError::NotFound,
            _ => FileError::Io("cannot open it", err),
        })?;
    let meta = file
        .metadata()
        .map_err(|err| FileError::Io("cannot inspect it", err))?;
    match refuse(&meta) {
        Some(err) => Err(err),
        None => Ok((file, meta)),
    }
}

/// Reads all of a file opened by [`open_for_reading`], stopping early on cancel.
pub(crate) fn read_all(
    file: &mut File,
    size_hint: u64,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, FileError> {
    let mut bytes = Vec::with_capacity(usize::try_from(size_hint).unwrap_or(0));
    loop {
        if cancel.is_cancelled() {
            return Err(FileError::Cancelled);
        }
        match (&mut *file)
            .take(CHUNK_BYTES as u64)
            .read_to_end(&mut bytes)
        {
            Ok(0) => return Ok(bytes),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(FileError::Io("cannot read it", err)),
        }
    }
}

/// What [`replace`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replaced {
    /// No file was there before.
    pub created: bool,
}

/// Gives the file `path` leads to the content `content`, atomically: readers see the old
/// content or the new, never a part. Missing parent directories are created. Stops before the
/// target is touched once `cancel` fires. On any error the target is as it was.
pub(crate) fn replace(
    path: &Path,
    content: &[u8],
    cancel: &CancellationToken,
) -> Result<Replaced, FileError> {
    // The same resolution the approval was judged on.
    let target = paths::real_path(path).ok_or(FileError::LinkLoop)?;
    let old = match fs::metadata(&target) {
        Ok(meta) => {
            if let Some(err) = refuse(&meta) {
                return Err(err);
            }
            Some(meta)
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(FileError::Io("cannot inspect it", err)),
    };
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(FileError::Directory);
    };
    fs::create_dir_all(dir).map_err(|err| FileError::Io("cannot create its directory", err))?;
    if cancel.is_cancelled() {
        return Err(FileError::Cancelled);
    }
    let (temp_path, file) = create_temp(dir, name, old.is_some())?;
    let written = fill_temp(file, old.as_ref(), content, cancel).and_then(|()| {
        // The last moment to stop: past the rename the new content is in place.
        if cancel.is_cancelled() {
            return Err(FileError::Cancelled);
        }
        fs::rename(&temp_path, &target)
            .map_err(|err| FileError::Io("cannot move the new content into place", err))
    });
    if let Err(err) = written {
        let _ = fs::remove_file(&temp_path);
        return Err(err);
    }
    // Makes the rename itself durable. The new content is already in place, so a failure here
    // is not worth reporting as a failed write.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(Replaced {
        created: old.is_none(),
    })
}

/// Creates a new, empty temporary file in `dir` for replacing `name`. A replacement starts
/// private (mode 0600) until it gets the old file's permissions; a new file gets the usual
/// 0666 less the umask, as any other program creating it would.
fn create_temp(
    dir: &Path,
    name: &std::ffi::OsStr,
    replacing: bool,
) -> Result<(PathBuf, File), FileError> {
    // Named after the target, so a leftover after a crash says where it came from; shortened so
    // the name stays within the 255-byte limit.
    let stem: String = name.to_string_lossy().chars().take(64).collect();
    let mode = if replacing { 0o600 } else { 0o666 };
    let mut last_err = None;
    for _ in 0..8 {
        let temp_path = dir.join(format!(".{stem}.{:016x}.tern-tmp", fastrand::u64(..)));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp_path)
        {
            Ok(file) => return Ok((temp_path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = Some(err),
            Err(err) => {
                return Err(FileError::Io(
                    "cannot create a temporary file in its directory",
                    err,
                ));
            }
        }
    }
    Err(FileError::Io(
        "cannot create a temporary file in its directory",
        last_err.unwrap_or_else(|| io::Error::other("every name tried was taken")),
    ))
}

/// Gives the temporary file the old file's owner, group and permissions, writes `content` and
/// flushes it to disk.
fn fill_temp(
    mut file: File,
    old: Option<&Metadata>,
    content: &[u8],
    cancel: &CancellationToken,
) -> Result<(), FileError> {
    if let Some(old) = old {
        // Only root may give a file away, and only a member may set a group: keeping what is
        // allowed is the best that can be done, and the rest is not an error. Owner first,
        // since changing it clears the set-id bits the permissions then restore.
        let _ = std::os::unix::fs::fchown(&file, Some(old.uid()), Some(old.gid()));
        file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
            .map_err(|err| FileError::Io("cannot give the new file the old permissions", err))?;
    }
    for chunk in content.chunks(CHUNK_BYTES) {
        if cancel.is_cancelled() {
            return Err(FileError::Cancelled);
        }
        file.write_all(chunk)
            .map_err(|err| FileError::Io("cannot write the new content", err))?;
    }
    file.sync_all()
        .map_err(|err| FileError::Io("cannot flush the new content to disk", err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_keeps_a_symlink_pointing_at_the_updated_file() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link");
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink("real.txt", &link).unwrap();
        let done = replace(&link, b"new", &CancellationToken::new()).unwrap();
        assert_eq!(done, Replaced { created: false });
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn replace_stops_before_touching_anything_once_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "old").unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        assert!(matches!(
            replace(&target, b"new", &cancel),
            Err(FileError::Cancelled)
        ));
        assert_eq!(fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
