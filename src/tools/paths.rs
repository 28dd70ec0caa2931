//! Paths given by the model: resolving them against the working directory, normalising them,
//! and deciding whether they stay inside the project.
//!
//! The check works on the path the tool will actually open. `..` in the model's path is removed
//! lexically first, and the tool then uses that normalised path, so the only indirection left
//! for the operating system to follow is symlinks; [`real_path`] follows those the way the
//! kernel does (a `..` inside a link's target included), so a link inside the project that
//! points elsewhere counts as elsewhere. The writing tools write to that same resolved path.

use super::args::Args;
use super::path_text;
use super::{ApprovalNeed, ToolContext};
use serde_json::Value;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one path may go through before it is treated as a loop.
const MAX_LINK_HOPS: usize = 40;

/// Whether a call only looks at a path or changes what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Turns a model-given path into an absolute, lexically normalised one. Relative paths resolve
/// against `cwd`; `~` is not expanded (a model that writes `~/x` means a path the shell would
/// expand, and guessing that here would hide the mistake).
///
/// A name in the escaped form the tools show for names that are not UTF-8 ([`path_text`])
/// means the bytes it stands for. When a typed path could mean either, because a name with a
/// real backslash happens to read as escaped, the escaped reading wins unless nothing exists
/// there and something exists under the text as typed: what the tools showed always reads
/// back to the file it came from, and a literal name still works where it is the only one.
pub fn resolve(cwd: &Path, raw: &str) -> Result<PathBuf, String> {
    if raw.trim().is_empty() {
        return Err("the path is empty".to_string());
    }
    if raw.contains('\0') {
        return Err("the path contains a NUL byte".to_string());
    }
    let literal = normalize(&cwd.join(raw));
    let Some(decoded) = path_text::decode(raw) else {
        return Ok(literal);
    };
    let decoded = normalize(&cwd.join(decoded));
    let exists = |path: &Path| fs::symlink_metadata(path).is_ok();
    if !exists(&decoded) && exists(&literal) {
        return Ok(literal);
    }
    Ok(decoded)
}

/// Removes `.` and resolves `..` without touching the file system. `..` at the root stays at
/// the root, as the kernel does.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                // A relative path climbing above its start keeps its `..`.
                _ => out.push(".."),
            },
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Where `path` really leads, resolved the way the kernel resolves it: component by component
/// from the root, following every symlink where it stands and applying a `..` (in a link's
/// target) to the directory reached so far, never lexically. Components that do not exist yet
/// are appended as they are. `None` for a symlink loop or a link that cannot be read.
///
/// Following links by hand rather than canonicalising the longest existing ancestor matters
/// for dangling links: in `l -> s/../x` with `s -> /elsewhere/a/b`, the `..` applies to
/// `/elsewhere/a/b`, so writing through `l` creates `/elsewhere/a/x`.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    let start = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut resolved = PathBuf::from("/");
    // The components still to walk, the next one last.
    let mut pending: Vec<OsString> = Vec::new();
    push_components(&mut pending, &start);
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&name);
        // Every component is looked at, even below one that does not exist: a `..` may climb
        // back to existing ground, where links must be followed again.
        match fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return None;
                }
                let target = fs::read_link(&candidate).ok()?;
                if target.has_root() {
                    resolved = PathBuf::from("/");
                }
                // A relative target resolves against the link's directory, `resolved` now.
                push_components(&mut pending, &target);
            }
            _ => resolved = candidate,
        }
    }
    Some(resolved)
}

/// Pushes the names and `..`s of `path` onto `pending` so that its first component is popped
/// first. The root and `.` are dropped: the caller handles the root, and `.` changes nothing.
fn push_components(pending: &mut Vec<OsString>, path: &Path) {
    let start = pending.len();
    for component in path.components() {
        match component {
            Component::Normal(name) => pending.push(name.to_os_string()),
            Component::ParentDir => pending.push(OsString::from("..")),
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
        }
    }
    pending[start..].reverse();
}

