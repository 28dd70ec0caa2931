//! The git half of the `[working-context]` block: where the worktree is, which branch and
//! commit it is on, how it stands against its upstream, and how many files are staged,
//! modified or untracked.
//!
//! This is the only file that talks to git2, so the rest of tern sees plain data. The model is
//! told counts and never the names of changed files: names can leak more than the model needs,
//! and a long list would churn the prompt on every turn. Reading git can stall (a network
//! filesystem, a huge worktree, a lock held elsewhere), so [`working_git`] runs the read on a
//! thread of its own and gives up when its budget passes: the turn goes on with a one-line
//! reason instead of waiting.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt;
use std::num::NonZeroUsize;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use git2::{ErrorCode, Repository, Status, StatusOptions};

use super::git_share::shared_git_with;
use super::in_flight;
use super::status_split::{self, TrackedCounts};

/// How long a turn waits for the git working context before going on without it.
pub const GIT_BUDGET: Duration = Duration::from_secs(2);

/// Commit subjects longer than this many characters are cut, so one verbose commit cannot
/// crowd the working context.
const SUBJECT_MAX_CHARS: usize = 80;

/// At most this many threads count the status; more mostly adds copies of the index.
const MAX_STATUS_THREADS: usize = 4;

/// An index smaller than this (a few thousand files) is counted on one thread: opening the
/// repository again on each helper costs more than the split saves.
const SPLIT_MIN_INDEX_BYTES: u64 = 512 * 1024;

const STATUS_STEP: &str = "reading the status";

/// The state of a git worktree at one moment, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSnapshot {
    /// The top of the working tree (a linked worktree reports its own directory).
    pub worktree: PathBuf,
    /// The repository's shared git directory, the same for every worktree of it.
    pub common_dir: PathBuf,
    /// The checked-out branch, or detached.
    pub branch: Branch,
    /// The commit HEAD resolves to, or unborn.
    pub head: Head,
    /// The branch's upstream, only when the branch tracks one and has commits.
    pub upstream: Option<Upstream>,
    /// How many paths are staged, modified, untracked or conflicted.
    pub counts: StatusCounts,
}

/// What HEAD names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Branch {
    /// A branch, by its short name (`main`, `feature/x`).
    Named(String),
    /// HEAD points straight at a commit.
    Detached,
}

/// The commit HEAD resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// A commit: its abbreviated id and the first line of its message.
    Commit { short_id: String, subject: String },
    /// The branch has no commits yet: a fresh repository, an orphan branch, or a HEAD naming
    /// a branch that does not exist.
    Unborn,
}

/// The remote-tracking branch the current branch follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    /// Its short name, such as `origin/main`.
    pub name: String,
    /// Commits on each side, or `None` when the upstream branch no longer exists (what git
    /// calls `gone`).
    pub ahead_behind: Option<AheadBehind>,
}

/// How far a branch and its upstream have diverged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AheadBehind {
    /// Commits on the branch that the upstream lacks.
    pub ahead: usize,
    /// Commits on the upstream that the branch lacks.
    pub behind: usize,
}

/// Path counts as `git status` groups them. A path both staged and modified again since
/// counts in both; an untracked directory counts once, as `git status` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub staged: usize,
    pub modified: usize,
    pub untracked: usize,
    /// Paths with unresolved merge conflicts; these count nowhere else.
    pub conflicted: usize,
}

/// Why there is no snapshot of a directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitUnavailable {
    /// Neither the directory nor any parent holds a git repository.
    #[error("not a git repository")]
    NotARepository,
    /// The repository has no working tree to describe.
    #[error("bare repository, no working tree")]
    BareRepository,
    /// git2 failed at one step; `message` is its own explanation.
    #[error("{step}: {message}")]
    Git { step: &'static str, message: String },
}

/// The git working context for one turn: a snapshot, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitContext {
    Repo(GitSnapshot),
    Unavailable { reason: String },
}

