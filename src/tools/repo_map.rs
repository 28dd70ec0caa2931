//! `repo_map`: a fresh map of the repository, centred on the paths and names the model asks
//! about, within the tokens it asks for. The prompt's `[repo-map]` is the same kind of map,
//! made when the session opens; this one is made on demand.

use super::args::{ArgError, Args};
use super::output::group_digits;
use super::paths;
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput, run_blocking};
use crate::context::repo_map::{self, Focus, LANGUAGES};
use crate::domain::Audience;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The map's budget when the call gives none.
pub const DEFAULT_TOKENS: u64 = 2_048;
/// The largest budget a call may ask for.
pub const MAX_TOKENS: u64 = 16_384;
/// Focus entries a call may give.
const MAX_FOCUS: usize = 50;

/// Maps the repository, ranked around a focus.
pub struct RepoMap;

impl Tool for RepoMap {
    fn name(&self) -> &'static str {
        "repo_map"
    }

    fn summary(&self) -> &'static str {
        "A ranked map of the repository's files and definitions, centred on what you name."
    }

    fn description(&self) -> &'static str {
        "A fresh map of the repository's most important files and definitions (numbered \
         signature lines), ranked by how the code refers to itself and centred on `focus`: \
         paths and identifiers. Your prompt's [repo-map] is one made at the session's start."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "focus": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Files, folders (relative to the working directory) and identifiers."
                },
                "tokens": {"type": "integer", "minimum": 64, "maximum": MAX_TOKENS, "description": "Size at most. Default 2048."}
            },
            "required": [],
            "additionalProperties": false
        })
    }

    fn min_audience(&self) -> Audience {
        Audience::Team
    }

    fn is_read_only(&self) -> bool {
        true
    }

    /// It reads the project only: focus paths elsewhere are taken for names.
    fn approval_need(&self, _input: &Value, _ctx: &ToolContext) -> ApprovalNeed {
        ApprovalNeed::None
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let (items, tokens) = match parse(self.name(), &input) {
                Ok(parsed) => parsed,
                Err(err) => return err.into(),
            };
            let (root, cwd, cache) = (
                ctx.project_dir.clone(),
                ctx.cwd.clone(),
                ctx.repo_maps.clone(),
            );
            run_blocking(&cancel, move |_| {
                let focus = focus_of(&root, &cwd, &items);
                let map = repo_map::build(&root, &focus, tokens, cache.as_deref());
                shown(&map)
            })
            .await
        })
    }
}

fn parse(tool: &'static str, input: &Value) -> Result<(Vec<String>, u64), ArgError> {
    let args = Args::new(tool, input)?;
    args.known(&["focus", "tokens"])?;
    let tokens = args
        .opt_u64("tokens", 64)?
        .unwrap_or(DEFAULT_TOKENS)
        .min(MAX_TOKENS);
    let items = match input.get("focus") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(text) => Ok(text.trim().to_owned()),
                other => Err(ArgError(format!(
                    "{tool}: every entry of `focus` must be a string (a path or an \
                     identifier); got {other}"
                ))),
            })
            .filter(|item| item.as_ref().map_or(true, |text| !text.is_empty()))
            .take(MAX_FOCUS)
            .collect::<Result<_, _>>()?,
        // One path or name given as a plain string: what was meant is plain.
        Some(Value::String(text)) => vec![text.trim().to_owned()],
        Some(other) => {
            return Err(ArgError(format!(
                "{tool}: argument `focus` must be a list of strings (paths or identifiers); \
                 got {other}"
            )));
        }
    };
    Ok((items, tokens))
}

/// The focus `items` name: those that lead to a file or folder in the project (from `cwd`)
/// are paths, the rest names.
pub fn focus_of(root: &Path, cwd: &Path, items: &[String]) -> Focus {
    let mut focus = Focus::default();
    for item in items {
        match project_path(root, cwd, item) {
            Some(path) => focus.files.push(path),
            None => {
                // A plain word may name a folder or file (`scheduler`) as well as a definition.
                if item.chars().all(char::is_alphabetic) {
                    focus.words.push(item.to_lowercase());
                }
                focus.names.push(item.clone());
            }
        }
    }
    focus
}

/// `item` as a path relative to the project `root`, when it names something there.
fn project_path(root: &Path, cwd: &Path, item: &str) -> Option<String> {
    let path: PathBuf = paths::resolve(cwd, item).ok()?;
    if std::fs::symlink_metadata(&path).is_err() {
        return None;
    }
    let relative = path.strip_prefix(paths::normalize(root)).ok()?;
    Some(crate::tools::path_text::encode(relative).into_owned())
}

/// The map as the model reads it: the map, then what went into it.
fn shown(map: &repo_map::RepoMap) -> ToolOutput {
    let left = map.skipped.total();
    let mut about = format!(
        "({} files read, {} definitions",
        group_digits(map.files as u64),
        group_digits(map.definitions as u64)
    );
    if left > 0 {
        about.push_str(&format!(
            "; {} left out: {} too large, {} binary, {} unparsable, {} unreadable",
            group_digits(left as u64),
            map.skipped.too_large,
            map.skipped.binary,
            map.skipped.unparsable,
            map.skipped.unreadable
        ));
    }
    if map.skipped.beyond_limit {
        about.push_str(&format!(
            "; only the first {} files were read",
            group_digits(repo_map::MAX_FILES as u64)
        ));
    }
    about.push(')');
    if map.text.is_empty() {
        return ToolOutput::nothing_found(format!(
            "Nothing to map: no definitions in files of the languages the map reads \
             ({LANGUAGES}). {about}"
        ));
    }
    ToolOutput::ok(format!("{}{about}", map.text))
}
