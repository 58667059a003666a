//! The status page: `GET /` and `GET /status` (HTML), `GET /status.json`
//! (what the page shows, polled by its script), `GET /status.js` and
//! `GET /status.css` (the page's script and style, embedded in the
//! binary: no build step, no font or script from anywhere else, so it
//! works offline). Same access rule as every admin endpoint
//! ([`super::auth::admitted`]); with `server.admin_token` set, a browser is
//! asked for it by HTTP Basic authentication (any user name, the token as
//! the password).
//!
//! What it shows, all from figures the proxy keeps anyway:
//! - the share of hits, revalidations, stale answers and misses over the
//!   last 1, 5 and 15 minutes, requests per second, and both over time,
//!   from [`crate::metrics::history`] (the counters sampled once a second);
//! - body bytes served from the store against bytes that came from
//!   origins (what the cache saved);
//! - disk use against `cache.max_size`, the store's other totals and the
//!   audit log's bytes
//!   ([`store_figures`], the one place that reads [`StoreStats`]);
//! - the origins with the most requests ([`super::origin_figures::origins_json`],
//!   the same figures as `/stats` and `/metrics`): requests, hit ratio,
//!   bytes saved, last error, robots.txt state ([`robots_state`]) and
//!   Crawl-delay, each origin linking to its entries in the cache browser
//!   ([`super::browse`]);
//! - the last errors ([`crate::metrics::recent`]; refusals are not
//!   errors: [`crawlcache_policy::cache_status::CacheStatus::outcome_for`]), client connections
//!   against `server.max_connections`, and fleet health per engine.
//!
//! Rendered with maud: every value is escaped by the template (URLs,
//! hosts and messages are hostile input). The page is complete as served (numbers and tables rendered here); the
//! script refreshes them every two seconds from `/status.json` and draws
//! the charts (SVG). Values carry their raw number in `data-value`, for
//! scripts and tests.

use crate::proxy::ProxyState;
use crate::wire::body::ProxyBody;
use crawlcache_robots::snapshot::{Origin, RobotsStatus, State};
use crawlcache_store::StoreStats;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use maud::{html, Markup, DOCTYPE};
use serde::Serialize;
use serde_json::{json, Value};
use std::time::SystemTime;

/// The page's script, served as `/status.js`.
pub const SCRIPT: &str = include_str!("status.js");

/// The page's style sheet, served as `/status.css`.
pub const STYLE: &str = include_str!("status.css");

/// Errors listed on the page.
pub const ERRORS_SHOWN: usize = 20;

/// The windows of the outcome shares: (key, seconds).
pub const WINDOWS: [(&str, u64); 3] = [("1m", 60), ("5m", 300), ("15m", 900)];

/// Seconds per bar of the charts over time.
pub const BUCKET_SECONDS: u64 = 10;

/// `Content-Security-Policy` of the status page and the cache browser:
/// nothing but their own script, style and JSON, and forms sent to the
/// proxy itself (the browser's search and purge).
const CSP: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Whether `path` is one of the status page's.
pub fn is_status_path(path: &str) -> bool {
    matches!(path, "/" | "/status" | "/status.json" | "/status.js" | "/status.css")
}

/// The answer to `GET path` for a status path ([`is_status_path`]);
/// `None` for any other path.
pub fn respond(state: &ProxyState, path: &str) -> Option<Response<ProxyBody>> {
    let now = SystemTime::now();
    Some(match path {
        "/" | "/status" => {
            answer("text/html; charset=utf-8", page(&status_json(state, now)).into_bytes())
        }
        "/status.json" => {
            let mut body =
                serde_json::to_vec(&status_json(state, now)).unwrap_or_else(|_| b"{}".to_vec());
            body.push(b'\n');
            answer("application/json", body)
        }
        "/status.js" => answer("text/javascript; charset=utf-8", SCRIPT.as_bytes().to_vec()),
        "/status.css" => answer("text/css; charset=utf-8", STYLE.as_bytes().to_vec()),
        _ => return None,
    })
}

/// A `401` asking a browser for the admin token (HTTP Basic: any user
/// name, the token as the password), with `why` as the body.
pub fn unauthorized(why: &str) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(format!(
        "crawlcache: {why} (a browser: any user name, the token as the password)\n"
    )));
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        http::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"crawlcache admin\", charset=\"UTF-8\""),
    );
    resp
}

