//! Reading the config file and turning it into a validated [`Config`].
//!
//! Two stages, as in ripgrep's argument handling: serde reads the text into the raw structs
//! (rejecting syntax errors, unknown keys and wrong types), then validation checks values and
//! applies defaults, built-in profiles and the environment. Both stages report through the
//! same [`Validator::error`], which turns a key path or a byte span into file, line, column
//! and key, so every message has the same shape whichever stage found the problem.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use toml::Value;

use super::env::Environment;
use super::error::ConfigError;
use super::location::{Document, dotted};
use super::paths::Paths;
use super::providers::{env_configured, env_default_profile};
use super::raw::{RawConfig, RawMaintenance, RawModels, RawReset, RawRetry, RawSession};
use super::settings::{
    Config, MaintenanceMode, MaintenanceSettings, ModelRef, ModelRoles, ProviderProfile,
    ResetSettings, RetrySettings, SessionSettings, SubagentSettings, UiSettings,
};
use super::units::{DURATION_FORMS, SIZE_FORMS, parse_duration, parse_size};

/// The longest duration accepted. Far beyond any useful setting, it keeps `now + timeout`
/// from overflowing (which would panic) in the code that uses these values.
const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The longest delay between retries, in milliseconds.
const MAX_RETRY_DELAY_MS: u64 = 3_600_000;

/// The most `[session] max_rounds` may be: a turn of that many rounds has long stopped being
/// one piece of work.
const MAX_ROUNDS_CEILING: u64 = 10_000;

/// The least `[session] max_argument_bytes` may be.
const MIN_ARGUMENT_BYTES: u64 = 1024;

/// Finds tern's directories and reads the config file there, if there is one.
pub fn load(env: &Environment) -> Result<(Paths, Config), ConfigError> {
    let paths = Paths::from_env(env)?;
    let config = match std::fs::read_to_string(&paths.config_file) {
        Ok(text) => load_from_str(&text, &paths.config_file, env)?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let mut config = load_from_str("", &paths.config_file, env)?;
            config.source = None;
            config
        }
        Err(source) => {
            return Err(ConfigError::Read {
                path: paths.config_file.clone(),
                source,
            });
        }
    };
    Ok((paths, config))
}

/// Parses and validates config text; `path` is where it came from, named in messages.
pub fn load_from_str(text: &str, path: &Path, env: &Environment) -> Result<Config, ConfigError> {
    let check = Validator {
        path,
        doc: Document::new(text),
    };
    let raw: RawConfig = toml::from_str(text).map_err(|err| check.toml_error(&err))?;
    let mut session = check.session(raw.session)?;
    if let Some(n) = raw.subagents.max_concurrent {
        if !(1..=64).contains(&n) {
            return Err(check.error(
                &["subagents", "max_concurrent"],
                format!("is {n}; it takes a number of runs from 1 to 64"),
            ));
        }
        session.subagents.max_concurrent = n as usize;
    }
    if let Some(n) = raw.context.repo_map_tokens {
        if !(0..=65_536).contains(&n) {
            return Err(check.error(
                &["context", "repo_map_tokens"],
                format!("is {n}; it takes a number of tokens from 0 (no map) to 65536"),
            ));
        }
        session.repo_map_tokens = n as u64;
    }
    let retry = check.retry(raw.retry)?;
    let tools = check.tools(raw.tools)?;
    let file_profiles: Vec<String> = raw.providers.keys().cloned().collect();
    let providers = check.providers(raw.providers, env)?;
    let models = check.models(raw.models, &providers, &file_profiles, env)?;
    let configured = configured_profiles(&file_profiles, &models, env);
    let channels = check.channels(raw.channels, env)?;
    let (mcp, mcp_credential_vars) = check.mcp(raw.mcp, env)?;
    Ok(Config {
        source: Some(path.to_path_buf()),
        config_file: path.to_path_buf(),
        providers,
        models,
        session,
        retry,
        ui: UiSettings {
            theme: raw
                .ui
                .theme
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| UiSettings::default().theme),
        },
        tools,
        channels,
        mcp,
        mcp_credential_vars,
        configured,
    })
}

