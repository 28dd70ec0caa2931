//! The script's vocabulary: a [`Reply`] describes one answer independently of the wire
//! format (content blocks, stop reason, usage) plus how it is delivered (status, headers,
//! delays, a cut or a stall). Rendering into bytes happens per request in `wire`.

use serde_json::Value;
use std::time::Duration;

/// Why a scripted message stops; rendered as each format spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    EndTurn,
    ToolUse,
    /// Cut at the output limit (`max_tokens` / `length`).
    MaxTokens,
    Refusal,
}

/// One scripted answer to one model request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(super) body: Body,
    pub(super) headers: Vec<(String, String)>,
    pub(super) pacing: Pacing,
}

#[derive(Debug, Clone)]
pub(super) enum Body {
    Message(Message),
    Error { status: u16, body: String },
    Raw { content_type: String, body: String },
}

#[derive(Debug, Clone, Default)]
pub(super) struct Message {
    pub(super) blocks: Vec<Block>,
    pub(super) stop: Option<Stop>,
    /// `[input, output, cache_read, cache_creation]`.
    pub(super) usage: Option<[u64; 4]>,
    /// `(kind, message)` of an in-stream error sent instead of the normal ending.
    pub(super) stream_error: Option<(String, String)>,
}

#[derive(Debug, Clone)]
pub(super) enum Block {
    Thinking {
        text: String,
        signature: String,
    },
    Text(String),
    Tool {
        id: Option<String>,
        name: String,
        args: Value,
    },
}

impl Block {
    /// Models emit thinking, then text, then tool calls; rendering follows that order whatever
    /// order the builder calls came in.
    pub(super) fn rank(&self) -> u8 {
        match self {
            Block::Thinking { .. } => 0,
            Block::Text(_) => 1,
            Block::Tool { .. } => 2,
        }
    }
}

/// Timing and truncation of a reply.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pacing {
    pub(super) before: Duration,
    pub(super) after_headers: Duration,
    pub(super) between: Duration,
    pub(super) cut_after: Option<usize>,
    pub(super) stall_after: Option<usize>,
}

impl Reply {
    fn message(block: Block) -> Self {
        Self::from_body(Body::Message(Message {
            blocks: vec![block],
            ..Message::default()
        }))
    }

    fn from_body(body: Body) -> Self {
        Self {
            body,
            headers: Vec::new(),
            pacing: Pacing::default(),
        }
    }

    /// A plain text answer that ends the turn.
    pub fn text(text: impl Into<String>) -> Self {
        Self::message(Block::Text(text.into()))
    }

    /// A thinking block closed by `signature` (Anthropic's `signature_delta`).
    pub fn thinking(thinking: impl Into<String>, signature: impl Into<String>) -> Self {
        Self::message(Block::Thinking {
            text: thinking.into(),
            signature: signature.into(),
        })
    }

    /// One tool call with an id the server assigns (`toolu_mock_N` / `call_mock_N`).
    pub fn tool_call(name: impl Into<String>, args: Value) -> Self {
        Self::tool_calls([(name, args)])
    }

