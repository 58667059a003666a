//! How the `cache` commands print for people ([`super::cache`]): `cache
//! stats`, `cache show`, `cache verify` and `cache ls` lines, sizes and
//! ages in units. The JSON forms (`--json`) are built beside the commands.

use crate::ops::inspect::{LsRow, LsSummary};
use crawlcache_base::units::{format_age, format_bytes};
use std::time::Duration;

/// `cache stats` for people: aligned lines with sizes in units, then one
/// summary line. `v` is a [`super::cache::stats_object`].
pub fn stats_text(v: &serde_json::Value) -> String {
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    let st = &v["store"];
    let (stored, budget) = (n(st, "bytes_stored"), n(st, "max_size"));
    let used = n(st, "budget_bytes");
    let share = if budget > 0 {
        format!(" ({:.1}%)", used as f64 * 100.0 / budget as f64)
    } else {
        String::new()
    };
    let referenced = n(st, "bytes_referenced");
    let mut out = format!("entries   {}\n", n(st, "entries"));
    out.push_str(&format!("bodies    {} distinct, {}", n(st, "bodies"), format_bytes(stored)));
    if referenced > stored {
        out.push_str(&format!(
            " ({} referenced: sharing saves {})",
            format_bytes(referenced),
            format_bytes(referenced - stored)
        ));
    }
    out.push_str(&format!(
        "\nbudget    {} of {}{share} used (bodies and entry records); {} evictions since start\n",
        format_bytes(used),
        format_bytes(budget),
        n(st, "evictions")
    ));
    out.push_str(&format!("pack      {} on disk\n", format_bytes(n(st, "pack_bytes"))));
    let r = &v["requests"];
    let summary = format!(
        "cache stats: {} entries, {} of {}{share}",
        n(st, "entries"),
        format_bytes(used),
        format_bytes(budget)
    );
    if r.is_null() {
        out.push_str(
            "requests  - (counted by a running proxy; none runs on this data directory)\n",
        );
        out.push_str(&format!("{summary}; the proxy is not running\n"));
    } else {
        let (requests, hits) = (n(r, "requests"), n(r, "hits"));
        let ratio = if requests > 0 {
            format!(" ({:.1}%)", hits as f64 * 100.0 / requests as f64)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "requests  {requests}: {hits} hits{ratio}, {} revalidated, {} stale served, {} misses, {} passed through, {} refused, {} errors\n",
            n(r, "revalidated"),
            n(r, "stale_served"),
            n(r, "misses"),
            n(r, "passthrough"),
            n(r, "refused"),
            n(r, "errors")
        ));
        out.push_str(&format!(
            "sent      {} from the store, {} from origins\n",
            format_bytes(n(r, "from_cache_bytes")),
            format_bytes(n(r, "from_origin_bytes"))
        ));
        out.push_str(&format!("{summary}; the proxy at {} has answered {hits} of {requests} requests with a fresh hit\n", v["listen"].as_str().unwrap_or("?")));
    }
    out
}

/// `cache show` for people: the URL and key, then per stored variant and
/// record its status, when it was received, body size and SHA-256, the
/// request fields that selected it and its stored fields. `v` is what
/// `show_json` gives.
pub fn show_text(v: &serde_json::Value) -> String {
    let s = |x: &serde_json::Value| x.as_str().unwrap_or("-").to_string();
    let mut out = format!("url       {}\nkey       {}\n", s(&v["url"]), s(&v["key"]));
    let pairs = |x: &serde_json::Value| -> Vec<(String, String)> {
        x.as_array().map(|a| a.iter().map(|p| (s(&p[0]), s(&p[1]))).collect()).unwrap_or_default()
    };
    for (what, list) in [("variant", &v["variants"]), ("record", &v["records"])] {
        for (i, e) in list.as_array().into_iter().flatten().enumerate() {
            let received = e["response_time_ms"]
                .as_u64()
                .map(|ms| {
                    crawlcache_base::time::format_rfc3339(
                        std::time::UNIX_EPOCH + Duration::from_millis(ms),
                    )
                })
                .unwrap_or_else(|| "-".into());
            let body = match (e["body_bytes"].as_u64(), e["body_sha256"].as_str()) {
                (Some(n), Some(h)) => format!("{} sha256 {h}", format_bytes(n)),
                _ => "none".to_string(),
            };
            out.push_str(&format!(
                "\n{what} {}{}\n",
                i + 1,
                e["key"].as_str().map(|k| format!("  ({k})")).unwrap_or_default()
            ));
            out.push_str(&format!(
                "  status    {}\n  received  {received}\n  body      {body}\n",
                e["status"].as_u64().map_or("-".into(), |n| n.to_string())
            ));
            for (n, val) in pairs(&e["vary_request"]) {
                out.push_str(&format!("  selected by  {n}: {val}\n"));
            }
            for (n, val) in pairs(&e["headers"]) {
                out.push_str(&format!("  {n}: {val}\n"));
            }
        }
    }
    let n = v["variants"].as_array().map_or(0, Vec::len);
    let r = v["records"].as_array().map_or(0, Vec::len);
    out.push_str(&format!("\ncache show: {n} variant(s), {r} record(s)\n"));
    out
}

