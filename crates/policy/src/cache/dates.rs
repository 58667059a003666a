//! HTTP-dates (RFC 9110 section 5.6.7), read two ways.
//!
//! The three forms of the grammar:
//!
//! - IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
//! - obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
//! - obsolete asctime: `Sun Nov  6 08:49:37 1994`
//!
//! [`parse_http_date_strict`] reads exactly those, for `Expires` (RFC 9111
//! section 5.3: a cache recipient MUST read an invalid date as one in the
//! past, so a value outside the grammar is not guessed at). Its only
//! tolerance is the letter case of day name, month and `GMT`, which RFC
//! 9111 section 4.2 asks a cache recipient for ("SHOULD match the field
//! value case-insensitively"). It pins the required
//! `freshness-expires-invalid-*` tests of the http-cache-tests suite (UTC or
//! another zone, a two-digit year in IMF-fixdate, no comma, several spaces,
//! dashes with a four-digit year, dots in the time, a one-digit hour) and
//! the optional ones it reads (wrong case, RFC 850, asctime).
//!
//! [`parse_http_date`] is the robust reading RFC 9110 section 5.6.7
//! encourages where a field's definition does not restrict it ("Recipients
//! of timestamp values are encouraged to be robust in parsing timestamps
//! unless otherwise restricted by the field definition"), used for `Date`,
//! `Last-Modified` and `If-Modified-Since`. There a near-miss read as the
//! instant its sender meant does no harm a refusal would avoid: a `Date`
//! that is not read falls back to the time of receipt anyway, and a
//! `Last-Modified` only feeds the heuristic (bounded by
//! `heuristic_max`) and comparisons of validators. Tolerated beyond the
//! grammar: one or more spaces (or tabs) wherever one space is required,
//! none needed after the comma; a one-digit day; a long day name in
//! IMF-fixdate, a short one or a four-digit year in RFC 850.
//!
//! Both accept any letter case and a day name that does not match the date
//! (the grammar allows any day name; the date wins), and reject unknown day
//! or month names, another zone, a day the month does not have, hours past
//! 23, minutes past 59, seconds past 60 (a leap second), and anything
//! trailing. Neither panics.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses an HTTP-date in any form of RFC 9110 section 5.6.7, robustly (see
/// the module doc for what is tolerated; [`parse_http_date_strict`] for a
/// field that must not be guessed at). `received` is when the message carrying it was
/// received: an RFC 850 two-digit year is the year with those last two digits
/// within 50 years of it, so one that would be more than 50 years after it is
/// in the previous century (RFC 9110 section 5.6.7). Returns `None` for
/// anything else; dates before 1970 are returned as such.
pub fn parse_http_date(value: &[u8], received: SystemTime) -> Option<SystemTime> {
    if let Some(t) = imf_fixdate(value) {
        return Some(t);
    }
    parse_any_form(value, received)
}

/// Parses an HTTP-date in exactly one of the three forms of RFC 9110
/// section 5.6.7, in any letter case (RFC 9111 section 4.2); leading and
/// trailing spaces and tabs are not part of a field value (RFC 9110 section
/// 5.5) and are ignored. `received` places an RFC 850 two-digit year as in
/// [`parse_http_date`]. Returns `None` for anything else, which for
/// `Expires` means a time in the past (RFC 9111 section 5.3).
pub fn parse_http_date_strict(value: &[u8], received: SystemTime) -> Option<SystemTime> {
    let value = trim_ows(value);
    if let Some(t) = imf_fixdate(value) {
        return Some(t);
    }
    parse_strict_form(value, received)
}

/// `value` without leading and trailing spaces and tabs.
fn trim_ows(value: &[u8]) -> &[u8] {
    let start = value.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(value.len());
    let end = value.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |i| i + 1);
    &value[start..end]
}

