//! Whether a name typed after `/model` can be a model id.
//!
//! Real ids are short and made of letters, digits and a few separators: `claude-sonnet-4-5`,
//! `gpt-4.1-mini`, `qwen2.5-coder:7b`, `hf.co/org/Model-GGUF:Q4_K_M`,
//! `openai/gpt-4o@2024-08-06`, a llama.cpp server's `../models/name.gguf`. A name with a
//! space, a control character or thousands of characters is a slip (a pasted paragraph, a
//! stray key), and switching to it would only fail at the next turn.

/// The longest model name taken, in characters: the longest ids seen (gateway routes over
/// Hugging Face paths) are well under a hundred.
pub const MAX_CHARS: usize = 200;

/// The characters a model id may hold besides letters and digits.
const SEPARATORS: &str = ".-_:/@+";

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
}
