//! MCP servers through `tern run` against the mock provider: a stdio server of the config
//! and of a project's `.mcp.json` (once approved), its tools offered and called, results in
//! the next request, and a server that fails saying why.

use super::{Cli, NO_TITLES, stderr};
use crate::support::Reply;
use serde_json::json;

/// The small MCP server the tests run (Python, no packages).
const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/mcp_server.py");

fn config_with_fake(extra: &str) -> String {
    format!("{NO_TITLES}\n[mcp.servers.fake]\ncommand = \"python3\"\nargs = [\"{FAKE}\"{extra}]\n")
}

#[test]
fn a_configured_servers_tools_are_offered_called_and_answered() {
    let cli = Cli::new();
    cli.home.write_config(&config_with_fake(""));
    cli.mock.push(Reply::tool_calls([
        ("mcp__fake__echo", json!({"text": "hello through MCP"})),
        ("mcp__fake__add", json!({"a": 2, "b": 3})),
    ]));
    cli.mock.push(Reply::text("Done."));
    let output = cli.run(&["run", "--approve", "all", "use the tools"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let offered = crate::session::offered_tools(&requests[0].body);
    for name in [
        "mcp__fake__echo",
        "mcp__fake__add",
        "mcp__fake__change",
        "mcp__fake__slow",
    ] {
        assert!(offered.iter().any(|o| o == name), "{name} in {offered:?}");
    }
    // Both pages of the server's list, and tern's own tools beside them.
    assert!(offered.iter().any(|o| o == "file_read"));
    let schema = requests[0].body["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "mcp__fake__echo"))
        .map(|tool| tool["input_schema"].clone())
        .expect("the echo tool's schema");
    assert_eq!(schema["type"], "object");
    assert!(schema.get("$schema").is_none(), "{schema}");
    let results = crate::session::tool_result_texts(&requests[1].body);
    assert_eq!(results, ["hello through MCP", "5"]);
}

#[test]
fn a_call_needs_approval_like_a_command_unless_the_server_says_never() {
    let cli = Cli::new();
    cli.home.write_config(&config_with_fake(""));
    cli.mock
        .push(Reply::tool_call("mcp__fake__echo", json!({"text": "x"})));
    cli.mock.push(Reply::text("Refused."));
    let output = cli.run(&["run", "--approve", "edits", "use the tool"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = crate::session::tool_result_texts(&cli.mock.model_requests()[1].body);
    assert_eq!(results.len(), 1);
    assert_ne!(
        results[0], "x",
        "the call ran without approval: {results:?}"
    );

    let cli = Cli::new();
    cli.home
        .write_config(&format!("{}approve = \"never\"\n", config_with_fake("")));
    cli.mock
        .push(Reply::tool_call("mcp__fake__echo", json!({"text": "x"})));
    cli.mock.push(Reply::text("Ran."));
    let output = cli.run(&["run", "--approve", "edits", "use the tool"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = crate::session::tool_result_texts(&cli.mock.model_requests()[1].body);
    assert_eq!(results, ["x"]);
}

#[test]
fn a_server_that_says_always_is_asked_of_a_person_even_under_approve_all() {
    let cli = Cli::new();
    cli.home
        .write_config(&format!("{}approve = \"always\"\n", config_with_fake("")));
    cli.mock
        .push(Reply::tool_call("mcp__fake__echo", json!({"text": "x"})));
    cli.mock.push(Reply::text("Refused."));
    let output = cli.run(&["run", "--approve", "all", "use the tool"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = crate::session::tool_result_texts(&cli.mock.model_requests()[1].body);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("approve = \"always\"") && results[0].contains("approval mode is all"),
        "the refusal names the setting and the mode: {results:?}"
    );
}

/// The images of the tool results in a request (Anthropic's shape): media type and data.
fn result_images(request: &serde_json::Value) -> Vec<(String, String)> {
    let blocks = request["messages"].as_array().into_iter().flatten();
    let results = blocks
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result");
    let parts = results.flat_map(|r| r["content"].as_array().into_iter().flatten());
    parts
        .filter(|p| p["type"] == "image")
        .map(|p| {
            let source = &p["source"];
            (source["media_type"].to_string(), source["data"].to_string())
        })
        .collect()
}

#[test]
fn an_image_in_a_result_goes_to_a_model_that_takes_images_and_stays_in_the_session() {
    let cli = Cli::new();
    cli.home.write_config(&format!(
        "{}[providers.anthropic]\nimages = true\n",
        config_with_fake("")
    ));
    cli.mock
        .push(Reply::tool_call("mcp__fake__picture", json!({})));
    cli.mock.push(Reply::text("A picture."));
    cli.mock.push(Reply::text("Still there."));
    let output = cli.run(&["run", "--approve", "all", "show me"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = cli.run(&["run", "--continue", "and now?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 3);
    let png = ("\"image/png\"".to_owned(), "\"iVBORw0KGgo=\"".to_owned());
    assert_eq!(result_images(&requests[1].body), std::slice::from_ref(&png));
    // The journal keeps where the image is, and the next turn of the session sends it again.
    assert_eq!(result_images(&requests[2].body), [png]);
    let results = crate::session::tool_result_texts(&requests[1].body);
    assert!(
        results[0].starts_with("a picture:\n[image image/png, 8 bytes, saved as "),
        "{results:?}"
    );
}

#[test]
fn a_model_that_does_not_take_images_gets_the_saved_file_named_instead() {
    // The mock runs on this machine: a local server takes no images unless the config says.
    let cli = Cli::new();
    cli.home.write_config(&config_with_fake(""));
    cli.mock
        .push(Reply::tool_call("mcp__fake__picture", json!({})));
    cli.mock.push(Reply::text("A picture."));
    let output = cli.run(&["run", "--approve", "all", "show me"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &cli.mock.model_requests()[1].body;
    assert!(result_images(request).is_empty(), "{request}");
    let results = crate::session::tool_result_texts(request);
    let path = results[0]
        .split_once("saved as ")
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .expect("the saved file named");
    assert_eq!(std::fs::read(path).expect("saved"), b"\x89PNG\r\n\x1a\n");
}

#[test]
fn failures_of_a_call_reach_the_model_as_errors_that_say_why() {
    let cli = Cli::new();
    cli.home.write_config(&config_with_fake(""));
    cli.mock.push(Reply::tool_calls([
        ("mcp__fake__fail", json!({})),
        ("mcp__fake__big", json!({"bytes": 200000})),
    ]));
    cli.mock
        .push(Reply::tool_call("mcp__fake__crash", json!({})));
    cli.mock.push(Reply::text("Done."));
    let output = cli.run(&["run", "--approve", "all", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = cli.mock.model_requests();
    let first = crate::session::tool_result_texts(&requests[1].body);
    assert_eq!(first[0], "it went wrong");
    assert!(first[1].len() < 40_000, "capped: {}", first[1].len());
    let tail = &first[1][first[1].len() - 200..];
    assert!(tail.contains("[the whole result: "), "{tail}");
    let results = crate::session::tool_result_texts(&requests[2].body);
    let crashed = results.last().expect("the crash's result");
    assert!(
        crashed.contains("closed") && crashed.contains("crashing as asked"),
        "the server's last words name the cause: {crashed}"
    );
}

#[test]
fn a_server_that_cannot_start_leaves_the_turn_with_tern_s_own_tools() {
    let cli = Cli::new();
    cli.home.write_config(&format!(
        "{NO_TITLES}\n[mcp]\nstartup_timeout = \"2s\"\n[mcp.servers.broken]\ncommand = \"python3\"\nargs = [\"{FAKE}\", \"--garbage\"]\n[mcp.servers.hangs]\ncommand = \"python3\"\nargs = [\"{FAKE}\", \"--hang\"]\n"
    ));
    cli.mock.push(Reply::text("Fine."));
    let started = std::time::Instant::now();
    let output = cli.run(&["run", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let offered = crate::session::offered_tools(&cli.mock.model_requests()[0].body);
    assert!(
        offered.iter().all(|name| !name.starts_with("mcp__")),
        "{offered:?}"
    );
    assert!(offered.iter().any(|name| name == "file_read"));
}

fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn mcp_add_list_and_remove_edit_the_config_and_show_each_servers_tools() {
    let cli = Cli::new();
    cli.home
        .write_config("# my settings\n[session]\nsidecar_titles = false\n");
    let added = cli.run(&[
        "mcp",
        "add",
        "fake",
        "--env",
        "GREETING=hi",
        "--",
        "python3",
        FAKE,
    ]);
    assert!(added.status.success(), "{}", stderr(&added));
    let config = std::fs::read_to_string(cli.home.config_path()).expect("the config");
    assert!(
        config.starts_with("# my settings\n[session]\nsidecar_titles = false\n"),
        "{config}"
    );
    assert!(config.contains("[mcp.servers.fake]"), "{config}");

    let listed = cli.run(&["mcp", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.contains("fake  config  python3 "), "{text}");
    assert!(
        text.contains("ready, 8 tools: echo, add, slow, crash, big, fail, change, picture"),
        "{text}"
    );

    let again = cli.run(&["mcp", "add", "fake", "--", "python3", FAKE]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("already"), "{}", stderr(&again));
    let bad = cli.run(&["mcp", "add", "a__b", "--", "python3", FAKE]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("the change was not made"),
        "{}",
        stderr(&bad)
    );

    let removed = cli.run(&["mcp", "remove", "fake"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let listed = cli.run(&["mcp", "list"]);
    assert!(
        stdout(&listed).contains("No MCP server is configured"),
        "{}",
        stdout(&listed)
    );
}

#[test]
fn a_projects_server_runs_only_once_approved_and_again_after_it_changes() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    let entry = |extra: &str| {
        json!({"mcpServers": {"fake": {"command": "python3", "args": [FAKE, extra]}}}).to_string()
    };
    cli.home.write_file(".mcp.json", &entry("--first"));
    let mcp_offered = |cli: &Cli| {
        cli.mock.push(Reply::text("ok"));
        let output = cli.run(&["run", "hi"]);
        assert!(output.status.success(), "{}", stderr(&output));
        let requests = cli.mock.model_requests();
        let offered = crate::session::offered_tools(&requests.last().expect("a request").body);
        offered.iter().any(|name| name == "mcp__fake__echo")
    };
    assert!(!mcp_offered(&cli), "not approved yet");
    let listed = stdout(&cli.run(&["mcp", "list"]));
    assert!(listed.contains("fake  .mcp.json"), "{listed}");
    assert!(listed.contains("tern mcp approve fake"), "{listed}");

    let approved = cli.run(&["mcp", "approve", "fake"]);
    assert!(approved.status.success(), "{}", stderr(&approved));
    assert!(mcp_offered(&cli), "approved");

    cli.home.write_file(".mcp.json", &entry("--second"));
    assert!(!mcp_offered(&cli), "changed since it was approved");
}

#[test]
fn a_servers_whole_process_group_stops_with_tern() {
    let cli = Cli::new();
    let pid_file = cli.home.home().join("child.pid");
    cli.home.write_config(&config_with_fake(&format!(
        ", \"--child\", \"{}\"",
        pid_file.display()
    )));
    cli.mock.push(Reply::text("Fine."));
    let output = cli.run(&["run", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let pid = std::fs::read_to_string(&pid_file).expect("the server started its child");
    // Gone, or a zombie waiting to be reaped: either way, no longer running.
    let running = || {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .is_ok_and(|stat| !stat.contains(") Z "))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while running() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server's child {pid} outlived tern"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn doctor_shows_each_server_ready_with_its_tools_or_why_it_failed() {
    let cli = Cli::new();
    cli.home.write_config(&format!(
        "{}[mcp.servers.missing]\ncommand = \"no-such-program-here\"\n",
        config_with_fake("")
    ));
    let output = cli.run(&["doctor"]);
    let text = String::from_utf8_lossy(&output.stdout);
    let section = text
        .split_once("MCP servers of this project")
        .map(|(_, rest)| rest)
        .expect("the MCP section");
    assert!(section.contains("ready, 8 tools: echo"), "{section}");
    assert!(
        section.contains("could not start `no-such-program-here`"),
        "{section}"
    );
}

#[test]
fn a_prompt_command_is_the_servers_prompt_and_mcp_list_asks_the_running_owner() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("heard.log");
    let config = config_with_fake(&format!(", \"--log\", \"{}\"", log.display()));
    let served = crate::channels::Served::start(&config, &[]);
    served.wait_said("serving the sessions", std::time::Duration::from_secs(20));
    served.mock.push(Reply::text("Hello, Ann!"));
    let output = served.tern(&["run", "/mcp__fake__greet Ann cheerfully"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let body = served.mock.model_requests()[0].body.to_string();
    assert!(body.contains("Say hello to Ann, cheerfully."), "{body}");
    assert!(body.contains("(Assistant:) Gladly."), "{body}");
    assert!(!body.contains("/mcp__fake__greet"), "{body}");

    let bad = served.tern(&["run", "/mcp__fake__greet"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("/mcp__fake__greet needs name"),
        "{}",
        stderr(&bad)
    );

    let listed = served.tern(&["mcp", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.contains("ready, 8 tools"), "{text}");
    assert!(
        text.contains("prompts: /mcp__fake__greet NAME [MOOD], /mcp__fake__review"),
        "{text}"
    );
    assert!(text.contains("resources: memo://one, memo://two"), "{text}");
    // The owner's server answered: no second one was started for the listing.
    let heard = std::fs::read_to_string(&log).expect("the server's log");
    assert_eq!(heard.matches("\"initialize\"").count(), 1, "{heard}");
}

#[test]
fn tools_that_change_between_turns_rewrite_tier_b_once_with_a_note() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    for reply in ["One.", "Two.", "Three."] {
        cli.mock.push(Reply::text(reply));
    }
    let first = cli.run(&["run", "first"]);
    assert!(first.status.success(), "{}", stderr(&first));
    // A server joins the session's project: its tools come with the next turn.
    cli.home.write_config(&config_with_fake(""));
    for input in ["second", "third"] {
        let output = cli.run(&["run", "--continue", input]);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let requests = cli.mock.model_requests();
    let system = |at: usize| requests[at].body["system"].to_string();
    let body = |at: usize| requests[at].body.to_string();
    assert!(!system(0).contains("mcp__fake__echo"), "{}", system(0));
    assert!(system(1).contains("- mcp__fake__echo: "), "{}", system(1));
    assert_eq!(system(1), system(2), "tier B is written once");
    let note = "[tools-changed]\\nThe tools changed since the last turn; now also: mcp__fake__";
    assert!(body(1).contains(note), "{}", body(1));
    // Said once: the third request carries it only as part of the second turn.
    assert_eq!(body(2).matches("[tools-changed]").count(), 1, "{}", body(2));
}

#[test]
fn the_interface_names_unapproved_servers_and_mcp_approve_lets_one_run() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    let entry = json!({"mcpServers": {"fake": {"command": "python3", "args": [FAKE]}}});
    cli.home.write_file(".mcp.json", &entry.to_string());
    let tmux = super::tmux::Tmux::start(&cli, &[]);
    let screen = tmux.wait_for("not approved to run here");
    assert!(screen.contains("fake: python3"), "{screen}");
    tmux.type_text("/mcp approve fake");
    tmux.keys(&["Enter"]);
    tmux.wait_for("fake may run in");
    let screen = tmux.wait_for("ready, 8 tools");
    assert!(screen.contains("/mcp__fake__greet NAME [MOOD]"), "{screen}");
}

#[test]
fn print_prompt_shows_the_servers_tools_and_a_prompt_commands_text() {
    let cli = Cli::new();
    cli.home.write_config(&config_with_fake(""));
    let output = cli.run(&["run", "--print-prompt", "/mcp__fake__greet Ann"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("- mcp__fake__echo: "), "{text}");
    assert!(text.contains("Say hello to Ann, plainly."), "{text}");
    assert!(!text.contains("[tools-changed]"), "{text}");
    assert!(cli.mock.model_requests().is_empty(), "nothing sent");
}
