//! What a secret looks like when nothing says it is one: words shaped like the tokens of
//! well-known services, and URLs that carry a password.
//!
//! Two parts of tern ask this question: the session log's redactor, which replaces such words
//! with `<secret>`, and the filter that builds the environment of the commands tern runs,
//! which leaves out variables whose value holds one. Both use these checks, so a shape added
//! here is recognised in both places.

/// Prefixes of well-known token formats; a word starting with one and long enough is a secret.
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_live_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
];

/// Characters a token is made of; anything else ends a word.
pub fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '/' | '=' | '~')
}

/// Whether `word` (a run of [`is_token_char`] characters) looks like a token: a known
/// service's prefix followed by enough characters, a JWT, or a long random-looking run of
/// mixed-case letters and digits.
pub fn looks_like_token(word: &str) -> bool {
    let word = word.trim_matches(|c| matches!(c, '.' | '/' | '=' | '+'));
    if TOKEN_PREFIXES
        .iter()
        .any(|p| word.starts_with(p) && word.len() >= p.len() + 16)
    {
        return true;
    }
    // A JWT: three base64url parts, the first a JSON header.
    if word.starts_with("eyJ") && word.split('.').count() == 3 && word.len() >= 30 {
        return true;
    }
    // A long run of letters and digits mixed, as random keys are; hex alone is usually a
    // hash (a commit, a checksum), which is worth keeping.
    word.len() >= 32
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !word.chars().all(|c| c.is_ascii_hexdigit())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_uppercase())
        && word.chars().any(|c| c.is_ascii_lowercase())
}

/// Whether any word of `text` looks like a token, or the value of a `name=value` word does
/// (`--token=ghp_…`).
pub fn holds_token(text: &str) -> bool {
    text.split(|c| !is_token_char(c))
        .filter(|word| !word.is_empty())
        .any(|word| looks_like_token(word) || word.split('=').any(looks_like_token))
}

/// The words of `text` that look like tokens, and the token-shaped values of its
/// `name=value` words.
pub fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c| !is_token_char(c))
        .filter(|word| !word.is_empty())
        .flat_map(|word| std::iter::once(word).chain(word.split('=')))
        .filter(|word| looks_like_token(word))
}

/// Whether `text` holds a URL with a password in it, `scheme://user:password@host`
/// (`redis://:password@host` too). A user name alone (`https://user@host`) is not a secret.
pub fn holds_url_password(text: &str) -> bool {
    url_passwords(text).next().is_some()
}

/// The passwords of the URLs in `text` (see [`holds_url_password`]).
pub fn url_passwords(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("://").filter_map(|(at, sep)| {
        let rest = &text[at + sep.len()..];
        // The authority ends where the path, query or fragment begins; a password holding one
        // of these characters must be percent-encoded.
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let user_info = authority.rfind('@').map(|at| &authority[..at])?;
        user_info
            .split_once(':')
            .map(|(_, password)| password)
            .filter(|password| !password.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_token_formats_are_tokens() {
        for word in [
            "sk-ant-api03-abcdefghijklmnop1234",
            "ghp_1234567890abcdefghijABCDEFGHIJ0123",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "xoxb-1234567890-abcdefghijkl",
            "AKIAIOSFODNN7EXAMPLE1",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "Zq3xT9wLm2VbN8cR4yK7pD1sF6gH0jAe",
        ] {
            assert!(looks_like_token(word), "{word}");
        }
    }

    #[test]
    fn ordinary_words_are_not_tokens() {
        for word in [
            "sk-short",
            "3f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f",
            "/usr/local/bin:/usr/bin",
            "xterm-256color",
            "en_US.UTF-8",
            "0b6d2c9e-4f1a-4c3b-9d8e-7a6b5c4d3e2f",
        ] {
            assert!(!looks_like_token(word), "{word}");
        }
    }

    #[test]
    fn a_token_anywhere_in_a_text_is_found() {
        assert!(holds_token("Bearer sk-ant-api03-abcdefghijklmnop1234"));
        assert!(holds_token(
            "--token=ghp_1234567890abcdefghijABCDEFGHIJ0123"
        ));
        assert!(!holds_token("cargo test --lib tokens"));
        assert!(!holds_token(""));
    }

    #[test]
    fn urls_with_a_password_are_found() {
        for text in [
            "postgres://u:pw@host/db",
            "redis://:pw@localhost:6379",
            "https://user:p%40ss@example.com",
            "mongodb://a:b@h1,h2/?replicaSet=x",
            "first http://x.org then ftp://u:p@files",
        ] {
            assert!(holds_url_password(text), "{text}");
        }
        for text in [
            "https://example.com/a:b@c",
            "https://user@example.com",
            "https://example.com:8443/path",
            "git@github.com:owner/repo.git",
            "postgres://u:@host/db",
            "no url here: a@b",
        ] {
            assert!(!holds_url_password(text), "{text}");
        }
    }
}
