//! The model and context window a server says it serves: asked at each start, used for the
//! requests and for when to compact, shown by `tern doctor`, remembered for the next start,
//! and never put above what the person wrote. The mock answers as each kind of server does.

use super::*;
use crate::support::{Identity, Stop};

/// The llama.cpp model id the mock serves: llama-server names a model by its file.
const GGUF: &str = "../models/qwen2.5-coder-0.5b-instruct-q8_0.gguf";

fn llama_cpp(n_ctx: u64) -> Identity {
    Identity::LlamaCpp {
        model: GGUF.to_owned(),
        n_ctx,
    }
}

/// `tern …` pointed at the mock as the README's `OPENAI_BASE_URL` route does, nothing else.
fn local(cli: &Cli, args: &[&str]) -> assert_cmd::Command {
    let mut command = cli.home.tern();
    command
        .args(args)
        .env("OPENAI_BASE_URL", cli.mock.url("/v1"));
    command
}

fn run_ok(command: &mut assert_cmd::Command) -> Output {
    let output = command.output().expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    output
}

/// `tern doctor`'s line for the default provider.
fn default_provider_line(cli: &Cli) -> String {
    let output = local(cli, &["doctor"])
        .output()
        .expect("running tern doctor");
    let text = stdout(&output);
    text.lines()
        .find(|line| line.starts_with("Default provider:"))
        .unwrap_or_else(|| panic!("no default provider line in:\n{text}"))
        .to_owned()
}

/// The body's output limit, whichever name the wire gives it.
fn output_limit(request: &crate::support::RecordedRequest) -> Option<u64> {
    let body = &request.body;
    body.get("max_tokens")
        .or_else(|| body.get("max_completion_tokens"))
        .or_else(|| body.pointer("/options/num_predict"))
        .and_then(Value::as_u64)
}

#[test]
fn a_llama_cpp_server_names_the_model_and_its_window() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.mock.push(Reply::text("hello"));
    run_ok(&mut local(&cli, &["run", "hi"]));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.model(), Some(GGUF), "the served model, not gpt-4.1");
    assert_eq!(output_limit(request), Some(1024), "a quarter of 4096");
    // Both asked at once, so they may arrive in either order.
    let mut asked = cli.mock.model_questions();
    asked.sort();
    assert_eq!(
        asked,
        ["GET /props", "GET /v1/models"],
        "llama.cpp is settled in one round"
    );
    let line = default_provider_line(&cli);
    assert!(
        line.contains(&format!("model {GGUF}"))
            && line.contains("context window 4096 tokens (from the server: llama.cpp /props)")
            && line.contains("replies up to 1024 tokens"),
        "{line}"
    );
    let sessions: Value =
        serde_json::from_str(&stdout(&cli.run(&["sessions", "list", "--json"]))).unwrap();
    assert_eq!(sessions[0]["model"], GGUF, "the session index names it too");
}

