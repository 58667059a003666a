//! Endpoints addressed to crawlcache itself (origin-form requests), served
//! to loopback clients only:
//!
//! - `GET /` and `GET /status`: the status page ([`status`]), which polls
//!   `GET /status.json`.
//! - `GET /metrics`: Prometheus text.
//! - `GET /stats`: JSON counters and store figures.
//! - `GET /cache/show?url=URL`: the stored variants of a URL, as JSON.
//! - `GET /cache/ls[?host=H][&prefix=URL][&json=1]`: the stored responses,
//!   one line each, streamed ([`inspect`]).
//! - `GET /cache/cat?url=URL[&decode=1]`: a stored body, streamed
//!   ([`inspect::pick`]).
//! - `POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION`:
//!   removes the selected responses from the cache and the record
//!   ([`maintain`]), answering with the counts as JSON.
//! - `POST /cache/prune[?unused_for=DURATION][&records=1]`: removes stale
//!   responses not used for that long ([`maintain::prune`]).
//! - `GET /cache/verify` (`?repair=1` to fix): checks the store's invariants.
//! - `POST /cache/compact`: compacts the whole pack now (`cache compact`),
//!   answering its sizes before and after as JSON.
//! - `GET /cache/export[?host=H&prefix=URL&filename=NAME&revisits=1]`: the
//!   stored exchanges as a WARC file, streamed ([`crate::warc::export`]);
//!   the field `crawlcache-export-exchanges` says how many exchanges are
//!   planned.
//! - `POST /cache/import/upload?name=NAME` (a WARC file as the body), then
//!   `POST /cache/import?uploads=ID,...`: `crawlcache import` into the
//!   running proxy's store, progress streamed ([`import`]).
//! - `GET /robots/show?origin=ORIGIN`: the robots.txt snapshot of an origin.
//! - `POST /robots/refresh[?origin=ORIGIN]`: a conditional refresh now (of
//!   every known origin without `origin`).

pub mod host_filter;
pub mod import;
pub mod inspect;
pub mod maintain;
pub mod status;

use crate::cache::{key, StoredResponse};
use crate::proxy::{ProxyState, SelfEndpoints};
use crate::wire::body::ProxyBody;
use crate::store::{Entry, Store};
use http::header::HeaderValue;
use http::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;

/// The admin endpoints, for [`crate::proxy::run`].
pub fn endpoints() -> SelfEndpoints {
    std::sync::Arc::new(|state, req, peer| Box::pin(async move { handle(&state, req, peer).await }))
}

