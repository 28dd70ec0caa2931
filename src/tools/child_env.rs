//! The environment of every command tern runs: tern's own environment minus anything that
//! is or looks like a credential.
//!
//! The model reads whatever a command prints, and `env` would otherwise print the provider
//! keys tern runs with. [`ChildEnv`] decides variable by variable ([`ChildEnv::verdict`], a
//! pure function, tested rule by rule), in this order:
//!
//! 1. `[tools] strip_env` names or `*` patterns are removed (a way to hide harmless-looking
//!    variables too).
//! 2. `[tools] pass_env` names are kept, whatever they look like. The person asked by name, so
//!    this holds even for a variable a provider profile uses as its key.
//! 3. The variables tern itself treats as credentials are removed: every profile's
//!    `api_key_env` and the conventional provider variables ([`PROVIDER_CREDENTIALS`]).
//! 4. Names that look secret are removed (see [`is_secret_name`]).
//! 5. Values that look secret are removed: a URL with a password, or a word shaped like a
//!    known token format (`domain::secret_shapes`). A value that is not UTF-8 is checked on
//!    its readable parts, since its invalid bytes cannot be part of a token shape.

use crate::domain::secret_shapes::{holds_token, holds_url_password, tokens, url_passwords};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};

/// Variables the ecosystem's tools read their provider keys from. Most already look secret
/// by name; they are listed so that they go even if the name rules are ever loosened.
pub const PROVIDER_CREDENTIALS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "OPENROUTER_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "COHERE_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GITHUB_TOKEN",
    "GH_TOKEN",
];

/// Names that look secret by the rules below but are not, and that programs need.
const NOT_SECRETS: &[&str] = &[
    // The SSH agent's socket: git over ssh needs it, and the agent never hands out keys.
    "SSH_AUTH_SOCK",
    // zsh's wait for the rest of a key sequence.
    "KEYTIMEOUT",
    // Hugging Face tokenizers' threading switch, read by Python tooling.
    "TOKENIZERS_PARALLELISM",
    // The path of the GNOME keyring's control socket, like SSH_AUTH_SOCK for the SSH agent.
    "GNOME_KEYRING_CONTROL",
];

/// Parts of a name that make it secret wherever they appear, compared without case.
const SECRET_WORDS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

/// Parts of a name that make it secret only as a whole word between `_`, `-` or `.`, since
/// they also occur inside ordinary names: `GH_PAT` but not `PATH` or `PATCH`, `SMTP_PASS` but
/// not `PASSTHROUGH`, `DB_CRED` but not `INCREDIBLE`.
const SECRET_PARTS: &[&str] = &["PAT", "PASS", "PWD", "CRED", "CREDS"];

/// Why a variable stays out of a command's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// `[tools] strip_env` names it.
    Stripped,
    /// A provider's key: a profile's `api_key_env`, or a conventional provider variable.
    Credential,
    /// Its name looks secret.
    SecretName,
    /// Its value holds a URL with a password.
    UrlPassword,
    /// Its value holds a word shaped like a token.
    TokenValue,
}

/// What happens to one variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It reaches the command.
    Keep,
    /// It reaches the command because `[tools] pass_env` names it.
    Passed,
    /// It does not.
    Remove(Removal),
}

/// The rules for the environment of commands; one per process, shared by every session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    /// Variables the providers read their keys from (each profile's `api_key_env`).
    credentials: BTreeSet<String>,
    /// `[tools] pass_env`: exact names.
    pass: BTreeSet<String>,
    /// `[tools] strip_env`: names, where `*` matches any run of characters.
    strip: Vec<String>,
}

