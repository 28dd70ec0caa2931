//! Signed webhooks in, replies out: `POST /webhook/<endpoint>` with a Standard Webhooks
//! signature and a JSON body `{"text", "thread"}` is an input to the session
//! `webhook:<endpoint>/<thread>`; the finished reply is POSTed to the endpoint's `reply_url`
//! as `{"thread", "session", "text"}`, signed with the same secret. The raw body is checked
//! before it is parsed; a refused signature or timestamp, a replayed `webhook-id` or an
//! oversized body starts nothing.

use super::Start;
use super::deliver::{Ask, Conversations, Inbound, PostError, Poster, key_parts};
use super::pace::{Pace, Paces, retry_after};
use super::signature::{Refused, Secret};
use super::status::{ChannelState, Status};
use crate::config::{EndpointSettings, WebhookSettings};
use crate::domain::{ApprovalMode, Audience, InputKind, Sender, SessionId, SessionKey};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// How long a delivery id is remembered: past the signature's window either way, after
/// which the timestamp check refuses a replay anyway.
const REMEMBER: Duration = Duration::from_secs(2 * 5 * 60 + 60);
/// Delivery ids remembered at most per endpoint.
const REMEMBER_MAX: usize = 100_000;

/// An endpoint ready to take deliveries.
struct Endpoint {
    name: String,
    secret: Result<Secret, String>,
    reply_url: Option<String>,
    project_dir: PathBuf,
    audience: Audience,
    /// Delivery ids seen, oldest first.
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    ids: HashMap<String, Instant>,
    order: VecDeque<(Instant, String)>,
}

impl Seen {
    /// Remembers `id`; false when it was seen already.
    fn first(&mut self, id: &str, now: Instant) -> bool {
        while let Some((at, old)) = self.order.front() {
            if now.duration_since(*at) < REMEMBER && self.order.len() < REMEMBER_MAX {
                break;
            }
            // Only if it was not forgotten and seen again since.
            if self.ids.get(old) == Some(at) {
                self.ids.remove(old);
            }
            self.order.pop_front();
        }
        if self.ids.contains_key(id) {
            return false;
        }
        self.ids.insert(id.to_owned(), now);
        self.order.push_back((now, id.to_owned()));
        true
    }

    /// Forgets `id`: its delivery was not taken, so the sender's retry must be.
    fn forget(&mut self, id: &str) {
        self.ids.remove(id);
    }
}

/// Where a webhook thread's reply goes.
#[derive(Clone)]
pub struct Place {
    endpoint: Arc<Endpoint>,
    thread: String,
    /// Set once the input is acknowledged; the reply names it.
    session: Arc<OnceLock<SessionId>>,
}

/// Posts replies to the endpoints' `reply_url`s.
pub struct Replies {
    http: reqwest::Client,
    endpoints: BTreeMap<String, Arc<Endpoint>>,
}

/// Longest text of one reply.
const REPLY_LIMIT: usize = 256 * 1024;

impl Poster for Replies {
    type Place = Place;
    type Posted = ();

    fn limit(&self) -> usize {
        REPLY_LIMIT
    }

    fn edits(&self) -> bool {
        false
    }

    fn place_of(&self, key: &str) -> Option<Place> {
        match key_parts(key, "webhook")?.as_slice() {
            [endpoint, thread] => Some(Place {
                endpoint: self.endpoints.get(*endpoint)?.clone(),
                thread: (*thread).to_owned(),
                session: Arc::new(OnceLock::new()),
            }),
            _ => None,
        }
    }

