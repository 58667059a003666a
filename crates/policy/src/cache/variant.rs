//! Which stored response answers a request when a URL has several (RFC
//! 9111 section 4.1): one whose secondary key matches the request's, and
//! among those the most recently received ("the most recent response, as
//! determined by the Date header field, or the one most recently
//! received"; crawlcache orders by the time the response was received,
//! which a `Date` can not move backwards). The one place the rule is
//! written: the local lookup, offline replay, the fleet tier and
//! `cache cat` all select through [`select`], and a WARC import keeps the
//! [`newer`] of two captures.

use super::key::secondary_key;
use super::StoredResponse;
use http::HeaderMap;

/// Whether a variant stored under `stored_secondary_key`, whose response
/// carried `response_headers` (its `Vary`), matches a request with
/// `request_headers`. `Vary: *` matches nothing.
pub fn matches(
    stored_secondary_key: &[u8],
    response_headers: &HeaderMap,
    request_headers: &HeaderMap,
) -> bool {
    secondary_key(response_headers, request_headers).is_some_and(|sk| sk == stored_secondary_key)
}

/// Whether `a` was received after `b` (by response time, milliseconds);
/// false for two received in the same millisecond, so that the first seen
/// is kept.
pub fn newer(a: &StoredResponse, b: &StoredResponse) -> bool {
    a.response_time_ms > b.response_time_ms
}

/// The variant `variants` selects: the [`newer`] of those `admits` accepts
/// (the first of equals), `None` when it accepts none. `stored` gives a
/// variant's decoded response. `admits` is called once per variant, in
/// order, so it may also note why one was refused.
pub fn select<T>(
    variants: impl IntoIterator<Item = T>,
    mut admits: impl FnMut(&T) -> bool,
    stored: impl Fn(&T) -> &StoredResponse,
) -> Option<T> {
    let mut best: Option<T> = None;
    for v in variants {
        if !admits(&v) {
            continue;
        }
        if best.as_ref().is_none_or(|b| newer(stored(&v), stored(b))) {
            best = Some(v);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> StoredResponse {
        StoredResponse {
            status: 200,
            headers: Vec::new(),
            request_time_ms: ms,
            response_time_ms: ms,
            url: "http://a/".into(),
            vary_request: Vec::new(),
        }
    }

    #[test]
    fn the_most_recently_received_admitted_variant_is_selected() {
        let v = [("a", at(10)), ("b", at(30)), ("c", at(20)), ("d", at(40))];
        let got = select(v.iter(), |(n, _)| *n != "d", |(_, s)| s);
        assert_eq!(got.map(|(n, _)| *n), Some("b"), "d is newest but refused");
        assert!(select(v.iter(), |_| false, |(_, s)| s).is_none());
    }

    #[test]
    fn of_two_received_in_the_same_millisecond_the_first_is_kept() {
        let v = [("first", at(5)), ("second", at(5))];
        assert_eq!(select(v.iter(), |_| true, |(_, s)| s).map(|(n, _)| *n), Some("first"));
        assert!(!newer(&at(5), &at(5)));
        assert!(newer(&at(6), &at(5)));
    }

    #[test]
    fn a_variant_matches_only_the_requests_its_vary_nominates() {
        let mut resp = HeaderMap::new();
        resp.insert("vary", "accept".parse().unwrap());
        let mut json = HeaderMap::new();
        json.insert("accept", "application/json".parse().unwrap());
        let mut html = HeaderMap::new();
        html.insert("accept", "text/html".parse().unwrap());
        let sk = secondary_key(&resp, &json).unwrap();
        assert!(matches(&sk, &resp, &json));
        assert!(!matches(&sk, &resp, &html));
        let mut star = HeaderMap::new();
        star.insert("vary", "*".parse().unwrap());
        assert!(!matches(&[], &star, &json), "Vary: * matches nothing");
    }
}
