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
//! - the origins with the most requests ([`crate::metrics::origins`]) with
//!   their robots.txt state ([`robots_state`]) and Crawl-delay;
//! - the last errors ([`crate::metrics::recent`]), client connections
//!   against `server.max_connections`, and fleet health per engine.
//!
//! The page is complete as served (numbers and tables rendered here); the
//! script refreshes them every two seconds from `/status.json` and draws
//! the charts (SVG). Values carry their raw number in `data-value`, for
//! scripts and tests.

use crate::proxy::ProxyState;
use crate::robots::snapshot::{Origin, RobotsStatus, State};
use crate::store::StoreStats;
use crate::wire::body::ProxyBody;
use http::header::HeaderValue;
use http::{Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::SystemTime;

/// The page's script, served as `/status.js`.
pub const SCRIPT: &str = include_str!("status.js");

/// The page's style sheet, served as `/status.css`.
pub const STYLE: &str = include_str!("status.css");

/// Origins listed on the page.
pub const TOP_ORIGINS: usize = 20;

/// Errors listed on the page.
pub const ERRORS_SHOWN: usize = 20;

/// The windows of the outcome shares: (key, seconds).
pub const WINDOWS: [(&str, u64); 3] = [("1m", 60), ("5m", 300), ("15m", 900)];

/// Seconds per bar of the charts over time.
pub const BUCKET_SECONDS: u64 = 10;

/// `Content-Security-Policy` of the page: nothing but its own script,
/// style and JSON.
const CSP: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether `path` is one of the status page's.
pub fn is_status_path(path: &str) -> bool {
    matches!(path, "/" | "/status" | "/status.json" | "/status.js" | "/status.css")
}

/// The answer to `GET path` for a status path ([`is_status_path`]);
/// `None` for any other path.
pub fn respond(state: &ProxyState, path: &str) -> Option<Response<ProxyBody>> {
    let now = SystemTime::now();
    Some(match path {
        "/" | "/status" => answer("text/html; charset=utf-8", page(&status_json(state, now)).into_bytes()),
        "/status.json" => {
            let mut body = serde_json::to_vec(&status_json(state, now)).unwrap_or_else(|_| b"{}".to_vec());
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
    let mut resp = Response::new(ProxyBody::full(format!("crawlcache: {why} (a browser: any user name, the token as the password)\n")));
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"crawlcache admin\", charset=\"UTF-8\""));
    resp
}

fn answer(content_type: &'static str, body: Vec<u8>) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(body));
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
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

/// [`StoreFigures`] of `s`. `bytes_stored` is both the budgeted figure and
/// the distinct body bytes (the budget counts each body once, docs/SPEC.md
/// section 3); `bytes_referenced` counts a shared body once per entry.
pub fn store_figures(s: &StoreStats) -> StoreFigures {
    StoreFigures {
        used_bytes: s.bytes_stored,
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
    let mut out = RobotsState { state: "unknown", status: None, age_seconds: None, back_off_until_ms: None, failures: 0, crawl_delay: None, refreshing: false };
    if state.config.robots.mode == crate::robots::settings::RobotsMode::Off {
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

/// The outcome shares over the last 1, 5 and 15 minutes (also in `/stats`
/// as `"recent"`), keyed `1m`, `5m`, `15m`; `null` before the first sample.
pub fn windows_json(state: &ProxyState) -> Value {
    let samples = state.metrics.history.samples();
    let mut m = serde_json::Map::new();
    for (key, secs) in WINDOWS {
        m.insert(key.into(), serde_json::to_value(crate::metrics::history::window_of(&samples, secs)).unwrap_or(Value::Null));
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
        "bytes_from_cache": g(&m.bytes_from_cache),
        "bytes_from_origin": g(&m.bytes_from_origin),
    });
    let (from_cache, from_origin) = (g(&m.bytes_from_cache), g(&m.bytes_from_origin));
    let saved = if from_cache + from_origin == 0 { 0.0 } else { from_cache as f64 / (from_cache + from_origin) as f64 };
    let store = store_figures(&state.store.stats());
    let used_ratio = if store.max_bytes == 0 { 0.0 } else { store.used_bytes as f64 / store.max_bytes as f64 };
    let samples = state.metrics.history.samples();
    let buckets = crate::metrics::history::buckets_of(&samples, BUCKET_SECONDS, 900);
    let origins: Vec<Value> = m
        .origins
        .top(TOP_ORIGINS)
        .into_iter()
        .map(|(origin, requests)| json!({ "origin": origin, "requests": requests, "robots": robots_state(state, &origin, now) }))
        .collect();
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
        "origins": { "estimate": m.origins.is_estimate(), "others": m.origins.others(), "top": origins },
        "errors": { "total": crate::metrics::recent::RECENT.total(), "recent": recent.into_iter().take(ERRORS_SHOWN).collect::<Vec<_>>() },
        "connections": connections_json(state),
        "fleet": state.fleet.as_ref().map(|f| f.stats_json()),
        "audit": { "bytes": crate::audit::disk_bytes(state.audit.dir()) },
    })
}

/// `value` at the dotted `path` of `v` (`totals.hits`, `windows.1m.hit_ratio`).
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, k| &v[k])
}

/// HTML text: `&`, `<`, `>`, `"` and `'` escaped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// How a value is written on the page (the script writes it the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A count with thousands separators: `12,345`.
    Int,
    /// Bytes in binary units: `512 B`, `1.5 KiB`, `12.3 MiB`.
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
            Format::Bytes => bytes(x.max(0.0) as u64),
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

/// `n` bytes in binary units, one decimal from KiB on.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut x = n as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// A value element: its formatted text, the raw number in `data-value`,
/// and the path and format the script refreshes it by.
fn value(v: &Value, path: &str, f: Format) -> String {
    let raw = at(v, path);
    let raw_text = if raw.is_number() { raw.to_string() } else { String::new() };
    format!("<span class=\"v\" data-k=\"{path}\" data-f=\"{}\" data-value=\"{}\">{}</span>", f.name(), escape(&raw_text), escape(&f.write(raw)))
}

/// A figure in a card: label and value.
fn figure(v: &Value, label: &str, path: &str, f: Format) -> String {
    format!("<div class=\"fig\"><span class=\"lbl\">{}</span>{}</div>", escape(label), value(v, path, f))
}

/// The page, rendered from `v` (a [`status_json`] value).
pub fn page(v: &Value) -> String {
    let mut h = String::with_capacity(16 * 1024);
    let listen = escape(v["listen"].as_str().unwrap_or(""));
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>crawlcache {listen}</title><link rel=\"stylesheet\" href=\"/status.css\"></head>\n<body>\n\
         <header><h1>crawlcache <span class=\"sub\">{listen}</span></h1>\
         <p class=\"meta\">version {} · {} · robots {} · <span id=\"updated\">rendered by the server</span></p></header>\n<main>\n",
        escape(v["version"].as_str().unwrap_or("")),
        if v["offline"].as_bool() == Some(true) { "offline" } else { "online" },
        escape(v["robots_mode"].as_str().unwrap_or("")),
    );
    // Outcomes.
    h.push_str("<section class=\"card wide\" id=\"outcomes\"><h2>Cache outcomes</h2><div class=\"windows\">");
    for (key, _) in WINDOWS {
        let _ = write!(
            h,
            "<div class=\"window\"><h3>last {}</h3><svg class=\"bar\" id=\"bar-{key}\" viewBox=\"0 0 100 8\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"outcome shares, last {}\"></svg>\
             <div class=\"legend\">{}{}{}{}<span class=\"rate\">{}</span></div></div>",
            window_name(key),
            window_name(key),
            legend("hit", "hits", v, &format!("windows.{key}.hit_ratio")),
            legend("reval", "revalidated", v, &format!("windows.{key}.revalidated_ratio")),
            legend("stale", "stale", v, &format!("windows.{key}.stale_ratio")),
            legend("miss", "misses", v, &format!("windows.{key}.miss_ratio")),
            value(v, &format!("windows.{key}.requests_per_second"), Format::Rate),
        );
    }
    h.push_str("</div><noscript><p>The charts need JavaScript; the figures above and below are as of loading.</p></noscript></section>\n");
    // Charts over time.
    h.push_str(
        "<section class=\"card\"><h2>Requests per second <span class=\"sub\">15 min</span></h2><svg class=\"chart\" id=\"chart-rps\" viewBox=\"0 0 300 100\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"requests per second over 15 minutes\"></svg><p class=\"axis\" id=\"axis-rps\"></p></section>\n\
         <section class=\"card\"><h2>Outcomes over time <span class=\"sub\">15 min</span></h2><svg class=\"chart\" id=\"chart-outcomes\" viewBox=\"0 0 300 100\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"outcome shares over 15 minutes\"></svg><p class=\"axis\">10 s per bar · <span class=\"key hit\">hit</span> <span class=\"key reval\">revalidated</span> <span class=\"key stale\">stale</span> <span class=\"key miss\">miss</span> <span class=\"key other\">other</span></p></section>\n",
    );
    // Totals.
    let _ = writeln!(
        h,
        "<section class=\"card\" id=\"totals\"><h2>Requests since start</h2><div class=\"figs\">{}{}{}{}{}{}{}</div></section>",
        figure(v, "requests", "totals.requests", Format::Int),
        figure(v, "hits", "totals.hits", Format::Int),
        figure(v, "revalidated", "totals.revalidated", Format::Int),
        figure(v, "stale", "totals.stale", Format::Int),
        figure(v, "misses", "totals.misses", Format::Int),
        figure(v, "passed through", "totals.passthrough", Format::Int),
        figure(v, "refused", "totals.refused", Format::Int),
    );
    // Bandwidth.
    let _ = writeln!(
        h,
        "<section class=\"card\" id=\"bandwidth\"><h2>Bytes served</h2><div class=\"figs\">{}{}{}</div>\
         <svg class=\"chart small\" id=\"chart-bytes\" viewBox=\"0 0 300 60\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"bytes from cache and from origins over 15 minutes\"></svg>\
         <p class=\"axis\">10 s per bar · <span class=\"key cache\">from cache</span> <span class=\"key origin\">from origins</span></p></section>",
        figure(v, "from cache (saved)", "totals.bytes_from_cache", Format::Bytes),
        figure(v, "from origins", "totals.bytes_from_origin", Format::Bytes),
        figure(v, "share saved", "saved_ratio", Format::Percent),
    );
    // Disk.
    let _ = writeln!(
        h,
        "<section class=\"card\" id=\"disk\"><h2>Disk</h2><svg class=\"bar\" id=\"bar-disk\" viewBox=\"0 0 100 8\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"disk use against cache.max_size\"></svg>\
         <div class=\"figs\">{}{}{}{}{}{}{}{}{}{}</div></section>",
        figure(v, "used", "store.used_bytes", Format::Bytes),
        figure(v, "of cache.max_size", "store.max_bytes", Format::Bytes),
        figure(v, "share used", "store_used_ratio", Format::Percent),
        figure(v, "distinct body bytes", "store.distinct_body_bytes", Format::Bytes),
        figure(v, "body bytes as referenced", "store.logical_body_bytes", Format::Bytes),
        figure(v, "entries", "store.entries", Format::Int),
        figure(v, "bodies", "store.bodies", Format::Int),
        figure(v, "pack segments", "store.pack_bytes", Format::Bytes),
        figure(v, "evictions", "store.evictions", Format::Int),
        figure(v, "audit log", "audit.bytes", Format::Bytes),
    );
    // Connections.
    let _ = writeln!(
        h,
        "<section class=\"card\" id=\"connections\"><h2>Client connections</h2><div class=\"figs\">{}{}{}{}</div></section>",
        figure(v, "open", "connections.open", Format::Int),
        figure(v, "server.max_connections", "connections.max", Format::Int),
        figure(v, "refused (503)", "connections.refused", Format::Int),
        figure(v, "open-file limit", "connections.open_file_limit.soft", Format::Int),
    );
    // Origins.
    h.push_str("<section class=\"card wide\" id=\"origins\"><h2>Top origins <span class=\"sub\" id=\"origins-note\"></span></h2><div class=\"scroll\"><table><thead><tr><th>origin</th><th class=\"num\">requests</th><th>robots.txt</th><th class=\"num\">age</th><th class=\"num\">Crawl-delay</th></tr></thead><tbody id=\"origins-rows\">");
    h.push_str(&origin_rows(v));
    h.push_str("</tbody></table></div></section>\n");
    // Errors.
    let _ = write!(
        h,
        "<section class=\"card wide\" id=\"errors\"><h2>Recent errors <span class=\"sub\">{} since start</span></h2><ul class=\"errors\" id=\"errors-list\">",
        value(v, "errors.total", Format::Int)
    );
    h.push_str(&error_items(v));
    h.push_str("</ul></section>\n");
    // Fleet.
    let _ = write!(h, "<section class=\"card wide\" id=\"fleet\"{}><h2>Fleet</h2><div class=\"scroll\"><table><thead><tr><th>engine</th><th>state</th><th class=\"num\">errors</th></tr></thead><tbody id=\"fleet-rows\">", if v["fleet"].is_null() { " hidden" } else { "" });
    h.push_str(&fleet_rows(v));
    h.push_str("</tbody></table></div><p class=\"axis\" id=\"fleet-counters\"></p></section>\n");
    h.push_str("</main>\n<script src=\"/status.js\"></script>\n</body></html>\n");
    h
}

