//! Reading a text file that goes into the prompt: capped, so one huge file cannot crowd out
//! the conversation, and never fatal, since a missing or unreadable file only means that
//! layer is left out.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of one instruction or identity file that goes into the prompt.
pub const MAX_PROMPT_FILE_BYTES: usize = 32 * 1024;

/// A file's text as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptFile {
    /// Where it was read from, as the prompt names it.
    pub file: PathBuf,
    pub text: String,
    /// The file's size in bytes when it was cut to [`MAX_PROMPT_FILE_BYTES`].
    pub cut_from: Option<usize>,
}

/// Reads `path` for the prompt, naming it `shown_as`. `None` when the file does not exist,
/// cannot be read (logged) or holds only whitespace.
pub fn read_prompt_file(path: &Path, shown_as: &Path) -> Option<PromptFile> {
    if !path.is_file() {
        return None;
    }
    // Only the part that can be shown is read, however large the file.
    let read = std::fs::File::open(path).and_then(|file| {
        let size = file.metadata()?.len();
        let mut kept = Vec::new();
        file.take(MAX_PROMPT_FILE_BYTES as u64)
            .read_to_end(&mut kept)?;
        Ok((size, kept))
    });
    let (size, kept) = match read {
        Ok(read) => read,
        Err(err) => {
            tracing::warn!(%err, file = %path.display(), "prompt file unreadable");
            return None;
        }
    };
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let cut = size > MAX_PROMPT_FILE_BYTES;
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    // A cut may split a character; the lossy decoding marks it, drop the mark.
    if cut {
        text = text.trim_end_matches('\u{fffd}').to_owned();
    }
    if text.trim().is_empty() {
        return None;
    }
    Some(PromptFile {
        file: shown_as.to_path_buf(),
        text,
        cut_from: cut.then_some(size),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_file_is_cut_on_a_character_boundary_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.md");
        std::fs::write(&path, "é".repeat(MAX_PROMPT_FILE_BYTES)).unwrap();
        let found = read_prompt_file(&path, Path::new("big.md")).unwrap();
        assert!(found.text.len() <= MAX_PROMPT_FILE_BYTES);
        assert!(!found.text.contains('\u{fffd}'));
        assert_eq!(found.cut_from, Some(2 * MAX_PROMPT_FILE_BYTES));
    }

    #[test]
    fn missing_blank_and_directory_paths_are_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blank.md"), " \n\t").unwrap();
        for name in ["missing.md", "blank.md", "."] {
            assert_eq!(
                read_prompt_file(&dir.path().join(name), Path::new(name)),
                None
            );
        }
    }
}
