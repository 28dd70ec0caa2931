//! Rendering session events for a terminal or a program: plain text, one JSON result, or a
//! stream of JSON lines.

pub use crate::domain::call_text::{clip, summarize_input};
use crate::domain::{ErrorCategory, RunId, SessionId, TurnStop, Usage};
use crate::session::SessionEvent;
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

/// How a headless run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// The answer streamed to stdout; tool activity and errors on stderr.
    #[default]
    Text,
    /// One JSON object with the result when the turn ends.
    Json,
    /// One JSON object per line for every event, as it happens.
    StreamJson,
}

/// How a turn ended, as seen by the renderer.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEnd {
    Completed,
    /// The loop guard ended it quietly: the model's last text is the answer, but the work
    /// may be unfinished.
    GuardEnded,
    Failed(ErrorCategory),
}

/// What stands on standard output for a turn the loop guard ended before the model wrote
/// any text, so that a script reading the answer never finds nothing.
pub const NO_ANSWER: &str = "(no answer: tern ended the turn before the model wrote one)";

/// Prints events in one output format.
pub struct Renderer {
    format: OutputFormat,
    session_id: Option<SessionId>,
    started: Instant,
    /// Whether the text printed so far ends with a newline (text format).
    at_line_start: bool,
    /// Text format on a terminal: deltas are printed as they come. Otherwise each round's text
    /// waits in `pending` until the round is committed, so a retried attempt never leaves its
    /// partial text in a file or pipe.
    live: bool,
    pending: String,
    /// Part of the round in `pending` was dropped (see [`Renderer::void_cut`]).
    voided: bool,
    tool_calls: usize,
    usage: Usage,
    sink: Sink,
}

/// Where a renderer writes what goes to standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Stdout,
    /// Nowhere: tests of what a renderer decides must not print.
    #[cfg(test)]
    Discard,
}

impl Sink {
    fn writer(self) -> Box<dyn Write> {
        match self {
            Sink::Stdout => Box::new(std::io::stdout().lock()),
            #[cfg(test)]
            Sink::Discard => Box::new(std::io::sink()),
        }
    }
}

impl Renderer {
    pub fn new(format: OutputFormat) -> Self {
        Self {
            format,
            session_id: None,
            started: Instant::now(),
            at_line_start: true,
            live: std::io::stdout().is_terminal(),
            pending: String::new(),
            voided: false,
            tool_calls: 0,
            usage: Usage::default(),
            sink: Sink::Stdout,
        }
    }

    /// A renderer that decides as [`Renderer::new`]'s does and prints nothing to stdout.
    #[cfg(test)]
    pub fn discarding(format: OutputFormat) -> Self {
        Self {
            sink: Sink::Discard,
            ..Self::new(format)
        }
    }

    /// Announces the session before anything else happens.
    pub fn session(&mut self, id: &SessionId, resumed: bool, model: &str, project_dir: &Path) {
        self.session_id = Some(id.clone());
        if self.format == OutputFormat::StreamJson {
            line(
                self.sink,
                &json!({
                    "type": "session",
                    "session_id": id,
                    "resumed": resumed,
                    "model": model,
                    "project_dir": project_dir,
                }),
            );
        }
    }

    /// Prints one event; returns how the turn ended once it has.
    pub fn event(&mut self, event: &SessionEvent) -> Option<TurnEnd> {
        if let SessionEvent::Usage { usage, .. } = event {
            self.usage.add(usage);
        }
        if let SessionEvent::ToolCall { .. } = event {
            self.tool_calls += 1;
        }
        match self.format {
            OutputFormat::StreamJson => self.stream_json(event),
            OutputFormat::Text => self.text(event),
            OutputFormat::Json => {}
        }
        match event {
            SessionEvent::TurnCompleted { text, stop, .. } => {
                self.json_result(Some(text), None, "", *stop);
                match stop {
                    TurnStop::LoopGuard { .. } => Some(TurnEnd::GuardEnded),
                    _ => Some(TurnEnd::Completed),
                }
            }
            SessionEvent::TurnFailed {
                category,
                message,
                stop,
            } => {
                self.json_result(None, Some(*category), message, *stop);
                Some(TurnEnd::Failed(*category))
            }
            _ => None,
        }
    }

    /// A subagent run the turn sent started (stream-json only).
    pub fn subagent_started(&self, run: &RunId) {
        if self.format == OutputFormat::StreamJson {
            line(
                self.sink,
                &json!({"type": "subagent_started", "run_id": run.as_str()}),
            );
        }
    }

    /// A run ended, as its final status says (stream-json only).
    pub fn subagent_finished(&self, run: &RunId, status: &serde_json::Value) {
        if self.format == OutputFormat::StreamJson {
            line(
                self.sink,
                &json!({
                    "type": "subagent_finished",
                    "run_id": run.as_str(),
                    "agent": status["agent"],
                    "state": status["state"],
                    "result_path": status["result_path"],
                    "branch": status["branch"],
                }),
            );
        }
    }

    /// What a run's session journaled before it was followed, record by record, tagged with
    /// the run (stream-json only).
    pub fn subagent_history(
        &self,
        run: &RunId,
        records: &[crate::gateway::catalog::JournalRecord],
    ) {
        if self.format != OutputFormat::StreamJson {
            return;
        }
        for record in records {
            line(
                self.sink,
                &json!({
                    "type": "subagent_journal",
                    "run_id": run.as_str(),
                    "seq": record.seq,
                    "event": record.event,
                }),
            );
        }
    }

