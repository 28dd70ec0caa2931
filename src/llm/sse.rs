//! An incremental decoder for Server-Sent Events, the framing Anthropic and OpenAI stream in.
//!
//! Bytes arrive in arbitrary chunks: a line, a UTF-8 character or a `\r\n` pair may be split
//! between two of them, so the decoder buffers bytes until a line is complete and only then
//! turns it into text. It follows the WHATWG event-stream rules (lines end in LF, CRLF or a
//! lone CR; `:` starts a comment; one optional space after the field colon; consecutive `data`
//! lines join with `\n`; a blank line dispatches) with two allowances for real servers: data
//! lines padded with trailing spaces are trimmed, and a stream that ends without the final
//! blank line still delivers its last event.
//!
//! A line, and an event's joined data, may be at most [`MAX_LINE`] bytes; past that the
//! decoder fails instead of buffering without bound.
//!
//! [`SseWire`] puts this framing under a wire format's [`SseHandler`], which only has to read
//! the events; together they make the format's [`WireDecoder`].

use super::LlmError;
use super::decode::{Decoded, MAX_LINE, WireDecoder};
use super::error::line_too_long;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when the server sent none.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Turns a byte stream into [`SseEvent`]s, one chunk at a time.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the line not yet terminated.
    line: Vec<u8>,
    /// The last chunk ended in `\r`; a `\n` opening the next one belongs to that line end.
    after_cr: bool,
    /// Whether the first line was seen (a byte-order mark may open it).
    started: bool,
    event: Option<String>,
    data: String,
    /// Whether any `data` line was seen for the pending event (it may be empty).
    has_data: bool,
    /// A line or an event grew past [`MAX_LINE`]; everything after is ignored.
    failed: bool,
}

impl SseDecoder {
    /// Feeds the next chunk and appends every event it completes to `out`. Fails, for good,
    /// when a line or an event's data grows past [`MAX_LINE`].
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        if self.failed {
            return Ok(());
        }
        for &byte in chunk {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' => self.end_line(out)?,
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(out)?;
                }
                _ if self.line.len() >= MAX_LINE => return Err(self.fail()),
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    /// Ends the stream: a last line without its terminator and a last event without its blank
    /// line are still delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        if self.failed {
            return Ok(());
        }
        if !self.line.is_empty() {
            self.end_line(out)?;
        }
        self.dispatch(out);
        self.after_cr = false;
        Ok(())
    }

    /// Drops everything buffered and ignores the rest of the stream.
    fn fail(&mut self) -> LlmError {
        self.failed = true;
        self.line = Vec::new();
        self.data = String::new();
        line_too_long()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        let mut bytes = std::mem::take(&mut self.line);
        if !self.started {
            self.started = true;
            if bytes.starts_with(b"\xEF\xBB\xBF") {
                bytes.drain(..3);
            }
        }
        if bytes.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let line = String::from_utf8_lossy(&bytes);
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.data.len() + value.len() >= MAX_LINE {
                    return Err(self.fail());
                }
                if self.has_data {
                    self.data.push('\n');
                }
                // Some servers pad data lines with spaces; every payload we read is JSON or a
                // sentinel, where trailing blanks carry no meaning.
                self.data.push_str(value.trim_end_matches([' ', '\t']));
                self.has_data = true;
            }
            // `id` and `retry` matter only to clients that reconnect, which we never do: a
            // model reply cannot be resumed.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event: event.unwrap_or_else(|| "message".to_string()),
            data: std::mem::take(&mut self.data),
        });
    }
}

/// What an SSE-framed wire format does with its events.
pub(crate) trait SseHandler: Send + 'static {
    /// Reads one event: `name` is its `event` field, `data` its payload, trimmed and never
    /// empty. An `Err` is yielded as the item that ends the stream.
    fn event(&mut self, name: &str, data: &str, out: &mut Vec<Decoded>) -> Result<(), LlmError>;

    /// The body ended after its last event: closes what the format leaves implicit.
    fn end(&mut self, out: &mut Vec<Decoded>);
}

/// The [`WireDecoder`] of an SSE-framed format: the framing here, the events read by `H`.
#[derive(Debug, Default)]
pub(crate) struct SseWire<H> {
    framing: SseDecoder,
    handler: H,
}

impl<H: SseHandler> SseWire<H> {
    fn dispatch(&mut self, events: Vec<SseEvent>, out: &mut Vec<Decoded>) {
        for event in events {
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if let Err(err) = self.handler.event(&event.event, data, out) {
                out.push(Err(err));
            }
        }
    }
}

