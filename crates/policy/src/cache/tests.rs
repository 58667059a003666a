//! Decision tests with a fixed clock, one group per field case of
//! `docs/CASES.md` (C02 ... C23) and per RFC 9111 section; each group's
//! heading names the file of `policy/` it covers.
//! "T" is the time the first response is received.

use super::cache_control::CacheControl;
use super::key::primary_key;
use super::StoredResponse;
use super::*;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// T: a fixed instant (2023-11-14T22:13:20Z).
fn t() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn at(secs: i64) -> SystemTime {
    if secs >= 0 {
        t() + Duration::from_secs(secs as u64)
    } else {
        t() - Duration::from_secs((-secs) as u64)
    }
}

fn date(secs: i64) -> String {
    httpdate::fmt_http_date(at(secs))
}

fn hm(fields: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (n, v) in fields {
        map.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    map
}

fn cfg() -> PolicyConfig {
    PolicyConfig::default()
}

/// A response received at T (requested at T) and stored as the policy stores it.
fn stored_at(
    status: u16,
    fields: &[(&str, &str)],
    request_time: SystemTime,
    response_time: SystemTime,
) -> StoredResponse {
    StoredResponse {
        status,
        headers: headers_to_store(&hm(fields), &cfg()),
        request_time_ms: super::to_millis(request_time),
        response_time_ms: super::to_millis(response_time),
        url: "http://example.com/".into(),
        vary_request: vec![],
    }
}

fn stored(status: u16, fields: &[(&str, &str)]) -> StoredResponse {
    stored_at(status, fields, t(), t())
}

fn get(stored: &StoredResponse, name: &str) -> Vec<String> {
    stored
        .headers
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect()
}

fn conditional(stored: &StoredResponse) -> Vec<(String, String)> {
    conditional_headers(stored)
        .into_iter()
        .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap().to_string()))
        .collect()
}

fn no_request() -> HeaderMap {
    HeaderMap::new()
}

fn lifetime(stored: &StoredResponse) -> u64 {
    freshness_lifetime(stored, &cfg()).as_secs()
}

// ------------------------------------- C02: 304 freshening (validation.rs)

#[test]
fn c02_304_keeps_both_lines_of_a_repeated_field_it_does_not_carry() {
    let d0 = date(0);
    let s = stored(
        200,
        &[
            ("date", &d0),
            ("cache-control", "max-age=5"),
            ("etag", "\"v1\""),
            ("x-tag", "red"),
            ("x-tag", "blue"),
        ],
    );
    // T+10: stale, revalidated with the stored ETag.
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(10), &cfg());
    assert_eq!(d.reuse, Reuse::Revalidate);
    assert!(d.stale);
    assert_eq!(conditional(&s), vec![("if-none-match".to_string(), "\"v1\"".to_string())]);
    // The 304.
    let d10 = date(10);
    let not_modified = hm(&[("date", &d10), ("etag", "\"v1\""), ("cache-control", "max-age=60")]);
    assert!(not_modified_matches(&s, &not_modified));
    let f = freshen(&s, &not_modified, at(10), at(10), &cfg());
    assert_eq!(get(&f, "x-tag"), vec!["red", "blue"]);
    assert_eq!(get(&f, "cache-control"), vec!["max-age=60"]);
    assert_eq!(get(&f, "etag"), vec!["\"v1\""]);
    // T+20: served from cache, no origin contact.
    let d = decide(&CacheControl::from_headers(&no_request()), &f, at(20), &cfg());
    assert_eq!(d.reuse, Reuse::Serve);
    assert_eq!((d.age, d.ttl, d.stale), (10, 50, false));
}

#[test]
fn c02_304_fields_replace_all_same_named_lines_in_place() {
    let s = stored(
        200,
        &[("cache-control", "max-age=5"), ("x-tag", "red"), ("x-other", "1"), ("x-tag", "blue")],
    );
    let f = freshen(&s, &hm(&[("x-tag", "green")]), at(10), at(10), &cfg());
    let names: Vec<&str> = f.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..3], &["cache-control", "x-tag", "x-other"]);
    assert_eq!(get(&f, "x-tag"), vec!["green"]);
}

#[test]
fn c02_304_content_length_and_body_describing_fields_are_ignored() {
    let s = stored(
        200,
        &[
            ("content-length", "100000"),
            ("content-encoding", "gzip"),
            ("etag", "\"v1\""),
            ("cache-control", "max-age=5"),
        ],
    );
    let f = freshen(
        &s,
        &hm(&[
            ("content-length", "0"),
            ("content-encoding", "br"),
            ("etag", "\"v1\""),
            ("set-cookie", "a=b"),
            ("connection", "close"),
        ]),
        at(10),
        at(10),
        &cfg(),
    );
    assert_eq!(get(&f, "content-length"), vec!["100000"]);
    assert_eq!(get(&f, "content-encoding"), vec!["gzip"]);
    assert!(get(&f, "set-cookie").is_empty());
    assert!(get(&f, "connection").is_empty());
}

#[test]
fn c02_304_resets_age_and_date() {
    // Stored with Age: 50 and Date T; the 304 at T+100 carries neither.
    let s = stored(200, &[("date", &date(0)), ("age", "50"), ("cache-control", "max-age=60")]);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(100), &cfg()).reuse,
        Reuse::Revalidate
    );
    let f = freshen(&s, &hm(&[("cache-control", "max-age=60")]), at(99), at(100), &cfg());
    assert!(get(&f, "age").is_empty());
    assert_eq!(get(&f, "date"), vec![date(100)]);
    assert_eq!(current_age(&f, at(110)), Duration::from_secs(11)); // 1 s response_delay + 10 s resident
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &f, at(110), &cfg()).reuse,
        Reuse::Serve
    );
}

// --------------------------------------------- C04: Expires (freshness.rs)

#[test]
fn c04_expires_minus_date_is_used_not_the_heuristic() {
    let s = stored(
        200,
        &[("date", &date(0)), ("expires", &date(86_400)), ("last-modified", &date(-30 * 86_400))],
    );
    assert_eq!(lifetime(&s), 86_400);
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(3600), &cfg());
    assert_eq!(d.reuse, Reuse::Serve);
    assert_eq!(d.ttl, 86_400 - 3600);
}

