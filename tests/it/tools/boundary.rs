//! set_working_directory and the project boundary: which approval each path needs, through
//! `..` escapes and symlinks.

use super::{Project, check, check_error};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::PathBuf;
use tern::tools::{ApprovalNeed, ToolEffect};

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
