//! Tier A, the persisted system prompt: persona, operating rules, the user's playbook and
//! tooling notes, and the project's instructions. Built from files that rarely change, so
//! it is journaled once and rebuilt only when one of them does; every request of a session
//! starts with the same bytes. A small window gets the compact persona and rules, and the
//! person's files cut to [`PromptSize::file_cap`].

use super::size::{PromptSize, share_budget};
use crate::context::{IdentityFiles, MAX_PROMPT_FILE_BYTES, ProjectInstructions, PromptFile};
use crate::domain::Audience;

/// The default persona, replaced by the user's `identity/SOUL.md`.
const DEFAULT_SOUL: &str = include_str!("../../assets/SOUL.md");
/// The default persona for a small window.
const COMPACT_SOUL: &str = include_str!("../../assets/SOUL-compact.md");
/// The operating rules every session starts from. Lines between `<!-- host -->` and
/// `<!-- /host -->` are about working on a machine and are left out for the Public audience.
const AGENTS_CORE: &str = include_str!("../../assets/AGENTS.md");
/// The same rules in a few lines, for a small window.
const COMPACT_AGENTS_CORE: &str = include_str!("../../assets/AGENTS-compact.md");

const HOST_START: &str = "<!-- host -->";
const HOST_END: &str = "<!-- /host -->";

/// What tier A is built from.
#[derive(Debug, Clone, Copy)]
pub struct SystemSources<'a> {
    pub identity: &'a IdentityFiles,
    pub instructions: Option<&'a ProjectInstructions>,
    pub size: PromptSize,
}

/// Tier A for `audience`. Public gets the persona and the public rules only; Team and
/// Personal get the whole stack. In a small window the person's files share
/// [`PromptSize::files_budget`], each cut at a line with a note saying so.
pub fn system_prompt(audience: Audience, sources: SystemSources<'_>) -> String {
    let size = sources.size;
    let soul = sources.identity.soul.as_ref();
    let sections = [
        ("Playbook", sources.identity.playbook.as_ref()),
        ("Tooling", sources.identity.tooling.as_ref()),
        ("Project instructions", sources.instructions),
    ];
    // The person's files share one budget in a small window; Public sees only the persona.
    let shown: Vec<&PromptFile> = match audience {
        Audience::Public => soul.into_iter().collect(),
        Audience::Team | Audience::Personal => soul
            .into_iter()
            .chain(sections.iter().filter_map(|(_, file)| *file))
            .collect(),
    };
    let caps = size.files_budget().map(|budget| {
        let sizes: Vec<usize> = shown.iter().map(|file| file.text.len()).collect();
        share_budget(&sizes, budget)
    });
    let cap_of = |file: &PromptFile| {
        let at = shown.iter().position(|shown| std::ptr::eq(*shown, file))?;
        caps.as_ref().map(|caps| caps[at])
    };
    let mut prompt = match soul {
        Some(file) => {
            let fit = fitted(file, cap_of(file));
            let mut prompt = format!("{}\n", fit.text.trim());
            push_cut_note(&mut prompt, file, &fit, false);
            prompt
        }
        None if size.is_compact() => format!("{}\n", COMPACT_SOUL.trim()),
        None => format!("{}\n", DEFAULT_SOUL.trim()),
    };
    prompt.push_str(&format!("\n{}\n", agents_core(audience, size).trim()));
    if audience == Audience::Public {
        return prompt;
    }
    for (title, file) in sections {
        if let Some(file) = file {
            let in_project = sources.instructions == Some(file);
            push_file(&mut prompt, title, file, cap_of(file), in_project);
        }
    }
    prompt
}

/// How a subagent works, whatever its definition.
const SUBAGENT_CONTRACT: &str = include_str!("../../assets/subagent-contract.md");

/// Tier A of a subagent: the operating rules, the project's instructions, its definition's
/// instructions (`agent`, `body`) and the contract of working with nobody to ask; no
/// persona and none of the person's own files.
pub fn subagent_prompt(
    audience: Audience,
    agent: &str,
    body: &str,
    instructions: Option<&ProjectInstructions>,
    size: PromptSize,
) -> String {
    let mut prompt = format!("{}\n", agents_core(audience, size).trim());
    if audience != Audience::Public
        && let Some(file) = instructions
    {
        push_file(
            &mut prompt,
            "Project instructions",
            file,
            size.files_budget(),
            true,
        );
    }
    prompt.push_str(&format!(
        "\n# Your role: {agent}\n\n{}\n\n{}\n",
        body.trim(),
        SUBAGENT_CONTRACT.trim()
    ));
    prompt
}

