//! The prefix stability test: over a long scripted session with tool loops, every model
//! request begins with the bytes of the previous request's stable prefix (tools, tier A,
//! tier B and the history up to the previous nudge), so a provider's prompt cache keeps
//! hitting. `cache_control` marks are left out of the comparison: they move on purpose.

use super::*;

/// The number of turns the session runs.
const TURNS: usize = 30;

/// The reuse a long session must at least reach over all its requests.
const AGGREGATE_FLOOR: f64 = 0.95;

/// A request body linearised for byte comparison: `tools`, then each `system` block, then
/// each message's role and each of its content blocks, in order, each serialized with
/// serde_json (keys keep their order) without its `cache_control`.
struct Linear {
    bytes: Vec<u8>,
    /// Where each nudge block starts in `bytes`, in order.
    nudges: Vec<usize>,
    /// Where each message starts in `bytes`, for pointing at a difference.
    messages: Vec<usize>,
    /// Where the messages begin (after tools and system).
    history: usize,
}

impl Linear {
    fn of(body: &Value) -> Self {
        let mut bytes = Vec::new();
        let mut nudges = Vec::new();
        let mut messages = Vec::new();
        let write = |bytes: &mut Vec<u8>, value: &Value| {
            let value = without_cache_control(value);
            serde_json::to_writer(&mut *bytes, &value).expect("serializing a request part");
        };
        let tools: Vec<Value> = items(body, "tools").map(without_cache_control).collect();
        write(&mut bytes, &Value::Array(tools));
        for block in items(body, "system") {
            write(&mut bytes, block);
        }
        let history = bytes.len();
        for message in items(body, "messages") {
            messages.push(bytes.len());
            write(&mut bytes, &message["role"]);
            match &message["content"] {
                Value::Array(blocks) => {
                    for block in blocks {
                        if is_nudge(block) {
                            nudges.push(bytes.len());
                        }
                        write(&mut bytes, block);
                    }
                }
                other => write(&mut bytes, other),
            }
        }
        Self {
            bytes,
            nudges,
            messages,
            history,
        }
    }

    /// The end of the content before the last nudge: what the next request must repeat.
    fn stable_end(&self) -> usize {
        self.nudges.last().copied().unwrap_or(self.history)
    }

    /// Where `offset` falls, in words.
    fn locate(&self, offset: usize) -> String {
        if offset < self.history {
            let history = self.history;
            return format!("byte {offset}, in tools or system (history starts at {history})");
        }
        let message = self.messages.iter().rposition(|&at| at <= offset);
        format!("byte {offset}, in message {message:?}")
    }
}

fn items<'a>(body: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    body.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn is_nudge(block: &Value) -> bool {
    block["type"] == "text"
        && block["text"]
            .as_str()
            .is_some_and(|text| text.starts_with(tern::prompt::NUDGE_OPENING))
}

/// `value` without a top-level `cache_control` key, other keys in their order.
fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| key.as_str() != "cache_control")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every `cache_control` key anywhere in `value`.
fn cache_marks(value: &Value) -> usize {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| usize::from(key == "cache_control") + cache_marks(value))
            .sum(),
        Value::Array(values) => values.iter().map(cache_marks).sum(),
        _ => 0,
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Both sides of the first difference, for a failure message.
fn difference(previous: &Linear, next: &Linear) -> String {
    let at = common_prefix(&previous.bytes, &next.bytes);
    let window = |bytes: &[u8]| {
        let start = at.saturating_sub(120);
        let end = (at + 240).min(bytes.len());
        String::from_utf8_lossy(&bytes[start..end]).into_owned()
    };
    format!(
        "first difference at {} of the previous request ({} of the next)\n\
         previous: …{}…\nnext:     …{}…",
        previous.locate(at),
        next.locate(at),
        window(&previous.bytes),
        window(&next.bytes),
    )
}

