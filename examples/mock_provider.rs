//! A standalone mock model provider for whole-process benchmarks.
//!
//! `cargo run --example mock_provider -- --port 0 --reply "Hello"` serves the same text reply
//! to every model request, in whichever wire format the request's path asks for (Anthropic,
//! OpenAI Chat Completions or Ollama), and prints its base URL as the first line on stdout so
//! a script can point tern at it. It answers with no artificial delay and keeps no request
//! bodies, so a long benchmark neither waits on it nor grows its memory.

// The benchmark uses a small part of the test-support API.
#[allow(dead_code, unused_imports)]
#[path = "../tests/support/mock_provider/mod.rs"]
mod mock_provider;

use mock_provider::{MockProvider, Reply};
use std::process::ExitCode;

const USAGE: &str =
    "usage: mock_provider [--port PORT] [--reply TEXT] [--between-us N] [--words N] [--subagents N] [--pings N]
                     [--write-bytes N] [--timings FILE]
  --port PORT      port on 127.0.0.1 to listen on; 0 (the default) picks a free one
  --reply TEXT     the text every request gets (default: \"Hello!\"), streamed a word per event
  --reply-file F   the same, read from file F (for a reply longer than an argument may be)
  --words N        the text is \"word0 word1 …\" of N words instead of --reply's
  --between-us N   microseconds between streamed events (default 0: as fast as it can)
  --subagents N    the first request gets N spawn_agent calls instead; every later one the text
  --pings N        a request answering \"PING n\" (n up to N) gets PONG-n, for timing a
                   short answer; with --subagents, the message holding SEND gets the calls
                   and then \"Sent them.\"
  --write-bytes N  the first request gets a file_write call of big.txt with N bytes of lines
  --timings FILE   appends a line per request answered: when the mock took it up (its
                   connection accepted, or it read, on a kept-alive one) and when its
                   answer was written (microseconds since the Unix epoch), then its path";

fn main() -> ExitCode {
    let mut port: u16 = 0;
    let mut reply = String::from("Hello!");
    let mut between = std::time::Duration::ZERO;
    let mut subagents: usize = 0;
    let mut pings: usize = 0;
    let mut write_bytes: usize = 0;
    let mut timings = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--port" | "--reply" | "--reply-file" | "--words" | "--between-us" | "--subagents"
            | "--pings" | "--write-bytes" | "--timings" => args.next(),
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
        } else if arg == "--reply-file" {
            match std::fs::read_to_string(&value) {
                Ok(text) => reply = text,
                Err(e) => {
                    eprintln!("mock_provider: cannot read {value}: {e}");
                    return ExitCode::from(2);
                }
            }
        } else if arg == "--timings" {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&value);
            match file {
                Ok(file) => timings = Some(file),
                Err(e) => {
                    eprintln!("mock_provider: cannot write timings to {value}: {e}");
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
        {
            match value.parse::<usize>() {
                Ok(n) if arg == "--pings" => pings = n,
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
            mock.push_for_latest(&format!("PING {n}"), Reply::text(format!("PONG-{n}")));
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
