//! The HTTP side shared by every provider: one lazily built client per process, sending a
//! request and classifying an error reply, and turning a streamed body into decoded events.
//! A provider only builds its requests (URL, key header, body) and picks its decoder.
//!
//! Clients are built on first use rather than at start-up. Building the TLS client loads the
//! platform's certificate store, which costs more than a whole `tern run` turn against a
//! local server spends otherwise; so plain `http://` endpoints (llama.cpp, Ollama, vLLM on
//! this machine) get a second client that loads no certificates at all. There is no
//! total request timeout because replies stream for minutes; the model client enforces the
//! prefill, first-token and no-progress timeouts instead.
//!
//! Redirects are never followed: following one would send the key to whatever host the
//! redirect names and turn the POST into a GET. A redirect is reported instead, with the
//! address to configure. URLs in messages are shown without credentials or query
//! ([`display_url`]), since messages reach the terminal, the log and the journal.
//!
//! Connections are kept alive and reused, and a server may close one that sits in the pool
//! at any moment; llama.cpp's server closes every connection right after a streamed reply
//! while its headers promise keep-alive. A request sent on such a connection ends before
//! any answer ([`closed_before_answer`]): nothing reached the server, so it is no failure of
//! the request. It is sent again at once on a connection of its own (a client that keeps
//! none idle), without a pause, a retry event or an attempt counted; only a second such end
//! is an error, classified as usual.

use super::EventStream;
use super::decode::{Decoded, WireDecoder};
use super::error::{
    LlmError, classify_json_reply, classify_status, closed_before_answer, connection_cut,
    display_url, from_transport, root_cause,
};
use crate::config::ProviderProfile;
use crate::domain::ErrorCategory;
use futures_util::StreamExt;
use std::cell::Cell;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;

/// How long to wait for a TCP (and TLS) connection before calling the server unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of an error body we read; error replies are small, and a misconfigured base URL
/// can point at something that streams forever.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How long a probe (`tern doctor`) waits for an answer; unlike a reply, it streams nothing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// The process's HTTP clients, one per scheme (TLS or plain), pool (kept connections, or
/// none: for sending again a request whose kept-alive connection the server had closed) and
/// side (see [`keep_connections_apart`]).
static CLIENTS: [OnceLock<Result<reqwest::Client, String>>; 12] = [const { OnceLock::new() }; 12];

/// Which threads' requests share connections: each runtime's keep their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The main runtime's (the interface's and the actors').
    Main,
    /// The runtime of people's turns.
    Turns,
    /// The subagent runs' runtime, at a lower priority.
    Runs,
}

thread_local! {
    /// Whose connections the calling thread's requests go over.
    static SIDE: Cell<Side> = const { Cell::new(Side::Main) };
}

/// Marks the calling thread as one whose requests go over the connections of `side`: a
/// thread of the turns' or the runs' runtime. A connection's task runs on the runtime that
/// opened it, and every stream that shares it (HTTP/2 carries all of a host's) goes through
/// that runtime's threads: a person's turn must not wait on the runs' lower-priority thread,
/// nor the runs crowd the person's.
pub fn keep_connections_apart(side: Side) {
    SIDE.with(|cell| cell.set(side));
}

/// Whether a client keeps connections for reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Keep,
    None,
}

/// The process-wide HTTP client for `url`, built on first call: one that verifies TLS with
/// the platform's certificates for `https://`, one without any for plain `http://`.
pub(crate) fn client(url: &str) -> Result<&'static reqwest::Client, LlmError> {
    client_with(url, Pool::Keep)
}

fn client_with(url: &str, pool: Pool) -> Result<&'static reqwest::Client, LlmError> {
    let plain = url.starts_with("http://");
    let side = SIDE.with(Cell::get) as usize;
    let slot = usize::from(plain) * 6 + usize::from(pool == Pool::None) * 3 + side;
    let client = CLIENTS[slot].get_or_init(|| match plain {
        // No certificates for plain HTTP: that client can never complete a TLS handshake,
        // and never needs to.
        true => build_client(|b| b.tls_certs_only([]), pool),
        false => build_client(|b| b, pool),
    });
    match client {
        Ok(client) => Ok(client),
        Err(cause) => Err(LlmError::new(
            ErrorCategory::Network,
            format!("could not set up the HTTP client: {cause}"),
        )),
    }
}

