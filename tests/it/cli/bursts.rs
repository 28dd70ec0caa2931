//! The interface as a terminal program among others, in tmux: keys that arrive in a burst
//! faster than anyone types (typing tools, automation, terminals without paste mode), and
//! Ctrl-Z with the shell's `fg`.

use super::tmux::Tmux;
use super::*;
use std::time::Instant;

/// Numbered words up to exactly `len` characters, so a piece lost or doubled shows.
fn numbered_words(len: usize) -> String {
    let mut text = String::new();
    for n in 1.. {
        if text.len() >= len {
            break;
        }
        text.push_str(&format!("w{n} "));
    }
    text.truncate(len);
    text.trim_end().to_owned()
}

/// The first model request's texts (the session's first input), once the reply is on screen.
fn first_input(cli: &Cli) -> Vec<String> {
    cli.mock
        .model_requests()
        .first()
        .map(|request| request.texts())
        .unwrap_or_default()
}

#[test]
fn a_burst_of_typed_keys_is_handled_whole_without_waiting_for_another_key() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("The burst arrived."));
    cli.mock.repeat(Reply::text("A burst"));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    // 5,000 characters written to the terminal at once, not as a bracketed paste: the input
    // used to stop after the first kilobyte or two until another key came, Enter with it.
    let text = numbered_words(5_000);
    tmux.type_text(&text);
    tmux.keys(&["Enter"]);
    tmux.wait_for("The burst arrived.");
    assert_eq!(first_input(&cli), [text]);
}

#[test]
fn ctrl_z_gives_the_terminal_to_the_shell_and_fg_brings_the_interface_back_whole() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Back and answering."));
    cli.mock.repeat(Reply::text("Suspended"));
    let tmux = Tmux::start_shell(&cli);
    let tern = crate::support::tern_binary().display().to_string();
    tmux.type_text(&tern);
    tmux.keys(&["Enter"]);
    tmux.wait_for("message tern");
    tmux.type_text("half a thought");
    tmux.wait_for("› half a thought");
    tmux.keys(&["C-z"]);
    // The shell says the job stopped and prompts again, on the normal screen.
    let screen = tmux.wait_for("Stopped");
    assert!(!screen.contains("half a thought"), "{screen}");
    tmux.type_text("echo still-$((20 + 22))");
    tmux.keys(&["Enter"]);
    tmux.wait_for("still-42");
    tmux.type_text("fg");
    tmux.keys(&["Enter"]);
    // The whole interface is drawn again (the alternate screen comes back empty), the
    // composer as it was, and it takes keys as before.
    let screen = tmux.wait_for("› half a thought");
    assert!(screen.contains("─────"), "the rule: {screen}");
    assert!(!screen.contains("still-42"), "{screen}");
    tmux.type_text(" and the rest");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Back and answering.");
    assert_eq!(first_input(&cli), ["half a thought and the rest"]);
    tmux.keys(&["C-d"]);
    tmux.wait_until("the shell's prompt after tern", |screen| {
        screen.trim_end().ends_with("shell$")
    });
}

#[test]
fn ctrl_z_leaves_a_tern_that_other_terminals_work_through_running_and_says_why() {
    let cli = Cli::new();
    cli.mock.repeat(Reply::text("Still served."));
    let tmux = Tmux::start_shell(&cli);
    let tern = crate::support::tern_binary().display().to_string();
    tmux.type_text(&tern);
    tmux.keys(&["Enter"]);
    tmux.wait_for("message tern");
    // A second terminal: a client of the first.
    let second = Tmux::start(&cli, &[]);
    second.wait_for("message tern");
    tmux.keys(&["C-z"]);
    let screen = tmux.wait_for("Not suspended: other terminals");
    assert!(!screen.contains("Stopped"), "{screen}");
    let joined: Vec<&str> = screen.lines().map(str::trim).collect();
    assert!(
        joined
            .join(" ")
            .contains("through this tern, and stopping it would stop them. Quit this tern"),
        "the notice reads as one sentence: {screen}"
    );
    // The second terminal is still served.
    second.type_text("are you there");
    second.keys(&["Enter"]);
    second.wait_for("Still served.");
    // Alone again once the second one quits: then Ctrl-Z suspends.
    second.keys(&["C-c"]);
    second.keys(&["C-c"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tmux.screen().contains("Stopped") {
        assert!(
            Instant::now() < deadline,
            "never suspended:\n{}",
            tmux.screen()
        );
        tmux.keys(&["C-z"]);
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.type_text("fg");
    tmux.keys(&["Enter"]);
    tmux.wait_for("message tern");
    tmux.keys(&["C-d"]);
}