/// Serves an origin-form request addressed to the proxy.
pub async fn handle<B>(state: &ProxyState, req: Request<B>, peer: SocketAddr) -> Response<ProxyBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if let Err(why) = admitted(&state.config.server, req.headers(), peer) {
        if status::is_status_path(req.uri().path()) && !state.config.server.admin_token.trim().is_empty() {
            return status::unauthorized(why);
        }
        return text(StatusCode::FORBIDDEN, format!("crawlcache: {why}\n"));
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    match (method, path.as_str()) {
        (Method::GET, p) if status::is_status_path(p) => status::respond(state, p).unwrap_or_else(|| text(StatusCode::NOT_FOUND, String::new())),
        (Method::GET, "/metrics") => {
            let mut resp = text(StatusCode::OK, prometheus(state));
            resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
            resp
        }
        (Method::GET, "/stats") => json(StatusCode::OK, &stats_json(state)),
        (Method::GET, "/cache/show") => match query_param(&query, "url") {
            Some(url) => match show_json(&state.store, &url, &state.config.cache.key_rules) {
                Ok(v) => json(StatusCode::OK, &v),
                Err(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
            },
            None => text(StatusCode::BAD_REQUEST, "crawlcache: /cache/show needs ?url=URL\n".into()),
        },
        (Method::GET, "/cache/ls") => {
            let filter = inspect::KeyFilter { host: query_param(&query, "host"), prefix: query_param(&query, "prefix") };
            if let Err(e) = filter.validate() {
                return text(StatusCode::BAD_REQUEST, message(&e));
            }
            let as_json = query_param(&query, "json").is_some_and(|v| v != "0");
            let spec = inspect::ListSpec {
                filter,
                policy: state.policy.clone(),
                rules: state.config.cache.rules.clone(),
                now: std::time::SystemTime::now(),
            };
            let store = state.store.clone();
            stream_blocking("text/plain; charset=utf-8", move |out| {
                for row in inspect::Listing::new(&store, spec) {
                    let row = row.map_err(std::io::Error::other)?;
                    writeln!(out, "{}", if as_json { row.json() } else { row.text() })?;
                }
                Ok(())
            })
        }
        (Method::GET, "/cache/cat") => {
            let Some(url) = query_param(&query, "url") else {
                return text(StatusCode::BAD_REQUEST, "crawlcache: /cache/cat needs ?url=URL\n".into());
            };
            let decode = query_param(&query, "decode").is_some_and(|v| v != "0");
            cat(state, &url, decode)
        }
        (Method::POST | Method::DELETE, "/cache/purge") => {
            let selection = match purge_selection(&query, &state.config.cache.key_rules) {
                Ok(s) => s,
                Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
            };
            let store = state.store.clone();
            let now = std::time::SystemTime::now();
            removal_answer(tokio::task::spawn_blocking(move || maintain::purge(&store, &selection, now)).await)
        }
        (Method::POST, "/cache/prune") => {
            let unused_for = query_param(&query, "unused_for").unwrap_or_else(|| maintain::DEFAULT_UNUSED_FOR.into());
            let unused_for = match crate::units::parse_duration(&unused_for) {
                Ok(d) => d,
                Err(e) => return text(StatusCode::BAD_REQUEST, format!("crawlcache: unused_for: {e}\n")),
            };
            let spec = maintain::PruneSpec {
                unused_for,
                records: query_param(&query, "records").is_some_and(|v| v != "0"),
                policy: state.policy.clone(),
                rules: state.config.cache.rules.clone(),
            };
            let store = state.store.clone();
            let now = std::time::SystemTime::now();
            removal_answer(tokio::task::spawn_blocking(move || maintain::prune(&store, &spec, now)).await)
        }
        (Method::GET, "/cache/export") => export(state, &query).await,
        (Method::POST, "/cache/compact") => {
            let store = state.store.clone();
            match tokio::task::spawn_blocking(move || store.compact()).await {
                Ok(Ok(c)) => json(StatusCode::OK, &serde_json::to_value(c).unwrap_or_default()),
                Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("crawlcache: compaction failed: {e}\n")),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("crawlcache: compaction failed: {e}\n")),
            }
        }
        (Method::POST, "/cache/import/upload") => import::upload(state, req, &query).await,
        (Method::POST, "/cache/import") => import::run(state, &query),
        (Method::GET, "/robots/show") => match query_param(&query, "origin").and_then(|o| crate::robots::snapshot::Origin::from_url(&o)) {
            Some(origin) => match state.robots.current(&origin) {
                Some(rules) => {
                    let text = crate::robots::registry::describe(&rules.snapshot, &state.robots.windows(&origin), std::time::SystemTime::now());
                    text_ok(text)
                }
                None => text(StatusCode::NOT_FOUND, format!("crawlcache: no robots.txt snapshot for {origin} yet\n")),
            },
            None => text(StatusCode::BAD_REQUEST, "crawlcache: /robots/show needs ?origin=http://host[:port]\n".into()),
        },
        (Method::POST, "/robots/refresh") => {
            let now = std::time::SystemTime::now();
            let origins: Vec<crate::robots::snapshot::Origin> = match query_param(&query, "origin") {
                Some(o) => match crate::robots::snapshot::Origin::from_url(&o) {
                    Some(origin) => vec![origin],
                    None => return text(StatusCode::BAD_REQUEST, format!("crawlcache: '{o}' is not an origin (http://host[:port])\n")),
                },
                None => state.robots.ages(now).into_iter().map(|(o, _)| o).collect(),
            };
            let mut out = String::new();
            for origin in origins {
                let rules = state.robots.refresh(&origin, now).await;
                out.push_str(&crate::robots::registry::describe(&rules.snapshot, &state.robots.windows(&origin), std::time::SystemTime::now()));
                out.push('\n');
            }
            text_ok(out)
        }
        (Method::GET, "/cache/verify") => {
            let repair = query_param(&query, "repair").map(|v| v == "1" || v == "true").unwrap_or(false);
            let store = state.store.clone();
            match tokio::task::spawn_blocking(move || store.verify(repair)).await {
                Ok(Ok(report)) => json(StatusCode::OK, &serde_json::json!({ "clean": report.is_clean(), "report": report })),
                Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("verify failed: {e}\n")),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("verify failed: {e}\n")),
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "crawlcache: this is a forward proxy; send absolute-form requests (GET http://host/path).\n\
             Admin endpoints: GET / (the status page), GET /metrics, GET /stats, GET /cache/show?url=URL, GET /cache/ls[?host=H&prefix=URL&json=1],\n\
             GET /cache/cat?url=URL[&decode=1], POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION,\n\
             POST /cache/prune[?unused_for=DURATION&records=1], GET /cache/verify[?repair=1], POST /cache/compact,\n\
             GET /cache/export[?host=H&prefix=URL&revisits=1], POST /cache/import/upload?name=NAME, POST /cache/import?uploads=ID,...,\n\
             GET /robots/show?origin=ORIGIN, POST /robots/refresh[?origin=ORIGIN]\n"
                .into(),
        ),
    }
}

