//! The git working context, read from real repositories the tests build with the `git`
//! command (the budget of a read, and reads shared, are in `git_reads`).

use pretty_assertions::assert_eq;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use tern::context::{
    AheadBehind, Branch, GitContext, GitSnapshot, GitUnavailable, Head, StatusCounts, Upstream,
    snapshot, snapshot_on, working_git,
};

/// A temp dir holding git repositories for one test.
struct Repos {
    root: tempfile::TempDir,
}

impl Repos {
    fn new() -> Self {
        let root = tempfile::Builder::new()
            .prefix("tern-git-")
            .tempdir()
            .expect("creating a temp dir");
        Self { root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// A new repository `name` on branch `main` with no commits.
    fn init(&self, name: &str) -> PathBuf {
        let dir = self.path(name);
        std::fs::create_dir_all(&dir).expect("creating the repository dir");
        git(&dir, &["init", "--quiet", "--initial-branch=main"]);
        dir
    }

    /// A new repository `name` with one commit of `README.md`, subject `subject`.
    fn init_with_commit(&self, name: &str, subject: &str) -> PathBuf {
        let dir = self.init(name);
        commit_file(&dir, "README.md", "hello\n", subject);
        dir
    }
}

/// Runs git in `dir` with a fixed identity and no system or user configuration.
fn git_output(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args([
            "-c",
            "user.name=Tern Test",
            "-c",
            "user.email=test@tern.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .output()
        .expect("running git")
}

/// Runs git in `dir` as [`git_output`] does, expects success and returns the trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_output(dir, args);
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn write(dir: &Path, file: &str, contents: &str) {
    let path = dir.join(file);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("creating a parent dir");
    }
    std::fs::write(path, contents).expect("writing a file");
}

fn commit_file(dir: &Path, file: &str, contents: &str, subject: &str) {
    write(dir, file, contents);
    git(dir, &["add", file]);
    git(dir, &["commit", "--quiet", "-m", subject]);
}

fn short_head(dir: &Path) -> String {
    git(dir, &["rev-parse", "--short", "HEAD"])
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).expect("canonicalizing a path")
}

fn read(dir: &Path) -> GitSnapshot {
    snapshot(dir).expect("reading the git snapshot")
}

/// Checks every field of the snapshot of `dir` except the paths, which `check_paths` covers.
fn check(dir: &Path, branch: Branch, head: Head, upstream: Option<Upstream>, counts: StatusCounts) {
    let got = read(dir);
    assert_eq!(
        (got.branch, got.head, got.upstream, got.counts),
        (branch, head, upstream, counts)
    );
}

fn check_paths(dir: &Path, worktree: &Path, common_dir: &Path) {
    let got = read(dir);
    assert_eq!(
        (canonical(&got.worktree), canonical(&got.common_dir)),
        (canonical(worktree), canonical(common_dir))
    );
}

fn commit(dir: &Path, subject: &str) -> Head {
    Head::Commit {
        short_id: short_head(dir),
        subject: subject.to_owned(),
    }
}

fn main_branch() -> Branch {
    Branch::Named("main".to_owned())
}

fn clean() -> StatusCounts {
    StatusCounts::default()
}

#[test]
fn branch_head_and_paths_of_a_plain_repository() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "Fix the build");
    check(
        &dir,
        main_branch(),
        commit(&dir, "Fix the build"),
        None,
        clean(),
    );
    check_paths(&dir, &dir, &dir.join(".git"));
}

#[test]
fn a_subdirectory_reports_the_top_of_its_worktree() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    std::fs::create_dir_all(dir.join("src/deep")).expect("creating a subdirectory");
    check_paths(&dir.join("src/deep"), &dir, &dir.join(".git"));
}

#[test]
fn feature_branch_name_with_a_slash() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    git(&dir, &["switch", "--quiet", "-c", "feature/git-context"]);
    check(
        &dir,
        Branch::Named("feature/git-context".to_owned()),
        commit(&dir, "First"),
        None,
        clean(),
    );
}