#[test]
fn c04_expires_equal_to_date_is_revalidated_with_if_modified_since() {
    let lm = date(-30 * 86_400);
    let s = stored(200, &[("date", &date(0)), ("expires", &date(0)), ("last-modified", &lm)]);
    assert_eq!(lifetime(&s), 0, "no heuristic when Expires is present");
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(60), &cfg());
    assert_eq!(d.reuse, Reuse::Revalidate);
    assert!(d.stale);
    assert_eq!(conditional(&s), vec![("if-modified-since".to_string(), lm)]);
}

#[test]
fn c04_precedence_s_maxage_then_max_age_then_expires() {
    let e = date(100);
    let d0 = date(0);
    assert_eq!(
        lifetime(&stored(
            200,
            &[("date", &d0), ("expires", &e), ("cache-control", "max-age=50, s-maxage=20")]
        )),
        20
    );
    assert_eq!(
        lifetime(&stored(200, &[("date", &d0), ("expires", &e), ("cache-control", "max-age=50")])),
        50
    );
    assert_eq!(lifetime(&stored(200, &[("date", &d0), ("expires", &e)])), 100);
    let private_cache = PolicyConfig { shared: false, ..cfg() };
    let s = stored(200, &[("cache-control", "max-age=50, s-maxage=20")]);
    assert_eq!(freshness_lifetime(&s, &private_cache).as_secs(), 50);
}

#[test]
fn c04_expires_without_date_uses_response_time() {
    let s = stored_at(200, &[("expires", &date(30))], at(0), at(0));
    assert_eq!(lifetime(&s), 30);
}

// --------------------------------------------- C06: no-store (storable.rs)

#[test]
fn c06_request_no_store_is_never_stored() {
    let req = hm(&[("cache-control", "no-store")]);
    let resp = hm(&[("cache-control", "max-age=300")]);
    assert_eq!(
        storable(&Method::GET, &CacheControl::from_headers(&req), &req, 200, &resp, &cfg()),
        Err(NotStorable::NoStore)
    );
    // Step 3: the same URL without no-store is storable (it was never stored before).
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Ok(())
    );
}

#[test]
fn c06_response_no_store_in_any_case_or_line_is_never_stored() {
    for cc in [
        &["no-store"][..],
        &["No-StOrE"],
        &["max-age=10000, no-store"],
        &["max-age=60", "no-store"],
    ] {
        let fields: Vec<(&str, &str)> = cc.iter().map(|v| ("cache-control", *v)).collect();
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                200,
                &hm(&fields),
                &cfg()
            ),
            Err(NotStorable::NoStore),
            "{cc:?}"
        );
    }
}

// ---------------------------------------------- C07: private (storable.rs)

#[test]
fn c07_unqualified_private_is_not_stored_by_a_shared_cache() {
    let resp = hm(&[("cache-control", "private, max-age=600")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Err(NotStorable::Private)
    );
    let private_cache = PolicyConfig { shared: false, ..cfg() };
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &private_cache
        ),
        Ok(())
    );
}

#[test]
fn c07_qualified_private_stores_the_body_but_not_the_named_field() {
    let resp = hm(&[
        ("cache-control", "private=\"Set-Cookie, X-User\", max-age=600"),
        ("set-cookie", "sid=1"),
        ("x-user", "alice"),
        ("x-other", "1"),
    ]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Ok(())
    );
    let with_cookies = PolicyConfig { store_set_cookie: true, ..cfg() };
    let kept = headers_to_store(&resp, &with_cookies);
    let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["cache-control", "x-other"]);
}

// ------------------------------------------- C08: Set-Cookie (storable.rs)

#[test]
fn c08_set_cookie_is_stripped_before_storing() {
    let resp = hm(&[
        ("cache-control", "public, max-age=60"),
        ("set-cookie", "sid=placeholder-1"),
        ("set-cookie2", "x=1"),
    ]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Ok(())
    );
    let s = stored(
        200,
        &[
            ("cache-control", "public, max-age=60"),
            ("set-cookie", "sid=placeholder-1"),
            ("set-cookie2", "x=1"),
        ],
    );
    assert!(get(&s, "set-cookie").is_empty());
    assert!(get(&s, "set-cookie2").is_empty());
    // Step 2: served to the other client, without the cookie.
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(5), &cfg()).reuse,
        Reuse::Serve
    );
}

#[test]
fn c08_qualified_no_cache_set_cookie_serves_from_cache_without_it() {
    let fields = [
        ("cache-control", "public, max-age=60, no-cache=\"Set-Cookie\""),
        ("set-cookie", "sid=placeholder-1"),
    ];
    let resp = hm(&fields);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Ok(())
    );
    // Dropped even when cookies are otherwise stored.
    let with_cookies = PolicyConfig { store_set_cookie: true, ..cfg() };
    assert!(headers_to_store(&resp, &with_cookies).iter().all(|(n, _)| n != "set-cookie"));
    let s = stored(200, &fields);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(5), &cfg()).reuse,
        Reuse::Serve,
        "qualified no-cache does not force validation"
    );
}

#[test]
fn c08_opt_in_stores_set_cookie() {
    let with_cookies = PolicyConfig { store_set_cookie: true, ..cfg() };
    let kept = headers_to_store(
        &hm(&[("set-cookie", "a=c"), ("cache-control", "max-age=60")]),
        &with_cookies,
    );
    assert!(kept.contains(&("set-cookie".to_string(), b"a=c".to_vec())));
}

// ------------------------ C11: GET only, HEAD on the GET key (storable.rs)

#[test]
fn c11_only_get_responses_are_stored_and_head_shares_the_get_key() {
    let resp =
        hm(&[("content-length", "5000"), ("cache-control", "max-age=600"), ("etag", "\"b1\"")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Ok(())
    );
    // Variant: a HEAD response is never stored, so it can never answer a GET.
    assert_eq!(
        storable(
            &Method::HEAD,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Err(NotStorable::Method)
    );
    assert_eq!(
        storable(
            &Method::POST,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &resp,
            &cfg()
        ),
        Err(NotStorable::Method)
    );
    // The key has no method: the HEAD finds the stored GET, headers intact.
    let uri: http::Uri = "http://example.com/file.bin".parse().unwrap();
    assert_eq!(primary_key(&uri).as_deref(), Some("http://example.com/file.bin"));
    let s = stored(
        200,
        &[("content-length", "5000"), ("cache-control", "max-age=600"), ("etag", "\"b1\"")],
    );
    assert_eq!(get(&s, "content-length"), vec!["5000"]);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(2), &cfg()).reuse,
        Reuse::Serve
    );
}

