//! Discord's REST API as tern calls it: the gateway's address, messages posted and edited,
//! threads started, the typing indicator, approval buttons and the answers to their clicks.
//! A 429 becomes "later" with the wait Discord names (and pauses every call when the limit
//! is the global one), an outage "later" with a short wait, any other refusal a message
//! saying what Discord answered.

use super::super::deliver::{Ask, PostError, Poster, key_parts};
use super::super::pace::Pace;
use super::super::split;
use super::capped::Capped;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Longest message content, in UTF-16 units.
pub const LIMIT: usize = 2000;
/// Longest `custom_id` of a button.
const CUSTOM_ID_MAX: usize = 100;
/// How long the typing indicator lasts once shown (10 s), renewed a little before.
const TYPING_EVERY: Duration = Duration::from_secs(8);
/// Wait after an outage or an unreachable API before trying again.
const OUTAGE_WAIT: Duration = Duration::from_secs(3);
/// Longest wait a 429 is taken at its word for.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);
const USER_AGENT: &str = "DiscordBot (https://github.com/tern, 0.1)";
/// Short button ids remembered at most; past it the oldest question's buttons stop naming
/// their call (a click on them is told it is not one of tern's questions).
const SHORT_MAX: usize = 4096;
/// Clicked questions remembered at most until their settle; past it the oldest is settled
/// by an edit again, which shows the same answer.
const CLICKED_MAX: usize = 1024;

/// What a button click does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Approve,
    Deny,
}

/// The REST API of one bot.
pub struct Rest {
    http: reqwest::Client,
    /// Base with the version, like `https://discord.com/api/v10`.
    api: String,
    /// `Bot <token>`.
    auth: String,
    /// The variable the token was read from, named when Discord refuses it.
    token_var: String,
    /// The adapter's budget, paused when Discord names a global limit.
    pace: Arc<Pace>,
    /// Buttons whose token is too long for a `custom_id`: short id → token, the latest
    /// [`SHORT_MAX`].
    short: Mutex<Capped<String>>,
    /// Questions already updated by the click that answered them: their settle is done. The
    /// latest [`CLICKED_MAX`].
    clicked: Mutex<Capped<()>>,
}

impl Rest {
    /// A client for the API at `api` acting as the bot with `token`.
    pub fn new(api: &str, token: &str, token_var: &str, pace: Arc<Pace>) -> Self {
        let http = crate::channels::http_client()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self {
            http,
            api: api.trim_end_matches('/').to_owned(),
            auth: format!("Bot {token}"),
            token_var: token_var.to_owned(),
            pace,
            short: Mutex::new(Capped::new(SHORT_MAX)),
            clicked: Mutex::new(Capped::new(CLICKED_MAX)),
        }
    }

