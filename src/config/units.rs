//! Human-friendly durations (`90m`, `12h`, `30d`, `1h30m`) and byte sizes (`512MB`, `1.6GB`,
//! `1GiB`) as written in the config file, and their rendering back to text.
//!
//! Parsing is exact integer arithmetic: `1.6GB` is 1,600,000,000 bytes, not whatever a float
//! happens to round to.

use std::time::Duration;

/// What a duration string may look like, for error messages.
pub(crate) const DURATION_FORMS: &str =
    "whole seconds (like 90) or a duration like \"90s\", \"30m\", \"12h\", \"30d\" or \"1h30m\"";

/// What a size may look like, for error messages.
pub(crate) const SIZE_FORMS: &str = "a whole number of bytes or a size like \"512MB\", \"2GB\", \
     \"1.5GB\" or \"1GiB\" (KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024)";

/// Parses `30d`, `12h`, `90m`, `45s`, `500ms`, `2w` or a sequence such as `1h30m`.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.len()
            - rest
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let millis = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total = total.checked_add(number.checked_mul(millis)?)?;
    }
    Some(Duration::from_millis(total))
}

/// Parses a byte size: `512MB`, `2GB`, `1.6GB`, `1GiB`, `4096` or `4096B`.
pub(crate) fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let number_len = text.len()
        - text
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.')
            .len();
    let (number, unit) = text.split_at(number_len);
    let multiplier: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || fraction.contains('.') || fraction.len() > 12 {
        return None;
    }
    let scale = 10u128.pow(fraction.len() as u32);
    let whole: u128 = whole.parse().ok()?;
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let bytes = (whole.checked_mul(scale)?.checked_add(fraction)?).checked_mul(multiplier)? / scale;
    u64::try_from(bytes).ok()
}

/// Renders a duration in the largest unit that divides it: `30d`, `90m`, `1800s`, `500ms`.
pub(crate) fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() != 0 {
        return format!("{}ms", duration.as_millis());
    }
    let secs = duration.as_secs();
    if secs == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

/// Renders a byte count with the unit a person would most likely have written: decimal units
/// when they divide it (with at most one decimal place), else binary ones, else bytes.
pub(crate) fn format_size(bytes: u64) -> String {
    for (unit, size) in [("GB", 1_000_000_000u64), ("MB", 1_000_000), ("KB", 1_000)] {
        if bytes < size {
            continue;
        }
        if bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
        if bytes.is_multiple_of(size / 10) {
            let tenths = bytes / (size / 10);
            return format!("{}.{}{unit}", tenths / 10, tenths % 10);
        }
    }
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let secs = |s| parse_duration(s).map(|d| d.as_secs());
        assert_eq!(secs("30d"), Some(30 * 86_400));
        assert_eq!(secs("12h"), Some(12 * 3600));
        assert_eq!(secs("90m"), Some(5400));
        assert_eq!(secs("45s"), Some(45));
        assert_eq!(secs("1h30m"), Some(5400));
        assert_eq!(secs("2w"), Some(14 * 86_400));
        assert_eq!(parse_duration("1s500ms"), Some(Duration::from_millis(1500)));
        for bad in [
            "",
            "30",
            "d",
            "3x",
            "1.5h",
            "-3d",
            "99999999999999999999d",
            "1h 30m",
        ] {
            assert_eq!(secs(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2GB"), Some(2_000_000_000));
        assert_eq!(parse_size("1.6GB"), Some(1_600_000_000));
        assert_eq!(parse_size("512MB"), Some(512_000_000));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("1 gib"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("10B"), Some(10));
        for bad in ["", "GB", "1.2.3GB", "2XB", ".5GB", "-1GB", "99999999999TB"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn rendering_round_trips() {
        for text in ["30d", "12h", "90m", "45s"] {
            let parsed = parse_duration(text).unwrap();
            assert_eq!(format_duration(parsed), text);
        }
        assert_eq!(format_duration(Duration::from_secs(1800)), "30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_size(2_000_000_000), "2GB");
        assert_eq!(format_size(1_600_000_000), "1.6GB");
        assert_eq!(format_size(1 << 30), "1GiB");
        assert_eq!(format_size(131_072), "128KiB");
        assert_eq!(format_size(1_234_567), "1234567 bytes");
        assert_eq!(format_size(12), "12 bytes");
    }
}
