//! How fast a channel may call its platform: a token bucket per budget the platform counts
//! (Slack's `chat.update` per workspace, Discord's global limit), paused whole when the
//! platform answers 429 with the time to wait.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// A shared budget of calls.
#[derive(Debug)]
pub struct Pace {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    capacity: f64,
    per_sec: f64,
    last: Instant,
    paused_until: Option<Instant>,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.saturating_duration_since(self.last).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + gained).min(self.capacity);
        self.last = now;
    }

    /// How long until a token is free (`None`: one is free now, and taken).
    fn take_or_wait(&mut self, now: Instant) -> Option<Duration> {
        if let Some(until) = self.paused_until {
            if now < until {
                return Some(until - now);
            }
            self.paused_until = None;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec))
        }
    }
}

impl Pace {
    /// `capacity` calls at once, `per_minute` calls a minute after that.
    pub fn new(capacity: u32, per_minute: u32) -> Self {
        Self {
            bucket: Mutex::new(Bucket {
                tokens: f64::from(capacity),
                capacity: f64::from(capacity.max(1)),
                per_sec: f64::from(per_minute.max(1)) / 60.0,
                last: Instant::now(),
                paused_until: None,
            }),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Bucket) -> T) -> T {
        f(&mut self.bucket.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Takes a call from the budget if one is free now: for edits that can be merged into
    /// a later one.
    pub fn try_take(&self) -> bool {
        self.with(|bucket| bucket.take_or_wait(Instant::now()).is_none())
    }

    /// Takes a call only while more than half the budget is left: for edits that show
    /// progress, so those that must be delivered (a reply's last) never wait behind them.
    pub fn try_take_spare(&self) -> bool {
        self.with(|bucket| {
            let now = Instant::now();
            if bucket.paused_until.is_some_and(|until| now < until) {
                return false;
            }
            bucket.refill(now);
            bucket.tokens >= 1.0 + bucket.capacity / 2.0 && bucket.take_or_wait(now).is_none()
        })
    }

    /// Waits until a call is free and takes it: for what must be delivered.
    pub async fn take(&self) {
        while let Some(wait) = self.with(|bucket| bucket.take_or_wait(Instant::now())) {
            tokio::time::sleep(wait).await;
        }
    }

    /// The platform said to wait `for_`: no call until then.
    pub fn pause(&self, for_: Duration) {
        let until = Instant::now() + for_;
        self.with(|bucket| {
            bucket.paused_until = Some(bucket.paused_until.map_or(until, |at| at.max(until)));
        });
    }
}

/// A channel's budgets: one for new messages, one for edits (Slack counts `chat.update`
/// apart from `chat.postMessage`; most platforms count them together).
#[derive(Debug, Clone)]
pub struct Paces {
    pub posts: Arc<Pace>,
    pub edits: Arc<Pace>,
}

impl Paces {
    /// One budget for every call.
    pub fn one(pace: Pace) -> Self {
        let pace = Arc::new(pace);
        Self {
            posts: pace.clone(),
            edits: pace,
        }
    }
}

/// The longest wait a platform's answer is taken at.
pub const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// A wait a platform named in seconds (fractions allowed), at most an hour; `None` for what
/// is not a wait (negative, not a number).
pub fn wait_of(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::from_secs_f64(secs.min(LONGEST_WAIT.as_secs_f64())))
}

/// A `Retry-After` header's wait, in seconds (fractions allowed), at most an hour.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers.get("retry-after")?.to_str().ok()?;
    wait_of(text.trim().parse().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_gives_its_capacity_then_its_rate() {
        let pace = Pace::new(2, 60);
        assert!(pace.try_take());
        assert!(pace.try_take());
        assert!(!pace.try_take());
        let now = Instant::now();
        let wait = pace.with(|b| b.take_or_wait(now)).unwrap();
        assert!(wait <= Duration::from_secs(1), "{wait:?}");
    }

    #[test]
    fn progress_leaves_half_the_budget_to_what_must_be_delivered() {
        let pace = Pace::new(4, 60);
        assert!(pace.try_take_spare());
        assert!(pace.try_take_spare());
        assert!(!pace.try_take_spare(), "two of four left for the finals");
        assert!(pace.try_take());
        assert!(pace.try_take());
    }

    #[test]
    fn a_pause_holds_every_call() {
        let pace = Pace::new(10, 600);
        pace.pause(Duration::from_secs(5));
        assert!(!pace.try_take());
        let wait = pace.with(|b| b.take_or_wait(Instant::now())).unwrap();
        assert!(wait > Duration::from_secs(4), "{wait:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn take_waits_for_the_next_token() {
        let pace = Pace::new(1, 60);
        pace.take().await;
        let start = tokio::time::Instant::now();
        pace.take().await;
        assert!(start.elapsed() >= Duration::from_millis(900));
    }
}