/// A builder for an HTTP client of tern's own, the crypto provider installed first.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    crate::tls::install_crypto_provider();
    reqwest::Client::builder()
}

fn build_client(
    tls: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    pool: Pool,
) -> Result<reqwest::Client, String> {
    let builder = match pool {
        Pool::Keep => client_builder(),
        Pool::None => client_builder().pool_max_idle_per_host(0),
    };
    tls(builder)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("tern/", env!("CARGO_PKG_VERSION")))
        // Long silent stretches (a model thinking) must not look like a dead connection to
        // middleboxes.
        .tcp_keepalive(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|err| err.to_string())
}

/// An HTTP client for an MCP server at `url`, set up as the providers' are (certificates by
/// scheme, connect timeout, keep-alive, no redirects), sending `headers` with every request,
/// their values marked sensitive so no debug output shows them.
pub(crate) fn client_sending(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<reqwest::Client, String> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("the header name `{name}` is not valid"))?;
        let mut value = reqwest::header::HeaderValue::from_str(value.trim())
            .map_err(|_| format!("the value of header `{name}` is not valid"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    let tls = |builder: reqwest::ClientBuilder| match url.starts_with("http://") {
        true => builder.tls_certs_only([]),
        false => builder,
    };
    build_client(|builder| tls(builder).default_headers(map), Pool::Keep)
}

/// Where a provider's endpoint is and how to tell the user to fix it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The full URL requested.
    pub url: String,
    /// The URL as messages show it: without user name, password or query.
    pub display: String,
    /// The path appended to the base URL (`/v1/messages`), to turn a redirect target back
    /// into a base URL.
    path: String,
    /// Where its base URL is configured, for "could not reach" advice.
    base_url_hint: String,
}

impl Endpoint {
    /// A request to this endpoint on the client that fits its scheme.
    pub fn request(&self, method: reqwest::Method) -> Result<reqwest::RequestBuilder, LlmError> {
        Ok(client(&self.url)?.request(method, &self.url))
    }

    /// `path` on the profile's base URL, once any of `strip_suffixes` (parts of an endpoint
    /// path users paste along with the base) is dropped from it.
    pub fn new(profile: &ProviderProfile, strip_suffixes: &[&str], path: &str) -> Self {
        let url = join_url(&profile.base_url, strip_suffixes, path);
        Self {
            display: display_url(&url),
            url,
            path: path.to_string(),
            base_url_hint: base_url_hint(&profile.name),
        }
    }

    /// The error for a redirect reply, naming the address to configure instead: the base URL
    /// that the target corresponds to when it ends in our endpoint path, else the target.
    fn redirect_error(&self, response: &reqwest::Response) -> LlmError {
        let status = response.status().as_u16();
        let target = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|location| response.url().join(location.trim()).ok())
            .map(|target| display_url(target.as_str()));
        let message = match target {
            Some(target) => {
                let base = target
                    .strip_suffix(&self.path)
                    .filter(|base| !base.is_empty())
                    .unwrap_or(&target);
                format!(
                    "base_url redirects to {base} (HTTP {status}); set {} to that address \
                     (redirects are not followed, so the key never goes to another host)",
                    self.base_url_hint
                )
            }
            None => format!(
                "{} answered with a redirect (HTTP {status}) without saying where to; check {}",
                self.display, self.base_url_hint
            ),
        };
        LlmError {
            status: Some(status),
            ..LlmError::new(ErrorCategory::InvalidRequest, message)
        }
    }
}

/// Sends a streaming request and decodes the reply body with `decoder`. `explain` adds the
/// provider's advice to a request that failed before streaming began.
pub(crate) async fn open_stream<D: WireDecoder>(
    endpoint: &Endpoint,
    request: reqwest::RequestBuilder,
    decoder: D,
    explain: impl FnOnce(LlmError) -> LlmError,
) -> Result<EventStream, LlmError> {
    let opened = async {
        let response = send(endpoint, request).await?;
        stream_start(endpoint, response).await
    };
    let (head, response) = opened.await.map_err(explain)?;
    Ok(event_stream(head, response, decoder))
}

