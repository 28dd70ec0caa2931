//! Tests of the mock provider itself, through a raw HTTP/1.1 client on a TcpStream: if the
//! mock's bytes are wrong, every provider test built on it proves nothing.

use crate::support::{KeepAlive, MockProvider, Reply, Stop, TernHome};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A response as bytes on the wire, with the chunked body decoded.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
    /// The chunked body ended with its terminating chunk (or a Content-Length body was whole).
    complete: bool,
    /// The read timed out instead of reaching EOF.
    timed_out: bool,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// SSE events as (event name, data) pairs.
    fn sse(&self) -> Vec<(Option<String>, String)> {
        let mut events = Vec::new();
        for block in self.body.split("\n\n").filter(|b| !b.trim().is_empty()) {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    data.push(value);
                }
            }
            events.push((name, data.join("\n")));
        }
        events
    }

    /// SSE data payloads parsed as JSON, stopping at `[DONE]`.
    fn sse_json(&self) -> Vec<Value> {
        let events = self.sse();
        events
            .iter()
            .take_while(|(_, data)| data != "[DONE]")
            .map(|(_, data)| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
            .collect()
    }

    fn ndjson(&self) -> Vec<Value> {
        self.body
            .lines()
            .map(|line| serde_json::from_str(line).expect("an NDJSON line"))
            .collect()
    }
}

fn request(
    mock: &MockProvider,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    read_timeout: Duration,
) -> Raw {
    let mut stream = TcpStream::connect(mock.addr()).expect("connecting to the mock");
    stream.set_read_timeout(Some(read_timeout)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", mock.addr());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.unwrap_or("").as_bytes()).unwrap();

    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    let mut timed_out = false;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                timed_out = true;
                break;
            }
            Err(e) => panic!("reading from the mock: {e}"),
        }
    }
    parse_response(&bytes, timed_out)
}

