//! RFC 9111 section 4.2, freshness: explicit lifetimes (Expires,
//! max-age), the heuristic, invalid values, and Age.

use super::*;

/// C04: an explicit Expires wins over the Last-Modified heuristic, both ways.
#[test]
fn explicit_expires_is_used_instead_of_the_heuristic_c04() {
    let (origin, proxy) = start(|req| {
        let now = SystemTime::now();
        match req.path() {
            // Stored "an hour ago" with a day of explicit lifetime: still fresh.
            "/index.json" => Reply::ok(
                &[
                    ("Date", &ago(3600)),
                    ("Expires", &from_now(86_400 - 3600)),
                    ("Last-Modified", &ago(30 * 86_400)),
                ],
                b"{}",
            ),
            // Expires == Date: expired at once, although Last-Modified would
            // give a long heuristic lifetime.
            _ => {
                let d = http_date(now);
                Reply::ok(
                    &[("Date", &d), ("Expires", &d), ("Last-Modified", &ago(30 * 86_400))],
                    b"v",
                )
            }
        }
    });
    let fresh_url = origin.url("/index.json");
    proxy.get(&fresh_url, &[]);
    let again = proxy.get(&fresh_url, &[]);
    assert!(is_hit(&again), "Expires a day after Date: served from cache: {}", status_of(&again));
    assert_eq!(origin.request_count(), 1);

    let expired_url = origin.url("/variant");
    proxy.get(&expired_url, &[]);
    let again = proxy.get(&expired_url, &[]);
    assert!(
        !is_hit(&again),
        "Expires == Date: must not be served from a heuristic window: {}",
        status_of(&again)
    );
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[2].header("if-modified-since").is_some(),
        "the repeat is a revalidation with If-Modified-Since"
    );
}

/// C12: 301 (and 308) are heuristically cacheable and stored as redirects
/// without being followed; 302 is not stored without explicit freshness.
#[test]
fn permanent_redirects_are_heuristically_cached_and_302_is_not_c12() {
    let (origin, proxy) = start(|req| {
        let status = match req.path() {
            "/old" => 301,
            "/perm" => 308,
            _ => 302,
        };
        // Heuristic freshness needs a Last-Modified in the past.
        Reply::new(
            status,
            &[("Location", "http://example.com/new"), ("Last-Modified", &ago(10 * 86_400))],
            b"",
        )
    });
    for (path, cached) in [("/old", true), ("/perm", true), ("/temp", false)] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert_eq!(
            first.header("location"),
            Some("http://example.com/new"),
            "the redirect is passed, not followed"
        );
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(second.header("location"), Some("http://example.com/new"));
        assert_eq!(is_hit(&second), cached, "{path}: {}", status_of(&second));
        assert_eq!(origin.request_count(), before + usize::from(!cached), "{path}");
    }
}

/// C13: `Expires: -1`, `0`, empty or garbage never fail a request and mean
/// "already expired": the repeat is revalidated with the stored ETag.
#[test]
fn invalid_expires_means_already_stale_and_is_revalidated_c13() {
    let (origin, proxy) = start(|req| {
        let expires = match req.path() {
            "/minus-one" => "-1",
            "/zero" => "0",
            "/empty" => "",
            _ => "not-a-date",
        };
        if req.header("if-none-match") == Some("\"e1\"") {
            Reply::not_modified(&[("ETag", "\"e1\""), ("Expires", expires)])
        } else {
            Reply::ok(&[("Expires", expires), ("ETag", "\"e1\"")], b"payload")
        }
    });
    for path in ["/minus-one", "/zero", "/empty", "/garbage"] {
        let url = origin.url(path);
        let first = proxy.get(&url, &[]);
        assert_eq!(
            (first.status, first.text()),
            (200, "payload".to_string()),
            "{path}: step 1 is a normal response"
        );
        let before = origin.request_count();
        let second = proxy.get(&url, &[]);
        assert_eq!(second.text(), "payload", "{path}");
        let reqs = origin.requests();
        assert_eq!(reqs.len(), before + 1, "{path}: the repeat reaches the origin");
        assert_eq!(
            reqs.last().and_then(|r| r.header("if-none-match")),
            Some("\"e1\""),
            "{path}: as a revalidation"
        );
    }
}

/// C14: `max-age=600s` is invalid (stale, revalidated); `max-age="3600"`
/// is accepted.
#[test]
fn non_numeric_max_age_is_stale_and_quoted_max_age_is_accepted_c14() {
    let (origin, proxy) = start(|req| match req.path() {
        "/rss" => Reply::ok(&[("Cache-Control", "max-age=600s"), ("ETag", "\"r1\"")], b"rss"),
        _ => Reply::ok(&[("Cache-Control", "max-age=\"3600\"")], b"q"),
    });
    let rss = origin.url("/rss");
    assert_eq!(proxy.get(&rss, &[]).status, 200);
    proxy.get(&rss, &[]);
    let reqs = origin.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[1].header("if-none-match"),
        Some("\"r1\""),
        "max-age=600s: the repeat is revalidated"
    );

    let q = origin.url("/q");
    proxy.get(&q, &[]);
    let again = proxy.get(&q, &[]);
    assert!(is_hit(&again), "quoted max-age parsed as 3600: {}", status_of(&again));
    assert_eq!(origin.request_count(), 3);
}