    /// One call; the JSON answered (`null` for an empty body).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, PostError> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.api))
            .header("authorization", &self.auth)
            .header("user-agent", USER_AGENT);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                // The path of an interaction's callback holds its token: not logged.
                let err = err.without_url();
                tracing::debug!(%err, %method, "Discord could not be reached; trying again");
                return Err(PostError::Later(OUTAGE_WAIT));
            }
        };
        let status = response.status().as_u16();
        let header_wait = crate::channels::pace::retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let answered: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match classify(status, &answered, header_wait) {
            Outcome::Ok => Ok(answered),
            Outcome::Later { wait, global } => {
                if global {
                    self.pace.pause(wait);
                }
                Err(PostError::Later(wait))
            }
            Outcome::Refused => Err(PostError::Failed(refusal(
                &method,
                path,
                status,
                &answered,
                &self.token_var,
            ))),
        }
    }

    /// The gateway's address (`GET /gateway/bot`).
    pub async fn gateway_url(&self) -> Result<String, PostError> {
        let answered = self
            .call(reqwest::Method::GET, "/gateway/bot", None)
            .await?;
        match answered["url"].as_str() {
            Some(url) if !url.is_empty() => Ok(url.to_owned()),
            _ => Err(PostError::Failed(
                "Discord's /gateway/bot answered without a url".to_owned(),
            )),
        }
    }

    /// A thread started from `message` in `channel`; its id is the message's.
    pub async fn start_thread(
        &self,
        channel: &str,
        message: &str,
        name: &str,
    ) -> Result<String, PostError> {
        let path = format!("/channels/{channel}/messages/{message}/threads");
        let answered = self
            .call(reqwest::Method::POST, &path, Some(&json!({ "name": name })))
            .await?;
        Ok(answered["id"].as_str().unwrap_or(message).to_owned())
    }

    /// The parent of `channel` when it is a thread (`GET /channels/{id}`); `None` otherwise.
    pub async fn thread_parent(&self, channel: &str) -> Result<Option<String>, PostError> {
        let answered = self
            .call(reqwest::Method::GET, &format!("/channels/{channel}"), None)
            .await?;
        Ok(thread_parent_of(&answered))
    }

    /// Answers a click (`POST /interactions/{id}/{token}/callback`).
    pub async fn callback(&self, id: &str, token: &str, body: &Value) -> Result<(), PostError> {
        let path = format!("/interactions/{id}/{token}/callback");
        self.call(reqwest::Method::POST, &path, Some(body))
            .await
            .map(drop)
    }

    /// The approval a button's `custom_id` names: the choice and the [`Ask::token`].
    pub fn resolve(&self, custom_id: &str) -> Option<(Choice, String)> {
        let (choice, id) = parse_custom_id(custom_id)?;
        let short = self.short.lock().unwrap_or_else(PoisonError::into_inner);
        let token = short.get(id).cloned().unwrap_or_else(|| id.to_owned());
        Some((choice, token))
    }

    /// The question `message` was updated by its click: nothing more to settle.
    pub fn clicked(&self, message: &str, done: bool) {
        let mut clicked = self.clicked.lock().unwrap_or_else(PoisonError::into_inner);
        if done {
            clicked.insert(message, ());
        } else {
            clicked.remove(message);
        }
    }

    /// What a button carries for `token`: the token itself, or a short id standing for it.
    fn button_id(&self, token: &str) -> String {
        if "approve:".len() + token.len() <= CUSTOM_ID_MAX {
            return token.to_owned();
        }
        let short = format!("~{:016x}", fastrand::u64(..));
        self.short
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(&short, token.to_owned());
        short
    }

    fn message_id(answered: &Value) -> Result<String, PostError> {
        answered["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| PostError::Failed("Discord answered without a message id".to_owned()))
    }
}

impl Poster for Rest {
    /// The channel (thread or DM) messages go to.
    type Place = String;
    /// A message's id.
    type Posted = String;

    fn limit(&self) -> usize {
        LIMIT
    }

    fn measure(&self) -> fn(&str) -> usize {
        split::utf16
    }

    /// `discord:<channel>/<thread>`: replies go in the thread (a DM's key names its channel
    /// twice).
    fn place_of(&self, key: &str) -> Option<String> {
        match key_parts(key, "discord")?.as_slice() {
            [_channel, thread] => Some((*thread).to_owned()),
            _ => None,
        }
    }

    fn typing_every(&self) -> Option<Duration> {
        Some(TYPING_EVERY)
    }

    async fn post(&self, place: &String, text: &str) -> Result<String, PostError> {
        let body = json!({ "content": text, "allowed_mentions": { "parse": [] } });
        let path = format!("/channels/{place}/messages");
        let answered = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        Self::message_id(&answered)
    }

    async fn edit(&self, place: &String, posted: &String, text: &str) -> Result<(), PostError> {
        let body = json!({ "content": text, "allowed_mentions": { "parse": [] } });
        let path = format!("/channels/{place}/messages/{posted}");
        self.call(reqwest::Method::PATCH, &path, Some(&body))
            .await
            .map(drop)
    }

    async fn ask(&self, place: &String, ask: &Ask) -> Result<String, PostError> {
        let id = self.button_id(&ask.token());
        let body = json!({
            "content": ask.text(),
            "allowed_mentions": { "parse": [] },
            "components": [{
                "type": 1,
                "components": [
                    { "type": 2, "style": 3, "label": "Approve", "custom_id": format!("approve:{id}") },
                    { "type": 2, "style": 4, "label": "Deny", "custom_id": format!("deny:{id}") },
                ],
            }],
        });
        let path = format!("/channels/{place}/messages");
        let answered = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        Self::message_id(&answered)
    }