fn parse_response(bytes: &[u8], timed_out: bool) -> Raw {
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8(bytes[..end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: BTreeMap<String, String> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap();
            (name.to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    let mut rest = &bytes[end + 4..];
    if headers.get("transfer-encoding").map(String::as_str) != Some("chunked") {
        let length: usize = headers["content-length"].parse().unwrap();
        let body = String::from_utf8(rest.to_vec()).unwrap();
        return Raw {
            status,
            headers,
            complete: body.len() == length,
            body,
            timed_out,
        };
    }
    let mut body = Vec::new();
    let mut complete = false;
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            complete = rest == b"\r\n";
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    Raw {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
        complete,
        timed_out,
    }
}

const PATIENCE: Duration = Duration::from_secs(10);

fn post(mock: &MockProvider, path: &str, body: &Value) -> Raw {
    request(mock, "POST", path, &[], Some(&body.to_string()), PATIENCE)
}

fn get(mock: &MockProvider, path: &str) -> Raw {
    request(mock, "GET", path, &[], None, PATIENCE)
}

fn anthropic_body() -> Value {
    json!({ "model": "claude-test", "max_tokens": 100, "stream": true,
        "messages": [{ "role": "user", "content": "hi" }] })
}

fn openai_body(include_usage: bool) -> Value {
    json!({ "model": "gpt-test", "stream": true,
        "stream_options": { "include_usage": include_usage },
        "messages": [{ "role": "user", "content": "hi" }] })
}

fn ollama_body() -> Value {
    json!({ "model": "llama-test", "messages": [{ "role": "user", "content": "hi" }] })
}

#[test]
fn anthropic_stream_carries_thinking_text_and_tool_use() {
    let mock = MockProvider::start_blocking();
    mock.push(
        Reply::tool_call("file_read", json!({ "path": "a.txt" }))
            .with_text("I will read it.")
            .with_thinking("Let me think.", "sig=="),
    );
    let raw = post(&mock, "/v1/messages", &anthropic_body());
    assert_eq!(raw.status, 200);
    assert!(
        raw.complete,
        "the chunked body ends with its terminating chunk"
    );
    assert!(raw.headers["content-type"].starts_with("text/event-stream"));
    assert_eq!(raw.headers["transfer-encoding"], "chunked");
    assert_eq!(raw.headers["connection"], "close");

    let events = raw.sse();
    for (name, data) in &events {
        let data: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            name.as_deref(),
            data["type"].as_str(),
            "event name matches data.type"
        );
    }
    let data = raw.sse_json();
    assert_eq!(data.first().unwrap()["type"], "message_start");
    assert_eq!(data.last().unwrap()["type"], "message_stop");
    assert!(data.iter().any(|d| d["type"] == "ping"));

    let deltas = |index: u64, kind: &str, field: &str| -> Vec<String> {
        data.iter()
            .filter(|d| d["type"] == "content_block_delta" && d["index"] == index)
            .filter(|d| d["delta"]["type"] == kind)
            .map(|d| d["delta"][field].as_str().unwrap().to_owned())
            .collect()
    };
    let starts: Vec<&Value> = data
        .iter()
        .filter(|d| d["type"] == "content_block_start")
        .map(|d| &d["content_block"])
        .collect();
    assert_eq!(
        starts[0]["type"], "thinking",
        "thinking comes first whatever the builder order"
    );
    assert_eq!(
        deltas(0, "thinking_delta", "thinking").concat(),
        "Let me think."
    );
    assert_eq!(deltas(0, "signature_delta", "signature"), ["sig=="]);
    assert_eq!(starts[1]["type"], "text");
    assert_eq!(
        deltas(1, "text_delta", "text"),
        ["I", " will", " read", " it."]
    );
    assert_eq!(starts[2]["type"], "tool_use");
    assert_eq!(starts[2]["id"], "toolu_mock_1");
    assert_eq!(starts[2]["name"], "file_read");
    let fragments = deltas(2, "input_json_delta", "partial_json");
    assert_eq!(
        fragments[0], "",
        "the first fragment is empty, as the API sends it"
    );
    assert!(fragments.len() >= 3);
    let input: Value = serde_json::from_str(&fragments.concat()).unwrap();
    assert_eq!(input, json!({ "path": "a.txt" }));
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() >= 1);
}

#[test]
fn openai_stream_carries_tool_calls_by_index_and_a_usage_chunk() {
    let mock = MockProvider::start_blocking();
    mock.push(
        Reply::tool_calls([
            ("grep", json!({ "pattern": "fn main" })),
            ("file_read", json!({ "path": "b" })),
        ])
        .with_text("Searching.")
        .usage(100, 20, 80, 5),
    );
    let raw = post(&mock, "/v1/chat/completions", &openai_body(true));
    assert_eq!(raw.status, 200);
    assert!(raw.complete);
    assert_eq!(raw.sse().last().unwrap().1, "[DONE]");
    let chunks = raw.sse_json();
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Searching.");

    let mut calls: BTreeMap<u64, (Vec<String>, Vec<String>, String)> = BTreeMap::new();
    for chunk in &chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let entry = calls.entry(call["index"].as_u64().unwrap()).or_default();
            entry.0.extend(call["id"].as_str().map(str::to_owned));
            entry
                .1
                .extend(call["function"]["name"].as_str().map(str::to_owned));
            entry
                .2
                .push_str(call["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[&0].0,
        ["call_mock_1"],
        "the id comes once, on the first fragment"
    );
    assert_eq!(calls[&0].1, ["grep"]);
    assert_eq!(
        serde_json::from_str::<Value>(&calls[&0].2).unwrap(),
        json!({ "pattern": "fn main" })
    );
    assert_eq!(calls[&1].0, ["call_mock_2"]);
    assert_eq!(
        serde_json::from_str::<Value>(&calls[&1].2).unwrap(),
        json!({ "path": "b" })
    );

    let finish: Vec<&Value> = chunks
        .iter()
        .map(|c| &c["choices"][0]["finish_reason"])
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(finish, [&json!("tool_calls")]);
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 185);
    assert_eq!(last["usage"]["completion_tokens"], 20);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 80);
    assert_eq!(mock.requests()[0].tool_ids, ["call_mock_1", "call_mock_2"]);
}