/// The profiles the file or the environment set up: every `[providers.NAME]`, the built-ins
/// the environment enables, and any profile `[models]` uses.
fn configured_profiles(
    file_profiles: &[String],
    models: &ModelRoles,
    env: &Environment,
) -> BTreeSet<String> {
    let named = [&models.default, &models.compaction, &models.fallback]
        .into_iter()
        .filter_map(|model| model.as_ref()?.provider.clone());
    file_profiles
        .iter()
        .cloned()
        .chain(env_configured(env).map(str::to_owned))
        .chain(models.default_provider.clone())
        .chain(named)
        .collect()
}

/// Validates one document, knowing where each key is so errors can point at it.
pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
    pub(super) doc: Document<'a>,
}

impl Validator<'_> {
    /// An error about the value at `key`, located in the file.
    pub(super) fn error(&self, key: &[&str], problem: impl Into<String>) -> ConfigError {
        let (line, column) = self
            .doc
            .span_of(key)
            .map_or((1, 1), |span| self.doc.line_column(span.start));
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            key: dotted(key),
            problem: problem.into(),
        }
    }

    /// Converts a syntax or serde error, finding the key from the error's span.
    fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        let (line, column, key) = match err.span() {
            Some(span) => {
                let (line, column) = self.doc.line_column(span.start);
                (line, column, self.doc.path_at(span.start))
            }
            None => (1, 1, Vec::new()),
        };
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            problem: explain_toml_message(err.message(), &key),
            key: dotted(&key),
        }
    }

    fn session(&self, raw: RawSession) -> Result<SessionSettings, ConfigError> {
        let d = SessionSettings::default();
        let timeout =
            |name: &str, value, default| self.duration(&["session", name], value, default, false);
        let threshold = match raw.compaction_threshold {
            Some(t) if !(t > 0.0 && t < 1.0) => {
                return Err(self.error(
                    &["session", "compaction_threshold"],
                    format!(
                        "{t} is out of range; expected a fraction of the context window \
                         between 0 and 1, exclusive (like 0.75)"
                    ),
                ));
            }
            Some(t) => t,
            None => d.compaction_threshold,
        };
        let max_message_bytes =
            match self.size(&["session", "max_message_bytes"], raw.max_message_bytes)? {
                Some(bytes) => usize::try_from(bytes).map_err(|_| {
                    self.error(
                        &["session", "max_message_bytes"],
                        "is too large for this machine",
                    )
                })?,
                None => d.max_message_bytes,
            };
        let max_argument_bytes = self.argument_bytes(raw.max_argument_bytes)?;
        Ok(SessionSettings {
            prefill_timeout: timeout("prefill_timeout", raw.prefill_timeout, d.prefill_timeout)?,
            first_token_timeout: timeout(
                "first_token_timeout",
                raw.first_token_timeout,
                d.first_token_timeout,
            )?,
            no_progress_timeout: timeout(
                "no_progress_timeout",
                raw.no_progress_timeout,
                d.no_progress_timeout,
            )?,
            tool_execution_timeout: timeout(
                "tool_execution_timeout",
                raw.tool_execution_timeout,
                d.tool_execution_timeout,
            )?,
            sidecar_llm_timeout: timeout(
                "sidecar_llm_timeout",
                raw.sidecar_llm_timeout,
                d.sidecar_llm_timeout,
            )?,
            sidecar_titles: raw.sidecar_titles.unwrap_or(d.sidecar_titles),
            // Zero is meaningful here: it turns passivation off.
            idle_timeout: self.duration(
                &["session", "idle_timeout"],
                raw.idle_timeout,
                d.idle_timeout,
                true,
            )?,
            compaction_threshold: threshold,
            keep_recent_tool_results: self.count(
                &["session", "keep_recent_tool_results"],
                raw.keep_recent_tool_results,
                d.keep_recent_tool_results as u64,
                1000,
            )? as usize,
            keep_recent_messages: self
                .count(
                    &["session", "keep_recent_messages"],
                    raw.keep_recent_messages,
                    d.keep_recent_messages as u64,
                    10_000,
                )?
                .max(2) as usize,
            snapshot_every: self.count(
                &["session", "snapshot_every"],
                raw.snapshot_every,
                d.snapshot_every.into(),
                u32::MAX.into(),
            )? as u32,
            max_message_bytes,
            max_argument_bytes,
            max_rounds: self.count(
                &["session", "max_rounds"],
                raw.max_rounds,
                d.max_rounds.into(),
                MAX_ROUNDS_CEILING,
            )? as u32,
            maintenance: self.maintenance(raw.maintenance)?,
            reset: self.reset(raw.reset)?,
            subagents: SubagentSettings::default(),
            repo_map_tokens: d.repo_map_tokens,
        })
    }

    /// `[session] max_argument_bytes`: at least [`MIN_ARGUMENT_BYTES`], since a placeholder
    /// naming the tool, the path and where the text went takes a few hundred bytes itself.
    fn argument_bytes(&self, raw: Option<Value>) -> Result<usize, ConfigError> {
        let key = ["session", "max_argument_bytes"];
        let Some(bytes) = self.size(&key, raw)? else {
            return Ok(SessionSettings::default().max_argument_bytes);
        };
        if bytes < MIN_ARGUMENT_BYTES {
            return Err(self.error(
                &key,
                format!(
                    "{bytes} bytes is too small: a tool call's arguments are replaced by a \
                     placeholder only when they are larger than it, and the placeholder itself \
                     takes a few hundred bytes; use 1KiB or more (the default is 32KiB)"
                ),
            ));
        }
        usize::try_from(bytes).map_err(|_| self.error(&key, "is too large for this machine"))
    }

    fn reset(&self, raw: RawReset) -> Result<ResetSettings, ConfigError> {
        let d = ResetSettings::default();
        let key = |name| ["session", "reset", name];
        let daily_at = match raw.daily_at.as_deref() {
            None => d.daily_at,
            Some(text) => parse_time_of_day(text).ok_or_else(|| {
                self.error(
                    &key("daily_at"),
                    format!("\"{text}\" is not a time of day; expected 24-hour \"HH:MM\", like \"04:00\""),
                )
            })?,
        };
        let idle = match raw.idle_minutes {
            None | Some(0) => None,
            Some(minutes) if minutes > 366 * 24 * 60 => {
                return Err(self.error(
                    &key("idle_minutes"),
                    format!("{minutes} is out of range; expected minutes up to a year (527040), or 0 for off"),
                ));
            }
            Some(minutes) => Some(Duration::from_secs(minutes * 60)),
        };
        Ok(ResetSettings {
            daily: raw.daily.unwrap_or(d.daily),
            daily_at,
            idle,
        })
    }

    fn maintenance(&self, raw: RawMaintenance) -> Result<MaintenanceSettings, ConfigError> {
        let d = MaintenanceSettings::default();
        let key = |name| ["session", "maintenance", name];
        let mode = match raw.mode.as_deref() {
            None => d.mode,
            Some("warn") => MaintenanceMode::Warn,
            Some("enforce") => MaintenanceMode::Enforce,
            Some(other) => {
                return Err(self.error(
                    &key("mode"),
                    format!("unknown mode \"{other}\"; expected \"warn\" or \"enforce\""),
                ));
            }
        };
        let max_disk_bytes = self.size(&key("max_disk_bytes"), raw.max_disk_bytes)?;
        let high_water_bytes = match (
            self.size(&key("high_water_bytes"), raw.high_water_bytes)?,
            max_disk_bytes,
        ) {
            (Some(_), None) => {
                return Err(self.error(
                    &key("high_water_bytes"),
                    "has no effect without max_disk_bytes; set max_disk_bytes too \
                     (cleanup starts above it and stops below high_water_bytes)",
                ));
            }
            (Some(high), Some(max)) if high > max => {
                return Err(self.error(
                    &key("high_water_bytes"),
                    format!("({high} bytes) must not exceed max_disk_bytes ({max} bytes)"),
                ));
            }
            (Some(high), Some(_)) => Some(high),
            // 80% of the budget leaves room for a session's growth before the next cleanup.
            (None, Some(max)) => Some(max / 5 * 4 + max % 5 * 4 / 5),
            (None, None) => None,
        };
        Ok(MaintenanceSettings {
            mode,
            prune_after: self.duration(
                &key("prune_after"),
                raw.prune_after,
                d.prune_after,
                false,
            )?,
            max_entries: self.count(
                &key("max_entries"),
                raw.max_entries,
                d.max_entries,
                u64::MAX,
            )?,
            max_disk_bytes,
            high_water_bytes,
        })
    }

    fn retry(&self, raw: RawRetry) -> Result<RetrySettings, ConfigError> {
        let d = RetrySettings::default();
        let max_attempts = self.count(
            &["retry", "max_attempts"],
            raw.max_attempts,
            d.max_attempts.into(),
            100,
        )? as u32;
        let delay = |name: &str, value: Option<u64>, default: Duration| {
            match value {
            Some(ms) if ms > MAX_RETRY_DELAY_MS => Err(self.error(
                &["retry", name],
                format!("{ms} is out of range; expected milliseconds from 0 to {MAX_RETRY_DELAY_MS} (one hour)"),
            )),
            Some(ms) => Ok(ms),
            None => Ok(default.as_millis() as u64),
        }
        };
        let base_ms = delay("base_delay_ms", raw.base_delay_ms, d.base_delay)?;
        let max_ms = delay("max_delay_ms", raw.max_delay_ms, d.max_delay)?;
        if max_ms < base_ms {
            return Err(self.error(
                &[
                    "retry",
                    if raw.max_delay_ms.is_some() {
                        "max_delay_ms"
                    } else {
                        "base_delay_ms"
                    },
                ],
                format!("max_delay_ms ({max_ms}) must be at least base_delay_ms ({base_ms})"),
            ));
        }
        Ok(RetrySettings {
            max_attempts,
            base_delay: Duration::from_millis(base_ms),
            max_delay: Duration::from_millis(max_ms),
        })
    }

    fn models(
        &self,
        raw: RawModels,
        profiles: &BTreeMap<String, ProviderProfile>,
        file_profiles: &[String],
        env: &Environment,
    ) -> Result<ModelRoles, ConfigError> {
        let known = || profiles.keys().cloned().collect::<Vec<_>>().join(", ");
        let provider = match raw.provider {
            Some(name) if !profiles.contains_key(&name) => {
                return Err(self.error(
                    &["models", "provider"],
                    format!(
                        "there is no provider profile \"{name}\"; known profiles: {}; \
                         define it as [providers.{name}]",
                        known()
                    ),
                ));
            }
            other => other,
        };
        let model = |field: &str, text: Option<String>| -> Result<Option<ModelRef>, ConfigError> {
            let Some(text) = text else { return Ok(None) };
            let key = ["models", field];
            let model = ModelRef::parse(&text).map_err(|err| self.error(&key, err.to_string()))?;
            if let Some(name) = &model.provider
                && !profiles.contains_key(name)
            {
                return Err(self.error(
                    &key,
                    format!(
                        "\"{text}\" names the provider profile \"{name}\", which is not defined; \
                         known profiles: {}; define it as [providers.{name}] or write just the \
                         model name to use the default profile",
                        known()
                    ),
                ));
            }
            Ok(Some(model))
        };
        let default = model("default", raw.default)?;
        let compaction = model("compaction", raw.compaction)?;
        let fallback = model("fallback", raw.fallback)?;
        let default_provider = provider
            .or_else(|| default.as_ref().and_then(|m| m.provider.clone()))
            .or_else(|| env_default_profile(env, profiles).map(str::to_owned))
            .or_else(|| match file_profiles {
                [only] => Some(only.clone()),
                _ => None,
            });
        Ok(ModelRoles {
            default_provider,
            default,
            compaction,
            fallback,
        })
    }

    /// A duration given as whole seconds or as text like `30m`.
    pub(super) fn duration(
        &self,
        key: &[&str],
        value: Option<Value>,
        default: Duration,
        allow_zero: bool,
    ) -> Result<Duration, ConfigError> {
        let duration = match value {
            None => return Ok(default),
            Some(Value::Integer(secs)) => {
                u64::try_from(secs).map(Duration::from_secs).map_err(|_| {
                    self.error(
                        key,
                        format!("{secs} is negative; expected {DURATION_FORMS}"),
                    )
                })?
            }
            Some(Value::String(text)) => parse_duration(&text).ok_or_else(|| {
                self.error(
                    key,
                    format!("\"{text}\" is not a duration; expected {DURATION_FORMS}"),
                )
            })?,
            Some(other) => {
                return Err(self.error(
                    key,
                    format!("found a {}; expected {DURATION_FORMS}", other.type_str()),
                ));
            }
        };
        if duration > MAX_DURATION {
            return Err(self.error(
                key,
                "is longer than a hundred years; use a shorter duration",
            ));
        }
        if duration.is_zero() && !allow_zero {
            return Err(self.error(
                key,
                format!("must be longer than zero; expected {DURATION_FORMS}"),
            ));
        }
        Ok(duration)
    }

    /// A byte size given as a whole number or as text like `2GB`; zero is refused.
    pub(super) fn size(
        &self,
        key: &[&str],
        value: Option<Value>,
    ) -> Result<Option<u64>, ConfigError> {
        let bytes = match value {
            None => return Ok(None),
            Some(Value::Integer(n)) => u64::try_from(n)
                .map_err(|_| self.error(key, format!("{n} is negative; expected {SIZE_FORMS}")))?,
            Some(Value::String(text)) => parse_size(&text).ok_or_else(|| {
                self.error(
                    key,
                    format!("\"{text}\" is not a size; expected {SIZE_FORMS}"),
                )
            })?,
            Some(other) => {
                return Err(self.error(
                    key,
                    format!("found a {}; expected {SIZE_FORMS}", other.type_str()),
                ));
            }
        };
        if bytes == 0 {
            return Err(self.error(
                key,
                format!("must be more than zero bytes; expected {SIZE_FORMS}"),
            ));
        }
        Ok(Some(bytes))
    }

    /// The 1-based line of the value at `key` (of the deepest part of it that exists).
    pub(super) fn line_of(&self, key: &[&str]) -> usize {
        self.doc
            .span_of(key)
            .map_or(1, |span| self.doc.line_column(span.start).0)
    }

    /// A count from 1 to `max`.
    pub(super) fn count(
        &self,
        key: &[&str],
        value: Option<u64>,
        default: u64,
        max: u64,
    ) -> Result<u64, ConfigError> {
        match value {
            None => Ok(default),
            Some(n) if n == 0 || n > max => Err(self.error(
                key,
                format!("{n} is out of range; expected a whole number from 1 to {max}"),
            )),
            Some(n) => Ok(n),
        }
    }
}

