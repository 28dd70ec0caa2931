//! Hand-written HTTP/1.1, just enough of it: requests (request line, headers, a Content-Length
//! or chunked body) and their responses, by default one per connection and then close.
//! Streams go out chunked, one event per chunk, so pacing, cuts and stalls happen at event
//! boundaries. [`KeepAlive`] modes keep connections open, or say so and then close them the
//! ways real servers do, for the client's connection reuse to be tested.

use super::reply::Pacing;
use super::{Shared, answer};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(super) async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_connection(stream, Arc::clone(&shared)));
            }
            // Out of descriptors or a connection reset before accept: keep serving.
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// What the mock does with a connection once it has answered a request on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeepAlive {
    /// Every response says `connection: close`, and the connection closes after it.
    #[default]
    Off,
    /// Connections stay open and every request on them is answered, as a well-behaved
    /// keep-alive server does.
    On,
    /// Responses advertise keep-alive, but the connection closes right after each one: what
    /// llama.cpp's HTTP server does after a streamed reply (its stream provider reports
    /// "no more data" as a failure, which ends the connection).
    CloseAfterResponse,
    /// Connections stay open after their first response; the next request on one is read and
    /// the connection closed without an answer: what a client meets when it reuses a
    /// connection at the moment the server gives it up.
    DropNextRequest,
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let connection = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
    let mut reader = Reader {
        stream,
        buf: Vec::with_capacity(16 * 1024),
        pos: 0,
    };
    let mut answered = 0;
    let accepted = wall_us();
    loop {
        let mut read = None;
        let outgoing = match reader.request().await {
            Ok(Some(request)) => {
                // A connection's first request counts from its accept, when the mock began
                // to serve it; a later one from when it had been read.
                let since = if answered == 0 { accepted } else { wall_us() };
                read = Some((since, request.target.clone()));
                let mode = shared.lock().keep_alive;
                if answered > 0 && mode == KeepAlive::DropNextRequest {
                    // The whole request was read, so closing sends a clean FIN: the client
                    // sees its connection end before any answer.
                    shared.dropped.fetch_add(1, Ordering::SeqCst);
                    let _ = reader.stream.shutdown().await;
                    return;
                }
                answer(&shared, request, connection)
            }
            Ok(None) => return,
            Err(why) => Outgoing::json(400, json!({ "error": format!("mock provider: {why}") })),
        };
        let mode = shared.lock().keep_alive;
        // A cut or a stall ends the connection whatever the mode: that is what they test.
        let whole = outgoing.pacing.cut_after.is_none() && outgoing.pacing.stall_after.is_none();
        let advertise = mode != KeepAlive::Off && whole;
        // A client that hung up early is its own test's business, not a server failure.
        let timed = shared.lock().timings.is_some();
        let mut timing = read.filter(|_| timed);
        let delivered = deliver(&mut reader.stream, outgoing, advertise, || {
            if let Some((read_at, path)) = timing.take()
                && let Some(file) = &mut shared.lock().timings
            {
                use std::io::Write;
                let _ = writeln!(file, "{read_at} {} {path}", wall_us());
            }
        });
        if delivered.await.is_err() {
            return;
        }
        answered += 1;
        if !advertise || mode == KeepAlive::CloseAfterResponse {
            let _ = reader.stream.shutdown().await;
            return;
        }
    }
}

/// A parsed request before it is recorded.
pub(super) struct Incoming {
    pub(super) method: String,
    /// The request target as sent: path plus optional query.
    pub(super) target: String,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: Vec<u8>,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 256 * 1024 * 1024;

/// A byte buffer over the socket, enough for line- and length-based HTTP parsing; it lives as
/// long as the connection, so nothing a client sent ahead is lost between requests.
struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

impl Reader {
    /// Reads one request: the head up to the blank line, then a Content-Length or chunked
    /// body. `Ok(None)` when the client closed without sending anything more.
    async fn request(&mut self) -> Result<Option<Incoming>, String> {
        // What earlier requests used is dropped, so a long-lived connection's buffer stays small.
        self.buf.drain(..self.pos);
        self.pos = 0;
        let Some(request_line) = self.line_or_eof().await? else {
            return Ok(None);
        };
        let mut parts = request_line.split_whitespace();
        let (Some(method), Some(target), Some(_version)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("malformed request line {request_line:?}"));
        };
        let (method, target) = (method.to_owned(), target.to_owned());
        let mut headers = BTreeMap::<String, String>::new();
        loop {
            let line = self.line().await?;
            if line.is_empty() {
                break;
            }
            let (name, value) = line
                .split_once(':')
                .ok_or(format!("malformed header {line:?}"))?;
            let value = value.trim().to_owned();
            headers
                .entry(name.trim().to_ascii_lowercase())
                .and_modify(|joined| *joined = format!("{joined}, {value}"))
                .or_insert(value);
        }
        let chunked = headers
            .get("transfer-encoding")
            .is_some_and(|te| te.contains("chunked"));
        let body = if chunked {
            let mut body = Vec::new();
            loop {
                let size_line = self.line().await?;
                let size = size_line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size, 16)
                    .map_err(|_| format!("bad chunk size {size:?}"))?;
                if size == 0 {
                    // Trailers end at an empty line. Reading them matters: closing a socket
                    // with unread bytes makes the kernel send a reset that can destroy the
                    // response.
                    while !self.line().await?.is_empty() {}
                    break;
                }
                if body.len() + size > MAX_BODY {
                    return Err(format!("a chunked body over {MAX_BODY} bytes"));
                }
                body.extend_from_slice(&self.exact(size).await?);
                self.line().await?;
            }
            body
        } else {
            let length = headers
                .get("content-length")
                .map_or(Ok(0), |v| v.parse::<usize>());
            let length = length.map_err(|_| "bad content-length".to_owned())?;
            if length > MAX_BODY {
                return Err(format!("body of {length} bytes is over the mock's limit"));
            }
            self.exact(length).await?
        };
        Ok(Some(Incoming {
            method,
            target,
            headers,
            body,
        }))
    }

    async fn fill(&mut self) -> Result<usize, String> {
        self.stream
            .read_buf(&mut self.buf)
            .await
            .map_err(|e| format!("reading the request: {e}"))
    }

    /// The next CRLF-terminated line without its terminator.
    async fn line(&mut self) -> Result<String, String> {
        let line = self.line_or_eof().await?;
        line.ok_or_else(|| "connection closed inside the request".to_owned())
    }

    /// [`line`](Self::line), or `None` when the client closed the connection on a line
    /// boundary (as a client that connects and sends nothing does).
    async fn line_or_eof(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(end) = self.buf[self.pos..].windows(2).position(|w| w == b"\r\n") {
                let line =
                    String::from_utf8_lossy(&self.buf[self.pos..self.pos + end]).into_owned();
                self.pos += end + 2;
                return Ok(Some(line));
            }
            if self.buf.len() - self.pos > MAX_HEAD {
                return Err("request line or header too long".to_owned());
            }
            if self.fill().await? == 0 {
                if self.buf.len() == self.pos {
                    return Ok(None);
                }
                return Err("connection closed inside a line of the request".to_owned());
            }
        }
    }

    async fn exact(&mut self, n: usize) -> Result<Vec<u8>, String> {
        while self.buf.len() - self.pos < n {
            if self.fill().await? == 0 {
                return Err("connection closed inside the request body".to_owned());
            }
        }
        let bytes = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(bytes)
    }
}