/// True when `path` (absolute and normalised) is the project directory or inside it, after
/// symlinks on both sides are resolved.
pub fn is_inside(project_dir: &Path, path: &Path) -> bool {
    let project = real_path(project_dir).unwrap_or_else(|| normalize(project_dir));
    match real_path(path) {
        Some(real) => real.starts_with(&project),
        None => false,
    }
}

/// The approval a call needs to read or change `path` (absolute and normalised).
///
/// A write into the repository's own git directory (`.git/hooks/*`, `.git/config`, …) needs
/// the approval of a command, not of an edit: git runs hooks and commands named in its config
/// later, on the user's behalf, and changes there never show up in `git status` for the user
/// to review. Hooks kept in tracked files (`.husky/`, a `core.hooksPath` in the worktree) are
/// ordinary edits, visible in the diff like any other change to code that runs.
pub fn access_need(ctx: &ToolContext, path: &Path, access: Access) -> ApprovalNeed {
    let project = real_path(&ctx.project_dir).unwrap_or_else(|| normalize(&ctx.project_dir));
    let real = real_path(path);
    match &real {
        Some(real) if real.starts_with(&project) => match access {
            Access::Read => ApprovalNeed::None,
            Access::Write if is_git_internal(&project, real) => ApprovalNeed::Exec,
            Access::Write => ApprovalNeed::Edit,
        },
        _ if access == Access::Read && ctx.readable_dirs.iter().any(|dir| is_inside(dir, path)) => {
            ApprovalNeed::None
        }
        // Name where the path really leads, so the person approving sees through symlinks.
        _ => ApprovalNeed::OutsideProject(real.unwrap_or_else(|| path.to_path_buf())),
    }
}

/// True when `real` (a resolved path inside the resolved `project`) lies in a git directory:
/// below a `.git` component, or below the directory that a `.git` file between the project
/// and `real` names (`gitdir: …`, as in worktrees and submodules), or that directory's
/// `commondir`.
fn is_git_internal(project: &Path, real: &Path) -> bool {
    let Ok(inside) = real.strip_prefix(project) else {
        return false;
    };
    // Ignoring case: on a case-insensitive file system `.GIT/hooks` is the same directory.
    if inside
        .components()
        .any(|c| c.as_os_str().to_string_lossy().eq_ignore_ascii_case(".git"))
    {
        return true;
    }
    real.ancestors()
        .skip(1)
        .take_while(|dir| dir.starts_with(project))
        .flat_map(linked_git_dirs)
        .any(|git_dir| real.starts_with(git_dir))
}

/// The git directories a `.git` file in `dir` points to (its `gitdir`, and that one's
/// `commondir`), resolved. Empty when `dir/.git` is not such a file.
fn linked_git_dirs(dir: &Path) -> Vec<PathBuf> {
    let dot_git = dir.join(".git");
    let is_file = fs::symlink_metadata(&dot_git).is_ok_and(|meta| meta.is_file());
    let Some(text) = is_file.then(|| fs::read_to_string(&dot_git).ok()).flatten() else {
        return Vec::new();
    };
    let Some(git_dir) = text
        .lines()
        .find_map(|line| line.strip_prefix("gitdir:"))
        .map(|rest| dir.join(rest.trim()))
        .and_then(|git_dir| real_path(&git_dir))
    else {
        return Vec::new();
    };
    let common = fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .and_then(|rest| real_path(&git_dir.join(rest.trim())));
    std::iter::once(git_dir).chain(common).collect()
}

/// The approval for a path argument that may be absent (then the working directory is meant).
/// An argument that does not resolve needs nothing: the call fails on it before touching disk.
pub fn need_for_arg(ctx: &ToolContext, raw: Option<&str>, access: Access) -> ApprovalNeed {
    let path = match raw {
        Some(raw) => match resolve(&ctx.cwd, raw) {
            Ok(path) => path,
            Err(_) => return ApprovalNeed::None,
        },
        None => normalize(&ctx.cwd),
    };
    access_need(ctx, &path, access)
}

/// Whether a tool's path argument must be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathArg {
    Required,
    /// May be left out, meaning the working directory.
    Optional,
}

