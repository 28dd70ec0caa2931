//! `tern` with no subcommand: the line-by-line conversation and its slash commands.

use super::*;

#[test]
fn the_line_mode_conversation_compacts_on_request() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::text("Hello there."));
    let output = cli
        .tern(&[])
        .write_stdin("hello\n/compact\n/exit\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Hello there."),
        "{}",
        stdout(&output)
    );
    // Two messages and their note are nothing to compact yet, and it says so.
    assert!(
        stderr(&output).contains("nothing to compact: the conversation is already short"),
        "{}",
        stderr(&output)
    );
    assert_eq!(cli.mock.model_requests().len(), 1);
}

#[test]
fn reset_in_the_line_mode_archives_the_conversation_and_starts_a_new_one() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.repeat(Reply::text("noted"));
    let output = cli
        .tern(&[])
        .write_stdin("first topic\n/reset\nsecond topic\n/exit\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("archived session "),
        "{}",
        stdout(&output)
    );
    let titles = |args: &[&str]| -> Vec<String> {
        let list = cli.run(args);
        let sessions: Value = serde_json::from_str(&stdout(&list)).unwrap();
        sessions
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["title"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(titles(&["sessions", "list", "--json"]), ["second topic"]);
    assert_eq!(
        titles(&["sessions", "list", "--json", "--archived"]),
        ["first topic"]
    );
}

#[test]
fn a_first_message_on_the_command_line_and_continuing_with_c() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::text("First answer."));
    cli.mock.push(Reply::text("Second answer."));
    let output = cli
        .tern(&["say something"])
        .write_stdin("/exit\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("First answer."),
        "{}",
        stdout(&output)
    );
    let output = cli
        .tern(&["-c"])
        .write_stdin("and more\n/exit\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Second answer."),
        "{}",
        stdout(&output)
    );
    let texts = cli.mock.model_requests()[1].texts();
    assert!(
        texts.iter().any(|t| t == "say something") && texts.iter().any(|t| t == "and more"),
        "the same conversation: {texts:?}"
    );
}
