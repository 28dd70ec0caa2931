//! grep and glob over real trees and git repositories: .gitignore, hidden and binary files,
//! output modes, ordering and caps.

use super::{Project, check, check_error};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, SystemTime};

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
async fn glob_of_long_paths_stops_at_its_size_limit_and_says_how_many_it_left_out() {
    let p = Project::new();
    // 400 paths of about 250 bytes: 100 KB, under the count limit but twice the size limit.
    let deep = format!("{}/{}", "d".repeat(120), "e".repeat(120));
    for n in 0..400 {
        touch(&p.write(&format!("{deep}/f{n:03}.txt"), ""), 10_000 + n);
    }
    let out = p.call("glob", json!({"pattern": "**/*.txt"})).await;
    assert!(!out.is_error, "{}", out.content);
    let limit = tern::tools::glob::MAX_OUTPUT_BYTES;
    let (list, note) = out
        .content
        .trim_end()
        .rsplit_once('\n')
        .expect("a list and a note");
    assert!(list.len() < limit, "{} bytes listed", list.len());
    let listed = list.lines().count();
    assert!(listed > 150, "{listed} paths listed");
    assert_eq!(
        list.lines().next(),
        Some(format!("{deep}/f399.txt").as_str())
    );
    assert!(
        note.contains(&format!("{listed} most recently modified of 400")),
        "{note}"
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

// ---- finding nothing -------------------------------------------------------------------

/// Succeeding without finding anything is said apart from finding something, so the loop
/// guard does not take it as progress; failing is neither.
#[tokio::test]
async fn calls_that_find_nothing_say_so() {
    let p = grep_fixture();
    p.write("empty.txt", "");
    let check = |out: tern::tools::ToolOutput, empty: bool, what: &str| {
        assert!(!out.is_error, "{what}: {}", out.content);
        assert_eq!(out.empty, empty, "{what}: {}", out.content);
    };
    check(
        p.call("grep", json!({"pattern": "absent_word"})).await,
        true,
        "no match",
    );
    check(
        p.call("grep", json!({"pattern": "needle"})).await,
        false,
        "matches",
    );
    check(
        p.call("glob", json!({"pattern": "src/**/*.py"})).await,
        true,
        "no file",
    );
    check(
        p.call("glob", json!({"pattern": "src/*"})).await,
        false,
        "files",
    );
    check(
        p.call("file_read", json!({"path": "empty.txt"})).await,
        true,
        "empty file",
    );
    let past = json!({"path": "src/b.txt", "offset": 50});
    check(p.call("file_read", past).await, true, "past the end");
    check(
        p.call("file_read", json!({"path": "src/b.txt"})).await,
        false,
        "lines",
    );
    let missing = p
        .call("glob", json!({"pattern": "*", "path": "nowhere"}))
        .await;
    assert!(missing.is_error && !missing.empty, "{}", missing.content);
}
