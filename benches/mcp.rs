//! MCP servers over stdio, in process (release):
//!
//! - `ready`: from launching a server to having its tools listed (the handshake and every
//!   page of `tools/list`), median of 10 launches: the tests' small Python server, and real
//!   servers from the Python registry (`mcp-server-time`, `mcp-server-git`) and npm
//!   (`server-everything`, `server-filesystem`: node's own start dominates those).
//! - `call`: a `tools/call` round trip of an echo tool, p50 and p99 of 500 calls, against
//!   the Python server and `server-everything`; the Python server's own work per call
//!   (parsing the line, a thread, writing the answer) is measured apart by timing it with
//!   no client at all (`python3 … < requests`).
//!
//! Run with `cargo bench --bench mcp` (installs the real servers under
//! `target/mcp-servers/` on first use).

#[allow(unused_imports)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::real_mcp::real_servers;
use tern::config::{Environment, McpServer, load_from_str};
use tern::tools::mcp::client::Connection;
use tokio_util::sync::CancellationToken;

const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mcp_server.py");

fn server(command: &Path, args: &[&str]) -> McpServer {
    let args: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
    let text = format!(
        "[mcp.servers.s]\ncommand = \"{}\"\nargs = [{}]\n",
        command.display(),
        args.join(", ")
    );
    let env = Environment::from_pairs([("PATH", std::env::var("PATH").unwrap_or_default())]);
    load_from_str(&text, Path::new("config.toml"), &env)
        .expect("a valid config")
        .mcp
        .servers
        .remove(0)
}

fn env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| k == "PATH" || k == "HOME")
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn ready(name: &str, server: &McpServer) {
    let mut times = Vec::new();
    let mut tools = 0;
    for _ in 0..10 {
        let start = Instant::now();
        let connection = Connection::open(server, env()).await.expect("started");
        tools = connection.list_tools().await.expect("listed").len();
        times.push(start.elapsed());
        connection.close().await;
    }
    times.sort();
    println!(
        "mcp/ready {name}: median {:.1} ms (min {:.1}, max {:.1}), {tools} tools",
        ms(times[5]),
        ms(times[0]),
        ms(times[9])
    );
}

async fn calls(name: &str, server: &McpServer, tool: &str, args: serde_json::Value) {
    let connection = Connection::open(server, env()).await.expect("started");
    connection.list_tools().await.expect("listed");
    let args = args.as_object().cloned().unwrap_or_default();
    let cancel = CancellationToken::new();
    let mut times = Vec::new();
    for _ in 0..500 {
        let start = Instant::now();
        connection
            .call(tool, args.clone(), Duration::from_secs(10), &cancel)
            .await
            .expect("answered");
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "mcp/call {name} {tool}: p50 {:.3} ms, p99 {:.3} ms",
        ms(times[250]),
        ms(times[495])
    );
    connection.close().await;
}

/// The Python server's own time per call: 500 echo calls piped in with no client.
fn server_alone() {
    let mut input =
        String::from("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}\n");
    for id in 1..=500 {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hi\"}}}}}}\n"
        ));
    }
    let empty = "import sys\nfor line in sys.stdin: pass\n";
    let time = |script: &[&str]| {
        let start = Instant::now();
        let mut child = std::process::Command::new("python3")
            .args(script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("python3");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("written");
        child.wait().expect("ended");
        start.elapsed()
    };
    let whole = time(&[FAKE]);
    let start_only = time(&["-c", empty]);
    println!(
        "mcp/server alone: the Python server's own work per echo call about {:.3} ms",
        ms(whole.saturating_sub(start_only)) / 500.0
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let fake = server(Path::new("python3"), &[FAKE]);
    let real = real_servers();
    let repo = env!("CARGO_MANIFEST_DIR");
    runtime.block_on(async {
        ready("the tests' Python server", &fake).await;
        ready("mcp-server-time", &server(&real.time, &[])).await;
        ready(
            "mcp-server-git",
            &server(&real.git, &["--repository", repo]),
        )
        .await;
        ready("server-everything (node)", &server(&real.everything, &[])).await;
        ready(
            "server-filesystem (node)",
            &server(&real.filesystem, &[repo]),
        )
        .await;
        calls(
            "the tests' Python server",
            &fake,
            "echo",
            serde_json::json!({"text": "hi"}),
        )
        .await;
        calls(
            "server-everything (node)",
            &server(&real.everything, &[]),
            "echo",
            serde_json::json!({"message": "hi"}),
        )
        .await;
    });
    server_alone();
}