impl From<Result<GitSnapshot, GitUnavailable>> for GitContext {
    /// A read's outcome as the turn is told it.
    fn from(read: Result<GitSnapshot, GitUnavailable>) -> Self {
        match read {
            Ok(snapshot) => GitContext::Repo(snapshot),
            Err(unavailable) => GitContext::Unavailable {
                reason: unavailable.to_string(),
            },
        }
    }
}

impl GitContext {
    /// The `git:` line of the `[working-context]` block.
    pub fn render(&self) -> String {
        match self {
            GitContext::Repo(snapshot) => snapshot.render(),
            GitContext::Unavailable { reason } => format!("git: unavailable: {reason}"),
        }
    }
}

impl GitSnapshot {
    /// The `git:` line of the `[working-context]` block, one line with a fixed field order:
    ///
    /// `git: worktree /p, common_dir /p/.git, branch main, head 1a2b3c4 Fix the build,
    /// upstream origin/main (ahead 1, behind 2), staged 1, modified 2, untracked 3`
    ///
    /// The upstream appears only when there is one, and the conflicted count only when it is
    /// not zero.
    pub fn render(&self) -> String {
        let mut line = format!(
            "git: worktree {}, common_dir {}, branch {}, head {}",
            self.worktree.display(),
            self.common_dir.display(),
            self.branch,
            self.head,
        );
        if let Some(upstream) = &self.upstream {
            line.push_str(&format!(", upstream {upstream}"));
        }
        let c = &self.counts;
        line.push_str(&format!(
            ", staged {}, modified {}, untracked {}",
            c.staged, c.modified, c.untracked
        ));
        if c.conflicted > 0 {
            line.push_str(&format!(", conflicted {}", c.conflicted));
        }
        line
    }
}

impl fmt::Display for Branch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Branch::Named(name) => f.write_str(name),
            Branch::Detached => f.write_str("(detached)"),
        }
    }
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Head::Commit { short_id, subject } if subject.is_empty() => f.write_str(short_id),
            Head::Commit { short_id, subject } => write!(f, "{short_id} {subject}"),
            Head::Unborn => f.write_str("(unborn, no commits yet)"),
        }
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ahead_behind {
            Some(AheadBehind { ahead, behind }) => {
                write!(f, "{} (ahead {ahead}, behind {behind})", self.name)
            }
            None => write!(f, "{} (gone)", self.name),
        }
    }
}

/// Reads the git working context on a thread of its own, giving up after `budget`.
///
/// Never fails: a directory outside git, a broken repository or a slow read all become
/// [`GitContext::Unavailable`] with a reason, and the turn goes on.
///
/// Turns that ask for the same directory while a read waits to start share it
/// ([`shared_git_with`]).
pub async fn working_git(dir: &Path, budget: Duration) -> GitContext {
    shared_git_with(dir, budget, snapshot).await
}

/// [`working_git`] with the read itself supplied by the caller, so the budget can be shown to
/// hold against a read that does not return.
///
/// A read that overruns is abandoned, not stopped: its thread finishes in the background and
/// its result is dropped. Until it has finished, the same directory is not read again.
pub async fn working_git_with<F>(dir: &Path, budget: Duration, read: F) -> GitContext
where
    F: FnOnce(&Path) -> Result<GitSnapshot, GitUnavailable> + Send + 'static,
{
    read_within(dir, budget, read)
        .await
        .unwrap_or_else(|TimedOut| timed_out(budget))
}

/// The read's budget passed before it ended.
pub(super) struct TimedOut;

/// What a turn is told when the read did not end within `budget`.
pub(super) fn timed_out(budget: Duration) -> GitContext {
    GitContext::Unavailable {
        reason: format!("timed out after {}", describe_budget(budget)),
    }
}