#[test]
fn openai_stream_without_include_usage_has_no_usage_chunk() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("Hi"));
    let raw = post(&mock, "/chat/completions", &openai_body(false));
    let chunks = raw.sse_json();
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[test]
fn ollama_stream_is_ndjson_with_whole_tool_calls_and_counts() {
    let mock = MockProvider::start_blocking();
    mock.push(
        Reply::text("Hello there")
            .with_tool_call("file_read", json!({ "path": "a" }))
            .usage(10, 5, 0, 0),
    );
    let raw = post(&mock, "/api/chat", &ollama_body());
    assert_eq!(raw.status, 200);
    assert!(raw.complete);
    assert_eq!(raw.headers["content-type"], "application/x-ndjson");
    let lines = raw.ndjson();
    let content: String = lines
        .iter()
        .filter_map(|l| l["message"]["content"].as_str())
        .collect();
    assert_eq!(content, "Hello there");
    let calls: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l["message"]["tool_calls"].as_array())
        .flatten()
        .collect();
    assert_eq!(
        calls,
        [&json!({ "function": { "name": "file_read", "arguments": { "path": "a" } } })]
    );
    let last = lines.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert_eq!(last["prompt_eval_count"], 10);
    assert_eq!(last["eval_count"], 5);
    assert!(lines[..lines.len() - 1].iter().all(|l| l["done"] == false));
}

#[test]
fn one_script_renders_the_stop_reason_in_every_format() {
    let mock = MockProvider::start_blocking();
    for _ in 0..3 {
        mock.push(Reply::text("partial").stop_reason_max_tokens());
    }
    let anthropic = post(&mock, "/v1/messages", &anthropic_body()).sse_json();
    let delta = anthropic
        .iter()
        .find(|d| d["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    let openai = post(&mock, "/v1/chat/completions", &openai_body(false)).sse_json();
    assert_eq!(
        openai.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    let ollama = post(&mock, "/api/chat", &ollama_body()).ndjson();
    assert_eq!(ollama.last().unwrap()["done_reason"], "length");

    mock.push(Reply::text("no").stop(Stop::Refusal));
    let openai = post(&mock, "/v1/chat/completions", &openai_body(false)).sse_json();
    assert_eq!(
        openai.last().unwrap()["choices"][0]["finish_reason"],
        "content_filter"
    );
}

#[test]
fn scripted_usage_reaches_anthropic_start_and_delta() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("x").usage(100, 20, 80, 5));
    let data = post(&mock, "/v1/messages", &anthropic_body()).sse_json();
    let start = &data[0]["message"]["usage"];
    assert_eq!(start["input_tokens"], 100);
    assert_eq!(start["cache_read_input_tokens"], 80);
    assert_eq!(start["cache_creation_input_tokens"], 5);
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 20);
}

#[test]
fn requests_are_recorded_with_lowercased_headers_and_json_body() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::tool_call("shell", json!({ "command": "ls" })));
    mock.push(Reply::text("done"));
    let headers = [
        ("X-Api-Key", "sk-test"),
        ("Anthropic-Version", "2023-06-01"),
    ];
    let body = anthropic_body().to_string();
    request(
        &mock,
        "POST",
        "/v1/messages?beta=true",
        &headers,
        Some(&body),
        PATIENCE,
    );
    let followup = json!({ "model": "claude-test", "stream": true, "messages": [
        { "role": "user", "content": "hi" },
        { "role": "assistant", "content": [{ "type": "tool_use", "id": "toolu_mock_1", "name": "shell", "input": {} }] },
        { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "toolu_mock_1", "content": "a.txt" }] },
    ] });
    post(&mock, "/v1/messages", &followup);
    get(&mock, "/api/tags");

    let requests = mock.wait_for_requests_blocking(3, PATIENCE);
    let first = &requests[0];
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(first.query.as_deref(), Some("beta=true"));
    assert_eq!(first.headers["x-api-key"], "sk-test");
    assert_eq!(first.header("ANTHROPIC-VERSION"), Some("2023-06-01"));
    assert_eq!(first.body, anthropic_body());
    assert_eq!(first.model(), Some("claude-test"));
    assert_eq!(first.status, 200);
    assert_eq!(first.tool_ids, ["toolu_mock_1"]);
    let second = &requests[1];
    assert_eq!(second.tool_use_ids(), first.tool_ids);
    assert_eq!(second.tool_result_ids(), first.tool_ids);
    assert_eq!(
        (requests[2].method.as_str(), requests[2].body.clone()),
        ("GET", Value::Null)
    );
    assert_eq!(mock.model_requests().len(), 2);
    assert_eq!(mock.remaining(), 0);
}

