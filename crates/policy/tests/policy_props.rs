//! Property tests of the caching policy: for any response header set
//! (Cache-Control soups with junk; valid and invalid Expires, Date,
//! Last-Modified, Age) and any clock, the RFC 9111 invariants hold.

use crawlcache_policy::cache::cache_control::CacheControl;
use crawlcache_policy::cache::*;
use crawlcache_policy::cache::{from_millis, to_millis, StoredResponse};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use proptest::prelude::*;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const T: u64 = 1_700_000_000;

fn directive() -> impl Strategy<Value = String> {
    let delta = prop_oneof![
        (0u64..200).prop_map(|n| n.to_string()),
        Just("2147483648".to_string()),
        Just("99999999999999999999".to_string()),
        Just("-5".to_string()),
        Just("1.5".to_string()),
        Just("600s".to_string()),
        Just("\"30\"".to_string()),
        Just("'30'".to_string()),
        Just("".to_string()),
    ];
    let name = prop_oneof![
        Just("max-age"),
        Just("s-maxage"),
        Just("MAX-AGE"),
        Just("stale-while-revalidate"),
        Just("stale-if-error"),
        Just("max-stale"),
        Just("min-fresh"),
    ];
    prop_oneof![
        (name, delta).prop_map(|(n, d)| format!("{n}={d}")),
        Just("no-cache".to_string()),
        Just("no-store".to_string()),
        Just("No-Store".to_string()),
        Just("must-revalidate".to_string()),
        Just("proxy-revalidate".to_string()),
        Just("must-understand".to_string()),
        Just("public".to_string()),
        Just("private".to_string()),
        Just("private=\"x-a, set-cookie\"".to_string()),
        Just("no-cache=\"set-cookie\"".to_string()),
        Just("immutable".to_string()),
        Just("max-stale".to_string()),
        Just("ext=\"max-age=3600, no-store\"".to_string()),
        "[a-z=\" ,;\\\\-]{0,12}",
    ]
}

fn cache_control_lines() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::collection::vec(directive(), 0..5).prop_map(|d| d.join(", ")), 0..3)
}

/// An HTTP-date at T + offset seconds, or an invalid value.
fn date_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (-100_000_000i64..100_000_000).prop_map(|o| httpdate::fmt_http_date(at(o))),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("".to_string()),
        Just("not-a-date".to_string()),
        Just("Thu, 01 Jan 1970 00:00:00 GMT".to_string()),
        Just("Fri, 31 Dec 9999 23:59:59 GMT".to_string()),
    ]
}

fn age_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..100_000).prop_map(|n| n.to_string()),
        Just("99999999999999999999".to_string()),
        Just("-1".to_string()),
        Just("abc".to_string()),
        Just("1, 2".to_string()),
        Just("0, 7200".to_string()),
        Just(", 5".to_string()),
        Just("".to_string()),
        Just("7200.0".to_string()),
        Just("7200;foo=1".to_string()),
    ]
}

fn at(offset: i64) -> SystemTime {
    let secs = (T as i64 + offset).max(0) as u64;
    UNIX_EPOCH + Duration::from_secs(secs)
}

#[derive(Debug, Clone)]
struct Response {
    status: u16,
    fields: Vec<(String, String)>,
}

fn response() -> impl Strategy<Value = Response> {
    (
        prop_oneof![
            Just(200u16),
            Just(203),
            Just(204),
            Just(301),
            Just(302),
            Just(404),
            Just(500),
            Just(599),
            100u16..1000
        ],
        cache_control_lines(),
        prop::option::of(date_value()),
        prop::option::of(date_value()),
        prop::option::of(date_value()),
        prop::collection::vec(age_value(), 0..3),
        prop::option::of(prop_oneof![Just("*"), Just("accept"), Just("accept, *")]),
    )
        .prop_map(|(status, cc, expires, date, lm, ages, vary)| {
            let mut fields = Vec::new();
            for line in cc {
                fields.push(("cache-control".to_string(), line));
            }
            if let Some(v) = expires {
                fields.push(("expires".to_string(), v));
            }
            if let Some(v) = date {
                fields.push(("date".to_string(), v));
            }
            if let Some(v) = lm {
                fields.push(("last-modified".to_string(), v));
            }
            for a in ages {
                fields.push(("age".to_string(), a));
            }
            if let Some(v) = vary {
                fields.push(("vary".to_string(), v.to_string()));
            }
            Response { status, fields }
        })
}

fn header_map(fields: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (n, v) in fields {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n.as_bytes()), HeaderValue::from_str(v)) {
            map.append(n, v);
        }
    }
    map
}

