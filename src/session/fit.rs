//! How large the next request really is, for a turn's decisions to compact and to go on.
//! tern estimates tokens at four bytes each ([`estimate_tokens`]); a server's tokenizer may
//! count more (JSON, paths and code run nearer three bytes a token, and a chat template adds
//! its own text), and at a 4k window that difference is the whole margin. So a turn measures
//! it: every reply's usage against the estimate of the request that got it, and every
//! context overflow as a request at least the window's size, and from then on scales its
//! estimates by what it measured.

use super::compaction::estimate_tokens;
use super::state::SessionState;

/// The most a turn scales its estimates by: even dense JSON takes more than 1.6 bytes a
/// token, so a larger figure is a usage report that is not about this request.
const MAX_SCALE: f64 = 2.5;

/// An overflowing request was at least the window's size; the retry aims this much lower.
const OVERFLOW_MARGIN: f64 = 1.1;

/// The window a turn must fit and how its estimates relate to the server's counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The context window, in the server's tokens.
    pub window: u64,
    /// Server tokens per estimated token, at least 1.
    scale: f64,
}

impl Fit {
    pub fn new(window: u64) -> Self {
        Self { window, scale: 1.0 }
    }

    /// The window in estimated tokens: what compaction plans against.
    pub fn estimated_window(&self) -> u64 {
        (self.window as f64 / self.scale) as u64
    }

    /// `estimate` in the server's tokens.
    pub fn real(&self, estimate: u64) -> u64 {
        (estimate as f64 * self.scale).ceil() as u64
    }

    /// A reply's usage says the request estimated at `sent` took `counted` tokens.
    pub fn measured(&mut self, sent: u64, counted: u64) {
        if sent > 0 && counted > 0 {
            self.scale = (counted as f64 / sent as f64).clamp(1.0, MAX_SCALE);
        }
    }

    /// The request estimated at `sent` overflowed the window: it took at least the window.
    pub fn overflowed(&mut self, sent: u64) {
        if sent > 0 {
            let at_least = self.window as f64 * OVERFLOW_MARGIN / sent as f64;
            self.scale = self.scale.max(at_least).min(MAX_SCALE);
        }
    }

    /// The server's window filled at `filled` tokens: it has no more than that.
    pub fn filled_at(&mut self, filled: u64) {
        self.window = self.window.min(filled);
    }

    /// The next request's size in the server's tokens: the last call's count plus what was
    /// added since, scaled; or, when the last call reported none (or a compaction reset it),
    /// all of it estimated and scaled. `overhead` is the estimate of the system blocks and
    /// tools.
    pub fn next_request(&self, state: &SessionState, overhead: u64) -> u64 {
        match state.last_usage {
            // A provider that reported no usage says nothing about the size: estimate it all.
            Some(usage) if usage.context_tokens() > 0 => {
                let since = state.messages_at_last_usage.min(state.messages.len());
                usage.context_tokens() + self.real(estimate_tokens(&state.messages[since..]))
            }
            _ => self.real(overhead + estimate_tokens(&state.messages)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Message, SessionId, Usage};
    use crate::store::JournalEvent;

    #[test]
    fn a_provider_that_reports_no_usage_leaves_the_size_to_the_estimate() {
        let fit = Fit::new(8_192);
        let mut state = SessionState::new(SessionId::from_string("s"), "/p".into());
        state.apply(&JournalEvent::Message {
            message: Message::user_text("x".repeat(4_000)),
        });
        state.apply(&JournalEvent::Usage {
            model: "m".into(),
            usage: Usage::default(),
        });
        // About 1,000 tokens of history plus the overhead, not zero.
        assert!(fit.next_request(&state, 500) > 1_400);
        state.apply(&JournalEvent::Usage {
            model: "m".into(),
            usage: Usage {
                input_tokens: 9_000,
                ..Usage::default()
            },
        });
        state.apply(&JournalEvent::Message {
            message: Message::user_text("y".repeat(400)),
        });
        let next = fit.next_request(&state, 500);
        assert!((9_100..9_200).contains(&next), "{next}");
    }

    #[test]
    fn what_the_server_counted_scales_the_estimates() {
        let mut fit = Fit::new(4_096);
        assert_eq!(fit.estimated_window(), 4_096);
        // 2,934 estimated, 4,400 counted: a tokenizer at 1.5x the estimate.
        fit.measured(2_934, 4_401);
        assert_eq!(fit.estimated_window(), 2_730);
        assert_eq!(fit.real(1_000), 1_500);
        // A reply that counted fewer does not make the window larger than it is.
        fit.measured(2_000, 1_000);
        assert_eq!(fit.estimated_window(), 4_096);
        // Nonsense is bounded.
        fit.measured(100, 49_000);
        assert_eq!(fit.estimated_window(), 1_638);
    }

    #[test]
    fn an_overflow_aims_the_retry_below_the_window() {
        let mut fit = Fit::new(4_096);
        // Estimated at 2,934, the request did not fit 4,096: at least 1.4x.
        fit.overflowed(2_934);
        let aimed = fit.real(2_934);
        assert!(aimed > 4_096, "{aimed}");
        assert!(fit.estimated_window() < 2_934 * 10 / 11 + 1);
        fit.filled_at(3_000);
        assert_eq!(fit.window, 3_000);
    }
}
