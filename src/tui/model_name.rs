//! Whether a name typed after `/model` can be a model id, and, where the provider lists its
//! models, whether it is one of them and which listed ones come close. The list is asked in
//! the task that switches the model, never on the interface's; a provider that lists none,
//! does not answer in time or fails lets the name through, to be judged at the next turn.
//!
//! Real ids are short and made of letters, digits and a few separators: `claude-sonnet-4-5`,
//! `gpt-4.1-mini`, `qwen2.5-coder:7b`, `hf.co/org/Model-GGUF:Q4_K_M`,
//! `openai/gpt-4o@2024-08-06`, a llama.cpp server's `../models/name.gguf`. A name with a
//! space, a control character or thousands of characters is a slip (a pasted paragraph, a
//! stray key), and switching to it would only fail at the next turn.

use crate::domain::SessionId;
use crate::gateway::SessionService;
use std::time::Duration;

/// The longest model name taken, in characters: the longest ids seen (gateway routes over
/// Hugging Face paths) are well under a hundred.
pub const MAX_CHARS: usize = 200;

/// The characters a model id may hold besides letters and digits.
const SEPARATORS: &str = ".-_:/@+";

/// How many close matches a notice names at most.
const CLOSE_MATCHES: usize = 5;

/// How long the provider's list is waited for before the name is let through.
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// `Err` with the notice when the provider of session `id` lists its models and `model` is
/// not among them.
pub async fn check_listed(
    service: &SessionService,
    id: &SessionId,
    model: &str,
) -> Result<(), String> {
    match tokio::time::timeout(LIST_TIMEOUT, service.listed_models(id)).await {
        Ok(Ok((provider, Some(models)))) if !models.is_empty() && !listed(model, &models) => {
            Err(unknown(model, &provider, &models))
        }
        _ => Ok(()),
    }
}

/// `Ok` when `name` can be a model id; otherwise the notice saying why and what to type.
pub fn check(name: &str) -> Result<(), String> {
    let count = name.chars().count();
    if count > MAX_CHARS {
        return Err(format!(
            "the model was not changed: a model name has at most {MAX_CHARS} characters and \
             this one has {count}; type the id as the provider lists it (`/model NAME`, e.g. \
             `/model claude-sonnet-4-5`)"
        ));
    }
    let bad = name
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_alphanumeric() || SEPARATORS.contains(*c)));
    match bad {
        None => Ok(()),
        Some((at, c)) => Err(format!(
            "the model was not changed: a model name cannot hold {} (character {}); ids are \
             letters, digits and {}, as the provider lists them (`/model NAME`)",
            describe(c),
            at + 1,
            SEPARATORS
                .chars()
                .map(String::from)
                .collect::<Vec<_>>()
                .join(" "),
        )),
    }
}

/// A character as a notice names it: whitespace and invisible ones by name and code point.
fn describe(c: char) -> String {
    match c {
        ' ' => "a space".to_owned(),
        '\t' => "a tab".to_owned(),
        '\n' | '\r' => "a line break".to_owned(),
        c if c.is_control() => format!("a control character, U+{:04X},", u32::from(c)),
        c if c.is_whitespace() => format!("a space character, U+{:04X},", u32::from(c)),
        // Zero-width and other invisible characters show only by their code point.
        c if !c.is_ascii() => format!("U+{:04X}", u32::from(c)),
        c => format!("`{c}`"),
    }
}

/// Whether the provider that listed `listed` serves `name`: listed as is, or as a short
/// form the provider takes too (Ollama's `name` for `name:latest`; Anthropic's aliases
/// `claude-x`, `claude-x-0` and `claude-x-latest` for its dated `claude-x-20250929`).
pub fn listed(name: &str, listed: &[String]) -> bool {
    let base = name
        .strip_suffix("-latest")
        .or_else(|| name.strip_suffix("-0"));
    let dated = |id: &str, name: &str| {
        id.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|date| date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()))
    };
    listed.iter().any(|id| {
        id == name
            || id.strip_suffix(":latest") == Some(name)
            || dated(id, name)
            || base.is_some_and(|base| dated(id, base))
    })
}