/// [`working_git_with`], telling a read that overran its budget apart.
pub(super) async fn read_within<F>(
    dir: &Path,
    budget: Duration,
    read: F,
) -> Result<GitContext, TimedOut>
where
    F: FnOnce(&Path) -> Result<GitSnapshot, GitUnavailable> + Send + 'static,
{
    let ticket = match in_flight::begin(dir, budget) {
        Ok(ticket) => ticket,
        Err(running) => {
            return Ok(GitContext::Unavailable {
                reason: format!(
                    "skipped: an earlier read of this repository is still running after {} s",
                    running.as_secs()
                ),
            });
        }
    };
    let dir = dir.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("tern-git".to_owned())
        .spawn(move || {
            // Long work, whichever thread asked for it.
            crate::priority::ordinary_slice();
            let _ticket = ticket;
            // Its turn went on without it while it waited for a place: nobody reads the
            // result, and reading would only hold a place others wait for.
            let Some(_slot) = read_slot(budget) else {
                return;
            };
            if tx.is_closed() {
                return;
            }
            let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&dir)));
            let _ = tx.send(read);
        });
    if let Err(err) = spawned {
        return Ok(GitContext::Unavailable {
            reason: format!("could not start a thread to read it: {err}"),
        });
    }
    match tokio::time::timeout(budget, rx).await {
        Ok(Ok(Ok(read))) => Ok(GitContext::from(read)),
        Ok(Ok(Err(_panic))) => Ok(GitContext::Unavailable {
            reason: "reading git panicked".to_owned(),
        }),
        // The read was not started: its budget passed while it waited for a place.
        Ok(Err(_)) | Err(_) => Err(TimedOut),
    }
}

/// The most reads of git that run at once in the process, not counting those past their
/// turn's budget (abandoned, maybe stalled: a hung repository must not hold up the others);
/// more wait for a place, and turns that ask for a directory meanwhile share the read that
/// waits for it ([`shared_git_with`]).
const MAX_READS: usize = 2;

/// The reads running: an id and when each one's turn stops waiting for it.
static READS_RUNNING: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());
static READ_ENDED: Condvar = Condvar::new();
static NEXT_READ: AtomicU64 = AtomicU64::new(0);

/// A place among the [`MAX_READS`] reads running, held until dropped.
struct ReadSlot(u64);

/// Waits for a place for a read whose turn waits `budget` from now at most; `None` once
/// that has passed (the turn went on without it).
fn read_slot(budget: Duration) -> Option<ReadSlot> {
    let deadline = Instant::now() + budget;
    let mut running = READS_RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let now = Instant::now();
        if now >= deadline {
            // A place that came free while this one gave up goes to the next waiting.
            READ_ENDED.notify_one();
            return None;
        }
        if running.iter().filter(|(_, due)| *due > now).count() < MAX_READS {
            let id = NEXT_READ.fetch_add(1, Ordering::Relaxed);
            running.push((id, deadline));
            return Some(ReadSlot(id));
        }
        // Until a read ends, this one's budget passes, or the first of those running
        // within their budgets passes it.
        let wait = running
            .iter()
            .map(|(_, due)| *due)
            .filter(|due| *due > now)
            .chain([deadline])
            .min()
            .map_or(Duration::ZERO, |due| due - now);
        running = READ_ENDED
            .wait_timeout(running, wait)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

impl Drop for ReadSlot {
    fn drop(&mut self) {
        let mut running = READS_RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|(id, _)| *id != self.0);
        READ_ENDED.notify_one();
    }
}

/// `2 s` for whole seconds, `250 ms` otherwise.
pub(super) fn describe_budget(budget: Duration) -> String {
    if budget.subsec_nanos() == 0 && budget.as_secs() > 0 {
        format!("{} s", budget.as_secs())
    } else {
        format!("{} ms", budget.as_millis())
    }
}

/// Reads the git working context of `dir` (or of the repository above it). Blocks, and counts
/// the status on up to four threads; a big worktree takes about as long as `git status`.
pub fn snapshot(dir: &Path) -> Result<GitSnapshot, GitUnavailable> {
    snapshot_on(dir, None)
}