#[test]
fn detached_head() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    commit_file(&dir, "b.txt", "b\n", "Second");
    git(&dir, &["checkout", "--quiet", "--detach", "HEAD~1"]);
    check(&dir, Branch::Detached, commit(&dir, "First"), None, clean());
}

#[test]
fn unborn_branch_has_no_head_commit() {
    let repos = Repos::new();
    let dir = repos.init("p");
    check(&dir, main_branch(), Head::Unborn, None, clean());
    // Staging the first file works before there is any commit.
    write(&dir, "first.txt", "one\n");
    git(&dir, &["add", "first.txt"]);
    let counts = StatusCounts {
        staged: 1,
        ..clean()
    };
    check(&dir, main_branch(), Head::Unborn, None, counts);
}

#[test]
fn multi_line_commit_message_gives_its_first_line() {
    let repos = Repos::new();
    let dir = repos.init("p");
    write(&dir, "a.txt", "a\n");
    git(&dir, &["add", "a.txt"]);
    git(
        &dir,
        &["commit", "--quiet", "-m", "Subject line", "-m", "Body text"],
    );
    check(
        &dir,
        main_branch(),
        commit(&dir, "Subject line"),
        None,
        clean(),
    );
}

#[test]
fn long_subject_is_cut() {
    let repos = Repos::new();
    let subject = "word ".repeat(40);
    let dir = repos.init_with_commit("p", &subject);
    let Head::Commit { subject: got, .. } = read(&dir).head else {
        panic!("expected a commit");
    };
    assert_eq!(got, format!("{}…", "word ".repeat(16).trim_end()));
}

#[test]
fn upstream_ahead_and_behind() {
    let repos = Repos::new();
    let remote = repos.path("remote.git");
    git(
        repos.root.path(),
        &["init", "--quiet", "--bare", "remote.git"],
    );
    let local = repos.init_with_commit("local", "Shared");
    git(
        &local,
        &["remote", "add", "origin", &remote.to_string_lossy()],
    );
    git(&local, &["push", "--quiet", "-u", "origin", "main"]);
    let tracking = |ahead, behind| {
        Some(Upstream {
            name: "origin/main".to_owned(),
            ahead_behind: Some(AheadBehind { ahead, behind }),
        })
    };
    check(
        &local,
        main_branch(),
        commit(&local, "Shared"),
        tracking(0, 0),
        clean(),
    );

    // Someone else pushes two commits; we commit one and fetch.
    git(
        repos.root.path(),
        &["clone", "--quiet", &remote.to_string_lossy(), "other"],
    );
    let other = repos.path("other");
    commit_file(&other, "o1.txt", "1\n", "Theirs 1");
    commit_file(&other, "o2.txt", "2\n", "Theirs 2");
    git(&other, &["push", "--quiet", "origin", "main"]);
    commit_file(&local, "mine.txt", "m\n", "Mine");
    git(&local, &["fetch", "--quiet", "origin"]);
    check(
        &local,
        main_branch(),
        commit(&local, "Mine"),
        tracking(1, 2),
        clean(),
    );
}

#[test]
fn upstream_that_no_longer_exists_is_gone() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    // The remote exists but its main branch was never fetched (or was pruned after deletion).
    git(&dir, &["remote", "add", "origin", "../nowhere.git"]);
    git(&dir, &["config", "branch.main.remote", "origin"]);
    git(&dir, &["config", "branch.main.merge", "refs/heads/main"]);
    let gone = Some(Upstream {
        name: "origin/main".to_owned(),
        ahead_behind: None,
    });
    check(&dir, main_branch(), commit(&dir, "First"), gone, clean());
}