/// Runs a turn that reads a 6 KB file, whose last call reports 3,400 input tokens, then
/// continues the session, against a llama.cpp server with `n_ctx`; returns the system text
/// of each request of the second run.
fn second_run_systems(n_ctx: u64) -> Vec<String> {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(n_ctx));
    cli.home
        .write_file("big.txt", &format!("{}\n", "y".repeat(59)).repeat(100));
    cli.mock
        .push(Reply::tool_call("file_read", json!({"path": "big.txt"})).usage(300, 10, 0, 0));
    cli.mock.push(Reply::text("Read it.").usage(3400, 5, 0, 0));
    run_ok(&mut local(&cli, &["run", "read big.txt"]));
    let before = cli.mock.model_requests().len();
    assert_eq!(before, 2, "no compaction inside the first turn");
    cli.mock.repeat(Reply::text("NOTES or answer"));
    run_ok(&mut local(&cli, &["run", "--continue", "and now?"]));
    cli.mock.model_requests()[before..]
        .iter()
        .map(|r| {
            let system = &r.body["messages"][0];
            assert_eq!(system["role"], "system");
            system["content"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn a_run_compacts_at_three_quarters_of_the_window_the_server_said() {
    // 3,400 tokens pass 0.75 × 4096: the history is compacted (a notes call) first.
    let systems = second_run_systems(4096);
    assert_eq!(systems.len(), 2, "{systems:?}");
    assert!(systems[0].contains("compaction notes"), "{}", systems[0]);
    assert!(!systems[1].contains("compaction notes"));
    // The same conversation in a large window goes straight on.
    let systems = second_run_systems(131_072);
    assert_eq!(systems.len(), 1);
    assert!(!systems[0].contains("compaction notes"));
}

#[test]
fn vllm_says_max_model_len() {
    let cli = Cli::new();
    cli.mock.serve_as(Identity::Vllm {
        model: "Qwen/Qwen2.5-Coder-7B-Instruct".into(),
        max_model_len: 16_384,
    });
    cli.mock.push(Reply::text("hello"));
    run_ok(&mut local(&cli, &["run", "hi"]));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.model(), Some("Qwen/Qwen2.5-Coder-7B-Instruct"));
    assert_eq!(output_limit(request), Some(4096));
    let line = default_provider_line(&cli);
    assert!(
        line.contains(
            "context window 16384 tokens (from the server: vLLM /v1/models max_model_len)"
        ),
        "{line}"
    );
}

#[test]
fn lm_studio_serves_its_loaded_model_with_the_window_it_was_loaded_with() {
    let cli = Cli::new();
    cli.mock.serve_as(Identity::LmStudio {
        loaded: "qwen2.5-7b-instruct".into(),
        loaded_context_length: 8192,
    });
    cli.mock.push(Reply::text("hello"));
    run_ok(&mut local(&cli, &["run", "hi"]));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(
        request.model(),
        Some("qwen2.5-7b-instruct"),
        "the loaded chat model, not the embedding model listed first"
    );
    assert_eq!(output_limit(request), Some(2048));
    let line = default_provider_line(&cli);
    assert!(
        line.contains(
            "8192 tokens (from the server: LM Studio /api/v0/models loaded_context_length)"
        ),
        "{line}"
    );
}

#[test]
fn ollama_gets_the_models_num_ctx_on_its_own_api_and_its_default_on_v1() {
    let cli = Cli::new();
    cli.mock.serve_as(Identity::Ollama {
        model: "qwen2.5-coder:0.5b".into(),
        context_length: 32_768,
        num_ctx: Some(8192),
    });
    cli.mock.push(Reply::text("native"));
    let mut native = cli.home.tern();
    native
        .args(["run", "hi"])
        .env("OLLAMA_HOST", cli.mock.base_url());
    run_ok(&mut native);
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.path, "/api/chat");
    assert_eq!(request.model(), Some("qwen2.5-coder:0.5b"));
    assert_eq!(request.body["options"]["num_ctx"], 8192, "the Modelfile's");
    assert_eq!(request.body["options"]["num_predict"], 2048);

    // Without num_ctx, `/v1` gets Ollama's own default, which tern cannot change there.
    cli.mock.serve_as(Identity::Ollama {
        model: "qwen2.5-coder:0.5b".into(),
        context_length: 32_768,
        num_ctx: None,
    });
    cli.mock.push(Reply::text("compatible"));
    run_ok(&mut local(&cli, &["run", "hi"]));
    let request = cli.mock.model_requests().pop().unwrap();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.model(), Some("qwen2.5-coder:0.5b"));
    assert_eq!(output_limit(&request), Some(1024), "a quarter of 4096");
    let line = default_provider_line(&cli);
    assert!(
        line.contains("context window 4096 tokens (from the server: Ollama /api/show: no num_ctx"),
        "{line}"
    );
}

