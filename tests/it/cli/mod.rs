//! The real `tern` binary, run end to end in an isolated TERN_HOME against the mock provider.

use crate::support::{MockProvider, Reply, TernHome};
use serde_json::{Value, json};
use std::process::{Output, Stdio};
use std::time::Duration;

/// A home whose environment points tern's built-in Anthropic provider at the mock.
struct Cli {
    home: TernHome,
    mock: MockProvider,
}

/// Config for a line-mode test whose script holds only the conversation: no title call after
/// the first turn (a headless `tern run` never makes one).
const NO_TITLES: &str = "[session]\nsidecar_titles = false\n";

impl Cli {
    fn new() -> Self {
        Self {
            home: TernHome::new(),
            mock: MockProvider::start_blocking(),
        }
    }

    fn tern(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = self.home.tern();
        command
            .args(args)
            .env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", self.mock.base_url());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.tern(args).output().expect("running tern")
    }

    fn db(&self) -> std::path::PathBuf {
        self.home.home().join("data").join("tern.redb")
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn run_prints_the_streamed_answer() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Hello from the model."));
    let output = cli.run(&["run", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Hello from the model.\n");
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.header("x-api-key"), Some("test-key"));
    assert_eq!(request.texts(), ["hi"]);
    assert_eq!(request.nudges().len(), 1);
}

#[test]
fn each_model_request_is_marked_in_the_frame_log_when_one_is_asked_for() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("ok"));
    let log = cli.home.home().join("frames.log");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch")
        .as_micros();
    let output = cli
        .tern(&["run", "hi"])
        .env("TERN_FRAME_LOG", &log)
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    let written = std::fs::read_to_string(&log).expect("the log written");
    let marks: Vec<u128> = written
        .lines()
        .filter_map(|line| line.strip_suffix(" request"))
        .map(|at| at.parse().expect("a time in microseconds"))
        .collect();
    assert_eq!(marks.len(), cli.mock.model_requests().len(), "{written}");
    assert!(marks.iter().all(|at| *at >= before), "{written}");
    // Without the variable, nothing is written anywhere.
    cli.mock.push(Reply::text("ok"));
    assert!(cli.run(&["run", "again"]).status.success());
    assert_eq!(std::fs::read_to_string(&log).expect("the log"), written);
}

#[test]
fn run_reads_the_prompt_from_stdin() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("ok"));
    let output = cli
        .tern(&["run"])
        .write_stdin("prompt from a pipe\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.texts()[0], "prompt from a pipe\n");
}

#[test]
fn json_output_is_one_result_object() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("forty-two").usage(30, 4, 0, 0));
    let output = cli.run(&["run", "--output-format", "json", "answer?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 1);
    let result = &lines[0];
    assert_eq!(result["type"], "result");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "forty-two");
    assert_eq!(result["usage"]["input_tokens"], 30);
    assert!(result["session_id"].as_str().is_some_and(|id| id.len() > 8));
}

