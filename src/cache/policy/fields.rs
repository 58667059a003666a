//! Reading single stored field lines and HTTP-dates (RFC 9110 section 5.3,
//! 5.6.7), shared by the sections of the policy.

use std::time::SystemTime;

/// The value of the only line named `name`; `None` when absent or repeated.
pub(super) fn stored_value<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    let mut lines = headers.iter().filter(|(n, _)| n == name);
    let first = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    Some(first.1.as_slice())
}

/// An HTTP-date (RFC 9110 section 5.6.7, all three formats); `None` if invalid.
pub(super) fn parse_date(value: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(value).ok()?.trim();
    httpdate::parse_http_date(s).ok()
}

/// The date in the only line named `name`; `None` when absent, repeated or invalid.
pub(super) fn single_date(headers: &[(String, Vec<u8>)], name: &str) -> Option<SystemTime> {
    stored_value(headers, name).and_then(parse_date)
}