/// A `200` answer of the admin pages: `body` as `content_type`, not
/// stored, under the pages' strict `Content-Security-Policy`.
pub fn answer(content_type: &'static str, body: Vec<u8>) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(body));
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    // `same-origin`, not `no-referrer`: with no referrer a browser sends
    // `Origin: null` on the cache browser's purge form, which the admin
    // rules refuse as a foreign page; other sites still get no referrer.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    resp
}

/// The store's figures as the page shows them: the one place that reads
/// [`StoreStats`], so a change of the store's totals is adapted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StoreFigures {
    /// Bytes counted against the budget (`cache.max_size`).
    pub used_bytes: u64,
    /// The budget, `cache.max_size`.
    pub max_bytes: u64,
    /// Bytes of the distinct bodies stored (each body once, however many
    /// entries share it).
    pub distinct_body_bytes: u64,
    /// Bytes of the bodies as the entries reference them (a shared body
    /// once per entry); what the entries would take unshared.
    pub logical_body_bytes: u64,
    /// Entries (variants) in the index.
    pub entries: u64,
    /// Distinct bodies.
    pub bodies: u64,
    /// Bytes of the pack segments on disk.
    pub pack_bytes: u64,
    /// Entries evicted by the budget since start.
    pub evictions: u64,
}

/// [`StoreFigures`] of `s`. The budgeted figure is `budget_bytes` (bodies,
/// each counted once, and the entries' records: docs/SPEC.md section 3);
/// `bytes_stored` the distinct body bytes; `bytes_referenced` counts a
/// shared body once per entry.
pub fn store_figures(s: &StoreStats) -> StoreFigures {
    StoreFigures {
        used_bytes: s.budget_bytes,
        max_bytes: s.max_size,
        distinct_body_bytes: s.bytes_stored,
        logical_body_bytes: s.bytes_referenced,
        entries: s.entries,
        bodies: s.bodies,
        pack_bytes: s.pack_bytes,
        evictions: s.evictions,
    }
}

/// An origin's robots.txt as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RobotsState {
    /// `fresh`, `stale`, `expired` (the snapshot's window), `disallow-all`
    /// (rules unavailable: everything disallowed, RFC 9309 section
    /// 2.3.1.4), `back-off` (unavailable and a retry is scheduled),
    /// `unknown` (no snapshot yet) or `off` (`robots.mode = "off"`).
    pub state: &'static str,
    /// The snapshot's status: `fetched`, `absent`, `unavailable`.
    pub status: Option<&'static str>,
    /// Seconds since the snapshot was fetched or confirmed.
    pub age_seconds: Option<u64>,
    /// No retry before this (ms since the Unix epoch) after failed
    /// fetches, when that is still ahead.
    pub back_off_until_ms: Option<u64>,
    /// Consecutive failed fetches.
    pub failures: u32,
    /// The `Crawl-delay` in seconds for the configured agent (or `*`).
    pub crawl_delay: Option<f64>,
    /// Whether a fetch of it is in flight.
    pub refreshing: bool,
}

/// The robots.txt state of `origin` (an origin as [`Origin::from_url`]
/// reads it) at `now`, from the snapshot in force (never fetched from
/// here). The state's precedence: rules unavailable → `back-off` while a
/// retry is ahead, else `disallow-all`; otherwise the snapshot's window
/// (`stale` for both stale windows).
pub fn robots_state(state: &ProxyState, origin: &str, now: SystemTime) -> RobotsState {
    let mut out = RobotsState {
        state: "unknown",
        status: None,
        age_seconds: None,
        back_off_until_ms: None,
        failures: 0,
        crawl_delay: None,
        refreshing: false,
    };
    if state.config.robots.mode == crawlcache_robots::settings::RobotsMode::Off {
        out.state = "off";
        return out;
    }
    let Some(origin) = Origin::from_url(origin) else { return out };
    out.refreshing = state.robots.is_refreshing(&origin);
    let Some(rules) = state.robots.current(&origin) else { return out };
    let snap = &rules.snapshot;
    let windows = state.robots.windows(&origin);
    let retry_ahead = snap.next_retry.filter(|t| *t > now);
    out.status = Some(snap.status.as_str());
    out.age_seconds = Some(snap.age(now).as_secs());
    out.back_off_until_ms = retry_ahead.map(crate::metrics::history::unix_ms);
    out.failures = snap.failures;
    let agent = state.config.robots.agent.trim();
    out.crawl_delay = rules.robots.crawl_delay(if agent.is_empty() { "*" } else { agent });
    out.state = if snap.status == RobotsStatus::Unavailable {
        if retry_ahead.is_some() {
            "back-off"
        } else {
            "disallow-all"
        }
    } else {
        match snap.state(&windows, now) {
            State::Fresh => "fresh",
            State::StaleUsable | State::StaleDegraded => "stale",
            State::Expired => "expired",
        }
    };
    out
}