#[test]
fn a_configured_window_and_model_win_and_nothing_is_asked() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.home.write_config(&format!(
        "[models]\nprovider = \"local\"\n\n[providers.local]\nkind = \"openai\"\n\
         base_url = \"{}\"\nmodel = \"mine\"\ncontext_window = 65536\n",
        cli.mock.url("/v1")
    ));
    cli.mock.push(Reply::text("hello"));
    run_ok(&mut local(&cli, &["run", "hi"]));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.model(), Some("mine"));
    assert_eq!(output_limit(request), Some(8192));
    assert!(
        cli.mock.model_questions().is_empty(),
        "nothing to learn: {:?}",
        cli.mock.model_questions()
    );
    let line = default_provider_line(&cli);
    assert!(
        line.contains("model mine, context window 65536 tokens (configured)"),
        "{line}"
    );

    // A written model with an unwritten window: the server is asked for that model's window.
    cli.home.write_config(&format!(
        "[models]\nprovider = \"local\"\n\n[providers.local]\nkind = \"openai\"\n\
         base_url = \"{}\"\nmodel = \"mine\"\n",
        cli.mock.url("/v1")
    ));
    let line = default_provider_line(&cli);
    assert!(
        line.contains("model mine, context window 4096 tokens (from the server"),
        "{line}"
    );
}

#[test]
fn a_server_that_does_not_answer_leaves_the_assumed_window_and_says_so() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.mock.delay_model_questions(Duration::from_secs(6));
    cli.mock.push(Reply::text("hello"));
    let started = std::time::Instant::now();
    run_ok(&mut local(&cli, &["run", "hi"]));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the run waited {:?} for the server",
        started.elapsed()
    );
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.model(), Some("gpt-4.1"), "the assumed name stays");
    assert_eq!(output_limit(request), Some(8192), "for the assumed 128000");
    let line = default_provider_line(&cli);
    assert!(
        line.contains("context window 128000 tokens (assumed: the server did not answer"),
        "{line}"
    );
}

#[test]
fn what_the_server_said_is_remembered_and_replaced_when_it_changes() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.mock.repeat(Reply::text("ok"));
    run_ok(&mut local(&cli, &["run", "one"]));
    let cache = cli.home.home().join("data/served.json");
    let remembered: Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).expect("the cache is JSON");
    let entry = &remembered["servers"][format!("openai {} *", cli.mock.url("/v1"))];
    assert_eq!(entry["window"], 4096, "{remembered}");
    assert_eq!(entry["model"], GGUF);

    // The server is slow to say this time: the remembered window and model are used.
    cli.mock.delay_model_questions(Duration::from_secs(6));
    run_ok(&mut local(&cli, &["run", "two"]));
    let request = cli.mock.model_requests().pop().unwrap();
    assert_eq!(request.model(), Some(GGUF));
    assert_eq!(output_limit(&request), Some(1024));
    let line = default_provider_line(&cli);
    assert!(
        line.contains("4096 tokens (from the server: llama.cpp /props, remembered from"),
        "{line}"
    );

    // Started again with `-c 8192`: the new answer is used and remembered.
    cli.mock.delay_model_questions(Duration::ZERO);
    cli.mock.serve_as(llama_cpp(8192));
    run_ok(&mut local(&cli, &["run", "three"]));
    let request = cli.mock.model_requests().pop().unwrap();
    assert_eq!(output_limit(&request), Some(2048));
    let remembered: Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    let entry = &remembered["servers"][format!("openai {} *", cli.mock.url("/v1"))];
    assert_eq!(entry["window"], 8192);
    let line = default_provider_line(&cli);
    assert!(
        line.contains("8192 tokens (from the server: llama.cpp /props)"),
        "{line}"
    );
}

#[test]
fn the_line_mode_status_shows_the_window_and_where_it_came_from() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    let output = local(&cli, &[])
        .write_stdin("/status\n/exit\n")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains(&format!("tern · {GGUF} · session")), "{text}");
    assert!(
        text.contains("context window 4096 tokens (from the server: llama.cpp /props)"),
        "{text}"
    );
}

