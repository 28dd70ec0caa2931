//! The client and the hub against the small MCP server of the tests (`tests/support/
//! mcp_server.py`, Python with no packages): a call cancelled at the server, a list that
//! changes, a hang and a crash, each through the real stdio transport.

use super::client::{CallError, Connection};
use super::hub::McpHub;
use super::server::ServerState;
use crate::config::{Environment, McpSettings, load_from_str};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mcp_server.py");

fn settings(servers: &str) -> McpSettings {
    let text = format!("[mcp]\nstartup_timeout = \"3s\"\n{servers}");
    let env = Environment::from_pairs([("PATH", std::env::var("PATH").unwrap_or_default())]);
    load_from_str(&text, Path::new("config.toml"), &env)
        .expect("a valid config")
        .mcp
}

fn fake(name: &str, args: &str) -> String {
    format!("[mcp.servers.{name}]\ncommand = \"python3\"\nargs = [\"{FAKE}\"{args}]\n")
}

/// The tool of `tools` called `name`.
fn tool_named(
    tools: &[std::sync::Arc<dyn crate::tools::Tool>],
    name: &str,
) -> std::sync::Arc<dyn crate::tools::Tool> {
    tools
        .iter()
        .find(|t| t.name() == name)
        .cloned()
        .expect("the tool")
}

/// What a tool of these tests runs with, in `dir`.
pub(super) fn context(dir: &Path) -> crate::tools::ToolContext {
    crate::tools::ToolContext {
        project_dir: dir.to_path_buf(),
        cwd: dir.to_path_buf(),
        temp_dir: dir.join("tmp"),
        readable_dirs: Vec::new(),
        tool_timeout: Duration::from_secs(10),
        child_env: Default::default(),
        spool: None,
        agents: None,
        jobs: None,
        repo_maps: None,
    }
}

