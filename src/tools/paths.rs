//! Paths given by the model: resolving them against the working directory, normalising them,
//! and deciding whether they stay inside the project.
//!
//! The check works on the path the tool will actually open. `..` is removed lexically first,
//! and the tool then uses that normalised path, so the only indirection left for the operating
//! system to follow is symlinks; those are resolved by canonicalising the longest existing
//! ancestor (and following dangling links by hand), so a link inside the project that points
//! elsewhere counts as elsewhere.

use super::args::Args;
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
pub fn resolve(cwd: &Path, raw: &str) -> Result<PathBuf, String> {
    if raw.trim().is_empty() {
        return Err("the path is empty".to_string());
    }
    if raw.contains('\0') {
        return Err("the path contains a NUL byte".to_string());
    }
    let path = Path::new(raw);
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    Ok(normalize(&joined))
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

/// Where `path` (absolute and normalised) really points: symlinks in the existing part are
/// resolved by canonicalising it, dangling links are followed by hand, and the part that does
/// not exist yet is appended. `None` for a symlink loop.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    let mut current = normalize(path);
    for _ in 0..MAX_LINK_HOPS {
        match hop(&current) {
            Hop::Real(real) => return Some(real),
            Hop::Relink(next) => current = next,
        }
    }
    None
}

/// One step of [`real_path`]: what the existing part of a path leads to.
enum Hop {
    /// The existing part canonicalised, with the rest appended: the answer.
    Real(PathBuf),
    /// The existing part ends in a dangling link; the path through its target, to try next.
    Relink(PathBuf),
}

fn hop(path: &Path) -> Hop {
    let mut existing = path.to_path_buf();
    // The names below the existing part, deepest first.
    let mut tail: Vec<OsString> = Vec::new();
    let base = loop {
        if let Ok(canonical) = fs::canonicalize(&existing) {
            break canonical;
        }
        // Canonicalising fails on a dangling link; follow it ourselves, since writing through
        // it would create its target.
        if let Ok(target) = fs::read_link(&existing) {
            let parent = existing.parent().unwrap_or(Path::new("/"));
            return Hop::Relink(with_tail(normalize(&parent.join(target)), &tail));
        }
        match existing.file_name() {
            Some(name) => tail.push(name.to_os_string()),
            None => break existing,
        }
        if !existing.pop() {
            break existing;
        }
    };
    Hop::Real(with_tail(base, &tail))
}

/// `base` with the names of `tail` (deepest first) appended.
fn with_tail(mut base: PathBuf, tail: &[OsString]) -> PathBuf {
    for name in tail.iter().rev() {
        base.push(name);
    }
    base
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
pub fn access_need(ctx: &ToolContext, path: &Path, access: Access) -> ApprovalNeed {
    if is_inside(&ctx.project_dir, path) {
        match access {
            Access::Read => ApprovalNeed::None,
            Access::Write => ApprovalNeed::Edit,
        }
    } else if access == Access::Read && ctx.readable_dirs.iter().any(|dir| is_inside(dir, path)) {
        ApprovalNeed::None
    } else {
        // Name where the path really leads, so the person approving sees through symlinks.
        ApprovalNeed::OutsideProject(real_path(path).unwrap_or_else(|| path.to_path_buf()))
    }
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

/// How a path is shown to the model: relative to the working directory when under it (so it can
/// be passed back as is), absolute otherwise.
pub fn display(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
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
            parent.display()
        ));
    } else {
        let similar = similar_names(path);
        if !similar.is_empty() {
            msg.push_str(&format!(
                " Similar names in {}: {}.",
                parent.display(),
                similar.join(", ")
            ));
        }
    }
    msg.push_str(" Use glob to find files by name.");
    msg
}

/// Up to three names in `path`'s directory that look like what was meant, for a "not found"
/// message. Cheap: one directory listing, capped.
pub fn similar_names(path: &Path) -> Vec<String> {
    let (Some(dir), Some(wanted)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let wanted = wanted.to_string_lossy().to_lowercase();
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut scored: Vec<(usize, String)> = entries
        .take(2000)
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
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
fn edit_distance(a: &str, b: &str) -> usize {
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
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("main.rs", "mian.rs"), 2);
        assert_eq!(edit_distance("lib.rs", "lib.rs"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("config.tom", "config.toml"), 1);
    }
}
