//! Mattermost's REST API as tern's [`Poster`]: replies posted into their thread and edited
//! as they stream (`POST /api/v4/posts`, `PUT /api/v4/posts/{id}/patch`), the typing
//! indicator sent as a WebSocket action over the open socket, and approval questions posted
//! as text answered by a 👍 or 👎 reaction (interactive buttons would need an HTTP endpoint the
//! server can reach, which a tern on a laptop is not). A 429 waits as long as the
//! `X-Ratelimit-Reset` or `Retry-After` header says; a 5xx or an unreachable server waits a
//! few seconds; any other refusal is final.

use super::event::Me;
use crate::channels::deliver::{Ask, PostError, Poster, key_parts};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;

/// Longest message Mattermost takes, in characters (`PostMessageMaxRunesV2`).
const MESSAGE_LIMIT: usize = 16383;
/// How often the typing indicator is renewed: the web client shows it about that long.
const TYPING_EVERY: Duration = Duration::from_secs(5);
/// How long to wait when the server is down or says "too many" without saying how long.
const WAIT_UNSAID: Duration = Duration::from_secs(3);
/// The most a rate limit header is believed.
const WAIT_MOST: Duration = Duration::from_secs(3600);

/// Where a thread's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub channel_id: String,
    /// The thread's first post.
    pub root_id: String,
}

/// A post tern made, to patch later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub id: String,
    /// For an approval question, its text, kept above the answer when it is settled.
    question: Option<Arc<str>>,
}

/// An approval question waiting for a reaction.
#[derive(Debug, Clone)]
pub struct Question {
    /// What answers it ([`Ask::token`]).
    pub token: String,
    pub place: Place,
    /// Who was told already that their reaction does not count.
    pub told: HashSet<String>,
}

/// What the socket's task and the poster share.
#[derive(Default)]
pub struct Shared {
    /// The bot's account, once known.
    pub me: Mutex<Option<Me>>,
    /// Where actions for the open socket go (none while it is closed).
    pub socket: Mutex<Option<mpsc::UnboundedSender<Value>>>,
    /// Approval questions waiting for a reaction, by post id.
    pub questions: Mutex<HashMap<String, Question>>,
}

/// Locks `mutex`, whatever a panicking holder left.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why `GET /api/v4/users/me` gave no account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeError {
    /// The token is refused: retrying will not help.
    Refused(String),
    /// The server could not be asked now.
    Unreachable(String),
}

/// The REST API of one server, with the bot's token.
pub struct Rest {
    http: reqwest::Client,
    /// The server, like `https://chat.example.com`.
    base: String,
    token: String,
    /// The variable the token came from, for messages.
    var: String,
    pub shared: Arc<Shared>,
}

impl Rest {
    /// The API of the server at `base`, called with `token` (read from `var`).
    pub fn new(http: reqwest::Client, base: &str, token: &str, var: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            var: var.to_owned(),
            shared: Arc::new(Shared::default()),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v4/{path}", self.base)
    }