/// The strings at `field` of each entry of the JSON array at `list` in a model listing's
/// body (`data[].id` for OpenAI and Anthropic, `models[].name` for Ollama); `None` when the
/// body is not such a listing.
pub(crate) async fn listed(
    response: reqwest::Response,
    list: &str,
    field: &str,
) -> Option<Vec<String>> {
    let body = response.json::<serde_json::Value>().await.ok()?;
    let entries = body.get(list)?.as_array()?;
    Some(
        entries
            .iter()
            .filter_map(|entry| entry.get(field)?.as_str().map(str::to_owned))
            .collect(),
    )
}

/// Sends a probe and returns the response, within [`PROBE_TIMEOUT`]. `explain` adds the
/// provider's advice to a failed send.
pub(crate) async fn probe(
    endpoint: &Endpoint,
    request: reqwest::RequestBuilder,
    explain: impl FnOnce(LlmError) -> LlmError,
) -> Result<reqwest::Response, LlmError> {
    send(endpoint, request.timeout(PROBE_TIMEOUT))
        .await
        .map_err(explain)
}

/// Sends `request` and returns the response once its headers arrived with a success status;
/// an error status becomes a classified [`LlmError`] with the provider's message in it. A
/// request whose kept-alive connection the server had closed is sent once more at once, on a
/// new connection (see the module docs).
async fn send(
    endpoint: &Endpoint,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, LlmError> {
    let transport =
        |err: reqwest::Error| from_transport(&err, &endpoint.display, &endpoint.base_url_hint);
    let (client, request) = request.build_split();
    let request = request.map_err(transport)?;
    // Bodies here are bytes in memory, so a copy can always be made; a streamed body could
    // not be sent twice, and then the first answer stands.
    let again = request.try_clone();
    super::marks::request_sent();
    let response = match (client.execute(request).await, again) {
        (Ok(response), _) => response,
        (Err(err), Some(again)) if closed_before_answer(&err) => {
            tracing::debug!(
                url = %endpoint.display,
                cause = %root_cause(&err),
                "the server had closed the kept-alive connection; sending on a new one"
            );
            client_with(&endpoint.url, Pool::None)?
                .execute(again)
                .await
                .map_err(transport)?
        }
        (Err(err), _) => return Err(transport(err)),
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    if status.is_redirection() {
        return Err(endpoint.redirect_error(&response));
    }
    let headers = response.headers().clone();
    let body = read_error_body(response).await;
    Err(classify_status(status.as_u16(), &headers, &body))
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of an error reply; a body that fails halfway is
/// classified from what arrived.
async fn read_error_body(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Checks that a success reply is a stream, and returns the bytes read while checking.
///
/// An HTML page means base_url points at a website or a login portal. A body labelled
/// `application/json` is usually a single document: an error some servers send under status
/// 200, or a whole non-streamed completion from an endpoint that ignores `stream`. Those are
/// read (up to [`MAX_ERROR_BODY`]) and reported as what they are. The streaming formats come
/// as `text/event-stream` and Ollama's `application/x-ndjson`, and pass untouched; a stream
/// mislabelled as JSON is recognised by its second line (or its SSE framing) and decoded after
/// all. Decoding either kind of document as a stream would only end in a confusing
/// "connection closed" error and pointless retries.
async fn stream_start(
    endpoint: &Endpoint,
    mut response: reqwest::Response,
) -> Result<(Vec<u8>, reqwest::Response), LlmError> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let media_type = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if media_type == "text/html" {
        return Err(LlmError::new(
            ErrorCategory::InvalidRequest,
            format!(
                "{} answered with a web page, not a model stream; check {}",
                endpoint.display, endpoint.base_url_hint
            ),
        ));
    }
    if media_type != "application/json" && !media_type.ends_with("+json") {
        return Ok((Vec::new(), response));
    }
    let mut head = Vec::new();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|err| connection_cut(&root_cause(&err)))?;
        let ended = chunk.is_none();
        if let Some(chunk) = chunk {
            head.extend_from_slice(&chunk);
        }
        match json_start(&head, ended) {
            JsonStart::NeedMore => {}
            JsonStart::Stream => return Ok((head, response)),
            JsonStart::Document(reply) => {
                return Err(classify_json_reply(&reply).unwrap_or_else(|| {
                    LlmError::new(
                        ErrorCategory::InvalidRequest,
                        format!(
                            "the server at {} answered without streaming; check that {} points \
                             at a streaming chat endpoint",
                            endpoint.display, endpoint.base_url_hint
                        ),
                    )
                }));
            }
        }
    }
}

/// What the opening bytes of a body labelled JSON turned out to be.
#[derive(Debug, PartialEq)]
enum JsonStart {
    /// Not known yet: the first document is incomplete, or may be the only one.
    NeedMore,
    /// A stream after all (SSE or NDJSON under the wrong label), or something the decoder
    /// should judge: decode it, these bytes first.
    Stream,
    /// One whole JSON document and nothing else.
    Document(serde_json::Value),
}

/// Decides what `head`, the start of a body labelled JSON, is; `ended` says the body ended
/// there. Pure, so the cases can be tested without a server.
fn json_start(head: &[u8], ended: bool) -> JsonStart {
    let Some(start) = head.iter().position(|byte| !byte.is_ascii_whitespace()) else {
        return if ended {
            JsonStart::Stream
        } else {
            JsonStart::NeedMore
        };
    };
    if head[start] != b'{' || head.len() > MAX_ERROR_BODY {
        return JsonStart::Stream;
    }
    let mut documents =
        serde_json::Deserializer::from_slice(&head[start..]).into_iter::<serde_json::Value>();
    match documents.next() {
        Some(Ok(document)) => {
            let rest = &head[start + documents.byte_offset()..];
            if rest.iter().any(|byte| !byte.is_ascii_whitespace()) {
                JsonStart::Stream
            } else if ended {
                JsonStart::Document(document)
            } else {
                JsonStart::NeedMore
            }
        }
        Some(Err(err)) if err.is_eof() && !ended => JsonStart::NeedMore,
        _ => JsonStart::Stream,
    }
}

type ByteStream = Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// The state behind a decoded event stream.
struct Decoding<D> {
    body: ByteStream,
    decoder: D,
    pending: VecDeque<Decoded>,
    /// The body ended or failed, or an error was yielded: nothing more is read.
    ended: bool,
}

impl<D: WireDecoder> Decoding<D> {
    /// The next decoded item, reading the body until one is complete.
    async fn next_item(&mut self) -> Option<Decoded> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                if item.is_err() {
                    self.pending.clear();
                    self.ended = true;
                }
                return Some(item);
            }
            if self.ended {
                return None;
            }
            let mut out = Vec::new();
            match self.body.next().await {
                Some(Ok(chunk)) => self.decoder.feed(&chunk, &mut out),
                Some(Err(err)) => {
                    self.ended = true;
                    out.push(Err(connection_cut(&root_cause(&err))));
                }
                None => {
                    self.ended = true;
                    self.decoder.finish(&mut out);
                }
            }
            self.pending.extend(out);
        }
    }
}

