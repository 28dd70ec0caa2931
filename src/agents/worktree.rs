//! The git worktree a subagent run with `isolation: "worktree"` works in: made from the
//! project's `HEAD` on a branch of its own (`tern/<run-id>`), its changes committed to that
//! branch when the run ends, and brought into the project's working tree as edits when the
//! parent asks (a person approving them as any edit).

use std::path::{Path, PathBuf};

/// A run's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The worktree's top folder.
    pub root: PathBuf,
    /// Where the project folder is inside it (the project may be a subfolder of its
    /// repository).
    pub project_dir: PathBuf,
    /// `tern/<run-id>`.
    pub branch: String,
    /// The commit it started from (hex).
    pub base: String,
}

/// What a run changed on its branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `git diff --stat` of the change.
    pub stat: String,
    /// The files it touched, relative to the repository.
    pub files: Vec<PathBuf>,
}

fn failed(what: &str, err: &git2::Error) -> String {
    format!("{what}: {}", err.message())
}

/// Makes a worktree of the repository holding `project_dir` at `at` (which must not exist),
/// on a new branch `tern/<name>` from `HEAD`. `cwd` is mapped into it too.
pub fn create(
    project_dir: &Path,
    cwd: &Path,
    at: &Path,
    name: &str,
) -> Result<(Worktree, PathBuf), String> {
    let repo = git2::Repository::discover(project_dir).map_err(|err| {
        format!(
            "{} is not in a git repository, so a worktree cannot be made ({}); send the \
             subagent without isolation",
            project_dir.display(),
            err.message()
        )
    })?;
    let top = repo
        .workdir()
        .ok_or_else(|| "the repository is bare: it has no working tree".to_owned())?
        .to_path_buf();
    let head = repo
        .head()
        .and_then(|head| head.peel_to_commit())
        .map_err(|err| {
            failed(
                "the repository has no commit to start a worktree from",
                &err,
            )
        })?;
    let branch_name = format!("tern/{name}");
    let branch = repo
        .branch(&branch_name, &head, false)
        .map_err(|err| failed(&format!("could not make branch {branch_name}"), &err))?;
    if let Some(parent) = at.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|err| format!("could not create {}: {err}", parent.display()))?;
    }
    let mut options = git2::WorktreeAddOptions::new();
    options.reference(Some(branch.get()));
    if let Err(err) = repo.worktree(name, at, Some(&options)) {
        // The branch goes with the worktree that was not made.
        let mut branch = branch;
        let _ = branch.delete();
        return Err(failed("could not add the worktree", &err));
    }
    let inside = |path: &Path| {
        let top = top.canonicalize().unwrap_or_else(|_| top.clone());
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        path.strip_prefix(&top)
            .map(|rel| at.join(rel))
            .unwrap_or_else(|_| at.to_path_buf())
    };
    let worktree = Worktree {
        root: at.to_path_buf(),
        project_dir: inside(project_dir),
        branch: branch_name,
        base: head.id().to_string(),
    };
    Ok((worktree, inside(cwd)))
}

/// Commits everything changed in the worktree to its branch (deletions included); the
/// change from the base, or `None` when there is none.
pub fn commit_all(worktree: &Worktree, message: &str) -> Result<Option<Change>, String> {
    let repo = git2::Repository::open(&worktree.root)
        .map_err(|err| failed("could not open the worktree", &err))?;
    let mut index = repo
        .index()
        .map_err(|err| failed("could not read its index", &err))?;
    index
        .update_all(["*"], None)
        .and_then(|()| index.add_all(["*"], git2::IndexAddOption::DEFAULT, None))
        .and_then(|()| index.write())
        .map_err(|err| failed("could not stage its changes", &err))?;
    let tree_id = index
        .write_tree()
        .map_err(|err| failed("could not write its tree", &err))?;
    let head = repo
        .head()
        .and_then(|head| head.peel_to_commit())
        .map_err(|err| failed("could not read its branch", &err))?;
    if head.tree_id() != tree_id {
        let tree = repo
            .find_tree(tree_id)
            .map_err(|err| failed("could not read its tree", &err))?;
        let signature = repo
            .signature()
            .or_else(|_| git2::Signature::now("tern", "tern@localhost"))
            .map_err(|err| failed("could not sign the commit", &err))?;
        repo.commit(
            Some("HEAD"),
            &signature,
            &signature,
            message,
            &tree,
            &[&head],
        )
        .map_err(|err| failed("could not commit its changes", &err))?;
    }
    change(&repo, &worktree.base, &worktree.branch)
}

