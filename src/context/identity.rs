//! The user's identity files in the config directory's `identity/` folder: `SOUL.md` (the
//! persona, replacing the default), `AGENTS.md` (a playbook added to the embedded operating
//! rules) and `TOOLING.md` (notes on the user's tools and environment). Each is optional and
//! capped like project instructions.

use super::capped::{PromptFile, read_prompt_file};
use std::path::{Path, PathBuf};

/// The folder inside the config directory that holds the identity files.
pub const IDENTITY_DIR: &str = "identity";

/// The identity files found, each `None` when missing, empty or unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityFiles {
    pub soul: Option<PromptFile>,
    pub playbook: Option<PromptFile>,
    pub tooling: Option<PromptFile>,
}

impl IdentityFiles {
    /// Reads the identity files from `dir` (`<config>/identity`). Never fails: whatever cannot
    /// be read is left out, and the embedded defaults stand.
    pub fn load(dir: &Path) -> Self {
        let read = |name: &str| {
            let shown = PathBuf::from(IDENTITY_DIR).join(name);
            read_prompt_file(&dir.join(name), &shown)
        };
        Self {
            soul: read("SOUL.md"),
            playbook: read("AGENTS.md"),
            tooling: read("TOOLING.md"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_read_when_present() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(IdentityFiles::load(dir.path()), IdentityFiles::default());
        std::fs::write(dir.path().join("SOUL.md"), "You are Ada.").unwrap();
        std::fs::write(dir.path().join("TOOLING.md"), "Use just.").unwrap();
        let found = IdentityFiles::load(dir.path());
        assert_eq!(found.soul.unwrap().text, "You are Ada.");
        assert_eq!(found.playbook, None);
        let tooling = found.tooling.unwrap();
        assert_eq!(tooling.file, Path::new("identity/TOOLING.md"));
    }
}
