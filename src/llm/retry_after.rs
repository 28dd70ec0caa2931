//! Reading the pause a provider asks for before the next attempt: the `retry-after-ms` and
//! `retry-after` headers of a 429 or 503 reply, in seconds, milliseconds or any of the three
//! HTTP date forms, capped so that an absurd value stops the call instead of stalling it.

use super::error::ResponseHeaders;
use std::time::Duration;

/// The longest pause a `retry-after` header is read as. A larger value, even one too large to
/// represent, becomes this: it is longer than any sensible `max_delay`, so the call stops and
/// the user is told when to come back instead of the client waiting or panicking.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The pause a 429/503 reply asks for: `retry-after-ms` (milliseconds, an Anthropic and OpenAI
/// extension) wins over `retry-after` (seconds, or an HTTP date). Pauses are capped at
/// [`MAX_RETRY_AFTER`].
pub(super) fn retry_after(
    headers: &(impl ResponseHeaders + ?Sized),
    now: jiff::Timestamp,
) -> Option<Duration> {
    if let Some(wait) = headers
        .header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|ms| capped_seconds(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = headers.header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return capped_seconds(seconds);
    }
    let Some(at) = parse_http_date(value) else {
        tracing::debug!(
            value,
            "ignoring a retry-after that is neither seconds nor a date"
        );
        return None;
    };
    let wait = Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A pause of `seconds`, capped at [`MAX_RETRY_AFTER`]; `None` for a negative or NaN value.
fn capped_seconds(seconds: f64) -> Option<Duration> {
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    let wait = Duration::try_from_secs_f64(seconds).unwrap_or(MAX_RETRY_AFTER);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// Reads an HTTP date in any of the three forms HTTP allows: the preferred IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), and the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37
/// GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms a recipient must still accept.
fn parse_http_date(value: &str) -> Option<jiff::Timestamp> {
    if let Ok(at) = jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(value) {
        return Some(at);
    }
    ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
        .iter()
        .find_map(|format| {
            let civil = jiff::civil::DateTime::strptime(format, value).ok()?;
            jiff::tz::TimeZone::UTC.to_timestamp(civil).ok()
        })
}
