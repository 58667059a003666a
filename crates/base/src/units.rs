//! Durations and sizes as the configuration writes them: `"500ms"`,
//! `"30s"`, `"10m"`, `"6h"`, `"3d"`; `"512KiB"`, `"10GB"`.
//!
//! A leaf module: it imports nothing from the crate, so both
//! The configuration and the robots.txt settings read their values with
//! the same rules without depending on each other. The syntax is our own
//! (a bare number means seconds or bytes, fractions such as `1.5s` are
//! accepted); crates such as `humantime` accept a different set, so the
//! parser stays here.

use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// Parses a duration such as `500ms`, `30s`, `10m`, `6h`, `3d` (a bare
/// number is seconds). Fractions are accepted (`1.5s`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a duration (use e.g. 30s, 10m, 6h, 3d)"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        other => return Err(format!("'{s}': unknown duration unit '{other}' (use ms, s, m, h or d)")),
    };
    let secs = n * scale;
    if !secs.is_finite() || secs < 0.0 || secs > 1e12 {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Writes `d` in the largest unit of [`parse_duration`] that expresses it
/// whole (`7d`, `90m`, `30s`, `1500ms`), so that it parses back to `d`
/// (to the millisecond).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, scale) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms > 0 && ms % scale == 0 {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

/// Parses a size in bytes: a bare integer, or a number with `B`, `KB`, `MB`,
/// `GB`, `TB` (powers of 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{s}' is not a size (use e.g. 512KiB, 100MiB, 10GiB)"))?;
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
        other => return Err(format!("'{s}': unknown size unit '{other}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")),
    };
    let bytes = n * scale;
    if !bytes.is_finite() || bytes < 0.0 || bytes > 1.8e19 {
        return Err(format!("'{s}' is out of range"));
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
        _ => Err(serde::de::Error::custom("a size must be a non-negative integer or a string such as \"10GiB\"")),
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
        for (d, text) in [(604_800_000, "7d"), (5_400_000, "90m"), (30_000, "30s"), (1500, "1500ms"), (0, "0ms")] {
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
}
