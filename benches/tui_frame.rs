//! Drawing a frame of the terminal interface with a 10,000-message transcript open, at
//! 120x40: scrolled to the end and to the middle (goal ≤ 2 ms a frame), plus the first
//! frame at each place (cells not rendered yet) and streaming into the last cell.
//!
//! Run with `cargo bench --bench tui_frame`.

use criterion::Criterion;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::hint::black_box;
use std::time::Instant;
use tern::domain::{ContentBlock, ToolCall, ToolResult};
use tern::session::SessionEvent;
use tern::store::{JournalEvent, JournalRecord};
use tern::tui::app::App;
use tern::tui::popup::FileIndex;
use tern::tui::status::Status;
use tern::tui::transcript::{Scroll, Transcript, cells_from_history};
use tern::tui::{Theme, view};

const MESSAGES: usize = 10_000;

/// A stored session of `MESSAGES` messages: questions, markdown answers with code, and a
/// tool call with its result every fifth answer.
fn history() -> Vec<JournalRecord> {
    let mut events = Vec::new();
    for i in 0..MESSAGES / 2 {
        events.push(JournalEvent::InputAccepted {
            sender: tern::domain::Sender::local_user(),
            audience: tern::domain::Audience::Personal,
            kind: tern::domain::InputKind::Person,
            text: format!("Question {i}: why does the scheduler drop the task when full?"),
        });
        let mut content = vec![ContentBlock::Text {
            text: format!(
                "## Finding {i}\n\nThe queue is **bounded**; `push` returns an error the caller \
                 ignores:\n\n- it logs nothing\n- the task is dropped\n\n```rust\nfn push(&mut \
                 self, task: Task) -> Result<(), Full> {{\n    self.items.push(task);\n    \
                 Ok(())\n}}\n```\n"
            ),
        }];
        if i % 5 == 0 {
            content.push(ContentBlock::ToolUse(ToolCall {
                id: format!("c{i}"),
                name: "grep".into(),
                input: serde_json::json!({"pattern": "fn push"}),
            }));
        }
        events.push(JournalEvent::AssistantMessage {
            model: "m".into(),
            content,
        });
        if i % 5 == 0 {
            events.push(JournalEvent::ToolResults {
                results: vec![ToolResult::ok(format!("c{i}"), "src/queue.rs:42: fn push")],
                took_ms: None,
            });
        }
    }
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| JournalRecord {
            seq: i as u64 + 1,
            at_ms: i as i64,
            event,
        })
        .collect()
}

fn app(records: &[JournalRecord]) -> App {
    let status = Status {
        model: "claude-sonnet-4-5".into(),
        provider: "anthropic".into(),
        context_window: 200_000,
        ..Status::default()
    };
    let mut app = App::new(
        Theme::default(),
        "/tmp".into(),
        FileIndex::of(Vec::new()),
        status,
    );
    app.transcript = Transcript::with_cells(cells_from_history(records));
    app
}

fn frame(app: &mut App, terminal: &mut Terminal<TestBackend>) {
    let now = tokio::time::Instant::now();
    app.tick(now);
    terminal.draw(|f| view::draw(f, app, now)).expect("a frame");
}

fn main() {
    let records = history();
    let built = Instant::now();
    let mut at_end = app(&records);
    println!(
        "tui_frame: {} cells from {MESSAGES} messages built in {:.1} ms",
        at_end.transcript.cells.len(),
        built.elapsed().as_secs_f64() * 1e3
    );
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).expect("a terminal");
    let cold = Instant::now();
    frame(&mut at_end, &mut terminal);
    println!(
        "tui_frame: first frame at the end: {:.2} ms",
        cold.elapsed().as_secs_f64() * 1e3
    );
    let mut middle = app(&records);
    middle.transcript.scroll = Scroll::At {
        cell: middle.transcript.cells.len() / 2,
        line: 0,
    };
    let cold = Instant::now();
    frame(&mut middle, &mut terminal);
    println!(
        "tui_frame: first frame in the middle: {:.2} ms",
        cold.elapsed().as_secs_f64() * 1e3
    );

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("tui_frame");
    group.bench_function("frame_10k_messages_at_end", |b| {
        b.iter(|| frame(black_box(&mut at_end), &mut terminal))
    });
    group.bench_function("frame_10k_messages_in_the_middle", |b| {
        b.iter(|| frame(black_box(&mut middle), &mut terminal))
    });
    // A reply streaming into the last cell, a word per frame, in paragraphs of 60 words
    // (only the paragraph being written is rendered again each frame).
    let mut streaming = app(&records);
    let now = tokio::time::Instant::now();
    streaming.session_event(
        &SessionEvent::TextDelta {
            text: "Streaming: ".into(),
        },
        now,
    );
    let mut words = 0usize;
    group.bench_function("frame_10k_messages_streaming_a_word", |b| {
        b.iter(|| {
            words += 1;
            let text = if words.is_multiple_of(60) {
                " word.\n\n"
            } else {
                " word"
            };
            streaming.session_event(&SessionEvent::TextDelta { text: text.into() }, now);
            frame(black_box(&mut streaming), &mut terminal)
        })
    });
    group.finish();
    criterion.final_summary();
}