/// [`snapshot`] counting the status on `threads` threads (at least one) instead of choosing
/// by the index's size and the cores, so the split can be checked on any repository.
pub fn snapshot_on(dir: &Path, threads: Option<usize>) -> Result<GitSnapshot, GitUnavailable> {
    let repo = open(dir)?;
    let worktree = repo
        .workdir()
        .map(without_trailing_separator)
        .ok_or(GitUnavailable::BareRepository)?;
    let common_dir = without_trailing_separator(repo.commondir());
    let parts = threads.map_or_else(|| status_threads(&repo), |n| n.max(1));

    std::thread::scope(|scope| {
        // The helpers open their own handles and load the index while this thread reads HEAD
        // and plans the split; each then counts the part it is sent, or stops if sent none.
        let helpers: Vec<_> = (1..parts)
            .map(|_| {
                let (send, receive) = mpsc::channel();
                (
                    send,
                    scope.spawn(move || count_part_when_sent(dir, receive)),
                )
            })
            .collect();

        let (branch, head_oid, head) = read_head(&repo)?;
        let upstream = match (&branch, head_oid) {
            (Branch::Named(name), Some(oid)) => read_upstream(&repo, name, oid)?,
            _ => None,
        };
        let split = plan_split(&repo, &worktree, parts)?;
        let counts = count_status(&repo, split, helpers)?;

        Ok(GitSnapshot {
            worktree,
            common_dir,
            branch,
            head,
            upstream,
            counts,
        })
    })
}

fn open(dir: &Path) -> Result<Repository, GitUnavailable> {
    Repository::discover(dir).map_err(|e| match e.code() {
        ErrorCode::NotFound => GitUnavailable::NotARepository,
        _ => failed("opening the repository", &e),
    })
}

/// The branch, the commit id and the described commit that HEAD leads to.
fn read_head(repo: &Repository) -> Result<(Branch, Option<git2::Oid>, Head), GitUnavailable> {
    const STEP: &str = "reading HEAD";
    match repo.head() {
        Ok(reference) => {
            let branch = match reference.name_bytes() {
                b"HEAD" => Branch::Detached,
                name => Branch::Named(short_ref_name(&String::from_utf8_lossy(name))),
            };
            let commit = reference.peel_to_commit().map_err(|e| failed(STEP, &e))?;
            let short_id = match commit.as_object().short_id() {
                Ok(buf) => String::from_utf8_lossy(&buf).into_owned(),
                Err(_) => commit.id().to_string()[..7].to_owned(),
            };
            let subject = commit
                .summary_bytes()
                .map(|bytes| one_line(&String::from_utf8_lossy(bytes), SUBJECT_MAX_CHARS))
                .unwrap_or_default();
            Ok((
                branch,
                Some(commit.id()),
                Head::Commit { short_id, subject },
            ))
        }
        Err(e) if e.code() == ErrorCode::UnbornBranch => {
            // HEAD names a branch with no commits; the branch name is still worth telling.
            let head = repo.find_reference("HEAD").map_err(|e| failed(STEP, &e))?;
            let target = head
                .symbolic_target_bytes()
                .map(|t| short_ref_name(&String::from_utf8_lossy(t)))
                .unwrap_or_default();
            Ok((Branch::Named(target), None, Head::Unborn))
        }
        Err(e) => Err(failed(STEP, &e)),
    }
}