/// Client connections against `server.max_connections`, and the
/// open-file limit (also in `/stats` as `"connections"`).
pub fn connections_json(state: &ProxyState) -> Value {
    let o = &state.overload;
    json!({
        "open": state.conns.count(),
        "max": o.max_connections,
        "beyond_limit_now": o.overflow_now(),
        "beyond_limit_slots": o.overflow_slots,
        "refused": crate::metrics::Counter::get(&state.metrics.overload_refused),
        "open_file_limit": o.file_limit,
    })
}

/// HTTP/2 on both sides (also in `/stats` as `"http2"`): the share of
/// requests clients sent over HTTP/2, intercepted connections served over
/// it, and the HTTP/2 connections open to origins, by origin.
pub fn http2_json(state: &ProxyState) -> Value {
    let g = crate::metrics::Counter::get;
    let (requests, h2) = (g(&state.metrics.requests), g(&state.metrics.client_h2_requests));
    let origins: Vec<Value> = state
        .upstream
        .h2_connections()
        .into_iter()
        .map(|(origin, open)| json!({ "origin": origin, "open": open }))
        .collect();
    json!({
        "client_share": if requests == 0 { 0.0 } else { h2 as f64 / requests as f64 },
        "client_requests": h2,
        "client_connections": g(&state.metrics.client_h2_connections),
        "origin_connections_open": origins.len(),
        "origin_connections_opened": crate::upstream::h2::CONNECTIONS_OPENED.load(std::sync::atomic::Ordering::Relaxed),
        "origins": origins,
    })
}

/// The outcome shares over the last 1, 5 and 15 minutes (also in `/stats`
/// as `"recent"`), keyed `1m`, `5m`, `15m`; `null` before the first sample.
pub fn windows_json(state: &ProxyState) -> Value {
    let samples = state.metrics.history.samples();
    let mut m = serde_json::Map::new();
    for (key, secs) in WINDOWS {
        m.insert(
            key.into(),
            serde_json::to_value(crate::metrics::history::window_of(&samples, secs))
                .unwrap_or(Value::Null),
        );
    }
    Value::Object(m)
}

/// Everything the page shows, at `now` (the body of `/status.json`).
pub fn status_json(state: &ProxyState, now: SystemTime) -> Value {
    let m = &state.metrics;
    let g = crate::metrics::Counter::get;
    let totals = json!({
        "requests": g(&m.requests),
        "hits": g(&m.hits),
        "revalidated": g(&m.revalidated),
        "stale": g(&m.stale_served),
        "misses": g(&m.misses),
        "passthrough": g(&m.passthrough),
        "refused": g(&m.refused),
        "errors": g(&m.errors),
        "bytes_from_cache": g(&m.bytes_from_cache),
        "bytes_from_origin": g(&m.bytes_from_origin),
    });
    let (from_cache, from_origin) = (g(&m.bytes_from_cache), g(&m.bytes_from_origin));
    let saved = if from_cache + from_origin == 0 {
        0.0
    } else {
        from_cache as f64 / (from_cache + from_origin) as f64
    };
    let store = store_figures(&state.store.stats());
    let used_ratio =
        if store.max_bytes == 0 { 0.0 } else { store.used_bytes as f64 / store.max_bytes as f64 };
    let samples = state.metrics.history.samples();
    let buckets = crate::metrics::history::buckets_of(&samples, BUCKET_SECONDS, 900);
    let mut origins = super::origin_figures::origins_json(state);
    if let Some(top) = origins["top"].as_array_mut() {
        for o in top {
            let robots = robots_state(state, o["origin"].as_str().unwrap_or(""), now);
            o["robots"] = serde_json::to_value(robots).unwrap_or(Value::Null);
        }
    }
    let recent = crate::metrics::recent::RECENT.newest_first();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "now_ms": crate::metrics::history::unix_ms(now),
        "listen": state.local_addr.to_string(),
        "offline": state.offline,
        "robots_mode": format!("{:?}", state.config.robots.mode).to_ascii_lowercase(),
        "totals": totals,
        "saved_ratio": saved,
        "windows": windows_json(state),
        "series": { "bucket_seconds": BUCKET_SECONDS, "points": buckets },
        "store": store,
        "store_used_ratio": used_ratio,
        "origins": origins,
        "errors": { "total": crate::metrics::recent::RECENT.total(), "recent": recent.into_iter().take(ERRORS_SHOWN).collect::<Vec<_>>() },
        "connections": connections_json(state),
        "http2": http2_json(state),
        "fleet": state.fleet.as_ref().map(|f| f.stats_json()),
        "audit": { "bytes": crate::audit::disk_bytes(state.audit.dir()) },
    })
}