    async fn post(&self, place: &Place, text: &str) -> Result<(), PostError> {
        let Some(url) = &place.endpoint.reply_url else {
            return Ok(());
        };
        let secret = match &place.endpoint.secret {
            Ok(secret) => secret,
            Err(err) => return Err(PostError::Failed(err.clone())),
        };
        let body = serde_json::json!({
            "thread": place.thread,
            "session": place.session.get().map(ToString::to_string),
            "text": text,
        })
        .to_string();
        let id = format!("msg_{}", uuid::Uuid::now_v7().simple());
        let timestamp = jiff::Timestamp::now().as_second();
        let signature = secret.sign(&id, timestamp, body.as_bytes());
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(err) => {
                // A reply URL may hold a secret of its own: not logged.
                let err = err.without_url();
                tracing::debug!(%err, "a webhook reply did not reach its URL; trying again");
                return Err(PostError::Later(Duration::from_secs(2)));
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        if status.as_u16() == 429 || status.is_server_error() {
            let wait = retry_after(response.headers()).unwrap_or(Duration::from_secs(2));
            return Err(PostError::Later(wait));
        }
        Err(PostError::Failed(format!(
            "the reply URL of endpoint `{}` answered {status}",
            place.endpoint.name
        )))
    }

    async fn edit(&self, place: &Place, _: &(), text: &str) -> Result<(), PostError> {
        self.post(place, text).await
    }

    async fn ask(&self, place: &Place, ask: &Ask) -> Result<(), PostError> {
        let text = format!(
            "{} A webhook cannot answer: answer it in a terminal (`tern -r {}`).",
            ask.text(),
            ask.session
        );
        self.post(place, &text).await
    }

    async fn settle(&self, _: &Place, _: &(), _: &str) -> Result<(), PostError> {
        Ok(())
    }

    fn bind(&self, place: &Place, session: &SessionId) {
        let _ = place.session.set(session.clone());
    }
}

/// Shared by every connection of the server.
struct Server {
    endpoints: BTreeMap<String, Arc<Endpoint>>,
    max_body: u64,
    conversations: Conversations<Replies>,
    status: Status,
}

/// Serves the webhook endpoints until `stop`.
pub async fn run(settings: WebhookSettings, start: Start) {
    let Start {
        default_dir,
        status,
        stop,
        ..
    } = start.clone();
    let listener = match TcpListener::bind(settings.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            status.set(
                ChannelState::Stopped,
                format!(
                    "cannot listen on {}: {err}; set another address in [channels.webhook] listen",
                    settings.listen
                ),
            );
            return;
        }
    };
    let at = listener.local_addr().map_or(settings.listen, |at| at);
    let endpoints: BTreeMap<String, Arc<Endpoint>> = settings
        .endpoints
        .iter()
        .map(|(name, endpoint)| {
            (
                name.clone(),
                Arc::new(prepare(name, endpoint, &default_dir)),
            )
        })
        .collect();
    for endpoint in endpoints.values() {
        if let Err(err) = &endpoint.secret {
            status.error(format!("endpoint `{}`: {err}", endpoint.name));
        }
    }
    let names: Vec<&str> = endpoints.keys().map(String::as_str).collect();
    status.set(
        ChannelState::Connected,
        format!("listening on http://{at}/webhook/{{{}}}", names.join(",")),
    );
    let replies = Replies {
        http: crate::channels::http_client().build().unwrap_or_default(),
        endpoints: endpoints.clone(),
    };
    let conversations = Conversations::new(
        &start,
        replies,
        Paces::one(Pace::new(20, 600)),
        Duration::from_secs(1),
    );
    let server = Arc::new(Server {
        endpoints,
        max_body: settings.max_body,
        conversations,
        status: status.clone(),
    });
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let server = server.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let handle = hyper::service::service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, std::convert::Infallible>(server.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(io, handle);
            tokio::select! {
                _ = connection => {}
                () = stop.cancelled() => {}
            }
        });
    }
    status.set(ChannelState::Stopped, "stopped");
}

fn prepare(name: &str, settings: &EndpointSettings, default_dir: &Path) -> Endpoint {
    let secret = settings.secret.value().and_then(|text| {
        Secret::parse(text).map_err(|err| format!("{} {err}", settings.secret.var))
    });
    Endpoint {
        name: name.to_owned(),
        secret,
        reply_url: settings.reply_url.clone(),
        project_dir: settings
            .project_dir
            .clone()
            .unwrap_or_else(|| default_dir.to_path_buf()),
        audience: settings.audience,
        seen: Mutex::new(Seen::default()),
    }
}

/// The body a sender posts.
#[derive(Deserialize)]
struct Delivery {
    text: String,
    thread: String,
}