/// The change from `base` to the tip of `branch` in `repo`, or `None` when there is none.
fn change(repo: &git2::Repository, base: &str, branch: &str) -> Result<Option<Change>, String> {
    let diff = diff(repo, base, branch)?;
    if diff.deltas().len() == 0 {
        return Ok(None);
    }
    let stat = diff
        .stats()
        .and_then(|stats| stats.to_buf(git2::DiffStatsFormat::FULL, 80))
        .map_err(|err| failed("could not summarise the change", &err))?;
    let files = diff
        .deltas()
        .filter_map(|delta| delta.new_file().path().or(delta.old_file().path()))
        .map(Path::to_path_buf)
        .collect();
    Ok(Some(Change {
        stat: String::from_utf8_lossy(&stat).trim_end().to_owned(),
        files,
    }))
}

fn diff<'r>(
    repo: &'r git2::Repository,
    base: &str,
    branch: &str,
) -> Result<git2::Diff<'r>, String> {
    let base_tree = git2::Oid::from_str(base)
        .and_then(|oid| repo.find_commit(oid))
        .and_then(|commit| commit.tree())
        .map_err(|err| failed("could not find the commit the run started from", &err))?;
    let tip_tree = repo
        .find_branch(branch, git2::BranchType::Local)
        .and_then(|found| found.get().peel_to_tree())
        .map_err(|err| failed(&format!("could not find branch {branch}"), &err))?;
    repo.diff_tree_to_tree(Some(&base_tree), Some(&tip_tree), None)
        .map_err(|err| failed("could not compare the branch with its start", &err))
}

