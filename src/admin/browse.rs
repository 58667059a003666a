//! The cache browser: `GET /cache/browse` (search the store by host,
//! URL prefix or URL, a page at a time) and `GET /cache/entry?url=URL`
//! (what is stored for a URL and why), linked from the status page.
//!
//! A listing never loads the index: each page is one key-range scan
//! ([`crawlcache_store::Store::page`]) that starts after the last entry of the
//! previous page (the `after` cursor in the "next page" link) and reads at
//! most [`SCAN_BUDGET`] index keys, decoding only the entries the filter
//! keeps, so it holds at ten million entries; a sparse filter may give a
//! short page that still links to the next.
//!
//! An entry's page shows each stored variant: status, stored fields,
//! freshness lifetime, current age and what is left (RFC 9111 section
//! 4.2), validators, the request fields of its variant, body size and
//! SHA-256; the record's copies; the robots.txt verdict for the URL under
//! the snapshot in force; the URL's lines in today's audit log; and a
//! purge button (a `POST /cache/purge?url=URL` from this page, so the
//! admin rules of [`super::auth`] let it through and no other page can).
//! Everything is rendered with maud, which escapes every value.

use super::respond::{query_param, text};
use super::status::{answer, duration, frame, query_escape, thousands};
use crate::ops::inspect::{KeyFilter, ListSpec, Listing};
use crate::proxy::ProxyState;
use crate::wire::body::ProxyBody;
use crawlcache_store::PageCursor;
use http::{Response, StatusCode};
use maud::{html, Markup};
use std::time::SystemTime;

/// Entries listed per page.
pub const PAGE_ROWS: usize = 50;

/// Index keys one page reads at most.
pub const SCAN_BUDGET: usize = 100_000;

/// Audit lines shown for a URL at most (the latest of today's).
pub const AUDIT_LINES: usize = 20;

/// Bytes read from the end of today's audit file for an entry's page.
pub const AUDIT_TAIL_BYTES: u64 = 4 << 20;

/// Whether `path` is a page of the browser.
pub fn is_browser_path(path: &str) -> bool {
    matches!(path, "/cache/browse" | "/cache/entry")
}

/// What a search asks for: `q` with `by` (`host`, `prefix` or `url`), or
/// `host=`, `prefix=`, `url=` given directly; `after` is a page's cursor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// Only URLs of this host.
    pub host: Option<String>,
    /// Only URLs starting with this.
    pub prefix: Option<String>,
    /// One URL: its entry page.
    pub url: Option<String>,
    /// The cursor of the page (from the previous page's link).
    pub after: Option<String>,
}

