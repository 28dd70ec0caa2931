//! Answers to "which profile, which model?": profile lookup by name, the default profile, and
//! model references (`profile/model` or `model`) resolved into a profile and a model name.

use std::fmt;
use std::str::FromStr;

use super::error::ConfigError;
use super::settings::{Config, ModelRef, ProviderProfile};

impl ModelRef {
    /// Parses `profile/model` or `model`. Only the first `/` separates the profile, so model
    /// names with slashes (OpenRouter's `anthropic/claude-sonnet-4.5`) are written behind a
    /// profile: `openrouter/anthropic/claude-sonnet-4.5`.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let invalid = |problem: &str| ConfigError::InvalidModel {
            text: text.to_owned(),
            problem: problem.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        if trimmed.chars().any(char::is_whitespace) {
            return Err(invalid("it contains whitespace"));
        }
        match trimmed.split_once('/') {
            None => Ok(Self {
                provider: None,
                model: trimmed.to_owned(),
            }),
            Some(("", _)) => Err(invalid("the profile name before `/` is empty")),
            Some((_, "")) => Err(invalid("the model name after `/` is empty")),
            Some((provider, model)) => Ok(Self {
                provider: Some(provider.to_owned()),
                model: model.to_owned(),
            }),
        }
    }
}

impl FromStr for ModelRef {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Writes the reference back as it is parsed: `profile/model` or `model`.
impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.provider {
            Some(provider) => write!(f, "{provider}/{}", self.model),
            None => f.write_str(&self.model),
        }
    }
}

impl Config {
    /// The profile called `name`, or an error listing the known ones.
    pub fn provider(&self, name: &str) -> Result<&ProviderProfile, ConfigError> {
        self.providers
            .get(name)
            .ok_or_else(|| ConfigError::UnknownProvider {
                name: name.to_owned(),
                known: self.providers.keys().cloned().collect(),
            })
    }

    /// The profile used when none is named. It was chosen at load: `models.provider`, else
    /// the profile of a qualified `models.default`, else the first built-in the environment
    /// enables (Anthropic key, OpenAI key or local base URL, Ollama host), else the only
    /// profile in the file.
    pub fn default_provider(&self) -> Result<&ProviderProfile, ConfigError> {
        match &self.models.default_provider {
            Some(name) => self.provider(name),
            None => Err(ConfigError::NoProvider {
                config_file: self.config_file.clone(),
            }),
        }
    }

    /// The profile and model a reference names; an unqualified one means the default profile.
    pub fn resolve_model(
        &self,
        model: &ModelRef,
    ) -> Result<(&ProviderProfile, String), ConfigError> {
        let profile = match &model.provider {
            Some(name) => self.provider(name)?,
            None => self.default_provider()?,
        };
        Ok((profile, model.model.clone()))
    }

    /// The conversation model: `models.default`, else the default profile's own model.
    pub fn conversation_model(&self) -> Result<(&ProviderProfile, String), ConfigError> {
        match &self.models.default {
            Some(model) => self.resolve_model(model),
            None => {
                let profile = self.default_provider()?;
                Ok((profile, profile.default_model.clone()))
            }
        }
    }

    /// The model that writes compaction notes: `models.compaction`, else the conversation
    /// model.
    pub fn compaction_model(&self) -> Result<(&ProviderProfile, String), ConfigError> {
        match &self.models.compaction {
            Some(model) => self.resolve_model(model),
            None => self.conversation_model(),
        }
    }

    /// The model tried when the primary one keeps failing, if one is configured.
    pub fn fallback_model(&self) -> Result<Option<(&ProviderProfile, String)>, ConfigError> {
        self.models
            .fallback
            .as_ref()
            .map(|model| self.resolve_model(model))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_refs() {
        let parsed = |t: &str| ModelRef::parse(t).map(|m| (m.provider, m.model)).ok();
        assert_eq!(parsed("claude"), Some((None, "claude".to_owned())));
        assert_eq!(
            parsed("work/claude"),
            Some((Some("work".to_owned()), "claude".to_owned()))
        );
        assert_eq!(
            parsed("or/anthropic/claude"),
            Some((Some("or".to_owned()), "anthropic/claude".to_owned()))
        );
        for bad in ["", "  ", "/claude", "work/", "a b"] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
        let text = "work/claude";
        assert_eq!(ModelRef::parse(text).unwrap().to_string(), text);
    }
}
