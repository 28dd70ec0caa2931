//! `tern run --print-prompt` and `tern debug prompt`: the next request shown, nothing sent,
//! nothing saved.

use super::*;

#[test]
fn print_prompt_shows_every_layer_and_sends_nothing() {
    let cli = Cli::new();
    cli.home.write_file("CLAUDE.md", "Use tabs.");
    let output = cli.run(&["run", "--print-prompt", "fix the bug"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let order = [
        "first turn of a new session (not saved)",
        "Nothing was sent or saved.",
        "━━ tools: 13 ",
        "━━ tier A · system prompt · cache breakpoint ━━\nYou are tern",
        "# Project instructions (from CLAUDE.md)\n\nUse tabs.",
        "━━ tier B · static context · cache breakpoint ━━\n[tools]\n",
        "[session]\nid: ",
        "━━ tier D · turn nudge (user role) ━━\n[system: turn context from tern",
        "[working-context]\nshell: ",
        "\ngit: worktree ",
        "━━ latest user message · cache breakpoint ━━\nfix the bug\n",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|part| {
            text.find(part)
                .unwrap_or_else(|| panic!("{part:?} in {text}"))
        })
        .collect();
    assert!(positions.is_sorted(), "{text}");
    assert!(cli.mock.model_requests().is_empty(), "nothing is sent");
    let list = cli.run(&["sessions", "list", "--json"]);
    assert_eq!(json_lines(&list), [json!([])], "nothing is saved");
}

#[test]
fn print_prompt_continues_a_session_and_shows_its_history() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Nice to meet you, Ada."));
    let first = cli.run(&["run", "--output-format", "json", "my name is Ada"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let id = json_lines(&first)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let output = cli.run(&["debug", "prompt", "--continue", "what is my name?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("next turn of session "), "{text}");
    assert!(
        text.contains("━━ tier C · history: 3 messages ━━"),
        "{text}"
    );
    assert!(text.contains("\nmy name is Ada\n"), "{text}");
    assert!(
        text.contains("── assistant · cache breakpoint ──\nNice to meet you, Ada.\n"),
        "{text}"
    );
    assert!(text.ends_with("what is my name?\n"), "{text}");
    assert_eq!(
        cli.mock.model_requests().len(),
        1,
        "only the real turn was sent"
    );
    // The session's journal is untouched: showing a turn adds nothing to it.
    let show = cli.run(&["sessions", "show", &id]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(
        stdout(&show).contains("my name is Ada"),
        "{}",
        stdout(&show)
    );
    assert!(
        !stdout(&show).contains("what is my name?"),
        "{}",
        stdout(&show)
    );
}

#[test]
fn print_prompt_as_json_is_the_providers_request_body() {
    let cli = Cli::new();
    let output = cli.run(&["debug", "prompt", "--format", "json", "hello"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let body: Value = serde_json::from_str(&stdout(&output)).expect("one JSON document");
    assert_eq!(body["stream"], true);
    let system = body["system"].as_array().unwrap();
    assert_eq!(system.len(), 2);
    assert!(
        system
            .iter()
            .all(|b| b["cache_control"]["type"] == "ephemeral")
    );
    assert_eq!(body["tools"].as_array().unwrap().len(), 13);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][1]["text"], "hello");
    let same = cli.run(&["run", "--print-prompt", "--output-format", "json", "hello"]);
    let again: Value = serde_json::from_str(&stdout(&same)).expect("one JSON document");
    assert_eq!(again["tools"], body["tools"]);
}

#[test]
fn debug_prompt_shows_the_thin_stack_for_the_public() {
    let cli = Cli::new();
    cli.home.write_file("CLAUDE.md", "Use tabs.");
    let output = cli.run(&["debug", "prompt", "--audience", "public", "hello"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("━━ tools: 0 "), "{text}");
    assert!(!text.contains("Use tabs."), "{text}");
    assert!(!text.contains("[working-context]"), "{text}");
    assert!(text.contains("[current-time]"), "{text}");
}

#[test]
fn print_prompt_needs_no_key() {
    let cli = Cli::new();
    cli.home.write_config(&format!(
        r#"
[models]
provider = "remote"

[providers.remote]
kind = "anthropic"
base_url = "{url}"
api_key_env = "REMOTE_KEY"
model = "remote-model"
"#,
        url = cli.mock.base_url()
    ));
    // Nothing is sent, so a key that is not set yet does not stand in the way.
    let output = cli
        .home
        .tern()
        .args(["run", "--print-prompt", "hi"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("to remote-model (remote)"),
        "{}",
        stdout(&output)
    );
    // A real turn still asks for it.
    let output = cli.home.tern().args(["run", "hi"]).output().unwrap();
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("REMOTE_KEY"),
        "{}",
        stderr(&output)
    );
}