// --------------------- C12: heuristic statuses (storable.rs, freshness.rs)

#[test]
fn c12_301_and_308_are_heuristically_cacheable_302_is_not() {
    let with_ttl = PolicyConfig { default_ttl: Duration::from_secs(300), ..cfg() };
    for status in [301, 308] {
        let resp = hm(&[("location", "http://example.com/new")]);
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                status,
                &resp,
                &with_ttl
            ),
            Ok(()),
            "{status}"
        );
        let s = stored(status, &[("location", "http://example.com/new"), ("date", &date(0))]);
        assert_eq!(freshness_lifetime(&s, &with_ttl), Duration::from_secs(300));
        let d = decide(&CacheControl::from_headers(&no_request()), &s, at(30), &with_ttl);
        assert_eq!(d.reuse, Reuse::Serve, "{status}");
        assert_eq!(get(&s, "location"), vec!["http://example.com/new"]);
        // With Last-Modified: 10 % of its age, capped at heuristic_max.
        let lm = stored(
            status,
            &[("location", "/new"), ("date", &date(0)), ("last-modified", &date(-1000))],
        );
        assert_eq!(freshness_lifetime(&lm, &with_ttl), Duration::from_secs(100));
        let old = stored(
            status,
            &[("location", "/new"), ("date", &date(0)), ("last-modified", &date(-365 * 86_400))],
        );
        assert_eq!(freshness_lifetime(&old, &with_ttl), Duration::from_secs(86_400));
    }
    let resp = hm(&[("location", "http://example.com/new")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            302,
            &resp,
            &with_ttl
        ),
        Err(NotStorable::NoFreshnessOrValidator)
    );
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            307,
            &resp,
            &with_ttl
        ),
        Err(NotStorable::NoFreshnessOrValidator)
    );
    // A 302 with explicit freshness, or public, is storable; no heuristic without public.
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            302,
            &hm(&[("cache-control", "max-age=60")]),
            &with_ttl
        ),
        Ok(())
    );
    let s = stored(302, &[("last-modified", &date(-1000)), ("date", &date(0))]);
    assert_eq!(freshness_lifetime(&s, &with_ttl), Duration::ZERO);
}

#[test]
fn c12_bare_200_is_storable_but_not_fresh_without_default_ttl() {
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &HeaderMap::new(),
            &cfg()
        ),
        Ok(())
    );
    let s = stored(200, &[("date", &date(0))]);
    assert_eq!(lifetime(&s), 0);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(1), &cfg()).reuse,
        Reuse::Revalidate
    );
}

#[test]
fn heuristic_statuses_that_are_not_heuristically_cacheable_are_not_stored() {
    for status in [201, 202, 403, 502, 503, 504, 599] {
        let resp = hm(&[("last-modified", &date(-86_400)), ("date", &date(0))]);
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                status,
                &resp,
                &cfg()
            ),
            Err(NotStorable::NoFreshnessOrValidator),
            "{status}"
        );
    }
    let public =
        hm(&[("cache-control", "public"), ("last-modified", &date(-1000)), ("date", &date(0))]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            599,
            &public,
            &cfg()
        ),
        Ok(())
    );
}

// ------------------------------------- C13: invalid Expires (freshness.rs)

#[test]
fn c13_invalid_expires_means_already_expired_and_is_still_explicit() {
    for expires in ["-1", "0", "", "not-a-date", "Thu, 32 Foo 2020 99:99:99 GMT"] {
        let fields = [
            ("expires", expires),
            ("etag", "\"e1\""),
            ("date", &date(0)),
            ("last-modified", &date(-30 * 86_400)),
        ];
        let resp = hm(&fields);
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                200,
                &resp,
                &cfg()
            ),
            Ok(()),
            "{expires:?}"
        );
        let s = stored(200, &fields);
        assert_eq!(lifetime(&s), 0, "{expires:?}: no heuristic either");
        let d = decide(&CacheControl::from_headers(&no_request()), &s, at(1), &cfg());
        assert_eq!(d.reuse, Reuse::Revalidate, "{expires:?}");
        assert!(d.stale);
        assert_eq!(conditional(&s)[0], ("if-none-match".to_string(), "\"e1\"".to_string()));
    }
}

#[test]
fn c13_expires_in_every_date_format_and_before_date() {
    let d0 = date(0);
    assert_eq!(
        lifetime(&stored(200, &[("date", &d0), ("expires", "Tuesday, 14-Nov-23 22:23:20 GMT")])),
        600
    );
    assert_eq!(
        lifetime(&stored(200, &[("date", &d0), ("expires", "Tue Nov 14 22:23:20 2023")])),
        600
    );
    assert_eq!(lifetime(&stored(200, &[("date", &d0), ("expires", &date(-100))])), 0);
    // Two Expires lines: invalid, expired.
    assert_eq!(
        lifetime(&stored(200, &[("date", &d0), ("expires", &date(100)), ("expires", &date(200))])),
        0
    );
}