    /// The bot's own account.
    pub async fn me(&self) -> Result<Me, MeError> {
        let url = self.url("users/me");
        let response = self
            .http
            .get(&url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|err| MeError::Unreachable(format!("could not reach {url}: {err}")))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let body = response.text().await.unwrap_or_default();
            return Err(MeError::Refused(format!(
                "the server at {} refused the token in {} ({status}{}); put a valid bot or \
                 personal access token in {} and start tern again",
                self.base,
                self.var,
                said(&body).map(|m| format!(": {m}")).unwrap_or_default(),
                self.var
            )));
        }
        if !status.is_success() {
            return Err(MeError::Unreachable(format!("{url} answered {status}")));
        }
        let body: Value = response
            .json()
            .await
            .map_err(|err| MeError::Unreachable(format!("{url} answered unreadably: {err}")))?;
        let text = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default();
        let me = Me {
            id: text("id").to_owned(),
            username: text("username").to_owned(),
        };
        if me.id.is_empty() {
            return Err(MeError::Unreachable(format!(
                "{url} answered without the account's id"
            )));
        }
        *lock(&self.shared.me) = Some(me.clone());
        Ok(me)
    }

    /// Sends a request with the token and reads the answer's JSON; `what` names the call in
    /// errors.
    async fn call(&self, request: reqwest::RequestBuilder, what: &str) -> Result<Value, PostError> {
        let response = match request.bearer_auth(&self.token).send().await {
            Ok(response) => response,
            Err(err) => {
                tracing::debug!(%err, "Mattermost could not be reached to {what}");
                return Err(PostError::Later(WAIT_UNSAID));
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        if status.is_success() {
            return Ok(serde_json::from_str(&body).unwrap_or(Value::Null));
        }
        Err(refusal(status, &headers, &body, what))
    }

    /// Posts `message` into `place`'s thread; the new post's id.
    async fn create(&self, place: &Place, message: &str) -> Result<String, PostError> {
        let body = json!({
            "channel_id": place.channel_id,
            "root_id": place.root_id,
            "message": message,
        });
        let answer = self
            .call(self.http.post(self.url("posts")).json(&body), "post")
            .await?;
        match answer.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok(id.to_owned()),
            _ => Err(PostError::Failed(
                "Mattermost took a post but answered without its id".to_owned(),
            )),
        }
    }

    async fn patch(&self, id: &str, message: &str) -> Result<(), PostError> {
        let url = self.url(&format!("posts/{id}/patch"));
        self.call(
            self.http.put(url).json(&json!({ "message": message })),
            "edit a post",
        )
        .await
        .map(drop)
    }

    /// Adds the bot's reaction to a post, so a person can answer with one click; best effort.
    async fn react(&self, post_id: &str, emoji_name: &str) {
        let Some(me) = lock(&self.shared.me).clone() else {
            return;
        };
        let body = json!({ "user_id": me.id, "post_id": post_id, "emoji_name": emoji_name });
        if let Err(err) = self
            .call(self.http.post(self.url("reactions")).json(&body), "react")
            .await
        {
            tracing::debug!(?err, "could not add a reaction to an approval question");
        }
    }

    /// Posts a plain note into a thread, once, not retried.
    pub async fn note(&self, place: &Place, message: &str) -> Result<(), PostError> {
        self.create(place, message).await.map(drop)
    }
}

/// The message of a Mattermost error body (`{"id", "message", "status_code"}`).
fn said(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let message = value.get("message")?.as_str()?.trim();
    (!message.is_empty()).then(|| message.chars().take(300).collect())
}

/// What a refused call means: wait (429, 5xx) or give up (any other status).
fn refusal(status: StatusCode, headers: &HeaderMap, body: &str, what: &str) -> PostError {
    if status == StatusCode::TOO_MANY_REQUESTS {
        return PostError::Later(rate_limit_wait(headers).unwrap_or(WAIT_UNSAID));
    }
    if status.is_server_error() {
        let wait = crate::channels::pace::retry_after(headers).unwrap_or(WAIT_UNSAID);
        return PostError::Later(wait);
    }
    PostError::Failed(format!(
        "Mattermost refused to {what}: {status}{}",
        said(body).map(|m| format!(": {m}")).unwrap_or_default()
    ))
}

/// How long a 429 says to wait: `X-Ratelimit-Reset` (seconds until the budget refills; an
/// epoch time is read as one too) or else `Retry-After`.
fn rate_limit_wait(headers: &HeaderMap) -> Option<Duration> {
    let reset = headers
        .get("x-ratelimit-reset")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|secs| secs.is_finite() && *secs >= 0.0);
    if let Some(mut secs) = reset {
        if secs > 1_000_000_000.0 {
            let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
            secs = (secs - now).max(0.0);
        }
        return crate::channels::pace::wait_of(secs).map(|wait| wait.min(WAIT_MOST));
    }
    crate::channels::pace::retry_after(headers)
}

