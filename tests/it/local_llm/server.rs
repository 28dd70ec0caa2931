//! The reference local server for the opt-in tests: llama.cpp's `llama-server` and the small
//! model `benches/local_llm/build.sh` puts in its cache folder, started on a free port of
//! 127.0.0.1 and stopped when dropped, with what it said kept in a log beside the cache.

use crate::support::free_port;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the model may take to load before the test gives up on the server.
const LOAD_TIMEOUT: Duration = Duration::from_secs(180);

/// The folder `build.sh` fills: `$TERN_LOCAL_LLM_DIR`, or `target/local-llm/`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("TERN_LOCAL_LLM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/local-llm"))
}

/// A running `llama-server`.
pub struct LocalServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl LocalServer {
    /// Starts the built server with the cached model and a window of `context` tokens, and
    /// waits until the model is loaded. Panics, saying what to do, when either is missing.
    pub fn start(context: u32) -> Self {
        let dir = cache_dir();
        let binary = dir.join("bin/llama-server");
        let model = dir.join("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        for needed in [&binary, &model] {
            assert!(
                needed.exists(),
                "{} is missing: run benches/local_llm/build.sh first (it builds the server and \
                 fetches the model into {})",
                needed.display(),
                dir.display()
            );
        }
        let port = free_port();
        let log = dir.join(format!("server-{port}.log"));
        let log_file = std::fs::File::create(&log)
            .unwrap_or_else(|err| panic!("creating {}: {err}", log.display()));
        let err_file = log_file
            .try_clone()
            .unwrap_or_else(|err| panic!("opening {} twice: {err}", log.display()));
        // As a person would start it (`llama-server -c 4096`), on a port of its own; `--jinja`
        // uses the model's own chat template, which is what makes its tool calls work.
        let child = Command::new(&binary)
            .arg("-m")
            .arg(&model)
            .args(["-c", &context.to_string()])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--jinja")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .unwrap_or_else(|err| panic!("starting {}: {err}", binary.display()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the HTTP client");
        let mut server = Self {
            child,
            port,
            log,
            runtime,
            http: {
                tern::tls::install_crypto_provider();
                reqwest::Client::new()
            },
        };
        server.wait_until_loaded();
        server
    }

    /// The OpenAI-compatible base URL, as a person would give it to tern.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn wait_until_loaded(&mut self) {
        let deadline = Instant::now() + LOAD_TIMEOUT;
        let health = format!("http://127.0.0.1:{}/health", self.port);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "llama-server exited ({status}) while loading; its log:\n{}",
                    tail(&self.log)
                );
            }
            let ok = self.runtime.block_on(async {
                let response = self.http.get(&health).send().await.ok()?;
                Some(response.status().is_success())
            });
            if ok == Some(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "llama-server did not load the model within {} s; its log:\n{}",
                LOAD_TIMEOUT.as_secs(),
                tail(&self.log)
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `GET path` as JSON.
    pub fn get(&self, path: &str) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        self.runtime
            .block_on(async { self.http.get(&url).send().await?.json().await })
            .unwrap_or_else(|err| panic!("GET {url}: {err}"))
    }

    /// `POST path` with a JSON body, answered as JSON.
    pub fn post(&self, path: &str, body: &Value) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        self.runtime
            .block_on(async { self.http.post(&url).json(body).send().await?.json().await })
            .unwrap_or_else(|err| panic!("POST {url}: {err}"))
    }

    /// The model the server serves, as its `/v1/models` names it.
    pub fn model_id(&self) -> String {
        self.get("/v1/models")
            .pointer("/data/0/id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    }

    /// The window the server was started with, as its `/props` says.
    pub fn context_window(&self) -> u64 {
        let props = self.get("/props");
        props
            .pointer("/default_generation_settings/n_ctx")
            .or_else(|| props.get("n_ctx"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// How many tokens the server counts in the prompt of an OpenAI chat request `body`:
    /// the request is made with one token of output and its usage read.
    pub fn prompt_tokens(&self, body: &Value) -> u64 {
        let mut body = body.clone();
        if let Some(object) = body.as_object_mut() {
            object.insert("stream".to_owned(), Value::Bool(false));
            object.remove("stream_options");
            object.remove("max_completion_tokens");
            object.insert("max_tokens".to_owned(), Value::from(1));
        }
        let answer = self.post("/v1/chat/completions", &body);
        answer
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("no prompt_tokens in the server's answer: {answer}"))
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of a log, for a failure message.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
