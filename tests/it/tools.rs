//! The built-in tools against real files in a temp dir, real git repositories (where
//! `.gitignore` matters) and real child processes: what the model sees, what lands on disk,
//! which approval each call needs, and that limits (size, time, cancel) hold.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};
use tern::domain::Audience;
use tern::tools::{
    ApprovalMode, ApprovalNeed, Decision, ToolContext, ToolEffect, ToolOutput, ToolRegistry, decide,
};
use tokio_util::sync::CancellationToken;

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
        let ctx = ToolContext {
            project_dir: dir.clone(),
            cwd: dir.clone(),
            temp_dir: base.join("tmp").join("p"),
            tool_timeout: Duration::from_secs(20),
        };
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

fn numbered(range: std::ops::RangeInclusive<usize>, text: impl Fn(usize) -> String) -> String {
    range.map(|n| format!("{n:>6}\t{}\n", text(n))).collect()
}

// ---- file_read -------------------------------------------------------------------------

#[tokio::test]
async fn read_numbers_lines_like_cat_n_and_records_the_read() {
    let p = Project::new();
    let path = p.write("src/a.txt", "alpha\nbeta\n\ngamma");
    let out = p.call("file_read", json!({"path": "src/a.txt"})).await;
    check(
        &out,
        "     1\talpha\n     2\tbeta\n     3\t\n     4\tgamma\n",
    );
    assert_eq!(out.effects, vec![ToolEffect::Read(path)]);
}

#[tokio::test]
async fn read_shows_the_requested_range_and_how_to_continue() {
    let p = Project::new();
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    p.write("ten.txt", &text);
    let out = p
        .call(
            "file_read",
            json!({"path": "ten.txt", "offset": 3, "limit": 2}),
        )
        .await;
    assert!(!out.is_error);
    let expected = numbered(3..=4, |n| format!("line {n}"));
    assert!(out.content.starts_with(&expected), "{}", out.content);
    assert!(out.content.contains("use offset=5"), "{}", out.content);

    let out = p
        .call("file_read", json!({"path": "ten.txt", "offset": 9}))
        .await;
    check(&out, &numbered(9..=10, |n| format!("line {n}")));

    let out = p
        .call("file_read", json!({"path": "ten.txt", "offset": 11}))
        .await;
    check(
        &out,
        "[the file has only 10 lines; offset 11 is past the end]",
    );
}

#[tokio::test]
async fn read_reports_binary_files_without_showing_them() {
    let p = Project::new();
    p.write("blob.bin", b"ab\0cd");
    let out = p.call("file_read", json!({"path": "blob.bin"})).await;
    check(&out, "[binary file, 5 bytes, not shown]");
}

#[tokio::test]
async fn read_decodes_invalid_utf8_lossily_and_says_so() {
    let p = Project::new();
    p.write("latin1.txt", b"caf\xe9\r\nok\r\n");
    let out = p.call("file_read", json!({"path": "latin1.txt"})).await;
    assert!(!out.is_error);
    assert!(
        out.content.starts_with("     1\tcaf\u{FFFD}\n     2\tok\n"),
        "{}",
        out.content
    );
    assert!(out.content.contains("not valid UTF-8"), "{}", out.content);
    assert!(out.content.contains("CRLF"), "{}", out.content);
}