#[test]
fn a_cut_reply_ends_the_chunked_body_without_its_terminating_chunk() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("one two three four five six").cut_after_events(3));
    let raw = post(&mock, "/v1/messages", &anthropic_body());
    assert_eq!(raw.status, 200);
    assert!(!raw.timed_out, "the server closed the connection");
    assert!(!raw.complete, "no terminating chunk after a cut");
    let names: Vec<String> = raw.sse().into_iter().filter_map(|(name, _)| name).collect();
    assert_eq!(names, ["message_start", "ping", "content_block_start"]);
}

#[test]
fn a_stalled_reply_keeps_the_connection_open_after_its_events() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("one two three").stall_after_events(2));
    let body = ollama_body().to_string();
    let raw = request(
        &mock,
        "POST",
        "/api/chat",
        &[],
        Some(&body),
        Duration::from_millis(300),
    );
    assert!(raw.timed_out && !raw.complete);
    assert_eq!(raw.ndjson().len(), 2);
}

#[test]
fn an_empty_script_answers_500_saying_it_ran_out() {
    let mock = MockProvider::start_blocking();
    let raw = post(&mock, "/v1/messages", &anthropic_body());
    assert_eq!(raw.status, 500);
    assert_eq!(raw.headers["content-type"], "application/json");
    let message = raw.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("ran out of replies"), "{message}");
    let raw = post(&mock, "/api/chat", &ollama_body());
    assert!(raw.json()["error"].as_str().unwrap().contains("request #2"));
}

#[test]
fn an_error_reply_carries_its_status_body_and_headers() {
    let mock = MockProvider::start_blocking();
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
    mock.push(Reply::error(429, body).header("retry-after-ms", "20"));
    let raw = post(&mock, "/v1/messages", &anthropic_body());
    assert_eq!(raw.status, 429);
    assert_eq!(raw.body, body);
    assert_eq!(raw.headers["retry-after-ms"], "20");
    assert!(raw.complete);
}

#[test]
fn model_queues_serve_only_their_model() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("primary"));
    mock.push_for_model("fallback-model", Reply::text("fallback"));
    let text = |raw: Raw| -> String {
        raw.sse_json()
            .iter()
            .filter_map(|d| d["delta"]["text"].as_str().map(str::to_owned))
            .collect()
    };
    let mut body = anthropic_body();
    body["model"] = json!("fallback-model");
    assert_eq!(text(post(&mock, "/v1/messages", &body)), "fallback");
    assert_eq!(
        text(post(&mock, "/v1/messages", &anthropic_body())),
        "primary"
    );
    let raw = post(&mock, "/v1/messages", &body);
    assert_eq!(raw.status, 500);
    assert!(raw.body.contains("fallback-model"), "{}", raw.body);
}

#[test]
fn probes_list_models_and_unknown_paths_get_404() {
    let mock = MockProvider::start_blocking();
    assert_eq!(
        get(&mock, "/api/tags").json()["models"][0]["name"],
        "mock-model"
    );
    assert_eq!(
        get(&mock, "/v1/models").json()["data"][0]["id"],
        "mock-model"
    );
    assert_eq!(get(&mock, "/models").json()["data"][0]["id"], "mock-model");
    let raw = post(&mock, "/v1/complete", &anthropic_body());
    assert_eq!(raw.status, 404);
    assert!(raw.body.contains("/v1/complete"));
}

