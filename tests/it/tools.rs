//! The built-in tools against real files in a temp dir, real git repositories (where
//! `.gitignore` matters) and real child processes: what the model sees, what lands on disk,
//! which approval each call needs, and that limits (size, time, cancel) hold.

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use tern::domain::Audience;
use tern::tools::{
    ApprovalMode, ApprovalNeed, Decision, ToolContext, ToolOutput, ToolRegistry, decide,
};
use tokio_util::sync::CancellationToken;

mod boundary;
mod code;
mod files;
mod names;
mod search;
mod shell;

/// A project directory (and, beside it, an outside directory and a temp dir) for one test.
struct Project {
    _root: tempfile::TempDir,
    dir: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
}

impl Project {
    fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("tern-tools-")
            .tempdir()
            .expect("temp dir");
        // Canonical, so paths the tools canonicalise compare equal.
        let base = root.path().canonicalize().expect("canonical temp dir");
        let dir = base.join("project");
        let outside = base.join("outside");
        std::fs::create_dir_all(&dir).expect("project dir");
        std::fs::create_dir_all(&outside).expect("outside dir");
        let ctx = crate::support::tool_context(dir.clone(), base.join("tmp").join("p"));
        Self {
            _root: root,
            dir,
            outside,
            ctx,
        }
    }

    /// A project that is a git repository, so `.gitignore` applies.
    fn git() -> Self {
        let project = Self::new();
        let status = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&project.dir)
            .status()
            .expect("running git init");
        assert!(status.success());
        project
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("parent dirs");
        std::fs::write(&path, content).expect("writing a test file");
        path
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.join(rel)).expect("reading a test file")
    }

    async fn call(&self, tool: &str, input: Value) -> ToolOutput {
        call_with(tool, input, &self.ctx, CancellationToken::new()).await
    }

    fn need(&self, tool: &str, input: Value) -> ApprovalNeed {
        registry_tool(tool, |t| t.approval_need(&input, &self.ctx))
    }
}

fn registry_tool<R>(name: &str, f: impl FnOnce(&dyn tern::tools::Tool) -> R) -> R {
    let registry = ToolRegistry::builtin();
    let tool = registry.get(name).expect("a built-in tool");
    f(tool)
}

async fn call_with(
    tool: &str,
    input: Value,
    ctx: &ToolContext,
    cancel: CancellationToken,
) -> ToolOutput {
    let registry = ToolRegistry::builtin();
    let tool = registry.get(tool).expect("a built-in tool");
    tool.execute(input, ctx, cancel).await
}

/// Set in a child process started by [`run_in_child`].
const CHILD_ENV: &str = "TERN_TOOLS_TEST_CHILD";
/// Marks the start and end of what a child reports, in its output.
const CHILD_MARK: &str = "<<<child>>>";

