//! File names that are not UTF-8: `glob` and `grep` show them escaped (`\xhh` for each byte
//! that is not part of valid UTF-8), and every tool taking a path reads the shown name back
//! to the exact bytes; names that merely contain `\x` text keep working.

use super::{Project, check, check_error};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use tern::tools::ToolEffect;

/// Writes `content` to the file whose name (relative to the project) is `name`'s bytes.
fn write_bytes_named(p: &Project, name: &[u8], content: &str) -> PathBuf {
    let path = p.dir.join(OsStr::from_bytes(name));
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("parent dirs");
    std::fs::write(&path, content).expect("a file with a name that is not UTF-8");
    path
}

#[tokio::test]
async fn a_name_glob_lists_is_one_file_read_and_grep_accept() {
    let p = Project::new();
    let latin1 = write_bytes_named(&p, b"caf\xe9.txt", "un café noir\n");
    write_bytes_named(&p, b"dir\xff/inner.txt", "deep noir\n");

    let out = p.call("glob", json!({"pattern": "**/*.txt"})).await;
    let mut listed: Vec<&str> = out.content.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["caf\\xe9.txt", "dir\\xff/inner.txt"]);

    let out = p.call("file_read", json!({"path": listed[0]})).await;
    check(&out, "     1\tun café noir\n");
    assert_eq!(out.effects, vec![ToolEffect::Read(latin1)]);
    let out = p.call("file_read", json!({"path": listed[1]})).await;
    check(&out, "     1\tdeep noir\n");

    // grep prints the names in the same form, and takes them as its path.
    let out = p.call("grep", json!({"pattern": "noir"})).await;
    check(
        &out,
        "caf\\xe9.txt:1:un café noir\ndir\\xff/inner.txt:1:deep noir\n",
    );
    let out = p
        .call(
            "grep",
            json!({"pattern": "noir", "path": "dir\\xff", "output_mode": "count"}),
        )
        .await;
    check(&out, "dir\\xff/inner.txt:1\n");
    let out = p
        .call("glob", json!({"pattern": "*", "path": "dir\\xff"}))
        .await;
    check(&out, "inner.txt\n");
}

#[tokio::test]
async fn the_writing_tools_change_the_file_the_escaped_name_stands_for() {
    let p = Project::new();
    let latin1 = write_bytes_named(&p, b"caf\xe9.txt", "old\n");
    let out = p
        .call(
            "file_edit",
            json!({"path": "caf\\xe9.txt", "old_string": "old", "new_string": "edited"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&latin1).unwrap(), "edited\n");
    assert_eq!(out.effects, vec![ToolEffect::Wrote(latin1.clone())]);

    let out = p
        .call(
            "file_write",
            json!({"path": "caf\\xe9.txt", "content": "written\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("caf\\xe9.txt"), "{}", out.content);
    assert_eq!(std::fs::read_to_string(&latin1).unwrap(), "written\n");
    // Nothing was created under the escaped text itself.
    assert!(!p.dir.join("caf\\xe9.txt").exists());
}

#[tokio::test]
async fn names_with_escape_like_text_are_files_of_that_name() {
    let p = Project::new();
    // `\x41` stands for a plain `A`, which is never escaped: the name means itself.
    p.write("a\\x41.txt", "literal\n");
    p.write("aA.txt", "other\n");
    let out = p.call("file_read", json!({"path": "a\\x41.txt"})).await;
    check(&out, "     1\tliteral\n");
    let out = p
        .call(
            "file_write",
            json!({"path": "b\\x42.txt", "content": "new\n"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(p.read("b\\x42.txt"), "new\n");
    let out = p.call("glob", json!({"pattern": "*\\\\x4*"})).await;
    check(&out, "b\\x42.txt\na\\x41.txt\n");
}

#[tokio::test]
async fn a_real_name_that_reads_as_escaped_is_shown_so_that_it_reads_back() {
    let p = Project::new();
    // Two files whose names differ only in a real backslash against the byte E9.
    p.write("caf\\xe9.txt", "the backslash one\n");
    write_bytes_named(&p, b"caf\xe9.txt", "the Latin-1 one\n");
    let out = p.call("glob", json!({"pattern": "caf*"})).await;
    let mut listed: Vec<&str> = out.content.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["caf\\x5cxe9.txt", "caf\\xe9.txt"]);
    let out = p
        .call("file_read", json!({"path": "caf\\x5cxe9.txt"}))
        .await;
    check(&out, "     1\tthe backslash one\n");
    let out = p.call("file_read", json!({"path": "caf\\xe9.txt"})).await;
    check(&out, "     1\tthe Latin-1 one\n");
}

#[tokio::test]
async fn a_typed_name_that_reads_as_escaped_reaches_its_file_when_it_is_the_only_one() {
    let p = Project::new();
    p.write("caf\\xe9.txt", "the backslash one\n");
    let out = p.call("file_read", json!({"path": "caf\\xe9.txt"})).await;
    check(&out, "     1\tthe backslash one\n");
    // Where neither exists, the escaped reading is the one meant.
    let out = p
        .call(
            "file_write",
            json!({"path": "new\\xe9.txt", "content": "x"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(p.dir.join(OsStr::from_bytes(b"new\xe9.txt")).is_file());
}

#[tokio::test]
async fn a_missing_file_is_named_and_its_neighbours_suggested_in_the_escaped_form() {
    let p = Project::new();
    write_bytes_named(&p, b"caf\xe9.txt", "x");
    let out = p.call("file_read", json!({"path": "caf\\xe8.txt"})).await;
    check_error(
        &out,
        &[
            "caf\\xe8.txt does not exist",
            "Similar names",
            "caf\\xe9.txt",
        ],
    );
}
