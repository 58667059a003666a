//! Time as text: RFC 3339 timestamps in UTC (the audit log, `cache show`,
//! WARC-Date) and the calendar arithmetic behind them and behind X.509
//! validity dates, written once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Whether `d` is `YYYY-MM-DD` (digits and dashes only; the values are not
/// checked).
pub fn is_date(d: &str) -> bool {
    d.len() == 10
        && d.bytes()
            .enumerate()
            .all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() })
}

/// Formats `t` as RFC 3339 in UTC with milliseconds: `2026-11-30T01:02:03.456Z`.
/// Times before 1970 are written as the epoch.
pub fn format_rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    thread_local! {
        /// The last second formatted on this thread and its text up to the
        /// seconds (`YYYY-MM-DDTHH:MM:SS`): requests arrive many to a second.
        static LAST: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
    }
    let (last_secs, text) = LAST.try_with(std::cell::Cell::get).unwrap_or((u64::MAX, [0; 19]));
    let mut out = String::with_capacity(24);
    match std::str::from_utf8(&text) {
        Ok(t) if last_secs == secs => out.push_str(t),
        _ => {
            out.push_str(&format_seconds(secs));
            if let Ok(text) = <[u8; 19]>::try_from(out.as_bytes()) {
                let _ = LAST.try_with(|l| l.set((secs, text)));
            }
        }
    }
    out.push('.');
    push_padded(&mut out, u64::from(d.subsec_millis()), 3);
    out.push('Z');
    out
}

/// `YYYY-MM-DDTHH:MM:SS` (UTC) of `secs` seconds since the Unix epoch.
pub fn format_seconds(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, dd) = civil_from_days(days);
    // Written digit by digit (once per request for the audit line; the
    // formatting machinery of `format!` cost several times as much).
    let mut out = String::with_capacity(24);
    push_padded(&mut out, y.unsigned_abs(), 4);
    out.push('-');
    push_padded(&mut out, u64::from(m), 2);
    out.push('-');
    push_padded(&mut out, u64::from(dd), 2);
    out.push('T');
    push_padded(&mut out, rem / 3600, 2);
    out.push(':');
    push_padded(&mut out, (rem % 3600) / 60, 2);
    out.push(':');
    push_padded(&mut out, rem % 60, 2);
    out
}

/// RFC 3339 in UTC with whole seconds, `2024-05-01T12:00:00Z`, of `secs`
/// seconds since the Unix epoch (the form of a WARC-Date).
pub fn format_rfc3339_seconds(secs: u64) -> String {
    let mut out = format_seconds(secs);
    out.push('Z');
    out
}

/// Appends `n` in decimal, zero-padded to at least `width` digits.
pub fn push_padded(out: &mut String, n: u64, width: usize) {
    let (digits, at) = decimal(n, width);
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// `n` in decimal ASCII, zero-padded to at least `width` (at most 20)
/// digits: the digits are `buffer[start..]`.
pub fn decimal(mut n: u64, width: usize) -> ([u8; 20], usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let stop = digits.len().saturating_sub(width.max(1));
    while n > 0 || at > stop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    (digits, at)
}

/// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`); `None` when
/// malformed or before 1970.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20
        || !is_date(s.get(..10)?)
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok()).flatten()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + u64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset: i64 = match s.get(i..)? {
        "Z" | "z" => 0,
        o if o.len() == 6
            && (o.starts_with('+') || o.starts_with('-'))
            && o.as_bytes()[3] == b':' =>
        {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let v = oh * 3600 + om * 60;
            if o.starts_with('-') {
                -v
            } else {
                v
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos as u32))
}

/// The date (year, month 1-12, day 1-31) `z` days after 1970-01-01 in
/// the proleptic Gregorian calendar (Howard Hinnant's civil calendar
/// algorithms; negative `z` before).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days from 1970-01-01 to year `y`, month `m` (1-12), day `d` of the
/// proleptic Gregorian calendar (negative before); the inverse of
/// [`civil_from_days`].
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_written_as_format_would_write_it() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ms = x % 400_000_000_000_000; // up to year ~14,600
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            let secs = ms / 1000;
            let (y, m, dd) = civil_from_days((secs / 86_400) as i64);
            let rem = secs % 86_400;
            let want = format!(
                "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60,
                ms % 1000
            );
            assert_eq!(format_rfc3339(t), want);
        }
    }

    #[test]
    fn rfc3339_round_trip_and_known_values() {
        assert_eq!(format_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(format_rfc3339(t), "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20.123Z"), Some(t));
        assert_eq!(parse_rfc3339("2023-11-14T23:13:20.123+01:00"), Some(t));
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00Z").map(format_rfc3339).as_deref(),
            Some("2024-02-29T00:00:00.000Z")
        );
        for bad in [
            "",
            "2023-11-14",
            "2023-13-14T00:00:00Z",
            "2023-11-14T00:00:00",
            "2023-11-14T00:00:00.Z",
            "x023-11-14T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn whole_seconds_and_the_calendar_round_trip() {
        assert_eq!(format_rfc3339_seconds(1_714_564_800), "2024-05-01T12:00:00Z");
        for days in [-800_000i64, -1, 0, 59, 60, 365, 11_016, 19_782, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, i64::from(m), i64::from(d)), days);
        }
        assert!(is_date("2026-12-03") && !is_date("2026-12-3") && !is_date("2026/12/03"));
        assert_eq!(decimal(42, 4).0[16..], *b"0042");
    }
}