impl<H: SseHandler> WireDecoder for SseWire<H> {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Decoded>) {
        let mut events = Vec::new();
        let framed = self.framing.feed(chunk, &mut events);
        self.dispatch(events, out);
        if let Err(err) = framed {
            out.push(Err(err));
        }
    }

    fn finish(&mut self, out: &mut Vec<Decoded>) {
        let mut events = Vec::new();
        let framed = self.framing.finish(&mut events);
        self.dispatch(events, out);
        match framed {
            Ok(()) => self.handler.end(out),
            Err(err) => out.push(Err(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_string(),
            data: data.to_string(),
        }
    }

    /// Decodes `input` whole, then again split at every possible byte position (and one byte at
    /// a time), and checks all agree with `expected`.
    fn check(input: &[u8], expected: &[SseEvent]) {
        let decode = |chunks: &[&[u8]]| {
            let mut decoder = SseDecoder::default();
            let mut out = Vec::new();
            for chunk in chunks {
                decoder.feed(chunk, &mut out).expect("a short line");
            }
            decoder.finish(&mut out).expect("a short line");
            out
        };
        assert_eq!(decode(&[input]), expected, "whole input");
        for cut in 0..=input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(decode(&[a, b]), expected, "split at {cut}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(decode(&bytes), expected, "byte by byte");
    }

    #[test]
    fn named_events_with_lf_and_crlf() {
        check(
            b"event: ping\ndata: {}\n\nevent: x\r\ndata: 1\r\n\r\n",
            &[ev("ping", "{}"), ev("x", "1")],
        );
    }

    #[test]
    fn lone_cr_ends_lines() {
        check(
            b"data: a\r\rdata: b\r\r",
            &[ev("message", "a"), ev("message", "b")],
        );
    }

    #[test]
    fn multi_line_data_joins_with_newline() {
        check(
            b"data: one\ndata:two\ndata\n\n",
            &[ev("message", "one\ntwo\n")],
        );
    }

    #[test]
    fn comments_and_unknown_fields_are_skipped() {
        check(
            b": keep-alive\nid: 7\nretry: 10\nfoo: bar\ndata: x\n\n:\n\n",
            &[ev("message", "x")],
        );
    }

    #[test]
    fn trailing_spaces_on_data_lines_are_trimmed() {
        check(b"data: {\"a\":1}     \n\n", &[ev("message", "{\"a\":1}")]);
    }

    #[test]
    fn last_event_without_blank_line_is_flushed() {
        check(b"event: done\ndata: bye", &[ev("done", "bye")]);
        check(b"data: bye\n", &[ev("message", "bye")]);
    }

    #[test]
    fn blank_lines_without_data_dispatch_nothing() {
        check(b"event: lonely\n\n\n\ndata: x\n\n", &[ev("message", "x")]);
    }

    #[test]
    fn utf8_split_across_chunks_survives() {
        check(
            "data: héllo → 世界\n\n".as_bytes(),
            &[ev("message", "héllo → 世界")],
        );
    }

    #[test]
    fn leading_byte_order_mark_is_dropped() {
        check(b"\xEF\xBB\xBFdata: x\n\n", &[ev("message", "x")]);
    }

    #[test]
    fn only_one_space_after_the_colon_is_removed() {
        check(b"data:  two\n\n", &[ev("message", " two")]);
    }

    #[test]
    fn a_line_that_never_ends_is_cut_off_at_the_cap() {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        let mib = vec![b'x'; 1024 * 1024];
        decoder.feed(b"data: ", &mut out).expect("a start");
        let failed = (0..9).find_map(|_| decoder.feed(&mib, &mut out).err());
        let err = failed.expect("the cap is 8 MiB");
        assert!(err.message.contains("a line over 8 MiB"), "{err}");
        assert!(decoder.line.capacity() == 0, "the buffer is released");
        // Nothing after the failure is read.
        decoder.feed(b"\n\ndata: x\n\n", &mut out).expect("ignored");
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn an_event_of_many_short_lines_is_capped_too() {
        let line = format!("data: {}\n", "y".repeat(1024 * 1024 - 1));
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        let failed = (0..9).find_map(|_| decoder.feed(line.as_bytes(), &mut out).err());
        assert!(failed.is_some(), "joined data over 8 MiB fails");
        assert!(out.is_empty());
    }
}