/// RFC 9111 section 5.3 (issue 41): an `Expires` outside the three forms
/// of RFC 9110 section 5.6.7 is invalid, so already expired, however
/// plainly it names a date a day ahead: extra spaces, RFC 850 dashes with a
/// four-digit year, a long day name in IMF-fixdate, one space before a
/// one-digit asctime day, and the `freshness-expires-invalid-*` values of
/// http-cache-tests. No heuristic replaces it (section 4.2.2). `Date` and
/// `Last-Modified` in those spellings are still read (robustly).
#[test]
fn expires_outside_the_grammar_is_in_the_past_rfc9111_5_3() {
    // T is Tue, 14 Nov 2023 22:13:20 GMT; T + 1 day is Wed, 15 Nov.
    let d0 = date(0);
    let valid = "Wed, 15 Nov 2023 22:13:20 GMT";
    assert_eq!(lifetime(&stored(200, &[("date", &d0), ("expires", valid)])), 86_400);
    for expires in [
        "Wed, 15  Nov  2023 22:13:20 GMT",
        "Wed, 15-Nov-2023 22:13:20 GMT",
        "Wednesday, 15-Nov-2023 22:13:20 GMT",
        "Wednesday, 15 Nov 2023 22:13:20 GMT",
        "Wed,15 Nov 2023 22:13:20 GMT",
        "Wed 15 Nov 2023 22:13:20 GMT",
        "Wed, 15 Nov 23 22:13:20 GMT",
        "Wed, 15 Nov 2023 22.13.20 GMT",
        "Wed, 15 Nov 2023 22:13:20 UTC",
        "Wed Nov 15 22:13:20  2023",
        "Wed, 15 Nov 2023 22:13:20 GMT, Wed, 15 Nov 2023 22:13:21 GMT",
    ] {
        let s = stored(
            200,
            &[
                ("date", &d0),
                ("expires", expires),
                ("last-modified", &date(-30 * 86_400)),
                ("etag", "\"x\""),
            ],
        );
        assert_eq!(lifetime(&s), 0, "{expires:?}: invalid, so in the past");
        assert_eq!(
            decide(&CacheControl::from_headers(&no_request()), &s, at(1), &cfg()).reuse,
            Reuse::Revalidate,
            "{expires:?}"
        );
    }
    // One space before a one-digit asctime day (T - 8 days is Mon, 6 Nov).
    let before = date(-8 * 86_400 - 3600);
    assert_eq!(
        lifetime(&stored(200, &[("date", &before), ("expires", "Mon Nov  6 22:13:20 2023")])),
        3600
    );
    assert_eq!(
        lifetime(&stored(200, &[("date", &before), ("expires", "Mon Nov 6 22:13:20 2023")])),
        0
    );
    // The same near-misses in Date and Last-Modified are read as meant.
    let s = stored(
        200,
        &[("date", "Tue, 14-Nov-2023 22:11:20 GMT"), ("cache-control", "max-age=3600")],
    );
    assert_eq!(current_age(&s, at(0)), Duration::from_secs(120));
    let s = stored(200, &[("date", &d0), ("last-modified", "Mon,  06 Nov 2023 22:13:20 GMT")]);
    assert_eq!(lifetime(&s), 69_120);
}

/// RFC 9110 section 5.6.7 (issue 10 item 8): `Expires`, `Date` and
/// `Last-Modified` are read in the obsolete forms and in any letter case
/// (RFC 9111 section 4.2); an `Expires` that does not parse means already
/// expired.
#[test]
fn obsolete_and_miscased_dates_are_read_section_5_6_7() {
    // T is Tue, 14 Nov 2023 22:13:20 GMT.
    let d0 = date(0);
    for expires in [
        "tue, 14 nov 2023 22:23:20 gmt",
        "TUE, 14 NOV 2023 22:23:20 GMT",
        "tuesday, 14-nov-23 22:23:20 gmt",
        "tue nov 14 22:23:20 2023",
    ] {
        assert_eq!(
            lifetime(&stored(200, &[("date", &d0), ("expires", expires)])),
            600,
            "{expires:?}"
        );
    }
    for expires in [
        "tue, 14 nov 2023 22:23:20 pst",
        "tue, 14 nov 2023 22:23:20",
        "tue, 31 nov 2023 22:23:20 gmt",
    ] {
        assert_eq!(
            lifetime(&stored(200, &[("date", &d0), ("expires", expires)])),
            0,
            "{expires:?}: expired"
        );
    }
    // Date (T - 120 s) in each obsolete form: apparent_age 120 s.
    for date_line in [
        "Tuesday, 14-Nov-23 22:11:20 GMT",
        "Tue Nov 14 22:11:20 2023",
        "tue, 14 nov 2023 22:11:20 gmt",
    ] {
        let s = stored(200, &[("date", date_line), ("cache-control", "max-age=3600")]);
        assert_eq!(current_age(&s, at(0)), Duration::from_secs(120), "{date_line:?}");
    }
    // Last-Modified 8 days before T, asctime with one space before the day:
    // the heuristic is 10 % of 691200 s.
    for lm in
        ["Mon Nov 6 22:13:20 2023", "Mon Nov  6 22:13:20 2023", "monday, 06-nov-23 22:13:20 gmt"]
    {
        assert_eq!(
            lifetime(&stored(200, &[("date", &d0), ("last-modified", lm)])),
            69_120,
            "{lm:?}"
        );
    }
}

/// RFC 9110 section 5.6.7 in validation: obsolete and mis-cased dates
/// compare as the instant they name; a stored `Last-Modified` is sent back
/// as `If-Modified-Since` exactly as received (RFC 9110 section 13.1.3: the
/// most interoperable value for a cache update).
#[test]
fn obsolete_dates_in_validation_section_5_6_7() {
    let lm = "monday, 06-nov-23 22:13:20 gmt";
    let s = stored(200, &[("last-modified", lm), ("etag", "\"v1\""), ("date", &date(0))]);
    assert_eq!(conditional(&s)[1], ("if-modified-since".to_string(), lm.to_string()));
    let same =
        ["Mon, 06 Nov 2023 22:13:20 GMT", "Mon Nov  6 22:13:20 2023", "MON NOV 6 22:13:20 2023"];
    for ims in same {
        assert!(client_not_modified(&hm(&[("if-modified-since", ims)]), &s), "{ims:?}");
        assert!(head_matches(&s, &hm(&[("last-modified", ims)]), 0), "{ims:?}");
    }
    assert!(not_modified_matches(
        &stored(200, &[("last-modified", lm)]),
        &hm(&[("last-modified", same[1])])
    ));
    assert!(!client_not_modified(
        &hm(&[("if-modified-since", "monday, 06-nov-23 22:13:19 gmt")]),
        &s
    ));
    assert!(!client_not_modified(
        &hm(&[("if-modified-since", "monday, 06-nov-23 22:13:20 cet")]),
        &s
    ));
}

// ------------------------------------- C14: invalid max-age (freshness.rs)

#[test]
fn c14_non_integer_max_age_is_stale_and_revalidated() {
    let s = stored(200, &[("cache-control", "max-age=600s"), ("etag", "\"r1\"")]);
    assert_eq!(lifetime(&s), 0);
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(5), &cfg());
    assert_eq!(d.reuse, Reuse::Revalidate);
    assert_eq!(conditional(&s), vec![("if-none-match".to_string(), "\"r1\"".to_string())]);
    for junk in [
        "max-age='3600'",
        "max-age=-3600",
        "max-age=3600.5",
        "max-age= 3600",
        "max-age =3600",
        "max-age",
    ] {
        assert_eq!(lifetime(&stored(200, &[("cache-control", junk)])), 0, "{junk}");
    }
}

#[test]
fn c14_quoted_max_age_is_accepted() {
    let s = stored(200, &[("cache-control", "max-age=\"3600\"")]);
    assert_eq!(lifetime(&s), 3600);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(5), &cfg()).reuse,
        Reuse::Serve
    );
    assert_eq!(lifetime(&stored(200, &[("cache-control", "max-age=003600")])), 3600);
}