/// The embedded operating rules, full or compact; the public variant leaves out the
/// machine-only lines.
pub fn agents_core(audience: Audience, size: PromptSize) -> String {
    let core = if size.is_compact() {
        COMPACT_AGENTS_CORE
    } else {
        AGENTS_CORE
    };
    let mut out = String::with_capacity(core.len());
    let mut in_host = false;
    for line in core.lines() {
        match line.trim() {
            HOST_START => in_host = true,
            HOST_END => in_host = false,
            _ if in_host && audience == Audience::Public => {}
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Appends `file` under `title`; a cut project file points at the rest, which the tools can
/// read.
fn push_file(
    prompt: &mut String,
    title: &str,
    file: &PromptFile,
    cap: Option<usize>,
    in_project: bool,
) {
    let fit = fitted(file, cap);
    prompt.push_str(&format!(
        "\n# {title} (from {})\n\n{}\n",
        file.file.display(),
        fit.text.trim_end()
    ));
    push_cut_note(prompt, file, &fit, in_project);
}

/// The part of a prompt file one prompt size carries.
struct Fitted<'a> {
    text: &'a str,
    /// Whether the window's cap cut it (it may also have been cut when read).
    cut_for_window: bool,
}

/// The part of `file` within `cap` bytes. A file cut for the window ends at a line break
/// when one is in reach, so no instruction stops mid-word.
fn fitted(file: &PromptFile, cap: Option<usize>) -> Fitted<'_> {
    let text = file.text.as_str();
    let Some(cap) = cap.filter(|&cap| text.len() > cap) else {
        return Fitted {
            text,
            cut_for_window: false,
        };
    };
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let end = match text[..end].rfind('\n') {
        Some(line_end) if line_end >= end / 2 => line_end,
        _ => end,
    };
    Fitted {
        text: &text[..end],
        cut_for_window: true,
    }
}

/// Says so when `file` was cut: to the reading cap, or further for the window.
fn push_cut_note(prompt: &mut String, file: &PromptFile, fit: &Fitted<'_>, in_project: bool) {
    let size = match (file.cut_from, fit.cut_for_window) {
        (Some(size), _) => size,
        (None, true) => file.text.len(),
        (None, false) => return,
    };
    let rest = if in_project {
        ". Read the rest with file_read when it matters"
    } else {
        ""
    };
    let shown = if fit.cut_for_window {
        format!("{} bytes", fit.text.len())
    } else {
        format!("{} KiB", MAX_PROMPT_FILE_BYTES / 1024)
    };
    prompt.push_str(&format!(
        "\n[{} is {size} bytes; only its first {shown} are shown here{rest}]\n",
        file.file.display(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> PromptFile {
        PromptFile {
            file: name.into(),
            text: text.into(),
            cut_from: None,
        }
    }

    fn full_identity() -> IdentityFiles {
        IdentityFiles {
            soul: Some(file("identity/SOUL.md", "You are Ada.")),
            playbook: Some(file("identity/AGENTS.md", "Always run tests.")),
            tooling: Some(file("identity/TOOLING.md", "Use just.")),
        }
    }

    #[test]
    fn the_full_stack_keeps_its_order() {
        let identity = full_identity();
        let instructions = file("CLAUDE.md", "Use tabs.");
        let prompt = system_prompt(
            Audience::Team,
            SystemSources {
                identity: &identity,
                instructions: Some(&instructions),
                size: PromptSize::Full,
            },
        );
        let order = [
            "You are Ada.",
            "# How you work",
            "`shell_execute`",
            "# Playbook (from identity/AGENTS.md)\n\nAlways run tests.\n",
            "# Tooling (from identity/TOOLING.md)\n\nUse just.\n",
            "# Project instructions (from CLAUDE.md)\n\nUse tabs.\n",
        ];
        crate::prompt::assert_in_order(&prompt, &order);
        assert!(!prompt.contains("<!--"), "{prompt}");
        assert!(
            !prompt.contains("tern, a coding assistant"),
            "the user's soul replaces it"
        );
    }

    #[test]
    fn public_gets_the_persona_and_the_public_rules_only() {
        let identity = full_identity();
        let instructions = file("CLAUDE.md", "Use tabs.");
        let prompt = system_prompt(
            Audience::Public,
            SystemSources {
                identity: &identity,
                instructions: Some(&instructions),
                size: PromptSize::Full,
            },
        );
        assert!(
            prompt.starts_with("You are Ada.\n\n# How you work\n"),
            "{prompt}"
        );
        for absent in [
            "Playbook",
            "Tooling",
            "Use tabs",
            "shell_execute",
            "file_edit",
            "<!--",
        ] {
            assert!(!prompt.contains(absent), "{absent} in {prompt}");
        }
        assert!(prompt.contains("Never invent"), "{prompt}");
    }

    #[test]
    fn without_identity_files_the_defaults_stand() {
        let prompt = system_prompt(
            Audience::Personal,
            SystemSources {
                identity: &IdentityFiles::default(),
                instructions: None,
                size: PromptSize::Full,
            },
        );
        assert!(prompt.starts_with("You are tern"), "{prompt}");
        assert!(!prompt.contains("# Playbook"), "{prompt}");
        assert!(!prompt.contains("# Project instructions"), "{prompt}");
    }

    #[test]
    fn a_cut_file_says_how_much_is_shown() {
        let mut instructions = file("AGENTS.md", "rules");
        instructions.cut_from = Some(40_000);
        let prompt = system_prompt(
            Audience::Team,
            SystemSources {
                identity: &IdentityFiles::default(),
                instructions: Some(&instructions),
                size: PromptSize::Full,
            },
        );
        assert!(
            prompt.contains(
                "[AGENTS.md is 40000 bytes; only its first 32 KiB are shown here. Read the rest \
                 with file_read when it matters]"
            ),
            "{prompt}"
        );
    }

    #[test]
    fn a_small_window_gets_the_compact_rules_and_cuts_long_files_at_a_line() {
        let size = PromptSize::for_window(4096);
        let long = "Use tabs.\n".repeat(200);
        let instructions = file("CLAUDE.md", &long);
        let identity = IdentityFiles::default();
        let sources = |size| SystemSources {
            identity: &identity,
            instructions: Some(&instructions),
            size,
        };
        let compact = system_prompt(Audience::Team, sources(size));
        let full = system_prompt(Audience::Team, sources(PromptSize::Full));
        assert!(compact.starts_with(COMPACT_SOUL.trim()), "{compact}");
        assert!(compact.contains("`file_edit`"), "{compact}");
        assert!(!compact.contains("<!--"), "{compact}");
        // The compact rules differ from the full ones, so a change of size is a change of
        // tier A, which renders tier B again too.
        assert_ne!(
            agents_core(Audience::Team, size),
            agents_core(Audience::Team, PromptSize::Full)
        );
        let rules = |size| agents_core(Audience::Team, size).len();
        assert!(rules(size) * 2 < rules(PromptSize::Full));
        let shown = "Use tabs.\n".repeat(102);
        assert!(
            compact.contains(&format!(
                "# Project instructions (from CLAUDE.md)\n\n{}\n\n[CLAUDE.md is 2000 bytes; only \
                 its first 1019 bytes are shown here. Read the rest with file_read when it \
                 matters]\n",
                shown.trim_end()
            )),
            "{compact}"
        );
        assert!(
            full.contains(&long),
            "the full prompt carries the whole file"
        );
        let public = agents_core(Audience::Public, size);
        for absent in ["file_edit", "summary"] {
            assert!(!public.contains(absent), "{absent} in {public}");
        }
    }

    #[test]
    fn in_a_small_window_the_person_s_files_share_one_budget() {
        let identity = IdentityFiles {
            soul: Some(file("identity/SOUL.md", "You are Ada.")),
            playbook: Some(file("identity/AGENTS.md", &"p".repeat(3000))),
            tooling: None,
        };
        let instructions = file("CLAUDE.md", &"c".repeat(3000));
        let prompt = system_prompt(
            Audience::Team,
            SystemSources {
                identity: &identity,
                instructions: Some(&instructions),
                size: PromptSize::for_window(4096),
            },
        );
        assert!(prompt.starts_with("You are Ada.\n"), "{prompt}");
        // The persona takes its 12 bytes; the two long files share the other 1,012.
        for name in ["identity/AGENTS.md", "CLAUDE.md"] {
            assert!(
                prompt.contains(&format!(
                    "[{name} is 3000 bytes; only its first 506 bytes are shown here"
                )),
                "{prompt}"
            );
        }
    }
}
