//! `tern sessions`: list stored sessions and show one's transcript.

use super::Outcome;
use super::render::{clip, summarize_input};
use super::setup;
use crate::domain::ContentBlock;
use crate::store::{JournalEvent, JournalRecord, SessionMeta};

#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// List sessions, most recently used first.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's transcript.
    Show {
        /// Session id (a unique prefix is enough).
        id: String,
        /// Print the journal as JSON records instead of a transcript.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: SessionsCommand) -> anyhow::Result<Outcome> {
    let loaded = setup::load()?;
    let store = setup::open_store(&loaded.paths)?;
    match command {
        SessionsCommand::List { json } => {
            let sessions = store.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sessions)?);
            } else if sessions.is_empty() {
                println!("No sessions yet. Start one with `tern run \"…\"` or `tern`.");
            } else {
                print!("{}", table(&sessions, jiff::Timestamp::now()));
            }
        }
        SessionsCommand::Show { id, json } => {
            let meta = store.resolve(&id)?;
            let records = store.load(&meta.id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&records)?);
            } else {
                print!("{}", transcript(&meta, &records));
            }
        }
    }
    Ok(Outcome::Success)
}

/// The session list as aligned columns.
fn table(sessions: &[SessionMeta], now: jiff::Timestamp) -> String {
    let mut out = format!(
        "{:<10} {:<10} {:>6}  {:<40} {}\n",
        "ID", "UPDATED", "INPUTS", "TITLE", "PROJECT"
    );
    for meta in sessions {
        let title = if meta.title.is_empty() {
            "(untitled)"
        } else {
            &meta.title
        };
        out.push_str(&format!(
            "{:<10} {:<10} {:>6}  {:<40} {}\n",
            meta.id.short(),
            ago(meta.updated_at_ms, now),
            meta.input_count,
            clip(title, 40),
            meta.project_dir.display()
        ));
    }
    out
}

/// "5m ago"-style age of a timestamp in milliseconds.
fn ago(at_ms: i64, now: jiff::Timestamp) -> String {
    let secs = (now.as_millisecond() - at_ms).max(0) / 1000;
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

/// A readable transcript of a session's journal.
fn transcript(meta: &SessionMeta, records: &[JournalRecord]) -> String {
    let mut out = format!(
        "session {}\nproject {}\n",
        meta.id,
        meta.project_dir.display()
    );
    if !meta.title.is_empty() {
        out.push_str(&format!("title   {}\n", meta.title));
    }
    for record in records {
        match &record.event {
            JournalEvent::InputAccepted { sender, text, .. } => {
                out.push_str(&format!("\n› {}: {}\n", sender.name, text.trim_end()));
            }
            JournalEvent::AssistantMessage { content, .. } => {
                for block in content {
                    match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
                            out.push_str(&format!("\n{}\n", text.trim_end()));
                        }
                        ContentBlock::ToolUse(call) => {
                            out.push_str(&format!(
                                "▸ {} {}\n",
                                call.name,
                                summarize_input(&call.input)
                            ));
                        }
                        _ => {}
                    }
                }
            }
            JournalEvent::ToolResults { results } => {
                for result in results {
                    let mark = if result.is_error { "✗" } else { "✓" };
                    let first = result.content.lines().next().unwrap_or("");
                    out.push_str(&format!("  {mark} {}\n", clip(first, 100)));
                }
            }
            JournalEvent::TurnFailed { category, message } => {
                out.push_str(&format!("  (turn failed, {category}: {message})\n"));
            }
            JournalEvent::Message { message } => {
                out.push_str(&format!("\n{}\n", message.text().trim_end()));
            }
            JournalEvent::Usage { .. }
            | JournalEvent::TurnCompleted
            | JournalEvent::TitleChanged { .. }
            | JournalEvent::WorkingDirectoryChanged { .. }
            | JournalEvent::FileTouched { .. } => {}
        }
    }
    out
}