/// The listed ids closest to `name`, best first: those that contain it or that it
/// contains, then those a few edits away.
pub fn close_matches<'a>(name: &str, listed: &'a [String]) -> Vec<&'a str> {
    let wanted = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = listed
        .iter()
        .filter_map(|id| {
            let lower = id.to_lowercase();
            let score = if lower.contains(&wanted) || wanted.contains(&lower) {
                0
            } else {
                let distance = edit_distance(&wanted, &lower);
                // Further than a third of the name is another model, not a typo.
                if distance > (wanted.chars().count() / 3).max(1) {
                    return None;
                }
                distance
            };
            Some((score, id.as_str()))
        })
        .collect();
    scored.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1.len().cmp(&b.1.len()))
            .then(a.1.cmp(b.1))
    });
    scored
        .into_iter()
        .take(CLOSE_MATCHES)
        .map(|(_, id)| id)
        .collect()
}

/// The notice for a name the provider does not list.
pub fn unknown(name: &str, provider: &str, listed: &[String]) -> String {
    let close = close_matches(name, listed);
    let hint = if close.is_empty() {
        format!(
            "it lists {} models; /model NAME with one of them",
            listed.len()
        )
    } else {
        format!("did you mean {}?", close.join(", "))
    };
    format!("{provider} has no model `{name}`; {hint}")
}

/// Levenshtein distance over characters: the edits from `a` to `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_ids_pass() {
        for id in [
            "claude-sonnet-4-5",
            "gpt-4.1-mini",
            "qwen2.5-coder:7b",
            "hf.co/bartowski/Qwen2.5-Coder-7B-Instruct-GGUF:Q4_K_M",
            "openai/gpt-4o@2024-08-06",
            "../models/qwen2.5-coder-0.5b-instruct-q8_0.gguf",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
        ] {
            assert_eq!(check(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn slips_are_refused_naming_the_cause() {
        let check_err = |name: &str, says: &str| {
            let err = check(name).expect_err(name);
            assert!(err.contains(says), "{name:?}: {err}");
        };
        check_err(
            &"a".repeat(6000),
            "at most 200 characters and this one has 6000",
        );
        check_err("gpt 4o", "a space (character 4)");
        check_err("gpt\u{7}4o", "a control character, U+0007, (character 4)");
        check_err("gpt\u{200d}4o", "U+200D (character 4)");
        check_err("gpt#4o", "`#` (character 4)");
        assert_eq!(check(&"a".repeat(MAX_CHARS)), Ok(()));
    }

    #[test]
    fn short_forms_the_provider_takes_count_as_listed() {
        let ids = [
            "llama3.2:latest".to_owned(),
            "claude-sonnet-4-5-20250929".to_owned(),
            "gpt-4o".to_owned(),
        ];
        assert!(listed("gpt-4o", &ids));
        assert!(listed("llama3.2", &ids));
        assert!(listed("claude-sonnet-4-5", &ids));
        assert!(!listed("claude-sonnet-4", &ids));
        // Anthropic's documented aliases of dated ids.
        let ids = [
            "claude-opus-4-20250514".to_owned(),
            "claude-3-7-sonnet-20250219".to_owned(),
        ];
        assert!(listed("claude-opus-4-0", &ids));
        assert!(listed("claude-3-7-sonnet-latest", &ids));
        assert!(!listed("claude-opus-5-0", &ids));
        assert!(!listed("gpt-4", &ids));
    }

    #[test]
    fn close_matches_come_best_first() {
        let ids: Vec<String> = ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "text-embedding-3"]
            .map(String::from)
            .into();
        assert_eq!(close_matches("gpt4o", &ids), ["gpt-4o"]);
        assert_eq!(close_matches("gpt-4.2", &ids), ["gpt-4.1", "gpt-4o"]);
        assert_eq!(close_matches("4o", &ids), ["gpt-4o", "gpt-4o-mini"]);
        assert!(close_matches("llama", &ids).is_empty());
        assert_eq!(
            unknown("gpt4o", "openai", &ids),
            "openai has no model `gpt4o`; did you mean gpt-4o?"
        );
    }
}