    async fn settle(&self, place: &String, posted: &String, text: &str) -> Result<(), PostError> {
        let done = self
            .clicked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(posted)
            .is_some();
        if done {
            // The click's answer already showed who decided and took the buttons away.
            return Ok(());
        }
        let body = json!({
            "content": text,
            "components": [],
            "allowed_mentions": { "parse": [] },
        });
        let path = format!("/channels/{place}/messages/{posted}");
        self.call(reqwest::Method::PATCH, &path, Some(&body))
            .await
            .map(drop)
    }

    async fn typing(&self, place: &String) {
        let path = format!("/channels/{place}/typing");
        if let Err(err) = self.call(reqwest::Method::POST, &path, None).await {
            tracing::debug!(?err, "the typing indicator was not shown");
        }
    }
}

/// How an answer is taken.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Ok,
    Later { wait: Duration, global: bool },
    Refused,
}

/// What an HTTP status and body mean for the call: `header_wait` is `Retry-After`.
fn classify(status: u16, body: &Value, header_wait: Option<Duration>) -> Outcome {
    match status {
        200..=299 => Outcome::Ok,
        429 => {
            let named = body["retry_after"]
                .as_f64()
                .and_then(crate::channels::pace::wait_of);
            let wait = named
                .or(header_wait)
                .unwrap_or(Duration::from_secs(1))
                .min(LONGEST_WAIT);
            let global = body["global"].as_bool().unwrap_or(false);
            Outcome::Later { wait, global }
        }
        500..=599 => Outcome::Later {
            wait: header_wait.unwrap_or(OUTAGE_WAIT).min(LONGEST_WAIT),
            global: false,
        },
        _ => Outcome::Refused,
    }
}

/// A refusal as a sentence: the call, the status and Discord's message.
fn refusal(
    method: &reqwest::Method,
    path: &str,
    status: u16,
    body: &Value,
    token_var: &str,
) -> String {
    let message = body["message"].as_str().unwrap_or("no message");
    // An interaction's path holds its token: never shown.
    let shown = match path.strip_prefix("/interactions/") {
        Some(_) => "/interactions/…/callback",
        None => path,
    };
    let hint = match status {
        401 => format!(": the token was refused; check {token_var}"),
        403 => ": the bot lacks a permission there".to_owned(),
        _ => String::new(),
    };
    format!("Discord refused {method} {shown} ({status} {message}){hint}")
}

/// A channel object's parent when it is a thread (types 10, 11, 12).
pub fn thread_parent_of(channel: &Value) -> Option<String> {
    let kind = channel["type"].as_u64()?;
    if !(10..=12).contains(&kind) {
        return None;
    }
    channel["parent_id"].as_str().map(str::to_owned)
}