/// Applies the change of `branch` since `base` to the working tree of the repository holding
/// `project_dir`, as edits (nothing is committed). Refused, and nothing changed, when a file
/// it touches was changed there since in a way the change does not apply to.
pub fn bring_in(project_dir: &Path, base: &str, branch: &str) -> Result<Change, String> {
    let repo = git2::Repository::discover(project_dir)
        .map_err(|err| failed("could not open the project's repository", &err))?;
    let top = repo.workdir().map(Path::to_path_buf).unwrap_or_default();
    let Some(change) = change(&repo, base, branch)? else {
        return Err(format!(
            "{branch} changes nothing; there is nothing to bring in."
        ));
    };
    // An edit approved for the project reaches nothing outside it.
    let project = project_dir
        .canonicalize()
        .unwrap_or_else(|_| project_dir.to_path_buf());
    let top_real = top.canonicalize().unwrap_or_else(|_| top.clone());
    if let Some(outside) = change
        .files
        .iter()
        .find(|file| !top_real.join(file).starts_with(&project))
    {
        return Err(format!(
            "the change of {branch} touches {}, outside the project folder {}; nothing was \
             changed. Merge the branch with git instead",
            outside.display(),
            project.display()
        ));
    }
    let diff = diff(&repo, base, branch)?;
    let mut check = git2::ApplyOptions::new();
    check.check(true);
    repo.apply(&diff, git2::ApplyLocation::WorkDir, Some(&mut check))
        .map_err(|err| {
            format!(
                "the change of {branch} does not apply to the working tree as it is now ({}); \
                 nothing was changed. Merge the branch with git instead, or bring the files in \
                 one by one",
                err.message()
            )
        })?;
    repo.apply(&diff, git2::ApplyLocation::WorkDir, None)
        .map_err(|err| failed("could not apply the change", &err))?;
    Ok(Change {
        files: change.files.iter().map(|file| top.join(file)).collect(),
        ..change
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.path().join("old.txt"), "gone soon\n").unwrap();
        git(dir.path(), &["add", "."]);
        git(dir.path(), &["commit", "-q", "-m", "start"]);
        dir
    }

    #[test]
    fn a_run_works_on_its_branch_and_its_change_is_brought_in_as_edits() {
        let project = repo();
        let sessions = tempfile::tempdir().unwrap();
        let at = sessions.path().join("worktrees").join("run-1");
        let (worktree, cwd) =
            create(project.path(), &project.path().join("src"), &at, "run-1").unwrap();
        assert_eq!(worktree.branch, "tern/run-1");
        assert_eq!(cwd, at.join("src"));
        assert!(at.join("src/lib.rs").is_file());
        // The run's work: an edit, a new file, a deletion.
        std::fs::write(at.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
        std::fs::write(at.join("src/new.rs"), "fn c() {}\n").unwrap();
        std::fs::remove_file(at.join("old.txt")).unwrap();
        let change = commit_all(&worktree, "run-1").unwrap().expect("a change");
        assert!(change.stat.contains("3 files changed"), "{}", change.stat);
        // The project's tree is untouched until the change is brought in.
        assert!(project.path().join("old.txt").is_file());
        let brought = bring_in(project.path(), &worktree.base, &worktree.branch).unwrap();
        assert_eq!(brought.files.len(), 3);
        let lib = std::fs::read_to_string(project.path().join("src/lib.rs")).unwrap();
        assert_eq!(lib, "fn a() {}\nfn b() {}\n");
        assert!(project.path().join("src/new.rs").is_file());
        assert!(!project.path().join("old.txt").exists());
    }

    #[test]
    fn a_change_that_no_longer_applies_changes_nothing_and_says_why() {
        let project = repo();
        let sessions = tempfile::tempdir().unwrap();
        let at = sessions.path().join("run-2");
        let (worktree, _) = create(project.path(), project.path(), &at, "run-2").unwrap();
        assert_eq!(commit_all(&worktree, "nothing").unwrap(), None);
        std::fs::write(at.join("src/lib.rs"), "fn theirs() {}\n").unwrap();
        std::fs::write(at.join("added.txt"), "x\n").unwrap();
        commit_all(&worktree, "theirs").unwrap().expect("a change");
        std::fs::write(project.path().join("src/lib.rs"), "fn mine() {}\n").unwrap();
        let err = bring_in(project.path(), &worktree.base, &worktree.branch).unwrap_err();
        assert!(err.contains("does not apply"), "{err}");
        assert!(!project.path().join("added.txt").exists(), "all or nothing");
        let lib = std::fs::read_to_string(project.path().join("src/lib.rs")).unwrap();
        assert_eq!(lib, "fn mine() {}\n");
    }

    #[test]
    fn a_change_beyond_the_project_folder_is_not_brought_in() {
        let repo = repo();
        let project = repo.path().join("src");
        let sessions = tempfile::tempdir().unwrap();
        let at = sessions.path().join("run-4");
        let (worktree, cwd) = create(&project, &project, &at, "run-4").unwrap();
        assert_eq!(worktree.project_dir, at.join("src"));
        assert_eq!(cwd, at.join("src"));
        std::fs::write(at.join("src/lib.rs"), "fn inside() {}\n").unwrap();
        std::fs::write(at.join("old.txt"), "outside\n").unwrap();
        commit_all(&worktree, "both").unwrap().expect("a change");
        let err = bring_in(&project, &worktree.base, &worktree.branch).unwrap_err();
        assert!(err.contains("outside the project folder"), "{err}");
        let lib = std::fs::read_to_string(project.join("lib.rs")).unwrap();
        assert_eq!(lib, "fn a() {}\n", "nothing changed");
    }

    #[test]
    fn a_failed_worktree_leaves_no_branch_behind() {
        let project = repo();
        let taken = project.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("file"), "x").unwrap();
        assert!(create(project.path(), project.path(), &taken, "run-5").is_err());
        let repo = git2::Repository::open(project.path()).unwrap();
        assert!(
            repo.find_branch("tern/run-5", git2::BranchType::Local)
                .is_err()
        );
    }

    #[test]
    fn outside_a_repository_there_is_no_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let err = create(dir.path(), dir.path(), &dir.path().join("w"), "run-3").unwrap_err();
        assert!(err.contains("not in a git repository"), "{err}");
    }
}