    /// Several tool calls in one reply, in order, with server-assigned ids.
    pub fn tool_calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        let blocks = calls
            .into_iter()
            .map(|(name, args)| Block::Tool {
                id: None,
                name: name.into(),
                args,
            })
            .collect();
        Self::from_body(Body::Message(Message {
            blocks,
            ..Message::default()
        }))
    }

    /// An HTTP error with `body` sent verbatim as JSON (write it in the provider's shape).
    pub fn error(status: u16, body: impl Into<String>) -> Self {
        Self::from_body(Body::Error {
            status,
            body: body.into(),
        })
    }

    /// Arbitrary bytes under a 200 `text/event-stream`, split into events at blank lines.
    pub fn raw_sse(body: impl Into<String>) -> Self {
        Self::raw("text/event-stream", body)
    }

    /// Arbitrary bytes under a 200 with the given content type, chunked at blank lines.
    pub fn raw(content_type: impl Into<String>, body: impl Into<String>) -> Self {
        Self::from_body(Body::Raw {
            content_type: content_type.into(),
            body: body.into(),
        })
    }

    fn message_mut(&mut self, what: &str) -> &mut Message {
        match &mut self.body {
            Body::Message(message) => message,
            _ => panic!("Reply::{what} applies to model replies, not to error or raw replies"),
        }
    }

    /// Adds a text block (rendered after thinking and before tool calls).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.message_mut("with_text")
            .blocks
            .push(Block::Text(text.into()));
        self
    }

    /// Adds a thinking block (rendered first).
    pub fn with_thinking(
        mut self,
        thinking: impl Into<String>,
        signature: impl Into<String>,
    ) -> Self {
        let block = Block::Thinking {
            text: thinking.into(),
            signature: signature.into(),
        };
        self.message_mut("with_thinking").blocks.push(block);
        self
    }

    /// Adds a tool call with a server-assigned id.
    pub fn with_tool_call(mut self, name: impl Into<String>, args: Value) -> Self {
        let block = Block::Tool {
            id: None,
            name: name.into(),
            args,
        };
        self.message_mut("with_tool_call").blocks.push(block);
        self
    }

    /// Adds a tool call with a fixed id (Ollama's format carries no ids and drops it).
    pub fn with_tool_call_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        args: Value,
    ) -> Self {
        let block = Block::Tool {
            id: Some(id.into()),
            name: name.into(),
            args,
        };
        self.message_mut("with_tool_call_id").blocks.push(block);
        self
    }

    /// Overrides the stop reason; by default it is `ToolUse` when the reply has tool calls and
    /// `EndTurn` otherwise.
    pub fn stop(mut self, stop: Stop) -> Self {
        self.message_mut("stop").stop = Some(stop);
        self
    }

    /// Stops at the output limit: the reply is incomplete.
    pub fn stop_reason_max_tokens(self) -> Self {
        self.stop(Stop::MaxTokens)
    }

    /// Fixes the reported usage. Without it, input is the request body's bytes / 4 and output
    /// the reply's characters / 4, so that a growing history reports growing input.
    pub fn usage(mut self, input: u64, output: u64, cache_read: u64, cache_creation: u64) -> Self {
        self.message_mut("usage").usage = Some([input, output, cache_read, cache_creation]);
        self
    }

    /// After the content, sends an in-stream error (HTTP status stays 200) instead of the
    /// normal ending: `event: error` for Anthropic, a `{"error":…}` chunk for OpenAI, an
    /// `{"error":…}` line for Ollama. `kind` is e.g. `overloaded_error`.
    pub fn stream_error(mut self, kind: impl Into<String>, message: impl Into<String>) -> Self {
        self.message_mut("stream_error").stream_error = Some((kind.into(), message.into()));
        self
    }

    /// Adds a response header (any reply kind).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits before sending the status line (a slow prefill).
    pub fn delay_before(mut self, delay: Duration) -> Self {
        self.pacing.before = delay;
        self
    }

    /// Sends the headers, then waits before the first event (a slow first token).
    pub fn delay_after_headers(mut self, delay: Duration) -> Self {
        self.pacing.after_headers = delay;
        self
    }

    /// Waits between consecutive events.
    pub fn delay_between_events(mut self, delay: Duration) -> Self {
        self.pacing.between = delay;
        self
    }

    /// Sends the first `events` events (pings and `message_start` count) and closes the
    /// connection without the terminating chunk: the client sees an unexpected EOF. With
    /// `events` at or past the reply's length, every event goes out but the ending still
    /// does not.
    pub fn cut_after_events(mut self, events: usize) -> Self {
        self.pacing.cut_after = Some(events);
        self
    }

    /// Sends the first `events` events and then nothing, holding the connection open until
    /// the client gives up or the server stops: a stalled stream for watchdog tests.
    pub fn stall_after_events(mut self, events: usize) -> Self {
        self.pacing.stall_after = Some(events);
        self
    }
}