/// Runs the ignored test `tools::{name}` of this binary in a child process, after the shell
/// snippet `setup` and with `env` added, for settings a test cannot make in its own process
/// without disturbing the tests running beside it (its environment, resource limits). Returns
/// what the child passed to [`child_report`].
fn run_in_child(name: &str, setup: &str, env: &[(&str, &OsStr)]) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}\nexec \"$0\" \"$@\""))
        .arg(exe)
        .args(["--exact", &format!("tools::{name}"), "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .expect("running the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = stdout
        .split(CHILD_MARK)
        .nth(1)
        .unwrap_or_else(|| panic!("no report from the child: {stdout}"));
    report.to_string()
}

/// True in a child started by [`run_in_child`]; a child-only test does nothing elsewhere.
fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Hands `text` to the parent of a child started by [`run_in_child`].
fn child_report(text: &str) {
    println!("{CHILD_MARK}{text}{CHILD_MARK}");
}

/// The call succeeded and returned exactly `expected`.
fn check(output: &ToolOutput, expected: &str) {
    assert!(!output.is_error, "unexpected error: {}", output.content);
    assert_eq!(output.content, expected);
}

/// The call failed and its message contains every one of `needles`.
fn check_error(output: &ToolOutput, needles: &[&str]) {
    assert!(
        output.is_error,
        "expected an error, got: {}",
        output.content
    );
    for needle in needles {
        assert!(
            output.content.contains(needle),
            "{needle:?} missing from: {}",
            output.content
        );
    }
}

// ---- approval policy -------------------------------------------------------------------

#[test]
fn approval_modes_decide_as_documented() {
    let outside = ApprovalNeed::OutsideProject(PathBuf::from("/etc/hosts"));
    let check = |mode: ApprovalMode, need: &ApprovalNeed, allowed: bool, mention: &str| match decide(
        mode, need,
    ) {
        Decision::Allow => assert!(allowed, "{mode} must refuse {need:?}"),
        Decision::Refuse(reason) => {
            assert!(!allowed, "{mode} must allow {need:?}: {reason}");
            assert!(
                reason.contains(mention),
                "{mention:?} missing from: {reason}"
            );
            assert!(reason.contains(&format!("--approve {mode}")), "{reason}");
        }
        Decision::Ask => panic!("{mode} decides {need:?} without asking"),
    };
    check(ApprovalMode::Never, &ApprovalNeed::None, true, "");
    check(
        ApprovalMode::Never,
        &ApprovalNeed::Edit,
        false,
        "changes files",
    );
    check(
        ApprovalMode::Never,
        &ApprovalNeed::Exec,
        false,
        "running a command",
    );
    check(ApprovalMode::Never, &outside, false, "/etc/hosts");
    check(ApprovalMode::Edits, &ApprovalNeed::None, true, "");
    check(ApprovalMode::Edits, &ApprovalNeed::Edit, true, "");
    check(
        ApprovalMode::Edits,
        &ApprovalNeed::Exec,
        false,
        "--approve all",
    );
    check(ApprovalMode::Edits, &outside, false, "outside the project");
    for need in [
        ApprovalNeed::None,
        ApprovalNeed::Edit,
        ApprovalNeed::Exec,
        outside.clone(),
    ] {
        check(ApprovalMode::All, &need, true, "");
    }
    // Asking leaves reads inside the project free and puts everything else to a person.
    check(ApprovalMode::Ask, &ApprovalNeed::None, true, "");
    for need in [ApprovalNeed::Edit, ApprovalNeed::Exec, outside] {
        assert_eq!(decide(ApprovalMode::Ask, &need), Decision::Ask, "{need:?}");
    }
}

// ---- registry --------------------------------------------------------------------------

#[test]
fn registry_lists_builtins_in_order_and_filters_by_audience() {
    let registry = ToolRegistry::builtin();
    let names = [
        "check_agent_run",
        "file_edit",
        "file_read",
        "file_write",
        "glob",
        "grep",
        "job_kill",
        "job_output",
        "repo_map",
        "set_working_directory",
        "shell_execute",
        "spawn_agent",
        "symbols",
    ];
    assert_eq!(registry.names(), names);
    assert!(
        registry.visible(Audience::Public).is_empty(),
        "nothing touches the host for Public"
    );
    let team: Vec<&str> = registry
        .visible(Audience::Team)
        .iter()
        .map(|t| t.name())
        .collect();
    assert_eq!(team, names);
    assert_eq!(registry.visible(Audience::Personal).len(), names.len());
    assert!(registry.get("file_read").is_some());
    assert!(registry.get("cat").is_none());

    let read_only: Vec<&str> = names
        .iter()
        .copied()
        .filter(|&n| registry.get(n).is_some_and(|t| t.is_read_only()))
        .collect();
    assert_eq!(
        read_only,
        [
            "file_read",
            "glob",
            "grep",
            "job_output",
            "repo_map",
            "symbols"
        ]
    );
}

#[test]
fn every_schema_is_an_object_whose_required_fields_exist() {
    let registry = ToolRegistry::builtin();
    for tool in registry.visible(Audience::Personal) {
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{}", tool.name());
        let properties = schema["properties"].as_object().expect("properties");
        for required in schema["required"].as_array().expect("required") {
            let key = required.as_str().expect("a name");
            assert!(properties.contains_key(key), "{}: {key}", tool.name());
        }
        assert!(tool.description().len() > 80, "{}", tool.name());
    }
}
