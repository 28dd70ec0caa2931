//! Paths given by the model: resolving them against the working directory, normalising them,
//! and deciding whether they stay inside the project.
//!
//! The check works on the path the tool will actually open. `..` is removed lexically first,
//! and the tool then uses that normalised path, so the only indirection left for the operating
//! system to follow is symlinks; those are resolved by canonicalising the longest existing
//! ancestor (and following dangling links by hand), so a link inside the project that points
//! elsewhere counts as elsewhere.

use super::{ApprovalNeed, ToolContext};
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
        let mut existing = current.clone();
        let mut tail: Vec<OsString> = Vec::new();
        let mut relinked = None;
        let base = loop {
            if let Ok(canonical) = fs::canonicalize(&existing) {
                break Some(canonical);
            }
            // Canonicalising fails on a dangling link; follow it ourselves, since writing
            // through it would create its target.
            if let Ok(target) = fs::read_link(&existing) {
                let parent = existing.parent().unwrap_or(Path::new("/"));
                let mut next = normalize(&parent.join(target));
                for name in tail.iter().rev() {
                    next.push(name);
                }
                relinked = Some(next);
                break None;
            }
            match existing.file_name() {
                Some(name) => tail.push(name.to_os_string()),
                None => break Some(existing.clone()),
            }
            if !existing.pop() {
                break Some(existing.clone());
            }
        };
        match (base, relinked) {
            (Some(mut base), _) => {
                for name in tail.iter().rev() {
                    base.push(name);
                }
                return Some(base);
            }
            (None, Some(next)) => current = next,
            (None, None) => return None,
        }
    }
    None
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

/// How a path is shown to the model: relative to the working directory when under it (so it can
/// be passed back as is), absolute otherwise.
pub fn display(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
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
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("main.rs", "mian.rs"), 2);
        assert_eq!(edit_distance("lib.rs", "lib.rs"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("config.tom", "config.toml"), 1);
    }
}
