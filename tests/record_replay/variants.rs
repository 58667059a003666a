//! Records keep every `Vary` variant (issue 33): one URL answering HTML or
//! JSON by `Accept`, and gzip or identity by `Accept-Encoding`, recorded
//! online with `record.mode = "all"`; offline each client gets its own
//! variant and a client whose fields select none gets a 504 naming the URL
//! and the missing variant, never another variant. Also: `Vary: *` records
//! replay only to an identical request; records written by the release
//! before variants were kept still replay; `cache cat` of a POST-only
//! record.

use super::common::*;
use super::ALL;
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::store_key::RecordKey;
use crawlcache_store::Store;
use std::time::Duration;

const HTML: &[u8] = b"<html><body>the page as HTML</body></html>";
const JSON: &[u8] = b"{\"page\": \"as JSON\"}";
const PLAIN: &[u8] = b"the same words, identity-coded, long enough to tell apart";

fn gzipped() -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(PLAIN).unwrap();
    e.finish().unwrap()
}

/// A site whose answers vary by request fields. `private`: never stored by
/// the shared cache, so offline they can only come from the record.
fn negotiating(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/doc" => match req.header("accept").unwrap_or("") {
            "application/json" => Reply::ok(
                &[
                    ("Content-Type", "application/json"),
                    ("Vary", "Accept"),
                    ("Cache-Control", "private"),
                ],
                JSON,
            ),
            _ => Reply::ok(
                &[("Content-Type", "text/html"), ("Vary", "Accept"), ("Cache-Control", "private")],
                HTML,
            ),
        },
        "/text" => {
            let gzip = req.header("accept-encoding").is_some_and(|v| v.contains("gzip"));
            if gzip {
                Reply::ok(
                    &[
                        ("Content-Encoding", "gzip"),
                        ("Vary", "Accept-Encoding"),
                        ("Cache-Control", "private"),
                    ],
                    &gzipped(),
                )
            } else {
                Reply::ok(&[("Vary", "Accept-Encoding"), ("Cache-Control", "private")], PLAIN)
            }
        }
        // Cacheable too: the cache and the record each keep both variants.
        "/cached" => match req.header("accept").unwrap_or("") {
            "application/json" => {
                Reply::ok(&[("Vary", "Accept"), ("Cache-Control", "max-age=1")], JSON)
            }
            _ => Reply::ok(&[("Vary", "Accept"), ("Cache-Control", "max-age=1")], HTML),
        },
        "/star" => Reply::ok(
            &[("Vary", "*")],
            format!("for {}", req.header("user-agent").unwrap_or("?")).as_bytes(),
        ),
        _ => Reply::new(404, &[], b"not here"),
    }
}