/// Sets up a worktree with staged, modified, untracked and ignored paths whose names are
/// easy to search for.
fn repo_with_changes(repos: &Repos) -> (PathBuf, Vec<&'static str>) {
    let dir = repos.init("p");
    for file in ["alpha-secret.txt", "bravo-secret.txt", "charlie-secret.txt"] {
        write(&dir, file, "original\n");
    }
    write(&dir, ".gitignore", "*.log\n");
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "--quiet", "-m", "Base"]);

    // Staged: a modified file and a new one; the modified one is changed again afterwards,
    // so it is also modified.
    write(&dir, "alpha-secret.txt", "staged change\n");
    write(&dir, "delta-secret.txt", "new\n");
    git(&dir, &["add", "alpha-secret.txt", "delta-secret.txt"]);
    write(&dir, "alpha-secret.txt", "changed again\n");
    // Modified: an edit and a deletion, neither staged.
    write(&dir, "bravo-secret.txt", "edited\n");
    std::fs::remove_file(dir.join("charlie-secret.txt")).expect("deleting a file");
    // Untracked: two files and a directory of three, which counts once.
    write(&dir, "echo-secret.txt", "u\n");
    write(&dir, "foxtrot-secret.txt", "u\n");
    for file in ["one", "two", "three"] {
        write(&dir, &format!("golf-secret-dir/{file}.txt"), "u\n");
    }
    // Ignored: neither a file nor a directory holding only ignored files counts.
    write(&dir, "hotel-secret.log", "ignored\n");
    write(&dir, "india-secret-logs/run.log", "ignored\n");
    let names = vec![
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "secret",
    ];
    (dir, names)
}

/// Counts `git status --porcelain` lines the way the snapshot groups them.
fn porcelain_counts(dir: &Path) -> StatusCounts {
    let mut counts = StatusCounts::default();
    for line in git(dir, &["status", "--porcelain"]).lines() {
        let mut codes = line.chars();
        let (x, y) = (codes.next().unwrap_or(' '), codes.next().unwrap_or(' '));
        if (x, y) == ('?', '?') {
            counts.untracked += 1;
            continue;
        }
        if x != ' ' {
            counts.staged += 1;
        }
        if y != ' ' {
            counts.modified += 1;
        }
    }
    counts
}

#[test]
fn staged_modified_and_untracked_counts() {
    let repos = Repos::new();
    let (dir, _) = repo_with_changes(&repos);
    let expected = StatusCounts {
        staged: 2,
        modified: 3,
        untracked: 3,
        conflicted: 0,
    };
    check(&dir, main_branch(), commit(&dir, "Base"), None, expected);
    assert_eq!(porcelain_counts(&dir), expected, "git status agrees");
}

/// Counting is split across threads by path, one level down inside a directory holding most
/// files; every kind of change must still be counted exactly once, as `git status` does.
#[test]
fn counts_agree_with_git_status_in_a_repository_dominated_by_one_directory() {
    let repos = Repos::new();
    let dir = repos.init("p");
    for m in 0..40 {
        for f in 0..3 {
            write(&dir, &format!("src/m{m}/f{f}.rs"), "original\n");
        }
    }
    write(&dir, "src/lib.rs", "original\n");
    write(&dir, "README.md", "original\n");
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "--quiet", "-m", "Base"]);

    write(&dir, "src/m1/f0.rs", "edited\n");
    std::fs::remove_file(dir.join("src/m2/f1.rs")).expect("deleting a file");
    std::fs::remove_dir_all(dir.join("src/m3")).expect("deleting a directory");
    std::fs::remove_dir_all(dir.join("src/m4")).expect("deleting a directory");
    write(&dir, "src/m4", "a file where a directory was\n");
    git(&dir, &["rm", "--quiet", "--cached", "src/m5/f0.rs"]);
    git(&dir, &["rm", "--quiet", "src/m6/f0.rs"]);
    std::fs::remove_dir_all(dir.join("src/m7")).expect("deleting a directory");
    std::os::unix::fs::symlink("m8", dir.join("src/m7")).expect("making a symlink");
    write(&dir, "src/m40/added.rs", "new\n");
    git(&dir, &["add", "src/m40/added.rs"]);
    std::fs::remove_dir_all(dir.join("src/m40")).expect("deleting a staged directory");
    write(&dir, "gone.txt", "new\n");
    git(&dir, &["add", "gone.txt"]);
    std::fs::remove_file(dir.join("gone.txt")).expect("deleting a staged file");
    git(&dir, &["rm", "--quiet", "README.md"]);
    write(&dir, "src/untracked-dir/a.rs", "u\n");
    write(&dir, "src/untracked-dir/b.rs", "u\n");
    write(&dir, "src/untracked.rs", "u\n");
    write(&dir, "notes.txt", "u\n");

    let expected = porcelain_counts(&dir);
    assert!(expected.staged >= 4 && expected.modified >= 10 && expected.untracked >= 5);
    assert_eq!(read(&dir).counts, expected);
    // A repository this small is counted on one thread; force the split to check it too.
    for threads in [2, 3, 4] {
        let split = snapshot_on(&dir, Some(threads)).expect("a snapshot");
        assert_eq!(split.counts, expected, "{threads} threads");
    }
}

