//! set_working_directory and the project boundary: which approval each path needs, through
//! `..` escapes and symlinks.

use super::{Project, check, check_error};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::PathBuf;
use tern::tools::{ApprovalMode, ApprovalNeed, Decision, ToolEffect, decide};

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

#[tokio::test]
async fn set_working_directory_refuses_a_directory_whose_name_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let p = Project::new();
    let latin1 = p.dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&latin1).expect("a non-UTF-8 directory name");
    std::os::unix::fs::symlink(&latin1, p.dir.join("cafe")).expect("symlink");
    let out = p
        .call("set_working_directory", json!({"path": "cafe"}))
        .await;
    check_error(&out, &["cafe leads to ", "caf\\xe9", "not valid UTF-8"]);
    assert!(out.effects.is_empty());
    // The escaped name the error shows reaches the same directory, and the same refusal.
    let out = p
        .call("set_working_directory", json!({"path": "caf\\xe9"}))
        .await;
    check_error(&out, &["caf\\xe9 leads to ", "not valid UTF-8"]);
    assert!(out.effects.is_empty());
}

#[tokio::test]
async fn a_dangling_link_through_another_link_is_judged_where_the_kernel_writes() {
    let p = Project::new();
    std::fs::create_dir_all(p.outside.join("a/b")).expect("outside dirs");
    // `s/..` is `outside/a`, not the project: the kernel applies `..` after following `s`.
    std::os::unix::fs::symlink(p.outside.join("a/b"), p.dir.join("s")).expect("symlink s");
    std::os::unix::fs::symlink("s/../pwned", p.dir.join("l")).expect("symlink l");
    let pwned = p.outside.join("a/pwned");
    assert_eq!(
        p.need("file_write", json!({"path": "l", "content": "x"})),
        ApprovalNeed::OutsideProject(pwned.clone())
    );
    assert_eq!(
        p.need(
            "file_edit",
            json!({"path": "l", "old_string": "a", "new_string": "b"})
        ),
        ApprovalNeed::OutsideProject(pwned.clone())
    );
    // Once approved, the write lands where the approval said, through the links.
    let out = p
        .call("file_write", json!({"path": "l", "content": "x"}))
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&pwned).expect("written"), "x");
    assert!(!p.dir.join("pwned").exists());
    assert!(
        std::fs::symlink_metadata(p.dir.join("l"))
            .expect("l")
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn writes_into_the_git_directory_need_the_approval_of_a_command() {
    let p = Project::git();
    p.write("sub/.git/config", "");
    std::os::unix::fs::symlink(p.dir.join(".git/hooks"), p.dir.join("hooks")).expect("symlink");
    let write = |path: &str| p.need("file_write", json!({"path": path, "content": ""}));
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".git",
        "sub/.git/config",
        ".GIT/config",
        "hooks/post-checkout",
    ] {
        assert_eq!(write(path), ApprovalNeed::Exec, "{path}");
        assert_eq!(
            p.need(
                "file_edit",
                json!({"path": path, "old_string": "a", "new_string": "b"})
            ),
            ApprovalNeed::Exec,
            "{path}"
        );
        assert_eq!(
            p.need("file_read", json!({"path": path})),
            ApprovalNeed::None,
            "{path}"
        );
    }
    for path in [".gitignore", ".github/workflows/ci.yml", "src/git/mod.rs"] {
        assert_eq!(write(path), ApprovalNeed::Edit, "{path}");
    }
    let Decision::Refuse(reason) = decide(ApprovalMode::Edits, &write(".git/hooks/pre-commit"))
    else {
        panic!("--approve edits must refuse a hook");
    };
    assert!(reason.contains("--approve edits"), "{reason}");
    assert!(
        reason.contains("git runs its hooks and the commands named in its config"),
        "{reason}"
    );
}

#[tokio::test]
async fn writes_into_a_linked_git_directory_need_the_approval_of_a_command() {
    // A worktree's `.git` is a file naming its git directory, which shares a common one.
    let p = Project::new();
    p.write(".git", "gitdir: store/worktree\n");
    p.write("store/worktree/commondir", "../common\n");
    p.write("store/common/config", "");
    let write = |path: &str| p.need("file_write", json!({"path": path, "content": ""}));
    assert_eq!(write("store/worktree/HEAD"), ApprovalNeed::Exec);
    assert_eq!(write("store/common/hooks/pre-push"), ApprovalNeed::Exec);
    assert_eq!(write("store/notes.txt"), ApprovalNeed::Edit);
}
