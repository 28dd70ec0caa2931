//! Everything that can go wrong while finding, reading and using the configuration.
//!
//! Each message is written for the person at the terminal: it names the file, line, column
//! and key when there is one, says what is wrong, and what would be accepted instead. Secret
//! values are never part of a message: at most the name of the variable that holds them.

use std::fmt;
use std::path::PathBuf;

/// A configuration problem the user can fix; the `Display` text says how.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Neither `TERN_HOME` nor a home directory is available to keep tern's files in.
    #[error(
        "cannot find a home directory to keep tern's config and data in; \
         set TERN_HOME to a folder tern may use, for example `export TERN_HOME=\"$PWD/.tern\"`"
    )]
    NoHome,

    /// The config file exists but cannot be read.
    #[error("cannot read the config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// One of tern's directories cannot be created.
    #[error("cannot create the directory {}: {source}; check its permissions or set TERN_HOME to another folder", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The config file is not valid: syntax, unknown key, wrong type or bad value.
    #[error("{}", Invalid { path, line: *line, column: *column, key, problem })]
    Invalid {
        /// The file, as given to the loader.
        path: PathBuf,
        /// 1-based line of the offending key or value.
        line: usize,
        /// 1-based column, counted in characters.
        column: usize,
        /// Dotted key path such as `session.compaction_threshold`; empty when unknown.
        key: String,
        /// What is wrong and what is accepted.
        problem: String,
    },

    /// An environment variable tern reads holds a value it cannot use.
    #[error("environment variable {var} {problem}")]
    InvalidEnv { var: String, problem: String },

    /// No provider is configured at all.
    #[error("{}", NoProvider { config_file })]
    NoProvider {
        /// Where a config file would be read from.
        config_file: PathBuf,
    },

    /// A profile name (from `--provider`, or a `profile/model` reference) is not configured.
    #[error(
        "unknown provider profile `{name}`; known profiles: {}; define others as \
         [providers.NAME] in the config file",
        known.join(", ")
    )]
    UnknownProvider { name: String, known: Vec<String> },

    /// The profile needs an API key and the variable that should hold it is unset or empty.
    #[error(
        "provider profile `{profile}` needs an API key, but {env} is not set; \
         export {env}=<your key> (or point the profile's api_key_env at another variable)"
    )]
    MissingKey { profile: String, env: String },

    /// The profile needs an API key but names no variable to read it from.
    #[error(
        "provider profile `{profile}` needs an API key, but it names no variable to read it \
         from; add `api_key_env = \"VARIABLE_NAME\"` under [providers.{profile}] in the config \
         file and export that variable"
    )]
    NoKeyEnv { profile: String },

    /// A model reference (`profile/model` or `model`) is malformed.
    #[error("invalid model `{text}`: {problem}; write `model` or `profile/model`")]
    InvalidModel { text: String, problem: String },
}

/// The text of [`ConfigError::Invalid`], kept apart so the format lives in one place.
struct Invalid<'a> {
    path: &'a PathBuf,
    line: usize,
    column: usize,
    key: &'a str,
    problem: &'a str,
}

impl fmt::Display for Invalid<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid config in {} at line {}, column {}",
            self.path.display(),
            self.line,
            self.column
        )?;
        if !self.key.is_empty() {
            write!(f, ", key `{}`", self.key)?;
        }
        write!(f, ": {}", self.problem)
    }
}

/// The text of [`ConfigError::NoProvider`]: every way to get a working provider.
struct NoProvider<'a> {
    config_file: &'a PathBuf,
}

impl fmt::Display for NoProvider<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no model provider is configured. Any one of these works:\n\
             \x20 - export ANTHROPIC_API_KEY=<key> for Anthropic\n\
             \x20 - export OPENAI_API_KEY=<key> for OpenAI, with OPENAI_BASE_URL for another \
             hosted OpenAI-compatible service (OpenRouter)\n\
             \x20 - export OPENAI_BASE_URL=http://127.0.0.1:8080/v1 for llama.cpp or vLLM on \
             this machine: a server on this machine or the local network needs no key\n\
             \x20 - export OLLAMA_HOST=127.0.0.1:11434 for a local Ollama (no key)\n\
             \x20 - write {} with a provider profile, for example:\n\
             \n\
             \x20   [providers.local]\n\
             \x20   kind = \"openai\"            # anthropic | openai | ollama\n\
             \x20   base_url = \"http://127.0.0.1:8080/v1\"\n\
             \x20   model = \"qwen2.5-coder\"      # no key: the server is on this machine",
            self.config_file.display()
        )
    }
}
