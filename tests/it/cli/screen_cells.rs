//! What a real terminal shows of a reply streamed in pieces: tmux, like many terminals, joins
//! the character written after a zero-width joiner into the joiner's cell, so a joiner left
//! at the end of a cell would put every later cell of the row off its place until a full
//! redraw. The interface draws none there.

use super::tmux::Tmux;
use super::*;

/// An Anthropic stream whose text arrives as `pieces`, one event each.
fn streamed(pieces: &[&str]) -> Reply {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut sse = event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "output_tokens": 1}}}),
    );
    sse.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for piece in pieces {
        sse.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    sse.push_str(&event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    sse.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
    ));
    sse.push_str(&event("message_stop", json!({"type": "message_stop"})));
    Reply::raw_sse(sse)
}

#[test]
fn a_zero_width_joiner_streamed_between_frames_leaves_no_stale_cells() {
    let cli = Cli::new();
    // Far enough apart that each piece is drawn in a frame of its own, the row redrawn
    // cell by cell from the one before.
    cli.mock.push(
        streamed(&["xx", "\u{200D}漢漢漢", " end"])
            .delay_between_events(Duration::from_millis(300)),
    );
    cli.mock.repeat(Reply::text("A title"));
    let tmux = Tmux::start(&cli, &[]);
    tmux.wait_for("message tern");
    tmux.type_text("say it");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for(" end");
    let row = screen
        .lines()
        .find(|line| line.contains(" end"))
        .unwrap_or_default();
    assert!(row.contains("xx漢漢漢 end"), "{row:?}\n{screen}");
    tmux.keys(&["C-d"]);
    tmux.wait_for("[tern exited 0]");
}