/// The project files the tools read: a small Rust crate and its notes.
fn write_project(world: &World) {
    let module = |name: &str, items: usize| {
        let mut text = format!("//! The {name} module.\n\n");
        for i in 0..items {
            text.push_str(&format!(
                "/// Returns the {name} value number {i}.\npub fn {name}_{i}(x: u32) -> u32 {{\n    \
                 x.wrapping_mul({}) + {i}\n}}\n\n",
                i + 3
            ));
        }
        text
    };
    world.home.write_file(
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2024\"\n",
    );
    world.home.write_file(
        "src/lib.rs",
        "pub mod lexer;\npub mod parser;\npub mod eval;\n",
    );
    world.home.write_file("src/lexer.rs", &module("lexer", 6));
    world.home.write_file("src/parser.rs", &module("parser", 8));
    world.home.write_file("src/eval.rs", &module("eval", 5));
    world.home.write_file(
        "docs/notes.md",
        "# Notes\n\nThe lexer feeds the parser; eval walks the tree.\nTODO: error recovery.\n",
    );
    world.home.commit_all("initial");
}

/// The replies for turn `i`: zero, one or two rounds of read-only tool calls, then text.
fn script(i: usize) -> Vec<Reply> {
    let files = [
        "src/lexer.rs",
        "src/parser.rs",
        "src/eval.rs",
        "docs/notes.md",
    ];
    let file = files[(i / 2) % files.len()];
    let answer = Reply::text(format!(
        "Turn {i}: {file} holds what you asked about; the functions follow one pattern."
    ));
    if i % 5 == 4 {
        return vec![Reply::text(format!(
            "Turn {i}: nothing to look up, here is the answer in plain words."
        ))];
    }
    let search = match i % 3 {
        0 => Reply::tool_call("glob", json!({"pattern": "**/*.rs"})),
        1 => Reply::tool_call("grep", json!({"pattern": format!("_{}\\(", i % 5)}))
            .with_text("Searching first."),
        _ => Reply::tool_calls([
            (
                "grep",
                json!({"pattern": "TODO", "output_mode": "files_with_matches"}),
            ),
            ("glob", json!({"pattern": "docs/*.md"})),
        ]),
    };
    if i.is_multiple_of(2) {
        let read = Reply::tool_call("file_read", json!({"path": file, "limit": 12}));
        vec![search, read, answer]
    } else {
        vec![search, answer]
    }
}

/// The comparison is not blind: moving a cache mark changes nothing, while one changed
/// byte of the first nudge (before the previous request's last one) breaks the prefix.
fn check_the_comparison(body: &Value, previous: &Linear) {
    let stable = &previous.bytes[..previous.stable_end()];
    let mut moved = body.clone();
    for message in moved["messages"].as_array_mut().expect("messages") {
        for block in message["content"].as_array_mut().expect("content blocks") {
            if let Value::Object(block) = block {
                block.insert("cache_control".into(), json!({"type": "ephemeral"}));
            }
        }
    }
    assert!(Linear::of(&moved).bytes.starts_with(stable));
    let mut edited = body.clone();
    let nudge = edited["messages"]
        .as_array_mut()
        .expect("messages")
        .iter_mut()
        .flat_map(|message| message["content"].as_array_mut().expect("content blocks"))
        .find(|block| is_nudge(block))
        .expect("a nudge");
    let text = nudge["text"]
        .as_str()
        .expect("nudge text")
        .replace("utc:", "UTC:");
    nudge["text"] = json!(text);
    assert!(!Linear::of(&edited).bytes.starts_with(stable));
}