/// The problem lists of a verify report, in the order they are printed,
/// with their names for people.
const VERIFY_PROBLEMS: [(&str, &str); 6] = [
    ("corrupt_bodies", "corrupt bodies (content does not match its SHA-256)"),
    ("missing_bodies", "missing bodies (named by an entry, not on disk)"),
    ("orphan_bodies", "orphan body files (no entry references them)"),
    ("refcount_mismatches", "reference counts that differ from the entries"),
    ("leftover_tmp", "leftover temporary files"),
    ("index_problems", "index problems"),
];

/// How many items of each problem list `cache verify` prints (all are in `--json`).
const VERIFY_SHOWN: usize = 20;

/// `cache verify` for people: when `clean`, one line; else each kind of
/// problem found with its items (the first `VERIFY_SHOWN`), then the
/// summary line. `report` is the store's report as JSON.
pub fn verify_text(clean: bool, repair: bool, report: &serde_json::Value) -> String {
    let checked = format!(
        "{} entries, {} bodies checked",
        report["entries_checked"].as_u64().unwrap_or(0),
        report["bodies_checked"].as_u64().unwrap_or(0)
    );
    if clean {
        return format!("cache verify: every invariant holds ({checked})\n");
    }
    let mut out = String::new();
    for (key, name) in VERIFY_PROBLEMS {
        let items = report[key].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if items.is_empty() {
            continue;
        }
        out.push_str(&format!("{} {name}:\n", items.len()));
        for item in items.iter().take(VERIFY_SHOWN) {
            out.push_str(&format!(
                "  {}\n",
                item.as_str().map_or_else(|| item.to_string(), str::to_string)
            ));
        }
        if items.len() > VERIFY_SHOWN {
            out.push_str(&format!(
                "  ... and {} more (--json lists them all)\n",
                items.len() - VERIFY_SHOWN
            ));
        }
    }
    if repair {
        out.push_str(&format!("cache verify: problems were found and repaired ({checked})\n"));
    } else {
        out.push_str(&format!(
            "cache verify: invariants are broken ({checked}); run with --repair to fix\n"
        ));
    }
    out
}

/// A `cache ls` line for people: `URL STATUS SIZE STORED FRESHNESS IN`,
/// tab-separated, the size with units and the freshness as `fresh 59m` or
/// `expired 1h11m ago` (`-` for what is unknown).
pub fn ls_line(row: &LsRow) -> String {
    let dash = || "-".to_string();
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}",
        row.url,
        row.status.map_or_else(dash, |s| s.to_string()),
        format_bytes(row.bytes),
        row.stored.clone().unwrap_or_else(dash),
        row.ttl.map_or_else(dash, freshness_words),
        row.place()
    )
}

/// Freshness left, `ttl` seconds (negative: stale), in words: `fresh 59m`,
/// `expired 1h11m ago`, `expires now`.
pub fn freshness_words(ttl: i64) -> String {
    let age = format_age(Duration::from_secs(ttl.unsigned_abs()));
    match ttl {
        0 => "expires now".to_string(),
        t if t > 0 => format!("fresh {age}"),
        _ => format!("expired {age} ago"),
    }
}

/// The summary line of `cache ls`, sizes with units.
pub fn ls_summary(s: &LsSummary) -> String {
    format!(
        "{} responses ({} in the cache, {} in the record), {} of bodies; {} distinct bodies, {} stored",
        s.rows,
        s.cached,
        s.recorded,
        format_bytes(s.bytes),
        s.distinct,
        format_bytes(s.distinct_bytes)
    )
}
