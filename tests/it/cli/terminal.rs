//! The real binary in a real terminal: tmux runs `tern` against the mock provider, keys go in
//! with `send-keys` and the screen comes back with `capture-pane`. `.ci/run` installs tmux.

use super::tmux::Tmux;
use super::*;

#[test]
fn the_terminal_interface_talks_quits_and_shows_the_history_again() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo approved-$((40 + 2))"}),
    ));
    cli.mock.push(Reply::text("The answer is **forty-two**."));
    // After the first turn a side call names the session.
    cli.mock.repeat(Reply::text("The answer question"));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("what is the answer?");
    tmux.keys(&["Enter"]);
    // The command waits for a yes.
    let screen = tmux.wait_for("approval needed");
    assert!(screen.contains("$ echo approved-$((40 + 2))"), "{screen}");
    assert_eq!(
        cli.mock.model_requests().len(),
        1,
        "nothing ran before the answer"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("approved-42");
    let screen = tmux.wait_for("The answer is forty-two.");
    assert!(screen.contains("› what is the answer?"), "{screen}");
    assert!(screen.contains("✓ shell_execute"), "{screen}");
    tmux.wait_for("The answer question");
    tmux.wait_for("ready ·");
    // `!` runs a command of the person's own; `/export` writes the transcript.
    tmux.type_text("!echo from-the-shell");
    tmux.keys(&["Enter"]);
    tmux.wait_for("from-the-shell");
    tmux.type_text("/export transcript.md");
    tmux.keys(&["Enter"]);
    tmux.wait_for("transcript written to");
    let exported = std::fs::read_to_string(cli.home.project().join("transcript.md")).unwrap();
    assert!(
        exported.contains("what is the answer?")
            && exported.contains("The answer is **forty-two**."),
        "{exported}"
    );
    // `/model` has the conversation call the other model from its next turn, in the same
    // process (a model the provider lists).
    cli.mock
        .push_for_model("other-model", Reply::text("Now from the other model."));
    tmux.type_text("/model other-model");
    tmux.keys(&["Enter"]);
    tmux.wait_for("this session talks to other-model (anthropic) from its next turn on");
    let screen = tmux.wait_for("The answer is forty-two.");
    assert!(screen.contains("other-model (anthropic)"), "{screen}");
    tmux.type_text("and now?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Now from the other model.");
    let last = cli.mock.model_requests().pop().unwrap();
    assert_eq!(last.model(), Some("other-model"));
    assert!(
        last.texts().iter().any(|t| t == "what is the answer?"),
        "the same conversation"
    );
    // Shrunk to almost nothing and back: it keeps running.
    tmux.resize(20, 5);
    std::thread::sleep(Duration::from_millis(300));
    tmux.resize(100, 30);
    tmux.wait_for("The answer is forty-two.");
    tmux.keys(&["C-c"]);
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("[tern exited 0]");
    assert!(
        screen.contains("Continue this conversation with: tern -r"),
        "{screen}"
    );

    // `tern -c` opens the same conversation, its history on screen, with the model it was
    // switched to.
    let again = Tmux::start(&cli, &["-c"]);
    let screen = again.wait_for("The answer is forty-two.");
    assert!(screen.contains("› what is the answer?"), "{screen}");
    assert!(screen.contains("other-model (anthropic)"), "{screen}");
    again.keys(&["C-d"]);
    again.wait_for("[tern exited 0]");

    // `tern -r` lists it by its title; Enter opens it.
    let picked = Tmux::start(&cli, &["-r"]);
    let screen = picked.wait_for("Resume a session");
    assert!(screen.contains("The answer question"), "{screen}");
    picked.keys(&["Enter"]);
    let screen = picked.wait_for("The answer is forty-two.");
    assert!(screen.contains("› what is the answer?"), "{screen}");
    picked.keys(&["C-d"]);
    picked.wait_for("[tern exited 0]");
}

#[test]
fn a_first_run_without_a_provider_shows_what_to_set_up() {
    let cli = Cli::new();
    let tmux = Tmux::start_with(&cli, &[], false);
    let screen = tmux.wait_for("set up a model provider");
    assert!(screen.contains("ANTHROPIC_API_KEY"), "{screen}");
    assert!(screen.contains("[providers."), "a minimal config: {screen}");
    // A list item's wrapped lines start under its text, at 100 columns and at 80.
    let rows = assert_hanging(&screen);
    tmux.resize(80, 30);
    let screen = tmux.wait_until("the list drawn again at 80 columns", |screen| {
        list_items(screen).len() > rows
    });
    assert_hanging(&screen);
    // Typing is answered with the keys the screen takes.
    tmux.type_text("hello");
    tmux.wait_for("This screen reads keys, not text");
    tmux.keys(&["q"]);
    // Leaving without a provider fails as `tern run` does.
    let screen = tmux.wait_for("[tern exited 2]");
    assert!(
        screen.contains("tern: no model provider is configured"),
        "said again on leaving: {screen}"
    );
    assert!(
        !cli.home.config_path().exists(),
        "nothing written without asking"
    );
}

