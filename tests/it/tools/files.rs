//! file_read, file_write and file_edit: numbering and ranges, binary and non-UTF-8 files,
//! large files, what lands on disk, and the errors a model needs to correct itself.

use super::{Project, check, check_error};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use tern::tools::{ToolEffect, ToolRegistry};

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