#[test]
fn accept_and_accept_encoding_variants_replay_offline_each_to_its_own_client_and_a_third_gets_504()
{
    let dir = TestDir::new("record-variants");
    let data = dir.subdir("data");
    let origin = Origin::start(negotiating);
    let (doc, text, cached) = (origin.url("/doc"), origin.url("/text"), origin.url("/cached"));
    let proxy = Proxy::start_with_config(&data, ALL, &[]);
    for (url, headers) in [
        (&doc, vec![("Accept", "text/html")]),
        (&doc, vec![("Accept", "application/json")]),
        (&text, vec![("Accept-Encoding", "gzip")]),
        (&text, vec![("Accept-Encoding", "identity")]),
        (&cached, vec![("Accept", "text/html")]),
        (&cached, vec![("Accept", "application/json")]),
    ] {
        assert_eq!(proxy.get(url, &headers).status, 200);
    }
    // Recorded in the order JSON after HTML: a record that kept the last
    // variant only would answer JSON to everyone.
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    drop(origin);
    // The cached variants are stale by now (max-age=1): offline they are
    // still served, from the cache, each to its own client.
    std::thread::sleep(Duration::from_millis(1100));

    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let html = offline.get(&doc, &[("Accept", "text/html")]);
    assert_eq!((html.status, html.body.as_slice()), (200, HTML), "{}", html.describe());
    let cs = html.cache_status().unwrap_or_default();
    assert!(
        cs.contains("hit") && cs.contains("detail=offline") && cs.contains("key=\"record:GET "),
        "from the record: {cs}"
    );
    let json = offline.get(&doc, &[("Accept", "application/json")]);
    assert_eq!((json.status, json.body.as_slice()), (200, JSON), "{}", json.describe());
    assert_eq!(json.header("content-type"), Some("application/json"));
    // Whitespace around the value does not make another variant (RFC 9111 section 4.1).
    assert_eq!(offline.get(&doc, &[("Accept", " application/json ")]).body, JSON);

    let csv = offline.get(&doc, &[("Accept", "text/csv")]);
    assert_eq!(csv.status, 504, "a variant never recorded: {}", csv.describe());
    let t = csv.text();
    assert!(
        t.contains("/doc") && t.contains("accept: \"text/csv\"") && t.contains("other variants"),
        "names the URL and the missing variant: {t}"
    );
    assert!(
        !csv.body.windows(HTML.len()).any(|w| w == HTML)
            && !csv.body.windows(JSON.len()).any(|w| w == JSON)
    );
    let none = offline.get(&doc, &[]);
    assert_eq!(none.status, 504, "no Accept at all is a variant of its own: {}", none.describe());
    assert!(none.text().contains("accept absent"), "{}", none.text());

    let gz = offline.get(&text, &[("Accept-Encoding", "gzip")]);
    assert_eq!((gz.status, gz.body.clone()), (200, gzipped()), "{}", gz.describe());
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let id = offline.get(&text, &[("Accept-Encoding", "identity")]);
    assert_eq!(
        (id.status, id.body.as_slice(), id.header("content-encoding")),
        (200, PLAIN, None),
        "{}",
        id.describe()
    );
    // Case is not significant in content codings (RFC 9110 section 8.4.1).
    assert_eq!(offline.get(&text, &[("Accept-Encoding", "GZIP")]).body, gzipped());
    let br = offline.get(&text, &[("Accept-Encoding", "br")]);
    assert_eq!(br.status, 504, "{}", br.describe());
    assert!(br.text().contains("accept-encoding: \"br\""), "{}", br.text());

    for (accept, body) in [("text/html", HTML), ("application/json", JSON)] {
        let r = offline.get(&cached, &[("Accept", accept)]);
        assert_eq!((r.status, r.body.as_slice()), (200, body), "{accept}: {}", r.describe());
    }
    offline.stop_cleanly();

    // Both variants are listed, each with the fields that select it.
    let out = crawlcache_cmd(
        &["cache", "ls", "--json", "--data-dir", data.to_str().unwrap(), "--prefix", &doc],
        Duration::from_secs(30),
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let variants: Vec<&str> = rows.iter().filter_map(|r| r["variant"].as_str()).collect();
    assert!(
        variants.contains(&"accept: \"text/html\"")
            && variants.contains(&"accept: \"application/json\""),
        "{rows:?}"
    );
    assert_cache_verifies(&data);
}

#[test]
fn vary_star_records_replay_only_to_an_identical_request() {
    let dir = TestDir::new("record-vary-star");
    let data = dir.subdir("data");
    let origin = Origin::start(negotiating);
    let star = origin.url("/star");
    let proxy = Proxy::start_with_config(&data, ALL, &[]);
    let online = proxy.get(&star, &[("User-Agent", "crawler/1"), ("Accept", "*/*")]);
    assert_eq!(online.body, b"for crawler/1");
    assert!(
        !online.cache_status().unwrap_or_default().contains("stored"),
        "Vary: * is never stored by the cache"
    );
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    drop(origin);

    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let same = offline.get(&star, &[("Accept", "*/*"), ("User-Agent", "crawler/1")]);
    assert_eq!(
        (same.status, same.body.as_slice()),
        (200, &b"for crawler/1"[..]),
        "the same fields, in another order: {}",
        same.describe()
    );
    let other = offline.get(&star, &[("User-Agent", "crawler/2"), ("Accept", "*/*")]);
    assert_eq!(other.status, 504, "{}", other.describe());
    assert!(other.text().contains("Vary: *"), "{}", other.text());
    let more =
        offline.get(&star, &[("User-Agent", "crawler/1"), ("Accept", "*/*"), ("Cookie", "a=1")]);
    assert_eq!(more.status, 504, "a field more is another request: {}", more.describe());
    offline.stop_cleanly();
}

/// Writes a record as the release before variants wrote it: under the
/// GET record key with an empty secondary key, the request's `Vary`
/// fields kept in the head.
fn legacy_record(
    store: &Store,
    url: &str,
    headers: &[(&str, &str)],
    vary_request: &[(&str, &str)],
    body: &[u8],
) {
    let mut w = store.begin_body().unwrap();
    w.write(body).unwrap();
    let committed = w.finish().unwrap();
    let now = crawlcache_policy::cache::to_millis(std::time::SystemTime::now());
    let stored = StoredResponse {
        status: 200,
        headers: headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect(),
        request_time_ms: now,
        response_time_ms: now,
        url: url.to_string(),
        vary_request: vary_request
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect(),
    };
    store
        .insert(&RecordKey::get(url).primary(), b"", &stored.to_bytes(), Some(&committed))
        .unwrap();
}

#[test]
fn records_written_before_variants_were_kept_still_replay() {
    let dir = TestDir::new("record-legacy");
    let data = dir.subdir("data");
    let origin = Origin::start(|_| Reply::ok(&[], b""));
    let (plain, coded, star) = (origin.url("/plain"), origin.url("/coded"), origin.url("/star"));
    drop(origin);
    {
        let store = Store::open(&data, 1 << 30).unwrap();
        legacy_record(&store, &plain, &[("content-type", "text/plain")], &[], b"no vary");
        legacy_record(
            &store,
            &coded,
            &[("vary", "Accept-Encoding")],
            &[("accept-encoding", "identity")],
            b"identity body",
        );
        legacy_record(&store, &star, &[("vary", "*")], &[], b"star body");
        store.flush().unwrap();
    }
    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let r = offline.get(&plain, &[("Accept-Encoding", "gzip")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"no vary"[..]), "{}", r.describe());
    let r = offline.get(&coded, &[("Accept-Encoding", "identity")]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"identity body"[..]),
        "the request that selected it: {}",
        r.describe()
    );
    let r = offline.get(&coded, &[("Accept-Encoding", "gzip")]);
    assert_eq!(r.status, 504, "never another variant, also for an old record: {}", r.describe());
    let r = offline.get(&star, &[("User-Agent", "any")]);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"star body"[..]),
        "its request is unknown: replayed as before: {}",
        r.describe()
    );
    offline.stop_cleanly();
}

#[test]
fn cache_cat_prints_a_record_of_a_post_only() {
    let dir = TestDir::new("record-cat-post");
    let data = dir.subdir("data");
    let origin = Origin::start(|req| {
        Reply::ok(
            &[("Content-Type", "text/plain")],
            format!("posted {}", String::from_utf8_lossy(&req.body)).as_bytes(),
        )
    });
    let form = origin.url("/form");
    let proxy = Proxy::start_with_config(&data, ALL, &[]);
    assert_eq!(send_request(proxy.addr(), "POST", &form, &[], b"q=1").status, 200);
    std::thread::sleep(Duration::from_millis(300));
    // Through the running proxy, then on the stopped store.
    let cat = |running: bool| {
        let out = crawlcache_cmd(
            &["cache", "cat", "--data-dir", data.to_str().unwrap(), &form],
            Duration::from_secs(30),
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "running={running}: {err}");
        assert_eq!(out.stdout, b"posted q=1", "running={running}: {err}");
        assert!(err.contains("record"), "running={running}: says where it came from: {err}");
    };
    cat(true);
    proxy.stop_cleanly();
    cat(false);
    let out = crawlcache_cmd(
        &["cache", "cat", "--data-dir", data.to_str().unwrap(), &origin.url("/never")],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
}