/// `approve:<id>` or `deny:<id>`.
fn parse_custom_id(custom_id: &str) -> Option<(Choice, &str)> {
    if let Some(id) = custom_id.strip_prefix("approve:") {
        return (!id.is_empty()).then_some((Choice::Approve, id));
    }
    let id = custom_id.strip_prefix("deny:")?;
    (!id.is_empty()).then_some((Choice::Deny, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest() -> Rest {
        Rest::new(
            "http://127.0.0.1:9/api/v10/",
            "t",
            "T",
            Arc::new(Pace::new(5, 300)),
        )
    }

    #[test]
    fn a_429_waits_as_long_as_its_body_says_then_its_header() {
        let body =
            json!({"message": "You are being rate limited.", "retry_after": 0.25, "global": false});
        assert_eq!(
            classify(429, &body, Some(Duration::from_secs(9))),
            Outcome::Later {
                wait: Duration::from_millis(250),
                global: false
            }
        );
        assert_eq!(
            classify(429, &Value::Null, Some(Duration::from_secs(2))),
            Outcome::Later {
                wait: Duration::from_secs(2),
                global: false
            }
        );
        let global = json!({"retry_after": 1e12, "global": true});
        assert_eq!(
            classify(429, &global, None),
            Outcome::Later {
                wait: LONGEST_WAIT,
                global: true
            }
        );
        assert_eq!(
            classify(503, &Value::Null, None),
            Outcome::Later {
                wait: OUTAGE_WAIT,
                global: false
            }
        );
        assert_eq!(classify(404, &Value::Null, None), Outcome::Refused);
        assert_eq!(classify(204, &Value::Null, None), Outcome::Ok);
    }

    #[test]
    fn a_refusal_says_what_was_refused_but_never_an_interaction_token() {
        let body = json!({"message": "Unknown Message", "code": 10008});
        let text = refusal(
            &reqwest::Method::PATCH,
            "/channels/1/messages/2",
            404,
            &body,
            "DISCORD_BOT_TOKEN",
        );
        assert_eq!(
            text,
            "Discord refused PATCH /channels/1/messages/2 (404 Unknown Message)"
        );
        let text = refusal(
            &reqwest::Method::POST,
            "/interactions/5/secret-token/callback",
            400,
            &Value::Null,
            "DISCORD_BOT_TOKEN",
        );
        assert!(!text.contains("secret-token"), "{text}");
        let text = refusal(
            &reqwest::Method::GET,
            "/gateway/bot",
            401,
            &json!({"message": "401: Unauthorized"}),
            "DISCORD_BOT_TOKEN",
        );
        assert!(text.ends_with("check DISCORD_BOT_TOKEN"), "{text}");
    }

    #[test]
    fn buttons_carry_the_token_or_a_short_id_for_a_long_one() {
        let rest = rest();
        let token = "0198c1f4-7a3e-7c4e-9b1d-3f2a1b0c9d8e toolu_01";
        assert_eq!(rest.button_id(token), token);
        assert_eq!(
            rest.resolve(&format!("approve:{token}")),
            Some((Choice::Approve, token.to_owned()))
        );
        let long = format!("0198c1f4-7a3e-7c4e-9b1d-3f2a1b0c9d8e {}", "c".repeat(80));
        let id = rest.button_id(&long);
        assert!(format!("approve:{id}").len() <= CUSTOM_ID_MAX);
        assert_eq!(
            rest.resolve(&format!("deny:{id}")),
            Some((Choice::Deny, long))
        );
        assert_eq!(rest.resolve("approve:"), None);
        assert_eq!(rest.resolve("other:x"), None);
    }

    #[test]
    fn short_ids_and_clicked_questions_are_bounded() {
        let rest = rest();
        let long = |i: usize| format!("0198c1f4-7a3e-7c4e-9b1d-3f2a1b0c9d8e {i:0>90}");
        let first = rest.button_id(&long(0));
        let ids: Vec<String> = (1..=SHORT_MAX).map(|i| rest.button_id(&long(i))).collect();
        assert_eq!(rest.short.lock().unwrap().len(), SHORT_MAX);
        // The oldest question's short id is forgotten: its value is taken as it stands,
        // which names no call.
        assert_eq!(
            rest.resolve(&format!("approve:{first}")),
            Some((Choice::Approve, first.clone()))
        );
        assert_eq!(
            rest.resolve(&format!("deny:{}", ids[SHORT_MAX - 1])),
            Some((Choice::Deny, long(SHORT_MAX)))
        );
        for i in 0..CLICKED_MAX + 10 {
            rest.clicked(&format!("m{i}"), true);
        }
        rest.clicked("m20", false);
        let clicked = rest.clicked.lock().unwrap();
        assert_eq!(clicked.len(), CLICKED_MAX - 1);
        assert!(!clicked.contains("m0") && !clicked.contains("m20"));
        assert!(clicked.contains(&format!("m{}", CLICKED_MAX + 9)));
    }

    #[test]
    fn only_threads_have_a_parent() {
        let thread = json!({"id": "3", "type": 11, "parent_id": "222"});
        assert_eq!(thread_parent_of(&thread).as_deref(), Some("222"));
        let text_channel = json!({"id": "222", "type": 0, "parent_id": "category"});
        assert_eq!(thread_parent_of(&text_channel), None);
        assert_eq!(thread_parent_of(&Value::Null), None);
    }
}