/// [`parse_http_date_strict`] for every form, by the grammar: one space
/// where it has `SP`, two digits where it has `2DIGIT`, a short day name in
/// IMF-fixdate and asctime, a long one in RFC 850.
fn parse_strict_form(value: &[u8], received: SystemTime) -> Option<SystemTime> {
    let mut c = Cursor { s: value, i: 0 };
    let day_name = c.letters();
    let short = DAYS.iter().any(|d| day_name.eq_ignore_ascii_case(d.as_bytes()));
    let long = LONG_DAYS.iter().any(|d| day_name.eq_ignore_ascii_case(d.as_bytes()));
    let (year, month, day, time) = if c.eat(b',') {
        c.expect(b' ')?;
        let day = c.number(2, 2)?;
        let (month, year) = if short {
            // IMF-fixdate: day-name "," SP DD SP Mon SP YYYY.
            c.expect(b' ')?;
            let month = month_number(c.letters())?;
            c.expect(b' ')?;
            (month, i64::from(c.number(4, 4)?))
        } else if long {
            // rfc850-date: day-name-l "," SP DD "-" Mon "-" YY.
            c.expect(b'-')?;
            let month = month_number(c.letters())?;
            c.expect(b'-')?;
            (month, two_digit_year(c.number(2, 2)?, year_of(received)))
        } else {
            return None;
        };
        c.expect(b' ')?;
        let time = c.time()?;
        c.expect(b' ')?;
        if !c.letters().eq_ignore_ascii_case(b"GMT") {
            return None;
        }
        (year, month, day, time)
    } else if short {
        // asctime-date: day-name SP Mon SP ( DD / SP D ) SP time SP YYYY.
        c.expect(b' ')?;
        let month = month_number(c.letters())?;
        c.expect(b' ')?;
        let day = if c.eat(b' ') { c.number(1, 1)? } else { c.number(2, 2)? };
        c.expect(b' ')?;
        let time = c.time()?;
        c.expect(b' ')?;
        (i64::from(c.number(4, 4)?), month, day, time)
    } else {
        return None;
    };
    if !c.at_end() {
        return None;
    }
    instant(year, month, day, time)
}

