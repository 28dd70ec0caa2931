//! A one-shot HTTP server on 127.0.0.1 for the providers' unit tests: it accepts a single
//! connection, records the request and answers with canned bytes, so the real client, the
//! real request encoding and the real stream decoding are exercised without a network.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The request the server received.
#[derive(Debug)]
pub(crate) struct Recorded {
    /// The request line, e.g. `POST /v1/messages HTTP/1.1`.
    pub request_line: String,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("the client sent a JSON body")
    }
}

/// Starts a server that answers one request with `response` (a complete HTTP/1.1 response,
/// head and body) and closes the connection. Returns its base URL and the recorded request.
pub(crate) async fn serve_once(response: Vec<u8>) -> (String, JoinHandle<Recorded>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a port on 127.0.0.1");
    let address = listener
        .local_addr()
        .expect("a bound listener has an address");
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("one connection");
        let mut buffer = Vec::new();
        let head_end = loop {
            let mut chunk = [0u8; 4096];
            let read = socket.read(&mut chunk).await.expect("reading the request");
            assert!(read > 0, "the client closed before sending a full request");
            buffer.extend_from_slice(&chunk[..read]);
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            let read = socket.read(&mut chunk).await.expect("reading the body");
            if read == 0 {
                break;
            }
            buffer.extend_from_slice(&chunk[..read]);
        }
        let body = String::from_utf8_lossy(&buffer[head_end..]).into_owned();
        socket
            .write_all(&response)
            .await
            .expect("writing the response");
        let _ = socket.shutdown().await;
        Recorded {
            request_line,
            headers,
            body,
        }
    });
    (format!("http://{address}"), task)
}

/// A 200 response streaming `body` with the given content type, ended by closing the
/// connection.
pub(crate) fn ok_stream(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut response =
        format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n")
            .into_bytes();
    response.extend_from_slice(body);
    response
}

/// An error response with extra headers and a body.
pub(crate) fn error_reply(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(body);
    head.into_bytes()
}

/// Everything `provider` streams for `request`, which must open a stream.
pub(crate) async fn collect_stream(
    provider: &dyn super::Provider,
    request: &super::ChatRequest,
) -> Vec<super::decode::Decoded> {
    use futures_util::StreamExt;
    provider
        .stream(request)
        .await
        .expect("a stream")
        .collect()
        .await
}