#[test]
fn merge_conflicts_are_counted_on_their_own() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "Base");
    git(&dir, &["switch", "--quiet", "-c", "side"]);
    commit_file(&dir, "README.md", "side\n", "Side");
    git(&dir, &["switch", "--quiet", "main"]);
    commit_file(&dir, "README.md", "main\n", "Main");
    let merge = git_output(&dir, &["merge", "--quiet", "side"]);
    assert!(!merge.status.success(), "the merge should conflict");
    let counts = StatusCounts {
        conflicted: 1,
        ..clean()
    };
    check(&dir, main_branch(), commit(&dir, "Main"), None, counts);
    assert!(read(&dir).render().ends_with(", conflicted 1"));
}

#[test]
fn render_never_names_changed_files() {
    let repos = Repos::new();
    let (dir, names) = repo_with_changes(&repos);
    let line = read(&dir).render();
    for name in names {
        assert!(!line.contains(name), "{name:?} leaked into {line:?}");
    }
    assert!(
        line.ends_with(", staged 2, modified 3, untracked 3"),
        "{line}"
    );
}

#[test]
fn linked_worktree_reports_its_own_path_and_the_shared_common_dir() {
    let repos = Repos::new();
    let main = repos.init_with_commit("main", "First");
    let linked = repos.path("linked");
    git(
        &main,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "feature",
            &linked.to_string_lossy(),
        ],
    );
    write(&linked, "new.txt", "n\n");
    check_paths(&linked, &linked, &main.join(".git"));
    let untracked = StatusCounts {
        untracked: 1,
        ..clean()
    };
    check(
        &linked,
        Branch::Named("feature".to_owned()),
        commit(&linked, "First"),
        None,
        untracked,
    );
    // The main worktree is unaffected by the linked one's untracked file.
    check_paths(&main, &main, &main.join(".git"));
    check(&main, main_branch(), commit(&main, "First"), None, clean());
}

#[test]
fn a_directory_outside_git_is_unavailable() {
    let repos = Repos::new();
    let dir = repos.path("plain");
    std::fs::create_dir_all(&dir).expect("creating a plain dir");
    assert_eq!(snapshot(&dir), Err(GitUnavailable::NotARepository));
}

#[test]
fn a_bare_repository_is_unavailable() {
    let repos = Repos::new();
    git(
        repos.root.path(),
        &["init", "--quiet", "--bare", "bare.git"],
    );
    assert_eq!(
        snapshot(&repos.path("bare.git")),
        Err(GitUnavailable::BareRepository)
    );
}

#[test]
fn head_naming_a_missing_branch_reads_as_unborn() {
    // git itself treats this as a branch with no commits yet ("No commits yet").
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    write(&dir, ".git/HEAD", "ref: refs/heads/vanished\n");
    let got = read(&dir);
    assert_eq!(
        (got.branch, got.head),
        (Branch::Named("vanished".to_owned()), Head::Unborn)
    );
}