/// `"04:00"` or `"4:00"`: hours 0–23 and minutes 0–59.
fn parse_time_of_day(text: &str) -> Option<jiff::civil::Time> {
    let (hours, minutes) = text.trim().split_once(':')?;
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if !(1..=2).contains(&hours.len()) || minutes.len() != 2 || !digits(hours) || !digits(minutes) {
        return None;
    }
    jiff::civil::Time::new(hours.parse().ok()?, minutes.parse().ok()?, 0, 0).ok()
}

/// Rewrites serde's wording ("field", "u64", "struct RawSession") into the config file's
/// terms, and adds a hint where a common mistake is likely.
fn explain_toml_message(message: &str, key: &[String]) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (field, accepted) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let accepted = accepted.strip_prefix("one of ").unwrap_or(accepted);
        let mut text = if accepted.is_empty() {
            format!("unknown key {field}")
        } else {
            format!("unknown key {field}; the keys accepted here are {accepted}")
        };
        if key.len() == 3 && key[0] == "providers" && field == "`api_key`" {
            text.push_str(
                ". tern reads API keys only from the environment: export the key in a variable \
                 and name that variable with api_key_env = \"VARIABLE_NAME\"",
            );
        }
        return text;
    }
    // serde says "invalid length 1" when an array (`[[section]]`) stands where a table belongs.
    let mut text = match message.strip_prefix("invalid length ") {
        Some(rest) => {
            let expected = rest.split_once(", expected ").map_or("", |(_, e)| e);
            format!("wrong type: found an array, expected {expected}")
        }
        None => message.replacen("invalid type: ", "wrong type: found ", 1),
    };
    // The raw structs' names mean nothing to the reader; the key path already says where.
    if let Some(at) = text.find("expected struct Raw") {
        text.truncate(at);
        text.push_str("expected a table, like [section]");
    }
    for (serde_term, ours) in [
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected f64", "expected a number"),
        ("expected a map", "expected a table"),
        ("expected a sequence", "expected an array"),
        (
            "duplicate key",
            "duplicate key: it is already set earlier in the file",
        ),
    ] {
        text = text.replace(serde_term, ours);
    }
    // serde quotes a wrongly typed value (integer `123`, string "Bearer …"); for the keys
    // that take the name of a secret, a URL that may hold one, or (for an MCP server) text
    // that may hold a token, the value stays out of the message.
    let secret_key = match key {
        [providers, _, field] if providers == "providers" => {
            field == "api_key_env" || field == "base_url"
        }
        [mcp, servers, _, field, ..] if mcp == "mcp" && servers == "servers" => matches!(
            field.as_str(),
            "command" | "args" | "env" | "cwd" | "url" | "headers"
        ),
        _ => false,
    };
    if secret_key {
        text = without_quoted_values(&text);
    }
    text
}