fn window_name(key: &str) -> &'static str {
    match key {
        "1m" => "minute",
        "5m" => "5 minutes",
        _ => "15 minutes",
    }
}

fn legend(class: &str, label: &str, v: &Value, path: &str) -> String {
    format!("<span class=\"key {class}\">{label} {}</span>", value(v, path, Format::Percent))
}

/// The rows of the origins table.
fn origin_rows(v: &Value) -> String {
    let mut h = String::new();
    let rows = v["origins"]["top"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return "<tr><td colspan=\"5\" class=\"none\">no requests yet</td></tr>".into();
    }
    for o in rows {
        let r = &o["robots"];
        let state = r["state"].as_str().unwrap_or("unknown");
        let back_off = if r["back_off_until_ms"].is_number() { " <span class=\"note\">retry scheduled</span>" } else { "" };
        let age = r["age_seconds"].as_u64().map(duration).unwrap_or_else(|| "–".into());
        let delay = r["crawl_delay"].as_f64().map(|d| format!("{d} s")).unwrap_or_else(|| "–".into());
        let _ = write!(
            h,
            "<tr><td class=\"origin\">{}</td><td class=\"num\">{}</td><td><span class=\"state s-{}\">{}</span>{back_off}</td><td class=\"num\">{age}</td><td class=\"num\">{delay}</td></tr>",
            escape(o["origin"].as_str().unwrap_or("")),
            value(&o, "requests", Format::Int),
            escape(state),
            escape(state),
        );
    }
    h
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
fn error_items(v: &Value) -> String {
    let items = v["errors"]["recent"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return "<li class=\"none\">none</li>".into();
    }
    let mut h = String::new();
    for e in items {
        let at = e["at_ms"].as_u64().map(|ms| crate::audit::format_rfc3339(SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms))).unwrap_or_default();
        let _ = write!(
            h,
            "<li><time>{}</time> <span class=\"what\">{}</span> <span class=\"msg\">{}</span></li>",
            escape(&at),
            escape(e["what"].as_str().unwrap_or("")),
            escape(e["message"].as_str().unwrap_or(""))
        );
    }
    h
}

