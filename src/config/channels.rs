//! Validation of `[channels]`: the chat platforms and signed webhooks a tern that owns the
//! store listens to. Tokens and secrets are read from the environment variables the file
//! names (or the platforms' usual names), never from the file itself; one that is not set
//! leaves its channel configured but unable to start, which the channel's status says.

use super::env::Environment;
use super::error::ConfigError;
use super::load::Validator;
use super::raw::{RawChannels, RawChat, RawEndpoint, RawWebhook};
use super::tools::is_variable_name;
use crate::domain::Audience;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default address the webhook server listens on: this machine only.
pub const WEBHOOK_LISTEN: &str = "127.0.0.1:8787";
/// Default cap on an inbound webhook body.
pub const WEBHOOK_MAX_BODY: u64 = 1 << 20;
/// How often a streamed reply is edited at most, by default.
pub const EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// A token or secret from the environment; never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The variable it was read from.
    pub var: String,
    value: Option<String>,
}

impl Token {
    fn read(var: String, env: &Environment) -> Self {
        let value = env.get(&var).map(str::to_owned);
        Self { var, value }
    }

    /// The value, or a message naming the variable to set.
    pub fn value(&self) -> Result<&str, String> {
        self.value.as_deref().ok_or_else(|| {
            format!(
                "{} is not set; export it in the environment tern starts in (the config \
                 file names variables, never tokens)",
                self.var
            )
        })
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.value.is_some() {
            "set"
        } else {
            "missing"
        };
        write!(f, "Token({}: {state})", self.var)
    }
}

/// Who and where a chat platform listens to, and where its sessions work.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatAccess {
    /// Immutable user ids let in; a DM from one of them is the owner's (Personal).
    pub allow_users: Vec<String>,
    /// Channels let in (Team for allowed users, Public for anyone else there).
    pub allow_channels: Vec<String>,
    /// Where its sessions work; the owner's working directory when not set.
    pub project_dir: Option<PathBuf>,
    /// How often a streamed reply is edited at most.
    pub edit_interval: Duration,
}

/// `[channels.slack]`: Socket Mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackSettings {
    pub api_url: String,
    /// `xapp-…`, for `apps.connections.open`.
    pub app_token: Token,
    /// `xoxb-…`, for posting.
    pub bot_token: Token,
    pub access: ChatAccess,
}

/// `[channels.discord]`: the Gateway and the REST API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscordSettings {
    /// Base of the REST API, with its version (`https://discord.com/api/v10`).
    pub api_url: String,
    pub token: Token,
    pub access: ChatAccess,
}

/// `[channels.mattermost]`: the WebSocket and the REST API of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MattermostSettings {
    /// The server, like `https://chat.example.com`.
    pub url: String,
    pub token: Token,
    pub access: ChatAccess,
}

/// `[channels.webhook.endpoints.NAME]`: `POST /webhook/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSettings {
    /// `whsec_<base64>`, from `secret_env`.
    pub secret: Token,
    /// Where replies are POSTed, signed with the same secret.
    pub reply_url: Option<String>,
    pub project_dir: Option<PathBuf>,
    /// What its inputs may see and do (Team unless written).
    pub audience: Audience,
}

/// `[channels.webhook]`: the inbound HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    pub listen: SocketAddr,
    pub max_body: u64,
    pub endpoints: BTreeMap<String, EndpointSettings>,
}

/// `[channels]`: each platform when configured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelSettings {
    pub slack: Option<SlackSettings>,
    pub discord: Option<DiscordSettings>,
    pub mattermost: Option<MattermostSettings>,
    pub webhook: Option<WebhookSettings>,
}

impl ChannelSettings {
    /// Whether any channel is configured.
    pub fn any(&self) -> bool {
        self.slack.is_some()
            || self.discord.is_some()
            || self.mattermost.is_some()
            || self.webhook.is_some()
    }