/// The upstream of branch `name` at commit `local`, when one is configured.
fn read_upstream(
    repo: &Repository,
    name: &str,
    local: git2::Oid,
) -> Result<Option<Upstream>, GitUnavailable> {
    const STEP: &str = "reading the upstream";
    let upstream_ref = match repo.branch_upstream_name(&format!("refs/heads/{name}")) {
        Ok(buf) => String::from_utf8_lossy(&buf).into_owned(),
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(failed(STEP, &e)),
    };
    let ahead_behind = match repo.find_reference(&upstream_ref) {
        Ok(reference) => {
            let target = reference
                .resolve()
                .ok()
                .and_then(|r| r.target())
                .ok_or_else(|| GitUnavailable::Git {
                    step: STEP,
                    message: format!("{upstream_ref} does not point at a commit"),
                })?;
            let (ahead, behind) = repo
                .graph_ahead_behind(local, target)
                .map_err(|e| failed(STEP, &e))?;
            Some(AheadBehind { ahead, behind })
        }
        Err(e) if e.code() == ErrorCode::NotFound => None,
        Err(e) => return Err(failed(STEP, &e)),
    };
    Ok(Some(Upstream {
        name: short_ref_name(&upstream_ref),
        ahead_behind,
    }))
}

/// Threads that count the status: one for a small index, else one per core, up to
/// [`MAX_STATUS_THREADS`].
fn status_threads(repo: &Repository) -> usize {
    // A linked worktree keeps its own index in its own git dir, which `path` names.
    let index_bytes = std::fs::metadata(repo.path().join("index")).map_or(0, |m| m.len());
    if index_bytes < SPLIT_MIN_INDEX_BYTES {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_STATUS_THREADS)
}

/// Path lists for counting the status in `parts` pieces, or none to count it in one go. See
/// [`status_split`] for why and how.
fn plan_split(
    repo: &Repository,
    worktree: &Path,
    parts: usize,
) -> Result<Vec<Vec<Vec<u8>>>, GitUnavailable> {
    if parts < 2 {
        return Ok(Vec::new());
    }
    // Without the top-level listing an untracked name could fall outside every part.
    let Some(mut names) = list_dir(worktree) else {
        return Ok(Vec::new());
    };
    let index = repo.index().map_err(|e| failed(STATUS_STEP, &e))?;
    let mut tracked = TrackedCounts::default();
    for entry in index.iter() {
        tracked.add(&entry.path);
    }
    let head_tree = repo.head().and_then(|head| head.peel_to_tree()).ok();
    if let Some(tree) = &head_tree {
        names.extend(tree.iter().map(|entry| entry.name_bytes().to_vec()));
    }
    let children = |name: &[u8]| -> Option<BTreeSet<Vec<u8>>> {
        let path = worktree.join(OsStr::from_bytes(name));
        let mut listed = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => list_dir(&path)?,
            // A file or symlink where the index has a directory is itself a change.
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(_) => return None,
        };
        if let Some(entry) = head_tree
            .as_ref()
            .and_then(|tree| tree.get_name_bytes(name))
        {
            // HEAD holding a file here means the name itself can be reported.
            let subtree = entry.to_object(repo).ok()?.into_tree().ok()?;
            listed.extend(subtree.iter().map(|entry| entry.name_bytes().to_vec()));
        }
        Some(listed)
    };
    Ok(status_split::split(tracked, names, children, parts))
}

/// The names in `dir` other than `.git`, or `None` if it cannot be read in full.
fn list_dir(dir: &Path) -> Option<BTreeSet<Vec<u8>>> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let name = entry.ok()?.file_name();
        if name != ".git" {
            names.insert(name.as_bytes().to_vec());
        }
    }
    Some(names)
}

type Helper<'scope> = std::thread::ScopedJoinHandle<'scope, Result<StatusCounts, GitUnavailable>>;