impl Search {
    /// The search in `query` (empty values are no filter).
    pub fn parse(query: &str) -> Search {
        let get =
            |k: &str| query_param(query, k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let mut s = Search {
            host: get("host"),
            prefix: get("prefix"),
            url: get("url"),
            after: get("after"),
        };
        if let Some(q) = get("q") {
            match get("by").as_deref() {
                Some("prefix") => s.prefix = Some(q),
                Some("url") => s.url = Some(q),
                _ => s.host = Some(q),
            }
        }
        s
    }

    fn query(&self, after: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some(h) = &self.host {
            parts.push(format!("host={}", query_escape(h)));
        }
        if let Some(p) = &self.prefix {
            parts.push(format!("prefix={}", query_escape(p)));
        }
        if let Some(a) = after {
            parts.push(format!("after={a}"));
        }
        parts.join("&")
    }
}

/// A page cursor as a link carries it: the entry key (primary key length,
/// primary key, secondary key) in unpadded base64url.
pub fn encode_cursor(c: &PageCursor) -> String {
    let mut raw = (c.primary_key.len() as u32).to_be_bytes().to_vec();
    raw.extend_from_slice(c.primary_key.as_bytes());
    raw.extend_from_slice(&c.secondary_key);
    data_encoding::BASE64URL_NOPAD.encode(&raw)
}

/// The cursor of [`encode_cursor`]; `None` for anything else.
pub fn decode_cursor(s: &str) -> Option<PageCursor> {
    let raw = data_encoding::BASE64URL_NOPAD.decode(s.as_bytes()).ok()?;
    let len = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    let pk = raw.get(4..4usize.checked_add(len)?)?;
    Some(PageCursor {
        primary_key: String::from_utf8(pk.to_vec()).ok()?,
        secondary_key: raw.get(4 + len..)?.to_vec(),
    })
}

/// `GET /cache/browse`: the search form and a page of matching entries
/// (the entry page itself for `url`). 400 for a host filter that does not
/// parse or a bad cursor, 500 when the index cannot be read.
pub async fn browse(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let search = Search::parse(query);
    if let Some(url) = &search.url {
        return entry(state, &format!("url={}", query_escape(url))).await;
    }
    let filter = KeyFilter { host: search.host.clone(), prefix: search.prefix.clone() };
    if let Err(e) = filter.validate() {
        return text(StatusCode::BAD_REQUEST, format!("crawlcache: {e}\n"));
    }
    let after = match search.after.as_deref().map(decode_cursor) {
        Some(None) => {
            return text(
                StatusCode::BAD_REQUEST,
                "crawlcache: the page cursor is not one this proxy made\n".into(),
            )
        }
        Some(Some(c)) => Some(c),
        None => None,
    };
    let store = state.store.clone();
    let spec = ListSpec {
        filter: filter.clone(),
        policy: state.policy.clone(),
        rules: state.config.cache.rules.clone(),
        now: SystemTime::now(),
    };
    let listed = tokio::task::spawn_blocking(move || {
        // The host filter parsed once, not once per key read.
        let host = spec
            .filter
            .host
            .as_deref()
            .map(crate::ops::host_filter::HostFilter::parse)
            .transpose()?;
        let prefix = spec.filter.prefix.clone();
        let keep = |k: &str| {
            let url = crate::ops::inspect::key_url(k);
            prefix.as_deref().is_none_or(|p| url.starts_with(p))
                && host.as_ref().is_none_or(|h| h.matches_url(url))
        };
        let page = store
            .page(after.as_ref(), PAGE_ROWS, SCAN_BUDGET, keep)
            .map_err(crate::ops::inspect::InspectError::from)?;
        let listing = Listing::new(&store, spec);
        let mut rows = Vec::new();
        for e in page.entries {
            if let Some(row) = listing.row(e)? {
                rows.push(row);
            }
        }
        Ok::<_, crate::ops::inspect::InspectError>((rows, page.next, page.examined))
    })
    .await;
    let (rows, next, examined) = match listed {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("crawlcache: the index cannot be read: {e}\n"),
            )
        }
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("crawlcache: listing failed: {e}\n"),
            )
        }
    };
    let next = next.map(|c| format!("/cache/browse?{}", search.query(Some(&encode_cursor(&c)))));
    let body = html! {
        main.browser {
            section.card.wide {
                h2 { "Search the cache" }
                (search_form(&search))
            }
            section.card.wide #entries {
                h2 { "Entries " span.sub { (thousands(state.store.stats().entries)) " in the store · " (rows.len()) " on this page · " (thousands(examined as u64)) " keys read" } }
                table.stack {
                    thead { tr { th.url { "URL" } th.num { "status" } th.num { "body" } th.num { "freshness left" } th { "stored" } th { "in" } } }
                    tbody {
                        @if rows.is_empty() { tr { td.none colspan="6" { "nothing on this page" } } }
                        @for r in &rows {
                            tr {
                                td.url data-label="URL" { a href=(format!("/cache/entry?url={}", query_escape(&r.url))) { (r.url) } }
                                td.num data-label="status" { (r.status.map_or_else(|| "–".to_string(), |s| s.to_string())) }
                                td.num data-label="body" { (crawlcache_base::units::format_bytes(r.bytes)) }
                                td.num data-label="freshness left" { (r.ttl.map_or_else(|| "–".to_string(), ttl_text)) }
                                td data-label="stored" { (r.stored.clone().unwrap_or_default()) }
                                td data-label="in" { (r.place()) }
                            }
                        }
                    }
                }
                p.pager {
                    @if search.after.is_some() { a href=(format!("/cache/browse?{}", search.query(None))) { "first page" } " · " }
                    @match &next { Some(n) => a #next href=(n) { "next page" }, None => span.note { "end of the index" } }
                }
            }
        }
    };
    answer(
        "text/html; charset=utf-8",
        frame("cache browser", &state.local_addr.to_string(), body).into_string().into_bytes(),
    )
}

fn search_form(search: &Search) -> Markup {
    let (by, q) = match (&search.host, &search.prefix) {
        (_, Some(p)) => ("prefix", p.as_str()),
        (Some(h), None) => ("host", h.as_str()),
        (None, None) => ("host", ""),
    };
    html! {
        form.search method="get" action="/cache/browse" {
            select name="by" aria-label="search by" {
                @for (v, label) in [("host", "host"), ("prefix", "URL prefix"), ("url", "URL")] {
                    option value=(v) selected[v == by] { (label) }
                }
            }
            input type="search" name="q" value=(q) placeholder="example.com, https://example.com/docs/ or a URL" aria-label="search";
            button type="submit" { "search" }
        }
    }
}

/// Freshness left in seconds, as words: `fresh 5 min`, `stale 2 h 0 min`.
fn ttl_text(ttl: i64) -> String {
    if ttl >= 0 {
        format!("fresh {}", duration(ttl as u64))
    } else {
        format!("stale {}", duration(ttl.unsigned_abs()))
    }
}

