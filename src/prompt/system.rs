//! Tier A, the persisted system prompt: persona, operating rules, the user's playbook and
//! tooling notes, and the project's instructions. Built from files that rarely change, so
//! it is journaled once and rebuilt only when one of them does; every request of a session
//! starts with the same bytes.

use crate::context::{IdentityFiles, MAX_PROMPT_FILE_BYTES, ProjectInstructions, PromptFile};
use crate::domain::Audience;

/// The default persona, replaced by the user's `identity/SOUL.md`.
const DEFAULT_SOUL: &str = include_str!("../../assets/SOUL.md");
/// The operating rules every session starts from. Lines between `<!-- host -->` and
/// `<!-- /host -->` are about working on a machine and are left out for the Public audience.
const AGENTS_CORE: &str = include_str!("../../assets/AGENTS.md");

const HOST_START: &str = "<!-- host -->";
const HOST_END: &str = "<!-- /host -->";

/// What tier A is built from.
#[derive(Debug, Clone, Copy)]
pub struct SystemSources<'a> {
    pub identity: &'a IdentityFiles,
    pub instructions: Option<&'a ProjectInstructions>,
}

/// Tier A for `audience`. Public gets the persona and the public rules only; Team and
/// Personal get the whole stack.
pub fn system_prompt(audience: Audience, sources: SystemSources<'_>) -> String {
    let soul = sources.identity.soul.as_ref();
    let persona = soul.map_or(DEFAULT_SOUL, |file| file.text.as_str());
    let mut prompt = format!("{}\n", persona.trim());
    if let Some(file) = soul {
        push_cut_note(&mut prompt, file, false);
    }
    prompt.push_str(&format!("\n{}\n", agents_core(audience).trim()));
    if audience == Audience::Public {
        return prompt;
    }
    let sections = [
        ("Playbook", sources.identity.playbook.as_ref()),
        ("Tooling", sources.identity.tooling.as_ref()),
        ("Project instructions", sources.instructions),
    ];
    for (title, file) in sections {
        if let Some(file) = file {
            push_file(&mut prompt, title, file, sources.instructions == Some(file));
        }
    }
    prompt
}

/// The embedded operating rules; the public variant leaves out the machine-only lines.
pub fn agents_core(audience: Audience) -> String {
    let mut out = String::with_capacity(AGENTS_CORE.len());
    let mut in_host = false;
    for line in AGENTS_CORE.lines() {
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
fn push_file(prompt: &mut String, title: &str, file: &PromptFile, in_project: bool) {
    prompt.push_str(&format!(
        "\n# {title} (from {})\n\n{}\n",
        file.file.display(),
        file.text.trim_end()
    ));
    push_cut_note(prompt, file, in_project);
}

/// Says so when `file` was cut to the size limit.
fn push_cut_note(prompt: &mut String, file: &PromptFile, in_project: bool) {
    if let Some(size) = file.cut_from {
        let rest = if in_project {
            ". Read the rest with file_read when it matters"
        } else {
            ""
        };
        prompt.push_str(&format!(
            "\n[{} is {size} bytes; only its first {} KiB are shown here{rest}]\n",
            file.file.display(),
            MAX_PROMPT_FILE_BYTES / 1024
        ));
    }
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
}
