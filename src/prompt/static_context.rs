//! Tier B, the static context: what the session has to work with (the tool index, skills,
//! memory) and where its files are. Rendered on the first model call and again right after a
//! compaction, so it stays byte-identical, and cached, in between. For a small window it
//! keeps only what the model acts on: the session's id and its two folders, since the compact
//! tool descriptions already are the index.

use super::size::PromptSize;
use crate::domain::Audience;
use std::path::PathBuf;

/// One line of an index: a tool, skill or subagent, and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub name: String,
    pub summary: String,
}

/// Where the session keeps its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPaths {
    pub session_dir: PathBuf,
    pub temp_dir: PathBuf,
    pub artifact_dir: PathBuf,
    pub worktree_dir: PathBuf,
    pub log_path: PathBuf,
}

/// What tier B is built from.
#[derive(Debug, Clone, Copy)]
pub struct StaticSources<'a> {
    pub session_id: &'a str,
    /// The tools the audience may call, in the order the request lists them.
    pub tools: &'a [IndexEntry],
    pub skills: &'a [IndexEntry],
    /// One line on long-term memory.
    pub memory: &'a str,
    pub paths: &'a SessionPaths,
    pub size: PromptSize,
    /// The repository map, when the project has one to show.
    pub repo_map: Option<&'a str>,
}

/// The memory line while no long-term memory exists.
pub const MEMORY_OFF: &str = "off: no long-term memory is set up, so nothing carries over to \
                              other sessions except what the project's files hold";

/// Tier B for `audience`. Public gets the tool index and the session id only.
pub fn static_context(audience: Audience, sources: StaticSources<'_>) -> String {
    if sources.size.is_compact() {
        return compact(audience, sources);
    }
    let mut out = tools_section(sources.tools);
    if audience == Audience::Public {
        out.push_str(&format!("\n[session]\nid: {}\n", sources.session_id));
        return out;
    }
    if !sources.skills.is_empty() {
        out.push_str("\n[skills]\n");
        push_index(&mut out, sources.skills);
    }
    out.push_str(&format!("\n[memory]\n{}\n", sources.memory));
    if let Some(map) = sources.repo_map {
        out.push_str(
            "\n[repo-map]\nThe project's files and the definitions its other files use most, \
             as `path:` then `line│text`; ⋮ marks lines left out.\n",
        );
        push_lines(&mut out, map);
    }
    let paths = sources.paths;
    let lines = [
        (
            "session_dir",
            &paths.session_dir,
            "this session's own folder; the tools read anything in it without asking",
        ),
        (
            "temp_dir",
            &paths.temp_dir,
            "scratch space, also TMPDIR for commands; it may be emptied once the session ends",
        ),
        (
            "artifact_dir",
            &paths.artifact_dir,
            "full copies of oversized messages and tool output; file_read reads them",
        ),
        (
            "worktree_dir",
            &paths.worktree_dir,
            "where extra git worktrees go, when work must not touch the main checkout",
        ),
        (
            "log_path",
            &paths.log_path,
            "the session's event log; read it to see what happened earlier in the session",
        ),
    ];
    out.push_str(&format!("\n[session]\nid: {}\n", sources.session_id));
    for (name, path, guidance) in lines {
        out.push_str(&format!("{name}: {} ({guidance})\n", path.display()));
    }
    if sources.tools.iter().any(|tool| tool.name == "file_read") {
        out.push_str(
            "\n[attachments]\nFiles the person attaches are saved in the session's folder and \
             named in their message by path; read them with file_read.\n",
        );
    }
    out
}

/// Tier B for a small window: no tool index (each tool's one-line description comes with the
/// request), no memory line while there is no memory, the session folder and the temp dir.
fn compact(audience: Audience, sources: StaticSources<'_>) -> String {
    let mut out = String::new();
    if sources.tools.is_empty() {
        out.push_str("[tools]\nnone: answer from what you know\n\n");
    }
    if audience != Audience::Public && !sources.skills.is_empty() {
        out.push_str("[skills]\n");
        push_index(&mut out, sources.skills);
        out.push('\n');
    }
    if audience != Audience::Public
        && let Some(map) = sources.repo_map
    {
        out.push_str("[repo-map]\n");
        push_lines(&mut out, map);
        out.push('\n');
    }
    out.push_str(&format!("[session]\nid: {}\n", sources.session_id));
    if audience == Audience::Public {
        return out;
    }
    let paths = sources.paths;
    // Without the full prompt's notes: a saved artifact's message names its own path.
    out.push_str(&format!(
        "session_dir: {}\ntemp_dir: {} (TMPDIR)\n",
        paths.session_dir.display(),
        paths.temp_dir.display()
    ));
    out
}

