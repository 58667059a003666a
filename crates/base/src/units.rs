//! Durations and sizes as the configuration and the command line write
//! them: `"500ms"`, `"30s"`, `"10m"`, `"6h"`, `"3d"`, `"1w"`, `"1h30m"`;
//! `"512KiB"`, `"10GB"`; and both written back for people
//! ([`format_bytes`], [`format_age`]).
//!
//! A leaf module: it imports nothing from the crate, so both
//! The configuration and the robots.txt settings read their values with
//! the same rules without depending on each other. A single number with a
//! unit is read here (a bare number means seconds or bytes, fractions such
//! as `1.5s` are accepted, which `humantime` refuses); several spans
//! (`1h30m`, `2d 12h`) and spelled-out units (`90min`, `2days`) are read by
//! `humantime`, except months and years (`M`, `y`), whose length is a
//! convention and whose `M` is one shift key away from minutes.

use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// The duration units of [`parse_duration`], for its error messages.
const DURATION_UNITS: &str = "use e.g. 30s, 10m, 6h, 3d, 1w, 1h30m";

/// The size units of [`parse_size`], for its error messages.
const SIZE_UNITS: &str = "use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB";

/// `": reason"`, or nothing for an empty reason.
fn colon(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

/// Why [`parse_duration`] or [`parse_size`] refused a text. `Display`
/// quotes the text and says which forms are accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a number with a duration unit (`reason`: what `humantime` said,
    /// empty when the text does not start with a number).
    #[error("'{text}' is not a duration{} ({DURATION_UNITS})", colon(.reason))]
    NotADuration {
        /// The text as given.
        text: String,
        /// Why, when more can be said than that.
        reason: String,
    },
    /// A month or year unit, whose length is a convention.
    #[error("'{text}': unit '{unit}' (months or years) is not accepted; write days or weeks ({DURATION_UNITS})")]
    CalendarUnit {
        /// The text as given.
        text: String,
        /// The unit found (`M`, `months`, `y`, ...).
        unit: String,
    },
    /// Not a number with a size unit.
    #[error("'{0}' is not a size (use e.g. 512KiB, 100MiB, 10GiB)")]
    NotASize(String),
    /// A number with a unit that is not a size unit.
    #[error("'{text}': unknown size unit '{unit}' ({SIZE_UNITS})")]
    UnknownSizeUnit {
        /// The text as given.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// Negative, not finite, or beyond 10^12 seconds or 1.8 * 10^19 bytes.
    #[error("'{0}' is out of range")]
    OutOfRange(String),
}

/// Parses a duration: a number with `ms`, `s`, `m` (or `min`), `h`, `d`
/// or `w` (a bare number is seconds; fractions are accepted: `1.5s`), or
/// several spans (`1h30m`, `2d 12h`, `1w2d`) and the unit names
/// `humantime` knows (`90min`, `2days`, `3weeks`). Months and years are
/// refused. Errors: [`UnitError`] (`NotADuration`, `CalendarUnit`,
/// `OutOfRange`), quoting `s` and the accepted forms.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ms" => Some(0.001),
        "" | "s" => Some(1.0),
        "m" | "min" => Some(60.0),
        "h" => Some(3600.0),
        "d" => Some(86_400.0),
        "w" => Some(604_800.0),
        _ => None,
    };
    let Some(scale) = scale else { return parse_spans(s, t) };
    let not_a_duration = || UnitError::NotADuration { text: s.to_string(), reason: String::new() };
    let n: f64 = num.parse().map_err(|_| not_a_duration())?;
    let secs = n * scale;
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(UnitError::OutOfRange(s.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Several spans or spelled-out units, read by `humantime`; months and
/// years refused. `s` is the text as given, `t` trimmed.
fn parse_spans(s: &str, t: &str) -> Result<Duration, UnitError> {
    let text = s.to_string();
    if t.is_empty() || !t.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(UnitError::NotADuration { text, reason: String::new() });
    }
    let calendar = ["M", "month", "months", "y", "year", "years"];
    if let Some(unit) = t.split(|c: char| !c.is_ascii_alphabetic()).find(|u| calendar.contains(u)) {
        return Err(UnitError::CalendarUnit { text, unit: unit.to_string() });
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| UnitError::NotADuration { text: text.clone(), reason: e.to_string() })?;
    if d.as_secs() > 1_000_000_000_000 {
        return Err(UnitError::OutOfRange(text));
    }
    Ok(d)
}

/// Writes `d` in the largest unit of [`parse_duration`] that expresses it
/// whole (`7d`, `90m`, `30s`, `1500ms`), so that it parses back to `d`
/// (to the millisecond).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, scale) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms > 0 && ms.is_multiple_of(scale) {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

/// Writes `d` for people, in its two largest units, truncated: `45s`,
/// `1h11m`, `3d4h`, `2w1d`; under a second `0s`. Parses back with
/// [`parse_duration`] to within its last unit.
pub fn format_age(d: Duration) -> String {
    let mut left = d.as_secs();
    let mut parts = Vec::new();
    for (unit, scale) in [("w", 604_800u64), ("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if left >= scale || (!parts.is_empty() && parts.len() < 2) {
            let n = left / scale;
            left %= scale;
            if n > 0 {
                parts.push(format!("{n}{unit}"));
            } else {
                // A zero second unit ends the figure: `2h`, not `2h0m`.
                break;
            }
        }
        if parts.len() == 2 {
            break;
        }
    }
    if parts.is_empty() {
        "0s".to_string()
    } else {
        parts.concat()
    }
}

/// Writes a byte count for people: `512 B` below 1 KiB, else one decimal
/// in the largest binary unit it reaches (`11.3 MiB`, `10.0 GiB`).
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    // 1023.96 KiB would print as "1024.0 KiB": write it as the next unit.
    if value >= 1023.95 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Parses a size in bytes: a bare integer, or a number with `B`, `KB`, `MB`,
/// `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024).
/// Errors: [`UnitError`] (`NotASize`, `UnknownSizeUnit`, `OutOfRange`).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| UnitError::NotASize(s.to_string()))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "tb" | "t" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(UnitError::UnknownSizeUnit { text: s.to_string(), unit: other.to_string() })
        }
    };
    let bytes = n * scale;
    if !bytes.is_finite() || !(0.0..=1.8e19).contains(&bytes) {
        return Err(UnitError::OutOfRange(s.to_string()));
    }
    Ok(bytes as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Int(i64),
    Float(f64),
    Str(String),
}