#[test]
fn c14_max_age_inside_a_quoted_string_is_not_a_directive() {
    for cc in [
        "extension=\"max-age=3600\", max-age=1",
        "max-age=1, extension=\"max-age=3600\"",
        "max-age=\"1\", x=\"a, max-age=3600\"",
    ] {
        assert_eq!(lifetime(&stored(200, &[("cache-control", cc)])), 1, "{cc}");
    }
}

#[test]
fn c14_overflow_saturates_and_duplicates_take_the_smallest() {
    assert_eq!(
        lifetime(&stored(200, &[("cache-control", "max-age=99999999999999999999999")])),
        2_147_483_648
    );
    assert_eq!(lifetime(&stored(200, &[("cache-control", "max-age=1800, max-age=1")])), 1);
    assert_eq!(
        lifetime(&stored(
            200,
            &[("cache-control", "max-age=1800"), ("cache-control", "max-age=60")]
        )),
        60
    );
    assert_eq!(lifetime(&stored(200, &[("cache-control", "max-age=3600, s-maxage=1")])), 1);
}

// ----------------------------- C20: no-cache (freshness.rs, validation.rs)

#[test]
fn c20_no_cache_response_is_stored_and_always_revalidated() {
    let fields = [("cache-control", "no-cache"), ("etag", "\"v1\""), ("content-length", "100000")];
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &hm(&fields),
            &cfg()
        ),
        Ok(())
    );
    let s = stored(200, &fields);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(1), &cfg()).reuse,
        Reuse::Revalidate
    );
    assert_eq!(conditional(&s), vec![("if-none-match".to_string(), "\"v1\"".to_string())]);
    let not_modified = hm(&[("etag", "\"v1\"")]);
    assert!(not_modified_matches(&s, &not_modified));
    let f = freshen(&s, &not_modified, at(1), at(1), &cfg());
    assert_eq!(get(&f, "content-length"), vec!["100000"]);
    // Even when fresh by max-age, no-cache means validate every time.
    let s = stored(200, &[("cache-control", "max-age=10000, No-CaChE"), ("etag", "\"v1\"")]);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(1), &cfg()).reuse,
        Reuse::Revalidate
    );
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Unreachable,
        at(20_000),
        &cfg()
    ));
}

// -------------------------------------- C22: stale-if-error (freshness.rs)

fn c22_stored() -> StoredResponse {
    stored(200, &[("date", &date(0)), ("cache-control", "max-age=1, stale-if-error=60")])
}

#[test]
fn c22_step2_503_within_stale_if_error_serves_stale() {
    assert!(may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Status(503),
        at(5),
        &cfg()
    ));
    for code in [500, 502, 504] {
        assert!(may_serve_stale_on_error(
            &CacheControl::from_headers(&no_request()),
            &c22_stored(),
            OriginError::Status(code),
            at(5),
            &cfg()
        ));
    }
    // Not an error in the sense of RFC 5861 section 4.
    for code in [200, 404, 501] {
        assert!(!may_serve_stale_on_error(
            &CacheControl::from_headers(&no_request()),
            &c22_stored(),
            OriginError::Status(code),
            at(5),
            &cfg()
        ));
    }
}

#[test]
fn c22_step3_unreachable_within_stale_if_error_serves_stale() {
    assert!(may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Unreachable,
        at(10),
        &cfg()
    ));
}

#[test]
fn c22_step4_outside_the_window_is_an_error() {
    // staleness 89 s > 60 s.
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Status(503),
        at(90),
        &cfg()
    ));
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Unreachable,
        at(90),
        &cfg()
    ));
    // Window edge: staleness exactly 60 s is inside.
    assert!(may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Status(503),
        at(61),
        &cfg()
    ));
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &c22_stored(),
        OriginError::Status(503),
        at(62),
        &cfg()
    ));
}

#[test]
fn c22_disconnected_bound_applies_without_stale_if_error() {
    let s = stored(200, &[("date", &date(0)), ("cache-control", "max-age=1")]);
    assert!(may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Unreachable,
        at(3600),
        &cfg()
    ));
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Unreachable,
        at(86_402),
        &cfg()
    ));
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Status(503),
        at(3600),
        &cfg()
    ));
    let off = PolicyConfig { max_stale_on_error: Duration::ZERO, ..cfg() };
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Unreachable,
        at(3600),
        &off
    ));
    // s-maxage implies proxy-revalidate: not served stale when disconnected.
    let s = stored(200, &[("date", &date(0)), ("cache-control", "max-age=2, s-maxage=2")]);
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&no_request()),
        &s,
        OriginError::Unreachable,
        at(5),
        &cfg()
    ));
    // A request's stale-if-error also grants the window.
    let s = stored(200, &[("date", &date(0)), ("cache-control", "max-age=1")]);
    let req = hm(&[("cache-control", "stale-if-error=30")]);
    assert!(may_serve_stale_on_error(
        &CacheControl::from_headers(&req),
        &s,
        OriginError::Status(502),
        at(20),
        &cfg()
    ));
    // A request with no-cache never gets stale.
    let req = hm(&[("cache-control", "no-cache")]);
    assert!(!may_serve_stale_on_error(
        &CacheControl::from_headers(&req),
        &c22_stored(),
        OriginError::Status(503),
        at(5),
        &cfg()
    ));
}

#[test]
fn c22_step5_must_revalidate_never_serves_stale() {
    for cc in [
        "max-age=1, must-revalidate",
        "max-age=1, must-revalidate, stale-if-error=60",
        "max-age=1, proxy-revalidate, stale-if-error=60",
    ] {
        let s = stored(200, &[("date", &date(0)), ("cache-control", cc)]);
        assert!(
            !may_serve_stale_on_error(
                &CacheControl::from_headers(&no_request()),
                &s,
                OriginError::Status(503),
                at(5),
                &cfg()
            ),
            "{cc}"
        );
        assert!(
            !may_serve_stale_on_error(
                &CacheControl::from_headers(&no_request()),
                &s,
                OriginError::Unreachable,
                at(5),
                &cfg()
            ),
            "{cc}"
        );
    }
}

// ------------------------------ C23: stale-while-revalidate (freshness.rs)

fn c23_stored() -> StoredResponse {
    stored(
        200,
        &[
            ("date", &date(0)),
            ("cache-control", "public, s-maxage=10, stale-while-revalidate=60"),
            ("etag", "\"w1\""),
        ],
    )
}