/// Whether an admin request from `peer` with `headers` is admitted: with
/// `server.admin_token` set, only with `Authorization: Bearer <token>` (or,
/// from a browser, HTTP Basic with the token as the password); without,
/// only from loopback while the proxy listens on loopback.
pub fn admitted(server: &crate::config::ServerConfig, headers: &http::HeaderMap, peer: SocketAddr) -> Result<(), &'static str> {
    let token = server.admin_token.trim();
    if !token.is_empty() {
        let auth = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let basic = auth
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| data_encoding::BASE64.decode(b.trim().as_bytes()).ok())
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|up| up.split_once(':').map(|(_, password)| password.to_string()));
        let sent = auth.and_then(|v| v.strip_prefix("Bearer ")).map(str::to_string).or(basic);
        return match sent.as_deref() {
            Some(t) if constant_time_eq(t.trim().as_bytes(), token.as_bytes()) => Ok(()),
            _ => Err("admin endpoints need `Authorization: Bearer <server.admin_token>`"),
        };
    }
    if !crate::wire::net::is_loopback(server.listen.ip()) {
        return Err("admin endpoints are off: the proxy listens beyond loopback and server.admin_token is not set");
    }
    if !crate::wire::net::is_loopback(peer.ip()) {
        return Err("admin endpoints answer loopback clients only (or set server.admin_token)");
    }
    Ok(())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn text_ok(body: String) -> Response<ProxyBody> {
    text(StatusCode::OK, body)
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn json(status: StatusCode, v: &serde_json::Value) -> Response<ProxyBody> {
    let mut body = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    body.push('\n');
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The value of `name` in a query string, percent-decoded.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == name {
            Some(percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned())
        } else {
            None
        }
    })
}

/// How many per-origin robots.txt age series `/metrics` exports at most
/// (the oldest snapshots), so a crawl over a million origins does not make
/// a million series.
pub const ROBOTS_AGE_SERIES: usize = 50;

