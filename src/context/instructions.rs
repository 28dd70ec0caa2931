//! The project's own instructions for the assistant: the first of `.tern/AGENTS.md`,
//! `CLAUDE.md`, `AGENTS.md` and `CONTEXT.md` in the project directory, as teams already write
//! them for other tools. Capped, with a note when cut, so a huge file cannot crowd out the
//! conversation.

use std::path::{Path, PathBuf};

/// Where instructions are looked for, in order; the first that exists wins.
pub const INSTRUCTION_FILES: [&str; 4] =
    [".tern/AGENTS.md", "CLAUDE.md", "AGENTS.md", "CONTEXT.md"];

/// The most of an instruction file that goes into the prompt.
pub const MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

/// A project instruction file as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectInstructions {
    /// The file, relative to the project directory.
    pub file: PathBuf,
    pub text: String,
    /// The file's size when it was cut to [`MAX_INSTRUCTION_BYTES`].
    pub cut_from: Option<usize>,
}

/// Reads the project's instruction file, if there is one. An unreadable or empty file is
/// skipped (and logged) rather than failing the session.
pub fn project_instructions(project_dir: &Path) -> Option<ProjectInstructions> {
    for name in INSTRUCTION_FILES {
        let path = project_dir.join(name);
        if !path.is_file() {
            continue;
        }
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) => {
                tracing::warn!(%err, file = %path.display(), "instruction file unreadable");
                continue;
            }
        };
        let size = bytes.len();
        let kept = &bytes[..size.min(MAX_INSTRUCTION_BYTES)];
        let mut text = String::from_utf8_lossy(kept).into_owned();
        // A cut may split a character; the lossy decoding marks it, drop the mark.
        if size > MAX_INSTRUCTION_BYTES {
            text = text.trim_end_matches('\u{fffd}').to_owned();
        }
        if text.trim().is_empty() {
            continue;
        }
        return Some(ProjectInstructions {
            file: PathBuf::from(name),
            text,
            cut_from: (size > MAX_INSTRUCTION_BYTES).then_some(size),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn the_first_file_in_order_wins() {
        let dir = project(&[
            ("AGENTS.md", "agents"),
            ("CLAUDE.md", "claude"),
            ("CONTEXT.md", "c"),
        ]);
        let found = project_instructions(dir.path()).unwrap();
        assert_eq!(found.file, PathBuf::from("CLAUDE.md"));
        assert_eq!(found.text, "claude");
        let dir = project(&[(".tern/AGENTS.md", "ours"), ("CLAUDE.md", "claude")]);
        assert_eq!(project_instructions(dir.path()).unwrap().text, "ours");
    }

    #[test]
    fn empty_files_are_skipped_and_none_is_none() {
        let dir = project(&[("CLAUDE.md", "  \n"), ("CONTEXT.md", "context")]);
        assert_eq!(project_instructions(dir.path()).unwrap().text, "context");
        assert_eq!(project_instructions(project(&[]).path()), None);
    }

    #[test]
    fn a_large_file_is_cut_and_says_so() {
        let dir = project(&[("AGENTS.md", &"é".repeat(MAX_INSTRUCTION_BYTES))]);
        let found = project_instructions(dir.path()).unwrap();
        assert!(found.text.len() <= MAX_INSTRUCTION_BYTES);
        assert!(!found.text.contains('\u{fffd}'));
        assert_eq!(found.cut_from, Some(2 * MAX_INSTRUCTION_BYTES));
    }
}
