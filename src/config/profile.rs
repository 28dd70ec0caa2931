//! One `[providers.NAME]` section validated into a [`ProviderProfile`], laid over the
//! built-in profile of the same name.
//!
//! A profile's limits are either written or assumed, and the difference matters: only what
//! the person wrote can be wrong. `context_window = 4096` alone is a complete answer (the
//! output limit becomes a share of it); a written `max_output_tokens` that does not fit a
//! written `context_window` is an error naming both lines; one that does not fit a window
//! tern only assumed is lowered when used ([`ProviderProfile::output_for`]), never refused.

use std::collections::BTreeMap;

use super::env::Environment;
use super::error::ConfigError;
use super::load::Validator;
use super::providers::{
    DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT_TOKENS, KINDS, SERVED_MODEL_PLACEHOLDER,
    asks_server, builtin_profiles, check_base_url, fitted_output, may_learn_model, redact_url,
};
use super::raw::RawProvider;
use super::settings::{ProviderKind, ProviderProfile, Written};

impl Validator<'_> {
    /// The built-in profiles with the file's profiles laid over them.
    pub(super) fn providers(
        &self,
        raw: BTreeMap<String, RawProvider>,
        env: &Environment,
    ) -> Result<BTreeMap<String, ProviderProfile>, ConfigError> {
        let mut profiles = builtin_profiles(env)?;
        for (name, raw) in raw {
            let profile = self.profile(&name, raw, profiles.get(&name), env)?;
            profiles.insert(name, profile);
        }
        Ok(profiles)
    }

    /// One `[providers.NAME]` section. A section named like a built-in profile starts from it
    /// (as long as the kind stays the same), so `[providers.anthropic]` with just `model`
    /// changes only the model.
    fn profile(
        &self,
        name: &str,
        raw: RawProvider,
        builtin: Option<&ProviderProfile>,
        env: &Environment,
    ) -> Result<ProviderProfile, ConfigError> {
        let key = |field| ["providers", name, field];
        if name.is_empty() || name.contains('/') || name.chars().any(char::is_whitespace) {
            return Err(self.error(
                &["providers", name],
                "profile names cannot be empty or contain `/` or spaces \
                 (`/` separates the profile from the model in `profile/model`)",
            ));
        }
        let kind = match raw.kind.as_deref() {
            Some(text) => ProviderKind::parse(text).ok_or_else(|| {
                self.error(
                    &key("kind"),
                    format!("unknown kind \"{text}\"; expected {KINDS}"),
                )
            })?,
            None => builtin.map(|b| b.kind).ok_or_else(|| {
                self.error(
                    &["providers", name],
                    format!("the profile has no `kind`; add kind = {KINDS}"),
                )
            })?,
        };
        let base = builtin.filter(|b| b.kind == kind);
        let base_url = match &raw.base_url {
            // Shown redacted: a rejected URL may hold a password or a key.
            Some(url) => check_base_url(url).map_err(|bad| {
                self.error(
                    &key("base_url"),
                    format!(
                        "\"{}\" {}",
                        redact_url(url),
                        bad.problem(Some(
                            "an environment variable, named here with api_key_env = \"VARIABLE_NAME\""
                        ))
                    ),
                )
            })?,
            None => base.map_or_else(
                || kind.default_base_url().to_owned(),
                |b| b.base_url.clone(),
            ),
        };
        let api_key_env = match &raw.api_key_env {
            Some(var) => {
                if !is_env_var_name(var) {
                    // Never echo the value: people paste the key itself here, and keys such as
                    // `gsk_…` or `sk_…` would pass a looser check.
                    return Err(self.error(
                        &key("api_key_env"),
                        "takes the name of an environment variable that holds the key, in \
                         capitals, digits and `_` (like \"WORK_API_KEY\"). The value here is \
                         not such a name and is not shown: this looks like a key itself; put \
                         the key in an environment variable and give its name here",
                    ));
                }
                Some(var.clone())
            }
            None => match base {
                Some(b) => b.api_key_env.clone(),
                // The vendor's conventional variable is only safe to send to the vendor: a
                // profile pointing elsewhere must name its variable itself.
                None if raw.base_url.is_none() => kind.default_key_env().map(str::to_owned),
                None => None,
            },
        };
        let written = Written {
            model: raw.model.is_some(),
            context_window: raw.context_window.is_some(),
            max_output_tokens: raw.max_output_tokens.is_some(),
        };
        let default_model = match raw.model {
            Some(model) if model.trim().is_empty() => {
                return Err(self.error(
                    &key("model"),
                    "is empty; name the model to use, like model = \"claude-sonnet-4-5\"",
                ));
            }
            Some(model) => model,
            None => match base {
                Some(b) => b.default_model.clone(),
                // A server on this machine says which model it serves; until it has, requests
                // name this placeholder (llama.cpp's server ignores the name).
                None if may_learn_model(kind, &base_url) => SERVED_MODEL_PLACEHOLDER.to_owned(),
                None => {
                    return Err(self.error(
                        &["providers", name],
                        "the profile has no `model`; add the model it uses by default, \
                         like model = \"claude-sonnet-4-5\"",
                    ));
                }
            },
        };
        let context_window = self.count(
            &key("context_window"),
            raw.context_window,
            base.map_or(DEFAULT_CONTEXT_WINDOW, |b| b.context_window),
            u64::MAX,
        )?;
        let max_output_tokens = match raw.max_output_tokens {
            Some(asked) => {
                let limit =
                    self.count(&key("max_output_tokens"), Some(asked), 0, u32::MAX.into())?;
                if written.context_window && limit >= context_window {
                    return Err(self.output_over_window(name, limit, context_window));
                }
                limit as u32
            }
            None => fitted_output(
                base.map_or(DEFAULT_MAX_OUTPUT_TOKENS, |b| b.max_output_tokens),
                context_window,
            ),
        };
        let images = raw.images.unwrap_or_else(|| !asks_server(kind, &base_url));
        Ok(ProviderProfile {
            name: name.to_owned(),
            kind,
            base_url,
            api_key: api_key_env
                .as_deref()
                .and_then(|var| env.get(var))
                .map(str::to_owned),
            api_key_env,
            default_model,
            context_window,
            max_output_tokens,
            images,
            written,
        })
    }

    /// The error for a written `max_output_tokens` that does not fit the written
    /// `context_window`: at the output limit's line, naming the window's too.
    fn output_over_window(&self, name: &str, limit: u64, window: u64) -> ConfigError {
        let window_line = self.line_of(&["providers", name, "context_window"]);
        let output_line = self.line_of(&["providers", name, "max_output_tokens"]);
        self.error(
            &["providers", name, "max_output_tokens"],
            format!(
                "max_output_tokens ({limit}, line {output_line}) must be smaller than \
                 context_window ({window}, line {window_line}): the reply shares the window \
                 with the prompt; lower max_output_tokens, or leave it out and tern asks for \
                 {} (a quarter of the window, at most {DEFAULT_MAX_OUTPUT_TOKENS})",
                fitted_output(DEFAULT_MAX_OUTPUT_TOKENS, window)
            ),
        )
    }
}

/// Whether `name` is an environment variable name as shells and tern's docs write them:
/// UPPER_SNAKE_CASE, `[A-Z_][A-Z0-9_]*`. Anything else is more likely a pasted key than a name.
fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}
