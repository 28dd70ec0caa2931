//! Parsing and loading subagent definitions.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The definitions tern ships, as (file name, text).
const BUILT_IN: [(&str, &str); 3] = [
    (
        "explorer.md",
        include_str!("../../assets/agents/explorer.md"),
    ),
    (
        "reviewer.md",
        include_str!("../../assets/agents/reviewer.md"),
    ),
    (
        "test-runner.md",
        include_str!("../../assets/agents/test-runner.md"),
    ),
];

/// The largest definition file read, in bytes; a larger one is skipped with a warning.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Where a subagent works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// In the parent's project folder.
    #[default]
    Shared,
    /// In a git worktree of its own, on a branch of its own.
    Worktree,
}

impl Isolation {
    /// The value as written in a definition or a `spawn_agent` call.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "none" | "shared" | "" => Some(Self::Shared),
            "worktree" => Some(Self::Worktree),
            _ => None,
        }
    }
}

/// One kind of subagent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    /// One line for the model: what to send it for.
    pub description: String,
    /// The tools it may use; `None`: every tool its parent has (less the subagent tools).
    pub tools: Option<Vec<String>>,
    /// A model of its own; `None`: its parent's.
    pub model: Option<String>,
    pub isolation: Isolation,
    /// Its instructions.
    pub body: String,
    /// Where it was read from; `None` for a built-in one.
    pub source: Option<PathBuf>,
}

/// Why a definition file could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub source: String,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.reason)
    }
}

impl Definition {
    /// Reads a definition from `text`, a markdown file whose frontmatter (between two `---`
    /// lines at its top) holds `key: value` lines. `name` defaults to the file's stem.
    pub fn parse(text: &str, stem: &str, source: &str) -> Result<Self, ParseError> {
        let error = |reason: String| ParseError {
            source: source.to_owned(),
            reason,
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text.lines();
        if lines.next().map(str::trim_end) != Some("---") {
            return Err(error(
                "it does not start with a `---` line opening its frontmatter".to_owned(),
            ));
        }
        let mut fields = BTreeMap::new();
        let mut closed = false;
        for (number, line) in lines.by_ref().enumerate() {
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                return Err(error(format!(
                    "frontmatter line {} is not `key: value`: {line:?}",
                    number + 2
                )));
            };
            fields.insert(key.trim().to_owned(), unquote(value.trim()).to_owned());
        }
        if !closed {
            return Err(error(
                "its frontmatter has no closing `---` line".to_owned(),
            ));
        }
        let body = lines.collect::<Vec<_>>().join("\n").trim().to_owned();
        let mut take = |key: &str| fields.remove(key).filter(|v| !v.is_empty());
        let name = take("name").unwrap_or_else(|| stem.to_owned());
        if !valid_name(&name) {
            return Err(error(format!(
                "the name {name:?} is not 1 to 40 of `a-z 0-9 - _`"
            )));
        }
        let Some(description) = take("description") else {
            return Err(error("it has no `description`".to_owned()));
        };
        let isolation = match take("isolation") {
            None => Isolation::Shared,
            Some(value) => Isolation::parse(&value).ok_or_else(|| {
                error(format!(
                    "isolation {value:?} is neither `none` nor `worktree`"
                ))
            })?,
        };
        let tools = take("tools").map(|list| {
            list.trim_start_matches('[')
                .trim_end_matches(']')
                .split(',')
                .map(|tool| unquote(tool.trim()).to_owned())
                .filter(|tool| !tool.is_empty())
                .collect()
        });
        let model = take("model");
        if body.is_empty() {
            return Err(error(
                "it has no instructions after its frontmatter".to_owned(),
            ));
        }
        if let Some(key) = fields.keys().next() {
            return Err(error(format!(
                "`{key}` is not a field of a definition (name, description, tools, model, \
                 isolation)"
            )));
        }
        Ok(Self {
            name,
            description,
            tools,
            model,
            isolation,
            body,
            source: None,
        })
    }
}

fn unquote(text: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            return inner;
        }
    }
    text
}

fn valid_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// The text of a definition file: a regular file (a pipe or a device would never end) of
/// at most [`MAX_FILE_BYTES`], read no further than that.
fn read_definition(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|err| err.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    let file = std::fs::File::open(path).map_err(|err| err.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| err.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("it is larger than {} KiB", MAX_FILE_BYTES / 1024));
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
}

/// The definitions a session may use, by name, and what was skipped while reading them.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    by_name: BTreeMap<String, Definition>,
    /// Files that could not be used, each with why.
    pub skipped: Vec<ParseError>,
}

impl Definitions {
    /// The built-in definitions, then those in `config_agents` (the config folder's
    /// `agents/`), then those in `<project>/.tern/agents/`: a later one replaces an earlier
    /// one of the same name.
    pub fn load(config_agents: &Path, project_dir: &Path) -> Self {
        let mut definitions = Self::built_in();
        definitions.read_folder(config_agents);
        definitions.read_folder(&project_dir.join(".tern").join("agents"));
        definitions
    }

