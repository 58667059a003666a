//! `GET /metrics` (Prometheus text) and `GET /stats` (JSON).

use super::origin_figures::ORIGIN_SERIES;
use super::status;
use crate::proxy::ProxyState;

/// How many per-origin robots.txt age series `/metrics` exports at most
/// (the oldest snapshots), so a crawl over a million origins does not make
/// a million series.
pub const ROBOTS_AGE_SERIES: usize = 50;

/// The per-origin series of `/metrics`: requests, requests served from the
/// store, bytes from the store and errors of the [`ORIGIN_SERIES`] origins
/// with the most requests.
fn origin_series(out: &mut String, state: &ProxyState) {
    use std::fmt::Write;
    let top = state.metrics.origins.top(ORIGIN_SERIES);
    type Family = (&'static str, &'static str, fn(&crate::metrics::origins::OriginFigures) -> u64);
    let families: [Family; 4] = [
        ("crawlcache_origin_requests_total", "Requests per origin", |f| f.requests),
        (
            "crawlcache_origin_from_store_total",
            "Requests per origin served from the store (hits, stale, revalidated)",
            |f| f.from_store,
        ),
        (
            "crawlcache_origin_from_cache_bytes_total",
            "Body bytes per origin sent from the store (bytes saved)",
            |f| f.bytes_from_cache,
        ),
        (
            "crawlcache_origin_errors_total",
            "Errors per origin (crawlcache's own, and origins' 5xx)",
            |f| f.errors,
        ),
    ];
    for (name, help, get) in families {
        let _ = writeln!(
            out,
            "# HELP {name} {help}, for the {ORIGIN_SERIES} origins with the most requests (estimates above 1000 requests a second).\n# TYPE {name} counter"
        );
        for (origin, f) in &top {
            let _ = writeln!(out, "{name}{{origin=\"{}\"}} {}", prom_escape(origin), get(f));
        }
    }
}

/// The store's gauges for `/metrics`: (name, help, value).
fn store_gauges(s: &crawlcache_store::StoreStats) -> [(&'static str, &'static str, u64); 8] {
    [
        ("crawlcache_store_entries", "Entries (variants) in the cache index.", s.entries),
        ("crawlcache_store_bodies", "Distinct bodies stored, each once however many entries reference it.", s.bodies),
        ("crawlcache_store_bytes", "Bytes of those distinct bodies, each counted once.", s.bytes_stored),
        (
            "crawlcache_store_budget_bytes",
            "Bytes on disk cache.max_size bounds: the bodies and the records of the entries (pack records and body files; not the index).",
            s.budget_bytes,
        ),
        (
            "crawlcache_store_referenced_bytes",
            "Bytes of the bodies of every entry, a shared body counted once per entry (minus crawlcache_store_bytes: what sharing saves).",
            s.bytes_referenced,
        ),
        ("crawlcache_store_pack_bytes", "Bytes of the store's pack segments on disk (entry records, live and not yet reclaimed).", s.pack_bytes),
        ("crawlcache_store_max_bytes", "The configured size budget in bytes.", s.max_size),
        (
            "crawlcache_store_filters_ready",
            "1 once the filters of stored keys and bodies are built (after a start, from the whole index, in the background), else 0.",
            u64::from(s.filters_ready),
        ),
    ]
}

/// `/metrics` in Prometheus text format.
pub fn prometheus(state: &ProxyState) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP crawlcache_build_info The running build: its version (always 1).\n# TYPE crawlcache_build_info gauge\ncrawlcache_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    for (name, help, value) in state.metrics.counters() {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
    }
    state.metrics.latency.write_prometheus(&mut out);
    let audit = (
        "crawlcache_audit_bytes",
        "Bytes of the audit log's files (plain and compressed days; audit.keep bounds them).",
        crate::audit::disk_bytes(state.audit.dir()),
    );
    let s = state.store.stats();
    for (name, help, value) in store_gauges(&s).into_iter().chain([audit]) {
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
    ages.sort_by_key(|a| std::cmp::Reverse(a.1));
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
        let _ = writeln!(
            out,
            "crawlcache_robots_snapshot_age_seconds{{origin=\"{}\"}} {}",
            prom_escape(&origin.to_string()),
            age.as_secs()
        );
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
        let _ = writeln!(
            out,
            "crawlcache_robots_disposition_total{{disposition=\"{label}\"}} {}",
            g(c)
        );
    }
    let _ = writeln!(out, "# HELP crawlcache_robots_verdict_total Requests by robots verdict.\n# TYPE crawlcache_robots_verdict_total counter");
    let _ = writeln!(
        out,
        "crawlcache_robots_verdict_total{{verdict=\"allowed\"}} {}",
        g(&m.robots_allowed)
    );
    let _ = writeln!(
        out,
        "crawlcache_robots_verdict_total{{verdict=\"disallowed\"}} {}",
        g(&m.robots_disallowed)
    );
    let _ = writeln!(out, "# HELP crawlcache_robots_fetch_total robots.txt fetch attempts by outcome.\n# TYPE crawlcache_robots_fetch_total counter");
    for (label, n) in state.robots.fetch_outcomes() {
        let _ = writeln!(out, "crawlcache_robots_fetch_total{{outcome=\"{label}\"}} {n}");
    }
    let _ = writeln!(
        out,
        "# HELP crawlcache_evictions_total Entries evicted by the size budget.\n# TYPE crawlcache_evictions_total counter\ncrawlcache_evictions_total {}",
        s.evictions
    );
    origin_series(&mut out, state);
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
        "request_duration_seconds": state.metrics.latency.json(),
        "fleet": state.fleet.as_ref().map(|f| f.stats_json()),
        "connections": status::connections_json(state),
        "http2": status::http2_json(state),
        "recent": status::windows_json(state),
        "origins": super::origin_figures::origins_json(state),
        "audit": { "mode": state.config.audit.mode, "keep": crawlcache_base::units::format_duration(state.config.audit.keep), "bytes": crate::audit::disk_bytes(state.audit.dir()) },
    })
}
