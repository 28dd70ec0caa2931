//! The numbers a compaction works to, every one a share of the context window, so a 4k
//! window is handled with the same proportions as a 200k one: what the history may hold
//! after a compaction, the most a request may hold at all, how much recent tool output stays
//! whole, and the notes call's transcript, output and time limits.

use super::notes::notes_fixed_tokens;
use std::time::Duration;

/// The longest notes ever asked for, in tokens.
pub const NOTES_MAX_TOKENS: u64 = 4096;
/// Notes shorter than this are not worth a model call: the extractive cut stands instead.
const NOTES_MIN_TOKENS: u64 = 64;
/// A transcript shorter than this is not worth a model call either.
const TRANSCRIPT_MIN_TOKENS: u64 = 128;
/// The least time a notes call is given, when `sidecar_llm_timeout` allows it: a small local
/// model needs a few seconds to read even a short transcript.
const NOTES_MIN_TIMEOUT: Duration = Duration::from_secs(20);

/// A compaction's frame: the window and what every request spends besides the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The context window, in tokens.
    pub window: u64,
    /// Estimated tokens every request spends before the history: tools, tier A, tier B.
    pub overhead: u64,
    /// The output limit a reply is asked for.
    pub reply: u64,
}

impl Budget {
    /// Tokens the history may hold after a compaction, notes included: half the window less
    /// the overhead. The other half is real room: with the threshold at 0.75 the next
    /// compaction waits until the conversation has grown by a quarter of the window.
    pub fn target(&self) -> u64 {
        (self.window / 2).saturating_sub(self.overhead)
    }

    /// Tokens a request's history may hold at all: the window less the overhead and room
    /// for the reply (its output limit, at most a quarter of the window).
    pub fn limit(&self) -> u64 {
        let reply = self.reply.min(self.window / 4);
        self.window
            .saturating_sub(self.overhead)
            .saturating_sub(reply)
    }

    /// Tokens of recent tool output that may stay whole: an eighth of the window, so at 4k
    /// one 2 KB result is kept whole and the ones before it are cleared.
    pub fn whole_results(&self) -> u64 {
        self.window / 8
    }

    /// The most tokens the notes may take: a sixteenth of the window (256 at 4k), at most
    /// 4,096. The compacted history keeps room for them.
    pub fn notes_tokens(&self) -> u64 {
        (self.window / 16).min(NOTES_MAX_TOKENS)
    }

    /// Tokens the kept messages may take: the target less room for the notes.
    pub fn kept_tokens(&self) -> u64 {
        self.target().saturating_sub(self.notes_tokens())
    }
}

/// The limits of one notes call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotesCall {
    /// How much of the transcript the request carries, in bytes.
    pub transcript_bytes: usize,
    /// The longest notes to ask for.
    pub max_output_tokens: u32,
    /// How many words the notes model is told to stay under, well within the output limit,
    /// so a model that keeps to it is never cut off.
    pub words: u64,
    /// How long the call may take: `sidecar_llm_timeout` in the proportion of its output
    /// limit to 4,096 tokens, at least 20 s (or the whole setting when that is shorter).
    pub timeout: Duration,
}

/// The notes call for a conversation compacted within `budget`, made to a model whose window
/// is `notes_window`: notes no longer than the conversation can carry ([`Budget::notes_tokens`])
/// nor than a quarter of the notes model's window, and a transcript filling what is left of
/// that window, at most half of it, so the instructions, the transcript and the notes always
/// fit together. `None` when they cannot: too small a window for notes worth the call, which
/// leaves the extractive cut.
pub fn notes_call(budget: &Budget, notes_window: u64, sidecar: Duration) -> Option<NotesCall> {
    let output = budget.notes_tokens().min(notes_window / 4);
    if output < NOTES_MIN_TOKENS {
        return None;
    }
    let room = notes_window.checked_sub(output + notes_fixed_tokens())?;
    let transcript = room.min(notes_window / 2);
    if transcript < TRANSCRIPT_MIN_TOKENS {
        return None;
    }
    let scaled = sidecar.mul_f64(output as f64 / NOTES_MAX_TOKENS as f64);
    Some(NotesCall {
        transcript_bytes: usize::try_from(transcript * 4).unwrap_or(usize::MAX),
        max_output_tokens: u32::try_from(output).unwrap_or(u32::MAX),
        words: output / 2,
        timeout: scaled.max(sidecar.min(NOTES_MIN_TIMEOUT)),
    })
}
