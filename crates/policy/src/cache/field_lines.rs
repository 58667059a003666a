//! Reading single stored field lines and their HTTP-dates (RFC 9110
//! section 5.3, 5.6.7), shared by the sections of the policy.

use super::dates::{parse_http_date, parse_http_date_strict};
use super::stored::{from_millis, StoredResponse};
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

/// An HTTP-date in a field about `stored` (one of its own, or of a later
/// message compared with it), any form of RFC 9110 section 5.6.7, read
/// robustly ([`parse_http_date`]); a two-digit year is read relative to when
/// `stored` was received. `None` if invalid. For `Date`, `Last-Modified`
/// and `If-Modified-Since`; never `Expires` ([`stored_expires`]).
pub(super) fn date_about(stored: &StoredResponse, value: &[u8]) -> Option<SystemTime> {
    parse_http_date(value, from_millis(stored.response_time_ms))
}

/// The date in the only line of `stored` named `name`; `None` when absent,
/// repeated or invalid.
pub(super) fn stored_date(stored: &StoredResponse, name: &str) -> Option<SystemTime> {
    stored_value(&stored.headers, name).and_then(|v| date_about(stored, v))
}

/// The instant of the only `Expires` line of `stored`, read strictly
/// ([`parse_http_date_strict`]: one of the three forms of RFC 9110 section
/// 5.6.7, in any letter case); `None` when absent, repeated or invalid,
/// which RFC 9111 section 5.3 makes a time in the past.
pub(super) fn stored_expires(stored: &StoredResponse) -> Option<SystemTime> {
    stored_value(&stored.headers, "expires")
        .and_then(|v| parse_http_date_strict(v, from_millis(stored.response_time_ms)))
}