/// The instant of a calendar date and `time`; `None` for a day the month
/// does not have.
fn instant(year: i64, month: u32, day: u32, (h, m, s): (u32, u32, u32)) -> Option<SystemTime> {
    if day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400
        + i64::from(h) * 3600
        + i64::from(m) * 60
        + i64::from(s);
    if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// The common case, exactly `Sun, 06 Nov 1994 08:49:37 GMT` (the form
/// senders must generate; every stored response's `Date` after a
/// revalidation): read by position. `None` for anything else (then
/// [`parse_any_form`] or [`parse_strict_form`] decides), so it never
/// accepts a date either reading would reject or read differently.
fn imf_fixdate(v: &[u8]) -> Option<SystemTime> {
    let v: &[u8; 29] = v.try_into().ok()?;
    let digits = |i: usize, n: usize| -> Option<u32> {
        v[i..i + n]
            .iter()
            .try_fold(0u32, |acc, &d| d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0')))
    };
    if &v[3..5] != b", "
        || v[7] != b' '
        || v[11] != b' '
        || v[16] != b' '
        || v[19] != b':'
        || v[22] != b':'
        || &v[25..] != b" GMT"
    {
        return None;
    }
    if !DAYS.iter().any(|d| v[..3].eq_ignore_ascii_case(d.as_bytes())) {
        return None;
    }
    let month = month_number(&v[8..11])?;
    let (day, year) = (digits(5, 2)?, i64::from(digits(12, 4)?));
    let (h, m, s) = (digits(17, 2)?, digits(20, 2)?, digits(23, 2)?);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    instant(year, month, day, (h, m, s))
}

/// [`parse_http_date`] for every form and tolerance.
fn parse_any_form(value: &[u8], received: SystemTime) -> Option<SystemTime> {
    let mut c = Cursor { s: value.trim_ascii(), i: 0 };
    let day_name = c.letters();
    if !is_day_name(day_name) {
        return None;
    }
    let (year, month, day, time) = if c.eat(b',') {
        c.spaces();
        let day = c.number(1, 2)?;
        let (month, year) = if c.eat(b'-') {
            // RFC 850: DD-Mon-YY.
            let month = month_number(c.letters())?;
            c.expect(b'-')?;
            let year = match c.digit_count() {
                2 => two_digit_year(c.number(2, 2)?, year_of(received)),
                4 => i64::from(c.number(4, 4)?),
                _ => return None,
            };
            (month, year)
        } else {
            // IMF-fixdate: DD Mon YYYY.
            c.gap()?;
            let month = month_number(c.letters())?;
            c.gap()?;
            (month, i64::from(c.number(4, 4)?))
        };
        c.gap()?;
        let time = c.time()?;
        c.gap()?;
        if !c.letters().eq_ignore_ascii_case(b"GMT") {
            return None;
        }
        (year, month, day, time)
    } else {
        // asctime: Mon D HH:MM:SS YYYY.
        c.gap()?;
        let month = month_number(c.letters())?;
        c.gap()?;
        let day = c.number(1, 2)?;
        c.gap()?;
        let time = c.time()?;
        c.gap()?;
        let year = i64::from(c.number(4, 4)?);
        (year, month, day, time)
    };
    if !c.at_end() {
        return None;
    }
    instant(year, month, day, time)
}

/// A position in the field value; every method stays within bounds.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// Skips spaces and tabs; returns how many.
    fn spaces(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        self.i - start
    }

    /// At least one space or tab.
    fn gap(&mut self) -> Option<()> {
        (self.spaces() > 0).then_some(())
    }

    /// The run of ASCII letters at the cursor (possibly empty).
    fn letters(&mut self) -> &[u8] {
        let start = self.i;
        while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// How many ASCII digits follow, without consuming them.
    fn digit_count(&self) -> usize {
        self.s[self.i.min(self.s.len())..].iter().take_while(|b| b.is_ascii_digit()).count()
    }

    /// A number of `min..=max` digits (at most 4, so it cannot overflow).
    fn number(&mut self, min: usize, max: usize) -> Option<u32> {
        let n = self.digit_count();
        if n < min || n > max {
            return None;
        }
        let value =
            self.s[self.i..self.i + n].iter().fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
        self.i += n;
        Some(value)
    }

    /// `HH:MM:SS`, two digits each; a leap second (60) is allowed.
    fn time(&mut self) -> Option<(u32, u32, u32)> {
        let h = self.number(2, 2)?;
        self.expect(b':')?;
        let m = self.number(2, 2)?;
        self.expect(b':')?;
        let s = self.number(2, 2)?;
        (h <= 23 && m <= 59 && s <= 60).then_some((h, m, s))
    }
}

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const LONG_DAYS: [&str; 7] =
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
const MONTHS: [&str; 12] =
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

fn is_day_name(name: &[u8]) -> bool {
    DAYS.iter().chain(LONG_DAYS.iter()).any(|d| name.eq_ignore_ascii_case(d.as_bytes()))
}

/// 1 for January ... 12 for December.
fn month_number(name: &[u8]) -> Option<u32> {
    MONTHS.iter().position(|m| name.eq_ignore_ascii_case(m.as_bytes())).map(|i| i as u32 + 1)
}

/// The year ending in `yy` that lies in (`reference` − 50, `reference` + 50].
fn two_digit_year(yy: u32, reference: i64) -> i64 {
    let mut year = reference - reference.rem_euclid(100) + i64::from(yy);
    if year > reference + 50 {
        year -= 100;
    } else if year <= reference - 50 {
        year += 100;
    }
    year
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`); `month` 1..=12.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The Gregorian year of `t` (1970 for anything before the epoch).
fn year_of(t: SystemTime) -> i64 {
    let days = (t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) / 86_400) as i64;
    // H. Hinnant's civil_from_days, year only.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    yoe + era * 400 + i64::from(mp >= 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06T08:49:37Z, the RFC's example.
    const EXAMPLE: u64 = 784_111_777;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// Received 2023-11-14T22:13:20Z.
    fn received() -> SystemTime {
        at(1_700_000_000)
    }

    fn parse(s: &str) -> Option<u64> {
        parse_http_date(s.as_bytes(), received())
            .map(|t| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
    }

    #[test]
    fn the_three_forms_of_rfc_9110_section_5_6_7() {
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), Some(EXAMPLE));
    }

    #[test]
    fn letter_case_spacing_and_a_wrong_day_name_are_tolerated() {
        for s in [
            "sun, 06 nov 1994 08:49:37 gmt",
            "SUN, 06 NOV 1994 08:49:37 GMT",
            "sunday, 06-nov-94 08:49:37 Gmt",
            "SUNDAY, 06-NOV-94 08:49:37 GMT",
            "sun nov  6 08:49:37 1994",
            "Sun Nov 6 08:49:37 1994",
            "Sun Nov 06 08:49:37 1994",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun,  6  Nov  1994  08:49:37  GMT",
            "Sun,\t06 Nov 1994 08:49:37 GMT",
            "  Sun, 06 Nov 1994 08:49:37 GMT  ",
            "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-1994 08:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Friday, 06-Nov-94 08:49:37 GMT",
        ] {
            assert_eq!(parse(s), Some(EXAMPLE), "{s:?}");
        }
    }

    #[test]
    fn rfc850_two_digit_year_more_than_50_years_ahead_is_in_the_past_century() {
        // Received in 2023: years 1974 ..= 2073.
        let jan1 = |yy: &str| parse(&format!("Monday, 01-Jan-{yy} 00:00:00 GMT"));
        let year_start = |y: i64| Some((days_from_civil(y, 1, 1) * 86_400) as u64);
        assert_eq!(jan1("94"), year_start(1994));
        assert_eq!(jan1("23"), year_start(2023));
        assert_eq!(jan1("73"), year_start(2073));
        assert_eq!(jan1("74"), year_start(1974));
        assert_eq!(jan1("00"), year_start(2000));
        // Received in 2099: "00" is 2100, one year ahead.
        let late = at((days_from_civil(2099, 6, 1) * 86_400) as u64);
        let t = parse_http_date(b"Friday, 01-Jan-00 00:00:00 GMT", late).unwrap();
        assert_eq!(t, at((days_from_civil(2100, 1, 1) * 86_400) as u64));
        assert_eq!(year_of(late), 2099);
        assert_eq!(year_of(received()), 2023);
        assert_eq!(year_of(UNIX_EPOCH), 1970);
    }

    #[test]
    fn calendar_edges() {
        assert_eq!(parse("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse("Wed, 29 Feb 2012 00:00:00 GMT"), Some(1_330_473_600));
        assert_eq!(parse("Tue, 29 Feb 2000 00:00:00 GMT"), Some(951_782_400));
        assert_eq!(parse("Sat, 31 Dec 2016 23:59:60 GMT"), Some(1_483_228_800), "leap second");
        assert!(parse_http_date(b"Fri, 31 Dec 9999 23:59:59 GMT", received()).is_some());
        let before = parse_http_date(b"Mon, 01 Jan 1900 00:00:00 GMT", received()).unwrap();
        assert_eq!(UNIX_EPOCH.duration_since(before).unwrap(), Duration::from_secs(2_208_988_800));
    }

    #[test]
    fn invalid_dates_are_none() {
        for s in [
            "",
            "0",
            "-1",
            "not-a-date",
            "Thu, 32 Foo 2020 99:99:99 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Wed, 29 Feb 1995 08:49:37 GMT",
            "Mon, 29 Feb 1900 00:00:00 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 GMT junk",
            "Sun, 06 Nov 1994 08:49:37 GMT,",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 06 Nov 19940 08:49:37 GMT",
            "Sun, 06 November 1994 08:49:37 GMT",
            "Sun, 006 Nov 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-994 08:49:37 GMT",
            "Sunday, 06-Nov 94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 08:49:37 1994 GMT",
            "Sun 06 Nov 1994 08:49:37 GMT",
            "1994-11-06T08:49:37Z",
            "784111777",
        ] {
            assert_eq!(parse(s), None, "{s:?}");
        }
    }

    fn strict(s: &str) -> Option<u64> {
        parse_http_date_strict(s.as_bytes(), received())
            .map(|t| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
    }

    /// RFC 9110 section 5.6.7: the three forms as the grammar has them, in
    /// any letter case (RFC 9111 section 4.2), are read by the strict
    /// reading too; so are both spellings of an asctime day and the
    /// whitespace around a field value (RFC 9110 section 5.5).
    #[test]
    fn strict_reads_the_three_forms_in_any_case_rfc9110_5_6_7() {
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun Nov 06 08:49:37 1994",
            "SUN, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 NOV 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 gMT",
            "sunday, 06-nov-94 08:49:37 gmt",
            "SUN NOV  6 08:49:37 1994",
            "Mon, 06 Nov 1994 08:49:37 GMT",
            " \tSun, 06 Nov 1994 08:49:37 GMT\t ",
        ] {
            assert_eq!(strict(s), Some(EXAMPLE), "{s:?}");
        }
        assert_eq!(strict("Thu Nov 16 08:49:37 1994"), Some(EXAMPLE + 10 * 86_400));
        assert_eq!(strict("Sat, 31 Dec 2016 23:59:60 GMT"), Some(1_483_228_800), "leap second");
        // The RFC 850 year is placed within 50 years of the receipt (2023).
        assert_eq!(
            strict("Thursday, 18-Aug-50 02:01:18 GMT"),
            strict("Thu, 18 Aug 2050 02:01:18 GMT")
        );
        assert_eq!(
            strict("Thursday, 18-Aug-50 02:01:18 GMT").map(|t| t > 1_700_000_000),
            Some(true)
        );
    }

    /// RFC 9111 section 5.3: what is not one of the three forms is invalid
    /// for the strict reading (an `Expires` then means already expired),
    /// including every spelling the robust reading accepts beyond the
    /// grammar, and the `freshness-expires-invalid-*` values of
    /// http-cache-tests.
    #[test]
    fn strict_refuses_everything_else_rfc9111_5_3() {
        for s in [
            // http-cache-tests, freshness-expires-invalid-*.
            "0",
            "Thu, 18 Aug 2050 02:01:18 UTC",
            "Thu, 18 Aug 2050 02:01:18 AEST",
            "Thu, 18 Aug 50 02:01:18 GMT",
            "Thu 18 Aug 2050 02:01:18 GMT",
            "Thu, 18  Aug  2050 02:01:18 GMT",
            "Thu, 18-Aug-2050 02:01:18 GMT",
            "Thu, 18 Aug 2050 02.01.18 GMT",
            "Thu, 18 Aug 2050 2:01:18 GMT",
            "Thu, 18 Aug 2050 2:01:18 GMT, Thu, 18 Aug 2050 2:01:19 GMT",
            "Thu, 18 Aug 2050 02:01:18 GMT, Thu, 18 Aug 2050 02:01:19 GMT",
            // Read by the robust reading only.
            "Fri, 01-Jan-2100 00:00:00 GMT",
            "Friday, 01-Jan-2100 00:00:00 GMT",
            "Fri, 01-Jan-00 00:00:00 GMT",
            "Friday, 01 Jan 2100 00:00:00 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun,\t06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994\t08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37  GMT",
            "Sun Nov 6 08:49:37 1994",
            "Sun  Nov  6 08:49:37 1994",
            "Sun Nov   6 08:49:37 1994",
            "Sunday Nov  6 08:49:37 1994",
            "Sunday, 06-Nov-94  08:49:37 GMT",
            // Invalid for both.
            "",
            "-1",
            "not-a-date",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 GMT junk",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 08:49:37 1994 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "1994-11-06T08:49:37Z",
        ] {
            assert_eq!(strict(s), None, "{s:?}");
        }
        assert_eq!(
            parse("Fri, 01-Jan-2100 00:00:00 GMT"),
            strict("Fri, 01 Jan 2100 00:00:00 GMT"),
            "the robust reading takes it"
        );
    }

    /// The IMF-fixdate fast path agrees with the general reading on valid
    /// dates (calendar edges, leap seconds, letter case) and on every
    /// single-byte mutation of them.
    #[test]
    fn the_fixdate_fast_path_agrees_with_the_general_reading() {
        let valid = [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "sun, 06 nov 1994 08:49:37 gmt",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
            "Tue, 29 Feb 2000 23:59:60 GMT",
            "Mon, 29 Feb 2100 12:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Sat, 00 Jan 0000 00:00:00 GMT",
        ];
        let mut n = 0;
        for v in valid {
            let v = v.as_bytes();
            let mut inputs = vec![v.to_vec()];
            for i in 0..v.len() {
                for b in [0u8, b' ', b'\t', b',', b'-', b':', b'0', b'9', b'a', b'Z', 0x7f, 0xff] {
                    let mut m = v.to_vec();
                    m[i] = b;
                    inputs.push(m);
                }
            }
            for m in inputs {
                let general = parse_any_form(&m, received());
                if let Some(fast) = imf_fixdate(&m) {
                    assert_eq!(Some(fast), general, "{:?}", String::from_utf8_lossy(&m));
                    n += 1;
                }
                assert_eq!(
                    parse_http_date(&m, received()),
                    general,
                    "{:?}",
                    String::from_utf8_lossy(&m)
                );
                // The strict reading takes a subset, as the same instant.
                if let Some(t) = parse_http_date_strict(&m, received()) {
                    assert_eq!(Some(t), general, "{:?}", String::from_utf8_lossy(&m));
                }
            }
        }
        assert!(n > 50, "the fast path read {n} of them");
        assert!(imf_fixdate(b"Sun, 06 Nov 1994 08:49:37 GMT").is_some());
    }

    /// Garbage, every prefix of every valid form, and single-byte mutations
    /// of them: never a panic.
    #[test]
    fn never_panics_on_garbage() {
        let valid = [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ];
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for v in valid {
            let v = v.as_bytes();
            for end in 0..=v.len() {
                inputs.push(v[..end].to_vec());
                inputs.push(v[end..].to_vec());
            }
            for i in 0..v.len() {
                for b in [0u8, b' ', b',', b'-', b':', b'9', b'a', 0x7f, 0xff, 0xc3] {
                    let mut m = v.to_vec();
                    m[i] = b;
                    inputs.push(m.clone());
                    m.insert(i, b);
                    inputs.push(m);
                }
            }
        }
        // A deterministic pseudo-random byte soup (xorshift).
        let alphabet = b"SunNov, 0123456789-:GMT \t\xff";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 0..2000 {
            let bytes = (0..len % 48)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            inputs.push(bytes);
        }
        for input in &inputs {
            for received in [
                UNIX_EPOCH,
                received(),
                at(253_402_300_799),
                UNIX_EPOCH - Duration::from_secs(86_400),
            ] {
                let _ = parse_http_date(input, received);
                if let Some(t) = parse_http_date_strict(input, received) {
                    assert_eq!(
                        parse_http_date(input, received),
                        Some(t),
                        "{:?}",
                        String::from_utf8_lossy(input)
                    );
                }
            }
        }
    }
}