/// The approval a call to `tool` needs, judged by the `path` argument in its `input`.
/// Arguments that do not parse make the call fail before it touches anything, so a read then
/// needs nothing; a write is still a write, so a malformed call never looks like a free read.
pub fn need_for_input(
    ctx: &ToolContext,
    tool: &'static str,
    input: &Value,
    arg: PathArg,
    access: Access,
) -> ApprovalNeed {
    let raw = Args::new(tool, input).and_then(|args| match arg {
        PathArg::Required => args.string("path").map(Some),
        PathArg::Optional => args.opt_string("path"),
    });
    match (raw, access) {
        (Ok(raw), access) => need_for_arg(ctx, raw, access),
        (Err(_), Access::Read) => ApprovalNeed::None,
        (Err(_), Access::Write) => ApprovalNeed::Edit,
    }
}

/// How a path is shown to the model: relative to the working directory when under it, absolute
/// otherwise, and escaped where it is not UTF-8 ([`path_text`]), so it can be passed back as is.
pub fn display(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => path_text::encode(rel).into_owned(),
        Err(_) => path_text::encode(path).into_owned(),
    }
}

/// "X does not exist", with names that look like what was meant. `shown` is how the model
/// named `path`.
pub(crate) fn not_found_message(path: &Path, shown: &str) -> String {
    let mut msg = format!("{shown} does not exist.");
    let parent = path.parent().unwrap_or(Path::new("/"));
    if !parent.is_dir() {
        msg.push_str(&format!(
            " Its directory {} does not exist either.",
            path_text::encode(parent)
        ));
    } else {
        let similar = similar_names(path);
        if !similar.is_empty() {
            msg.push_str(&format!(
                " Similar names in {}: {}.",
                path_text::encode(parent),
                similar.join(", ")
            ));
        }
    }
    msg.push_str(" Use glob to find files by name.");
    msg
}

