//! One caching decision for a realistic response: parse headers, storable,
//! headers_to_store, freshness_lifetime, decide, conditional_headers.

#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use crawlcache_policy::cache::cache_control::CacheControl;
use crawlcache_policy::cache::key::{primary_key, secondary_key};
use crawlcache_policy::cache::*;
use crawlcache_policy::cache::{to_millis, StoredResponse};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use std::time::{Duration, UNIX_EPOCH};

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

fn decision(c: &mut Criterion) {
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let date = httpdate::fmt_http_date(t);
    let lm = httpdate::fmt_http_date(t - Duration::from_secs(86_400 * 30));
    let response = hm(&[
        ("date", &date),
        ("content-type", "text/html; charset=utf-8"),
        ("content-length", "48213"),
        ("connection", "keep-alive"),
        (
            "cache-control",
            "public, max-age=600, s-maxage=300, stale-while-revalidate=60, stale-if-error=86400",
        ),
        ("etag", "\"5f3c1a2b-bc55\""),
        ("last-modified", &lm),
        ("vary", "Accept-Encoding"),
        ("server", "nginx"),
        ("x-frame-options", "SAMEORIGIN"),
        ("strict-transport-security", "max-age=31536000; includeSubDomains"),
        ("set-cookie", "sid=abc; Path=/; HttpOnly"),
    ]);
    let request = hm(&[
        ("host", "example.com"),
        ("user-agent", "examplebot/1.0"),
        ("accept", "text/html,application/xhtml+xml"),
        ("accept-encoding", "gzip, br"),
        ("cache-control", "max-stale=30"),
    ]);
    let uri: http::Uri =
        "HTTP://Example.com:80/articles/2023/11/some-page?ref=feed".parse().unwrap();
    let cfg = PolicyConfig::default();
    let now = t + Duration::from_secs(120);

    c.bench_function("policy decision (store path + reuse decision)", |b| {
        b.iter(|| {
            let key = primary_key(black_box(&uri));
            let variant = secondary_key(black_box(&response), black_box(&request));
            let ok = storable(
                &Method::GET,
                &CacheControl::from_headers(black_box(&request)),
                black_box(&request),
                200,
                black_box(&response),
                &cfg,
            )
            .is_ok();
            let stored = StoredResponse {
                status: 200,
                headers: headers_to_store(black_box(&response), &cfg),
                request_time_ms: to_millis(t),
                response_time_ms: to_millis(t),
                url: key.unwrap_or_default(),
                vary_request: vec![],
            };
            let lifetime = freshness_lifetime(&stored, &cfg);
            let d = decide(&CacheControl::from_headers(black_box(&request)), &stored, now, &cfg);
            let cond = conditional_headers(&stored);
            black_box((ok, variant, lifetime, d, cond))
        })
    });

    let stored = StoredResponse {
        status: 200,
        headers: headers_to_store(&response, &cfg),
        request_time_ms: to_millis(t),
        response_time_ms: to_millis(t),
        url: primary_key(&uri).unwrap(),
        vary_request: vec![],
    };
    c.bench_function("policy decide (hit path: decide on a stored response)", |b| {
        b.iter(|| {
            black_box(decide(
                &CacheControl::from_headers(black_box(&request)),
                black_box(&stored),
                now,
                &cfg,
            ))
        })
    });
    c.bench_function("cache_control parse", |b| {
        b.iter(|| black_box(CacheControl::from_response_headers(black_box(&response))))
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