fn answer(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn refuse(status: StatusCode, error: impl Into<String>) -> Response<Full<Bytes>> {
    answer(
        status,
        serde_json::json!({ "ok": false, "error": error.into() }),
    )
}

impl Server {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        self.status.heard();
        let name = request
            .uri()
            .path()
            .strip_prefix("/webhook/")
            .map(|name| name.trim_end_matches('/').to_owned());
        let Some(endpoint) = name
            .as_ref()
            .and_then(|name| self.endpoints.get(name))
            .cloned()
        else {
            return refuse(
                StatusCode::NOT_FOUND,
                "no such endpoint; POST to /webhook/<name> of an endpoint in [channels.webhook.endpoints]",
            );
        };
        if request.method() != hyper::Method::POST {
            return refuse(StatusCode::METHOD_NOT_ALLOWED, "deliveries are POSTed");
        }
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let (id, timestamp, signature) = (
            header("webhook-id"),
            header("webhook-timestamp"),
            header("webhook-signature"),
        );
        let declared = header("content-length").and_then(|n| n.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body) {
            return self.too_large();
        }
        let body = match Limited::new(request.into_body(), self.max_body as usize)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(err) if err.is::<http_body_util::LengthLimitError>() => return self.too_large(),
            Err(err) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the body could not be read: {err}"),
                );
            }
        };
        let secret = match &endpoint.secret {
            Ok(secret) => secret,
            Err(err) => {
                return refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("this endpoint has no usable secret: {err}"),
                );
            }
        };
        let now = jiff::Timestamp::now().as_second();
        if let Err(refused) = secret.verify(
            id.as_deref(),
            timestamp.as_deref(),
            signature.as_deref(),
            &body,
            now,
        ) {
            self.status.error(format!(
                "endpoint `{}`: a delivery was refused: {refused}",
                endpoint.name
            ));
            return refuse(StatusCode::UNAUTHORIZED, refused_text(&refused));
        }
        let id = id.unwrap_or_default();
        let seen = || endpoint.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if !seen().first(&id, Instant::now()) {
            return answer(
                StatusCode::OK,
                serde_json::json!({ "ok": true, "duplicate": true }),
            );
        }
        let response = self.take(&endpoint, &body).await;
        // A delivery not taken may come again, under the same id.
        if !response.status().is_success() {
            seen().forget(&id);
        }
        response
    }

    /// A delivery whose signature holds: its input sent to its thread's session.
    async fn take(&self, endpoint: &Arc<Endpoint>, body: &[u8]) -> Response<Full<Bytes>> {
        let delivery: Delivery = match serde_json::from_slice(body) {
            Ok(delivery) => delivery,
            Err(err) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the body is not {{\"text\": …, \"thread\": …}}: {err}"),
                );
            }
        };
        let key = format!("webhook:{}/{}", endpoint.name, delivery.thread);
        if let Err(err) = SessionKey::parse(&key) {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("`thread` cannot name a session: {}", err.reason),
            );
        }
        if delivery.text.trim().is_empty() {
            return refuse(StatusCode::BAD_REQUEST, "`text` is empty");
        }
        let place = Place {
            endpoint: endpoint.clone(),
            thread: delivery.thread.clone(),
            // Set by the thread's follower once the session is known.
            session: Arc::new(OnceLock::new()),
        };
        let inbound = Inbound {
            key,
            place,
            sender: Sender {
                id: format!("webhook:{}", endpoint.name),
                name: endpoint.name.clone(),
                automated: true,
                trusted: endpoint.audience >= Audience::Team,
            },
            audience: endpoint.audience,
            kind: InputKind::Webhook,
            text: delivery.text,
            project_dir: endpoint.project_dir.clone(),
            // Nobody can answer from a webhook: what needs approval is refused.
            approval: ApprovalMode::Never,
        };
        match self.conversations.deliver(inbound).await {
            Ok(delivered) => answer(
                StatusCode::ACCEPTED,
                serde_json::json!({
                    "ok": true,
                    "session": delivered.session.to_string(),
                    "seq": delivered.seq,
                }),
            ),
            Err(err) => {
                self.status
                    .error(format!("endpoint `{}`: {err}", endpoint.name));
                refuse(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            }
        }
    }

    fn too_large(&self) -> Response<Full<Bytes>> {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body is over {} bytes; send less, or raise [channels.webhook] max_body",
                self.max_body
            ),
        )
    }
}

fn refused_text(refused: &Refused) -> String {
    format!("signature refused: {refused}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_id_counts_once_within_the_window() {
        let mut seen = Seen::default();
        let now = Instant::now();
        assert!(seen.first("msg_1", now));
        assert!(!seen.first("msg_1", now + Duration::from_secs(60)));
        assert!(seen.first("msg_2", now));
        // Long after, the timestamp check refuses a replay; the id may go.
        assert!(seen.first("msg_1", now + REMEMBER + Duration::from_secs(1)));
    }
}