    /// An event of a run's session, tagged with the run (stream-json only).
    pub fn subagent_event(&self, run: &RunId, event: &SessionEvent) {
        if self.format != OutputFormat::StreamJson
            || matches!(event, SessionEvent::PhaseChanged { .. })
        {
            return;
        }
        if let Ok(mut value) = serde_json::to_value(event) {
            value["run_id"] = json!(run.as_str());
            line(self.sink, &value);
        }
    }

    fn stream_json(&self, event: &SessionEvent) {
        if matches!(event, SessionEvent::PhaseChanged { .. }) {
            return;
        }
        match serde_json::to_value(event) {
            Ok(value) => line(self.sink, &value),
            Err(err) => tracing::error!(%err, "event not serializable"),
        }
    }

    fn text(&mut self, event: &SessionEvent) {
        let mut out = self.sink.writer();
        match event {
            SessionEvent::TextDelta { text } if self.live => {
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                self.at_line_start = text.ends_with('\n');
            }
            SessionEvent::TextDelta { text } => self.pending.push_str(text),
            SessionEvent::Retry {
                attempt,
                delay,
                message,
                ..
            } => {
                self.void_partial(&mut out);
                eprintln!(
                    "tern: {message}; retrying in {:.1}s (attempt {attempt})",
                    delay.as_secs_f64()
                );
            }
            SessionEvent::TextReadAsCalls { .. } => self.void_partial(&mut out),
            SessionEvent::Fallback { model, message, .. } => {
                self.void_partial(&mut out);
                eprintln!("tern: {message}; switching to the fallback model {model}");
            }
            SessionEvent::ToolCall { name, input, .. } => {
                self.commit(&mut out);
                eprintln!("▸ {name} {}", summarize_input(input));
            }
            SessionEvent::ToolResult {
                content, is_error, ..
            } => {
                let first = content.lines().next().unwrap_or("");
                let more = content.lines().count().saturating_sub(1);
                let mark = if *is_error { "✗" } else { "✓" };
                let more = if more > 0 {
                    format!(" (+{more} lines)")
                } else {
                    String::new()
                };
                eprintln!("  {mark} {}{more}", clip(first, 100));
            }
            SessionEvent::TurnCompleted { text, stop, .. } => {
                // Not shown yet and only partly here: the answer as the turn ended with it.
                if self.voided && !self.live {
                    self.pending.clone_from(text);
                }
                self.commit(&mut out);
                if let Some(summary) = stop.guard_summary() {
                    if text.trim().is_empty() {
                        let _ = writeln!(out, "{NO_ANSWER}");
                        let _ = out.flush();
                    }
                    eprintln!("tern: {summary}");
                }
                self.end_line(&mut out);
            }
            SessionEvent::TurnFailed { message, stop, .. } => {
                self.void_partial(&mut out);
                eprintln!("tern: the turn failed ({stop}): {message}");
            }
            SessionEvent::Compacted { .. } => {
                if let Some(summary) = event.compaction_summary() {
                    eprintln!("tern: {summary}");
                }
            }
            _ => {}
        }
    }

    /// Prints the text of a round that is now part of the history.
    fn commit(&mut self, out: &mut impl Write) {
        if !self.pending.is_empty() {
            let _ = out.write_all(self.pending.as_bytes());
            let _ = out.flush();
            self.at_line_start = self.pending.ends_with('\n');
            self.pending.clear();
        }
        self.end_line(out);
    }

    /// Drops the text of an attempt that will not be kept; on a terminal, where it was
    /// already shown, says so.
    fn void_partial(&mut self, out: &mut impl Write) {
        self.pending.clear();
        if !self.at_line_start {
            self.end_line(out);
            eprintln!("tern: (the partial answer above was not kept)");
        }
    }

    /// Drops what the feed brought of a round that was not journaled: a model call cut by a
    /// change of owner (`owner_left`; the question is asked again, and on a terminal, where
    /// the text was shown, it says so), or a round this reader fell behind in, whose end
    /// then prints the turn's answer whole.
    pub fn void_cut(&mut self, owner_left: bool) {
        self.pending.clear();
        self.voided = true;
        if !self.at_line_start {
            let mut out = self.sink.writer();
            self.end_line(&mut out);
            if owner_left {
                eprintln!(
                    "tern: (the tern that ran this turn quit; the partial answer above was not \
                     kept, and the question is asked again)"
                );
            }
        }
    }

    fn end_line(&mut self, out: &mut impl Write) {
        if !self.at_line_start {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            self.at_line_start = true;
        }
    }

    fn json_result(
        &self,
        text: Option<&str>,
        category: Option<ErrorCategory>,
        message: &str,
        stop: TurnStop,
    ) {
        if self.format != OutputFormat::Json {
            return;
        }
        let mut value = json!({
            "type": "result",
            "session_id": self.session_id,
            "is_error": category.is_some(),
            "result": text.unwrap_or(""),
            "tool_calls": self.tool_calls,
            "usage": self.usage,
            "duration_ms": self.started.elapsed().as_millis() as u64,
            "stop": stop,
        });
        if let Some(category) = category {
            value["category"] = json!(category);
            value["error"] = json!(message);
        }
        line(self.sink, &value);
    }
}

/// Writes `text` to stdout. A reader that went away (`tern sessions show … | head`) is not
/// an error: there is no one left to tell.
pub fn print_out(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes one JSON value and a newline to `sink`.
fn line(sink: Sink, value: &serde_json::Value) {
    let mut out = sink.writer();
    let _ = serde_json::to_writer(&mut out, value);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}
