//! Many tern processes on one store, each in a real terminal: the first owns the store and
//! serves it on its socket, the others are its clients. They share live sessions, and when
//! the owner leaves, one of them takes the store over.

use super::tmux::Tmux;
use super::*;
use std::time::Instant;

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

/// A new terminal that said `text` on a session of its own and was answered `answer`.
fn another_said(cli: &Cli, text: &str, answer: &str, requests: usize) -> Tmux {
    cli.mock.push(Reply::text(answer));
    cli.mock.push(Reply::text(format!("{answer} title")));
    let terminal = Tmux::start(cli, &[]);
    terminal.wait_for("message tern");
    terminal.type_text(text);
    terminal.keys(&["Enter"]);
    terminal.wait_for(answer);
    // Its title is asked for before the next terminal speaks, so the replies keep their order.
    cli.mock
        .wait_for_model_requests_blocking(requests, Duration::from_secs(20));
    terminal
}

#[test]
fn three_terminals_work_at_once_and_two_go_on_when_the_first_quits() {
    let cli = Cli::new();
    let first = one_said_hello(&cli);
    let second = another_said(&cli, "from the second", "Second here.", 4);
    let third = another_said(&cli, "from the third", "Third here.", 6);
    let listed = cli.run(&["sessions", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&stdout(&listed)).unwrap();
    assert_eq!(listed.len(), 3, "{listed:?}");

    // The first, the owner, quits: one of the others takes the store over, the other follows
    // it there, and each says so in a line.
    first.keys(&["C-d"]);
    first.wait_for("[tern exited 0]");
    second.wait_for("owns them now");
    third.wait_for("owns them now");
    for (terminal, text, answer) in [
        (&second, "the second again", "Second goes on."),
        (&third, "the third again", "Third goes on."),
    ] {
        cli.mock.push(Reply::text(answer));
        terminal.type_text(text);
        terminal.keys(&["Enter"]);
        let screen = terminal.wait_for(answer);
        assert!(!screen.contains("failed"), "{screen}");
    }
    // Each went on in its own conversation.
    let asked = cli.mock.model_requests();
    let last = asked.last().unwrap().texts();
    assert!(
        last.iter().any(|t| t == "from the third") && !last.iter().any(|t| t == "from the second"),
        "{last:?}"
    );
    for terminal in [second, third] {
        terminal.keys(&["C-d"]);
        terminal.wait_for("[tern exited 0]");
    }
}

/// The pid of the tern process holding the store, from the owner file beside the database.
fn owner_pid(cli: &Cli) -> i32 {
    let path = cli.db().with_extension("redb.owner");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let owner: Value = serde_json::from_str(&text).unwrap();
    owner["pid"].as_i64().unwrap() as i32
}

/// A terminal that said hello, was answered and had its session named.
fn one_said_hello(cli: &Cli) -> Tmux {
    cli.mock.push(Reply::text("Ready."));
    cli.mock.push(Reply::text("A title"));
    let first = Tmux::start(cli, &[]);
    first.wait_for("message tern");
    first.type_text("hello");
    first.keys(&["Enter"]);
    first.wait_for("Ready.");
    cli.mock
        .wait_for_model_requests_blocking(2, Duration::from_secs(20));
    first
}

/// A first terminal that said hello and owns the store, and a second one on the same
/// session; and the session's id.
fn two_on_one_session(cli: &Cli) -> (Tmux, Tmux, String) {
    let first = one_said_hello(cli);
    let id = only_session(cli);
    let second = Tmux::start(cli, &["-r", &id]);
    second.wait_for("Ready.");
    (first, second, id)
}

#[test]
fn an_owner_quitting_mid_turn_hands_the_turn_to_the_terminal_still_watching() {
    let cli = Cli::new();
    let (first, second, _id) = two_on_one_session(&cli);

    // A reply has begun to stream, and stalls, when the first terminal, the owner, quits.
    cli.mock
        .push(Reply::text("Too slow to be waited for, it stops here").stall_after_events(6));
    cli.mock.push(Reply::text("Answered after the handover."));
    second.type_text("a long question");
    second.keys(&["Enter"]);
    cli.mock
        .wait_for_model_requests_blocking(3, Duration::from_secs(20));
    first.wait_for("› a long question");
    second.wait_for("Too slow");
    let quit = Instant::now();
    first.keys(&["C-d"]);
    first.wait_for("[tern exited 0]");
    assert!(
        quit.elapsed() < Duration::from_secs(10),
        "the quitting terminal did not wait for the slow reply: {:?}",
        quit.elapsed()
    );
    // The second terminal took the store over and asked again.
    second.wait_for("this tern owns them now");
    let screen = second.wait_for("Answered after the handover.");
    assert!(!screen.contains("Too slow"), "{screen}");
    let asked = cli.mock.model_requests();
    let last = asked.last().unwrap();
    assert_eq!(
        last.texts()
            .iter()
            .filter(|t| *t == "a long question")
            .count(),
        1,
        "the question once, asked again: {:?}",
        last.texts()
    );
    second.keys(&["C-d"]);
    second.wait_for("[tern exited 0]");
}

/// `tern run PROMPT` started beside the terminals, its output read when it ends.
fn run_in_background(cli: &Cli, prompt: &str) -> std::process::Child {
    let mut run = cli.home.tern_process();
    run.args(["run", prompt])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run.spawn().expect("tern run starts")
}

#[test]
fn a_tern_run_whose_owner_quits_mid_reply_prints_the_answer_asked_again_once() {
    let cli = Cli::new();
    let first = one_said_hello(&cli);
    cli.mock
        .push(Reply::text("Too slow to be waited for, it stops here").stall_after_events(6));
    cli.mock.push(Reply::text("Answered after the handover."));
    cli.mock.push(Reply::text("A run title"));
    let child = run_in_background(&cli, "a long question");
    // The reply has begun to stream through the owner, and stalls, when the owner quits.
    cli.mock
        .wait_for_model_requests_blocking(3, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    first.keys(&["C-d"]);
    first.wait_for("[tern exited 0]");

    // `tern run` took the store over, asked again, and printed that answer alone.
    let output = child.wait_with_output().expect("tern run ends");
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = stdout(&output);
    assert_eq!(
        printed.matches("Answered after the handover.").count(),
        1,
        "{printed}"
    );
    assert!(!printed.contains("Too slow"), "{printed}");
    let asked = cli.mock.model_requests();
    let asking = asked
        .iter()
        .filter(|r| r.texts().iter().any(|t| t == "a long question"))
        .count();
    assert_eq!(asking, 2, "asked, then asked again");
}

#[test]
fn a_tern_run_whose_turn_the_next_owner_cannot_take_up_ends_saying_how_to_go_on() {
    let cli = Cli::new();
    let first = one_said_hello(&cli);
    // The first round's text reached the person, so the round cut after it is not asked
    // again by itself.
    cli.mock
        .push(Reply::text("Let me look.").with_tool_call("glob", json!({"pattern": "*"})));
    cli.mock
        .push(Reply::text("Too slow to be waited for, it stops here").stall_after_events(6));
    let child = run_in_background(&cli, "look around");
    cli.mock
        .wait_for_model_requests_blocking(4, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    let quit = Instant::now();
    first.keys(&["C-d"]);
    first.wait_for("[tern exited 0]");

    let output = child.wait_with_output().expect("tern run ends");
    assert!(
        quit.elapsed() < Duration::from_secs(15),
        "tern run waited for a turn nobody runs: {:?}",
        quit.elapsed()
    );
    assert!(!output.status.success());
    let said = stderr(&output);
    assert!(said.contains("tern run --session"), "{said}");
    let printed = stdout(&output);
    assert!(!printed.contains("Too slow"), "{printed}");
}

#[test]
fn an_owner_killed_outright_is_replaced_and_nothing_acknowledged_is_lost() {
    let cli = Cli::new();
    let (_first, second, id) = two_on_one_session(&cli);

    // Killed in the middle of a turn the second terminal started.
    cli.mock
        .push(Reply::text("Never arrives.").delay_before(Duration::from_secs(30)));
    second.type_text("are you there?");
    second.keys(&["Enter"]);
    cli.mock
        .wait_for_model_requests_blocking(3, Duration::from_secs(20));
    let owner = owner_pid(&cli);
    // SAFETY: a plain kill(2) of the owner process this test started.
    assert_eq!(unsafe { libc::kill(owner, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    second.wait_for("this tern owns them now");
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "{:?}",
        killed.elapsed()
    );
    // It goes on, with the acknowledged question in its history.
    cli.mock.push(Reply::text("Still answering."));
    second.type_text("and now?");
    second.keys(&["Enter"]);
    second.wait_for("Still answering.");
    let last = cli.mock.model_requests().pop().unwrap();
    assert!(
        last.texts().iter().any(|t| t == "are you there?"),
        "{:?}",
        last.texts()
    );
    second.keys(&["C-d"]);
    second.wait_for("[tern exited 0]");
    // The journal reads whole.
    let output = cli.run(&["sessions", "show", &id]);
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(
        shown.contains("are you there?") && shown.contains("Still answering."),
        "{shown}"
    );
}

/// The owner's socket.
fn socket(cli: &Cli) -> std::path::PathBuf {
    cli.home.home().join("data").join("run").join("tern.sock")
}

#[test]
fn a_stale_socket_is_replaced_and_an_owner_of_another_version_is_refused() {
    let cli = Cli::new();
    let path = socket(&cli);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // A socket nobody serves any more, as a killed owner leaves it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    cli.mock.push(Reply::text("Fine."));
    let output = cli.run(&["run", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Fine.\n");

    // An owner that speaks another version: told, never mixed.
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let other = std::thread::spawn(move || {
        use std::io::{Read, Write};
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().unwrap();
            let mut len = [0u8; 4];
            stream.read_exact(&mut len).unwrap();
            let mut hello = vec![0u8; u32::from_be_bytes(len) as usize];
            stream.read_exact(&mut hello).unwrap();
            let ours = br#"{"protocol":1,"version":"0.0.1-other","pid":4242}"#;
            stream
                .write_all(&(ours.len() as u32).to_be_bytes())
                .unwrap();
            stream.write_all(ours).unwrap();
        }
    });
    for args in [&["run", "hi"][..], &["sessions", "list"][..]] {
        let output = cli.run(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.contains("tern 0.0.1-other (pid 4242)") && message.contains("Quit that tern"),
            "{message}"
        );
    }
    other.join().unwrap();
    assert_eq!(
        cli.mock.model_requests().len(),
        1,
        "nothing sent the second time"
    );
}

#[test]
fn the_line_mode_and_the_doctor_work_beside_a_running_interface() {
    let cli = Cli::new();
    let first = one_said_hello(&cli);

    // A piped conversation through the interface's process, on a session of its own.
    cli.mock.push(Reply::text("Piped answer."));
    cli.mock.push(Reply::text("Piped title"));
    let output = cli
        .tern(&[])
        .write_stdin("a piped question\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(said.contains("Piped answer."), "{said}");
    assert!(said.contains("Continue this conversation with"), "{said}");

    let output = cli.run(&["doctor"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout(&output);
    // The running interface holds the file: it copies it for the check, which is done here.
    assert!(
        report.contains("healthy (every page's checksum")
            && report.contains("; checked on a copy the running tern made)"),
        "{report}"
    );
    let output = cli.run(&["doctor", "--deep"]);
    let report = stdout(&output);
    assert!(
        report.contains("healthy") && report.contains("records"),
        "{report}"
    );
    let run_dir = cli.home.home().join("data").join("run");
    let left: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name != "tern.sock")
        .collect();
    assert!(left.is_empty(), "copies left behind: {left:?}");

    // Both sessions are stored, and the interface still answers.
    cli.mock.push(Reply::text("Still mine."));
    first.type_text("and you?");
    first.keys(&["Enter"]);
    first.wait_for("Still mine.");
    let output = cli.run(&["sessions", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
}

#[test]
fn the_picker_of_a_second_terminal_lists_and_opens_through_the_first() {
    let cli = Cli::new();
    let _first = one_said_hello(&cli);
    let picking = Tmux::start(&cli, &["-r"]);
    let screen = picking.wait_for("Resume a session");
    assert!(screen.contains("A title"), "{screen}");
    // Searching reads every session's entry through the owner too.
    picking.type_text("hel");
    picking.wait_for("A title");
    picking.keys(&["Enter"]);
    // The picker closed on the session's transcript, read from the owner.
    picking.wait_for("message tern");
    let screen = picking.wait_for("› hello");
    assert!(screen.contains("Ready."), "{screen}");
    picking.keys(&["C-d"]);
    picking.wait_for("[tern exited 0]");
}

#[test]
fn the_prompt_of_a_session_open_in_an_interface_is_shown_through_it() {
    let cli = Cli::new();
    let _first = one_said_hello(&cli);
    let output = cli.run(&["run", "--print-prompt", "--continue", "what next?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let shown = stdout(&output);
    assert!(shown.contains("next turn of session"), "{shown}");
    assert!(
        shown.contains("hello") && shown.contains("Ready."),
        "the history: {shown}"
    );
    assert!(shown.contains("what next?"), "{shown}");
    assert!(shown.contains("Nothing was sent or saved."), "{shown}");
}

#[test]
fn a_long_prompt_sent_through_the_first_terminal_reaches_the_model_whole() {
    let cli = Cli::new();
    let _first = one_said_hello(&cli);
    // Over the size that travels raw between the processes, under what a message may keep:
    // every byte of it goes to the model as it was written.
    let line = "a \"quoted\" C:\\dir\\file\tand 漢字 with \u{1b}[1m escapes \\n kept\n";
    let prompt = format!("{}the end", line.repeat(100 * 1024 / line.len()));
    cli.mock.push(Reply::text("Read it all."));
    cli.mock.push(Reply::text("Long title"));
    let output = cli
        .tern(&["run", "-"])
        .write_stdin(prompt.as_str())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Read it all."));
    let requests = cli.mock.model_requests();
    let asked = &requests[2].body["messages"];
    let texts: Vec<&str> = asked
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|last| last["content"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect();
    assert!(
        texts.iter().any(|text| text.contains(&prompt)),
        "the prompt did not arrive whole: {} bytes sent, blocks of {:?} bytes",
        prompt.len(),
        texts.iter().map(|t| t.len()).collect::<Vec<_>>()
    );
}