/// `/metrics` in Prometheus text format.
pub fn prometheus(state: &ProxyState) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (name, help, value) in state.metrics.counters() {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
    }
    let s = state.store.stats();
    let gauges = [
        ("crawlcache_store_entries", "Entries (variants) in the cache index.", s.entries),
        ("crawlcache_store_bodies", "Distinct bodies stored, each once however many entries reference it.", s.bodies),
        ("crawlcache_store_bytes", "Bytes of those distinct bodies, each counted once (what cache.max_size bounds).", s.bytes_stored),
        (
            "crawlcache_store_referenced_bytes",
            "Bytes of the bodies of every entry, a shared body counted once per entry (minus crawlcache_store_bytes: what sharing saves).",
            s.bytes_referenced,
        ),
        ("crawlcache_store_pack_bytes", "Bytes of the store's pack segments on disk (entry records, live and not yet reclaimed).", s.pack_bytes),
        ("crawlcache_store_max_bytes", "The configured size budget in bytes.", s.max_size),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
    }
    if let Some(shares) = &state.shares {
        let _ = writeln!(
            out,
            "# HELP crawlcache_client_connections Open client connections, by serving thread (a burst of new connections is spread over the threads).\n# TYPE crawlcache_client_connections gauge"
        );
        for (thread, n) in shares.open_connections().into_iter().enumerate() {
            let _ = writeln!(out, "crawlcache_client_connections{{thread=\"{thread}\"}} {n}");
        }
    }
    let now = std::time::SystemTime::now();
    // Bounded cardinality: one series for each of the oldest snapshots
    // (those nearest expiry), plus totals over all of them.
    let mut ages = state.robots.ages(now);
    ages.sort_by(|a, b| b.1.cmp(&a.1));
    let _ = writeln!(
        out,
        "# HELP crawlcache_robots_snapshots Origins with a robots.txt snapshot.\n# TYPE crawlcache_robots_snapshots gauge\ncrawlcache_robots_snapshots {}",
        ages.len()
    );
    let _ = writeln!(
        out,
        "# HELP crawlcache_robots_snapshot_age_max_seconds Age of the oldest robots.txt snapshot.\n# TYPE crawlcache_robots_snapshot_age_max_seconds gauge\ncrawlcache_robots_snapshot_age_max_seconds {}",
        ages.first().map_or(0, |(_, a)| a.as_secs())
    );
    let _ = writeln!(
        out,
        "# HELP crawlcache_robots_snapshot_age_seconds Age of the robots.txt snapshot in force, for the {ROBOTS_AGE_SERIES} oldest snapshots.\n# TYPE crawlcache_robots_snapshot_age_seconds gauge"
    );
    for (origin, age) in ages.iter().take(ROBOTS_AGE_SERIES) {
        let _ = writeln!(out, "crawlcache_robots_snapshot_age_seconds{{origin=\"{}\"}} {}", prom_escape(&origin.to_string()), age.as_secs());
    }
    let m = &state.metrics;
    let g = crate::metrics::Counter::get;
    let _ = writeln!(out, "# HELP crawlcache_robots_disposition_total Requests by how the robots rules in force were obtained.\n# TYPE crawlcache_robots_disposition_total counter");
    for (label, c) in [
        ("fetched", &m.robots_fetched),
        ("cached", &m.robots_cached),
        ("stale_usable", &m.robots_stale_usable),
        ("stale_degraded", &m.robots_stale_degraded),
        ("expired", &m.robots_expired),
        ("offline", &m.robots_offline),
    ] {
        let _ = writeln!(out, "crawlcache_robots_disposition_total{{disposition=\"{label}\"}} {}", g(c));
    }
    let _ = writeln!(out, "# HELP crawlcache_robots_verdict_total Requests by robots verdict.\n# TYPE crawlcache_robots_verdict_total counter");
    let _ = writeln!(out, "crawlcache_robots_verdict_total{{verdict=\"allowed\"}} {}", g(&m.robots_allowed));
    let _ = writeln!(out, "crawlcache_robots_verdict_total{{verdict=\"disallowed\"}} {}", g(&m.robots_disallowed));
    let _ = writeln!(out, "# HELP crawlcache_robots_fetch_total robots.txt fetch attempts by outcome.\n# TYPE crawlcache_robots_fetch_total counter");
    for (label, n) in state.robots.fetch_outcomes() {
        let _ = writeln!(out, "crawlcache_robots_fetch_total{{outcome=\"{label}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP crawlcache_evictions_total Entries evicted by the size budget.\n# TYPE crawlcache_evictions_total counter\ncrawlcache_evictions_total {}",
        s.evictions
    );
    if let Some(f) = &state.fleet {
        out.push_str(&f.prometheus());
    }
    out
}

fn prom_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `/stats` as JSON.
pub fn stats_json(state: &ProxyState) -> serde_json::Value {
    let mut counters = serde_json::Map::new();
    for (name, _, value) in state.metrics.counters() {
        let short = name.trim_start_matches("crawlcache_").trim_end_matches("_total");
        counters.insert(short.to_string(), value.into());
    }
    serde_json::json!({
        "listen": state.local_addr.to_string(),
        "offline": state.offline,
        "data_dir": state.config.server.data_dir.display().to_string(),
        "store": state.store.stats(),
        "proxy": counters,
        "fleet": state.fleet.as_ref().map(|f| f.stats_json()),
        "connections": status::connections_json(state),
        "recent": status::windows_json(state),
    })
}

fn normalise(url: &str) -> Result<String, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("crawlcache: '{url}' is not a URL: {e}"))?;
    key::primary_key(&uri).ok_or_else(|| format!("crawlcache: '{url}' is not an absolute http:// or https:// URL"))
}

