//! `symbols`: where a name is defined and which lines refer to it, or the outline of a file
//! or folder, from the tags the repository map reads (and keeps) with tree-sitter.

use super::args::{ArgError, Args};
use super::check::{self, CheckFuture, Wanted};
use super::output::group_digits;
use super::paths::{self, Access, PathArg};
use super::{ApprovalNeed, Tool, ToolContext, ToolFuture, ToolOutput, run_blocking};
use crate::context::repo_map::{self, LANGUAGES, Lang, Left, Project, ScannedFile, symbols};
use crate::domain::Audience;
use serde_json::{Value, json};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The answer stops growing past this size.
const MAX_OUTPUT_BYTES: usize = 40 * 1024;
/// Definitions of one name listed at most.
const MAX_DEFINITIONS: usize = 50;
/// Referring files listed at most, and lines shown of each.
const MAX_REFERRERS: usize = 30;
const LINES_PER_REFERRER: usize = 5;
/// Names offered when the one asked for is not there.
const LIKE: usize = 8;
/// Referring lines are cut to this many chars.
const MAX_LINE_CHARS: usize = 200;

/// Looks names up in the project's definitions and references.
pub struct Symbols;

impl Tool for Symbols {
    fn name(&self) -> &'static str {
        "symbols"
    }

    fn summary(&self) -> &'static str {
        "Where a name is defined and used, or the outline of a file or folder."
    }

    fn description(&self) -> &'static str {
        "Find where an identifier (`name`) is defined (path:line, kind, signature) and the \
         lines that use it, or outline a file or folder (`path` alone). Searches the whole \
         project unless `path` narrows it; `Type::method` works too. Quicker and more precise \
         than grep for definitions."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "A function, method, type, trait, constant, module or macro name."},
                "path": {"type": "string", "description": "A file or folder to look in, or to outline. Default: the project."}
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

    fn approval_need(&self, input: &Value, ctx: &ToolContext) -> ApprovalNeed {
        paths::need_for_input(ctx, self.name(), input, PathArg::Optional, Access::Read)
    }

    fn check<'a>(&'a self, input: &'a Value, ctx: &'a ToolContext) -> CheckFuture<'a> {
        let parsed = parse(self.name(), input, ctx);
        Box::pin(async move {
            let request = parsed.map_err(|err| err.0)?;
            let Some(path) = request.path else {
                return Ok(());
            };
            let shown = paths::display(&ctx.cwd, &path);
            check::blocking(move || check::present(&path, &shown, Wanted::Existing)).await
        })
    }

    fn execute<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        cancel: CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let request = match parse(self.name(), &input, ctx) {
                Ok(request) => request,
                Err(err) => return err.into(),
            };
            let place = Place {
                root: ctx.project_dir.clone(),
                cwd: ctx.cwd.clone(),
                cache: ctx.repo_maps.clone(),
            };
            run_blocking(&cancel, move |token| answer(&request, &place, token)).await
        })
    }
}

/// A checked call.
struct Request {
    name: Option<String>,
    /// Absolute and normalised.
    path: Option<PathBuf>,
}

/// Where the call runs: the project, the working directory and the tag cache.
struct Place {
    root: PathBuf,
    cwd: PathBuf,
    cache: Option<PathBuf>,
}

fn parse(tool: &'static str, input: &Value, ctx: &ToolContext) -> Result<Request, ArgError> {
    let args = Args::new(tool, input)?;
    args.known(&["name", "path"])?;
    let name = args
        .opt_string("name")?
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    let path = match args.opt_string("path")? {
        Some(_) => Some(args.path("path", &ctx.cwd, PathArg::Required)?),
        None => None,
    };
    if name.is_none() && path.is_none() {
        return Err(ArgError(format!(
            "{tool}: give `name` (where an identifier is defined and used), `path` (the \
             outline of a file or folder), or both"
        )));
    }
    Ok(Request { name, path })
}

fn answer(request: &Request, place: &Place, cancel: &CancellationToken) -> ToolOutput {
    let within = request.path.as_deref();
    if let Some(path) = within
        && !path.is_dir()
    {
        return match one_file(path, &place.root, request.name.is_some()) {
            Ok(file) => match &request.name {
                Some(name) => look_up(name, std::slice::from_ref(&file), place, within),
                None => outlines(std::slice::from_ref(&file), place, path),
            },
            Err(err) => ToolOutput::error(format!("symbols: {err}")),
        };
    }
    let folder = within.unwrap_or(&place.root);
    let (files, cut) = tags_under(folder, place);
    if cancel.is_cancelled() {
        return ToolOutput::error("Cancelled before the tool finished.");
    }
    let mut output = match &request.name {
        Some(name) => look_up(name, &files, place, within),
        None => outlines(&files, place, folder),
    };
    if cut {
        output.content.push_str(&format!(
            "\n(only the first {} files of the project were read; give `path` to look \
             further in)",
            group_digits(repo_map::MAX_FILES as u64)
        ));
    }
    output
}