/// Why `dir` has no snapshot; fails the test if it has one.
fn unavailable_reason(dir: &Path) -> String {
    let error = snapshot(dir).expect_err("the repository should be unreadable");
    let reason = error.to_string();
    assert!(!reason.is_empty());
    reason
}

#[test]
fn branch_pointing_at_a_missing_commit_is_unavailable_with_a_reason() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    git(&dir, &["pack-refs", "--all", "--prune"]);
    write(
        &dir,
        ".git/refs/heads/main",
        "0123456789abcdef0123456789abcdef01234567\n",
    );
    let reason = unavailable_reason(&dir);
    assert!(reason.starts_with("reading HEAD: "), "{reason}");
}

#[test]
fn garbage_in_head_is_unavailable_with_a_reason() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    write(&dir, ".git/HEAD", "this is not a reference\n");
    unavailable_reason(&dir);
}

#[test]
fn a_repository_without_its_head_file_is_unavailable() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    std::fs::remove_file(dir.join(".git/HEAD")).expect("removing HEAD");
    unavailable_reason(&dir);
}

#[tokio::test]
async fn working_git_reads_a_repository_within_the_budget() {
    let repos = Repos::new();
    let dir = repos.init_with_commit("p", "First");
    match working_git(&dir, Duration::from_secs(30)).await {
        GitContext::Repo(got) => assert_eq!(got.head, commit(&dir, "First")),
        other => panic!("expected a snapshot, got {other:?}"),
    }
}

fn check_render(snapshot: GitSnapshot, expected: &str) {
    assert_eq!(GitContext::Repo(snapshot).render(), expected);
}

fn sample() -> GitSnapshot {
    GitSnapshot {
        worktree: PathBuf::from("/p"),
        common_dir: PathBuf::from("/p/.git"),
        branch: main_branch(),
        head: Head::Commit {
            short_id: "1a2b3c4".to_owned(),
            subject: "Fix the build".to_owned(),
        },
        upstream: Some(Upstream {
            name: "origin/main".to_owned(),
            ahead_behind: Some(AheadBehind {
                ahead: 1,
                behind: 2,
            }),
        }),
        counts: StatusCounts {
            staged: 1,
            modified: 2,
            untracked: 3,
            conflicted: 0,
        },
    }
}

#[test]
fn render_every_field() {
    check_render(
        sample(),
        "git: worktree /p, common_dir /p/.git, branch main, head 1a2b3c4 Fix the build, \
         upstream origin/main (ahead 1, behind 2), staged 1, modified 2, untracked 3",
    );
}

#[test]
fn render_without_upstream_detached_and_unborn() {
    check_render(
        GitSnapshot {
            branch: Branch::Detached,
            upstream: None,
            ..sample()
        },
        "git: worktree /p, common_dir /p/.git, branch (detached), head 1a2b3c4 Fix the build, \
         staged 1, modified 2, untracked 3",
    );
    check_render(
        GitSnapshot {
            head: Head::Unborn,
            upstream: None,
            counts: StatusCounts::default(),
            ..sample()
        },
        "git: worktree /p, common_dir /p/.git, branch main, head (unborn, no commits yet), \
         staged 0, modified 0, untracked 0",
    );
}

#[test]
fn render_gone_upstream_and_conflicts() {
    check_render(
        GitSnapshot {
            upstream: Some(Upstream {
                name: "origin/main".to_owned(),
                ahead_behind: None,
            }),
            counts: StatusCounts {
                conflicted: 2,
                ..StatusCounts::default()
            },
            ..sample()
        },
        "git: worktree /p, common_dir /p/.git, branch main, head 1a2b3c4 Fix the build, \
         upstream origin/main (gone), staged 0, modified 0, untracked 0, conflicted 2",
    );
}