impl ChildEnv {
    /// Rules that also remove `credentials` (the configured `api_key_env` names), let `pass`
    /// through and remove whatever matches `strip`.
    pub fn new(
        credentials: impl IntoIterator<Item = String>,
        pass: impl IntoIterator<Item = String>,
        strip: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            credentials: credentials.into_iter().collect(),
            pass: pass.into_iter().collect(),
            strip: strip.into_iter().collect(),
        }
    }

    /// What happens to the variable `name` with `value`.
    pub fn verdict(&self, name: &OsStr, value: &OsStr) -> Verdict {
        // A name that is not UTF-8 is checked on its readable parts: every rule is about
        // ASCII letters, which survive the lossy conversion.
        let name = name.to_string_lossy();
        if self.strip.iter().any(|pattern| glob_match(pattern, &name)) {
            return Verdict::Remove(Removal::Stripped);
        }
        if self.pass.contains(name.as_ref()) {
            return Verdict::Passed;
        }
        if self.credentials.contains(name.as_ref()) || PROVIDER_CREDENTIALS.contains(&&*name) {
            return Verdict::Remove(Removal::Credential);
        }
        if is_secret_name(&name) {
            return Verdict::Remove(Removal::SecretName);
        }
        let value = value.to_string_lossy();
        if holds_url_password(&value) {
            return Verdict::Remove(Removal::UrlPassword);
        }
        if holds_token(&value) {
            return Verdict::Remove(Removal::TokenValue);
        }
        Verdict::Keep
    }

    /// The secrets among `vars` that this filter keeps from commands, by value, for the
    /// redaction of what tools print: provider keys whole, the token-shaped words and URL
    /// passwords inside values, and the whole value of a variable named like a secret when it
    /// reads like one (12 characters or more, no white space, not a path), since shorter or
    /// plainer values would match ordinary text. What `strip_env` removes may be anything,
    /// so it is not taken for a secret.
    pub fn secret_values(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<String> {
        let mut found = Vec::new();
        for (name, value) in vars {
            let Verdict::Remove(why) = self.verdict(&name, &value) else {
                continue;
            };
            let Some(value) = value.to_str() else {
                continue;
            };
            match why {
                Removal::Stripped => {}
                Removal::Credential => found.push(value.to_owned()),
                Removal::SecretName
                    if value.len() >= 12
                        && !value.contains(char::is_whitespace)
                        && !value.contains('/') =>
                {
                    found.push(value.to_owned());
                }
                Removal::SecretName | Removal::UrlPassword | Removal::TokenValue => {}
            }
            found.extend(url_passwords(value).map(str::to_owned));
            found.extend(tokens(value).map(str::to_owned));
        }
        found
    }

    /// The variables of `vars` that reach a command, in their order.
    pub fn filter(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.into_iter()
            .filter(|(name, value)| !matches!(self.verdict(name, value), Verdict::Remove(_)))
            .collect()
    }

    /// Gives `command` the environment it runs with: this process's, filtered. Settings the
    /// caller makes afterwards (`TMPDIR`) are added to it.
    pub fn apply(&self, command: &mut std::process::Command) {
        command.env_clear();
        command.envs(self.filter(std::env::vars_os()));
    }
}

/// Whether `name` looks like it holds a secret, in any case: it contains one of
/// [`SECRET_WORDS`], has one of [`SECRET_PARTS`] as a whole word (in a name of more than one
/// word, so `PWD`, the working directory, stays), or speaks of authentication (see
/// [`speaks_of_auth`]); unless it is one of [`NOT_SECRETS`].
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT_SECRETS.contains(&upper.as_str()) {
        return false;
    }
    if SECRET_WORDS.iter().any(|word| upper.contains(word)) {
        return true;
    }
    let parts: Vec<&str> = upper
        .split(['_', '-', '.'])
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() > 1 && parts.iter().any(|part| SECRET_PARTS.contains(part)) {
        return true;
    }
    speaks_of_auth(&upper)
}