#[tokio::test]
async fn read_of_a_10_mb_file_streams_the_first_lines() {
    let p = Project::new();
    let line = "x".repeat(99);
    let text: String = (0..100_000).map(|n| format!("{n:08} {line}\n")).collect();
    assert!(text.len() > 10_000_000);
    p.write("big.log", &text);

    let started = Instant::now();
    let out = p
        .call("file_read", json!({"path": "big.log", "limit": 50}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        out.content
            .starts_with(&numbered(1..=50, |n| format!("{:08} {line}", n - 1)))
    );
    assert!(out.content.contains("use offset=51"), "{}", out.content);
    assert!(out.content.contains("MB in total"), "{}", out.content);

    // The default range is capped by size before 2000 lines of 109 bytes: the note says where
    // to go on.
    let out = p.call("file_read", json!({"path": "big.log"})).await;
    assert!(out.content.len() < 110 * 1024, "{}", out.content.len());
    assert!(
        out.content.contains("[output capped at 100.0 KB"),
        "{}",
        &out.content[..200]
    );

    let out = p
        .call("file_read", json!({"path": "big.log", "offset": 99_999}))
        .await;
    check(
        &out,
        &numbered(99_999..=100_000, |n| format!("{:08} {line}", n - 1)),
    );
}

#[tokio::test]
async fn read_cuts_long_lines() {
    let p = Project::new();
    p.write("min.js", format!("{}\nshort\n", "y".repeat(5000)));
    let out = p.call("file_read", json!({"path": "min.js"})).await;
    let first = out.content.lines().next().expect("a line");
    assert_eq!(
        first,
        format!(
            "     1\t{}… [line cut: 5,001 bytes in total]",
            "y".repeat(2000)
        )
    );
    assert!(out.content.contains("     2\tshort\n"));
    assert!(
        out.content
            .contains("1 long line(s) were cut at 2000 chars")
    );
}

#[tokio::test]
async fn read_of_a_missing_file_suggests_similar_names() {
    let p = Project::new();
    p.write("src/main.rs", "fn main() {}\n");
    let out = p.call("file_read", json!({"path": "src/mian.rs"})).await;
    check_error(
        &out,
        &["src/mian.rs does not exist", "Similar names", "main.rs"],
    );
    assert!(out.effects.is_empty());

    let out = p.call("file_read", json!({"path": "nowhere/x.rs"})).await;
    check_error(&out, &["does not exist either"]);
}

#[tokio::test]
async fn read_of_a_directory_points_to_glob() {
    let p = Project::new();
    p.write("src/a.rs", "");
    let out = p.call("file_read", json!({"path": "src"})).await;
    check_error(&out, &["src is a directory", "glob"]);
}

#[tokio::test]
async fn read_empty_file() {
    let p = Project::new();
    p.write("empty", "");
    check(
        &p.call("file_read", json!({"path": "empty"})).await,
        "[empty file]",
    );
}

#[tokio::test]
async fn bad_arguments_name_the_argument_and_type() {
    let p = Project::new();
    let out = p.call("file_read", json!({"file_path": "a"})).await;
    check_error(
        &out,
        &["missing required argument `path` (a string)", "file_path"],
    );
    let out = p.call("file_read", json!({"path": 5})).await;
    check_error(&out, &["`path` must be a string"]);
    let out = p
        .call("file_read", json!({"path": "a", "offset": "first"}))
        .await;
    check_error(&out, &["`offset` must be a whole number of at least 1"]);
    let out = p
        .call("grep", json!({"pattern": "x", "output_mode": "lines"}))
        .await;
    check_error(&out, &["`output_mode` must be one of"]);
}

#[tokio::test]
async fn no_tool_panics_on_garbage_arguments() {
    let p = Project::new();
    let garbage = [
        json!([1, 2]),
        json!("text"),
        json!({}),
        json!({"path": 5, "command": [], "pattern": {}, "content": 1, "old_string": null}),
    ];
    for name in ToolRegistry::builtin().names() {
        for input in &garbage {
            let out = p.call(name, input.clone()).await;
            assert!(out.is_error, "{name} {input}: {}", out.content);
            assert!(out.effects.is_empty(), "{name} {input}");
            // Deciding the approval must not panic either.
            let _ = p.need(name, input.clone());
        }
    }
}

// ---- file_write ------------------------------------------------------------------------

#[tokio::test]
async fn write_creates_parent_dirs_then_replaces() {
    let p = Project::new();
    let out = p
        .call(
            "file_write",
            json!({"path": "a/b/c.txt", "content": "one\ntwo\n"}),
        )
        .await;
    check(&out, "Created a/b/c.txt (8 bytes, 2 lines).");
    assert_eq!(
        out.effects,
        vec![ToolEffect::Wrote(p.dir.join("a/b/c.txt"))]
    );
    assert_eq!(p.read("a/b/c.txt"), "one\ntwo\n");

    let out = p
        .call("file_write", json!({"path": "a/b/c.txt", "content": "x"}))
        .await;
    check(&out, "Replaced a/b/c.txt (1 byte, 1 line).");
    assert_eq!(p.read("a/b/c.txt"), "x");

    let out = p
        .call("file_write", json!({"path": "a", "content": "x"}))
        .await;
    check_error(&out, &["Cannot write a", "directory"]);
}

// ---- file_edit -------------------------------------------------------------------------

const CODE: &str = "fn one() {\n    1\n}\n\nfn two() {\n    2\n}\n";

#[tokio::test]
async fn edit_replaces_exactly_once_and_returns_a_diff() {
    let p = Project::new();
    let path = p.write("lib.rs", CODE);
    let out = p
        .call(
            "file_edit",
            json!({"path": "lib.rs", "old_string": "    2\n", "new_string": "    22\n"}),
        )
        .await;
    check(
        &out,
        "Edited lib.rs: replaced 1 occurrence.\n\
         --- a/lib.rs\n+++ b/lib.rs\n@@ -3,5 +3,5 @@\n }\n \n fn two() {\n-    2\n+    22\n }\n",
    );
    assert_eq!(out.effects, vec![ToolEffect::Wrote(path)]);
    assert_eq!(p.read("lib.rs"), CODE.replace("    2\n", "    22\n"));
}

#[tokio::test]
async fn edit_refuses_zero_matches_with_a_hint() {
    let p = Project::new();
    p.write("lib.rs", CODE);
    let out = p
        .call(
            "file_edit",
            json!({"path": "lib.rs", "old_string": "fn one() {\n  1", "new_string": "x"}),
        )
        .await;
    check_error(&out, &["was not found in lib.rs", "whitespace is ignored"]);
    assert!(out.effects.is_empty());
    assert_eq!(p.read("lib.rs"), CODE);
}

#[tokio::test]
async fn edit_refuses_ambiguous_matches_unless_replace_all() {
    let p = Project::new();
    p.write("lib.rs", CODE);
    let input = json!({"path": "lib.rs", "old_string": "fn ", "new_string": "pub fn "});
    let out = p.call("file_edit", input.clone()).await;
    check_error(&out, &["occurs 2 times", "lines 1, 5", "replace_all"]);
    assert_eq!(p.read("lib.rs"), CODE);

    let mut all = input;
    all["replace_all"] = json!(true);
    let out = p.call("file_edit", all).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content
            .starts_with("Edited lib.rs: replaced 2 occurrences.\n--- a/lib.rs\n")
    );
    assert!(
        out.content.contains("-fn two() {\n+pub fn two() {\n"),
        "{}",
        out.content
    );
    assert_eq!(p.read("lib.rs"), CODE.replace("fn ", "pub fn "));
}