/// The rows of the problem's list: its items and the lines they wrap onto.
fn list_items(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .skip_while(|line| !line.starts_with("   - "))
        .take_while(|line| !line.trim().is_empty())
        .collect()
}

/// Panics unless the problem's list items are each on a line that starts `   - ` (the
/// margin and the marker) and some wrap onto lines that start under their text; returns
/// the list's rows.
fn assert_hanging(screen: &str) -> usize {
    let items = list_items(screen);
    let wrapped = items.iter().filter(|line| !line.starts_with("   - "));
    assert!(wrapped.clone().count() > 0, "no item wraps:\n{screen}");
    for line in wrapped {
        assert!(
            line.starts_with("     ") && !line.starts_with("      "),
            "{line:?} is not under its item's text:\n{screen}"
        );
    }
    items.len()
}

#[test]
fn the_first_run_writes_the_example_config_once_and_quits_on_a_second_ctrl_c() {
    let cli = Cli::new();
    let tmux = Tmux::start_with(&cli, &[], false);
    // Offered whether or not a local server answers on this machine.
    tmux.wait_for("c: write an example config");
    tmux.keys(&["c"]);
    tmux.wait_for("Wrote an example config to");
    let path = cli.home.config_path();
    let written = std::fs::read_to_string(&path).expect("the example written");
    assert_eq!(written, tern::config::EXAMPLE_CONFIG);
    // Changed by the person, the file is never written over.
    std::fs::write(&path, "# mine\n").unwrap();
    tmux.keys(&["c"]);
    tmux.wait_for("already exists, so it was left as it is");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
    // One Ctrl-C only says what a second one does, and only for a moment.
    tmux.keys(&["C-c"]);
    tmux.wait_for("press Ctrl-C again to quit");
    let screen = tmux.wait_until("the Ctrl-C hint to go", |screen| {
        !screen.contains("press Ctrl-C again to quit")
    });
    assert!(
        screen.contains("set up a model provider") && !screen.contains("[tern exited"),
        "{screen}"
    );
    tmux.keys(&["C-c", "C-c"]);
    let screen = tmux.wait_for("[tern exited 2]");
    assert!(
        screen.contains("tern: no model provider is configured"),
        "{screen}"
    );
}

#[test]
fn enter_on_a_first_run_with_no_server_to_choose_says_so() {
    let cli = Cli::new();
    // A config file that names no provider: no local server is looked for, so none is
    // offered whatever listens on this machine.
    cli.home.write_config("[models]\n");
    let tmux = Tmux::start_with(&cli, &[], false);
    let screen = tmux.wait_for("set up a model provider");
    assert!(!screen.contains("Found on this machine"), "{screen}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("No local server to use");
    tmux.keys(&["Escape"]);
    tmux.wait_for("[tern exited 2]");
    assert_eq!(
        std::fs::read_to_string(cli.home.config_path()).unwrap(),
        "[models]\n"
    );
}

/// The row of the screen that shows `text`, if any.
fn row_of(screen: &str, text: &str) -> Option<usize> {
    screen.lines().position(|line| line.contains(text))
}

#[test]
fn a_config_file_that_cannot_be_used_is_a_notice_and_the_screen_stays_whole() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Still here."));
    cli.mock.repeat(Reply::text("A title"));
    let tmux = Tmux::start(&cli, &[]);
    let before = tmux.wait_for("message tern");
    let status_row = row_of(&before, "ready ·").expect("a status line");
    cli.home
        .write_config("[session]\nsidecar_titles = false\nidle_timeout = \"soon\"\n");
    let screen = tmux.wait_for("config.toml changed but cannot be used");
    assert!(
        !screen.contains("tern: config.toml"),
        "nothing is printed over the interface:\n{screen}"
    );
    assert!(
        screen.contains("idle_timeout"),
        "the notice names the key:\n{screen}"
    );
    assert_eq!(
        row_of(&screen, "ready ·"),
        Some(status_row),
        "the status line stays where it was:\n{screen}"
    );
    assert!(screen.contains("message tern"), "{screen}");
    // The running configuration goes on, and so does the conversation.
    tmux.type_text("are you there?");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Still here.");
    assert_eq!(cli.mock.model_requests()[0].texts(), ["are you there?"]);
}