#[test]
fn stream_json_emits_one_event_per_line_in_order() {
    let cli = Cli::new();
    cli.home.write_file("a.txt", "AAA\n");
    cli.mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    cli.mock.push(Reply::text("It says AAA."));
    let output = cli.run(&["run", "--output-format", "stream-json", "read a.txt"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let mut types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    // Deltas come in runs of any length; every other event must appear exactly once.
    types.dedup_by(|a, b| *a == "text_delta" && *b == "text_delta");
    assert_eq!(
        types,
        [
            "session",
            "input_accepted",
            "usage",
            "tool_call",
            "tool_result",
            "text_delta",
            "usage",
            "turn_completed"
        ]
    );
    assert!(lines[0]["session_id"].is_string());
    let result = lines.iter().find(|l| l["type"] == "tool_result").unwrap();
    assert!(result["content"].as_str().unwrap().contains("AAA"));
    assert_eq!(lines.last().unwrap()["text"], "It says AAA.");
}

/// A consumer of `stream-json`: the text and thinking it shows, as characters, with what
/// each `retry` or `fallback` discarded taken off their ends. Returns them and the discarded
/// counts, one pair per such line.
fn gather_streamed(lines: &[Value]) -> (String, String, Vec<(usize, usize)>) {
    let (mut text, mut thinking) = (Vec::<char>::new(), Vec::<char>::new());
    let mut discarded = Vec::new();
    for line in lines {
        let piece = || line["text"].as_str().unwrap_or_default().chars();
        match line["type"].as_str() {
            Some("text_delta") => text.extend(piece()),
            Some("thinking_delta") => thinking.extend(piece()),
            Some("retry" | "fallback") => {
                let count = |key: &str| line[key].as_u64().expect(key) as usize;
                let (chars, thinking_chars) =
                    (count("discarded_chars"), count("discarded_thinking_chars"));
                assert!(
                    chars <= text.len() && thinking_chars <= thinking.len(),
                    "{line}"
                );
                text.truncate(text.len() - chars);
                thinking.truncate(thinking.len() - thinking_chars);
                discarded.push((chars, thinking_chars));
            }
            _ => {}
        }
    }
    let text = text.into_iter().collect();
    (text, thinking.into_iter().collect(), discarded)
}

#[test]
fn stream_json_says_how_much_a_retry_discarded() {
    let cli = Cli::new();
    cli.home.write_config("[retry]\nbase_delay_ms = 1\n");
    // Cut after the thinking block and four words of text (events: start, ping, the thinking
    // block in five, a ping, the text block's start, then one event per word).
    cli.mock.push(
        Reply::text("Grüße aus Köln, 🌍 und so weiter bis zum Ende")
            .with_thinking("Überlege kurz", "sig")
            .cut_after_events(13),
    );
    cli.mock
        .push(Reply::text("Ganz neu: ñandú 🦤.").with_thinking("Neu", "sig"));
    let output = cli.run(&["run", "--output-format", "stream-json", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);

    let retry = lines.iter().position(|l| l["type"] == "retry").unwrap();
    let before: String = lines[..retry]
        .iter()
        .filter(|l| l["type"] == "text_delta")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(before, "Grüße aus Köln, 🌍");
    assert_eq!(lines[retry]["category"], "network");
    // Characters, not bytes: the discarded text has five multi-byte ones.
    assert_eq!(lines[retry]["discarded_chars"], before.chars().count());
    assert_ne!(before.chars().count(), before.len());
    assert_eq!(lines[retry]["discarded_thinking_chars"], 13);

    let (text, thinking, discarded) = gather_streamed(&lines);
    assert_eq!(discarded, [(17, 13)]);
    assert_eq!(text, "Ganz neu: ñandú 🦤.");
    assert_eq!(thinking, "Neu");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "turn_completed");
    assert_eq!(last["text"], text.as_str());
}

#[test]
fn a_failed_turn_exits_non_zero_with_its_category() {
    let cli = Cli::new();
    cli.mock.push(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let output = cli.run(&["run", "--output-format", "stream-json", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    let last = json_lines(&output).pop().unwrap();
    assert_eq!(last["type"], "turn_failed");
    assert_eq!(last["category"], "auth");

    cli.mock.push(Reply::error(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let output = cli.run(&["run", "hi"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("auth"), "{}", stderr(&output));
}

#[test]
fn continue_picks_up_the_latest_session_of_the_project() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("Nice to meet you, Ada."));
    cli.mock.push(Reply::text("Your name is Ada."));
    let first = cli.run(&["run", "--output-format", "json", "my name is Ada"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = cli.run(&[
        "run",
        "--continue",
        "--output-format",
        "json",
        "what is my name?",
    ]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(
        json_lines(&first)[0]["session_id"],
        json_lines(&second)[0]["session_id"]
    );

    let request = &cli.mock.model_requests()[1];
    assert_eq!(
        request.texts(),
        [
            "my name is Ada",
            "Nice to meet you, Ada.",
            "what is my name?"
        ]
    );
}

#[test]
fn continue_without_an_earlier_session_says_how_to_start_one() {
    let cli = Cli::new();
    let output = cli.run(&["run", "--continue", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no earlier session"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_resumed_session_keeps_the_model_it_was_started_with() {
    let cli = Cli::new();
    for _ in 0..3 {
        cli.mock.push(Reply::text("ok"));
    }
    assert!(
        cli.run(&["run", "--model", "picked-model", "one"])
            .status
            .success()
    );
    assert!(cli.run(&["run", "--continue", "two"]).status.success());
    let flagged = cli.run(&["run", "--continue", "--model", "another-model", "three"]);
    assert!(flagged.status.success(), "{}", stderr(&flagged));
    let models: Vec<String> = cli
        .mock
        .model_requests()
        .iter()
        .map(|r| r.model().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(models, ["picked-model", "picked-model", "another-model"]);
}

#[test]
fn sessions_list_and_show() {
    let cli = Cli::new();
    cli.home.write_file("a.txt", "AAA\n");
    cli.mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    cli.mock
        .push(Reply::text("It says AAA.").usage(120, 9, 100, 20));
    cli.mock.push(Reply::text("Second session."));
    assert!(cli.run(&["run", "read a.txt please"]).status.success());
    let second = cli.run(&["run", "--model", "other-model", "another one"]);
    assert!(second.status.success(), "{}", stderr(&second));

    let list = cli.run(&["sessions", "list", "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let sessions: Value = serde_json::from_str(&stdout(&list)).unwrap();
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0]["title"], "another one");
    assert_eq!(sessions[1]["title"], "read a.txt please");
    // The index keeps what the picker shows, without reading a transcript.
    let first = &sessions[1];
    assert_eq!(first["message_count"], 3, "the input and two replies");
    assert_eq!(first["first_input"], "read a.txt please");
    assert!(
        first["tokens"]["input_tokens"].as_u64() > Some(120),
        "both calls summed"
    );
    assert_eq!(first["tokens"]["cache_read_input_tokens"], 100);
    assert_eq!(first["compaction_count"], 0);
    assert_eq!(first["lifecycle"], "idle");
    assert!(first["session_dir"].as_str().is_some());
    assert!(first.get("overrides").is_none(), "nothing was asked for");
    assert_eq!(sessions[0]["overrides"]["model"], "other-model");
    assert_eq!(sessions[0]["model"], "other-model");

    let table = stdout(&cli.run(&["sessions", "list"]));
    assert!(
        table.contains("read a.txt please") && table.contains("another one"),
        "{table}"
    );

    let id = sessions[1]["id"].as_str().unwrap();
    let show = cli.run(&["sessions", "show", &id[..13]]);
    assert!(show.status.success(), "{}", stderr(&show));
    let transcript = stdout(&show);
    for expected in [
        "read a.txt please",
        "▸ file_read a.txt",
        "It says AAA.",
        "input 120 (cache read 100, cache write 20), output 9",
        "· system prompt for the personal audience set (",
        "= turn, 2 calls: input ",
        "% of the prompt came from the cache",
    ] {
        assert!(
            transcript.contains(expected),
            "missing {expected:?} in\n{transcript}"
        );
    }
}

#[test]
fn no_provider_configured_explains_how_to_set_one_up() {
    let home = TernHome::new();
    let output = home.tern().args(["run", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("ANTHROPIC_API_KEY") && message.contains("config.toml"),
        "{message}"
    );

    let output = home.tern().output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("ANTHROPIC_API_KEY"));
}

#[test]
fn bad_config_names_file_line_and_key() {
    let cli = Cli::new();
    cli.home
        .write_config("[session]\nfirst_token_timeout = 60\ncompaction_treshold = 0.5\n");
    let output = cli.run(&["run", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("config.toml"), "{message}");
    assert!(
        message.contains("line 3") || message.contains(":3:"),
        "{message}"
    );
    assert!(message.contains("compaction_treshold"), "{message}");
    assert!(cli.mock.requests().is_empty());
}

#[test]
fn sessions_are_listed_through_a_running_tern_and_a_holder_that_serves_nothing_is_named() {
    let cli = Cli::new();
    cli.mock
        .push(Reply::text("slow answer").delay_before(Duration::from_secs(3)));
    let mut holder = cli.home.tern_process();
    holder
        .args(["run", "take your time"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut holder = holder.spawn().unwrap();
    cli.mock
        .wait_for_model_requests_blocking(1, Duration::from_secs(20));

    // The running tern owns the store and serves it: the list comes through it.
    let output = cli.run(&["sessions", "list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed: Vec<Value> = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(listed.len(), 1, "the running session: {listed:?}");
    assert_eq!(listed[0]["first_input"], "take your time");
    holder.kill().unwrap();
    holder.wait().unwrap();
    // The lock goes with its holder, even one killed without a chance to clean up; the
    // socket it left answers nobody and is passed over.
    assert!(cli.run(&["sessions", "list"]).status.success());

    // A process that holds the store without serving it (this test) is named.
    let held = tern::store::Store::open(&cli.db()).unwrap();
    let output = cli.run(&["sessions", "list"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(&std::process::id().to_string()),
        "{message}"
    );
    assert!(message.contains("TERN_HOME"), "{message}");
    drop(held);
}

#[test]
fn a_corrupt_database_is_reported_and_left_untouched() {
    let cli = Cli::new();
    std::fs::create_dir_all(cli.db().parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(cli.db(), &garbage).unwrap();
    let output = cli.run(&["sessions", "list"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("tern.redb") && message.contains("untouched"),
        "{message}"
    );
    assert_eq!(std::fs::read(cli.db()).unwrap(), garbage);
}

#[test]
fn a_killed_run_is_continued_with_its_history_whole() {
    let cli = Cli::new();
    cli.home.write_file("a.txt", "AAA\n");
    cli.mock
        .push(Reply::tool_call("file_read", json!({"path": "a.txt"})).with_text("Looking."));
    cli.mock
        .push(Reply::text("never finished").stall_after_events(2));
    let mut run = cli.home.tern_process();
    run.args(["run", "what is in a.txt?"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut run = run.spawn().unwrap();
    cli.mock
        .wait_for_model_requests_blocking(2, Duration::from_secs(20));
    run.kill().unwrap();
    run.wait().unwrap();

    cli.mock.push(Reply::text("a.txt holds AAA."));
    let output = cli.run(&["run", "--continue", "so?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "a.txt holds AAA.\n");
    let request = &cli.mock.model_requests()[2];
    assert_eq!(request.tool_use_ids().len(), 1);
    assert_eq!(request.tool_use_ids(), request.tool_result_ids());
    let body = request.raw_body.clone();
    assert!(
        body.contains("what is in a.txt?") && body.contains("AAA") && body.contains("so?"),
        "{body}"
    );
}

#[test]
fn version_prints_the_version() {
    let home = TernHome::new();
    let output = home.tern().arg("--version").output().unwrap();
    assert!(output.status.success());
    assert!(stdout(&output).starts_with("tern "), "{}", stdout(&output));
}

#[test]
fn an_unreachable_provider_fails_the_turn_with_a_clear_message() {
    let home = TernHome::new();
    home.write_config("[retry]\nmax_attempts = 2\nbase_delay_ms = 1\nmax_delay_ms = 10\n");
    let port = crate::support::free_port();
    let output = home
        .tern()
        .args(["run", "hi"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("network") && message.contains(&port.to_string()),
        "{message}"
    );
}

/// Runs a two-round tool conversation with only the given variables pointing tern at the mock.
fn tool_loop_with_env(vars: &[(&str, String)]) -> (MockProvider, Output) {
    let home = TernHome::new();
    let mock = MockProvider::start_blocking();
    home.write_file("a.txt", "AAA\n");
    mock.push(Reply::tool_call("file_read", json!({"path": "a.txt"})));
    mock.push(Reply::text("It says AAA."));
    let mut command = home.tern();
    command.args(["run", "read a.txt"]);
    for (name, value) in vars {
        command.env(name, value.replace("{mock}", &mock.base_url()));
    }
    let output = command.output().unwrap();
    (mock, output)
}

#[test]
fn a_local_openai_compatible_server_needs_only_its_base_url() {
    let (mock, output) = tool_loop_with_env(&[("OPENAI_BASE_URL", "{mock}/v1".to_owned())]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "It says AAA.\n");
    let requests = mock.model_requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[1].tool_use_ids(), requests[1].tool_result_ids());
}

#[test]
fn a_local_ollama_needs_only_its_host() {
    let (mock, output) = tool_loop_with_env(&[("OLLAMA_HOST", "{mock}".to_owned())]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "It says AAA.\n");
    let requests = mock.model_requests();
    assert_eq!(requests[0].path, "/api/chat");
    assert!(requests[1].raw_body.contains("AAA"));
}

#[test]
fn openai_with_a_key_sends_it_as_a_bearer_token() {
    let (mock, output) = tool_loop_with_env(&[
        ("OPENAI_API_KEY", "sk-test".to_owned()),
        ("OPENAI_BASE_URL", "{mock}/v1".to_owned()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        mock.model_requests()[0].header("authorization"),
        Some("Bearer sk-test")
    );
}

#[test]
fn approve_edits_allows_file_changes_but_not_commands() {
    let cli = Cli::new();
    cli.home.write_file("a.txt", "old line\n");
    cli.mock.push(Reply::tool_calls([
        (
            "file_edit",
            json!({"path": "a.txt", "old_string": "old", "new_string": "new"}),
        ),
        ("shell_execute", json!({"command": "touch ran"})),
    ]));
    cli.mock.push(Reply::text("Edited."));
    let output = cli.run(&["run", "--approve", "edits", "edit it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(cli.home.read_file("a.txt"), "new line\n");
    assert!(!cli.home.project().join("ran").exists());
    let body = cli.mock.model_requests()[1].raw_body.clone();
    assert!(
        body.contains("-old line") && body.contains("+new line"),
        "the diff reached the model: {body}"
    );
}

#[test]
fn approve_all_runs_commands_in_the_project() {
    let cli = Cli::new();
    cli.mock.push(Reply::tool_call(
        "shell_execute",
        json!({"command": "echo hi > ran.txt && pwd"}),
    ));
    cli.mock.push(Reply::text("Ran."));
    let output = cli.run(&["run", "--approve", "all", "run it"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(cli.home.read_file("ran.txt"), "hi\n");
}

#[test]
fn provider_and_model_flags_choose_the_endpoint_and_model() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("from openai"));
    let output = cli
        .tern(&["run", "--provider", "openai", "--model", "my-model", "hi"])
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", cli.mock.url("/v1"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.model(), Some("my-model"));

    let output = cli.run(&["run", "--provider", "nope", "hi"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("anthropic"),
        "known profiles are listed: {}",
        stderr(&output)
    );
}

#[test]
fn ctrl_c_stops_the_turn_journals_it_and_exits_130() {
    let cli = Cli::new();
    cli.mock
        .push(Reply::text("this never arrives").stall_after_events(1));
    let mut run = cli.home.tern_process();
    run.args(["run", "--output-format", "stream-json", "take forever"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let run = run.spawn().unwrap();
    cli.mock
        .wait_for_model_requests_blocking(1, Duration::from_secs(20));
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child's.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let output = run.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let last = json_lines(&output).pop().unwrap();
    assert_eq!(last["type"], "turn_failed");
    assert_eq!(last["category"], "cancelled");

    cli.mock.push(Reply::text("back again"));
    let output = cli.run(&["run", "--continue", "hello?"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "back again\n");
}

#[test]
fn a_session_continued_from_another_folder_says_where_its_tools_work() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("first"));
    cli.mock.push(Reply::text("second"));
    let first = cli.run(&["run", "--output-format", "json", "hi"]);
    let id = json_lines(&first)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let elsewhere = cli.home.root().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();

    let output = cli
        .tern(&["run", "--session", &id, "again"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let note = stderr(&output);
    assert!(note.contains("its tools work there"), "{note}");
    assert!(
        note.contains(
            &cli.home
                .project()
                .canonicalize()
                .unwrap()
                .display()
                .to_string()
        ),
        "{note}"
    );

    std::fs::remove_dir_all(cli.home.project()).unwrap();
    let output = cli
        .tern(&["run", "--session", &id, "again"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no longer exists"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn output_cut_short_by_the_reader_is_not_an_error() {
    let cli = Cli::new();
    cli.mock.push(Reply::text("ok"));
    let big = "x".repeat(100 * 1024);
    assert!(cli.run(&["run", &big]).status.success());
    let script = format!(
        "\"$0\" sessions show --json {} | head -c 10 >/dev/null; exit ${{PIPESTATUS[0]}}",
        "$1"
    );
    let sessions: Value =
        serde_json::from_str(&stdout(&cli.run(&["sessions", "list", "--json"]))).unwrap();
    let id = sessions[0]["id"].as_str().unwrap();
    let output = std::process::Command::new("bash")
        .args([
            "-c",
            &script,
            crate::support::tern_binary().to_str().unwrap(),
            id,
        ])
        .env("TERN_HOME", cli.home.home())
        .current_dir(cli.home.project())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
}

#[test]
fn a_retried_reply_leaves_only_the_complete_answer_on_stdout() {
    let cli = Cli::new();
    cli.home.write_config("[retry]\nbase_delay_ms = 1\n");
    cli.mock
        .push(Reply::text("PARTIAL ANSWER THAT IS CUT").cut_after_events(4));
    cli.mock.push(Reply::text("complete answer"));
    let output = cli.run(&["run", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "complete answer\n");
    assert!(
        stderr(&output).contains("(attempt 2)"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_provider_without_its_key_names_the_variable_to_set() {
    let home = TernHome::new();
    let output = home
        .tern()
        .args(["run", "--provider", "anthropic", "hi"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&output)
    );
}

/// Config for a primary profile `main` (Anthropic, `main-model`, its key in `MAIN_KEY`) that
/// fails over to `backup-model` on an OpenAI-style profile, after two attempts.
fn with_backup(cli: &Cli) {
    cli.home.write_config(&format!(
        r#"
[models]
provider = "main"
fallback = "backup/backup-model"

[providers.main]
kind = "anthropic"
base_url = "{url}"
api_key_env = "MAIN_KEY"
model = "main-model"

[providers.backup]
kind = "openai"
base_url = "{url}/v1"
model = "backup-model"

[retry]
max_attempts = 2
base_delay_ms = 1
"#,
        url = cli.mock.base_url()
    ));
}

#[test]
fn a_configured_fallback_profile_answers_when_the_primary_keeps_failing() {
    let cli = Cli::new();
    with_backup(&cli);
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    cli.mock
        .push_for_model("main-model", Reply::error(529, overloaded));
    cli.mock
        .push_for_model("main-model", Reply::error(529, overloaded));
    cli.mock
        .push_for_model("backup-model", Reply::text("from the backup"));
    let output = cli
        .tern(&["run", "hi"])
        .env("MAIN_KEY", "k")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "from the backup\n");
    assert!(
        stderr(&output).contains("fallback model backup-model"),
        "{}",
        stderr(&output)
    );
    let paths: Vec<String> = cli
        .mock
        .model_requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(
        paths,
        ["/v1/messages", "/v1/messages", "/v1/chat/completions"]
    );
}

#[test]
fn stream_json_says_how_much_each_retry_and_the_failover_discarded() {
    let cli = Cli::new();
    with_backup(&cli);
    // Both attempts on the primary break off mid-answer (after message_start, a ping, the
    // block's start and two or three words).
    cli.mock.push_for_model(
        "main-model",
        Reply::text("Erster Versuch: à bientôt").cut_after_events(5),
    );
    cli.mock.push_for_model(
        "main-model",
        Reply::text("Zweiter Versuch… später").cut_after_events(6),
    );
    cli.mock
        .push_for_model("backup-model", Reply::text("Vom Ersatz: ¡hola!"));
    let output = cli
        .tern(&["run", "--output-format", "stream-json", "hi"])
        .env("MAIN_KEY", "k")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let lines = json_lines(&output);
    let kinds: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["type"].as_str())
        .filter(|kind| matches!(*kind, "retry" | "fallback"))
        .collect();
    assert_eq!(kinds, ["retry", "fallback"]);
    let (text, _, discarded) = gather_streamed(&lines);
    // "Erster Versuch:" went with the retry, "Zweiter Versuch… später" with the failover.
    assert_eq!(discarded, [(15, 0), (23, 0)]);
    assert_eq!(text, "Vom Ersatz: ¡hola!");
    assert_eq!(lines.last().unwrap()["text"], text.as_str());
}

/// A `tern run` whose turn the loop guard ended: the answer is printed and the session is
/// fine, but the work may be unfinished, so the exit code is neither 0 nor a failure's 1.
const GUARD_ENDED: i32 = 3;

#[test]
fn a_turn_the_loop_guard_ends_prints_its_text_and_says_why() {
    let cli = Cli::new();
    cli.mock
        .repeat(Reply::tool_call("glob", json!({"pattern": "*"})).with_text("Again."));
    let output = cli.run(&["run", "look around"]);
    assert_eq!(
        output.status.code(),
        Some(GUARD_ENDED),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).ends_with("Again.\n"), "{}", stdout(&output));
    assert!(
        stderr(&output).contains(
            "tern: the loop guard ended the turn after 7 rounds of tool calls: it kept \
             repeating tool calls it had already made"
        ),
        "{}",
        stderr(&output)
    );

    let output = cli.run(&["run", "--output-format", "stream-json", "look around"]);
    assert_eq!(output.status.code(), Some(GUARD_ENDED));
    let lines = json_lines(&output);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "turn_completed");
    assert_eq!(last["reason"], "loop_guard");
    assert_eq!(last["cause"], "repeated_calls");
    assert_eq!(last["rounds"], 7);
    assert_eq!(last["text"], "Again.");
    let id = lines[0]["session_id"].as_str().unwrap();
    let show = stdout(&cli.run(&["sessions", "show", id]));
    assert!(
        show.contains("(turn ended: loop_guard(repeated_calls))"),
        "{show}"
    );
}

#[test]
fn a_turn_the_loop_guard_ends_without_text_still_prints_a_line() {
    let cli = Cli::new();
    cli.mock.repeat(Reply::tool_call(
        "file_read",
        json!({"path": "missing.txt"}),
    ));
    let output = cli.run(&["run", "read it"]);
    assert_eq!(
        output.status.code(),
        Some(GUARD_ENDED),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "(no answer: tern ended the turn before the model wrote one)\n"
    );
    let err = stderr(&output);
    assert!(
        err.contains("tern: the loop guard ended the turn after"),
        "{err}"
    );
    let output = cli.run(&["run", "--output-format", "json", "read it"]);
    assert_eq!(output.status.code(), Some(GUARD_ENDED));
    let result = &json_lines(&output)[0];
    assert_eq!(result["is_error"], false);
    assert_eq!(result["stop"]["reason"], "loop_guard");
}

#[test]
fn run_compact_compacts_the_latest_session_and_reports_it() {
    let cli = Cli::new();
    cli.home
        .write_file("big.txt", &format!("{}\n", "x".repeat(59)).repeat(200));
    cli.mock
        .push(Reply::tool_call("file_read", json!({"path": "big.txt"})));
    cli.mock.push(Reply::text("Read it."));
    cli.mock.push(Reply::text("NOTES: a big file was read."));
    cli.home
        .write_config("[session]\nkeep_recent_messages = 2\n");
    let first = cli.run(&["run", "--output-format", "json", "read big.txt"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let compacted = cli.run(&["run", "--continue", "--compact"]);
    assert!(compacted.status.success(), "{}", stderr(&compacted));
    let said = stderr(&compacted);
    assert!(said.contains("compacted the conversation"), "{said}");
    assert!(said.contains("(with notes)"), "{said}");
    let id = json_lines(&first)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let show = stdout(&cli.run(&["sessions", "show", &id]));
    assert!(show.contains("~ compacted: "), "{show}");
    // Without a session to work on, --compact explains what it needs.
    let alone = cli.run(&["run", "--compact", "hi"]);
    assert_eq!(alone.status.code(), Some(2));
    assert!(stderr(&alone).contains("--compact works on an existing session"));
}

#[test]
fn run_refuses_to_ask_with_nobody_to_answer() {
    let cli = Cli::new();
    let asked = cli.run(&["run", "--approve", "ask", "hi"]);
    assert_eq!(asked.status.code(), Some(2), "{}", stderr(&asked));
    let said = stderr(&asked);
    assert!(said.contains("`tern run` has nobody to answer"), "{said}");
    assert!(said.contains("--approve edits"), "{said}");
    assert!(cli.mock.model_requests().is_empty(), "nothing was sent");
}

mod bursts;
mod cleanup;
mod doctor;
mod envelope;
mod help;
mod line_mode;
mod mcp;
mod mcp_real;
mod model_names;
mod outcomes;
mod paste;
mod print_prompt;
mod repair;
mod repo_map;
mod restart;
mod screen_cells;
mod secrets;
mod served;
mod subagents;
mod terminal;
mod terminals;
mod tmux;