#[test]
fn each_identity_answers_its_own_model_questions_and_only_those() {
    use crate::support::Identity;
    let mock = MockProvider::start_blocking();
    assert_eq!(get(&mock, "/props").status, 404, "plain has no /props");
    mock.serve_as(Identity::LlamaCpp {
        model: "m.gguf".into(),
        n_ctx: 4096,
    });
    let props = get(&mock, "/props").json();
    assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);
    let models = get(&mock, "/v1/models").json();
    assert_eq!(models["data"][0]["id"], "m.gguf");
    assert_eq!(models["data"][0]["meta"]["n_ctx_train"], 32_768);
    assert_eq!(
        post(&mock, "/api/show", &json!({"model": "m.gguf"})).status,
        404
    );

    mock.serve_as(Identity::Ollama {
        model: "q:0.5b".into(),
        context_length: 32_768,
        num_ctx: Some(8192),
    });
    let show = post(&mock, "/api/show", &json!({"model": "q:0.5b"})).json();
    assert_eq!(show["model_info"]["qwen2.context_length"], 32_768);
    assert!(show["parameters"].as_str().unwrap().contains("num_ctx"));
    assert_eq!(
        post(&mock, "/api/show", &json!({"model": "other"})).status,
        404
    );
    assert_eq!(
        get(&mock, "/api/tags").json()["models"][0]["name"],
        "q:0.5b"
    );

    mock.serve_as(Identity::Vllm {
        model: "org/m".into(),
        max_model_len: 16_384,
    });
    assert_eq!(
        get(&mock, "/v1/models").json()["data"][0]["max_model_len"],
        16_384
    );
    mock.serve_as(Identity::LmStudio {
        loaded: "l".into(),
        loaded_context_length: 8192,
    });
    let listed = get(&mock, "/api/v0/models").json();
    assert_eq!(listed["data"][1]["loaded_context_length"], 8192);
    assert_eq!(
        mock.model_questions().len(),
        9,
        "{:?}",
        mock.model_questions()
    );

    mock.delay_model_questions(Duration::from_millis(60));
    let started = Instant::now();
    assert_eq!(get(&mock, "/v1/models").status, 200);
    assert!(started.elapsed() >= Duration::from_millis(60));
}

#[test]
fn requests_without_streaming_get_a_whole_message() {
    let mock = MockProvider::start_blocking();
    for _ in 0..3 {
        mock.push(Reply::text("Hi").with_tool_call("grep", json!({ "q": 1 })));
    }
    let mut body = anthropic_body();
    body.as_object_mut().unwrap().remove("stream");
    let message = post(&mock, "/v1/messages", &body).json();
    assert_eq!(
        message["content"][0],
        json!({ "type": "text", "text": "Hi" })
    );
    assert_eq!(message["content"][1]["input"], json!({ "q": 1 }));
    assert_eq!(message["stop_reason"], "tool_use");

    let completion = post(
        &mock,
        "/v1/chat/completions",
        &json!({ "model": "m", "messages": [] }),
    )
    .json();
    let choice = &completion["choices"][0];
    assert_eq!(choice["message"]["content"], "Hi");
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"q":1}"#
    );

    let ollama = post(
        &mock,
        "/api/chat",
        &json!({ "model": "m", "stream": false }),
    )
    .json();
    assert_eq!(ollama["done"], true);
    assert_eq!(
        ollama["message"]["tool_calls"][0]["function"]["arguments"],
        json!({ "q": 1 })
    );
}

#[test]
fn raw_sse_is_sent_verbatim_under_200() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::raw_sse("data: not json\n\ndata: {\"half\":"));
    let raw = post(&mock, "/v1/messages", &anthropic_body());
    assert_eq!(raw.status, 200);
    assert_eq!(raw.body, "data: not json\n\ndata: {\"half\":");
}

#[test]
fn a_stream_error_follows_the_content_under_200() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("partial").stream_error("overloaded_error", "Overloaded"));
    mock.push(Reply::text("partial").stream_error("server_error", "boom"));
    let anthropic = post(&mock, "/v1/messages", &anthropic_body());
    let last = anthropic.sse().pop().unwrap();
    assert_eq!(last.0.as_deref(), Some("error"));
    assert!(last.1.contains("overloaded_error"));
    let ollama = post(&mock, "/api/chat", &ollama_body()).ndjson();
    assert_eq!(ollama.last().unwrap()["error"], "boom");
}

