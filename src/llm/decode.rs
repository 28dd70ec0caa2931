//! Decoding a recorded reply body without a network: the same decoders the live providers
//! run, fed from bytes in memory. Conformance tests use these against real provider
//! recordings; the live path feeds the decoders chunk by chunk from the HTTP body instead.

use super::anthropic::AnthropicEvents;
use super::ollama::OllamaDecoder;
use super::openai::OpenAiEvents;
use super::sse::SseWire;
use super::{LlmError, StreamEvent};

/// The longest line (an SSE line or event payload, an NDJSON line) a decoder buffers. Real
/// events are a few kilobytes at most; a peer that never ends its line is cut off here rather
/// than filling memory.
pub(crate) const MAX_LINE: usize = 8 * 1024 * 1024;

/// A decoded item: an event, or the error that ends the stream.
pub type Decoded = Result<StreamEvent, LlmError>;

/// A stateful decoder of one wire format. It never panics on provider input: anything it
/// cannot read becomes an `Err` item (after which the stream is over) or is skipped.
pub(crate) trait WireDecoder: Send + 'static {
    /// Feeds the next chunk of the body and appends what it completes to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Decoded>);

    /// Ends the body: flushes anything buffered and closes what the format leaves implicit.
    fn finish(&mut self, out: &mut Vec<Decoded>);
}

/// The streamed wire formats tern reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    /// Anthropic Messages server-sent events.
    Anthropic,
    /// OpenAI Chat Completions server-sent events.
    OpenAi,
    /// Ollama's native newline-delimited JSON.
    Ollama,
}

/// Decodes a body that arrived as the given chunks, stopping after the first error as the
/// live stream does.
pub fn decode_chunks<'a>(
    format: WireFormat,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Decoded> {
    match format {
        WireFormat::Anthropic => run(SseWire::<AnthropicEvents>::default(), chunks),
        WireFormat::OpenAi => run(SseWire::<OpenAiEvents>::default(), chunks),
        WireFormat::Ollama => run(OllamaDecoder::new(), chunks),
    }
}

/// Decodes a whole Anthropic Messages SSE body.
pub fn anthropic(bytes: &[u8]) -> Vec<Decoded> {
    decode_chunks(WireFormat::Anthropic, [bytes])
}

/// Decodes a whole OpenAI Chat Completions SSE body.
pub fn openai(bytes: &[u8]) -> Vec<Decoded> {
    decode_chunks(WireFormat::OpenAi, [bytes])
}

/// Decodes a whole Ollama NDJSON body (`/api/chat` or `/api/generate`).
pub fn ollama(bytes: &[u8]) -> Vec<Decoded> {
    decode_chunks(WireFormat::Ollama, [bytes])
}

fn run<'a, D: WireDecoder>(
    mut decoder: D,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Vec<Decoded> {
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, &mut out);
    }
    decoder.finish(&mut out);
    if let Some(first_error) = out.iter().position(Result::is_err) {
        out.truncate(first_error + 1);
    }
    out
}