/// The rows of the fleet table (empty on a single node).
fn fleet_rows(v: &Value) -> String {
    let f = &v["fleet"];
    if f.is_null() {
        return String::new();
    }
    let mut h = String::new();
    let row = |name: &str, up: &Value, errors: &Value| {
        let state = match up.as_bool() {
            Some(true) => "up",
            Some(false) => "down",
            None => "not configured",
        };
        format!(
            "<tr><td>{}</td><td><span class=\"state s-{}\">{state}</span></td><td class=\"num\">{}</td></tr>",
            escape(name),
            state.replace(' ', "-"),
            errors.as_u64().map(thousands).unwrap_or_else(|| "–".into())
        )
    };
    h.push_str(&row("redis", &f["redis_up"], &f["redis_errors"]));
    let bucket = match f["bucket"].as_str() {
        Some(b) => format!("bucket {b}"),
        None => "bucket".into(),
    };
    h.push_str(&row(&bucket, &f["bucket_up"], &f["bucket_errors"]));
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_written_as_the_script_writes_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(10 << 30), "10.0 GiB");
        assert_eq!(Format::Percent.write(&json!(0.8523)), "85.2 %");
        assert_eq!(Format::Rate.write(&json!(12.34)), "12.3/s");
        assert_eq!(Format::Int.write(&Value::Null), "–");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(3 * 3600 + 20 * 60), "3 h 20 min");
    }

    #[test]
    fn text_from_the_network_is_escaped() {
        assert_eq!(escape("<script>\"&'"), "&lt;script&gt;&quot;&amp;&#39;");
        let v = json!({
            "listen": "127.0.0.1:1",
            "origins": { "top": [ { "origin": "http://<b>.test", "requests": 3, "robots": { "state": "fresh" } } ] },
            "errors": { "total": 1, "recent": [ { "at_ms": 0, "what": "502", "message": "GET http://a.test/<img src=x>" } ] },
            "fleet": null,
        });
        let page = page(&v);
        assert!(!page.contains("<b>.test") && page.contains("http://&lt;b&gt;.test"), "origin escaped");
        assert!(!page.contains("<img") && page.contains("&lt;img src=x&gt;"), "error message escaped");
        assert!(page.contains("data-k=\"totals.hits\""));
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"), "nothing loaded from elsewhere");
    }

    #[test]
    fn store_figures_map_the_store_totals() {
        let s = StoreStats {
            entries: 3,
            bodies: 2,
            bytes_stored: 1000,
            bytes_referenced: 1500,
            max_size: 4000,
            evictions: 1,
            pack_bytes: 77,
            ..StoreStats::default()
        };
        let f = store_figures(&s);
        assert_eq!((f.used_bytes, f.max_bytes, f.distinct_body_bytes, f.logical_body_bytes), (1000, 4000, 1000, 1500));
        assert_eq!((f.entries, f.bodies, f.pack_bytes, f.evictions), (3, 2, 77, 1));
    }
}