#[test]
fn delays_hold_back_the_response() {
    let mock = MockProvider::start_blocking();
    mock.push(
        Reply::text("a b c")
            .delay_before(Duration::from_millis(40))
            .delay_between_events(Duration::from_millis(5)),
    );
    let started = Instant::now();
    let raw = post(&mock, "/api/chat", &ollama_body());
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(raw.complete);
}

#[test]
fn concurrent_requests_each_consume_one_reply() {
    let mock = MockProvider::start_blocking();
    for i in 0..8 {
        mock.push(Reply::text(format!("r{i}")));
    }
    let texts: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    post(&mock, "/api/chat", &ollama_body()).ndjson()[0]["message"]["content"]
                        .to_string()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut texts = texts;
    texts.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("\"r{i}\"")).collect();
    assert_eq!(texts, expected);
}

#[test]
fn repeat_answers_once_the_queue_is_empty() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("first"));
    mock.repeat(Reply::text("again"));
    let content = |raw: Raw| raw.ndjson()[0]["message"]["content"].clone();
    assert_eq!(content(post(&mock, "/api/chat", &ollama_body())), "first");
    assert_eq!(content(post(&mock, "/api/chat", &ollama_body())), "again");
    assert_eq!(content(post(&mock, "/api/chat", &ollama_body())), "again");
}

#[test]
fn a_chunked_request_body_is_read() {
    let mock = MockProvider::start_blocking();
    mock.push(Reply::text("ok"));
    let body = ollama_body().to_string();
    let (a, b) = body.split_at(10);
    let mut stream = TcpStream::connect(mock.addr()).unwrap();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    assert_eq!(parse_response(&response, false).status, 200);
    assert_eq!(mock.requests()[0].body, ollama_body());
}

#[tokio::test]
async fn wait_for_requests_works_from_an_async_test() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("hi"));
    let addr = mock.addr();
    let client = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let body = anthropic_body().to_string();
        let head = format!(
            "POST /v1/messages HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
    });
    let requests = mock.wait_for_requests(1, PATIENCE).await;
    assert_eq!(requests[0].path, "/v1/messages");
    client.join().unwrap();
}

#[test]
#[should_panic(expected = "expected 2 requests")]
fn wait_for_requests_panics_naming_what_arrived() {
    let mock = MockProvider::start_blocking();
    get(&mock, "/api/tags");
    mock.wait_for_requests_blocking(2, Duration::from_millis(50));
}

#[test]
fn tern_home_holds_a_fresh_git_project_and_config() {
    let home = TernHome::new();
    assert_eq!(
        home.git(&["rev-parse", "--is-inside-work-tree"]).trim(),
        "true"
    );
    assert_eq!(
        home.git(&["symbolic-ref", "--short", "HEAD"]).trim(),
        "main"
    );
    home.write_file("src/lib.rs", "pub fn f() {}\n");
    home.commit_all("initial");
    assert_eq!(home.git(&["status", "--porcelain"]), "");
    home.write_config("[models]\n");
    assert!(home.config_path().starts_with(home.home()));

    let command = home.tern_process();
    assert_eq!(command.get_current_dir(), Some(home.project()));
    let envs: BTreeMap<_, _> = command.get_envs().collect();
    assert_eq!(
        envs[std::ffi::OsStr::new("TERN_HOME")],
        Some(home.home().as_os_str())
    );
}