/// Deserializes a duration: a string with a unit ([`parse_duration`]) or a
/// non-negative number of seconds.
pub fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match NumOrStr::deserialize(d)? {
        NumOrStr::Int(i) if i >= 0 => Ok(Duration::from_secs(i as u64)),
        NumOrStr::Float(f) if f >= 0.0 && f.is_finite() => Ok(Duration::from_secs_f64(f)),
        NumOrStr::Str(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom("a duration must not be negative")),
    }
}

/// Deserializes a size in bytes: a non-negative integer or a string with a
/// unit ([`parse_size`]).
pub fn de_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match NumOrStr::deserialize(d)? {
        NumOrStr::Int(i) if i >= 0 => Ok(i as u64),
        NumOrStr::Str(s) => parse_size(&s).map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom(
            "a size must be a non-negative integer or a string such as \"10GiB\"",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("3d").unwrap(), Duration::from_secs(259_200));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1y").is_err());
        assert!(
            parse_duration("10M").is_err(),
            "months are refused: M is one shift key from minutes"
        );
        for (d, text) in
            [(604_800_000, "7d"), (5_400_000, "90m"), (30_000, "30s"), (1500, "1500ms"), (0, "0ms")]
        {
            let d = Duration::from_millis(d);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text).unwrap(), d);
        }
        assert_eq!(parse_size("512KiB").unwrap(), 524_288);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert!(parse_size("ten").is_err());
    }

    #[test]
    fn numbers_are_seconds_and_bytes_in_toml() {
        #[derive(Deserialize)]
        struct T {
            #[serde(deserialize_with = "de_duration")]
            d: Duration,
            #[serde(deserialize_with = "de_size")]
            s: u64,
        }
        let t: T = toml::from_str("d = 1.5\ns = 2048\n").unwrap();
        assert_eq!((t.d, t.s), (Duration::from_millis(1500), 2048));
        let t: T = toml::from_str("d = \"1.5s\"\ns = \"2KiB\"\n").unwrap();
        assert_eq!((t.d, t.s), (Duration::from_millis(1500), 2048));
        assert!(toml::from_str::<T>("d = -1\ns = 1\n").is_err());
        assert!(toml::from_str::<T>("d = 1\ns = -1\n").is_err());
    }

    #[test]
    fn durations_in_weeks_and_several_spans() {
        let (h, d) = (3600, 86_400);
        for (text, secs) in [
            ("1w", 7 * d),
            ("1h30m", h + 1800),
            ("2d 12h", 2 * d + 12 * h),
            ("1w2d", 9 * d),
            ("90min", 5400),
            ("2days", 2 * d),
        ] {
            assert_eq!(parse_duration(text).unwrap(), Duration::from_secs(secs), "{text}");
        }
        for bad in ["", "h", "1h30x", "-1h30m", "1year", "3 months"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn ages_and_sizes_for_people() {
        for (secs, text) in [
            (0, "0s"),
            (45, "45s"),
            (4301, "1h11m"),
            (7200, "2h"),
            (7260, "2h1m"),
            (3 * 86_400 + 4 * 3600 + 59, "3d4h"),
            (8 * 86_400, "1w1d"),
        ] {
            assert_eq!(format_age(Duration::from_secs(secs)), text, "{secs} s");
        }
        assert_eq!(
            parse_duration(&format_age(Duration::from_secs(4301))).unwrap(),
            Duration::from_secs(4260)
        );
        for (n, text) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (11_832_681, "11.3 MiB"),
            (5_981_398, "5.7 MiB"),
            (10 << 30, "10.0 GiB"),
        ] {
            assert_eq!(format_bytes(n), text, "{n}");
        }
        assert_eq!(format_bytes(1024 * 1024 - 1), "1.0 MiB");
    }
}
