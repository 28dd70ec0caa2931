//! Writes a long stored session for whole-process measurements of the terminal interface:
//! `cargo run --release --example seed_session -- --messages 10000 --project DIR` with
//! `TERN_HOME` set adds one session of that many messages (questions, markdown answers with
//! code, tool calls with their output) for the project and prints its id.

use std::path::PathBuf;
use tern::config::{Environment, Paths};
use tern::domain::{
    Audience, ContentBlock, InputKind, Sender, SessionId, SessionKey, ToolCall, ToolResult,
};
use tern::store::{JournalEvent, SessionMeta, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut messages = 10_000usize;
    let mut project = std::env::current_dir()?;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--messages", Some(n)) => messages = n.parse()?,
            ("--project", Some(dir)) => project = PathBuf::from(dir).canonicalize()?,
            _ => return Err("usage: seed_session [--messages N] [--project DIR]".into()),
        }
    }
    let paths = Paths::from_env(&Environment::from_process())?;
    let store = Store::open(&paths.db_file)?;
    let id = SessionId::generate();
    let now = jiff::Timestamp::now().as_millisecond();
    store.create_session(&SessionMeta::new(
        id.clone(),
        SessionKey::cli(&id),
        project,
        now,
    ))?;
    let mut batch = Vec::new();
    for i in 0..messages / 2 {
        batch.push(JournalEvent::InputAccepted {
            sender: Sender::local_user(),
            audience: Audience::Personal,
            kind: InputKind::Person,
            text: format!(
                "Question {i}: why does the scheduler drop the task when the queue is full?"
            ),
        });
        let mut content = vec![ContentBlock::Text {
            text: format!(
                "## Finding {i}\n\nThe queue is **bounded**, and `push` returns an error the \
                 caller ignores:\n\n- it logs nothing\n- the task is dropped\n\n```rust\nfn \
                 push(&mut self, task: Task) -> Result<(), Full> {{\n    if self.len() == \
                 self.cap {{ return Err(Full(task)); }}\n    self.items.push(task);\n    \
                 Ok(())\n}}\n```\n"
            ),
        }];
        if i % 5 == 0 {
            content.push(ContentBlock::ToolUse(ToolCall {
                id: format!("call-{i}"),
                name: "grep".into(),
                input: serde_json::json!({"pattern": "fn push", "path": "src"}),
            }));
        }
        batch.push(JournalEvent::AssistantMessage {
            model: "claude-sonnet-4-5".into(),
            content,
        });
        if i % 5 == 0 {
            batch.push(JournalEvent::ToolResults {
                results: vec![ToolResult::ok(
                    format!("call-{i}"),
                    "src/queue.rs:42: fn push(&mut self, task: Task)",
                )],
                took_ms: None,
            });
        }
        batch.push(JournalEvent::completed());
        if batch.len() >= 400 {
            store.append_batch(&id, &batch)?;
            batch.clear();
        }
    }
    store.append_batch(&id, &batch)?;
    println!("{id}");
    Ok(())
}