/// What goes back on the socket.
pub(super) struct Outgoing {
    pub(super) status: u16,
    pub(super) content_type: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: OutBody,
    pub(super) pacing: Pacing,
}

pub(super) enum OutBody {
    Full(String),
    Events(Vec<String>),
}

impl Outgoing {
    pub(super) fn json(status: u16, body: Value) -> Self {
        Self::full(status, "application/json", body.to_string())
    }

    pub(super) fn full(status: u16, content_type: &str, body: String) -> Self {
        Outgoing {
            status,
            content_type: content_type.to_owned(),
            headers: Vec::new(),
            body: OutBody::Full(body),
            pacing: Pacing::default(),
        }
    }

    /// A 200 whose body streams as one chunk per event.
    pub(super) fn events(content_type: &str, events: Vec<String>) -> Self {
        Outgoing {
            body: OutBody::Events(events),
            ..Self::full(200, content_type, String::new())
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn chunk(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{:x}\r\n", bytes.len()).as_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn wall_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros())
}

/// Writes the response with its pacing; streams are chunked. With `keep_alive` the head
/// advertises keep-alive the way llama.cpp's server does, otherwise `connection: close`;
/// closing is the caller's. `answered` is called once the first write is done.
async fn deliver(
    stream: &mut TcpStream,
    out: Outgoing,
    keep_alive: bool,
    mut answered: impl FnMut(),
) -> std::io::Result<()> {
    let pacing = out.pacing;
    tokio::time::sleep(pacing.before).await;
    let connection = if keep_alive {
        "keep-alive: timeout=5, max=100"
    } else {
        "connection: close"
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\n{connection}\r\n",
        out.status,
        reason_phrase(out.status),
        out.content_type
    );
    match &out.body {
        OutBody::Full(body) => head.push_str(&format!("content-length: {}\r\n", body.len())),
        OutBody::Events(_) => head.push_str("transfer-encoding: chunked\r\n"),
    }
    for (name, value) in &out.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let events = match out.body {
        OutBody::Full(body) => {
            let written = stream
                .write_all(&[head.into_bytes(), body.into_bytes()].concat())
                .await;
            answered();
            return written;
        }
        OutBody::Events(events) => events,
    };
    let limit = pacing
        .cut_after
        .or(pacing.stall_after)
        .unwrap_or(usize::MAX)
        .min(events.len());
    let paced = !pacing.after_headers.is_zero() || !pacing.between.is_zero();
    let mut pending = head.into_bytes();
    if paced {
        stream.write_all(&pending).await?;
        answered();
        pending.clear();
        tokio::time::sleep(pacing.after_headers).await;
    }
    // Events keep their rate on average even when the timer is coarser than `between`.
    let first = tokio::time::Instant::now();
    for (i, event) in events[..limit].iter().enumerate() {
        if paced && i > 0 {
            let due = u32::try_from(i).map_or(Duration::MAX, |i| pacing.between.saturating_mul(i));
            tokio::time::sleep_until(first + due).await;
        }
        chunk(event.as_bytes(), &mut pending);
        if paced {
            stream.write_all(&pending).await?;
            pending.clear();
        }
    }
    if pacing.cut_after.is_none() && pacing.stall_after.is_none() {
        pending.extend_from_slice(b"0\r\n\r\n");
    }
    stream.write_all(&pending).await?;
    answered();
    if pacing.cut_after.is_none() && pacing.stall_after.is_some() {
        // Hold the connection until the client hangs up (or the server stops).
        let mut sink = [0u8; 512];
        while stream.read(&mut sink).await? > 0 {}
    }
    Ok(())
}