    /// The variables the channels read tokens and secrets from, each once.
    pub fn credential_vars(&self) -> Vec<String> {
        let mut vars = Vec::new();
        if let Some(slack) = &self.slack {
            vars.push(slack.app_token.var.clone());
            vars.push(slack.bot_token.var.clone());
        }
        if let Some(discord) = &self.discord {
            vars.push(discord.token.var.clone());
        }
        if let Some(mattermost) = &self.mattermost {
            vars.push(mattermost.token.var.clone());
        }
        if let Some(webhook) = &self.webhook {
            vars.extend(webhook.endpoints.values().map(|e| e.secret.var.clone()));
        }
        vars
    }
}

impl Validator<'_> {
    /// `[channels]`.
    pub(super) fn channels(
        &self,
        raw: RawChannels,
        env: &Environment,
    ) -> Result<ChannelSettings, ConfigError> {
        let slack = match raw.slack {
            None => None,
            Some(raw) => {
                let at = ["channels", "slack"];
                self.only(&at, &raw, &["api_url", "app_token_env", "bot_token_env"])?;
                Some(SlackSettings {
                    api_url: self.url(
                        &at,
                        "api_url",
                        raw.api_url.clone(),
                        "https://slack.com/api",
                    )?,
                    app_token: self.token(
                        &at,
                        "app_token_env",
                        raw.app_token_env.clone(),
                        "SLACK_APP_TOKEN",
                        env,
                    )?,
                    bot_token: self.token(
                        &at,
                        "bot_token_env",
                        raw.bot_token_env.clone(),
                        "SLACK_BOT_TOKEN",
                        env,
                    )?,
                    access: self.access(&at, raw)?,
                })
            }
        };
        let discord = match raw.discord {
            None => None,
            Some(raw) => {
                let at = ["channels", "discord"];
                self.only(&at, &raw, &["api_url", "token_env"])?;
                Some(DiscordSettings {
                    api_url: self.url(
                        &at,
                        "api_url",
                        raw.api_url.clone(),
                        "https://discord.com/api/v10",
                    )?,
                    token: self.token(
                        &at,
                        "token_env",
                        raw.token_env.clone(),
                        "DISCORD_BOT_TOKEN",
                        env,
                    )?,
                    access: self.access(&at, raw)?,
                })
            }
        };
        let mattermost = match raw.mattermost {
            None => None,
            Some(raw) => {
                let at = ["channels", "mattermost"];
                self.only(&at, &raw, &["url", "token_env"])?;
                let Some(url) = raw.url.clone() else {
                    return Err(self.error(
                        &at,
                        "has no `url`; write the server's address, like \
                         url = \"https://chat.example.com\"",
                    ));
                };
                Some(MattermostSettings {
                    url: self.url(&at, "url", Some(url), "")?,
                    token: self.token(
                        &at,
                        "token_env",
                        raw.token_env.clone(),
                        "MATTERMOST_TOKEN",
                        env,
                    )?,
                    access: self.access(&at, raw)?,
                })
            }
        };
        let webhook = raw.webhook.map(|raw| self.webhook(raw, env)).transpose()?;
        Ok(ChannelSettings {
            slack,
            discord,
            mattermost,
            webhook,
        })
    }

    /// Refuses the shared keys a platform does not take.
    fn only(&self, at: &[&str], raw: &RawChat, takes: &[&str]) -> Result<(), ConfigError> {
        let written = [
            ("api_url", raw.api_url.is_some()),
            ("url", raw.url.is_some()),
            ("app_token_env", raw.app_token_env.is_some()),
            ("bot_token_env", raw.bot_token_env.is_some()),
            ("token_env", raw.token_env.is_some()),
        ];
        for (name, set) in written {
            if set && !takes.contains(&name) {
                let mut key = at.to_vec();
                key.push(name);
                return Err(self.error(
                    &key,
                    format!(
                        "is not a key of [{}]; it takes {}, allow_users, allow_channels, \
                         project_dir and edit_interval",
                        at.join("."),
                        takes.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn url(
        &self,
        at: &[&str],
        name: &str,
        value: Option<String>,
        default: &str,
    ) -> Result<String, ConfigError> {
        let url = value.unwrap_or_else(|| default.to_owned());
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            let mut key = at.to_vec();
            key.push(name);
            return Err(self.error(
                &key,
                format!("\"{url}\" is not an http:// or https:// address"),
            ));
        }
        Ok(url.trim_end_matches('/').to_owned())
    }

    fn token(
        &self,
        at: &[&str],
        name: &str,
        var: Option<String>,
        default: &str,
        env: &Environment,
    ) -> Result<Token, ConfigError> {
        let var = var.unwrap_or_else(|| default.to_owned());
        if !is_variable_name(&var, false) {
            let mut key = at.to_vec();
            key.push(name);
            return Err(self.error(
                &key,
                format!(
                    "takes the name of an environment variable (like \"{default}\"), not a \
                     token; put the token in that variable"
                ),
            ));
        }
        Ok(Token::read(var, env))
    }

    fn access(&self, at: &[&str], raw: RawChat) -> Result<ChatAccess, ConfigError> {
        let key = |name| {
            let mut key = at.to_vec();
            key.push(name);
            key
        };
        let allow_users = raw.allow_users.unwrap_or_default();
        let allow_channels = raw.allow_channels.unwrap_or_default();
        for (name, list) in [
            ("allow_users", &allow_users),
            ("allow_channels", &allow_channels),
        ] {
            if let Some(bad) = list
                .iter()
                .find(|id| id.trim().is_empty() || id.contains(char::is_whitespace))
            {
                return Err(self.error(
                    &key(name),
                    format!(
                        "holds \"{bad}\", which is not an id; list the platform's immutable \
                         ids (like \"U024BE7LH\"), not display names"
                    ),
                ));
            }
        }
        Ok(ChatAccess {
            allow_users,
            allow_channels,
            project_dir: raw.project_dir.map(PathBuf::from),
            edit_interval: self.duration(
                &key("edit_interval"),
                raw.edit_interval,
                EDIT_INTERVAL,
                false,
            )?,
        })
    }

    fn webhook(&self, raw: RawWebhook, env: &Environment) -> Result<WebhookSettings, ConfigError> {
        let at = ["channels", "webhook"];
        let listen_text = raw.listen.unwrap_or_else(|| WEBHOOK_LISTEN.to_owned());
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            self.error(
                &["channels", "webhook", "listen"],
                format!("\"{listen_text}\" is not an address and port, like \"{WEBHOOK_LISTEN}\""),
            )
        })?;
        let max_body = self
            .size(&["channels", "webhook", "max_body"], raw.max_body)?
            .unwrap_or(WEBHOOK_MAX_BODY);
        if raw.endpoints.is_empty() {
            return Err(self.error(
                &at,
                "has no endpoint; add one, like [channels.webhook.endpoints.ci] with \
                 secret_env = \"CI_WEBHOOK_SECRET\"",
            ));
        }
        let mut endpoints = BTreeMap::new();
        for (name, raw) in raw.endpoints {
            let endpoint = self.endpoint(&name, raw, env)?;
            endpoints.insert(name, endpoint);
        }
        Ok(WebhookSettings {
            listen,
            max_body,
            endpoints,
        })
    }

    fn endpoint(
        &self,
        name: &str,
        raw: RawEndpoint,
        env: &Environment,
    ) -> Result<EndpointSettings, ConfigError> {
        let at = ["channels", "webhook", "endpoints", name];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.error(
                &at,
                format!("\"{name}\" cannot name an endpoint; use letters, digits, `-` and `_`"),
            ));
        }
        let Some(var) = raw.secret_env else {
            return Err(self.error(
                &at,
                "has no secret_env; name the variable holding its whsec_ secret, like \
                 secret_env = \"CI_WEBHOOK_SECRET\"",
            ));
        };
        let key = |last| {
            let mut key = at.to_vec();
            key.push(last);
            key
        };
        let secret = self.token(&at, "secret_env", Some(var), "CI_WEBHOOK_SECRET", env)?;
        let reply_url = raw
            .reply_url
            .map(|url| self.url(&at, "reply_url", Some(url), ""))
            .transpose()?;
        let audience = match raw.audience.as_deref() {
            None | Some("team") => Audience::Team,
            Some("personal") => Audience::Personal,
            Some("public") => Audience::Public,
            Some(other) => {
                return Err(self.error(
                    &key("audience"),
                    format!("\"{other}\" is not an audience; it takes \"personal\", \"team\" or \"public\""),
                ));
            }
        };
        Ok(EndpointSettings {
            secret,
            reply_url,
            project_dir: raw.project_dir.map(PathBuf::from),
            audience,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_from_str;
    use std::path::Path;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<ChannelSettings, String> {
        let env = Environment::from_pairs(env.iter().copied());
        load_from_str(text, Path::new("/c/config.toml"), &env)
            .map(|config| config.channels)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn no_section_is_no_channel() {
        let channels = load("", &[]).unwrap();
        assert!(!channels.any());
        assert!(channels.credential_vars().is_empty());
    }

    #[test]
    fn slack_reads_its_tokens_from_the_usual_variables() {
        let text = "[channels.slack]\nallow_users = [\"U1\"]\nallow_channels = [\"C1\"]\n";
        let env = [("SLACK_APP_TOKEN", "xapp-1"), ("SLACK_BOT_TOKEN", "xoxb-2")];
        let slack = load(text, &env).unwrap().slack.unwrap();
        assert_eq!(slack.api_url, "https://slack.com/api");
        assert_eq!(slack.app_token.value(), Ok("xapp-1"));
        assert_eq!(slack.bot_token.value(), Ok("xoxb-2"));
        assert_eq!(slack.access.allow_users, ["U1"]);
        assert_eq!(slack.access.edit_interval, EDIT_INTERVAL);
        // Never shown.
        assert!(!format!("{slack:?}").contains("xoxb-2"));
    }

    #[test]
    fn a_missing_token_names_its_variable_when_used() {
        let slack = load("[channels.slack]\n", &[]).unwrap().slack.unwrap();
        let err = slack.bot_token.value().unwrap_err();
        assert!(err.contains("SLACK_BOT_TOKEN is not set"), "{err}");
    }

    #[test]
    fn a_token_written_where_a_variable_name_goes_is_refused_unshown() {
        let err = load("[channels.discord]\ntoken_env = \"MTk4Nj.abc-def\"\n", &[]).unwrap_err();
        assert!(err.contains("name of an environment variable"), "{err}");
        assert!(!err.contains("MTk4Nj"), "{err}");
    }

    #[test]
    fn keys_of_another_platform_are_refused() {
        let err = load("[channels.slack]\nurl = \"https://x\"\n", &[]).unwrap_err();
        assert!(err.contains("not a key of [channels.slack]"), "{err}");
        let err = load("[channels.mattermost]\n", &[]).unwrap_err();
        assert!(err.contains("has no `url`"), "{err}");
    }

    #[test]
    fn webhook_endpoints_need_a_secret_variable() {
        let text = "[channels.webhook]\n[channels.webhook.endpoints.ci]\nreply_url = \"http://127.0.0.1:9/r\"\n";
        let err = load(text, &[]).unwrap_err();
        assert!(err.contains("has no secret_env"), "{err}");
        let text = "[channels.webhook]\nlisten = \"127.0.0.1:0\"\n[channels.webhook.endpoints.ci]\nsecret_env = \"CI_SECRET\"\naudience = \"public\"\n";
        let webhook = load(
            text,
            &[("CI_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")],
        )
        .unwrap()
        .webhook
        .unwrap();
        assert_eq!(webhook.listen.port(), 0);
        assert_eq!(webhook.max_body, WEBHOOK_MAX_BODY);
        let ci = &webhook.endpoints["ci"];
        assert_eq!(ci.audience, Audience::Public);
        assert_eq!(ci.secret.var, "CI_SECRET");
        let err = load("[channels.webhook]\n", &[]).unwrap_err();
        assert!(err.contains("has no endpoint"), "{err}");
    }

    #[test]
    fn display_names_are_not_ids() {
        let err = load("[channels.slack]\nallow_users = [\"Jane Doe\"]\n", &[]).unwrap_err();
        assert!(err.contains("immutable"), "{err}");
    }
}