#[tokio::test]
async fn the_prompt_prefix_stays_stable_over_a_long_session() {
    let world = World::anthropic();
    write_project(&world);
    let handle = world.create();

    // The turn each model request belongs to (1-based).
    let mut turn_of_request = Vec::new();
    for i in 0..TURNS {
        if i == 12 {
            // The working tree changes mid-session: later nudges say so, earlier ones stay.
            world
                .home
                .write_file("src/extra.rs", "pub fn extra() -> u8 {\n    7\n}\n");
        }
        if i == 21 {
            world.home.commit_all("add extra");
        }
        for reply in script(i) {
            world.mock.push(reply);
        }
        let events = turn(
            &handle,
            &format!("Question {i}: what does the code do here?"),
        )
        .await;
        assert!(
            completed(&events).is_some(),
            "turn {i} did not complete: {events:?}"
        );
        let sent = world.mock.model_requests().len();
        turn_of_request.resize(sent, i + 1);
    }
    assert_eq!(world.mock.remaining(), 0, "every scripted reply was used");

    let requests = world.mock.model_requests();
    assert_eq!(requests.len(), turn_of_request.len());
    let last_results = tool_result_texts(&requests[requests.len() - 1].body);
    assert!(last_results.len() > TURNS, "{last_results:?}");
    for block in items(&requests[requests.len() - 1].body, "messages")
        .flat_map(|message| items(message, "content"))
        .filter(|block| block["type"] == "tool_result")
    {
        assert_ne!(block["is_error"], json!(true), "a tool failed: {block}");
    }

    for (k, request) in requests.iter().enumerate() {
        let body = &request.body;
        let marks = cache_marks(body);
        assert!(marks <= 4, "request {k} has {marks} cache_control marks");
        let system: Vec<&Value> = items(body, "system").collect();
        assert_eq!(system.len(), 2, "request {k}: tier A and tier B");
        for (i, block) in system.iter().enumerate() {
            assert_eq!(
                block["cache_control"],
                json!({"type": "ephemeral"}),
                "request {k}: system block {i} carries a cache mark"
            );
        }
        assert_eq!(
            request.nudges().len(),
            turn_of_request[k],
            "request {k} carries one nudge per turn started so far"
        );
    }

    let linear: Vec<Linear> = requests.iter().map(|r| Linear::of(&r.body)).collect();
    let n = linear.len();
    check_the_comparison(&requests[n - 1].body, &linear[n - 2]);
    let (mut shared_sum, mut total_sum) = (0usize, 0usize);
    let (mut min_ratio, mut min_at) = (f64::INFINITY, 0);
    let mut last_ratio = 0.0;
    let mut whole_previous = 0;
    for k in 1..linear.len() {
        let (previous, next) = (&linear[k - 1], &linear[k]);
        assert_eq!(previous.nudges.len(), turn_of_request[k - 1]);
        let stable = &previous.bytes[..previous.stable_end()];
        assert!(
            next.bytes.starts_with(stable),
            "request {k} (turn {}) does not begin with the stable prefix of request {} \
             ({} bytes): {}",
            turn_of_request[k],
            k - 1,
            stable.len(),
            difference(previous, next),
        );
        if next.bytes.starts_with(&previous.bytes) {
            whole_previous += 1;
        }
        let shared = common_prefix(&previous.bytes, &next.bytes);
        let ratio = shared as f64 / next.bytes.len() as f64;
        shared_sum += shared;
        total_sum += next.bytes.len();
        if ratio < min_ratio {
            (min_ratio, min_at) = (ratio, k);
        }
        last_ratio = ratio;
    }
    let aggregate = shared_sum as f64 / total_sum as f64;
    let last = linear.last().expect("requests were made");
    eprintln!(
        "prefix stability: {} requests over {TURNS} turns; reuse aggregate {aggregate:.4}, \
         min {min_ratio:.4} (request {min_at}), last {last_ratio:.4}; last request {} bytes linearised \
         ({} bytes of JSON body), {} of which before the history; whole previous request \
         reused by {whole_previous} of {} requests",
        linear.len(),
        last.bytes.len(),
        requests[requests.len() - 1].raw_body.len(),
        last.history,
        linear.len() - 1,
    );
    assert!(
        aggregate >= AGGREGATE_FLOOR,
        "the prefix reuse over the session is {aggregate:.4}, below {AGGREGATE_FLOOR}"
    );
}
