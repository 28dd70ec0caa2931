//! A snapshot of the environment variables tern reads, taken once at start-up.
//!
//! Loading the configuration is a pure function of the file text and this snapshot, so tests
//! build an [`Environment`] from a list of pairs instead of mutating the process environment
//! (which is shared by every test thread). Empty values count as unset, because
//! `export OPENAI_API_KEY=` is how people usually "unset" a variable in a shell profile.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use super::providers::redact_url;

/// The environment variables tern reads, plus any other variable a profile names as its
/// `api_key_env`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `TERN_HOME`: one folder holding config, data and logs.
    pub tern_home: Option<PathBuf>,
    /// `ANTHROPIC_API_KEY`.
    pub anthropic_api_key: Option<String>,
    /// `ANTHROPIC_BASE_URL`.
    pub anthropic_base_url: Option<String>,
    /// `OPENAI_API_KEY`.
    pub openai_api_key: Option<String>,
    /// `OPENAI_BASE_URL`.
    pub openai_base_url: Option<String>,
    /// `OLLAMA_HOST`, as `host:port`, `host` or a full URL.
    pub ollama_host: Option<String>,
    /// Every other variable with a UTF-8 name and value, for `api_key_env` lookups.
    others: BTreeMap<String, String>,
}

impl Environment {
    /// Takes a snapshot of the current process environment.
    pub fn from_process() -> Self {
        Self::from_os_pairs(std::env::vars_os())
    }

    /// Builds an environment from name/value pairs; what tests use.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let mut env = Self::default();
        for (name, value) in pairs {
            env.set(name.into(), value.into());
        }
        env
    }

    fn from_os_pairs(pairs: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        let mut env = Self::default();
        for (name, value) in pairs {
            // TERN_HOME may be any path; everything else tern reads is text.
            if name == "TERN_HOME" {
                if !value.is_empty() {
                    env.tern_home = Some(PathBuf::from(value));
                }
                continue;
            }
            if let (Ok(name), Ok(value)) = (name.into_string(), value.into_string()) {
                env.set(name, value);
            }
        }
        env
    }

    /// Sets one variable, routing the well-known names to their fields.
    fn set(&mut self, name: String, value: String) {
        let value = (!value.is_empty()).then_some(value);
        match name.as_str() {
            "TERN_HOME" => self.tern_home = value.map(PathBuf::from),
            "ANTHROPIC_API_KEY" => self.anthropic_api_key = value,
            "ANTHROPIC_BASE_URL" => self.anthropic_base_url = value,
            "OPENAI_API_KEY" => self.openai_api_key = value,
            "OPENAI_BASE_URL" => self.openai_base_url = value,
            "OLLAMA_HOST" => self.ollama_host = value,
            _ => {
                if let Some(value) = value {
                    self.others.insert(name, value);
                } else {
                    self.others.remove(&name);
                }
            }
        }
    }

    /// This snapshot less the variables `names` (set empty, as if unset): what a project's
    /// own files may read, so they cannot name tern's credentials.
    pub fn without(&self, names: &[String]) -> Self {
        let mut env = self.clone();
        for name in names {
            env.set(name.clone(), String::new());
        }
        env
    }

    /// The value of any variable by name; `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        match name {
            "TERN_HOME" => self.tern_home.as_ref().and_then(|p| p.to_str()),
            "ANTHROPIC_API_KEY" => self.anthropic_api_key.as_deref(),
            "ANTHROPIC_BASE_URL" => self.anthropic_base_url.as_deref(),
            "OPENAI_API_KEY" => self.openai_api_key.as_deref(),
            "OPENAI_BASE_URL" => self.openai_base_url.as_deref(),
            "OLLAMA_HOST" => self.ollama_host.as_deref(),
            _ => self.others.get(name).map(String::as_str),
        }
    }
}

/// Shows which variables are set but never a value: the snapshot holds API keys and may end
/// up in a log line or a panic message.
impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |v: &Option<String>| if v.is_some() { "set" } else { "unset" };
        // A base URL may carry a password or a key until loading refuses it.
        let url = |v: &Option<String>| v.as_deref().map(redact_url);
        f.debug_struct("Environment")
            .field("tern_home", &self.tern_home)
            .field("anthropic_api_key", &set(&self.anthropic_api_key))
            .field("anthropic_base_url", &url(&self.anthropic_base_url))
            .field("openai_api_key", &set(&self.openai_api_key))
            .field("openai_base_url", &url(&self.openai_base_url))
            .field("ollama_host", &url(&self.ollama_host))
            .field("others", &self.others.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_go_to_fields_and_empty_means_unset() {
        let env = Environment::from_pairs([
            ("ANTHROPIC_API_KEY", "sk-a"),
            ("OPENAI_API_KEY", ""),
            ("WORK_KEY", "w"),
            ("EMPTY_KEY", ""),
        ]);
        assert_eq!(env.anthropic_api_key.as_deref(), Some("sk-a"));
        assert_eq!(env.get("ANTHROPIC_API_KEY"), Some("sk-a"));
        assert_eq!(env.openai_api_key, None);
        assert_eq!(env.get("WORK_KEY"), Some("w"));
        assert_eq!(env.get("EMPTY_KEY"), None);
        assert_eq!(env.get("NOT_THERE"), None);
    }

    #[test]
    fn debug_never_shows_values() {
        let env = Environment::from_pairs([("ANTHROPIC_API_KEY", "sk-secret"), ("X", "sk-other")]);
        let text = format!("{env:?}");
        assert!(!text.contains("sk-"), "{text}");
    }

    #[test]
    fn os_pairs_keep_tern_home_as_a_path() {
        let env = Environment::from_os_pairs([
            (OsString::from("TERN_HOME"), OsString::from("/tmp/t")),
            (OsString::from("OLLAMA_HOST"), OsString::from("box:1")),
        ]);
        assert_eq!(env.tern_home, Some(PathBuf::from("/tmp/t")));
        assert_eq!(env.ollama_host.as_deref(), Some("box:1"));
    }
}