/// One stored variant as the entry page shows it.
struct Variant {
    key: String,
    stored: Option<crawlcache_policy::cache::StoredResponse>,
    body_bytes: u64,
    body_sha256: Option<String>,
    last_used: Option<SystemTime>,
}

/// `GET /cache/entry?url=URL`: what is stored for `url` and why (see the
/// module docs). 400 for a URL that is not absolute http(s), 500 when the
/// index cannot be read; a URL with nothing stored gets the page saying so.
pub async fn entry(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let Some(url) = query_param(query, "url") else {
        return text(StatusCode::BAD_REQUEST, "crawlcache: /cache/entry needs ?url=URL\n".into());
    };
    let key = match crate::ops::lookup::cache_key(&url, &state.config.cache.key_rules) {
        Ok(k) => k,
        Err(e) => return text(e.status(), format!("crawlcache: {e}\n")),
    };
    let store = state.store.clone();
    let k = key.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for m in [None, Some(http::Method::GET), Some(http::Method::HEAD)] {
            let primary = match &m {
                None => k.clone(),
                Some(m) => crawlcache_policy::store_key::RecordKey::new(m, &k, None).primary(),
            };
            for e in store.lookup(&primary)? {
                out.push(Variant {
                    stored: crawlcache_policy::cache::StoredResponse::from_bytes(&e.meta),
                    body_bytes: e.body.as_ref().map_or(0, |b| b.len),
                    body_sha256: e.body.as_ref().map(|b| b.sha256.clone()),
                    last_used: e.last_used_at(),
                    key: primary.clone(),
                });
            }
        }
        Ok::<_, crawlcache_store::StoreError>(out)
    })
    .await;
    let variants = match found {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("crawlcache: the index cannot be read: {e}\n"),
            )
        }
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("crawlcache: lookup failed: {e}\n"),
            )
        }
    };
    let now = SystemTime::now();
    let audit = audit_lines(state, &url, now);
    // Set by the purge button's redirect (endpoints::purge, `then=entry`).
    let purged = query_param(query, "purged").and_then(|n| n.parse::<u64>().ok());
    let body = html! {
        main.browser {
            section.card.wide {
                h2 { "Search the cache" }
                (search_form(&Search::default()))
            }
            section.card.wide #entry {
                h2 { "Stored for " span.url { (url) } }
                dl.fields {
                    dt { "cache key" } dd.url { (key) }
                    dt { "variants" } dd { (variants.len()) }
                }
                @if let Some(n) = purged { p.notice { "Purged: " (n) " entries removed." } }
                @if variants.is_empty() { p.none { "Nothing is stored for this URL (neither in the cache nor in the record)." } }
                @for v in &variants { (variant_card(state, v, now)) }
                form.purge method="post" action=(format!("/cache/purge?url={}&then=entry", query_escape(&url))) {
                    button type="submit" { "purge this URL" }
                    span.note { " removes its variants from the cache and the record (POST /cache/purge)" }
                }
            }
            section.card.wide #robots { h2 { "robots.txt" } (robots_verdict(state, &url, now)) }
            section.card.wide #audit {
                h2 { "Audit lines " span.sub { "today, latest " (AUDIT_LINES) } }
                @if audit.is_empty() { p.none { "none today" } }
                ul.errors { @for line in &audit { li { (line) } } }
            }
        }
    };
    answer(
        "text/html; charset=utf-8",
        frame("entry", &state.local_addr.to_string(), body).into_string().into_bytes(),
    )
}

