//! When to try a failed model call again, and after how long: a pure decision over the
//! attempt number, the classified error, the policy and a random number, so it can be tested
//! without clocks or sleeping.
//!
//! Backoff is "full jitter": a uniform pause between zero and `base * 2^(attempt-1)`, capped at
//! `max_delay`. Spreading retries out matters when many sessions hit the same overloaded
//! provider at once. A pause the provider asked for (`retry-after`) is honoured exactly; when
//! it is longer than `max_delay` we stop and tell the user when to try again instead of
//! sitting silent for minutes.

use super::LlmError;
use crate::config::{RetrySettings, SessionSettings};
use std::time::Duration;

/// How model calls are retried and how long each phase of a streamed reply may take.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts per route, the first included.
    pub max_attempts: u32,
    /// The ceiling of the first retry's pause; it doubles with each further retry.
    pub base_delay: Duration,
    /// The longest pause between attempts, and the longest `retry-after` we wait out.
    pub max_delay: Duration,
    /// From sending the request to the response headers.
    pub prefill_timeout: Duration,
    /// From the response headers to the first streamed event.
    pub first_token_timeout: Duration,
    /// Longest silence between streamed events. A stream producing only thinking, with no
    /// text or tool call, is stopped after three times this.
    pub no_progress_timeout: Duration,
}

impl RetryPolicy {
    /// The policy from the `[retry]` settings and the `[session]` timeouts.
    pub fn new(retry: &RetrySettings, session: &SessionSettings) -> Self {
        Self {
            max_attempts: retry.max_attempts.max(1),
            base_delay: retry.base_delay,
            max_delay: retry.max_delay,
            prefill_timeout: session.prefill_timeout,
            first_token_timeout: session.first_token_timeout,
            no_progress_timeout: session.no_progress_timeout,
        }
    }

    /// How long a stream may produce only thinking before it is stopped.
    pub fn thinking_timeout(&self) -> Duration {
        self.no_progress_timeout.saturating_mul(3)
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new(&RetrySettings::default(), &SessionSettings::default())
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Wait this long, then try the same route again.
    Retry(Duration),
    /// Stop: the error cannot be helped by retrying, or the attempts are used up.
    GiveUp,
    /// Stop: the provider asked for a pause longer than `max_delay`.
    WaitTooLong(Duration),
}

/// Decides what follows failed attempt number `attempt` (1 for the first). `unit_random` is a
/// uniform sample from `[0, 1)`; values outside are clamped.
pub fn next_delay(
    attempt: u32,
    error: &LlmError,
    policy: &RetryPolicy,
    unit_random: f64,
) -> RetryDecision {
    if !error.is_retryable() {
        return RetryDecision::GiveUp;
    }
    if let Some(wait) = error.retry_after
        && wait > policy.max_delay
    {
        return RetryDecision::WaitTooLong(wait);
    }
    if attempt >= policy.max_attempts.max(1) {
        return RetryDecision::GiveUp;
    }
    if let Some(wait) = error.retry_after {
        return RetryDecision::Retry(wait);
    }
    let doublings = attempt.saturating_sub(1).min(31);
    let ceiling = policy
        .base_delay
        .saturating_mul(1u32 << doublings)
        .min(policy.max_delay);
    let fraction = if unit_random.is_finite() {
        unit_random.clamp(0.0, 1.0)
    } else {
        0.0
    };
    RetryDecision::Retry(ceiling.mul_f64(fraction))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ErrorCategory;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(10),
            ..RetryPolicy::default()
        }
    }

    fn error(category: ErrorCategory, retry_after: Option<Duration>) -> LlmError {
        LlmError {
            retry_after,
            ..LlmError::new(category, "x")
        }
    }

    fn check(attempt: u32, err: &LlmError, random: f64, expected: RetryDecision) {
        assert_eq!(
            next_delay(attempt, err, &policy(), random),
            expected,
            "attempt {attempt}, random {random}, {err}"
        );
    }

    #[test]
    fn backoff_doubles_under_full_jitter_and_caps() {
        let err = error(ErrorCategory::Overloaded, None);
        let secs = |s: f64| RetryDecision::Retry(Duration::from_secs_f64(s));
        check(1, &err, 0.999_999, secs(0.999_999));
        check(2, &err, 0.5, secs(1.0));
        check(3, &err, 1.0, secs(4.0));
        check(1, &err, 0.0, secs(0.0));
        let many = RetryPolicy {
            max_attempts: 100,
            ..policy()
        };
        // 2^39 seconds would overflow without the cap.
        assert_eq!(
            next_delay(40, &err, &many, 1.0),
            RetryDecision::Retry(Duration::from_secs(10))
        );
        assert_eq!(
            next_delay(2, &err, &many, f64::NAN),
            RetryDecision::Retry(Duration::ZERO)
        );
    }

    #[test]
    fn attempts_run_out() {
        let err = error(ErrorCategory::Server, None);
        check(4, &err, 0.5, RetryDecision::GiveUp);
        check(9, &err, 0.5, RetryDecision::GiveUp);
        let single = RetryPolicy {
            max_attempts: 0,
            ..policy()
        };
        assert_eq!(next_delay(1, &err, &single, 0.5), RetryDecision::GiveUp);
    }

    #[test]
    fn only_retryable_categories_retry() {
        for category in [
            ErrorCategory::Auth,
            ErrorCategory::InvalidRequest,
            ErrorCategory::ContextOverflow,
            ErrorCategory::ModelBehavior,
            ErrorCategory::Cancelled,
        ] {
            check(1, &error(category, None), 0.5, RetryDecision::GiveUp);
        }
        for category in [
            ErrorCategory::RateLimit,
            ErrorCategory::Overloaded,
            ErrorCategory::Server,
            ErrorCategory::Network,
            ErrorCategory::Timeout,
        ] {
            assert!(matches!(
                next_delay(1, &error(category, None), &policy(), 0.5),
                RetryDecision::Retry(_)
            ));
        }
    }

    #[test]
    fn retry_after_is_honoured_exactly_unless_too_long() {
        let asked = error(ErrorCategory::RateLimit, Some(Duration::from_millis(7500)));
        check(
            1,
            &asked,
            0.1,
            RetryDecision::Retry(Duration::from_millis(7500)),
        );
        check(
            3,
            &asked,
            0.9,
            RetryDecision::Retry(Duration::from_millis(7500)),
        );
        check(4, &asked, 0.9, RetryDecision::GiveUp);
        let too_long = error(ErrorCategory::RateLimit, Some(Duration::from_secs(600)));
        check(
            1,
            &too_long,
            0.1,
            RetryDecision::WaitTooLong(Duration::from_secs(600)),
        );
    }
}
