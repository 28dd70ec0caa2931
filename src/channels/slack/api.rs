//! Slack's Web API as tern uses it: `auth.test`, `apps.connections.open`, and posting
//! (`chat.postMessage`, `chat.update`, `chat.postEphemeral`). Errors arrive as HTTP 200 with
//! `{"ok": false, "error": …}`; a 429 names its wait in `Retry-After`.

use super::super::deliver::{Ask, PostError, Poster, key_parts};
use super::super::pace::retry_after;
use super::events::{Me, fatal_error};
use serde_json::{Value, json};
use std::time::Duration;

/// Longest text of one message: Slack cuts `text` at 40,000 characters and shows long ones
/// folded; pieces of about 4,000 read well.
const LIMIT: usize = 3_900;
/// Longest text of a section block.
const SECTION_LIMIT: usize = 3_000;

/// A call that did not work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Try again after this long.
    Later(Duration),
    /// The token or the app cannot work: stop.
    Fatal(String),
    /// This call failed; others may work.
    Failed(String),
}

impl From<CallError> for PostError {
    fn from(err: CallError) -> Self {
        match err {
            CallError::Later(wait) => PostError::Later(wait),
            CallError::Fatal(err) | CallError::Failed(err) => PostError::Failed(err),
        }
    }
}

/// The Web API with the app's two tokens.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    bot_token: String,
    app_token: String,
}

/// Where a thread's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub channel: String,
    pub thread_ts: String,
}

impl Api {
    pub fn new(base: &str, bot_token: &str, app_token: &str) -> Self {
        Self {
            http: crate::channels::http_client().build().unwrap_or_default(),
            base: base.trim_end_matches('/').to_owned(),
            bot_token: bot_token.to_owned(),
            app_token: app_token.to_owned(),
        }
    }

    async fn call(&self, method: &str, token: &str, body: Value) -> Result<Value, CallError> {
        let sent = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .json(&body)
            .timeout(Duration::from_secs(30))
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(err) => {
                tracing::debug!(%err, method, "a Slack call did not get through");
                return Err(CallError::Later(Duration::from_secs(2)));
            }
        };
        let status = response.status();
        if status.as_u16() == 429 {
            let wait = retry_after(response.headers()).unwrap_or(Duration::from_secs(1));
            return Err(CallError::Later(wait));
        }
        if status.is_server_error() {
            return Err(CallError::Later(Duration::from_secs(2)));
        }
        let value: Value = response
            .json()
            .await
            .map_err(|err| CallError::Failed(format!("{method}: the answer is not JSON: {err}")))?;
        if value.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(value);
        }
        let error = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_owned();
        Err(match error.as_str() {
            "ratelimited" => CallError::Later(Duration::from_secs(1)),
            error if fatal_error(error) => CallError::Fatal(format!(
                "{method}: {error}: check SLACK_BOT_TOKEN and SLACK_APP_TOKEN (the app's tokens, xoxb- and xapp-)"
            )),
            error => CallError::Failed(format!("{method}: {error}")),
        })
    }

    /// Who the bot token is.
    pub async fn whoami(&self) -> Result<Me, CallError> {
        let answer = self.call("auth.test", &self.bot_token, json!({})).await?;
        let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_owned);
        match (text("team_id"), text("user_id")) {
            (Some(team), Some(user)) => Ok(Me {
                team,
                user,
                bot: text("bot_id"),
                name: text("user").unwrap_or_else(|| "tern".to_owned()),
            }),
            _ => Err(CallError::Failed(
                "auth.test: the answer names no team or user".to_owned(),
            )),
        }
    }

    /// A fresh Socket Mode URL (each is good for one connection).
    pub async fn socket_url(&self) -> Result<String, CallError> {
        let answer = self
            .call("apps.connections.open", &self.app_token, json!({}))
            .await?;
        answer
            .get("url")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| CallError::Failed("apps.connections.open gave no url".to_owned()))
    }

    /// Tells one person only that they may not do what they tried.
    pub async fn ephemeral(&self, place: &Place, user: &str, text: &str) -> Result<(), CallError> {
        let body = json!({"channel": place.channel, "thread_ts": place.thread_ts, "user": user, "text": text});
        self.call("chat.postEphemeral", &self.bot_token, body)
            .await
            .map(drop)
    }

    async fn post_body(&self, body: Value) -> Result<String, PostError> {
        let answer = self.call("chat.postMessage", &self.bot_token, body).await?;
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| PostError::Failed("chat.postMessage gave no ts".to_owned()))
    }

    async fn update_body(&self, body: Value) -> Result<(), PostError> {
        self.call("chat.update", &self.bot_token, body).await?;
        Ok(())
    }
}

fn section(text: &str) -> Value {
    let text: String = text.chars().take(SECTION_LIMIT).collect();
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

impl Poster for Api {
    type Place = Place;
    /// A message's `ts`.
    type Posted = String;

    fn limit(&self) -> usize {
        LIMIT
    }

    fn place_of(&self, key: &str) -> Option<Place> {
        match key_parts(key, "slack")?.as_slice() {
            [_team, channel, thread_ts] => Some(Place {
                channel: (*channel).to_owned(),
                thread_ts: (*thread_ts).to_owned(),
            }),
            _ => None,
        }
    }

    async fn post(&self, place: &Place, text: &str) -> Result<String, PostError> {
        self.post_body(
            json!({"channel": place.channel, "thread_ts": place.thread_ts, "text": text}),
        )
        .await
    }

    async fn edit(&self, place: &Place, ts: &String, text: &str) -> Result<(), PostError> {
        self.update_body(json!({"channel": place.channel, "ts": ts, "text": text}))
            .await
    }

    async fn ask(&self, place: &Place, ask: &Ask) -> Result<String, PostError> {
        let token = ask.token();
        let buttons = json!({
            "type": "actions",
            "elements": [
                {"type": "button", "action_id": "approve", "style": "primary", "value": token,
                 "text": {"type": "plain_text", "text": "Approve"}},
                {"type": "button", "action_id": "deny", "style": "danger", "value": token,
                 "text": {"type": "plain_text", "text": "Deny"}},
            ]
        });
        let text = ask.text();
        self.post_body(json!({
            "channel": place.channel,
            "thread_ts": place.thread_ts,
            "text": text,
            "blocks": [section(&text), buttons],
        }))
        .await
    }

    async fn settle(&self, place: &Place, ts: &String, text: &str) -> Result<(), PostError> {
        self.update_body(json!({
            "channel": place.channel,
            "ts": ts,
            "text": text,
            "blocks": [section(text)],
        }))
        .await
    }
}
