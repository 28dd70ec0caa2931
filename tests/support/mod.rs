//! Shared test support: the mock provider and helpers to run tern in isolation.
//!
//! Everything here goes through tern's public interface (HTTP, files, the binary), never its
//! internals, so that a test written with it keeps meaning the same thing across refactors.
#![allow(dead_code)]

pub mod mock_provider;
pub mod real_mcp;

// Not every test module uses every name, and an unused re-export must not fail the build.
#[allow(unused_imports)]
pub use mock_provider::{
    DEFAULT_MODEL, Identity, KeepAlive, MockProvider, RecordedRequest, Reply, Stop,
};

use std::path::{Path, PathBuf};
use std::process::Command;

/// An isolated tern installation: a temp dir holding `tern/` (used as `TERN_HOME`) and
/// `project/`, a fresh git repository to run tern in. Both go away on drop.
///
/// The project sits beside TERN_HOME rather than inside it, so tern's own files can never
/// show up in the project's git status and the project is never mistaken for tern data.
pub struct TernHome {
    root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
}

impl TernHome {
    /// Makes the directories and runs `git init` in the project (branch `main`, a local
    /// identity, no commits yet).
    pub fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("tern-test-")
            .tempdir()
            .expect("creating a temp dir for the test");
        let home = root.path().join("tern");
        let project = root.path().join("project");
        std::fs::create_dir_all(&home).expect("creating TERN_HOME in the temp dir");
        std::fs::create_dir_all(&project).expect("creating the project dir in the temp dir");
        let home = Self {
            root,
            home,
            project,
        };
        home.git(&["init", "--quiet", "--initial-branch=main"]);
        home.git(&["config", "user.name", "Tern Test"]);
        home.git(&["config", "user.email", "test@tern.invalid"]);
        home.git(&["config", "commit.gpgsign", "false"]);
        home
    }

    /// The directory tern gets as `TERN_HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The git repository tern runs in.
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// The temp dir holding both.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn config_path(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    /// Writes `TERN_HOME/config.toml`.
    pub fn write_config(&self, toml: &str) {
        std::fs::write(self.config_path(), toml).expect("writing config.toml in TERN_HOME");
    }

    /// Writes a file inside the project, creating its parent directories.
    pub fn write_file(&self, relative: &str, contents: &str) -> PathBuf {
        let path = self.project.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("creating parent dirs in the project");
        }
        std::fs::write(&path, contents).expect("writing a file in the project");
        path
    }

    /// Reads a file inside the project.
    pub fn read_file(&self, relative: &str) -> String {
        std::fs::read_to_string(self.project.join(relative))
            .unwrap_or_else(|e| panic!("reading {relative} in the project: {e}"))
    }

    /// Runs git in the project, isolated from the user's git config, and returns stdout;
    /// panics with git's stderr when it fails.
    pub fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(&self.project)
            .env_clear()
            .envs(passthrough_env())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            // Fixed dates keep commit ids identical from one run to the next.
            .env("GIT_AUTHOR_DATE", "2025-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2025-01-01T00:00:00Z")
            .output()
            .expect("running git (is it on PATH?)");
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Stages everything and commits it.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "--all"]);
        self.git(&["commit", "--quiet", "--allow-empty", "-m", message]);
    }

    /// The real `tern` binary, ready to run in this home (see [`tern_command`]).
    pub fn tern(&self) -> assert_cmd::Command {
        tern_command(self)
    }

    /// The same as a plain `std::process::Command`, for spawning and streaming output.
    pub fn tern_process(&self) -> Command {
        tern_std_command(self)
    }
}

impl Default for TernHome {
    fn default() -> Self {
        Self::new()
    }
}

/// PATH and HOME, the only variables a test process inherits.
fn passthrough_env() -> Vec<(&'static str, std::ffi::OsString)> {
    ["PATH", "HOME"]
        .into_iter()
        .filter_map(|name| std::env::var_os(name).map(|value| (name, value)))
        .collect()
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The path of the `tern` binary cargo built for this test run.
pub fn tern_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_tern"))
}

/// The real `tern` binary with a clean environment: only PATH and HOME inherited,
/// `TERN_HOME` set to the home, and the project as the working directory. Provider keys and
/// other settings must be added by the test, so nothing from the developer's shell leaks in.
pub fn tern_command(home: &TernHome) -> assert_cmd::Command {
    assert_cmd::Command::from_std(tern_std_command(home))
}

/// [`tern_command`] as a `std::process::Command`.
pub fn tern_std_command(home: &TernHome) -> Command {
    let mut command = Command::new(tern_binary());
    command
        .env_clear()
        .envs(passthrough_env())
        .env("TERN_HOME", home.home())
        .current_dir(home.project());
    command
}

/// A context for calling a built-in tool directly: `project` as the project and working
/// folder, temporary files under `temp_dir`, no other folders readable, a 20 s timeout, the
/// child environment as the tools make it, and no spool, subagents, jobs or repository maps.
pub fn tool_context(project: PathBuf, temp_dir: PathBuf) -> tern::tools::ToolContext {
    tern::tools::ToolContext {
        project_dir: project.clone(),
        cwd: project,
        temp_dir,
        readable_dirs: Vec::new(),
        tool_timeout: std::time::Duration::from_secs(20),
        child_env: Default::default(),
        spool: None,
        agents: None,
        jobs: None,
        repo_maps: None,
    }
}