#[test]
fn c23_stale_within_the_window_is_served_and_revalidated() {
    let d = decide(&CacheControl::from_headers(&no_request()), &c23_stored(), at(15), &cfg());
    assert_eq!(
        d,
        Decision { reuse: Reuse::ServeStaleAndRevalidate, age: 15, ttl: -5, stale: true }
    );
    assert_eq!(
        conditional(&c23_stored()),
        vec![("if-none-match".to_string(), "\"w1\"".to_string())]
    );
    // The background revalidation answered 200 W2 at T+15: T+17 is a fresh hit.
    let w2 = stored_at(
        200,
        &[
            ("date", &date(15)),
            ("cache-control", "public, s-maxage=10, stale-while-revalidate=60"),
            ("etag", "\"w2\""),
        ],
        at(15),
        at(15),
    );
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &w2, at(17), &cfg()).reuse,
        Reuse::Serve
    );
}

#[test]
fn c23_window_arithmetic() {
    let s = c23_stored();
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(9), &cfg()).reuse,
        Reuse::Serve
    );
    // Age 10 = lifetime 10: stale (fresh only while lifetime > age).
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(10), &cfg()).reuse,
        Reuse::ServeStaleAndRevalidate
    );
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(70), &cfg()).reuse,
        Reuse::ServeStaleAndRevalidate
    );
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(71), &cfg());
    assert_eq!((d.reuse, d.ttl), (Reuse::Revalidate, -61));
    let d = decide(&CacheControl::from_headers(&no_request()), &s, at(80), &cfg());
    assert_eq!(d, Decision { reuse: Reuse::Revalidate, age: 80, ttl: -70, stale: true });
}

#[test]
fn c23_must_revalidate_and_no_cache_disable_stale_while_revalidate() {
    for cc in [
        "max-age=10, stale-while-revalidate=60, must-revalidate",
        "max-age=10, stale-while-revalidate=60, proxy-revalidate",
        "max-age=10, stale-while-revalidate=60, no-cache",
    ] {
        let s = stored(200, &[("date", &date(0)), ("cache-control", cc)]);
        assert_eq!(
            decide(&CacheControl::from_headers(&no_request()), &s, at(15), &cfg()).reuse,
            Reuse::Revalidate,
            "{cc}"
        );
    }
    // A request max-age the stored response exceeds wins over the window.
    let req = hm(&[("cache-control", "max-age=5")]);
    assert_eq!(
        decide(&CacheControl::from_headers(&req), &c23_stored(), at(15), &cfg()).reuse,
        Reuse::Revalidate
    );
}

// ------------------------------- section 4.2.3, current age (freshness.rs)

#[test]
fn current_age_follows_section_4_2_3() {
    // Requested at T-2, received at T; Date T-5 (apparent_age 5); Age 1:
    // corrected_age_value = 1 + 2 = 3; corrected_initial_age = max(5, 3) = 5.
    let s = stored_at(200, &[("date", &date(-5)), ("age", "1")], at(-2), at(0));
    assert_eq!(current_age(&s, at(0)), Duration::from_secs(5));
    assert_eq!(current_age(&s, at(10)), Duration::from_secs(15));
    // Age dominates: Age 30, Date T.
    let s = stored_at(200, &[("date", &date(0)), ("age", "30")], at(-2), at(0));
    assert_eq!(current_age(&s, at(3)), Duration::from_secs(35));
    // Date in the future (fast clock): apparent_age 0.
    let s = stored(200, &[("date", &date(100))]);
    assert_eq!(current_age(&s, at(3)), Duration::from_secs(3));
    // No Date: date_value = response_time.
    let s = stored(200, &[]);
    assert_eq!(current_age(&s, at(7)), Duration::from_secs(7));
    // now before response_time: resident_time 0.
    assert_eq!(current_age(&s, at(-7)), Duration::ZERO);
}

/// A response with `Date` T, `max-age=3600` and the given `Age` lines.
fn with_age(ages: &[&str]) -> StoredResponse {
    let d0 = date(0);
    let mut fields = vec![("date", d0.as_str()), ("cache-control", "max-age=3600")];
    fields.extend(ages.iter().map(|a| ("age", *a)));
    stored(200, &fields)
}

/// RFC 9111 section 5.1: a list-valued `Age`, in one line or several, uses
/// its first member. (This used to make the response stale; the expected
/// values changed with issue 10 item 6.)
#[test]
fn age_list_uses_its_first_member_section_5_1() {
    for (ages, age, reuse) in [
        (&["0, 7200"][..], 0, Reuse::Serve), // http-cache-tests age-parse-prefix
        (&["0,7200"], 0, Reuse::Serve),
        (&["7200,0"], 7200, Reuse::Revalidate), // age-parse-suffix
        (&["0", "7200"], 0, Reuse::Serve),      // age-parse-prefix-twoline
        (&["7200", "0"], 7200, Reuse::Revalidate), // age-parse-suffix-twoline
        (&["0, 0"], 0, Reuse::Serve),           // age-parse-dup-0
        (&["0", "0"], 0, Reuse::Serve),         // age-parse-dup-0-twoline
        (&["3600, 3600"], 3600, Reuse::Revalidate),
        (&["10, abc"], 10, Reuse::Serve),
        (&[", 10"], 10, Reuse::Serve), // empty list elements are skipped (RFC 9110 section 5.6.1.2)
        (&["", "10"], 10, Reuse::Serve),
    ] {
        let s = with_age(ages);
        assert_eq!(age_value(&s.headers), age, "{ages:?}");
        let d = decide(&CacheControl::from_headers(&no_request()), &s, at(3), &cfg());
        assert_eq!((d.reuse, d.age), (reuse, age + 3), "{ages:?}");
    }
}