#[tokio::test]
async fn edit_refuses_no_op_and_missing_files() {
    let p = Project::new();
    p.write("lib.rs", CODE);
    let out = p
        .call(
            "file_edit",
            json!({"path": "lib.rs", "old_string": "1", "new_string": "1"}),
        )
        .await;
    check_error(&out, &["are the same"]);
    let out = p
        .call(
            "file_edit",
            json!({"path": "new.rs", "old_string": "a", "new_string": "b"}),
        )
        .await;
    check_error(&out, &["new.rs does not exist", "file_write"]);
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let p = Project::new();
    p.write("win.txt", "a\r\nb\r\nc\r\n");
    let out = p
        .call(
            "file_edit",
            json!({"path": "win.txt", "old_string": "a\nb", "new_string": "x\ny\nz"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(p.read("win.txt"), "x\r\ny\r\nz\r\nc\r\n");
}

// ---- shell_execute ---------------------------------------------------------------------

#[tokio::test]
async fn shell_reports_exit_codes_and_interleaved_output() {
    let p = Project::new();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "echo out; echo err >&2; exit 3"}),
        )
        .await;
    assert!(
        !out.is_error,
        "a failing command is a result, not a tool error"
    );
    assert!(
        out.content.starts_with("Exit code 3 after "),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\nout\nerr\n"), "{}", out.content);

    let out = p.call("shell_execute", json!({"command": "true"})).await;
    assert!(
        out.content.starts_with("Exit code 0 after "),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("\n(no output)\n"), "{}", out.content);

    let out = p
        .call("shell_execute", json!({"command": "kill -9 $$"}))
        .await;
    assert!(
        out.content.starts_with("Killed by signal 9 (SIGKILL)"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn shell_runs_in_cwd_with_tmpdir_and_no_stdin() {
    let p = Project::new();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "pwd; echo \"$TMPDIR\"; test -d \"$TMPDIR\" && echo made; cat; echo end"}),
        )
        .await;
    let expected = format!(
        "{}\n{}\nmade\nend\n",
        p.dir.display(),
        p.ctx.temp_dir.display()
    );
    assert!(out.content.ends_with(&expected), "{}", out.content);
}

#[tokio::test]
async fn shell_stops_a_silent_command_at_the_inactivity_limit() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let out = p
        .call("shell_execute", json!({"command": "echo begun; sleep 5"}))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["Timed out after 0.3 s without output", "begun"]);
}

