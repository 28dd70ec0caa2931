//! Many tern processes on one store, each in a real terminal: the first owns the store and
//! serves it on its socket, the others are its clients. They share live sessions, and when
//! the owner leaves, one of them takes the store over.

use super::tmux::Tmux;
use super::*;

/// The id of the only session stored, read through whichever tern owns the store.
fn only_session(cli: &Cli) -> String {
    let output = cli.run(&["sessions", "list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    listed[0]["id"].as_str().unwrap().to_owned()
}

#[test]
fn two_terminals_share_a_session_and_the_second_goes_on_when_the_first_quits() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("First answer."));
    cli.mock.push(Reply::text("Shared title"));
    let first = Tmux::start(&cli, &[]);
    first.wait_for("message tern");
    first.type_text("first question");
    first.keys(&["Enter"]);
    first.wait_for("First answer.");
    first.wait_for("Shared title");

    // A second terminal opens the same session through the first: its history is there.
    let id = only_session(&cli);
    let second = Tmux::start(&cli, &["-r", &id]);
    let screen = second.wait_for("First answer.");
    assert!(screen.contains("› first question"), "{screen}");

    // What one terminal sends, the other sees, and either may answer the approval.
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo shared-$((1 + 1))"}),
    ));
    cli.mock.push(Reply::text("Both saw it."));
    second.type_text("second question");
    second.keys(&["Enter"]);
    first.wait_for("› second question");
    first.wait_for("approval needed");
    second.wait_for("approval needed");
    second.keys(&["y"]);
    second.wait_for("Both saw it.");
    let screen = first.wait_for("Both saw it.");
    assert!(screen.contains("shared-2"), "{screen}");
    assert!(
        !screen.contains("approval needed"),
        "the first terminal's box closed: {screen}"
    );

    // A script runs beside them, through the owner, with the output it has alone.
    cli.mock.push(Reply::text("From the script."));
    // The owner names the script's session after its turn.
    cli.mock.push(Reply::text("Script title"));
    let output = cli.run(&["run", "a scripted question"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "From the script.\n");
    cli.mock
        .wait_for_model_requests_blocking(6, Duration::from_secs(20));

    // The first terminal, the owner, quits: the second takes the store over and goes on.
    first.keys(&["C-c"]);
    first.keys(&["C-c"]);
    first.wait_for("[tern exited 0]");
    second.wait_for("this tern owns them now");
    cli.mock.push(Reply::text("Still here."));
    second.type_text("after the handover");
    second.keys(&["Enter"]);
    second.wait_for("Still here.");
    let last = cli.mock.model_requests().pop().unwrap();
    let texts = last.texts();
    assert!(
        texts.iter().any(|t| t == "first question") && texts.iter().any(|t| t == "Both saw it."),
        "the same conversation: {texts:?}"
    );
    second.keys(&["C-d"]);
    second.wait_for("[tern exited 0]");
}
