//! `${VAR}` and `${VAR:-default}` in MCP server settings, the syntax Claude Code reads in
//! `.mcp.json`, expanded from the [`Environment`] snapshot when the config is loaded.
//!
//! Only `${…}` is special: `$$` stays `$$` and a lone `$` stays as it is, so a value written
//! for Claude Code means the same here. A default runs to the first `}` and is not expanded
//! again. As everywhere in the environment snapshot, an empty variable counts as unset, so
//! `${VAR:-default}` gives the default for it, as a shell does. Errors never repeat the text
//! being expanded: it usually sits next to a token.

use super::env::Environment;
use super::tools::is_variable_name;

/// A value after expansion, with the variables it named (each once, in order of use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Expanded {
    pub text: String,
    pub vars: Vec<String>,
}

/// Why a value could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ExpandError {
    /// `${VAR}` names a variable that is not set, and gives no default.
    Unset(String),
    /// `${…}` holds something that is not a variable name.
    BadName,
    /// `${` without its closing `}`.
    Unclosed,
}

impl ExpandError {
    /// What is wrong and how to fix it, said of the value (the caller names the key first).
    pub(super) fn message(&self) -> String {
        match self {
            Self::Unset(var) => format!(
                "names ${{{var}}}, which is not set; export {var} in the environment tern \
                 starts in, or give a default as ${{{var}:-default}}"
            ),
            Self::BadName => "has a ${…} that holds no variable name; write ${VAR} or \
                 ${VAR:-default}, where VAR is letters, digits and `_`"
                .to_owned(),
            Self::Unclosed => "has a ${ without its closing }; write ${VAR} or \
                 ${VAR:-default} (a $ not followed by { is kept as it is)"
                .to_owned(),
        }
    }
}

/// Expands every `${VAR}` and `${VAR:-default}` in `text`. With `keep_unset`, an unset
/// variable without a default is left as written instead of being an error: a disabled
/// server never runs, so a variable it would need may well be missing.
pub(super) fn expand(
    text: &str,
    env: &Environment,
    keep_unset: bool,
) -> Result<Expanded, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut vars: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let close = after.find('}').ok_or(ExpandError::Unclosed)?;
        let inner = &after[..close];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_variable_name(name, false) {
            return Err(ExpandError::BadName);
        }
        if !vars.iter().any(|v| v == name) {
            vars.push(name.to_owned());
        }
        match (env.get(name), default) {
            (Some(value), _) => out.push_str(value),
            (None, Some(default)) => out.push_str(default),
            (None, None) if keep_unset => out.push_str(&rest[at..at + 2 + close + 1]),
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(Expanded { text: out, vars })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<&str, ExpandError>) {
        let env = Environment::from_pairs([("HOST", "example.com"), ("TOKEN", "t0k"), ("E", "")]);
        let got = expand(text, &env, false).map(|e| e.text);
        assert_eq!(got.as_deref().map_err(Clone::clone), expected, "{text}");
    }

    #[test]
    fn variables_and_defaults() {
        check("https://${HOST}/mcp", Ok("https://example.com/mcp"));
        check("Bearer ${TOKEN}", Ok("Bearer t0k"));
        check("${MISSING:-fallback}", Ok("fallback"));
        check("${HOST:-fallback}", Ok("example.com"));
        // Empty counts as unset, as `:-` does in a shell.
        check("${E:-d}", Ok("d"));
        check("${MISSING:-}", Ok(""));
        check("${MISSING:-a:-b}", Ok("a:-b"));
    }

    #[test]
    fn dollars_without_braces_stay() {
        check("$$ and $HOST and $", Ok("$$ and $HOST and $"));
        check("$${HOST}", Ok("$example.com"));
        check("", Ok(""));
    }

    #[test]
    fn problems() {
        check("${MISSING}", Err(ExpandError::Unset("MISSING".into())));
        check("${E}", Err(ExpandError::Unset("E".into())));
        check("${}", Err(ExpandError::BadName));
        check("${A B}", Err(ExpandError::BadName));
        check("${1X}", Err(ExpandError::BadName));
        check("x ${HOST", Err(ExpandError::Unclosed));
    }

    #[test]
    fn variables_are_listed_once_set_or_not() {
        let env = Environment::from_pairs([("A", "1")]);
        let got = expand("${A}${B:-x}${A}", &env, false).unwrap();
        assert_eq!(got.text, "1x1");
        assert_eq!(got.vars, ["A", "B"]);
    }

    #[test]
    fn keep_unset_leaves_the_reference_as_written() {
        let env = Environment::default();
        let got = expand("Bearer ${TOKEN} ${X:-d}", &env, true).unwrap();
        assert_eq!(got.text, "Bearer ${TOKEN} d");
    }

    #[test]
    fn messages_name_the_variable() {
        let text = ExpandError::Unset("GITHUB_TOKEN".into()).message();
        assert!(
            text.starts_with("names ${GITHUB_TOKEN}, which is not set"),
            "{text}"
        );
    }
}