/// One variant: its fields, freshness (RFC 9111 section 4.2), validators
/// and body.
fn variant_card(state: &ProxyState, v: &Variant, now: SystemTime) -> Markup {
    let Some(s) = &v.stored else {
        return html! { div.variant { p.none { "a variant under " (v.key) " whose stored head cannot be read" } } };
    };
    let lifetime = crawlcache_policy::cache_rules::freshness_lifetime(
        &state.config.cache.rules,
        &v.key,
        s,
        &state.policy,
    );
    let age = crawlcache_policy::cache::current_age(s, now);
    let left = lifetime.as_secs() as i64 - age.as_secs() as i64;
    let field = |name: &str| {
        s.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let validators = [("ETag", field("etag")), ("Last-Modified", field("last-modified"))];
    let at =
        |ms: u64| crawlcache_base::time::format_rfc3339(crawlcache_policy::cache::from_millis(ms));
    html! {
        div.variant {
            h3 { (if crawlcache_policy::store_key::StoreKey::is_record(&v.key) { "record " } else { "cache " }) span.url { (v.key) } }
            dl.fields {
                dt { "status" } dd { (s.status) }
                dt { "freshness" } dd { (ttl_text(left)) " (lifetime " (duration(lifetime.as_secs())) ", age " (duration(age.as_secs())) ")" }
                dt { "received" } dd { (at(s.response_time_ms)) }
                dt { "last used" } dd { (v.last_used.map(crawlcache_base::time::format_rfc3339).unwrap_or_else(|| "–".into())) }
                @for (name, value) in &validators { dt { (name) } dd.url { @if value.is_empty() { "–" } @else { (value) } } }
                dt { "variant" } dd.url {
                    @if s.vary_request.is_empty() { "– (no Vary)" }
                    @for (n, val) in &s.vary_request { (n) ": " (String::from_utf8_lossy(val)) br; }
                }
                dt { "body" } dd { (crawlcache_base::units::format_bytes(v.body_bytes)) " (" (thousands(v.body_bytes)) " bytes)" }
                dt { "SHA-256" } dd.url { (v.body_sha256.clone().unwrap_or_else(|| "–".into())) }
            }
            details open {
                summary { "stored fields (" (s.headers.len()) ")" }
                table.fieldlist { tbody { @for (n, val) in &s.headers { tr { th { (n) } td.url { (String::from_utf8_lossy(val)) } } } } }
            }
        }
    }
}

/// The robots.txt verdict for `url` under the snapshot in force (never
/// fetched from here).
fn robots_verdict(state: &ProxyState, url: &str, now: SystemTime) -> Markup {
    let r = super::status::robots_state(state, url, now);
    let origin = crawlcache_robots::snapshot::Origin::from_url(url);
    let rules = origin.as_ref().and_then(|o| state.robots.current(o));
    let agent = state.config.robots.agent.trim();
    let agent = if agent.is_empty() { "*" } else { agent };
    let verdict = match (&origin, &rules) {
        (Some(o), Some(rules)) => {
            let window = rules.snapshot.state(&state.robots.windows(o), now);
            Some(rules.verdict(window, agent, url))
        }
        _ => None,
    };
    html! {
        dl.fields {
            dt { "snapshot" } dd { span class=(format!("state s-{}", r.state)) { (r.state) } @if let Some(a) = r.age_seconds { " " span.note { (duration(a)) " old" } } }
            dt { "Crawl-delay" } dd { (r.crawl_delay.map(|d| format!("{d} s")).unwrap_or_else(|| "–".into())) }
            dt { "verdict for " (agent) } dd {
                @match &verdict {
                    Some(v) => { (if v.allowed { "allowed" } else { "disallowed" }) @if let Some(rule) = &v.rule { " by " span.url { (rule) } } @if let Some(l) = v.line { " (line " (l) ")" } },
                    None => "no snapshot yet",
                }
            }
        }
    }
}

/// The latest [`AUDIT_LINES`] lines of today's audit log for `url`, read
/// from the last [`AUDIT_TAIL_BYTES`] of the file (its lines as written,
/// JSON). Empty when there is no file or it cannot be read.
fn audit_lines(state: &ProxyState, url: &str, now: SystemTime) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let _ = state.audit.flush();
    let path = state.audit.dir().join(crate::audit::file_name(now));
    let Ok(mut f) = std::fs::File::open(&path) else { return Vec::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if f.seek(SeekFrom::Start(len.saturating_sub(AUDIT_TAIL_BYTES))).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if f.take(AUDIT_TAIL_BYTES).read_to_end(&mut buf).is_err() {
        return Vec::new();
    }
    let mut out: Vec<String> = buf
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            serde_json::from_slice::<crate::audit::AuditRecord>(line)
                .ok()
                .filter(|r| r.url == url)
                .map(|_| String::from_utf8_lossy(line).into_owned())
        })
        .collect();
    let skip = out.len().saturating_sub(AUDIT_LINES);
    out.drain(..skip);
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        let c = PageCursor {
            primary_key: "http://a.test/<x>".into(),
            secondary_key: b"accept\0gzip".to_vec(),
        };
        assert_eq!(decode_cursor(&encode_cursor(&c)), Some(c));
        assert_eq!(decode_cursor("!!"), None);
        assert_eq!(
            decode_cursor(&data_encoding::BASE64URL_NOPAD.encode(&[0, 0, 0, 9, b'a'])),
            None
        );
    }

    #[test]
    fn a_search_is_read_from_the_form_or_the_links() {
        assert_eq!(Search::parse("q=a.test&by=host").host.as_deref(), Some("a.test"));
        assert_eq!(
            Search::parse("q=http%3A%2F%2Fa.test%2Fd%2F&by=prefix").prefix.as_deref(),
            Some("http://a.test/d/")
        );
        assert_eq!(Search::parse("host=&prefix=").host, None);
        let s = Search::parse("host=a.test&after=XYZ");
        assert_eq!(s.query(Some("N")), "host=a.test&after=N");
    }
}
