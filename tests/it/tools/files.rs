//! file_read, file_write and file_edit: numbering and ranges, binary and non-UTF-8 files,
//! large files, what lands on disk, and the errors a model needs to correct itself.

use super::{Project, call_with, check, check_error, child_report, in_child, run_in_child};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::future::Future;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tern::tools::{ToolEffect, ToolOutput, ToolRegistry};
use tokio_util::sync::CancellationToken;

/// `cat -n` lines for `range`, with `text(n)` as line n.
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
async fn read_with_a_huge_limit_does_not_overflow() {
    let p = Project::new();
    p.write("three.txt", "a\nb\nc\n");
    let out = p
        .call(
            "file_read",
            json!({"path": "three.txt", "offset": 2, "limit": u64::MAX}),
        )
        .await;
    check(&out, "     2\tb\n     3\tc\n");
}

/// A named pipe at `rel` in the project.
fn make_fifo(p: &Project, rel: &str) -> PathBuf {
    let path = p.dir.join(rel);
    let status = Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("running mkfifo");
    assert!(status.success());
    path
}

/// `call`'s output, or a failure if it takes more than a few seconds. A call stuck opening the
/// pipe `fifo` is released first (by opening its other end), so the test fails instead of
/// hanging.
async fn within_seconds(fifo: &Path, call: impl Future<Output = ToolOutput>) -> ToolOutput {
    match tokio::time::timeout(Duration::from_secs(5), call).await {
        Ok(output) => output,
        Err(_) => {
            let nonblocking = || {
                let mut options = std::fs::OpenOptions::new();
                options.custom_flags(libc::O_NONBLOCK);
                options
            };
            let reader = nonblocking().read(true).open(fifo);
            let writer = nonblocking().write(true).open(fifo);
            drop((reader, writer));
            panic!("the call blocked on the named pipe {}", fifo.display());
        }
    }
}

#[tokio::test]
async fn named_pipes_are_refused_without_blocking() {
    let p = Project::new();
    let fifo = make_fifo(&p, "pipe");
    let out = within_seconds(&fifo, p.call("file_read", json!({"path": "pipe"}))).await;
    check_error(
        &out,
        &[
            "pipe is a named pipe, not a regular file",
            "file_read reads regular files only",
        ],
    );
    assert!(out.effects.is_empty());

    let edit = json!({"path": "pipe", "old_string": "a", "new_string": "b"});
    let out = within_seconds(&fifo, p.call("file_edit", edit)).await;
    check_error(
        &out,
        &["pipe is a named pipe", "file_edit edits regular files only"],
    );

    let write = json!({"path": "pipe", "content": "x"});
    let out = within_seconds(&fifo, p.call("file_write", write)).await;
    check_error(
        &out,
        &[
            "pipe is a named pipe",
            "file_write writes regular files only",
        ],
    );
    assert!(out.effects.is_empty());
    let kind = std::fs::symlink_metadata(&fifo)
        .expect("the pipe")
        .file_type();
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&kind),
        "still a pipe"
    );
}