#[tokio::test]
async fn shell_output_resets_the_inactivity_limit() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_secs(1);
    let out = p
        .call(
            "shell_execute",
            json!({"command": "for i in 1 2 3 4 5; do echo $i; sleep 0.3; done"}),
        )
        .await;
    assert!(out.content.starts_with("Exit code 0"), "{}", out.content);
    assert!(out.content.ends_with("1\n2\n3\n4\n5\n"), "{}", out.content);
}

#[tokio::test]
async fn shell_hard_limit_stops_a_chatty_command() {
    let p = Project::new();
    let started = Instant::now();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "while true; do echo tick; sleep 0.05; done", "timeout_secs": 1}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["timeout_secs limit of 1.0 s", "tick"]);
}

#[tokio::test]
async fn shell_kill_reaches_the_whole_process_group() {
    let mut p = Project::new();
    p.ctx.tool_timeout = Duration::from_millis(300);
    let pid_file = p.dir.join("child.pid");
    let command = format!("sleep 30 & echo $! > '{}'; wait", pid_file.display());
    let out = p.call("shell_execute", json!({"command": command})).await;
    check_error(&out, &["Timed out"]);
    let pid = std::fs::read_to_string(&pid_file).expect("the pid file");
    let stat = PathBuf::from(format!("/proc/{}/stat", pid.trim()));
    // Signals are delivered asynchronously; give the kernel a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let gone = match std::fs::read_to_string(&stat) {
            Err(_) => true,
            // A zombie is dead, waiting for whoever adopted it to reap it.
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        };
        if gone {
            break;
        }
        assert!(Instant::now() < deadline, "the background sleep survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn shell_caps_50_mb_of_output_in_bounded_time() {
    let p = Project::new();
    let started = Instant::now();
    let out = p
        .call(
            "shell_execute",
            json!({"command": "yes | head -c 50000000; echo; echo last line"}),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(!out.is_error, "{}", &out.content[..200]);
    assert!(out.content.len() < 40 * 1024, "{}", out.content.len());
    assert!(
        out.content.starts_with("Exit code 0 after "),
        "{}",
        &out.content[..100]
    );
    assert!(out.content.contains("y\ny\ny\n"));
    assert!(out.content.contains("cut from the middle"));
    assert!(
        out.content.contains("[the output was 47.7 MB"),
        "{}",
        out.content
    );
    assert!(out.content.contains("y\n\nlast line\n"), "the tail is kept");
}

#[tokio::test]
async fn shell_cancel_stops_the_command_promptly() {
    let p = Project::new();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let out = call_with(
        "shell_execute",
        json!({"command": "echo waiting; sleep 30"}),
        &p.ctx,
        cancel,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    check_error(&out, &["Cancelled after", "waiting"]);
}

#[tokio::test]
async fn shell_refuses_a_missing_working_directory() {
    let mut p = Project::new();
    p.ctx.cwd = p.dir.join("gone");
    let out = p.call("shell_execute", json!({"command": "true"})).await;
    check_error(&out, &["does not exist", "set_working_directory"]);
    assert_eq!(
        p.need("shell_execute", json!({"command": "ls"})),
        ApprovalNeed::Exec
    );
}

// ---- grep ------------------------------------------------------------------------------

/// A git repository with files that must and must not be searched.
fn grep_fixture() -> Project {
    let p = Project::git();
    p.write(".gitignore", "target/\n*.log\n");
    p.write(
        "src/a.rs",
        "fn needle() {}\nfn other() {}\n// Needle again\n",
    );
    p.write("src/b.txt", "one\ntwo\nneedle three\nfour\nfive\n");
    p.write("target/out.rs", "needle in build output\n");
    p.write("debug.log", "needle in a log\n");
    p.write(".hidden/c.rs", "needle hidden\n");
    p.write("blob.bin", b"needle\0binary");
    p
}

#[tokio::test]
async fn grep_respects_gitignore_hidden_and_binary_files() {
    let p = grep_fixture();
    let out = p.call("grep", json!({"pattern": "needle"})).await;
    check(
        &out,
        "src/a.rs:1:fn needle() {}\nsrc/b.txt:3:needle three\n",
    );

    let out = p
        .call(
            "grep",
            json!({"pattern": "needle", "case_insensitive": true, "glob": "*.rs"}),
        )
        .await;
    check(
        &out,
        "src/a.rs:1:fn needle() {}\nsrc/a.rs:3:// Needle again\n",
    );
}

#[tokio::test]
async fn grep_output_modes_and_context() {
    let p = grep_fixture();
    let out = p
        .call(
            "grep",
            json!({"pattern": "(?i)needle", "output_mode": "files_with_matches"}),
        )
        .await;
    check(&out, "src/a.rs\nsrc/b.txt\n");
    let out = p
        .call(
            "grep",
            json!({"pattern": "(?i)needle", "output_mode": "count"}),
        )
        .await;
    check(&out, "src/a.rs:2\nsrc/b.txt:1\n");
    let out = p
        .call(
            "grep",
            json!({"pattern": "three", "path": "src", "context": 1}),
        )
        .await;
    check(
        &out,
        "src/b.txt-2-two\nsrc/b.txt:3:needle three\nsrc/b.txt-4-four\n",
    );
}

#[tokio::test]
async fn grep_caps_results_with_a_note() {
    let p = Project::new();
    let text: String = (0..50).map(|n| format!("hit {n}\n")).collect();
    p.write("many.txt", text);
    let out = p
        .call("grep", json!({"pattern": "hit", "max_results": 5}))
        .await;
    let expected: String = (0..5)
        .map(|n| format!("many.txt:{}:hit {n}\n", n + 1))
        .collect();
    assert!(out.content.starts_with(&expected), "{}", out.content);
    assert!(
        out.content
            .contains("[stopped at 5 matching lines (max_results)"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn grep_reports_invalid_regex_and_no_matches() {
    let p = grep_fixture();
    let out = p.call("grep", json!({"pattern": "fn (unclosed"})).await;
    check_error(&out, &["invalid regular expression \"fn (unclosed\""]);
    let out = p.call("grep", json!({"pattern": "absent_word"})).await;
    assert!(!out.is_error);
    assert!(
        out.content.starts_with("No matches for \"absent_word\""),
        "{}",
        out.content
    );
}

// ---- glob ------------------------------------------------------------------------------

fn touch(path: &Path, secs_after_epoch: u64) {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("open");
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs_after_epoch))
        .expect("set mtime");
}

#[tokio::test]
async fn glob_lists_newest_first_and_respects_gitignore() {
    let p = Project::git();
    p.write(".gitignore", "ignored.rs\n");
    touch(&p.write("old.rs", ""), 1_000);
    touch(&p.write("src/new.rs", ""), 3_000);
    touch(&p.write("src/mid.rs", ""), 2_000);
    touch(&p.write("src/same_a.rs", ""), 2_000);
    p.write("ignored.rs", "");
    p.write("notes.txt", "");
    let out = p.call("glob", json!({"pattern": "**/*.rs"})).await;
    check(&out, "src/new.rs\nsrc/mid.rs\nsrc/same_a.rs\nold.rs\n");

    let out = p.call("glob", json!({"pattern": "*.rs"})).await;
    check(&out, "old.rs\n");
    let out = p
        .call("glob", json!({"pattern": "*.rs", "path": "src"}))
        .await;
    check(&out, "new.rs\nmid.rs\nsame_a.rs\n");
}

#[tokio::test]
async fn glob_caps_long_lists() {
    let p = Project::new();
    for n in 0..510 {
        touch(&p.write(&format!("f{n:03}.txt"), ""), 10_000 + n);
    }
    let out = p.call("glob", json!({"pattern": "*.txt"})).await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines.len(), 501);
    assert_eq!(lines[0], "f509.txt");
    assert_eq!(lines[499], "f010.txt");
    assert!(
        lines[500].contains("500 most recently modified of 510"),
        "{}",
        lines[500]
    );
}

#[tokio::test]
async fn glob_reports_bad_patterns_and_roots() {
    let p = Project::new();
    check_error(
        &p.call("glob", json!({"pattern": "a[b"})).await,
        &["invalid glob"],
    );
    check_error(
        &p.call("glob", json!({"pattern": "/etc/*"})).await,
        &["absolute"],
    );
    check_error(
        &p.call("glob", json!({"pattern": "*", "path": "missing"}))
            .await,
        &["missing does not exist"],
    );
}

// ---- set_working_directory -------------------------------------------------------------

#[tokio::test]
async fn set_working_directory_returns_the_canonical_path() {
    let p = Project::new();
    p.write("sub/dir/file.txt", "");
    let out = p
        .call("set_working_directory", json!({"path": "sub/./dir/../dir"}))
        .await;
    let dir = p.dir.join("sub/dir");
    assert_eq!(
        out.effects,
        vec![ToolEffect::SetWorkingDirectory(dir.clone())]
    );
    check(
        &out,
        &format!("The working directory is now {}.", dir.display()),
    );
    check_error(
        &p.call("set_working_directory", json!({"path": "sub/dir/file.txt"}))
            .await,
        &["is a file"],
    );
    check_error(
        &p.call("set_working_directory", json!({"path": "nope"}))
            .await,
        &["does not exist"],
    );
}

// ---- approvals and the project boundary ------------------------------------------------

#[tokio::test]
async fn paths_outside_the_project_need_approval() {
    let p = Project::new();
    std::fs::write(p.outside.join("secret.txt"), "s").expect("outside file");
    let secret = p.outside.join("secret.txt");

    assert_eq!(
        p.need("file_read", json!({"path": "src/x.rs"})),
        ApprovalNeed::None
    );
    assert_eq!(
        p.need("file_write", json!({"path": "x.rs", "content": ""})),
        ApprovalNeed::Edit
    );
    assert_eq!(
        p.need(
            "file_edit",
            json!({"path": "x.rs", "old_string": "a", "new_string": "b"})
        ),
        ApprovalNeed::Edit
    );
    assert_eq!(p.need("grep", json!({"pattern": "x"})), ApprovalNeed::None);
    assert_eq!(p.need("glob", json!({"pattern": "*"})), ApprovalNeed::None);

    let escape = json!({"path": "src/../../outside/secret.txt"});
    assert_eq!(
        p.need("file_read", escape),
        ApprovalNeed::OutsideProject(secret.clone())
    );
    assert_eq!(
        p.need("file_write", json!({"path": secret, "content": ""})),
        ApprovalNeed::OutsideProject(secret.clone())
    );
    assert_eq!(
        p.need("grep", json!({"pattern": "x", "path": ".."})),
        ApprovalNeed::OutsideProject(p.dir.parent().expect("parent").to_path_buf())
    );
    assert_eq!(
        p.need("set_working_directory", json!({"path": "/"})),
        ApprovalNeed::OutsideProject(PathBuf::from("/"))
    );
    // A prefix of the project's name is not the project.
    let sibling = format!("{}-other/x", p.dir.display());
    assert!(matches!(
        p.need("file_read", json!({"path": sibling})),
        ApprovalNeed::OutsideProject(_)
    ));
}

#[tokio::test]
async fn symlinks_leading_out_of_the_project_need_approval() {
    let p = Project::new();
    std::fs::write(p.outside.join("secret.txt"), "s").expect("outside file");
    std::os::unix::fs::symlink(&p.outside, p.dir.join("link")).expect("dir symlink");
    std::os::unix::fs::symlink(p.outside.join("new.txt"), p.dir.join("dangling"))
        .expect("dangling symlink");
    std::os::unix::fs::symlink(p.dir.join("real.txt"), p.dir.join("inner")).expect("symlink");

    assert_eq!(
        p.need("file_read", json!({"path": "link/secret.txt"})),
        ApprovalNeed::OutsideProject(p.outside.join("secret.txt"))
    );
    assert_eq!(
        p.need(
            "file_write",
            json!({"path": "link/sub/new.rs", "content": ""})
        ),
        ApprovalNeed::OutsideProject(p.outside.join("sub/new.rs"))
    );
    assert_eq!(
        p.need("file_write", json!({"path": "dangling", "content": ""})),
        ApprovalNeed::OutsideProject(p.outside.join("new.txt"))
    );
    assert_eq!(
        p.need("file_write", json!({"path": "inner", "content": ""})),
        ApprovalNeed::Edit
    );
}

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
}

// ---- registry --------------------------------------------------------------------------

#[test]
fn registry_lists_builtins_in_order_and_filters_by_audience() {
    let registry = ToolRegistry::builtin();
    let names = [
        "file_edit",
        "file_read",
        "file_write",
        "glob",
        "grep",
        "set_working_directory",
        "shell_execute",
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
    assert_eq!(read_only, ["file_read", "glob", "grep"]);
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
