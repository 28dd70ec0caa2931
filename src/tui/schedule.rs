//! When to draw: everything that changes what is on screen asks for a frame; the requests are
//! coalesced, and frames are at least 1/60 s apart, so a burst of streamed tokens costs one
//! frame, never one per token. The one exception is the first word of an answer the person
//! waits for, drawn at once: one frame a turn. Pure: the caller passes `now`.

use std::time::Duration;
use tokio::time::Instant;

/// The shortest time between two frames: at most 60 a second.
pub const FRAME_INTERVAL: Duration = Duration::from_micros(16_667);

/// Coalesces frame requests and caps their rate.
#[derive(Debug, Default)]
pub struct FrameScheduler {
    /// The earliest time a frame was asked for, if one is pending.
    wanted: Option<Instant>,
    last_drawn: Option<Instant>,
    /// The pending frame shows the first word of an answer: it does not wait for its turn.
    urgent: bool,
}

impl FrameScheduler {
    /// Asks for a frame as soon as the rate allows.
    pub fn request(&mut self, now: Instant) {
        self.request_at(now);
    }

    /// Asks for a frame now, however recent the last: it shows the first word of the answer
    /// the person waits for, which panes streaming beside it must not hold back.
    pub fn request_urgent(&mut self, now: Instant) {
        self.request_at(now);
        self.urgent = true;
    }

    /// Whether the pending frame shows the first word of an answer.
    pub fn is_urgent(&self) -> bool {
        self.urgent
    }

    /// Asks for a frame at `at` (a spinner's next step, a timer shown on screen).
    pub fn request_at(&mut self, at: Instant) {
        self.wanted = Some(match self.wanted {
            Some(wanted) => wanted.min(at),
            None => at,
        });
    }

    /// When the pending frame should be drawn, if one is pending.
    pub fn due(&self) -> Option<Instant> {
        let wanted = self.wanted?;
        Some(match self.last_drawn {
            Some(last) if !self.urgent => wanted.max(last + FRAME_INTERVAL),
            _ => wanted,
        })
    }

    /// Whether a frame is due at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.due().is_some_and(|due| due <= now)
    }

    /// Records that a frame was drawn at `now`; every request until then is served by it.
    pub fn drawn(&mut self, now: Instant) {
        self.last_drawn = Some(now);
        self.urgent = false;
        if self.wanted.is_some_and(|wanted| wanted <= now) {
            self.wanted = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_coalesced_into_one_frame() {
        let start = Instant::now();
        let mut frames = FrameScheduler::default();
        assert_eq!(frames.due(), None, "nothing asked, nothing drawn");
        for i in 0..100 {
            frames.request(start + Duration::from_micros(i));
        }
        assert_eq!(frames.due(), Some(start));
        frames.drawn(start);
        assert_eq!(frames.due(), None);
    }

    #[test]
    fn frames_are_at_most_sixty_a_second() {
        let start = Instant::now();
        let mut frames = FrameScheduler::default();
        frames.request(start);
        frames.drawn(start);
        let soon = start + Duration::from_millis(1);
        frames.request(soon);
        assert_eq!(frames.due(), Some(start + FRAME_INTERVAL));
        assert!(!frames.is_due(soon));
        assert!(frames.is_due(start + FRAME_INTERVAL));
        // Over one simulated second of constant requests, at most 60 frames.
        let mut drawn = 0;
        let mut now = start + FRAME_INTERVAL;
        let end = now + Duration::from_secs(1);
        while now < end {
            frames.request(now);
            if frames.is_due(now) {
                frames.drawn(now);
                drawn += 1;
            }
            now += Duration::from_millis(1);
        }
        assert!((59..=60).contains(&drawn), "{drawn}");
    }

    #[test]
    fn a_later_request_waits_for_its_time() {
        let start = Instant::now();
        let mut frames = FrameScheduler::default();
        let later = start + Duration::from_millis(100);
        frames.request_at(later);
        assert_eq!(frames.due(), Some(later));
        frames.request(start);
        assert_eq!(frames.due(), Some(start), "the earliest wins");
        frames.drawn(start);
        assert_eq!(frames.due(), None);
    }

    #[test]
    fn the_first_word_of_an_answer_is_drawn_at_once() {
        let start = Instant::now();
        let mut frames = FrameScheduler::default();
        frames.request(start);
        frames.drawn(start);
        let soon = start + Duration::from_millis(2);
        frames.request_urgent(soon);
        assert_eq!(frames.due(), Some(soon), "no wait for the frame's turn");
        frames.drawn(soon);
        // The next frame waits again.
        let later = soon + Duration::from_millis(1);
        frames.request(later);
        assert_eq!(frames.due(), Some(soon + FRAME_INTERVAL));
    }
}
