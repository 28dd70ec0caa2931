//! Real MCP servers from npm and the Python registry (installed on first use, see
//! `support::real_mcp`), through `tern run` against the mock provider: listed, their tools
//! called in a session, results in the next request.

use super::{Cli, NO_TITLES, stderr};
use crate::support::Reply;
use crate::support::real_mcp::real_servers;
use serde_json::json;

#[test]
fn tern_mcp_list_starts_four_real_servers_and_names_their_tools() {
    let servers = real_servers();
    let cli = Cli::new();
    let project = cli.home.project();
    cli.home.write_config(&format!(
        "{NO_TITLES}\n[mcp]\nstartup_timeout = \"30s\"\n\
         [mcp.servers.everything]\ncommand = \"{}\"\n\
         [mcp.servers.fs]\ncommand = \"{}\"\nargs = [\"{}\"]\n\
         [mcp.servers.time]\ncommand = \"{}\"\n\
         [mcp.servers.git]\ncommand = \"{}\"\nargs = [\"--repository\", \"{}\"]\n",
        servers.everything.display(),
        servers.filesystem.display(),
        project.display(),
        servers.time.display(),
        servers.git.display(),
        project.display(),
    ));
    let output = cli.run(&["mcp", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for (server, tool) in [
        ("everything", "get-sum"),
        ("fs", "read_text_file"),
        ("time", "get_current_time"),
        ("git", "git_status"),
    ] {
        let block = text
            .split_once(&format!("{server}  config"))
            .map(|(_, rest)| rest.lines().nth(1).unwrap_or(""))
            .unwrap_or("");
        assert!(
            block.contains("ready,") && block.contains(tool),
            "{server}: {text}"
        );
    }
    // A server's prompts and resources are listed, the prompts as their commands.
    assert!(
        text.contains("/mcp__everything__args-prompt CITY [STATE]"),
        "{text}"
    );
    assert!(text.contains("resources: demo://resource/"), "{text}");
}

#[test]
fn a_real_servers_prompt_is_a_command_whose_text_reaches_the_model() {
    let servers = real_servers();
    let cli = Cli::new();
    cli.home.write_config(&format!(
        "{NO_TITLES}\n[mcp]\nstartup_timeout = \"30s\"\n\
         [mcp.servers.everything]\ncommand = \"{}\"\n",
        servers.everything.display(),
    ));
    cli.mock.push(Reply::text("Sunny."));
    let output = cli.run(&["run", "/mcp__everything__args-prompt Lyon Rhône"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let body = cli.mock.model_requests()[0].body.to_string();
    assert!(body.contains("Lyon") && body.contains("Rhône"), "{body}");
    assert!(!body.contains("/mcp__everything__"), "{body}");
}

#[test]
fn real_servers_tools_run_in_a_session_and_their_results_reach_the_model() {
    let servers = real_servers();
    let cli = Cli::new();
    let project = cli.home.project();
    cli.home.write_file("notes.txt", "written by the test\n");
    cli.home.write_config(&format!(
        "{NO_TITLES}\n[mcp]\nstartup_timeout = \"30s\"\n\
         [mcp.servers.everything]\ncommand = \"{}\"\n\
         [mcp.servers.fs]\ncommand = \"{}\"\nargs = [\"{}\"]\n\
         [mcp.servers.time]\ncommand = \"{}\"\n",
        servers.everything.display(),
        servers.filesystem.display(),
        project.display(),
        servers.time.display(),
    ));
    cli.mock.push(Reply::tool_calls([
        ("mcp__everything__get-sum", json!({"a": 20, "b": 22})),
        (
            "mcp__fs__read_text_file",
            json!({"path": project.join("notes.txt").display().to_string()}),
        ),
        (
            "mcp__time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ),
        ("mcp__everything__get-tiny-image", json!({})),
    ]));
    cli.mock.push(Reply::text("Done."));
    let output = cli.run(&["run", "--approve", "all", "use the servers"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let results = crate::session::tool_result_texts(&requests[1].body);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].contains("42"), "{results:?}");
    assert_eq!(results[1].trim(), "written by the test");
    assert!(results[2].contains("21:00"), "{results:?}");
    // An image in a result is kept as a file the result names.
    assert!(
        results[3].contains("[image image/png, ") && results[3].contains(".png]"),
        "{results:?}"
    );
}
