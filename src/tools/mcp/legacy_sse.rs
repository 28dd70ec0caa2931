//! The HTTP+SSE transport of MCP's 2024-11-05 revision, which older servers still speak
//! (`transport = "sse"`, or `"type": "sse"` in a `.mcp.json`): the client opens an event
//! stream with a GET; its first event, `endpoint`, names the address to POST each message
//! to (relative to the stream's, and on the same origin: tern sends its headers nowhere
//! else); the server's messages arrive as `message` events on the stream.
//!
//! Made into the SDK's transport as a sink of the client's messages (posted in order by a
//! task of their own) and a stream of the server's (read by another). A failed post or the
//! stream's end closes both, so the connection is seen closed and started again later.

use crate::config;
use crate::llm::{SseDecoder, SseEvent};
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::PollSender;

/// How many messages may wait in each direction.
const QUEUED: usize = 64;

/// The transport's two halves.
pub type Halves = (
    PollSender<ClientJsonRpcMessage>,
    BoxStream<'static, ServerJsonRpcMessage>,
);

/// Opens the event stream at `url` and waits for its `endpoint` event; a post that takes
/// longer than `timeout` ends the connection. Messages name addresses as
/// [`config::shown_url`] shows them, without what may be secret.
pub async fn connect(
    client: reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Halves, String> {
    let shown = config::shown_url(url);
    let base =
        reqwest::Url::parse(url).map_err(|err| format!("{shown} is not an address: {err}"))?;
    let response = client
        .get(base.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|err| format!("could not open the event stream: {}", err.without_url()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "the event stream was refused ({status}); is this an SSE server? Without \
             `transport = \"sse\"` tern speaks streamable HTTP"
        ));
    }
    let (endpoint_tx, endpoint_rx) = oneshot::channel();
    let (from_server, incoming) = mpsc::channel(QUEUED);
    let reader = tokio::spawn(read_events(response, endpoint_tx, from_server));
    let endpoint = match endpoint_rx.await {
        Ok(endpoint) => endpoint,
        Err(_) => {
            reader.abort();
            return Err("the event stream ended before it named where to post".to_owned());
        }
    };
    let post_to = match base.join(&endpoint) {
        Ok(to) if to.origin() == base.origin() => to,
        Ok(to) => {
            reader.abort();
            return Err(format!(
                "the server asked for messages at {}, another origin than {shown}, where \
                 tern would send its headers; refused. Configure the address under the \
                 host name the server itself uses (127.0.0.1 and localhost differ)",
                config::shown_url(to.as_str())
            ));
        }
        Err(err) => {
            reader.abort();
            return Err(format!(
                "the endpoint the server named is not an address: {err}"
            ));
        }
    };
    let (outgoing, to_server) = mpsc::channel(QUEUED);
    tokio::spawn(post_messages(client, post_to, timeout, to_server, reader));
    let messages = stream::unfold(incoming, |mut incoming| async move {
        incoming.recv().await.map(|message| (message, incoming))
    })
    .boxed();
    Ok((PollSender::new(outgoing), messages))
}

/// Reads the stream: the first `endpoint` event's address goes to `endpoint`, every
/// `message` event's JSON-RPC message to `messages`, until either side ends.
async fn read_events(
    response: reqwest::Response,
    endpoint: oneshot::Sender<String>,
    messages: mpsc::Sender<ServerJsonRpcMessage>,
) {
    let mut endpoint = Some(endpoint);
    let mut decoder = SseDecoder::default();
    let mut bytes = response.bytes_stream();
    let mut events: Vec<SseEvent> = Vec::new();
    while let Some(Ok(chunk)) = bytes.next().await {
        if decoder.feed(&chunk, &mut events).is_err() {
            tracing::warn!("an MCP server's event stream sent a line too long; closing it");
            return;
        }
        for event in events.drain(..) {
            match event.event.as_str() {
                "endpoint" => {
                    if let Some(endpoint) = endpoint.take() {
                        let _ = endpoint.send(event.data.trim().to_owned());
                    }
                }
                "message" => match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
                    Ok(message) => {
                        if messages.send(message).await.is_err() {
                            return;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(%err, "an MCP server sent a message that is not JSON-RPC");
                    }
                },
                _ => {}
            }
        }
    }
}

/// Posts each message in order; the first that fails ends the transport (the reader too).
async fn post_messages(
    client: reqwest::Client,
    to: reqwest::Url,
    timeout: Duration,
    mut messages: mpsc::Receiver<ClientJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
) {
    while let Some(message) = messages.recv().await {
        let posted = client
            .post(to.clone())
            .json(&message)
            .timeout(timeout)
            .send();
        let failed = match posted.await {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("answered {}", response.status())),
            Err(err) => Some(err.without_url().to_string()),
        };
        if let Some(why) = failed {
            tracing::warn!(%why, "could not post a message to an MCP server; closing the connection");
            break;
        }
    }
    reader.abort();
}