/// Decodes `head` (bytes already read) and then the rest of a streamed response body with
/// `decoder`. The stream ends after the body does, or right after the first error (a failed
/// body or an undecodable line).
fn event_stream<D: WireDecoder>(
    head: Vec<u8>,
    response: reqwest::Response,
    decoder: D,
) -> EventStream {
    let head = (!head.is_empty()).then(|| Ok(bytes::Bytes::from(head)));
    let body = futures_util::stream::iter(head).chain(response.bytes_stream());
    let state = Decoding {
        body: Box::pin(body),
        decoder,
        pending: VecDeque::new(),
        ended: false,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next_item().await?;
            Some((item, state))
        },
    ))
}

/// A header value carrying a key, marked sensitive so it never shows in debug output. Keys
/// read from the environment often end in a newline, which is trimmed.
pub(crate) fn secret_header(
    key: &str,
    provider: &str,
) -> Result<reqwest::header::HeaderValue, LlmError> {
    let mut value = reqwest::header::HeaderValue::from_str(key.trim()).map_err(|_| {
        LlmError::new(
            ErrorCategory::Auth,
            format!(
                "the API key of provider `{provider}` contains characters an HTTP header cannot \
                 carry (a stray quote or line break?); check the key"
            ),
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The error for a profile whose key variable is unset, raised before any request is sent.
pub(crate) fn missing_key(provider: &str, variable: &str) -> LlmError {
    LlmError::new(
        ErrorCategory::Auth,
        format!("no API key for provider `{provider}`: set {variable}"),
    )
}

/// Names the provider in an error and adds what only the provider knows: the variable its key
/// comes from (for credential errors) and the model it was asked for (for "not found").
pub(crate) fn explain(
    mut err: LlmError,
    provider: &str,
    key_env: Option<&str>,
    model: &str,
) -> LlmError {
    err.message = format!("{provider}: {}", err.message);
    match (err.category, key_env) {
        (ErrorCategory::Auth, Some(var)) => {
            err.with_hint(&format!("provider `{provider}` reads its key from {var}"))
        }
        _ if err.status == Some(404) && !model.is_empty() => {
            err.with_hint(&format!("the model requested was `{model}`"))
        }
        _ => err,
    }
}

/// Joins a base URL and an endpoint path, tolerating a trailing `/` on the base and dropping
/// the listed suffixes users often paste along with it (`/v1` on an Anthropic base URL). A
/// query on the base URL (some gateways take `?api-version=…`) stays at the end.
pub(crate) fn join_url(base_url: &str, strip_suffixes: &[&str], path: &str) -> String {
    let (base, query) = match base_url.trim().split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base_url.trim(), None),
    };
    let mut base = base.trim_end_matches('/');
    for suffix in strip_suffixes {
        if let Some(stripped) = base.strip_suffix(suffix) {
            base = stripped.trim_end_matches('/');
        }
    }
    match query {
        Some(query) => format!("{base}{path}?{query}"),
        None => format!("{base}{path}"),
    }
}

/// Where a profile's base URL is set, for "could not reach" advice: the built-in profiles
/// also read the ecosystem's variables (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`,
/// `OLLAMA_HOST`); any other profile only the config file.
fn base_url_hint(profile_name: &str) -> String {
    let variable = match profile_name {
        "anthropic" => Some("ANTHROPIC_BASE_URL"),
        "openai" => Some("OPENAI_BASE_URL"),
        "ollama" => Some("OLLAMA_HOST"),
        _ => None,
    };
    match variable {
        Some(var) => format!("base_url of provider `{profile_name}` or the {var} variable"),
        None => format!("base_url of provider `{profile_name}` in the config file"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_kept_apart_has_connections_of_its_own() {
        let shared = |url: &str| {
            client(url)
                .map(|c| c as *const reqwest::Client as usize)
                .unwrap()
        };
        let ours = shared("http://127.0.0.1:1/v1");
        assert_eq!(
            ours,
            shared("http://127.0.0.1:2/v1"),
            "one client per side and scheme"
        );
        let on = |side| {
            std::thread::spawn(move || {
                keep_connections_apart(side);
                shared("http://127.0.0.1:1/v1")
            })
            .join()
            .unwrap()
        };
        let (turns, runs) = (on(Side::Turns), on(Side::Runs));
        assert_ne!(ours, turns);
        assert_ne!(ours, runs);
        assert_ne!(turns, runs);
        assert_eq!(turns, on(Side::Turns));
    }

    #[test]
    fn urls_join_whatever_the_base_looks_like() {
        let check = |base: &str, expected: &str| {
            assert_eq!(join_url(base, &["/v1"], "/v1/messages"), expected, "{base}");
        };
        check(
            "https://api.anthropic.com",
            "https://api.anthropic.com/v1/messages",
        );
        check(
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1/messages",
        );
        check(
            "https://api.anthropic.com/v1",
            "https://api.anthropic.com/v1/messages",
        );
        check(
            "https://api.anthropic.com/v1/",
            "https://api.anthropic.com/v1/messages",
        );
        check(
            "http://proxy:8080/anthropic",
            "http://proxy:8080/anthropic/v1/messages",
        );
    }

    #[test]
    fn a_query_on_the_base_url_stays_at_the_end() {
        assert_eq!(
            join_url(
                "https://gw.example/openai/v1/?api-version=2024",
                &["/chat/completions"],
                "/chat/completions"
            ),
            "https://gw.example/openai/v1/chat/completions?api-version=2024"
        );
    }

    #[test]
    fn json_bodies_are_told_apart_from_mislabelled_streams() {
        let check = |head: &str, ended: bool, expected: JsonStart| {
            assert_eq!(
                json_start(head.as_bytes(), ended),
                expected,
                "{head:?} {ended}"
            );
        };
        let error = r#"{"error":{"code":"context_length_exceeded"}}"#;
        check(
            error,
            true,
            JsonStart::Document(serde_json::json!({"error": {"code": "context_length_exceeded"}})),
        );
        // It may be the first line of an NDJSON stream until the body ends.
        check(error, false, JsonStart::NeedMore);
        check(&format!("{error}\n"), false, JsonStart::NeedMore);
        check(r#"{"error":{"co"#, false, JsonStart::NeedMore);
        check("  \n", false, JsonStart::NeedMore);
        // A second document: NDJSON under the wrong label.
        check("{\"a\":1}\n{\"b\"", false, JsonStart::Stream);
        // SSE framing under the wrong label.
        check("data: {}\n\n", false, JsonStart::Stream);
        // Left to the decoder, which reports them as it would in a stream.
        check(r#"{"error":"#, true, JsonStart::Stream);
        check("{not json", false, JsonStart::Stream);
        check("", true, JsonStart::Stream);
        let huge = format!("{{\"a\":\"{}", "x".repeat(MAX_ERROR_BODY));
        check(&huge, false, JsonStart::Stream);
    }

    #[test]
    fn endpoints_display_without_credentials() {
        let profile = ProviderProfile {
            name: "anthropic".into(),
            kind: crate::config::ProviderKind::Anthropic,
            base_url: "https://me:hunter2@proxy.example/v1?token=abc".into(),
            api_key_env: None,
            api_key: None,
            default_model: "m".into(),
            context_window: 1000,
            max_output_tokens: 100,
            written: Default::default(),
            images: false,
        };
        let endpoint = Endpoint::new(&profile, &["/v1"], "/v1/messages");
        assert_eq!(
            endpoint.url,
            "https://me:hunter2@proxy.example/v1/messages?token=abc"
        );
        assert_eq!(endpoint.display, "https://proxy.example/v1/messages");
    }

    #[test]
    fn base_url_hints_name_the_variable() {
        assert!(base_url_hint("anthropic").contains("ANTHROPIC_BASE_URL"));
        assert!(base_url_hint("ollama").contains("OLLAMA_HOST"));
        assert!(base_url_hint("my-llama").contains("`my-llama` in the config file"));
    }

    /// A server that reads each request and closes its connection without answering; returns
    /// its base URL and the count of connections it accepted.
    async fn closing_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a port on 127.0.0.1");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head and the body: enough that closing sends a FIN, not a reset.
                while let Ok(read @ 1..) = socket.read(&mut chunk).await {
                    request.extend_from_slice(&chunk[..read]);
                    if request.ends_with(b"}") {
                        break;
                    }
                }
                let _ = socket.shutdown().await;
            }
        });
        (format!("http://{address}"), accepted)
    }

    #[tokio::test]
    async fn a_connection_closed_before_any_answer_is_tried_once_more_on_a_new_one() {
        let (base_url, accepted) = closing_server().await;
        let endpoint = Endpoint {
            url: format!("{base_url}/v1/messages"),
            display: format!("{base_url}/v1/messages"),
            path: "/v1/messages".into(),
            base_url_hint: "base_url".into(),
        };
        let request = endpoint
            .request(reqwest::Method::POST)
            .expect("a request")
            .json(&serde_json::json!({"model": "m"}));
        let err = send(&endpoint, request).await.expect_err("never answered");
        assert_eq!(err.category, ErrorCategory::Network, "{err}");
        assert!(
            err.message
                .contains("connection closed before message completed"),
            "{err}"
        );
        // Sent once more on a new connection, and only once: a server that never answers is
        // reported, not asked forever.
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn the_client_builds_once() {
        let first = client("https://a").expect("the HTTP client builds in tests");
        let second = client("https://b").expect("the HTTP client builds in tests");
        assert!(std::ptr::eq(first, second));
    }
}