/// The stored variants of `url` as JSON (for `cache show`).
/// `key` is the cache key under `rules` (`cache.key_rules`); `records` the
/// recorded responses for it (SPEC section 6).
pub fn show_json(store: &Store, url: &str, rules: &[crate::record::key_rules::KeyRule]) -> Result<serde_json::Value, String> {
    let exact = normalise(url)?;
    let primary = crate::record::key_rules::apply(rules, &exact);
    let entries = store.lookup(&primary).map_err(|e| e.to_string())?;
    let variants: Vec<serde_json::Value> = entries.iter().map(entry_json).collect();
    let mut records = Vec::new();
    for m in [http::Method::GET, http::Method::HEAD] {
        let key = crate::store_key::RecordKey::new(&m, &primary, None).primary();
        for e in store.lookup(&key).map_err(|e| e.to_string())? {
            let mut j = entry_json(&e);
            j["key"] = serde_json::Value::String(key.clone());
            records.push(j);
        }
    }
    Ok(serde_json::json!({ "url": exact, "key": primary, "variants": variants, "records": records }))
}

fn entry_json(e: &Entry) -> serde_json::Value {
    let stored = StoredResponse::from_bytes(&e.meta);
    let headers: Vec<serde_json::Value> = stored
        .as_ref()
        .map(|s| s.headers.iter().map(|(n, v)| serde_json::json!([n, String::from_utf8_lossy(v)])).collect())
        .unwrap_or_default();
    let vary: Vec<serde_json::Value> = stored
        .as_ref()
        .map(|s| s.vary_request.iter().map(|(n, v)| serde_json::json!([n, String::from_utf8_lossy(v)])).collect())
        .unwrap_or_default();
    serde_json::json!({
        "status": stored.as_ref().map(|s| s.status),
        "headers": headers,
        "vary_request": vary,
        "request_time_ms": stored.as_ref().map(|s| s.request_time_ms),
        "response_time_ms": stored.as_ref().map(|s| s.response_time_ms),
        "body_sha256": e.body.as_ref().map(|b| b.sha256.clone()),
        "body_bytes": e.body.as_ref().map(|b| b.len),
        "last_used": e.last_used,
    })
}

/// The cache key of `url`: normalised ([`key::primary_key`]), then
/// rewritten by the first of `rules` (`cache.key_rules`) that matches.
/// Errors: `url` is not an absolute http:// or https:// URL.
pub fn cache_key(url: &str, rules: &[crate::record::key_rules::KeyRule]) -> Result<String, String> {
    Ok(crate::record::key_rules::apply(rules, &normalise(url)?))
}

/// The selection of a `POST /cache/purge` query: `url` (its cache key under
/// `rules`, and the exact URL when that differs), `host`, `prefix`,
/// `older_than` (a duration). Errors: a bad URL or duration, or nothing
/// selected.
pub fn purge_selection(query: &str, rules: &[crate::record::key_rules::KeyRule]) -> Result<maintain::PurgeSelection, String> {
    let mut selection = maintain::PurgeSelection {
        filter: inspect::KeyFilter { host: query_param(query, "host"), prefix: query_param(query, "prefix") },
        ..Default::default()
    };
    if let Some(url) = query_param(query, "url") {
        selection.urls = url_keys(&url, rules)?;
    }
    if let Some(d) = query_param(query, "older_than") {
        selection.older_than = Some(crate::units::parse_duration(&d).map_err(|e| format!("older_than: {e}"))?);
    }
    selection.validate()?;
    Ok(selection)
}

/// The keys a purge of `url` removes: its cache key under `rules`, and the
/// exact (normalised) URL when the rules rewrote it (entries stored before
/// the rule was added). Errors: `url` is not an absolute http(s) URL.
pub fn url_keys(url: &str, rules: &[crate::record::key_rules::KeyRule]) -> Result<Vec<String>, String> {
    let exact = normalise(url)?;
    let key = crate::record::key_rules::apply(rules, &exact);
    Ok(if key == exact { vec![key] } else { vec![key, exact] })
}

/// The answer to a purge or prune run on the blocking pool.
fn removal_answer(done: Result<Result<maintain::Removed, String>, tokio::task::JoinError>) -> Response<ProxyBody> {
    match done {
        Ok(Ok(removed)) => json(StatusCode::OK, &serde_json::to_value(removed).unwrap_or_default()),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, message(&e)),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, message(&e.to_string())),
    }
}

/// An error line for an admin answer: `crawlcache: ` once, then `e`.
fn message(e: &str) -> String {
    format!("crawlcache: {}\n", e.trim_start_matches("crawlcache: "))
}