#[test]
fn the_status_line_measures_the_context_against_the_window_the_server_said() {
    let cli = Cli::new();
    cli.mock.serve_as(crate::support::Identity::LlamaCpp {
        model: "qwen-mini.gguf".into(),
        n_ctx: 4096,
    });
    cli.mock.push(Reply::text("Hi there.").usage(2048, 0, 0, 0));
    cli.mock.repeat(Reply::text("A greeting"));
    let tmux = Tmux::start_env(&cli, &[], &[("OPENAI_BASE_URL", cli.mock.url("/v1"))]);
    tmux.wait_for("qwen-mini.gguf (openai)");
    tmux.type_text("hello");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Hi there.");
    // 2048 of the server's 4096, not of an assumed 128000.
    tmux.wait_for("ctx 50%");
    tmux.type_text("/status");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("window from the server: llama.cpp /props");
    assert!(screen.contains("context 2048 of 4096"), "{screen}");
}

/// The time a tool line shows, such as `312ms` in `✓ shell_execute sleep 0.3 · 312ms`.
fn tool_time(screen: &str, tool: &str) -> String {
    let line = screen
        .lines()
        .find(|line| line.contains(tool) && line.contains(" · "))
        .unwrap_or_else(|| panic!("no finished {tool} line in:\n{screen}"));
    line.rsplit(" · ").next().unwrap_or("").trim().to_owned()
}

#[test]
fn a_resumed_session_shows_the_context_and_tool_times_it_showed_live() {
    let cli = Cli::new();
    cli.home.write_config(NO_TITLES);
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "sleep 0.3; echo slept"}),
    ));
    // 49,000 read and 1,000 written of Anthropic's 200,000: a quarter of the window.
    cli.mock
        .push(Reply::text("Done sleeping.").usage(49_000, 1_000, 0, 0));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("sleep a bit");
    tmux.keys(&["Enter"]);
    tmux.wait_for("approval needed");
    // The wait for the answer is not the command's time.
    std::thread::sleep(Duration::from_millis(1200));
    tmux.keys(&["y"]);
    tmux.wait_for("Done sleeping.");
    let live = tmux.wait_for("ctx 25%");
    let live_time = tool_time(&live, "shell_execute");
    assert!(
        live_time.ends_with("ms"),
        "the command took under a second: {live}"
    );
    tmux.keys(&["C-d"]);
    tmux.wait_for("[tern exited 0]");

    // `tern -c`: the figures as they were, not `ctx 0%` until the next call.
    let again = Tmux::start(&cli, &["-c"]);
    let screen = again.wait_for("Done sleeping.");
    let screen = if screen.contains("ready ·") {
        screen
    } else {
        again.wait_for("ready ·")
    };
    assert!(screen.contains("ctx 25%"), "{screen}");
    assert_eq!(tool_time(&screen, "shell_execute"), live_time, "{screen}");

    // Interrupted before its call answers: the last known figure stays.
    cli.mock
        .push(Reply::text("never shown").delay_after_headers(Duration::from_secs(20)));
    again.type_text("and again");
    again.keys(&["Enter"]);
    again.wait_for("esc to interrupt");
    again.keys(&["Escape"]);
    let screen = again.wait_for("interrupted");
    let screen = if screen.contains("ready ·") {
        screen
    } else {
        again.wait_for("ready ·")
    };
    assert!(screen.contains("ctx 25%"), "{screen}");
    again.keys(&["C-d"]);
    again.wait_for("[tern exited 0]");
}

#[test]
fn the_interface_runs_the_configured_channels_and_shows_them_on_its_status_line() {
    let cli = Cli::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    cli.home.write_config(&format!(
        "[channels.webhook]\nlisten = \"127.0.0.1:{port}\"\n\
         [channels.webhook.endpoints.ci]\nsecret_env = \"CI_SECRET\"\n"
    ));
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned();
    let env = [
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
        ("ANTHROPIC_BASE_URL", cli.mock.base_url()),
        ("CI_SECRET", secret.clone()),
    ];
    let tui = Tmux::start_env(&cli, &[], &env);
    tui.wait_for("webhook ✓");
    // Another process asks the interface, which owns the sessions and runs the channel.
    let output = cli
        .tern(&["channels", "status"])
        .env("CI_SECRET", &secret)
        .output()
        .unwrap();
    let said = stdout(&output);
    assert!(
        said.contains("webhook: connected (listening on http://127.0.0.1:"),
        "{said}"
    );
    tui.keys(&["C-d"]);
    tui.wait_for("[tern exited 0]");
}