/// `value` at the dotted `path` of `v` (`totals.hits`, `windows.1m.hit_ratio`).
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// How a value is written on the page (the script writes it the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A count with thousands separators: `12,345`.
    Int,
    /// Bytes in binary units ([`crawlcache_base::units::format_bytes`]): `512 B`,
    /// `1.5 KiB`, `12.3 MiB`.
    Bytes,
    /// A share as a percentage with one decimal: `85.2 %`.
    Percent,
    /// A rate with one decimal: `12.3/s`.
    Rate,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Int => "int",
            Format::Bytes => "bytes",
            Format::Percent => "pct",
            Format::Rate => "rate",
        }
    }

    /// `v` written in this format (`–` for a missing value).
    pub fn write(self, v: &Value) -> String {
        let Some(x) = v.as_f64() else { return "–".into() };
        match self {
            Format::Int => thousands(x.round() as u64),
            Format::Bytes => crawlcache_base::units::format_bytes(x.max(0.0) as u64),
            Format::Percent => format!("{:.1} %", x * 100.0),
            Format::Rate => format!("{x:.1}/s"),
        }
    }
}

/// `n` with a comma every three digits.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A value element: its formatted text, the raw number in `data-value`,
/// and the path and format the script refreshes it by.
fn value(v: &Value, path: &str, f: Format) -> Markup {
    let raw = at(v, path);
    let raw_text = if raw.is_number() { raw.to_string() } else { String::new() };
    html! { span.v data-k=(path) data-f=(f.name()) data-value=(raw_text) { (f.write(raw)) } }
}

/// A value element the script does not refresh (a table cell's).
fn fixed(raw: &Value, f: Format) -> Markup {
    let raw_text = if raw.is_number() { raw.to_string() } else { String::new() };
    html! { span.v data-value=(raw_text) { (f.write(raw)) } }
}

/// A figure in a card: label and value.
fn figure(v: &Value, label: &str, path: &str, f: Format) -> Markup {
    html! { div.fig { span.lbl { (label) } (value(v, path, f)) } }
}

/// The head and header shared by the status page and the cache browser:
/// `title`, the proxy's address, and links between the pages.
pub fn frame(title: &str, listen: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · crawlcache " (listen) }
                link rel="stylesheet" href="/status.css";
            }
            body {
                header {
                    h1 { "crawlcache " span.sub { (listen) } }
                    nav { a href="/status" { "status" } " · " a href="/cache/browse" { "cache browser" } }
                }
                (body)
            }
        }
    }
}