fn path_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os().filter(|(k, _)| k == "PATH").collect()
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_at_the_server_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("heard.log");
    let settings = settings(&fake(
        "fake",
        &format!(", \"--log\", \"{}\"", log.display()),
    ));
    let connection = Connection::open(&settings.servers[0], path_env())
        .await
        .expect("started");
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.cancel();
    });
    let started = Instant::now();
    let args = serde_json::json!({"seconds": 20})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let answer = connection
        .call("slow", args, Duration::from_secs(30), &cancel)
        .await;
    assert_eq!(answer, Err(CallError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let heard = std::fs::read_to_string(&log).unwrap_or_default();
        if heard.contains("notifications/cancelled") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server was not told: {heard}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    connection.close().await;
}

#[tokio::test]
async fn a_call_past_its_timeout_ends_with_a_timeout() {
    let settings = settings(&format!("{}timeout = \"300ms\"\n", fake("fake", "")));
    let connection = Connection::open(&settings.servers[0], path_env())
        .await
        .expect("started");
    let args = serde_json::json!({"seconds": 20})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let answer = connection
        .call(
            "slow",
            args,
            settings.servers[0].timeout,
            &CancellationToken::new(),
        )
        .await;
    assert!(matches!(answer, Err(CallError::TimedOut(_))), "{answer:?}");
    connection.close().await;
}

/// A hub with the fake server, for a project in a folder of its own.
fn fake_hub() -> (tempfile::TempDir, McpHub) {
    let dir = tempfile::tempdir().expect("temp dir");
    let hub = McpHub::new(
        settings(&fake("fake", "")),
        path_env(),
        Environment::default(),
        dir.path(),
    );
    (dir, hub)
}

#[tokio::test]
async fn a_changed_list_is_read_again_at_the_next_turn() {
    let (dir, hub) = fake_hub();
    let names = |tools: &[std::sync::Arc<dyn crate::tools::Tool>]| -> Vec<String> {
        tools.iter().map(|t| t.name().to_owned()).collect()
    };
    let tools = hub.tools_for(dir.path()).await;
    assert!(!names(&tools).contains(&"mcp__fake__late".to_owned()));
    let change = tools
        .iter()
        .find(|t| t.name() == "mcp__fake__change")
        .expect("the change tool");
    let ctx = context(dir.path());
    let out = change
        .execute(serde_json::json!({}), &ctx, CancellationToken::new())
        .await;
    assert_eq!(out.content, "added");
    // The notification may trail the call's answer.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tools = hub.tools_for(dir.path()).await;
        if names(&tools).contains(&"mcp__fake__late".to_owned()) {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", names(&tools));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Listing the tools again keeps the prompts listed.
    let lines = super::listing::lines(&hub, dir.path())
        .await
        .expect("lines");
    assert!(lines.iter().any(|l| l.contains("prompts: ")), "{lines:?}");
    hub.stop_all().await;
}

#[tokio::test]
async fn a_server_that_hangs_or_crashes_says_so_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = format!(
        "{}timeout = \"1s\"\n{}timeout = \"1s\"\n",
        fake("hangs", ", \"--hang\""),
        fake("garbled", ", \"--garbage\"")
    );
    let mut settings = settings(&text);
    settings.startup_timeout = Duration::from_millis(500);
    let hub = McpHub::new(settings, path_env(), Environment::default(), dir.path());
    let started = Instant::now();
    assert!(hub.tools_for(dir.path()).await.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let states = hub.states(dir.path()).expect("states");
    let hangs = &states
        .iter()
        .find(|(s, _)| s.name == "hangs")
        .expect("hangs")
        .1;
    assert_eq!(*hangs, ServerState::Starting);
    // Generous: a loaded machine starts the fake servers slowly, and only the outcome counts.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states = hub.states(dir.path()).expect("states");
        let state = |name: &str| {
            states
                .iter()
                .find(|(s, _)| s.name == name)
                .map(|(_, state)| state.clone())
                .expect("listed")
        };
        // Each fails in its own time: which first depends on the machine's load.
        match (state("garbled"), state("hangs")) {
            (ServerState::Failed { reason }, ServerState::Failed { .. }) => {
                assert!(reason.contains("handshake"), "{reason}");
                break;
            }
            both => assert!(Instant::now() < deadline, "{both:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hub.stop_all().await;
}

#[tokio::test]
async fn a_server_unused_for_idle_stop_is_stopped_and_starts_again_when_called() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = settings(&fake("fake", ""));
    settings.idle_stop = Duration::from_millis(400);
    let hub = McpHub::new(settings, path_env(), Environment::default(), dir.path());
    let state = || hub.states(dir.path()).expect("states")[0].1.clone();
    let tools = hub.tools_for(dir.path()).await;
    let tool = |name: &str| tool_named(&tools, name);
    let ctx = context(dir.path());
    // A call longer than idle_stop keeps it running.
    let out = tool("mcp__fake__slow")
        .execute(
            serde_json::json!({"seconds": 0.8}),
            &ctx,
            CancellationToken::new(),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        matches!(state(), ServerState::Ready { .. }),
        "{:?}",
        state()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while state() != (ServerState::Resting { tools: 8 }) {
        assert!(Instant::now() < deadline, "still {:?}", state());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A turn still gets its tools, without starting it: a slow server is not lost.
    assert_eq!(hub.tools_for(dir.path()).await.len(), 8);
    assert_eq!(state(), ServerState::Resting { tools: 8 });
    // A call starts it again.
    let out = tool("mcp__fake__echo")
        .execute(
            serde_json::json!({"text": "back"}),
            &ctx,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out.content, "back");
    assert!(
        matches!(state(), ServerState::Ready { .. }),
        "{:?}",
        state()
    );
    hub.stop_all().await;
}

#[tokio::test]
async fn a_prompt_named_in_an_input_is_the_servers_text_and_is_listed() {
    let (dir, hub) = fake_hub();
    let team = crate::domain::Audience::Team;
    let text = hub
        .prompt(dir.path(), "/mcp__fake__greet Ann  very warmly", team)
        .await
        .expect("the prompt");
    assert_eq!(
        text,
        "Say hello to Ann, very warmly.\n\n(Assistant:) Gladly."
    );
    let review = hub.prompt(dir.path(), "/mcp__fake__review", team).await;
    assert_eq!(review.as_deref(), Ok("Review the memo."));
    let missing = hub.prompt(dir.path(), "/mcp__fake__greet", team).await;
    assert_eq!(
        missing,
        Err("/mcp__fake__greet needs name: write /mcp__fake__greet NAME [MOOD]".to_owned())
    );
    let unknown = hub.prompt(dir.path(), "/mcp__fake__nope", team).await;
    assert!(
        unknown
            .as_ref()
            .is_err_and(|e| e.contains("/mcp__fake__greet, /mcp__fake__review")),
        "{unknown:?}"
    );
    let elsewhere = hub.prompt(dir.path(), "/mcp__other__greet", team).await;
    assert!(elsewhere.is_err_and(|e| e.contains("no MCP server other")));
    // A stranger in a chat channel cannot reach a server that is not public.
    let public = crate::domain::Audience::Public;
    let stranger = hub.prompt(dir.path(), "/mcp__fake__review", public).await;
    assert!(stranger.is_err_and(|e| e.contains("no MCP server fake")));

    let lines = super::listing::lines(&hub, dir.path())
        .await
        .expect("lines");
    let text = lines.join("\n");
    assert!(
        text.contains("prompts: /mcp__fake__greet NAME [MOOD], /mcp__fake__review"),
        "{text}"
    );
    assert!(text.contains("resources: memo://one, memo://two"), "{text}");
    hub.stop_all().await;
}

/// The legacy SSE server of the tests, started; its port.
fn sse_server(args: &[&str]) -> (std::process::Child, u16) {
    use std::io::BufRead;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/mcp_sse_server.py"
    );
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the SSE server starts");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("its stdout");
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its port");
    (child, line.trim().parse().expect("a port"))
}

#[tokio::test]
async fn a_legacy_sse_server_is_spoken_to_over_its_event_stream() {
    let (mut server, port) = sse_server(&[]);
    let config =
        format!("[mcp.servers.old]\nurl = \"http://127.0.0.1:{port}/sse\"\ntransport = \"sse\"\n");
    let old = settings(&config);
    let connection = Connection::open(&old.servers[0], Vec::new())
        .await
        .expect("connected");
    let tools = connection.list_tools().await.expect("tools");
    assert_eq!(tools[0].name, "echo");
    let args = serde_json::json!({"text": "hello"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let answer = connection
        .call(
            "echo",
            args,
            Duration::from_secs(10),
            &CancellationToken::new(),
        )
        .await
        .expect("an answer");
    assert_eq!(answer["content"][0]["text"], "sse: hello");
    connection.close().await;
    let _ = server.kill();

    // An endpoint on another origin would get the server's headers: refused.
    let (mut foreign, port) = sse_server(&["--foreign"]);
    let config =
        format!("[mcp.servers.old]\nurl = \"http://127.0.0.1:{port}/sse\"\ntransport = \"sse\"\n");
    let foreign_settings = settings(&config);
    let refused = Connection::open(&foreign_settings.servers[0], Vec::new()).await;
    let err = refused.err().expect("refused");
    assert!(err.contains("another origin"), "{err}");
    let _ = foreign.kill();
}

#[tokio::test]
async fn a_server_that_keeps_dying_under_calls_waits_longer_each_time() {
    let (dir, hub) = fake_hub();
    let tools = hub.tools_for(dir.path()).await;
    let tool = |name: &str| tool_named(&tools, name);
    let ctx = context(dir.path());
    let run = |name: &'static str| {
        let (tool, ctx) = (tool(name), &ctx);
        async move {
            tool.execute(
                serde_json::json!({"text": "x"}),
                ctx,
                CancellationToken::new(),
            )
            .await
        }
    };
    assert!(run("mcp__fake__crash").await.is_error);
    // Within the first pause (1 s) it is not started again.
    assert!(run("mcp__fake__echo").await.is_error);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Started again by the call, which kills it again: the second time in a row, the
    // pause is 2 s.
    assert!(run("mcp__fake__crash").await.is_error);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(run("mcp__fake__echo").await.is_error);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(run("mcp__fake__echo").await.content, "x");
    // An answer ends the run of failures: the next crash pauses 1 s again.
    assert!(run("mcp__fake__crash").await.is_error);
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(run("mcp__fake__echo").await.content, "x");
    hub.stop_all().await;
}

#[tokio::test]
async fn a_server_gone_between_calls_keeps_its_tools_offered_while_it_starts_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = settings(&fake("fake", ", \"--quit-after-call\""));
    // A turn waits for no server: what it is offered is what is there at once.
    settings.startup_timeout = Duration::ZERO;
    let hub = McpHub::new(settings, path_env(), Environment::default(), dir.path());
    let state = || hub.states(dir.path()).expect("states")[0].1.clone();
    hub.tools_for(dir.path()).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !matches!(state(), ServerState::Ready { .. }) {
        assert!(Instant::now() < deadline, "still {:?}", state());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let tools = hub.tools_for(dir.path()).await;
    let out = tool_named(&tools, "mcp__fake__echo")
        .execute(
            serde_json::json!({"text": "x"}),
            &context(dir.path()),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out.content, "x");
    // The server exits after answering; the next turn still has its eight tools.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hub.tools_for(dir.path()).await.len(), 8);
    // And it runs again: a call is answered.
    let tools = hub.tools_for(dir.path()).await;
    let out = tool_named(&tools, "mcp__fake__echo")
        .execute(
            serde_json::json!({"text": "again"}),
            &context(dir.path()),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(out.content, "again");
    hub.stop_all().await;
}