/// `text` with every backtick- or double-quoted part removed, and the space before it.
fn without_quoted_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '`' && c != '"' {
            out.push(c);
            continue;
        }
        if out.ends_with(' ') {
            out.pop();
        }
        // Skip to the closing quote (or the end); serde escapes quotes inside strings.
        while let Some(inner) = chars.next() {
            if inner == c {
                break;
            }
            if inner == '\\' && c == '"' {
                chars.next();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argument_bytes(text: &str) -> Result<usize, String> {
        let env = Environment::from_pairs(Vec::<(String, String)>::new());
        load_from_str(text, Path::new("config.toml"), &env)
            .map(|config| config.session.max_argument_bytes)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn max_argument_bytes_takes_sizes_with_units_and_refuses_tiny_ones() {
        assert_eq!(argument_bytes(""), Ok(32 * 1024));
        let set = |value: &str| argument_bytes(&format!("[session]\nmax_argument_bytes = {value}"));
        assert_eq!(set("\"64KiB\""), Ok(64 * 1024));
        assert_eq!(set("\"2MB\""), Ok(2_000_000));
        assert_eq!(set("4096"), Ok(4096));
        let tiny = set("100").unwrap_err();
        assert!(tiny.contains("session.max_argument_bytes"), "{tiny}");
        assert!(tiny.contains("use 1KiB or more"), "{tiny}");
        let word = set("\"lots\"").unwrap_err();
        assert!(word.contains("is not a size"), "{word}");
        assert!(set("0").unwrap_err().contains("more than zero"));
    }
}