/// Whether an upper-case name contains `AUTH` other than as the start of `AUTHOR` or
/// `AUTHORITY`: `HTTP_AUTH`, `OAUTH_CLIENT`, `PROXY_AUTHORIZATION` and `NPM_AUTH` are secret,
/// `GIT_AUTHOR_NAME` is not, and neither is `XAUTHORITY`. That one names the X server's cookie
/// file, which any process of the user can read anyway, so hiding the path would protect
/// nothing and would break commands that open windows.
fn speaks_of_auth(upper: &str) -> bool {
    upper.match_indices("AUTH").any(|(at, word)| {
        let after = &upper[at + word.len()..];
        !after.starts_with("OR") || after.starts_with("ORIZ")
    })
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (none
/// included) and everything else only itself.
fn glob_match(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    // There is always a first piece; without a `*` it must be the whole name.
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let mut pieces: Vec<&str> = pieces.collect();
    let Some(last) = pieces.pop() else {
        return rest.is_empty();
    };
    for piece in pieces {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn rules() -> ChildEnv {
        ChildEnv::new(
            ["MY_PROVIDER_CRED".to_owned(), "WORK_LLM".to_owned()],
            ["GH_PAT".to_owned(), "WORK_LLM".to_owned()],
            ["CORP_*".to_owned(), "HARMLESS".to_owned()],
        )
    }

    #[track_caller]
    fn check(name: &str, value: &str, expected: Verdict) {
        assert_eq!(
            rules().verdict(OsStr::new(name), OsStr::new(value)),
            expected,
            "{name}={value}"
        );
    }

    #[track_caller]
    fn check_name(name: &str, secret: bool) {
        assert_eq!(is_secret_name(name), secret, "{name}");
    }

    const KEEP: Verdict = Verdict::Keep;
    const fn remove(why: Removal) -> Verdict {
        Verdict::Remove(why)
    }

    #[test]
    fn strip_env_removes_names_and_patterns_first() {
        check("HARMLESS", "1", remove(Removal::Stripped));
        check("CORP_REGION", "eu", remove(Removal::Stripped));
        check("CORP_", "eu", remove(Removal::Stripped));
        check("MY_CORP_REGION", "eu", KEEP);
        check("HARMLESS_TOO", "1", KEEP);
    }

    #[test]
    fn pass_env_lets_named_variables_through_even_a_configured_credential() {
        check(
            "GH_PAT",
            "ghp_1234567890abcdefghijABCDEFGHIJ0123",
            Verdict::Passed,
        );
        check("WORK_LLM", "sk-work-0123456789abcdefgh", Verdict::Passed);
        // Exact names only, in their case.
        check("gh_pat", "x", remove(Removal::SecretName));
    }

    #[test]
    fn configured_and_conventional_credentials_are_removed_whatever_their_value() {
        check("MY_PROVIDER_CRED", "plain", remove(Removal::Credential));
        check("ANTHROPIC_API_KEY", "x", remove(Removal::Credential));
        check("OPENROUTER_API_KEY", "x", remove(Removal::Credential));
        check("AWS_SECRET_ACCESS_KEY", "x", remove(Removal::Credential));
        check("AWS_SESSION_TOKEN", "x", remove(Removal::Credential));
        check("GOOGLE_API_KEY", "x", remove(Removal::Credential));
    }

    #[test]
    fn names_with_a_secret_word_anywhere_are_secret() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "PGPASSWORD",
            "Db_Password",
            "MY_PASSWD",
            "CARGO_REGISTRY_TOKEN",
            "APIKEY",
            "AWS_SHARED_CREDENTIALS_FILE",
        ] {
            check_name(name, true);
        }
        check("MY_PASSWD", "hunter2", remove(Removal::SecretName));
    }

    #[test]
    fn short_secret_words_count_only_as_whole_parts_of_the_name() {
        for name in [
            "GH_PAT",
            "PAT_TOKEN",
            "GITHUB_PAT",
            "AZURE_DEVOPS_PAT",
            "SMTP_PASS",
            "MYSQL_PWD",
            "DB_CRED",
            "JIRA_CREDS",
            "my-pat",
        ] {
            check_name(name, true);
        }
        for name in [
            "PATH",
            "PATCH",
            "PYTHONPATH",
            "MANPATH",
            "PWD",
            "OLDPWD",
            "PASSTHROUGH",
            "PGPASSFILE",
            "INCREDIBLE_MODE",
        ] {
            check_name(name, false);
        }
    }

    #[test]
    fn auth_is_secret_but_not_author_or_xauthority() {
        for name in [
            "HTTP_AUTH",
            "NPM_AUTH",
            "BASIC_AUTH",
            "OAUTH_CLIENT",
            "PROXY_AUTHORIZATION",
            "AUTHENTICATION",
            "GIT_AUTHOR_NAME_AUTH",
        ] {
            check_name(name, true);
        }
        for name in [
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "AUTHOR",
            "XAUTHORITY",
            "SSH_AUTH_SOCK",
        ] {
            check_name(name, false);
        }
    }

    #[test]
    fn allowed_names_that_look_secret_are_kept() {
        for name in [
            "SSH_AUTH_SOCK",
            "KEYTIMEOUT",
            "keytimeout",
            "TOKENIZERS_PARALLELISM",
            "GNOME_KEYRING_CONTROL",
        ] {
            check_name(name, false);
        }
        check("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent.sock", KEEP);
    }

    #[test]
    fn urls_with_a_password_are_removed() {
        check(
            "DATABASE_URL",
            "postgres://u:pw@host/db",
            remove(Removal::UrlPassword),
        );
        check(
            "REDIS_URL",
            "redis://:pw@localhost",
            remove(Removal::UrlPassword),
        );
        check("HOMEPAGE", "https://user@example.com/x", KEEP);
        check("HTTPS_PROXY", "http://proxy.corp:3128", KEEP);
    }

    #[test]
    fn token_shaped_values_are_removed() {
        check(
            "FOO",
            "sk-proj-0123456789abcdefghijklmn",
            remove(Removal::TokenValue),
        );
        check(
            "GH",
            "ghp_1234567890abcdefghijABCDEFGHIJ0123",
            remove(Removal::TokenValue),
        );
        check(
            "SLACK",
            "xoxb-1234567890-abcdefghijkl",
            remove(Removal::TokenValue),
        );
        check(
            "AWS_ID",
            "AKIAIOSFODNN7EXAMPLE1",
            remove(Removal::TokenValue),
        );
        check(
            "CURL_OPTS",
            "-H Authorization:sk-ant-api03-abcdefghijklmnop1234",
            remove(Removal::TokenValue),
        );
    }

    #[test]
    fn ordinary_variables_are_kept() {
        check("PATH", "/usr/local/bin:/usr/bin:/bin", KEEP);
        check("HOME", "/home/ada", KEEP);
        check("LANG", "en_US.UTF-8", KEEP);
        check("TERM", "xterm-256color", KEEP);
        check(
            "GIT_COMMIT",
            "3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f",
            KEEP,
        );
        check("LS_COLORS", "di=01;34:ln=01;36:*.tar=01;31", KEEP);
        check("EMPTY", "", KEEP);
    }

    #[test]
    fn non_utf8_names_and_values_are_judged_on_their_readable_parts() {
        let verdict = |name: &[u8], value: &[u8]| {
            rules().verdict(OsStr::from_bytes(name), OsStr::from_bytes(value))
        };
        assert_eq!(verdict(b"MY_\xffTOKEN", b"x"), remove(Removal::SecretName));
        assert_eq!(verdict(b"LATIN1_\xff", b"caf\xe9"), KEEP);
        assert_eq!(
            verdict(b"ODD", b"\xff ghp_1234567890abcdefghijABCDEFGHIJ0123"),
            remove(Removal::TokenValue)
        );
        assert_eq!(verdict(b"ODD", b"\xff\xfe plain"), KEEP);
    }

    #[test]
    fn filter_keeps_order_and_drops_removed_variables() {
        let vars = [
            ("PATH", "/bin"),
            ("MY_PROVIDER_CRED", "k"),
            ("GH_PAT", "p"),
            ("HARMLESS", "1"),
            ("LANG", "C"),
        ]
        .map(|(n, v)| (OsString::from(n), OsString::from(v)));
        let kept: Vec<String> = rules()
            .filter(vars)
            .into_iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["PATH", "GH_PAT", "LANG"]);
    }

    #[test]
    fn globs_match_runs_of_any_characters() {
        for (pattern, name, expected) in [
            ("AWS_*", "AWS_REGION", true),
            ("AWS_*", "AWS_", true),
            ("AWS_*", "MY_AWS_REGION", false),
            ("*_URL", "DATABASE_URL", true),
            ("*_URL", "DATABASE_URLS", false),
            ("A*B*C", "AxxBxxC", true),
            ("A*B*C", "AxxC", false),
            ("AB*BA", "ABA", false),
            ("EXACT", "EXACT", true),
            ("EXACT", "EXACTLY", false),
            ("*", "ANYTHING", true),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} ~ {name}");
        }
    }
}
