//! A standalone mock model provider for whole-process benchmarks.
//!
//! `cargo run --example mock_provider -- --port 0 --reply "Hello"` serves the same text reply
//! to every model request, in whichever wire format the request's path asks for (Anthropic,
//! OpenAI Chat Completions or Ollama), and prints its base URL as the first line on stdout so
//! a script can point tern at it. It answers with no artificial delay and keeps no request
//! bodies, so a long benchmark neither waits on it nor grows its memory. Tool calls can be
//! scripted ahead of the text (`--tool-call`, `--repeat-calls`, `--calls-per-reply`), and each
//! request's size logged (`--sizes`), to see what a tool's output costs the model.

// The benchmark uses a small part of the test-support API.
#[allow(dead_code, unused_imports)]
#[path = "../tests/support/mock_provider/mod.rs"]
mod mock_provider;

use mock_provider::{MockProvider, Reply};
use std::process::ExitCode;

const USAGE: &str =
    "usage: mock_provider [--port PORT] [--reply TEXT] [--between-us N] [--words N] [--subagents N] [--pings N]
                     [--pong-extra TEXT]
                     [--write-bytes N] [--tool-call NAME JSON]... [--repeat-calls N]
                     [--calls-per-reply N] [--timings FILE] [--sizes FILE]
  --port PORT      port on 127.0.0.1 to listen on; 0 (the default) picks a free one
  --reply TEXT     the text every request gets (default: \"Hello!\"), streamed a word per event
  --reply-file F   the same, read from file F (for a reply longer than an argument may be)
  --words N        the text is \"word0 word1 …\" of N words instead of --reply's
  --between-us N   microseconds between streamed events (default 0: as fast as it can)
  --subagents N    the first request gets N spawn_agent calls instead; every later one the text
  --pings N        a request answering \"PING n\" (n up to N) gets PONG-n, for timing a
                   short answer; with --subagents, the message holding SEND gets the calls
                   and then \"Sent them.\"
  --pong-extra T   text after each PONG-n (a small code block, say)
  --write-bytes N  the first request gets a file_write call of big.txt with N bytes of lines
  --tool-call NAME JSON
                   a call of tool NAME with the arguments JSON; repeatable: the first
                   requests get the calls in the order given, then the text
  --repeat-calls N the --tool-call sequence N times over (default 1); {n} in JSON
                   becomes the round's number from 0, so no two rounds repeat a call
  --calls-per-reply N
                   answers with up to N calls at once, as a model calling tools in
                   parallel does (default 1)
  --timings FILE   appends a line per request answered: when the mock took it up (its
                   connection accepted, or it read, on a kept-alive one) and when its
                   answer was written (microseconds since the Unix epoch), then its path
  --sizes FILE     appends a line per model request: its body's bytes, then the bytes of the
                   tool results in its last message";

fn main() -> ExitCode {
    let mut port: u16 = 0;
    let mut reply = String::from("Hello!");
    let mut between = std::time::Duration::ZERO;
    let mut subagents: usize = 0;
    let mut pings: usize = 0;
    let mut pong_extra = String::new();
    let mut write_bytes: usize = 0;
    let mut timings = None;
    let mut sizes = None;
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut repeat_calls: usize = 1;
    let mut per_reply: usize = 1;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--tool-call" {
            let (Some(name), Some(json)) = (args.next(), args.next()) else {
                eprintln!("mock_provider: --tool-call needs a tool's name and its JSON\n{USAGE}");
                return ExitCode::from(2);
            };
            calls.push((name, json));
            continue;
        }
        let value = match arg.as_str() {
            "--port" | "--reply" | "--reply-file" | "--words" | "--between-us" | "--subagents"
            | "--pings" | "--write-bytes" | "--timings" | "--sizes" | "--repeat-calls"
            | "--calls-per-reply" | "--pong-extra" => args.next(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("mock_provider: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        };
        let Some(value) = value else {
            eprintln!("mock_provider: {arg} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        if arg == "--reply" {
            reply = value;
        } else if arg == "--pong-extra" {
            pong_extra = value;
        } else if arg == "--reply-file" {
            match std::fs::read_to_string(&value) {
                Ok(text) => reply = text,
                Err(e) => {
                    eprintln!("mock_provider: cannot read {value}: {e}");
                    return ExitCode::from(2);
                }
            }
        } else if arg == "--timings" || arg == "--sizes" {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&value);
            match file {
                Ok(file) if arg == "--sizes" => sizes = Some(file),
                Ok(file) => timings = Some(file),
                Err(e) => {
                    eprintln!("mock_provider: cannot write to {value}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        } else if arg == "--between-us" {
            match value.parse() {
                Ok(us) => between = std::time::Duration::from_micros(us),
                Err(_) => {
                    eprintln!("mock_provider: --between-us takes a number, not {value:?}");
                    return ExitCode::from(2);
                }
            }
        } else if arg == "--subagents"
            || arg == "--pings"
            || arg == "--words"
            || arg == "--write-bytes"
            || arg == "--repeat-calls"
            || arg == "--calls-per-reply"
        {
            match value.parse::<usize>() {
                Ok(n) if arg == "--pings" => pings = n,
                Ok(n) if arg == "--repeat-calls" => repeat_calls = n,
                Ok(n) if arg == "--calls-per-reply" => per_reply = n.max(1),
                Ok(n) if arg == "--write-bytes" => write_bytes = n,
                Ok(n) if arg == "--words" => {
                    reply = (0..n)
                        .map(|i| format!("word{i}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                }
                Ok(n) => subagents = n,
                Err(_) => {
                    eprintln!("mock_provider: {arg} takes a number, not {value:?}");
                    return ExitCode::from(2);
                }
            }
        } else if let Ok(parsed) = value.parse() {
            port = parsed;
        } else {
            eprintln!("mock_provider: --port takes a number from 0 to 65535, not {value:?}");
            return ExitCode::from(2);
        }
    }

    let mock = match MockProvider::bind_with_threads(port, 2) {
        Ok(mock) => mock,
        Err(e) => {
            eprintln!("mock_provider: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    mock.disable_recording();
    if let Some(file) = timings {
        mock.log_timings(file);
    }
    if let Some(file) = sizes {
        mock.log_sizes(file);
    }
    let scripted = match scripted_calls(&calls, repeat_calls) {
        Ok(scripted) => scripted,
        Err(why) => {
            eprintln!("mock_provider: {why}");
            return ExitCode::from(2);
        }
    };
    let spawns = Reply::tool_calls((0..subagents).map(|i| {
        (
            "spawn_agent",
            serde_json::json!({"task": format!("part {i}: write what you find")}),
        )
    }));
    let reply = Reply::text(reply).delay_between_events(between);
    if write_bytes > 0 {
        mock.push(Reply::tool_calls([(
            "file_write",
            serde_json::json!({"path": "big.txt", "content": lines_of(write_bytes)}),
        )]));
    }
    for batch in scripted.chunks(per_reply) {
        mock.push(Reply::tool_calls(batch.iter().cloned()));
    }
    if pings == 0 && subagents > 0 {
        mock.push(spawns);
    } else if pings > 0 {
        // Every answer of the main session is chosen by the message it answers, so the runs'
        // requests, in whatever order they come, take none of them.
        if subagents > 0 {
            mock.push_for_latest("SEND", spawns);
            mock.push_for_latest("SEND", Reply::text("Sent them."));
        }
        for n in 1..=pings {
            let pong = format!("PONG-{n}{pong_extra}");
            mock.push_for_latest(&format!("PING {n}"), Reply::text(pong));
        }
    }
    mock.repeat(reply);
    // Stdout is line-buffered, so the URL is visible to a reading script at once.
    println!("{}", mock.base_url());
    // The server runs on its own thread; this one only keeps the process alive.
    loop {
        std::thread::park();
    }
}

/// The `--tool-call` sequence `times` over, each round's `{n}` replaced by its number.
fn scripted_calls(
    calls: &[(String, String)],
    times: usize,
) -> Result<Vec<(String, serde_json::Value)>, String> {
    let mut scripted = Vec::with_capacity(calls.len() * times);
    for round in 0..times {
        for (name, json) in calls {
            let json = json.replace("{n}", &round.to_string());
            let args = serde_json::from_str(&json).map_err(|e| {
                format!("--tool-call {name}: the arguments are not JSON ({e}): {json}")
            })?;
            scripted.push((name.clone(), args));
        }
    }
    Ok(scripted)
}

/// About `bytes` bytes of numbered lines, as a generated file has.
fn lines_of(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 64);
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "line {n}: some generated content of a file, 64 bytes or so\n"
        ));
        n += 1;
    }
    text
}