impl Poster for Rest {
    type Place = Place;
    type Posted = Posted;

    fn limit(&self) -> usize {
        MESSAGE_LIMIT
    }

    fn place_of(&self, key: &str) -> Option<Place> {
        match key_parts(key, "mattermost")?.as_slice() {
            [channel, root] => Some(Place {
                channel_id: (*channel).to_owned(),
                root_id: (*root).to_owned(),
            }),
            _ => None,
        }
    }

    fn typing_every(&self) -> Option<Duration> {
        Some(TYPING_EVERY)
    }

    async fn post(&self, place: &Place, text: &str) -> Result<Posted, PostError> {
        let id = self.create(place, text).await?;
        Ok(Posted { id, question: None })
    }

    async fn edit(&self, _: &Place, posted: &Posted, text: &str) -> Result<(), PostError> {
        self.patch(&posted.id, text).await
    }

    async fn ask(&self, place: &Place, ask: &Ask) -> Result<Posted, PostError> {
        let question = ask.text();
        let message = format!(
            "{question}\nReact with :+1: to allow it once or :-1: to deny it (only the people \
             allowed to use tern here may answer)."
        );
        let id = self.create(place, &message).await?;
        lock(&self.shared.questions).insert(
            id.clone(),
            Question {
                token: ask.token(),
                place: place.clone(),
                told: HashSet::new(),
            },
        );
        self.react(&id, "+1").await;
        self.react(&id, "-1").await;
        Ok(Posted {
            id,
            question: Some(question.into()),
        })
    }

    async fn settle(&self, _: &Place, posted: &Posted, text: &str) -> Result<(), PostError> {
        lock(&self.shared.questions).remove(&posted.id);
        let message = match &posted.question {
            Some(question) => format!("{question}\n{text}"),
            None => text.to_owned(),
        };
        self.patch(&posted.id, &message).await
    }

    async fn typing(&self, place: &Place) {
        let action = json!({
            "action": "user_typing",
            "data": { "channel_id": place.channel_id, "parent_id": place.root_id },
        });
        if let Some(socket) = lock(&self.shared.socket).as_ref() {
            let _ = socket.send(action);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_429_waits_as_the_headers_say() {
        let check = |pairs: &[(&'static str, &str)], expected: Duration| {
            assert_eq!(
                refusal(StatusCode::TOO_MANY_REQUESTS, &headers(pairs), "", "post"),
                PostError::Later(expected),
                "{pairs:?}"
            );
        };
        check(&[("x-ratelimit-reset", "2")], Duration::from_secs(2));
        check(&[("retry-after", "4")], Duration::from_secs(4));
        check(
            &[("x-ratelimit-reset", "1"), ("retry-after", "9")],
            Duration::from_secs(1),
        );
        check(&[], WAIT_UNSAID);
        let soon = jiff::Timestamp::now().as_second() + 5;
        let PostError::Later(wait) = refusal(
            StatusCode::TOO_MANY_REQUESTS,
            &headers(&[("x-ratelimit-reset", &soon.to_string())]),
            "",
            "post",
        ) else {
            panic!("a 429 is for later");
        };
        assert!(wait <= Duration::from_secs(6), "{wait:?}");
    }

    #[test]
    fn outages_wait_and_other_refusals_are_final() {
        assert_eq!(
            refusal(StatusCode::BAD_GATEWAY, &HeaderMap::new(), "", "post"),
            PostError::Later(WAIT_UNSAID)
        );
        let body = r#"{"id":"api.context.permissions.app_error","message":"You do not have the appropriate permissions.","status_code":403}"#;
        assert_eq!(
            refusal(StatusCode::FORBIDDEN, &HeaderMap::new(), body, "post"),
            PostError::Failed(
                "Mattermost refused to post: 403 Forbidden: You do not have the appropriate \
                 permissions."
                    .into()
            )
        );
    }
}