#[tokio::test]
async fn sockets_and_devices_are_refused() {
    let p = Project::new();
    let _listener =
        std::os::unix::net::UnixListener::bind(p.dir.join("sock")).expect("a unix socket");
    let out = p.call("file_read", json!({"path": "sock"})).await;
    check_error(&out, &["sock is a socket, not a regular file"]);

    let out = p.call("file_read", json!({"path": "/dev/null"})).await;
    check_error(
        &out,
        &["/dev/null is a character device, not a regular file"],
    );
    let out = p
        .call("file_write", json!({"path": "/dev/null", "content": "x"}))
        .await;
    check_error(&out, &["/dev/null is a character device"]);
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
    let registry = ToolRegistry::builtin();
    for name in registry.names() {
        // `{}` is a whole call for a tool that requires no argument.
        let requires = registry.get(name).unwrap().input_schema()["required"]
            .as_array()
            .is_some_and(|required| !required.is_empty());
        for input in &garbage {
            let out = p.call(name, input.clone()).await;
            let valid = !requires && *input == json!({});
            assert!(out.is_error || valid, "{name} {input}: {}", out.content);
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

#[tokio::test]
async fn write_replaces_the_file_whole_and_keeps_its_mode() {
    let p = Project::new();
    let path = p.write("run.sh", "old content\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    // A reader that opened the file before the write sees the old content whole: the new
    // content arrives by rename, never by truncating the file in place.
    let mut earlier_reader = std::fs::File::open(&path).expect("opening the old file");

    let out = p
        .call("file_write", json!({"path": "run.sh", "content": "new\n"}))
        .await;
    check(&out, "Replaced run.sh (4 bytes, 1 line).");
    assert_eq!(p.read("run.sh"), "new\n");
    let mode = std::fs::metadata(&path)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
    let mut old = String::new();
    earlier_reader.read_to_string(&mut old).expect("reading");
    assert_eq!(old, "old content\n");
    assert_eq!(dir_names(&p.dir), ["run.sh"], "no temporary file is left");
}

#[tokio::test]
async fn write_and_edit_through_a_symlink_update_its_target() {
    let p = Project::new();
    p.write("real.txt", "one\n");
    std::os::unix::fs::symlink("real.txt", p.dir.join("link")).expect("symlink");
    let out = p
        .call("file_write", json!({"path": "link", "content": "two\n"}))
        .await;
    check(&out, "Replaced link (4 bytes, 1 line).");
    let out = p
        .call(
            "file_edit",
            json!({"path": "link", "old_string": "two", "new_string": "three"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(p.read("real.txt"), "three\n");
    let link = std::fs::symlink_metadata(p.dir.join("link")).expect("the link");
    assert!(link.file_type().is_symlink(), "the link is still a link");
    assert_eq!(dir_names(&p.dir), ["link", "real.txt"]);
}

#[tokio::test]
async fn write_after_cancel_changes_nothing() {
    let p = Project::new();
    p.write("keep.txt", "kept\n");
    let cancel = CancellationToken::new();
    cancel.cancel();
    let input = json!({"path": "keep.txt", "content": "lost\n"});
    let out = call_with("file_write", input, &p.ctx, cancel.clone()).await;
    check_error(&out, &["Cancelled", "untouched"]);
    assert!(out.effects.is_empty());
    let input = json!({"path": "keep.txt", "old_string": "kept", "new_string": "lost"});
    let out = call_with("file_edit", input, &p.ctx, cancel).await;
    check_error(&out, &["Cancelled", "untouched"]);
    assert_eq!(p.read("keep.txt"), "kept\n");
    assert_eq!(dir_names(&p.dir), ["keep.txt"]);
}

/// Where the child below writes; set by the test that starts it.
const FSIZE_DIR_ENV: &str = "TERN_TOOLS_TEST_DIR";

#[test]
fn a_failed_write_leaves_the_original_whole() {
    let p = Project::new();
    p.write("big.txt", "original\n");
    p.write("edit.txt", "small\n");
    // A file size limit makes writing the new content fail half-way, as a full disk would.
    // The signal it raises is ignored, so the write returns an error instead.
    let report = run_in_child(
        "files::child_writes_under_a_file_size_limit",
        "trap '' XFSZ; ulimit -f 16",
        &[(FSIZE_DIR_ENV, p.dir.as_os_str())],
    );
    let mut outputs = report.split("\n---\n");
    let write = outputs.next().unwrap_or_default();
    assert!(
        write.starts_with("error: Cannot write big.txt: "),
        "{write}"
    );
    assert!(write.contains("big.txt is untouched"), "{write}");
    let edit = outputs.next().unwrap_or_default();
    assert!(edit.starts_with("error: Cannot write edit.txt: "), "{edit}");
    assert!(edit.contains("The original is untouched"), "{edit}");
    assert_eq!(p.read("big.txt"), "original\n");
    assert_eq!(p.read("edit.txt"), "small\n");
    assert_eq!(
        dir_names(&p.dir),
        ["big.txt", "edit.txt"],
        "the temporary files are removed"
    );
}

#[tokio::test]
#[ignore = "run in a child process by a_failed_write_leaves_the_original_whole"]
async fn child_writes_under_a_file_size_limit() {
    if !in_child() {
        return;
    }
    let dir = PathBuf::from(std::env::var_os(FSIZE_DIR_ENV).expect("the project dir"));
    let ctx = crate::support::tool_context(dir.clone(), dir.join("tmp"));
    let big = "x".repeat(1 << 20);
    let write = json!({"path": "big.txt", "content": big});
    let edit = json!({"path": "edit.txt", "old_string": "small", "new_string": big});
    let mut report = Vec::new();
    for (tool, input) in [("file_write", write), ("file_edit", edit)] {
        let out = call_with(tool, input, &ctx, CancellationToken::new()).await;
        let status = if out.is_error { "error" } else { "ok" };
        report.push(format!("{status}: {}", out.content));
    }
    child_report(&report.join("\n---\n"));
}

/// The names in `dir`, sorted.
fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("listing")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
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