    /// Only the definitions tern ships.
    pub fn built_in() -> Self {
        let mut definitions = Self::default();
        for (file, text) in BUILT_IN {
            let stem = file.trim_end_matches(".md");
            match Definition::parse(text, stem, file) {
                Ok(definition) => {
                    definitions
                        .by_name
                        .insert(definition.name.clone(), definition);
                }
                Err(err) => definitions.skipped.push(err),
            }
        }
        definitions
    }

    /// Adds the `*.md` files of `folder`, in name order; a missing folder adds nothing.
    fn read_folder(&mut self, folder: &Path) {
        let Ok(entries) = std::fs::read_dir(folder) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        files.sort();
        for path in files {
            let shown = path.display().to_string();
            let skip = |reason: String| ParseError {
                source: shown.clone(),
                reason,
            };
            let read = read_definition(&path).map_err(skip);
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            match read.and_then(|text| Definition::parse(&text, stem, &shown)) {
                Ok(mut definition) => {
                    definition.source = Some(path.clone());
                    self.by_name.insert(definition.name.clone(), definition);
                }
                Err(err) => {
                    tracing::warn!(%err, "a subagent definition was skipped");
                    self.skipped.push(err);
                }
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Definition> {
        self.by_name.get(name)
    }

    /// Every definition, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Definition> {
        self.by_name.values()
    }

    /// The names there are, for an error that names them.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_definitions_parse() {
        let defs = Definitions::built_in();
        assert!(defs.skipped.is_empty(), "{:?}", defs.skipped);
        assert_eq!(defs.names(), ["explorer", "reviewer", "test-runner"]);
        let explorer = defs.get("explorer").unwrap();
        assert_eq!(
            explorer.tools.as_deref(),
            Some(&["file_read", "grep", "glob", "set_working_directory"].map(String::from)[..])
        );
        assert!(explorer.body.starts_with("You explore"));
    }

    #[test]
    fn fields_lists_and_quotes_are_read() {
        let text = "---\nname: \"docs\"\ndescription: writes docs\ntools: [file_read, 'grep']\n\
                    model: small-model\nisolation: worktree\n---\n\nWrite the docs.\n";
        let def = Definition::parse(text, "x", "docs.md").unwrap();
        assert_eq!(def.name, "docs");
        assert_eq!(def.tools, Some(vec!["file_read".into(), "grep".into()]));
        assert_eq!(def.model.as_deref(), Some("small-model"));
        assert_eq!(def.isolation, Isolation::Worktree);
        assert_eq!(def.body, "Write the docs.");
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        let cases = [
            ("no frontmatter", "`---`"),
            ("---\ndescription: d\n", "closing"),
            ("---\nname: d\n---\nbody", "description"),
            (
                "---\ndescription: d\nsize: 3\n---\nbody",
                "`size` is not a field",
            ),
            ("---\ndescription: d\nisolation: vm\n---\nbody", "neither"),
            (
                "---\nname: Bad Name\ndescription: d\n---\nbody",
                "is not 1 to 40",
            ),
            ("---\ndescription: d\n---\n", "no instructions"),
            ("---\njust words\n---\nbody", "not `key: value`"),
        ];
        for (text, expected) in cases {
            let err = Definition::parse(text, "stem", "f.md").unwrap_err();
            assert!(err.reason.contains(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_nearest_definition_wins_and_bad_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("agents");
        let project = dir.path().join("project");
        let in_project = project.join(".tern").join("agents");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(&in_project).unwrap();
        let def = |description: &str| format!("---\ndescription: {description}\n---\nDo it.\n");
        std::fs::write(config.join("explorer.md"), def("the person's explorer")).unwrap();
        std::fs::write(config.join("docs.md"), def("the person's docs")).unwrap();
        std::fs::write(in_project.join("docs.md"), def("the project's docs")).unwrap();
        std::fs::write(in_project.join("broken.md"), "no frontmatter").unwrap();
        std::fs::write(in_project.join("notes.txt"), "not a definition").unwrap();
        // A pipe is never read: it would never end.
        let fifo = in_project.join("pipe.md");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        let has_fifo = made.is_ok_and(|status| status.success());
        let defs = Definitions::load(&config, &project);
        assert_eq!(
            defs.get("explorer").unwrap().description,
            "the person's explorer"
        );
        assert_eq!(defs.get("docs").unwrap().description, "the project's docs");
        assert!(defs.get("reviewer").is_some());
        let skipped: Vec<&str> = defs.skipped.iter().map(|s| s.source.as_str()).collect();
        assert!(skipped[0].ends_with("broken.md"), "{skipped:?}");
        if has_fifo {
            assert!(skipped[1].ends_with("pipe.md"), "{skipped:?}");
            assert_eq!(defs.skipped[1].reason, "it is not a regular file");
        }
    }
}