/// The page, rendered from `v` (a [`status_json`] value).
pub fn page(v: &Value) -> String {
    let listen = v["listen"].as_str().unwrap_or("");
    let online = if v["offline"].as_bool() == Some(true) { "offline" } else { "online" };
    let body = html! {
        p.meta {
            "version " (v["version"].as_str().unwrap_or("")) " · " (online) " · robots " (v["robots_mode"].as_str().unwrap_or(""))
            " · " span #updated { "rendered by the server" }
        }
        main {
            section.card.wide #outcomes {
                h2 { "Cache outcomes" }
                div.windows {
                    @for (key, _) in WINDOWS {
                        div.window {
                            h3 { "last " (window_name(key)) }
                            svg.bar id=(format!("bar-{key}")) viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label=(format!("outcome shares, last {}", window_name(key))) {}
                            div.legend {
                                (legend("hit", "hits", v, &format!("windows.{key}.hit_ratio")))
                                (legend("reval", "revalidated", v, &format!("windows.{key}.revalidated_ratio")))
                                (legend("stale", "stale", v, &format!("windows.{key}.stale_ratio")))
                                (legend("miss", "misses", v, &format!("windows.{key}.miss_ratio")))
                                span.rate { (value(v, &format!("windows.{key}.requests_per_second"), Format::Rate)) }
                            }
                        }
                    }
                }
                noscript { p { "The charts need JavaScript; the figures above and below are as of loading." } }
            }
            section.card.chart-card {
                h2 { "Requests per second " span.sub { "up to 15 min" } }
                svg.chart #chart-rps viewBox="0 0 300 100" preserveAspectRatio="none" role="img" aria-label="requests per second over 15 minutes" {}
                p.axis #axis-rps {}
            }
            section.card.chart-card {
                h2 { "Outcomes over time " span.sub { "up to 15 min" } }
                svg.chart #chart-outcomes viewBox="0 0 300 100" preserveAspectRatio="none" role="img" aria-label="outcome shares over 15 minutes" {}
                p.axis { "10 s per bar · " span.key.hit { "hit" } " " span.key.reval { "revalidated" } " " span.key.stale { "stale" } " " span.key.miss { "miss" } " " span.key.other { "other" } }
            }
            section.card #totals {
                h2 { "Requests since start" }
                div.figs {
                    (figure(v, "requests", "totals.requests", Format::Int))
                    (figure(v, "hits", "totals.hits", Format::Int))
                    (figure(v, "revalidated", "totals.revalidated", Format::Int))
                    (figure(v, "stale", "totals.stale", Format::Int))
                    (figure(v, "misses", "totals.misses", Format::Int))
                    (figure(v, "passed through", "totals.passthrough", Format::Int))
                    (figure(v, "refused (by policy)", "totals.refused", Format::Int))
                    (figure(v, "errors (failures)", "totals.errors", Format::Int))
                }
            }
            section.card #bandwidth {
                h2 { "Bytes served" }
                div.figs {
                    (figure(v, "from cache (saved)", "totals.bytes_from_cache", Format::Bytes))
                    (figure(v, "from origins", "totals.bytes_from_origin", Format::Bytes))
                    (figure(v, "share saved", "saved_ratio", Format::Percent))
                }
                svg.chart.small #chart-bytes viewBox="0 0 300 60" preserveAspectRatio="none" role="img" aria-label="bytes from cache and from origins over 15 minutes" {}
                p.axis { "10 s per bar · " span.key.cache { "from cache" } " " span.key.origin { "from origins" } }
            }
            (disk_card(v))
            section.card #connections {
                h2 { "Client connections" }
                div.figs {
                    (figure(v, "open", "connections.open", Format::Int))
                    (figure(v, "server.max_connections", "connections.max", Format::Int))
                    (figure(v, "refused (503)", "connections.refused", Format::Int))
                    (figure(v, "open-file limit", "connections.open_file_limit.soft", Format::Int))
                }
            }
            section.card #http2 {
                h2 { "HTTP/2" }
                div.figs {
                    (figure(v, "of requests", "http2.client_share", Format::Percent))
                    (figure(v, "client connections since start", "http2.client_connections", Format::Int))
                    (figure(v, "origin connections open", "http2.origin_connections_open", Format::Int))
                }
                ul.h2-origins #h2-origins-list {
                    @for o in v["http2"]["origins"].as_array().into_iter().flatten().take(ERRORS_SHOWN) {
                        li { (o["origin"].as_str().unwrap_or("")) " · " (o["open"].as_u64().unwrap_or(0)) " open" }
                    }
                }
            }
            (origins_card(v))
            section.card.wide #errors {
                h2 { "Recent errors " span.sub { (value(v, "errors.total", Format::Int)) " since start · refusals are not errors" } }
                ul.errors #errors-list { (error_items(v)) }
            }
            (fleet_card(v))
        }
        script src="/status.js" {}
    };
    frame("status", listen, body).into_string()
}