/// RFC 9111 section 5.1: an invalid `Age` is ignored (age 0, as if absent),
/// not taken as "stale". (This used to make the response stale; the
/// expected values changed with issue 10 item 6.)
#[test]
fn invalid_age_is_ignored_section_5_1() {
    for age in [
        "abc",
        "-7200",
        "7200.0",
        "7200;foo=bar",
        "7200;foo=111",
        "+5",
        "1e3",
        "0x10",
        "",
        " ",
        "abc, 7200",
    ] {
        let s = with_age(&[age]);
        assert_eq!(age_value(&s.headers), 0, "{age:?}");
        assert_eq!(current_age(&s, at(3)), Duration::from_secs(3), "{age:?}");
        let d = decide(&CacheControl::from_headers(&no_request()), &s, at(3), &cfg());
        assert_eq!((d.reuse, d.age, d.ttl, d.stale), (Reuse::Serve, 3, 3597, false), "{age:?}");
    }
    assert_eq!(age_value(&with_age(&[]).headers), 0);
    assert_eq!(age_value(&with_age(&[" 10 "]).headers), 10);
    assert_eq!(age_value(&with_age(&["007"]).headers), 7);
    // RFC 9111 section 1.2.2: too large saturates at 2^31 (and is stale).
    let huge = with_age(&["99999999999999999999"]);
    assert_eq!(age_value(&huge.headers), 2_147_483_648);
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &huge, at(3), &cfg()).reuse,
        Reuse::Revalidate
    );
}

// ------------------------ section 5.2.1, request directives (freshness.rs)

#[test]
fn request_directives() {
    let s = stored(200, &[("date", &date(0)), ("cache-control", "max-age=100")]);
    let decide_with = |cc: &str, now: i64| {
        decide(&CacheControl::from_headers(&hm(&[("cache-control", cc)])), &s, at(now), &cfg())
            .reuse
    };
    assert_eq!(decide_with("no-cache", 1), Reuse::Revalidate);
    assert_eq!(decide_with("max-age=0", 1), Reuse::Revalidate);
    assert_eq!(decide_with("max-age=10", 10), Reuse::Serve);
    assert_eq!(decide_with("max-age=10", 11), Reuse::Revalidate);
    assert_eq!(decide_with("min-fresh=50", 50), Reuse::Serve);
    assert_eq!(decide_with("min-fresh=50", 51), Reuse::Revalidate);
    assert_eq!(decide_with("max-stale", 1000), Reuse::Serve);
    assert_eq!(decide_with("max-stale=10", 110), Reuse::Serve);
    assert_eq!(decide_with("max-stale=10", 111), Reuse::Revalidate);
    assert_eq!(decide_with("only-if-cached", 1), Reuse::Serve);
    let d = decide(
        &CacheControl::from_headers(&hm(&[("cache-control", "max-stale")])),
        &s,
        at(1000),
        &cfg(),
    );
    assert!(d.stale, "served stale is reported stale");
    // Pragma: no-cache only without Cache-Control.
    assert_eq!(
        decide(&CacheControl::from_headers(&hm(&[("pragma", "no-cache")])), &s, at(1), &cfg())
            .reuse,
        Reuse::Revalidate
    );
    assert_eq!(
        decide(
            &CacheControl::from_headers(&hm(&[
                ("pragma", "no-cache"),
                ("cache-control", "max-stale")
            ])),
            &s,
            at(1),
            &cfg()
        )
        .reuse,
        Reuse::Serve
    );
    // max-stale does not override must-revalidate, proxy-revalidate (shared), no-cache or s-maxage.
    for cc in [
        "max-age=100, must-revalidate",
        "max-age=100, proxy-revalidate",
        "max-age=100, no-cache",
        "s-maxage=100",
    ] {
        let s = stored(200, &[("date", &date(0)), ("cache-control", cc)]);
        assert_eq!(
            decide(
                &CacheControl::from_headers(&hm(&[("cache-control", "max-stale")])),
                &s,
                at(1000),
                &cfg()
            )
            .reuse,
            Reuse::Revalidate,
            "{cc}"
        );
    }
}

#[test]
fn response_pragma_no_cache_is_ignored() {
    let s = stored(
        200,
        &[("date", &date(0)), ("cache-control", "max-age=3600"), ("pragma", "no-cache")],
    );
    assert_eq!(
        decide(&CacheControl::from_headers(&no_request()), &s, at(3), &cfg()).reuse,
        Reuse::Serve
    );
}

// ------------------------------------ section 3, storability (storable.rs)

#[test]
fn storability_rules() {
    let ok = hm(&[("cache-control", "max-age=60")]);
    for status in [100, 101, 206, 304] {
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                status,
                &ok,
                &cfg()
            ),
            Err(NotStorable::Status),
            "{status}"
        );
    }
    let auth = hm(&[("authorization", "Basic Zm9v")]);
    let expires = hm(&[("expires", &date(3600)), ("date", &date(0))]);
    assert_eq!(
        storable(&Method::GET, &CacheControl::from_headers(&auth), &auth, 200, &expires, &cfg()),
        Err(NotStorable::Authorization)
    );
    for cc in ["public", "s-maxage=60", "must-revalidate, max-age=60"] {
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&auth),
                &auth,
                200,
                &hm(&[("cache-control", cc)]),
                &cfg()
            ),
            Ok(()),
            "{cc}"
        );
    }
    for vary in ["*", "*, *", ", *", "Foo, *", "accept, *"] {
        assert_eq!(
            storable(
                &Method::GET,
                &CacheControl::from_headers(&no_request()),
                &no_request(),
                200,
                &hm(&[("vary", vary), ("cache-control", "max-age=60")]),
                &cfg()
            ),
            Err(NotStorable::VaryStar),
            "{vary}"
        );
    }
    let two_lines = hm(&[("vary", ""), ("vary", "*"), ("cache-control", "max-age=60")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &two_lines,
            &cfg()
        ),
        Err(NotStorable::VaryStar)
    );
}

#[test]
fn must_understand_section_5_2_2_3() {
    let mu = hm(&[("cache-control", "max-age=3600, must-understand, no-store")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            200,
            &mu,
            &cfg()
        ),
        Ok(()),
        "no-store ignored for an understood status"
    );
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            599,
            &mu,
            &cfg()
        ),
        Err(NotStorable::Status)
    );
    let mu = hm(&[("cache-control", "max-age=3600, must-understand")]);
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            599,
            &mu,
            &cfg()
        ),
        Err(NotStorable::Status)
    );
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&hm(&[("cache-control", "no-store")])),
            &hm(&[("cache-control", "no-store")]),
            200,
            &mu,
            &cfg()
        ),
        Err(NotStorable::NoStore)
    );
    // Without must-understand an unknown final status with explicit freshness is storable.
    assert_eq!(
        storable(
            &Method::GET,
            &CacheControl::from_headers(&no_request()),
            &no_request(),
            599,
            &hm(&[("cache-control", "max-age=60")]),
            &cfg()
        ),
        Ok(())
    );
}

