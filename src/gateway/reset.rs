//! Automatic resets: whether a session key starts afresh on its next message, because the
//! daily boundary (`[session.reset] daily_at`, local time) passed or no person wrote for
//! `idle_minutes`. Pure: the caller passes the time, the zone and when a person last wrote
//! (automation never keeps a session fresh; see the session index).

use crate::config::ResetSettings;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Why a key got a new session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetReason {
    /// `/new`, `/reset` or a front end asking.
    Manual,
    /// The first message after the daily boundary.
    Daily,
    /// The first message after `idle_minutes` without a person writing.
    Idle,
}

impl ResetReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Daily => "daily",
            Self::Idle => "idle",
        }
    }
}

/// Whether a session a person last wrote to at `fresh_ms` is due for a reset at `now`.
pub fn due(
    settings: &ResetSettings,
    fresh_ms: i64,
    now: Timestamp,
    tz: &TimeZone,
) -> Option<ResetReason> {
    let Ok(fresh) = Timestamp::from_millisecond(fresh_ms) else {
        return None;
    };
    if settings.daily
        && let Some(boundary) = last_boundary(settings.daily_at, now, tz)
        && fresh < boundary
    {
        return Some(ResetReason::Daily);
    }
    if let Some(idle) = settings.idle {
        let quiet = now.duration_since(fresh);
        if quiet.is_positive() && quiet.unsigned_abs() >= idle {
            return Some(ResetReason::Idle);
        }
    }
    None
}

/// The latest daily boundary at or before `now`: today's `at` in `tz` if it has come,
/// otherwise yesterday's. A boundary that falls in a daylight-saving gap moves forward as
/// clocks do.
fn last_boundary(at: jiff::civil::Time, now: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let today = tz.to_datetime(now).date();
    let on = |date: jiff::civil::Date| tz.to_timestamp(date.to_datetime(at)).ok();
    match on(today)? {
        boundary if boundary <= now => Some(boundary),
        _ => on(today.yesterday().ok()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::time;
    use std::time::Duration;

    fn tz() -> TimeZone {
        // Central European rules, written out so no time zone database is needed.
        TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap()
    }

    fn at(text: &str) -> Timestamp {
        let civil = jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M", text).unwrap();
        tz().to_timestamp(civil).unwrap()
    }

    fn daily() -> ResetSettings {
        ResetSettings {
            daily: true,
            ..ResetSettings::default()
        }
    }

    fn check(settings: &ResetSettings, fresh: &str, now: &str, expected: Option<ResetReason>) {
        let fresh_ms = at(fresh).as_millisecond();
        assert_eq!(
            due(settings, fresh_ms, at(now), &tz()),
            expected,
            "fresh {fresh}, now {now}"
        );
    }

    #[test]
    fn the_daily_reset_comes_with_the_first_message_after_the_boundary() {
        let s = daily();
        check(&s, "2026-03-10 23:00", "2026-03-11 03:59", None);
        check(
            &s,
            "2026-03-10 23:00",
            "2026-03-11 04:00",
            Some(ResetReason::Daily),
        );
        check(&s, "2026-03-11 04:00", "2026-03-11 22:00", None);
        check(
            &s,
            "2026-03-11 03:00",
            "2026-03-12 02:00",
            Some(ResetReason::Daily),
        );
        check(
            &s,
            "2026-03-09 12:00",
            "2026-03-11 12:00",
            Some(ResetReason::Daily),
        );
        let later = ResetSettings {
            daily_at: time(18, 30, 0, 0),
            ..daily()
        };
        check(&later, "2026-03-11 18:00", "2026-03-11 18:29", None);
        check(
            &later,
            "2026-03-11 18:00",
            "2026-03-11 18:31",
            Some(ResetReason::Daily),
        );
    }

    #[test]
    fn the_idle_reset_counts_from_the_last_person() {
        let s = ResetSettings {
            idle: Some(Duration::from_secs(90 * 60)),
            ..ResetSettings::default()
        };
        check(&s, "2026-03-11 10:00", "2026-03-11 11:29", None);
        check(
            &s,
            "2026-03-11 10:00",
            "2026-03-11 11:30",
            Some(ResetReason::Idle),
        );
        // A clock that stepped back is not idleness.
        check(&s, "2026-03-11 10:00", "2026-03-11 09:00", None);
    }

    #[test]
    fn off_by_default() {
        let s = ResetSettings::default();
        check(&s, "2020-01-01 00:00", "2026-03-11 10:00", None);
    }

    #[test]
    fn a_boundary_in_a_daylight_saving_gap_still_counts() {
        // 2026-03-29 02:30 does not exist there: clocks jump from 02:00 to 03:00, and the
        // boundary moves with them to 03:30.
        let s = ResetSettings {
            daily_at: time(2, 30, 0, 0),
            ..daily()
        };
        check(&s, "2026-03-28 23:00", "2026-03-29 03:10", None);
        check(
            &s,
            "2026-03-28 23:00",
            "2026-03-29 03:40",
            Some(ResetReason::Daily),
        );
    }
}