fn request() -> impl Strategy<Value = HeaderMap> {
    (cache_control_lines(), any::<bool>()).prop_map(|(cc, pragma)| {
        let mut fields: Vec<(String, String)> =
            cc.into_iter().map(|l| ("cache-control".to_string(), l)).collect();
        if pragma {
            fields.push(("pragma".to_string(), "no-cache".to_string()));
        }
        header_map(&fields)
    })
}

fn stored(r: &Response, request_offset: i64, delay: i64, cfg: &PolicyConfig) -> StoredResponse {
    StoredResponse {
        status: r.status,
        headers: headers_to_store(&header_map(&r.fields), cfg),
        request_time_ms: to_millis(at(request_offset)),
        response_time_ms: to_millis(at(request_offset + delay)),
        url: "http://example.com/".to_string(),
        vary_request: vec![],
    }
}

fn config() -> impl Strategy<Value = PolicyConfig> {
    (any::<bool>(), 0.0f64..1.0, 0u64..200_000, 0u64..1000, 0u64..200_000).prop_map(
        |(shared, f, hmax, ttl, mse)| PolicyConfig {
            shared,
            heuristic_fraction: f,
            heuristic_max: Duration::from_secs(hmax),
            default_ttl: Duration::from_secs(ttl),
            max_stale_on_error: Duration::from_secs(mse),
            store_set_cookie: false,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// freshness_lifetime never panics and is never negative (a Duration,
    /// bounded by the largest HTTP-date); current_age never panics.
    #[test]
    fn freshness_lifetime_is_bounded(r in response(), cfg in config(), req_off in -1000i64..1000, delay in 0i64..100, now in -1000i64..10_000_000) {
        let s = stored(&r, req_off, delay, &cfg);
        let lifetime = freshness_lifetime(&s, &cfg);
        prop_assert!(lifetime <= Duration::from_secs(10_000 * 365 * 86_400));
        let _ = current_age(&s, at(now));
    }

    /// A stored response is never served as fresh past its lifetime, and
    /// `stale`, `age` and `ttl` agree with the lifetime and the current age.
    #[test]
    fn decide_never_reports_fresh_past_its_lifetime(r in response(), req in request(), cfg in config(), req_off in -1000i64..1000, delay in 0i64..100, now in -1000i64..10_000_000) {
        let s = stored(&r, req_off, delay, &cfg);
        let d = decide(&CacheControl::from_headers(&req), &s, at(now), &cfg);
        let lifetime = freshness_lifetime(&s, &cfg);
        let age = current_age(&s, at(now));
        prop_assert_eq!(d.stale, age >= lifetime);
        prop_assert_eq!(d.age, age.as_secs());
        if d.reuse == Reuse::Serve && !d.stale {
            prop_assert!(age < lifetime);
        }
        if age > lifetime {
            prop_assert!(d.stale);
            prop_assert!(d.ttl < 0);
        }
        if !d.stale {
            prop_assert!(d.ttl >= 0);
        }
        // Stale responses are only served when nothing forbids it.
        if d.stale && d.reuse != Reuse::Revalidate {
            let cc = CacheControl::from_stored(&s.headers);
            prop_assert!(!cc.must_revalidate && !cc.no_cache);
            prop_assert!(!(cfg.shared && cc.proxy_revalidate));
        }
    }

    /// no-store in the request always prevents storing; in the response it
    /// does unless must-understand (RFC 9111 section 5.2.2.3) overrides it.
    #[test]
    fn no_store_is_never_storable(r in response(), req in request(), cfg in config(), in_request in any::<bool>()) {
        let mut resp = header_map(&r.fields);
        let mut req = req;
        if in_request {
            req.append(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        } else {
            resp.append(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
        let result = storable(&Method::GET, &CacheControl::from_headers(&req), &req, r.status, &resp, &cfg);
        let must_understand = CacheControl::from_response_headers(&resp).must_understand;
        if in_request || !must_understand {
            prop_assert!(result.is_err());
        }
    }

    /// Vary: * and non-GET methods are never storable; storing never panics.
    #[test]
    fn storable_never_panics(r in response(), req in request(), cfg in config()) {
        let resp = header_map(&r.fields);
        let result = storable(&Method::GET, &CacheControl::from_headers(&req), &req, r.status, &resp, &cfg);
        if crawlcache_policy::cache::key::secondary_key(&resp, &req).is_none() {
            prop_assert!(result.is_err());
        }
        prop_assert!(storable(&Method::HEAD, &CacheControl::from_headers(&req), &req, r.status, &resp, &cfg).is_err());
    }

    /// Stale-on-error never overrides must-revalidate or no-cache.
    #[test]
    fn stale_on_error_respects_must_revalidate(r in response(), req in request(), cfg in config(), now in 0i64..10_000_000, unreachable in any::<bool>()) {
        let s = stored(&r, 0, 0, &cfg);
        let error = if unreachable { OriginError::Unreachable } else { OriginError::Status(503) };
        let cc = CacheControl::from_stored(&s.headers);
        if may_serve_stale_on_error(&CacheControl::from_headers(&req), &s, error, at(now), &cfg) {
            prop_assert!(!cc.must_revalidate && !cc.no_cache);
            prop_assert!(!CacheControl::from_headers(&req).no_cache);
        }
    }

    /// RFC 9111 section 5.1: the received `Age` is the first member of the
    /// list its lines form; an invalid first member counts as no `Age` at all
    /// (never as "as old as possible").
    #[test]
    fn age_is_the_first_list_member_or_absent(ages in prop::collection::vec(age_value(), 0..3), now in 0i64..100_000) {
        let fields: Vec<(String, Vec<u8>)> = ages.iter().map(|a| ("age".to_string(), a.clone().into_bytes())).collect();
        let joined = ages.join(",");
        let first = joined.split(',').map(str::trim).find(|m| !m.is_empty());
        let expected = match first {
            Some(m) if m.bytes().all(|b| b.is_ascii_digit()) => m.parse::<u128>().map_or(0, |n| n.min(2_147_483_648) as u64),
            _ => 0,
        };
        prop_assert_eq!(crawlcache_policy::cache::age_value(&fields), expected);
        let with = StoredResponse { status: 200, headers: fields, request_time_ms: to_millis(at(0)), response_time_ms: to_millis(at(0)), url: String::new(), vary_request: vec![] };
        let single = StoredResponse { headers: if expected == 0 { vec![] } else { vec![("age".to_string(), expected.to_string().into_bytes())] }, ..with.clone() };
        prop_assert_eq!(current_age(&with, at(now)), current_age(&single, at(now)));
    }

    /// RFC 9110 section 5.6.7: the HTTP-date parser never panics, whatever
    /// the bytes and whenever the message was received.
    #[test]
    fn http_date_parser_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..48),
        soup in "[SsUuNnMoTtWwEeDdFfRrAaGgJjLlPpVvCcYyBb0-9 ,:\t-]{0,36}",
        received in 0u64..400_000_000_000,
    ) {
        let received = UNIX_EPOCH + Duration::from_secs(received);
        let _ = parse_http_date(&bytes, received);
        let _ = parse_http_date(soup.as_bytes(), received);
    }

    /// The three forms of one instant (IMF-fixdate, RFC 850, asctime), in
    /// any letter case, read as that instant; the RFC 850 two-digit year is
    /// placed relative to a receive time within a few years of it.
    #[test]
    fn http_date_forms_name_the_same_instant(secs in 0u64..253_402_300_799, skew in -1_000_000_000i64..1_000_000_000, upper in any::<bool>()) {
        let t = UNIX_EPOCH + Duration::from_secs(secs);
        let imf = httpdate::fmt_http_date(t); // "Sun, 06 Nov 1994 08:49:37 GMT"
        let (wd, day, month, year, time) = (&imf[0..3], &imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
        let long = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
            .into_iter()
            .find(|l| l.starts_with(wd))
            .unwrap_or("Sunday");
        let rfc850 = format!("{long}, {day}-{month}-{} {time} GMT", &year[2..]);
        let asctime = format!("{wd} {month} {:>2} {time} {year}", day.trim_start_matches('0'));
        let received = UNIX_EPOCH + Duration::from_secs(secs.saturating_add_signed(skew));
        for form in [imf.clone(), rfc850, asctime] {
            let form = if upper { form.to_ascii_uppercase() } else { form.to_ascii_lowercase() };
            prop_assert_eq!(parse_http_date(form.as_bytes(), received), Some(t), "{}", form);
        }
    }

    /// 304 freshening never panics, keeps the status, and leaves the stored
    /// response with the 304's times.
    #[test]
    fn freshen_is_total(r in response(), n in response(), cfg in config(), t1 in 0i64..1000) {
        let s = stored(&r, 0, 0, &cfg);
        let f = freshen(&s, &header_map(&n.fields), at(t1), at(t1 + 1), &cfg);
        prop_assert_eq!(f.status, s.status);
        prop_assert_eq!(from_millis(f.response_time_ms), at(t1 + 1));
        let _ = decide(&CacheControl::from_headers(&HeaderMap::new()), &f, at(t1 + 5), &cfg);
        let _ = conditional_headers(&f);
    }
}