#[test]
fn hop_by_hop_and_connection_named_fields_are_not_stored() {
    let resp = hm(&[
        ("connection", "a, B"),
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "x"),
        ("te", "x"),
        ("trailer", "x"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "x"),
        ("proxy-authenticate", "x"),
        ("proxy-authorization", "x"),
        ("proxy-authentication-info", "x"),
        ("content-length", "10"),
    ]);
    let names: Vec<String> = headers_to_store(&resp, &cfg()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["c", "content-length"]);
}

// --------------------------------- section 4.3, validation (validation.rs)

#[test]
fn conditional_headers_section_4_3_1() {
    let lm = date(-100);
    let s = stored(200, &[("etag", "W/\"x\""), ("last-modified", &lm)]);
    assert_eq!(
        conditional(&s),
        vec![("if-none-match".into(), "W/\"x\"".into()), ("if-modified-since".into(), lm)]
    );
    assert!(conditional(&stored(200, &[("last-modified", "garbage")])).is_empty());
    assert!(conditional(&stored(200, &[])).is_empty());
}

#[test]
fn not_modified_selection_section_4_3_4() {
    let lm = date(-100);
    let s = stored(200, &[("etag", "\"a\""), ("last-modified", &lm)]);
    assert!(not_modified_matches(&s, &hm(&[("etag", "\"a\"")])));
    assert!(!not_modified_matches(&s, &hm(&[("etag", "\"b\"")])));
    assert!(
        !not_modified_matches(&stored(200, &[("etag", "W/\"a\"")]), &hm(&[("etag", "\"a\"")])),
        "strong needs strong"
    );
    assert!(not_modified_matches(
        &stored(200, &[("etag", "W/\"a\"")]),
        &hm(&[("etag", "W/\"a\"")])
    ));
    assert!(not_modified_matches(&s, &hm(&[("last-modified", &lm)])));
    assert!(!not_modified_matches(&s, &hm(&[("last-modified", &date(0))])));
    assert!(not_modified_matches(&s, &HeaderMap::new()));
}

#[test]
fn client_conditionals_section_4_3_2() {
    let lm = date(-100);
    let s = stored(200, &[("etag", "\"abcdef\""), ("last-modified", &lm), ("date", &date(0))]);
    let yes = |fields: &[(&str, &str)]| client_not_modified(&hm(fields), &s);
    assert!(yes(&[("if-none-match", "\"abcdef\"")]));
    assert!(yes(&[("if-none-match", "W/\"abcdef\"")]), "weak comparison");
    assert!(yes(&[("if-none-match", "\"x\", \"abcdef\"")]));
    assert!(yes(&[("if-none-match", "*")]));
    assert!(!yes(&[("if-none-match", "\"x\"")]));
    // If-None-Match takes precedence over If-Modified-Since.
    assert!(!yes(&[("if-none-match", "\"x\""), ("if-modified-since", &date(0))]));
    assert!(yes(&[("if-none-match", "\"abcdef\""), ("if-modified-since", &date(-1000))]));
    assert!(yes(&[("if-modified-since", &lm)]));
    assert!(!yes(&[("if-modified-since", &date(-101))]));
    assert!(!yes(&[("if-modified-since", "junk")]));
    assert!(!yes(&[]));
    let redirect = stored(301, &[("last-modified", &lm)]);
    assert!(!client_not_modified(&hm(&[("if-modified-since", &lm)]), &redirect));
}

#[test]
fn section_4_3_5_head_updates_only_when_validators_and_length_agree() {
    let lm = "Mon, 01 Jan 2024 00:00:00 GMT";
    let s = stored(200, &[("etag", "\"v1\""), ("last-modified", lm)]);
    assert!(head_matches(&s, &hm(&[]), 7), "no validators, no length: nothing disagrees");
    assert!(head_matches(
        &s,
        &hm(&[("etag", "\"v1\""), ("last-modified", lm), ("content-length", "7")]),
        7
    ));
    assert!(!head_matches(&s, &hm(&[("etag", "\"v2\"")]), 7));
    assert!(!head_matches(&s, &hm(&[("last-modified", "Tue, 02 Jan 2024 00:00:00 GMT")]), 7));
    assert!(!head_matches(&s, &hm(&[("content-length", "8")]), 7));
    assert!(
        !head_matches(&s, &hm(&[("etag", "\"v1\""), ("etag", "\"v1\"")]), 7),
        "several ETag lines are invalid"
    );
    let bare = stored(200, &[]);
    assert!(
        !head_matches(&bare, &hm(&[("etag", "\"v1\"")]), 7),
        "a validator the stored response lacks disagrees"
    );
}

// ----------------------------- section 4.4, invalidation (invalidation.rs)

#[test]
fn invalidation_section_4_4() {
    let key = "http://example.com/a/b";
    let resp = hm(&[
        ("location", "c?x=1"),
        ("content-location", "/d"),
        ("content-location", "http://other.example/e"),
    ]);
    for method in
        [Method::POST, Method::PUT, Method::DELETE, Method::from_bytes(b"M-SEARCH").unwrap()]
    {
        assert_eq!(
            invalidation_targets(&method, 201, key, &resp),
            vec!["http://example.com/a/b", "http://example.com/a/c?x=1", "http://example.com/d"],
            "{method}"
        );
    }
    assert!(invalidation_targets(&Method::GET, 200, key, &resp).is_empty());
    assert!(invalidation_targets(&Method::HEAD, 200, key, &resp).is_empty());
    assert!(invalidation_targets(&Method::POST, 500, key, &resp).is_empty());
    assert!(invalidation_targets(&Method::POST, 404, key, &resp).is_empty());
    assert_eq!(
        invalidation_targets(&Method::POST, 303, key, &hm(&[("location", "../x/./y#f")])),
        vec![key, "http://example.com/x/y"]
    );
    assert_eq!(
        invalidation_targets(&Method::POST, 200, key, &hm(&[("location", "//EXAMPLE.com:80/z")])),
        vec![key, "http://example.com/z"]
    );
    assert_eq!(
        invalidation_targets(
            &Method::POST,
            200,
            key,
            &hm(&[("location", "https://example.com/z")])
        ),
        vec![key]
    );
}

// ------------------------------- section 5.4, Pragma (../cache_control.rs)

#[test]
fn cache_control_request_parse_uses_pragma_response_parse_does_not() {
    let h = hm(&[("pragma", "no-cache")]);
    assert!(CacheControl::from_headers(&h).no_cache);
    assert!(!CacheControl::from_response_headers(&h).no_cache);
}