fn disk_card(v: &Value) -> Markup {
    html! {
        section.card #disk {
            h2 { "Disk" }
            svg.bar #bar-disk viewBox="0 0 100 8" preserveAspectRatio="none" role="img" aria-label="disk use against cache.max_size" {}
            div.figs {
                (figure(v, "used", "store.used_bytes", Format::Bytes))
                (figure(v, "of cache.max_size", "store.max_bytes", Format::Bytes))
                (figure(v, "share used", "store_used_ratio", Format::Percent))
                (figure(v, "distinct body bytes", "store.distinct_body_bytes", Format::Bytes))
                (figure(v, "body bytes as referenced", "store.logical_body_bytes", Format::Bytes))
                (figure(v, "entries", "store.entries", Format::Int))
                (figure(v, "bodies", "store.bodies", Format::Int))
                (figure(v, "pack segments", "store.pack_bytes", Format::Bytes))
                (figure(v, "evictions", "store.evictions", Format::Int))
                (figure(v, "audit log", "audit.bytes", Format::Bytes))
            }
        }
    }
}

fn window_name(key: &str) -> &'static str {
    match key {
        "1m" => "minute",
        "5m" => "5 minutes",
        _ => "15 minutes",
    }
}

fn legend(class: &str, label: &str, v: &Value, path: &str) -> Markup {
    html! { span class=(format!("key {class}")) { (label) " " (value(v, path, Format::Percent)) } }
}

/// The columns of the origins table: (heading, class), as the script
/// builds its rows too; on a narrow screen each row is a card and the
/// heading shows beside its cell (`data-label`).
const ORIGIN_COLUMNS: [(&str, &str); 7] = [
    ("origin", "origin"),
    ("requests", "num"),
    ("hit ratio", "num"),
    ("bytes saved", "num"),
    ("robots.txt", "robots"),
    ("Crawl-delay", "num"),
    ("last error", "err"),
];

fn origins_card(v: &Value) -> Markup {
    let rows = v["origins"]["top"].as_array().cloned().unwrap_or_default();
    html! {
        section.card.wide #origins {
            h2 { "Origins " span.sub #origins-note {} }
            table.stack {
                thead { tr { @for (h, class) in ORIGIN_COLUMNS { th class=(class) { (h) } } } }
                tbody #origins-rows {
                    @if rows.is_empty() {
                        tr { td.none colspan="7" { "no requests yet" } }
                    }
                    @for o in &rows { (origin_row(o)) }
                }
            }
        }
    }
}

/// One row of the origins table.
fn origin_row(o: &Value) -> Markup {
    let r = &o["robots"];
    let state = r["state"].as_str().unwrap_or("unknown");
    let origin = o["origin"].as_str().unwrap_or("");
    let host = origin.split_once("://").map_or(origin, |(_, h)| h);
    let age = r["age_seconds"].as_u64().map(duration);
    let delay = r["crawl_delay"].as_f64().map(|d| format!("{d} s")).unwrap_or_else(|| "–".into());
    let last_error = match (o["last_error"]["status"].as_u64(), o["last_error"]["at_ms"].as_u64()) {
        (Some(status), Some(ms)) => {
            format!(
                "{status} at {}",
                crawlcache_base::time::format_rfc3339(
                    SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms)
                )
            )
        }
        _ => "–".into(),
    };
    html! {
        tr {
            td.origin data-label="origin" { a href=(format!("/cache/browse?host={}", query_escape(host))) { (origin) } }
            td.num data-label="requests" { (fixed(&o["requests"], Format::Int)) }
            td.num data-label="hit ratio" { (fixed(&o["hit_ratio"], Format::Percent)) }
            td.num data-label="bytes saved" { (fixed(&o["bytes_from_cache"], Format::Bytes)) }
            td.robots data-label="robots.txt" {
                span class=(format!("state s-{state}")) { (state) }
                @if let Some(a) = age { " " span.note { (a) } }
                @if r["back_off_until_ms"].is_number() { " " span.note { "retry scheduled" } }
            }
            td.num data-label="Crawl-delay" { (delay) }
            td.err data-label="last error" { (last_error) }
        }
    }
}

/// `s` percent-encoded for a query value (all but unreserved characters).
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A duration in seconds, shortly: `42 s`, `5 min`, `3 h 20 min`, `2 d 4 h`.
pub fn duration(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        s => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The items of the errors list.
fn error_items(v: &Value) -> Markup {
    let items = v["errors"]["recent"].as_array().cloned().unwrap_or_default();
    html! {
        @if items.is_empty() { li.none { "none" } }
        @for e in &items {
            li {
                time { (e["at_ms"].as_u64().map(|ms| crawlcache_base::time::format_rfc3339(SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms))).unwrap_or_default()) }
                " " span.what { (e["what"].as_str().unwrap_or("")) }
                " " span.msg { (e["message"].as_str().unwrap_or("")) }
            }
        }
    }
}