/// The tags of the files under `folder`: from the project's (and its cache) when the folder
/// is in the project, read now otherwise.
/// Also whether the walk stopped at its limit of files.
fn tags_under(folder: &Path, place: &Place) -> (Vec<ScannedFile>, bool) {
    if folder.starts_with(paths::normalize(&place.root)) {
        // Read as the map reads it, so both share one cache.
        let project = Project::read(&place.root, place.cache.as_deref());
        project.keep(&place.root);
        let cut = project.skipped.beyond_limit;
        let mut files = project.files;
        files.retain(|file| paths::normalize(&file.candidate.absolute).starts_with(folder));
        (files, cut)
    } else {
        let project = Project::read(folder, None);
        (project.files, project.skipped.beyond_limit)
    }
}

/// The tags of one file, read now.
fn one_file(path: &Path, root: &Path, looking_up: bool) -> Result<ScannedFile, String> {
    let shown = path.display();
    let Some(lang) = Lang::of(path) else {
        let instead = if looking_up {
            "search it with grep"
        } else {
            "read it with file_read"
        };
        return Err(format!(
            "{shown} is not in a language the outline reads ({LANGUAGES}); {instead} instead"
        ));
    };
    let source = std::fs::read(path).map_err(|err| format!("cannot read {shown}: {err}"))?;
    let mut parser = tree_sitter::Parser::new();
    let tags = repo_map::tags_of(lang, &source, &mut parser).map_err(|why| match why {
        Left::TooLarge => format!(
            "{shown} is over {} bytes, more than the outline reads; use grep on it",
            group_digits(repo_map::MAX_FILE_BYTES)
        ),
        Left::Binary => format!("{shown} is binary, not source text"),
        Left::Unparsable => format!(
            "tree-sitter could not parse {shown} as {}; read it with file_read",
            lang.name()
        ),
    })?;
    let relative = path.strip_prefix(paths::normalize(root)).unwrap_or(path);
    Ok(ScannedFile {
        candidate: repo_map::Candidate {
            path: super::path_text::encode(relative).into_owned(),
            absolute: path.to_path_buf(),
            lang,
            size: source.len() as u64,
            mtime_ns: 0,
        },
        tags,
        hash: 0,
    })
}

/// `name` split at its last path or member separator (`Config::new`, `store.open`,
/// `self->next`): what qualifies it, and the name itself.
fn qualified(name: &str) -> Option<(&str, &str)> {
    ["::", ".", "->"]
        .iter()
        .filter_map(|separator| {
            let at = name.rfind(separator)?;
            Some((&name[..at], &name[at + separator.len()..]))
        })
        .filter(|(_, last)| !last.is_empty())
        .max_by_key(|(qualifier, _)| qualifier.len())
}

/// Where `name` is defined within `files`, and the lines that refer to it. A qualified
/// name (`Config::new`) is looked up by its last part, the definitions in files that
/// define its qualifier's last part (`Config`) first.
fn look_up(name: &str, files: &[ScannedFile], place: &Place, within: Option<&Path>) -> ToolOutput {
    let Some((qualifier, last)) = qualified(name) else {
        return look_up_plain(name, files, place, within, None);
    };
    let owner = qualified(qualifier).map_or(qualifier, |(_, owner)| owner);
    // `self.x`, `this.x`: the qualifier says nothing of where `x` is defined.
    let owner =
        Some(owner).filter(|owner| !["self", "Self", "this", "super", "crate"].contains(owner));
    let mut output = look_up_plain(last, files, place, within, owner);
    let first = owner.map_or_else(String::new, |owner| {
        format!(", definitions beside `{owner}` first")
    });
    output.content = format!(
        "`{name}` is looked up as `{last}`{first}.\n{}",
        output.content
    );
    output
}