/// The `[tools]` section tier B opens with (in the full prompt): what a turn compares with
/// the tier B it has, to tell whether the session's tools changed since it was written.
pub fn tools_section(tools: &[IndexEntry]) -> String {
    let mut out = String::from("[tools]\n");
    if tools.is_empty() {
        out.push_str("none: this conversation has no tools; answer from what you know\n");
    } else {
        out.push_str("Each tool's full description and parameters come with the request.\n");
        push_index(&mut out, tools);
    }
    out
}

/// The names of the tools a `[tools]` section lists.
pub fn tools_in(section: &str) -> Vec<&str> {
    let body = section.strip_prefix("[tools]\n").unwrap_or_default();
    body.lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix("- ")?.split_once(": "))
        .map(|(name, _)| name)
        .collect()
}

fn push_index(out: &mut String, entries: &[IndexEntry]) {
    for entry in entries {
        // One line each, whatever a summary (an MCP server's, say) holds.
        let summary = entry
            .summary
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!("- {}: {summary}\n", entry.name));
    }
}

/// `text` on lines of its own: ended by a newline.
fn push_lines(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> IndexEntry {
        IndexEntry {
            name: name.into(),
            summary: format!("{name} things."),
        }
    }

    fn paths() -> SessionPaths {
        SessionPaths {
            session_dir: "/d/s".into(),
            temp_dir: "/t/p".into(),
            artifact_dir: "/d/s/artifacts".into(),
            worktree_dir: "/d/s/worktrees".into(),
            log_path: "/d/s/logs/session.log".into(),
        }
    }

    fn render(audience: Audience, tools: &[IndexEntry], skills: &[IndexEntry]) -> String {
        static_context(
            audience,
            StaticSources {
                session_id: "s1",
                tools,
                skills,
                memory: MEMORY_OFF,
                paths: &paths(),
                size: PromptSize::Full,
                repo_map: None,
            },
        )
    }

    #[test]
    fn the_full_stack_names_tools_memory_paths_and_attachments() {
        let text = render(Audience::Team, &[entry("file_read"), entry("grep")], &[]);
        assert!(text.starts_with("[tools]\n"), "{text}");
        assert!(text.contains("- file_read: file_read things.\n- grep: grep things.\n"));
        assert!(!text.contains("[skills]"), "no skills, no section: {text}");
        assert!(text.contains("\n[memory]\noff: "), "{text}");
        for line in [
            "id: s1\n",
            "session_dir: /d/s (",
            "temp_dir: /t/p (",
            "artifact_dir: /d/s/artifacts (",
            "worktree_dir: /d/s/worktrees (",
            "log_path: /d/s/logs/session.log (",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(text.ends_with("read them with file_read.\n"), "{text}");
    }

    #[test]
    fn skills_appear_when_there_are_some_and_attachments_need_file_read() {
        let text = render(Audience::Personal, &[entry("grep")], &[entry("deploy")]);
        assert!(
            text.contains("\n[skills]\n- deploy: deploy things.\n"),
            "{text}"
        );
        assert!(!text.contains("[attachments]"), "{text}");
    }

    #[test]
    fn public_sees_the_tool_index_and_the_session_id_only() {
        let text = render(Audience::Public, &[], &[entry("deploy")]);
        assert_eq!(
            text,
            "[tools]\nnone: this conversation has no tools; answer from what you know\n\n\
             [session]\nid: s1\n"
        );
    }

    #[test]
    fn a_small_window_gets_the_session_and_its_folders_only() {
        let compact = |audience, tools: &[IndexEntry]| {
            static_context(
                audience,
                StaticSources {
                    session_id: "s1",
                    tools,
                    skills: &[],
                    memory: MEMORY_OFF,
                    paths: &paths(),
                    size: PromptSize::for_window(8192),
                    repo_map: None,
                },
            )
        };
        assert_eq!(
            compact(Audience::Team, &[entry("file_read")]),
            "[session]\nid: s1\nsession_dir: /d/s\ntemp_dir: /t/p (TMPDIR)\n"
        );
        assert_eq!(
            compact(Audience::Public, &[]),
            "[tools]\nnone: answer from what you know\n\n[session]\nid: s1\n"
        );
    }
}
