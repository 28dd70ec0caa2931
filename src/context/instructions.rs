//! The project's own instructions for the assistant: the first of `.tern/AGENTS.md`,
//! `CLAUDE.md`, `AGENTS.md` and `CONTEXT.md` in the project directory, as teams already write
//! them for other tools. Capped, with a note when cut, so a huge file cannot crowd out the
//! conversation.

use super::capped::{PromptFile, read_prompt_file};
use std::path::Path;

/// Where instructions are looked for, in order; the first that exists wins.
pub const INSTRUCTION_FILES: [&str; 4] =
    [".tern/AGENTS.md", "CLAUDE.md", "AGENTS.md", "CONTEXT.md"];

/// A project instruction file as it goes into the prompt; `file` is relative to the project
/// directory.
pub type ProjectInstructions = PromptFile;

/// Reads the project's instruction file, if there is one. An unreadable or empty file is
/// skipped (and logged) in favour of the next.
pub fn project_instructions(project_dir: &Path) -> Option<ProjectInstructions> {
    INSTRUCTION_FILES
        .iter()
        .find_map(|name| read_prompt_file(&project_dir.join(name), Path::new(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
}
