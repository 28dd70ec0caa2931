//! The server under every fake platform, on 127.0.0.1: plain HTTP/1.1 requests answered by a
//! handler, and WebSocket upgrades on the same port handed to a connection handler, each
//! recorded. Written from the platforms' documented protocols; no SDK involved.
#![allow(dead_code)] // Shared by every platform's tests; not each uses all of it.

use futures_util::future::BoxFuture;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;

/// One HTTP request as received.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// An answer to an HTTP request.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

pub type HttpHandler = Arc<dyn Fn(&HttpRequest) -> HttpResponse + Send + Sync>;
pub type WsHandler =
    Arc<dyn Fn(WebSocketStream<TcpStream>, String) -> BoxFuture<'static, ()> + Send + Sync>;

/// The fake, serving until dropped.
pub struct Fake {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<HttpRequest>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Fake {
    /// Serves `http` for plain requests and `ws` for WebSocket upgrades.
    pub fn start(http: HttpHandler, ws: Option<WsHandler>) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the fake");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("the fake binds");
        let addr = listener.local_addr().expect("an address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let (http, ws, recorded) = (http.clone(), ws.clone(), recorded.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, http, ws, recorded).await;
                });
            }
        });
        Self {
            addr,
            requests,
            runtime: Some(runtime),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{path}", self.addr)
    }

    /// The requests to `path` so far.
    pub fn to(&self, path: &str) -> Vec<HttpRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.split('?').next() == Some(path))
            .cloned()
            .collect()
    }

    /// Waits until `check` holds of the requests, or fails after `within`.
    pub fn wait_for(&self, within: Duration, what: &str, check: impl Fn(&[HttpRequest]) -> bool) {
        let deadline = Instant::now() + within;
        loop {
            if check(&self.requests.lock().unwrap()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what} never happened; the fake got: {:#?}",
                self.requests
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|r| format!("{} {} {}", r.method, r.path, r.text()))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn serve(
    mut stream: TcpStream,
    http: HttpHandler,
    ws: Option<WsHandler>,
    recorded: Arc<Mutex<Vec<HttpRequest>>>,
) -> std::io::Result<()> {
    // A WebSocket upgrade is handed over whole: look at the head without reading it.
    let mut peek = [0u8; 2048];
    let n = stream.peek(&mut peek).await?;
    let head = String::from_utf8_lossy(&peek[..n]).to_ascii_lowercase();
    if head.contains("upgrade: websocket")
        && let Some(ws) = ws
    {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let socket = tokio_tungstenite::accept_async(stream)
            .await
            .map_err(std::io::Error::other)?;
        ws(socket, path).await;
        return Ok(());
    }
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        let response = http(&request);
        recorded.lock().unwrap().push(request);
        let mut out = format!(
            "HTTP/1.1 {} X\r\ncontent-length: {}\r\n",
            response.status,
            response.body.len()
        );
        for (name, value) in &response.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(&response.body);
        stream.write_all(out.as_bytes()).await?;
    }
}

async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<HttpRequest>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut lines = head.split("\r\n");
            let first = lines.next().unwrap_or_default();
            let mut parts = first.split_whitespace();
            let method = parts.next().unwrap_or_default().to_owned();
            let path = parts.next().unwrap_or_default().to_owned();
            let headers: BTreeMap<String, String> = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                .collect();
            let length: usize = headers
                .get("content-length")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + length {
                let mut chunk = [0u8; 8192];
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(None);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + length].to_vec();
            buf.drain(..end + 4 + length);
            return Ok(Some(HttpRequest {
                method,
                path,
                headers,
                body,
                at: Instant::now(),
            }));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Sends one HTTP/1.1 request and reads the answer: (status, body); status 0 when nothing
/// listens.
pub fn post(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    // Nothing listening answers status 0.
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return (0, String::new());
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\ncontent-type: application/json\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}