fn look_up_plain(
    name: &str,
    files: &[ScannedFile],
    place: &Place,
    within: Option<&Path>,
    owner: Option<&str>,
) -> ToolOutput {
    let mut found = symbols::find(files, name);
    if let Some(owner) = owner {
        // Stable: path order stays within each group.
        found
            .definitions
            .sort_by_key(|(file, _)| !file.tags.definitions.iter().any(|def| def.name == owner));
    }
    let shown = |file: &ScannedFile| paths::display(&place.cwd, &file.candidate.absolute);
    let scope = within.map_or_else(
        || "the project".to_owned(),
        |path| paths::display(&place.cwd, path),
    );
    if found.definitions.is_empty() && found.referrers.is_empty() {
        let mut text = format!(
            "`{name}` is neither defined nor referred to in {scope} ({} files read).",
            group_digits(files.len() as u64)
        );
        let like = symbols::like(files, name, LIKE);
        if like.is_empty() {
            text.push_str(" No defined name is like it; grep searches the text itself.");
        } else {
            text.push_str(" Names like it:");
            for (file, def) in like {
                let _ = write!(text, "\n{} ({}:{})", def.name, shown(file), def.line + 1);
            }
        }
        return ToolOutput::nothing_found(text);
    }
    let mut out = Capped::default();
    match found.definitions.len() {
        0 => out.line(&format!("`{name}` is not defined in {scope}.")),
        1 => out.line(&format!("`{name}` is defined at:")),
        n => out.line(&format!("`{name}` is defined in {n} places:")),
    }
    for (file, def) in found.definitions.iter().take(MAX_DEFINITIONS) {
        out.line(&format!(
            "{}:{}: {} {}",
            shown(file),
            def.line + 1,
            def.kind.capture(),
            def.signature
        ));
    }
    if found.definitions.len() > MAX_DEFINITIONS {
        out.line(&format!(
            "… and {} more definitions",
            found.definitions.len() - MAX_DEFINITIONS
        ));
    }
    if found.referrers.is_empty() {
        out.line("No file refers to it.");
    } else {
        out.line(&format!(
            "Referred to in {}, most often first:",
            counted(found.referrers.len(), "file", "files")
        ));
    }
    for (file, count) in found.referrers.iter().take(MAX_REFERRERS) {
        referring_lines(&mut out, file, *count, name, &shown(file));
    }
    if found.referrers.len() > MAX_REFERRERS {
        out.line(&format!(
            "… and {} more files",
            found.referrers.len() - MAX_REFERRERS
        ));
    }
    ToolOutput::ok(out.finish())
}

/// The lines of `file` that refer to `name` (not those defining it), a few at most.
fn referring_lines(out: &mut Capped, file: &ScannedFile, count: u32, name: &str, shown: &str) {
    let text = std::fs::read(&file.candidate.absolute)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let defined_on: Vec<u32> = file
        .tags
        .definitions
        .iter()
        .filter(|def| def.name == name)
        .map(|def| def.line)
        .collect();
    let lines: Vec<(u32, &str)> = symbols::lines_naming(&text, name)
        .into_iter()
        .filter(|(line, _)| !defined_on.contains(line))
        .collect();
    if lines.is_empty() {
        out.line(&format!("{shown} ({count} references)"));
        return;
    }
    for (line, text) in lines.iter().take(LINES_PER_REFERRER) {
        let text: String = text.trim().chars().take(MAX_LINE_CHARS).collect();
        out.line(&format!("{shown}:{}: {text}", line + 1));
    }
    if lines.len() > LINES_PER_REFERRER {
        out.line(&format!(
            "  … {} more lines in {shown}",
            lines.len() - LINES_PER_REFERRER
        ));
    }
}

/// The outline of each of `files`.
fn outlines(files: &[ScannedFile], place: &Place, folder: &Path) -> ToolOutput {
    if files.is_empty() {
        return ToolOutput::nothing_found(format!(
            "No source file under {} that the outline reads: none is in {LANGUAGES}, or \
             .gitignore leaves them out (glob lists what is there).",
            paths::display(&place.cwd, folder)
        ));
    }
    let mut out = Capped::default();
    for file in files {
        let shown = paths::display(&place.cwd, &file.candidate.absolute);
        let count = file.tags.definitions.len();
        out.line(&format!(
            "{shown} ({}, {}):",
            file.tags.lang.name(),
            counted(count, "definition", "definitions")
        ));
        for line in symbols::outline(&file.tags.definitions).lines() {
            out.line(line);
        }
    }
    ToolOutput::ok(out.finish())
}

/// `n` and the noun for it: "1 file", "3 files".
fn counted(n: usize, one: &str, many: &str) -> String {
    format!(
        "{} {}",
        group_digits(n as u64),
        if n == 1 { one } else { many }
    )
}

/// Text that stops growing at [`MAX_OUTPUT_BYTES`], saying so.
#[derive(Default)]
struct Capped {
    text: String,
    full: bool,
}

impl Capped {
    fn line(&mut self, line: &str) {
        if self.full {
            return;
        }
        if self.text.len() + line.len() + 1 > MAX_OUTPUT_BYTES {
            self.full = true;
            return;
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn finish(mut self) -> String {
        if self.full {
            self.text.push_str(
                "… (the answer stops here, at its size limit; ask about a narrower `path`)\n",
            );
        }
        self.text
    }
}