/// Counts the status on this thread and the helpers: the first path list here, one list to
/// each helper; helpers left without a list stop. No lists at all counts the whole worktree
/// here.
fn count_status<'scope>(
    repo: &Repository,
    split: Vec<Vec<Vec<u8>>>,
    helpers: Vec<(mpsc::Sender<Vec<Vec<u8>>>, Helper<'scope>)>,
) -> Result<StatusCounts, GitUnavailable> {
    let mut lists = split.into_iter();
    let own = lists.next().unwrap_or_default();
    let mut running = Vec::new();
    for (send, helper) in helpers {
        if let Some(list) = lists.next() {
            // A helper that cannot take its list has already failed; joining it reports why.
            let _ = send.send(list);
            running.push(helper);
        }
    }
    let mut counts = count_part(repo, &own)?;
    for helper in running {
        let part = match helper.join() {
            Ok(part) => part?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        counts.staged += part.staged;
        counts.modified += part.modified;
        counts.untracked += part.untracked;
        counts.conflicted += part.conflicted;
    }
    Ok(counts)
}

/// A helper thread's work: open the repository, load its index, then count the part it is
/// sent.
fn count_part_when_sent(
    dir: &Path,
    part: mpsc::Receiver<Vec<Vec<u8>>>,
) -> Result<StatusCounts, GitUnavailable> {
    let repo = open(dir)?;
    repo.index().map_err(|e| failed(STATUS_STEP, &e))?;
    match part.recv() {
        Ok(paths) => count_part(&repo, &paths),
        Err(mpsc::RecvError) => Ok(StatusCounts::default()),
    }
}

/// Counts changed paths under `paths` (the whole worktree when empty) the way plain
/// `git status` groups them, doing no more work than the counts need: ignored files are
/// skipped, an untracked directory is reported as one entry without walking into it, and
/// renames are not looked for (a rename counts as a deletion and an addition).
fn count_part(repo: &Repository, paths: &[Vec<u8>]) -> Result<StatusCounts, GitUnavailable> {
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .include_unmodified(false)
        .renames_head_to_index(false)
        .renames_index_to_workdir(false);
    if !paths.is_empty() {
        // Literal paths, each covering everything below it, rather than patterns.
        options.disable_pathspec_match(true);
        for path in paths {
            options.pathspec(path.as_slice());
        }
    }
    let statuses = repo
        .statuses(Some(&mut options))
        .map_err(|e| failed(STATUS_STEP, &e))?;

    let staged = Status::INDEX_NEW
        | Status::INDEX_MODIFIED
        | Status::INDEX_DELETED
        | Status::INDEX_RENAMED
        | Status::INDEX_TYPECHANGE;
    let modified =
        Status::WT_MODIFIED | Status::WT_DELETED | Status::WT_RENAMED | Status::WT_TYPECHANGE;
    let mut counts = StatusCounts::default();
    for entry in statuses.iter() {
        let status = entry.status();
        if status.contains(Status::CONFLICTED) {
            counts.conflicted += 1;
            continue;
        }
        if status.intersects(staged) {
            counts.staged += 1;
        }
        if status.intersects(modified) {
            counts.modified += 1;
        }
        if status.contains(Status::WT_NEW) {
            counts.untracked += 1;
        }
    }
    Ok(counts)
}

fn failed(step: &'static str, error: &git2::Error) -> GitUnavailable {
    GitUnavailable::Git {
        step,
        message: error.message().to_owned(),
    }
}

/// `refs/heads/main` → `main`, `refs/remotes/origin/main` → `origin/main`; anything else is
/// kept whole.
fn short_ref_name(name: &str) -> String {
    ["refs/heads/", "refs/remotes/"]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .unwrap_or(name)
        .to_owned()
}

/// libgit2 reports directories with a trailing `/`; the context shows them without.
fn without_trailing_separator(path: &Path) -> PathBuf {
    path.components().collect()
}

/// Control characters become spaces and the text is cut to `max` characters, so a commit
/// message can neither break the line nor run on.
fn one_line(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let clean = clean.trim();
    match clean.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", clean[..cut].trim_end()),
        None => clean.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_wording() {
        for (budget, expected) in [
            (Duration::from_secs(2), "2 s"),
            (Duration::from_millis(1500), "1500 ms"),
            (Duration::from_millis(1), "1 ms"),
            (Duration::ZERO, "0 ms"),
        ] {
            assert_eq!(describe_budget(budget), expected);
        }
    }

    #[test]
    fn subjects_stay_on_one_line() {
        assert_eq!(one_line("  Fix\tthe\u{7}build  ", 80), "Fix the build");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
    }
}