/// The fleet card (hidden on a single node).
fn fleet_card(v: &Value) -> Markup {
    let f = &v["fleet"];
    let bucket = match f["bucket"].as_str() {
        Some(b) => format!("bucket {b}"),
        None => "bucket".into(),
    };
    let rows: Vec<(String, &Value, &Value)> = if f.is_null() {
        Vec::new()
    } else {
        vec![
            ("redis".into(), &f["redis_up"], &f["redis_errors"]),
            (bucket, &f["bucket_up"], &f["bucket_errors"]),
        ]
    };
    html! {
        section.card.wide #fleet hidden[f.is_null()] {
            h2 { "Fleet" }
            table {
                thead { tr { th { "engine" } th { "state" } th.num { "errors" } } }
                tbody #fleet-rows {
                    @for (name, up, errors) in &rows {
                        @let state = match up.as_bool() { Some(true) => "up", Some(false) => "down", None => "not configured" };
                        tr {
                            td { (name) }
                            td { span class=(format!("state s-{}", state.replace(' ', "-"))) { (state) } }
                            td.num { (errors.as_u64().map(thousands).unwrap_or_else(|| "–".into())) }
                        }
                    }
                }
            }
            p.axis #fleet-counters {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_written_as_the_script_writes_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(Format::Bytes.write(&json!(512)), "512 B");
        assert_eq!(Format::Bytes.write(&json!(1536)), "1.5 KiB");
        assert_eq!(Format::Bytes.write(&json!(10u64 << 30)), "10.0 GiB");
        // The one formatter of the crate (and the script's rounding).
        assert_eq!(Format::Bytes.write(&json!(1024 * 1024 - 1)), "1.0 MiB");
        assert_eq!(Format::Percent.write(&json!(0.8523)), "85.2 %");
        assert_eq!(Format::Rate.write(&json!(12.34)), "12.3/s");
        assert_eq!(Format::Int.write(&Value::Null), "–");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(3 * 3600 + 20 * 60), "3 h 20 min");
    }

    #[test]
    fn text_from_the_network_is_escaped_by_the_template() {
        let v = json!({
            "listen": "127.0.0.1:1",
            "origins": { "top": [ { "origin": "http://<b>.test", "requests": 3, "hit_ratio": 0.5, "robots": { "state": "fresh" } } ] },
            "errors": { "total": 1, "recent": [ { "at_ms": 0, "what": "502", "message": "GET http://a.test/<img src=x> \"'" } ] },
            "fleet": null,
        });
        let page = page(&v);
        assert!(
            !page.contains("<b>.test") && page.contains("http://&lt;b&gt;.test"),
            "origin escaped"
        );
        assert!(
            !page.contains("<img") && page.contains("&lt;img src=x&gt; &quot;'"),
            "error message escaped"
        );
        assert!(
            page.contains("href=\"/cache/browse?host=%3Cb%3E.test\""),
            "the origin links to its entries"
        );
        assert!(
            page.contains("data-k=\"totals.hits\"") && page.contains("data-k=\"totals.errors\"")
        );
        assert!(
            !page.contains("src=\"http") && !page.contains("href=\"http"),
            "nothing loaded from elsewhere"
        );
        assert!(
            !page.contains("style=") && !page.contains("<script>"),
            "no inline style or script (CSP)"
        );
    }

    #[test]
    fn store_figures_map_the_store_totals() {
        let s = StoreStats {
            entries: 3,
            bodies: 2,
            bytes_stored: 1000,
            budget_bytes: 1200,
            bytes_referenced: 1500,
            max_size: 4000,
            evictions: 1,
            pack_bytes: 77,
            filters_ready: true,
        };
        let f = store_figures(&s);
        assert_eq!(
            (f.used_bytes, f.max_bytes, f.distinct_body_bytes, f.logical_body_bytes),
            (1200, 4000, 1000, 1500)
        );
        assert_eq!((f.entries, f.bodies, f.pack_bytes, f.evictions), (3, 2, 77, 1));
    }
}