#[test]
fn a_call_a_small_model_wrote_as_text_is_run_as_a_call() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.home
        .write_file("README.md", "# inventory\nA tiny inventory tool.\n");
    // As Qwen2.5-Coder 0.5B answers through llama-server: the call in a fence, as text.
    cli.mock.push(Reply::text(
        "```json\n{\n  \"name\": \"file_read\",\n  \"arguments\": {\"path\": \"README.md\"}\n}\n```",
    ));
    cli.mock.push(Reply::text("It is a tiny inventory tool."));
    let output = run_ok(&mut local(
        &cli,
        &["run", "--output-format", "stream-json", "what is this?"],
    ));
    let events: Vec<Value> = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let voided = events
        .iter()
        .position(|e| e["type"] == "text_read_as_calls")
        .expect("the streamed text is voided");
    let streamed: usize = events[..voided]
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap_or("").chars().count())
        .sum();
    assert!(streamed > 0);
    assert_eq!(events[voided]["discarded_chars"], streamed);
    let call = events
        .iter()
        .skip(voided)
        .find(|e| e["type"] == "tool_call")
        .expect("a tool_call event after it");
    assert_eq!(call["name"], "file_read");
    assert_eq!(call["input"]["path"], "README.md");
    let requests = cli.mock.model_requests();
    assert_eq!(requests.len(), 2);
    let (calls, results) = (requests[1].tool_use_ids(), requests[1].tool_result_ids());
    assert_eq!(calls.len(), 1, "the call goes back as a call");
    assert_eq!(calls, results, "paired with its result");
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("A tiny inventory tool."),
        "the file's text went back to the model"
    );
    let end = events.last().expect("events");
    assert_eq!(end["type"], "turn_completed");
    assert_eq!(end["text"], "It is a tiny inventory tool.");
}

#[test]
fn llama_cpp_s_anthropic_endpoint_is_asked_its_window_and_keeps_the_model_named() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.mock.push(Reply::text("hello"));
    let output = cli
        .home
        .tern()
        .args(["run", "hi"])
        .env("ANTHROPIC_API_KEY", "local")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &cli.mock.model_requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_ne!(request.model(), Some(GGUF), "the model named stays");
    assert_eq!(output_limit(request), Some(1024), "a quarter of 4096");
    assert_eq!(cli.mock.model_questions(), ["GET /props"]);
}

#[test]
fn a_call_written_as_text_on_llama_cpp_s_anthropic_endpoint_is_run() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.home.write_file("notes.txt", "remember the milk\n");
    cli.mock.push(Reply::text(
        "<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"notes.txt\"}}\n</tool_call>",
    ));
    cli.mock.push(Reply::text("It says to remember the milk."));
    let output = cli
        .home
        .tern()
        .args(["run", "what do my notes say?"])
        .env("ANTHROPIC_API_KEY", "local")
        .env("ANTHROPIC_BASE_URL", cli.mock.base_url())
        .output()
        .expect("running tern");
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "It says to remember the milk.\n");
    let second = &cli.mock.model_requests()[1];
    assert_eq!(second.tool_use_ids(), second.tool_result_ids());
    assert!(second.raw_body.contains("remember the milk"));
}

#[test]
fn calls_written_as_text_until_the_output_limit_run_the_finished_ones() {
    let cli = Cli::new();
    cli.mock.serve_as(llama_cpp(4096));
    cli.home.write_file("README.md", "# inventory\n");
    // As the 0.5B model does in the interface: call after call until the limit cuts it,
    // one of them naming a tool that does not exist.
    cli.mock.push(
        Reply::text(
            "{\"name\": \"file_read\", \"arguments\": {\"path\": \"README.md\"}} \
             {\"name\": \"git\", \"arguments\": {\"branch\": \"master\"}} \
             {\"name\": \"glob\", \"argu",
        )
        .stop(Stop::MaxTokens)
        .usage(1_200, 1_024, 0, 0),
    );
    cli.mock.push(Reply::text("It is the inventory tool."));
    let output = run_ok(&mut local(&cli, &["run", "what is this?"]));
    assert_eq!(stdout(&output), "It is the inventory tool.\n");
    let second = &cli.mock.model_requests()[1];
    assert_eq!(
        second.tool_use_ids().len(),
        2,
        "the unfinished third call is left out"
    );
    assert_eq!(second.tool_use_ids(), second.tool_result_ids());
    let body = second.raw_body.clone();
    assert!(body.contains("# inventory"), "{body}");
    assert!(body.contains("git"), "the unknown tool is answered: {body}");
}