#[tokio::test]
async fn the_first_run_finds_local_servers_by_their_model_listings() {
    use tern::config::ProviderKind;
    use tern::llm::local::find_on;
    let mock = MockProvider::start().await;
    let found = find_on(&mock.base_url(), &mock.base_url()).await;
    let seen: Vec<(&str, ProviderKind, Option<&str>)> = found
        .iter()
        .map(|s| (s.name, s.kind, s.model.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("llama.cpp server", ProviderKind::OpenAi, Some("mock-model")),
            ("Ollama", ProviderKind::Ollama, Some("mock-model")),
        ]
    );
    assert_eq!(found[0].base_url, format!("{}/v1", mock.base_url()));
    // The config it would write loads, and names the server. Ollama's names the model found;
    // llama.cpp's leaves model and window to the server, asked at each start.
    let load = |text: &str| {
        tern::config::load_from_str(
            text,
            std::path::Path::new("/c/config.toml"),
            &tern::config::Environment::default(),
        )
        .expect("a valid config")
    };
    let config = load(&found[1].config());
    let ollama = config.default_provider().unwrap();
    assert_eq!(ollama.base_url, mock.base_url());
    assert_eq!(ollama.default_model, "mock-model");
    assert!(!ollama.written.context_window);
    let config = load(&found[0].config());
    let llama = config.default_provider().unwrap();
    assert_eq!(llama.base_url, format!("{}/v1", mock.base_url()));
    assert!(!llama.written.model && !llama.written.context_window);
    assert!(llama.asks_server());
    // Nothing listening: nothing offered, quickly.
    let closed = "http://127.0.0.1:9";
    let started = std::time::Instant::now();
    assert!(find_on(closed, closed).await.is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// Sends `GET /v1/models` on an open connection and reads one Content-Length response;
/// `None` when the connection ends before any byte of an answer.
fn list_models_on(stream: &mut TcpStream) -> Option<Raw> {
    let head = "GET /v1/models HTTP/1.1\r\nHost: mock\r\n\r\n";
    stream
        .write_all(head.as_bytes())
        .expect("writing a request");
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .expect("a content-length");
            if bytes.len() >= end + 4 + length {
                return Some(parse_response(&bytes, false));
            }
        }
        match stream.read(&mut buf) {
            Ok(0) if bytes.is_empty() => return None,
            Ok(0) => panic!("the connection ended inside a response"),
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading from the mock: {e}"),
        }
    }
}

fn connect(mock: &MockProvider) -> TcpStream {
    let stream = TcpStream::connect(mock.addr()).expect("connecting to the mock");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

#[test]
fn kept_alive_connections_answer_request_after_request() {
    let mock = MockProvider::start_blocking();
    mock.keep_alive(KeepAlive::On);
    let mut stream = connect(&mock);
    for _ in 0..3 {
        let raw = list_models_on(&mut stream).expect("an answer on the same connection");
        assert_eq!(raw.status, 200);
        assert_eq!(raw.headers["keep-alive"], "timeout=5, max=100");
        assert!(!raw.headers.contains_key("connection"));
    }
    assert_eq!(mock.connections(), 1);
    let connections: Vec<usize> = mock.requests().iter().map(|r| r.connection).collect();
    assert_eq!(connections, [1, 1, 1]);
}

#[test]
fn a_server_like_llama_cpp_closes_right_after_promising_keep_alive() {
    let mock = MockProvider::start_blocking();
    mock.keep_alive(KeepAlive::CloseAfterResponse);
    let mut stream = connect(&mock);
    let raw = list_models_on(&mut stream).expect("the first answer");
    assert_eq!(raw.headers["keep-alive"], "timeout=5, max=100");
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("reading to the end");
    assert!(rest.is_empty(), "the connection closed after the answer");
}

#[test]
fn a_request_on_a_connection_the_server_gives_up_gets_no_answer() {
    let mock = MockProvider::start_blocking();
    mock.keep_alive(KeepAlive::DropNextRequest);
    let mut stream = connect(&mock);
    assert!(
        list_models_on(&mut stream).is_some(),
        "the first is answered"
    );
    assert!(list_models_on(&mut stream).is_none(), "the next is not");
    assert_eq!(mock.dropped_requests(), 1);
    assert_eq!(
        mock.requests().len(),
        1,
        "a dropped request is not recorded"
    );
    // A new connection is served again.
    assert!(list_models_on(&mut connect(&mock)).is_some());
    assert_eq!(mock.connections(), 2);
}