/// Up to three names in `path`'s directory that look like what was meant, for a "not found"
/// message, shown as the tools show names. Cheap: one directory listing, capped.
pub fn similar_names(path: &Path) -> Vec<String> {
    let (Some(dir), Some(wanted)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let wanted = path_text::encode(Path::new(wanted)).to_lowercase();
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut scored: Vec<(usize, String)> = entries
        .take(2000)
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = path_text::encode(Path::new(&entry.file_name())).into_owned();
            let lower = name.to_lowercase();
            let distance = edit_distance(&wanted, &lower);
            let close = distance <= (wanted.chars().count() / 3).max(2)
                || stem(&lower) == stem(&wanted)
                || lower.contains(&wanted) && wanted.len() >= 3;
            close.then_some((distance, name))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

/// A file name without its last extension.
fn stem(name: &str) -> &str {
    match name.rfind('.') {
        Some(0) | None => name,
        Some(dot) => &name[..dot],
    }
}

/// Levenshtein distance over chars; names are short, so the quadratic table is fine.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_removes_dots_and_clamps_at_root() {
        let check = |input: &str, expected: &str| {
            assert_eq!(
                normalize(Path::new(input)),
                PathBuf::from(expected),
                "{input}"
            );
        };
        check("/a/./b/../c", "/a/c");
        check("/a/b/../../..", "/");
        check("/../etc", "/etc");
        check("/a//b/", "/a/b");
        check("a/../..", "..");
        check("a/..", ".");
    }

    #[test]
    fn resolve_joins_relative_paths_and_keeps_tilde_literal() {
        let cwd = Path::new("/p/sub");
        assert_eq!(resolve(cwd, "x.rs").unwrap(), PathBuf::from("/p/sub/x.rs"));
        assert_eq!(resolve(cwd, "../x.rs").unwrap(), PathBuf::from("/p/x.rs"));
        assert_eq!(
            resolve(cwd, "/etc/passwd").unwrap(),
            PathBuf::from("/etc/passwd")
        );
        assert_eq!(resolve(cwd, "~/x").unwrap(), PathBuf::from("/p/sub/~/x"));
        assert!(resolve(cwd, "  ").is_err());
        assert!(resolve(cwd, "a\0b").is_err());
        // Escaped names are read back to their bytes, each name on its own.
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(
            resolve(cwd, "../caf\\xe9/a\\b").unwrap(),
            Path::new(std::ffi::OsStr::from_bytes(b"/p/caf\xe9/a\\b"))
        );
        assert_eq!(
            resolve(cwd, "a\\x41").unwrap(),
            PathBuf::from("/p/sub/a\\x41")
        );
    }

    #[test]
    fn display_is_relative_under_cwd_and_absolute_elsewhere() {
        let cwd = Path::new("/p");
        assert_eq!(display(cwd, Path::new("/p/src/a.rs")), "src/a.rs");
        assert_eq!(display(cwd, Path::new("/p")), ".");
        assert_eq!(display(cwd, Path::new("/q/a.rs")), "/q/a.rs");
    }

    #[test]
    fn malformed_calls_read_freely_but_still_need_approval_to_write() {
        let ctx = ToolContext {
            project_dir: PathBuf::from("/p"),
            cwd: PathBuf::from("/p"),
            temp_dir: PathBuf::from("/p/tmp"),
            readable_dirs: vec![PathBuf::from("/s/artifacts")],
            tool_timeout: std::time::Duration::ZERO,
            child_env: Default::default(),
            spool: None,
            agents: None,
            jobs: None,
            repo_maps: None,
        };
        let check = |input: Value, arg: PathArg, access: Access, expected: ApprovalNeed| {
            let need = need_for_input(&ctx, "t", &input, arg, access);
            assert_eq!(need, expected, "{input} {arg:?} {access:?}");
        };
        check(
            json!({"path": 5}),
            PathArg::Required,
            Access::Read,
            ApprovalNeed::None,
        );
        check(
            json!({}),
            PathArg::Required,
            Access::Read,
            ApprovalNeed::None,
        );
        check(
            json!({}),
            PathArg::Required,
            Access::Write,
            ApprovalNeed::Edit,
        );
        check(
            json!([1]),
            PathArg::Optional,
            Access::Write,
            ApprovalNeed::Edit,
        );
        // The session's own artifacts are readable, but not writable, without approval.
        check(
            json!({"path": "/s/artifacts/input-0.txt"}),
            PathArg::Required,
            Access::Read,
            ApprovalNeed::None,
        );
        check(
            json!({"path": "/s/artifacts/input-0.txt"}),
            PathArg::Required,
            Access::Write,
            ApprovalNeed::OutsideProject(PathBuf::from("/s/artifacts/input-0.txt")),
        );
    }

    #[test]
    fn real_path_resolves_links_the_way_the_kernel_does() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().canonicalize().unwrap();
        let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at));
        fs::create_dir_all(root.join("out/a/b")).unwrap();
        fs::create_dir(root.join("p")).unwrap();
        link("../out/a/b", "p/s").unwrap();
        link("s/../pwned", "p/l").unwrap();
        link("missing/../s", "p/back").unwrap();
        link("loop2", "p/loop1").unwrap();
        link("loop1", "p/loop2").unwrap();
        std::os::unix::fs::symlink(root.join("out"), root.join("p/abs")).unwrap();
        let check = |input: &str, expected: Option<&str>| {
            assert_eq!(
                real_path(&root.join(input)),
                expected.map(|e| root.join(e)),
                "{input}"
            );
        };
        // `..` in a link's target applies to where the link before it led.
        check("p/l", Some("out/a/pwned"));
        check("p/s/new/file.rs", Some("out/a/b/new/file.rs"));
        // A missing component does not stop links after a `..` from being followed.
        check("p/back/x", Some("out/a/b/x"));
        check("p/loop1", None);
        check("p/plain/new.txt", Some("p/plain/new.txt"));
        check("p/abs/a/../new", Some("out/new"));
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("main.rs", "mian.rs"), 2);
        assert_eq!(edit_distance("lib.rs", "lib.rs"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("config.tom", "config.toml"), 1);
    }
}
