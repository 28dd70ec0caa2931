//! The fresh half of a turn's context: the time, the shell commands run in, and the working
//! context (project and working directories, recently touched files, git). Gathered anew for
//! every turn; only the project directory and the recent files are part of the session's
//! state, the rest is read from the machine.

use super::git::{GitContext, working_git};
use crate::tools::path_text;
use crate::tools::shell_execute::shell_program;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The moment a turn starts, in UTC and in the user's time zone.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentTime {
    pub local: jiff::ZonedDateTime,
}

impl CurrentTime {
    /// Now, in the system's time zone (`TZ`, else `/etc/localtime`, else UTC).
    pub fn now() -> Self {
        Self {
            local: jiff::ZonedDateTime::now(),
        }
    }

    /// A fixed moment in a fixed zone, for reproducible prompts.
    pub fn at(timestamp: jiff::Timestamp, zone: jiff::tz::TimeZone) -> Self {
        Self {
            local: timestamp.to_zoned_datetime(zone),
        }
    }
}

/// The shell commands run in, as the model needs to know it to write them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInfo {
    /// Operating system and architecture, like `linux x86_64`.
    pub platform: String,
    /// The shell's path, or its name when `PATH` does not hold it.
    pub executable: PathBuf,
    /// The command language: `bash` or `sh`.
    pub grammar: String,
}

impl ShellInfo {
    /// The shell `shell_execute` runs commands in, on this machine.
    pub fn detect() -> Self {
        let (name, path) = shell_program();
        Self {
            platform: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            executable: path.unwrap_or_else(|| PathBuf::from(name)),
            grammar: name.to_owned(),
        }
    }
}

/// Where the session works and what it touched, as of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingContext {
    /// Given only to the machine's owner (the Personal audience).
    pub shell: Option<ShellInfo>,
    pub project_dir: PathBuf,
    /// Where relative paths and commands start; mentioned when it is not the project dir.
    pub cwd: PathBuf,
    /// Most recent first, at most ten.
    pub recent_files: Vec<PathBuf>,
    pub git: GitContext,
}

/// The durable part of the working context, from the session's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableContext {
    pub project_dir: PathBuf,
    pub cwd: PathBuf,
    pub recent_files: Vec<PathBuf>,
}

impl WorkingContext {
    /// Reads git for `durable.cwd` within `budget` and puts the working context together.
    /// Never fails: git that cannot be read within the budget becomes a one-line reason.
    pub async fn gather(durable: DurableContext, with_shell: bool, budget: Duration) -> Self {
        let git = working_git(&durable.cwd, budget).await;
        Self::with_git(durable, with_shell.then(ShellInfo::detect), git)
    }

    /// The working context with git already read.
    pub fn with_git(durable: DurableContext, shell: Option<ShellInfo>, git: GitContext) -> Self {
        Self {
            shell,
            project_dir: durable.project_dir,
            cwd: durable.cwd,
            recent_files: durable.recent_files,
            git,
        }
    }

    /// `path` relative to the project directory when it is inside it, as given otherwise;
    /// written as the tools write paths, so the model can pass it to them.
    pub fn display_path<'a>(&self, path: &'a Path) -> std::borrow::Cow<'a, str> {
        match path.strip_prefix(&self.project_dir) {
            Ok(relative) if !relative.as_os_str().is_empty() => path_text::encode(relative),
            _ => path_text::encode(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_the_project_are_shown_relative() {
        let context = WorkingContext::with_git(
            DurableContext {
                project_dir: "/p".into(),
                cwd: "/p".into(),
                recent_files: vec![],
            },
            None,
            GitContext::Unavailable { reason: "x".into() },
        );
        assert_eq!(context.display_path(Path::new("/p/src/a.rs")), "src/a.rs");
        assert_eq!(context.display_path(Path::new("/etc/hosts")), "/etc/hosts");
        assert_eq!(context.display_path(Path::new("/p")), "/p");
    }

    #[test]
    fn the_shell_is_the_one_commands_run_in() {
        let shell = ShellInfo::detect();
        assert!(["bash", "sh"].contains(&shell.grammar.as_str()));
        assert!(shell.platform.starts_with(std::env::consts::OS));
    }
}