/// RFC 9111 section 5.1: a list-valued `Age` uses its first member and an
/// invalid `Age` is ignored. `Age: 0, 7200` and `Age: abc` are reused
/// without asking the origin; `Age: 7200, 0` is stale and revalidated.
/// (Until issue 10 item 6 any list made the response stale.)
#[test]
fn a_list_valued_age_uses_its_first_member_and_junk_is_ignored() {
    let (origin, proxy) = start(|req| {
        let age = match req.path() {
            "/first-zero" => "0, 7200",
            "/first-old" => "7200, 0",
            _ => "abc",
        };
        Reply::ok(&[("Cache-Control", "max-age=3600"), ("Age", age)], b"aged")
    });
    for (path, reused) in [("/first-zero", true), ("/first-old", false), ("/junk", true)] {
        let url = origin.url(path);
        proxy.get(&url, &[]);
        let again = proxy.get(&url, &[]);
        assert_eq!(is_hit(&again), reused, "{path}: {}", status_of(&again));
    }
    assert_eq!(origin.request_count(), 4, "only the stale one went back to the origin");
}

/// RFC 9110 section 5.6.7 (issue 10 item 8): an `Expires` in lower or
/// upper case (RFC 9111 section 4.2), in the RFC 850 form or in the
/// asctime form is read, so the repeat is a hit; one in another zone means
/// already expired.
#[test]
fn obsolete_and_lower_case_expires_are_read() {
    let (origin, proxy) = start(|req| {
        let imf = from_now(3600); // "Sun, 06 Nov 1994 08:49:37 GMT"
        let (day_name, day, month, year, time) =
            (&imf[0..3], &imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
        let expires = match req.path() {
            "/lower" => imf.to_ascii_lowercase(),
            "/upper" => imf.to_ascii_uppercase(),
            "/rfc850" => {
                format!("{}, {day}-{month}-{} {time} GMT", long_day_name(day_name), &year[2..])
            }
            "/asctime" => {
                format!("{day_name} {month} {:>2} {time} {year}", day.trim_start_matches('0'))
            }
            _ => imf.replace("GMT", "PST"),
        };
        Reply::ok(&[("Date", &ago(0)), ("Expires", &expires)], b"x")
    });
    for (path, hit) in [
        ("/lower", true),
        ("/upper", true),
        ("/rfc850", true),
        ("/asctime", true),
        ("/other-zone", false),
    ] {
        let url = origin.url(path);
        proxy.get(&url, &[]);
        let again = proxy.get(&url, &[]);
        assert_eq!(is_hit(&again), hit, "{path}: {}", status_of(&again));
    }
    assert_eq!(origin.request_count(), 6);
}

/// `Sunday` for `Sun`.
fn long_day_name(short: &str) -> &'static str {
    ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        .into_iter()
        .find(|l| l.starts_with(short))
        .unwrap_or("Sunday")
}

/// RFC 9111 section 5.3 (issue 41): an `Expires` an hour ahead but written
/// outside the three forms of RFC 9110 section 5.6.7 is invalid, so
/// already expired: the repeat is revalidated with the stored `ETag`, never
/// served from the cache. Spellings a lenient reader takes for the date
/// they seem to mean (RFC 850 dashes with a four-digit year, several
/// spaces, a long day name or no space after the comma in IMF-fixdate) and
/// the `freshness-expires-invalid-*` ones of http-cache-tests.
#[test]
fn an_expires_outside_the_date_grammar_is_in_the_past_rfc9111_5_3() {
    let spellings = [
        "dashes",
        "spaces",
        "long-day",
        "no-space",
        "no-comma",
        "two-digit-year",
        "utc",
        "periods",
    ];
    let (origin, proxy) = start(|req| {
        let imf = from_now(3600); // "Sun, 06 Nov 1994 08:49:37 GMT"
        let (day_name, day, month, year, time) =
            (&imf[0..3], &imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
        let expires = match req.path().trim_start_matches('/') {
            "dashes" => format!("{day_name}, {day}-{month}-{year} {time} GMT"),
            "spaces" => format!("{day_name}, {day}  {month}  {year} {time} GMT"),
            "long-day" => format!("{}, {day} {month} {year} {time} GMT", long_day_name(day_name)),
            "no-space" => format!("{day_name},{day} {month} {year} {time} GMT"),
            "no-comma" => format!("{day_name} {day} {month} {year} {time} GMT"),
            "two-digit-year" => format!("{day_name}, {day} {month} {} {time} GMT", &year[2..]),
            "utc" => imf.replace("GMT", "UTC"),
            _ => format!("{day_name}, {day} {month} {year} {} GMT", time.replace(':', ".")),
        };
        if req.header("if-none-match") == Some("\"e1\"") {
            Reply::not_modified(&[("ETag", "\"e1\""), ("Date", &ago(0)), ("Expires", &expires)])
        } else {
            Reply::ok(&[("Date", &ago(0)), ("Expires", &expires), ("ETag", "\"e1\"")], b"payload")
        }
    });
    for spelling in spellings {
        let url = origin.url(&format!("/{spelling}"));
        let first = proxy.get(&url, &[]);
        assert_eq!((first.status, first.text()), (200, "payload".to_string()), "{spelling}");
        let before = origin.request_count();
        let again = proxy.get(&url, &[]);
        assert_eq!(again.text(), "payload", "{spelling}");
        assert!(
            !is_hit(&again),
            "{spelling}: an invalid Expires must not be served from the cache: {}",
            status_of(&again)
        );
        let reqs = origin.requests();
        assert_eq!(reqs.len(), before + 1, "{spelling}: the repeat reaches the origin");
        assert_eq!(
            reqs.last().and_then(|r| r.header("if-none-match")),
            Some("\"e1\""),
            "{spelling}: as a revalidation"
        );
    }
}