/// `GET /cache/cat`: the stored body of `url` (see [`inspect::pick`]),
/// streamed; `X-Crawlcache-Source` says `cache` or `record`,
/// `X-Crawlcache-Key` the store key. 404 when nothing is stored for it;
/// 400 for a bad URL or, with `decode`, a coding that cannot be undone.
fn cat(state: &ProxyState, url: &str, decode: bool) -> Response<ProxyBody> {
    let picked = match inspect::pick(&state.store, url, &state.config.cache.key_rules) {
        Ok(Some(p)) => p,
        Ok(None) => return text(StatusCode::NOT_FOUND, format!("crawlcache: {url} is not stored (neither in the cache nor in the record)\n")),
        Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
    };
    let mut body = match picked.body(&state.store, decode) {
        Ok(b) => b,
        Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
    };
    let key = picked.key.clone();
    let mut resp = stream_blocking("application/octet-stream", move |out| {
        std::io::copy(&mut body, out).map(|_| ()).inspect_err(|e| tracing::warn!("cache cat {key}: {e}"))
    });
    resp.headers_mut().insert("x-crawlcache-source", HeaderValue::from_static(picked.source()));
    if let Ok(v) = HeaderValue::from_str(&picked.key) {
        resp.headers_mut().insert("x-crawlcache-key", v);
    }
    resp
}

/// A response whose body `produce` writes on the blocking pool, sent as it
/// is written (chunked, never held whole): bytes are passed on every
/// 32 KiB, and at least every 50 ms while some are waiting. A client that
/// goes away makes the writes fail, which stops `produce`; an error from
/// `produce` cuts the body short (the client sees an incomplete answer).
fn stream_blocking(
    content_type: &'static str,
    produce: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'static,
) -> Response<ProxyBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::task::spawn_blocking(move || {
        let mut out = ChunkSink { tx, buf: Vec::with_capacity(CHUNK), last: std::time::Instant::now() };
        let result = produce(&mut out).and_then(|_| std::io::Write::flush(&mut out));
        if let Err(e) = result {
            let _ = out.tx.blocking_send(Err(e));
        }
    });
    let mut resp = Response::new(ProxyBody::Channel { rx, len: None });
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Bytes per chunk of a streamed admin answer.
const CHUNK: usize = 32 * 1024;

/// The writer behind [`stream_blocking`].
struct ChunkSink {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    buf: Vec<u8>,
    last: std::time::Instant,
}

impl std::io::Write for ChunkSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK || self.last.elapsed() >= std::time::Duration::from_millis(50) {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.last = std::time::Instant::now();
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

/// `GET /cache/export`: plans the export (a blocking scan of the index),
/// then streams the WARC file as it is written by a blocking task. A client
/// that goes away stops the writing. Exchanges left out are logged.
async fn export(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let filter = crate::warc::export::Filter { host: query_param(query, "host"), prefix: query_param(query, "prefix") };
    if let Err(e) = filter.validate() {
        return text(StatusCode::BAD_REQUEST, message(&e));
    }
    let opts = crate::warc::export::WriteOptions {
        filename: query_param(query, "filename").unwrap_or_else(|| "crawlcache.warc.gz".to_string()),
        description: format!("crawlcache export of {} (from the running proxy)", state.config.server.data_dir.display()),
        revisits: query_param(query, "revisits").is_some_and(|v| v != "0"),
    };
    let store = state.store.clone();
    let planned = tokio::task::spawn_blocking(move || crate::warc::export::plan(&store, &filter)).await;
    let (plan, undecodable) = match planned {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("export failed: {e}\n")),
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("export failed: {e}\n")),
    };
    for u in &undecodable {
        tracing::warn!("export: leaving out {u}");
    }
    let planned = plan.len() + undecodable.len();
    let store = state.store.clone();
    let mut resp = stream_blocking("application/warc", move |out| {
        match crate::warc::export::write(&store, &plan, out, &opts, &mut |_| {}) {
            Ok((_, summary)) => {
                tracing::info!(exchanges = summary.exchanges, skipped = summary.skipped.len(), "export streamed");
                Ok(())
            }
            Err(e) => {
                tracing::warn!("export stopped: {e}");
                Err(e)
            }
        }
    });
    resp.headers_mut().insert(crate::cli::warc::EXCHANGES_HEADER, HeaderValue::from(planned));
    resp
}
