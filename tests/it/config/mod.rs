//! Config loading through the public API: defaults, providers from the environment, the full
//! file format, and the message of every class of error (file, line, key, what to do).
//!
//! This module holds the shared fixtures (a sample file path, a full config file) and the
//! load and check helpers; the tests live in one submodule per area.

use std::path::Path;

use pretty_assertions::assert_eq;
use tern::config::{self, Config, ConfigError, Environment};

mod defaults;
mod errors;
mod file;
mod limits;
mod paths;
mod providers;
mod secrets;
mod tools;

/// The path error messages must name; nothing is read from it.
const FILE: &str = "/home/dev/.config/tern/config.toml";

fn env(pairs: &[(&str, &str)]) -> Environment {
    Environment::from_pairs(pairs.iter().copied())
}

fn load(text: &str, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
    config::load_from_str(text, Path::new(FILE), &env(pairs))
}

fn loaded(text: &str, pairs: &[(&str, &str)]) -> Config {
    match load(text, pairs) {
        Ok(config) => config,
        Err(err) => panic!("config should load, got: {err}"),
    }
}

/// Loads `text` expecting an error at `line` about `key`, whose message also contains every
/// fragment.
#[track_caller]
fn check_error(text: &str, line: usize, key: &str, fragments: &[&str]) {
    let err = match load(text, &[]) {
        Ok(_) => panic!("config should be rejected:\n{text}"),
        Err(err) => err,
    };
    let message = err.to_string();
    match &err {
        ConfigError::Invalid {
            line: l,
            key: k,
            path,
            ..
        } => {
            assert_eq!(
                (*l, k.as_str(), path.as_path()),
                (line, key, Path::new(FILE)),
                "{message}"
            );
        }
        other => panic!("expected ConfigError::Invalid, got {other:?}"),
    }
    assert!(message.contains(FILE), "no file path in: {message}");
    assert!(
        message.contains(&format!("line {line},")),
        "no line in: {message}"
    );
    assert!(
        message.contains(&format!("`{key}`")),
        "no key in: {message}"
    );
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "`{fragment}` missing from: {message}"
        );
    }
}

/// The profile and model a role resolves to, as `profile/model`.
fn role(resolved: Result<(&config::ProviderProfile, String), ConfigError>) -> String {
    match resolved {
        Ok((profile, model)) => format!("{}/{model}", profile.name),
        Err(err) => format!("error: {err}"),
    }
}

/// A file that sets every section and key, with two profiles of its own.
const FULL: &str = r#"
[models]
provider = "work"
default = "claude-sonnet-4-5"
compaction = "work/claude-haiku-4-5"
fallback = "openai/gpt-4.1"

[providers.work]
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "WORK_ANTHROPIC_KEY"
model = "claude-sonnet-4-5"
context_window = 200000
max_output_tokens = 16000

[providers.local]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen2.5-coder"

[session]
prefill_timeout = 1800
first_token_timeout = 600
no_progress_timeout = 1200
tool_execution_timeout = 90
sidecar_llm_timeout = 90
idle_timeout = 0
compaction_threshold = 0.7
snapshot_every = 25
max_message_bytes = 131072
max_rounds = 40

[session.maintenance]
mode = "enforce"
prune_after = "12h"
max_entries = 300
max_disk_bytes = "2GB"
high_water_bytes = "1.6GB"

[session.reset]
daily = true
daily_at = "5:30"
idle_minutes = 90

[retry]
max_attempts = 5
base_delay_ms = 500
max_delay_ms = 30000
"#;
