//! An access-log line as text: JSON (a key per field) or Squid's native
//! `access.log` format. Pure functions over an [`Entry`]; no I/O, no clock.
//!
//! Squid's native format is ten fields separated by spaces:
//! `time.ms elapsed client code/status bytes method URL user hierarchy/peer type`.
//! Deliberate differences from what Squid writes:
//! - `bytes` counts the body bytes sent, not the response head (which
//!   crawlcache does not count);
//! - `user` is always `-` (no proxy authentication);
//! - the peer is the origin's host (or the parent proxy's `host:port`),
//!   not its IP address, as Squid writes with `log_fqdn`-like settings.

use crawlcache_policy::cache_status::{CacheStatus, Detail, Fwd, Outcome};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

/// One request's access-log line, every field borrowed.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// When the response ended.
    pub time: SystemTime,
    /// The client's address and port.
    pub client: SocketAddr,
    /// The request method.
    pub method: &'a str,
    /// The URL as requested.
    pub url: &'a str,
    /// The cache key, when `cache.key_rules` made it differ from `url`.
    pub key: Option<&'a str>,
    /// The status code sent.
    pub status: u16,
    /// The request's class.
    pub outcome: Outcome,
    /// Squid's result code for it ([`squid_code`]).
    pub squid_code: &'static str,
    /// Body bytes sent to the client.
    pub bytes: u64,
    /// From the request's arrival to the end of its response body.
    pub elapsed: Duration,
    /// The request's `User-Agent`, if any.
    pub user_agent: Option<&'a str>,
    /// `allowed`, `disallowed`, or `-` when robots handling is off.
    pub robots: &'static str,
    /// The HTTP version the client spoke.
    pub client_version: http::Version,
    /// The HTTP version of the upstream response, when one was received.
    pub upstream_version: Option<http::Version>,
    /// Squid's hierarchy code and peer (`HIER_DIRECT`, `example.org`), when
    /// an upstream was contacted.
    pub peer: Option<(&'static str, &'a str)>,
    /// The response's media type (`Content-Type` without parameters).
    pub content_type: Option<&'a str>,
}

/// `HTTP/1.1`, `HTTP/2`, ... as the versions are usually written.
pub fn version_name(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_11 => "HTTP/1.1",
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/?",
    }
}

/// Squid's result code (`TCP_HIT`, `TCP_MISS`, ...) for a request whose
/// outcome is `status` and that was answered with the code `sent`:
/// - hit: `TCP_HIT`; stale: `TCP_OFFLINE_HIT` offline, `TCP_REFRESH_FAIL_OLD`
///   when the origin failed or could not be reached (stale-if-error,
///   disconnected), otherwise `TCP_HIT` (stale-while-revalidate, `max-stale`);
/// - revalidated: `TCP_REFRESH_UNMODIFIED`;
/// - miss: `TCP_REFRESH_MODIFIED` after a validation that got a new
///   response, `TCP_CLIENT_REFRESH_MISS` when the request's directives
///   sent it forward, otherwise `TCP_MISS`; pass: `TCP_MISS` (as Squid logs
///   a POST);
/// - refused: `TCP_DENIED` for 403 (robots, access rules), otherwise `NONE`;
/// - error (the origin could not be reached, timed out, failed TLS; the
///   store failed): `TCP_MISS`, as Squid logs a forwarding failure with the
///   error's status (`TCP_MISS/502`, `TCP_MISS/504`).
pub fn squid_code(status: &CacheStatus, sent: u16) -> &'static str {
    match status.outcome_for(sent) {
        Outcome::Hit => "TCP_HIT",
        Outcome::Stale => match status.detail {
            Some(Detail::Offline) => "TCP_OFFLINE_HIT",
            Some(Detail::StaleIfError | Detail::Disconnected) => "TCP_REFRESH_FAIL_OLD",
            _ => "TCP_HIT",
        },
        Outcome::Revalidated => "TCP_REFRESH_UNMODIFIED",
        Outcome::Miss => match status.fwd {
            Some(Fwd::Stale) => "TCP_REFRESH_MODIFIED",
            Some(Fwd::Request) => "TCP_CLIENT_REFRESH_MISS",
            _ => "TCP_MISS",
        },
        Outcome::Pass => "TCP_MISS",
        Outcome::Refused if sent == 403 => "TCP_DENIED",
        Outcome::Refused => "NONE",
        Outcome::Error => "TCP_MISS",
    }
}

/// The JSON object of a line, in the order its keys are written.
#[derive(serde::Serialize)]
struct JsonLine<'a> {
    time: String,
    client: String,
    method: &'a str,
    url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    status: u16,
    outcome: &'static str,
    bytes: u64,
    duration_ms: f64,
    user_agent: Option<&'a str>,
    robots: &'static str,
    client_version: &'static str,
    upstream_version: Option<&'static str>,
}

/// Appends `e` as one JSON object and a newline to `out`.
pub fn json(e: &Entry<'_>, out: &mut Vec<u8>) {
    let line = JsonLine {
        time: crawlcache_base::time::format_rfc3339(e.time),
        client: e.client.to_string(),
        method: e.method,
        url: e.url,
        key: e.key,
        status: e.status,
        outcome: e.outcome.as_str(),
        bytes: e.bytes,
        // Microseconds kept: a hit takes well under a millisecond.
        duration_ms: e.elapsed.as_micros() as f64 / 1000.0,
        user_agent: e.user_agent,
        robots: e.robots,
        client_version: version_name(e.client_version),
        upstream_version: e.upstream_version.map(version_name),
    };
    // Serialising borrowed strings and numbers into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &line);
    out.push(b'\n');
}

/// Appends `e` in Squid's native format and a newline to `out`.
pub fn squid(e: &Entry<'_>, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let since = e.time.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (hier, peer) = e.peer.unwrap_or(("HIER_NONE", "-"));
    let _ = writeln!(
        out,
        "{}.{:03} {:6} {} {}/{:03} {} {} {} - {}/{} {}",
        since.as_secs(),
        since.subsec_millis(),
        e.elapsed.as_millis(),
        e.client.ip(),
        e.squid_code,
        e.status,
        e.bytes,
        field(e.method),
        field(e.url),
        hier,
        field(peer),
        e.content_type.map_or("-", field),
    );
}

/// `s`, or `-` when it is empty or holds a space or a control character
/// (a field must stay one whitespace-separated word).
fn field(s: &str) -> &str {
    if s.is_empty() || s.bytes().any(|b| b <= b' ' || b == 0x7f) {
        "-"
    } else {
        s
    }
}

/// The media type of a `Content-Type` value: before any `;`, trimmed.
pub fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry<'static> {
        Entry {
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_000_000_123),
            client: "127.0.0.1:50412".parse().unwrap(),
            method: "GET",
            url: "http://example.org/a?b=\"c\"",
            key: None,
            status: 200,
            outcome: Outcome::Hit,
            squid_code: "TCP_HIT",
            bytes: 1234,
            elapsed: Duration::from_micros(1_500),
            user_agent: Some("bot/1.0 (+http://example.org/bot)"),
            robots: "allowed",
            client_version: http::Version::HTTP_11,
            upstream_version: None,
            peer: None,
            content_type: Some("text/html"),
        }
    }

    /// Every field a log analyser keys on is its own JSON key, the user
    /// agent and URL escaped, `upstream_version` null when no upstream
    /// answered, and `key` absent unless it differs from the URL.
    #[test]
    fn a_json_line_has_a_key_per_field() {
        let mut out = Vec::new();
        json(&entry(), &mut out);
        assert_eq!(out.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["time"], "2025-11-24T16:00:00.123Z");
        assert_eq!(v["client"], "127.0.0.1:50412");
        assert_eq!(v["url"], "http://example.org/a?b=\"c\"");
        assert_eq!(v["outcome"], "hit");
        assert_eq!(v["bytes"], 1234);
        assert_eq!(v["duration_ms"], 1.5);
        assert_eq!(v["user_agent"], "bot/1.0 (+http://example.org/bot)");
        assert_eq!(v["client_version"], "HTTP/1.1");
        assert!(v["upstream_version"].is_null());
        assert!(v.get("key").is_none());
    }

    /// A Squid line has the ten fields of the native format, the client
    /// without its port, and `-` for a field that would break the columns.
    #[test]
    fn a_squid_line_has_the_ten_native_fields() {
        let mut out = Vec::new();
        let mut e = entry();
        e.content_type = Some("text/html; charset=utf-8");
        squid(&e, &mut out);
        let line = String::from_utf8(out).unwrap();
        assert_eq!(line, "1764000000.123      1 127.0.0.1 TCP_HIT/200 1234 GET http://example.org/a?b=\"c\" - HIER_NONE/- -\n");
        let mut e = entry();
        e.peer = Some(("HIER_DIRECT", "example.org"));
        e.squid_code = "TCP_MISS";
        let mut out = Vec::new();
        squid(&e, &mut out);
        let fields: Vec<&str> = std::str::from_utf8(&out).unwrap().split_whitespace().collect();
        assert_eq!(fields.len(), 10);
        assert_eq!(fields[3], "TCP_MISS/200");
        assert_eq!(fields[8], "HIER_DIRECT/example.org");
        assert_eq!(fields[9], "text/html");
    }

    /// The outcomes map to Squid's codes as `squid_code` documents.
    #[test]
    fn outcomes_map_to_squid_result_codes() {
        let hit = CacheStatus::hit(60);
        assert_eq!(squid_code(&hit, 200), "TCP_HIT");
        let revalidated = CacheStatus { fwd_status: Some(304), ..CacheStatus::forward(Fwd::Stale) };
        assert_eq!(squid_code(&revalidated, 200), "TCP_REFRESH_UNMODIFIED");
        let modified = CacheStatus { fwd_status: Some(200), ..CacheStatus::forward(Fwd::Stale) };
        assert_eq!(squid_code(&modified, 200), "TCP_REFRESH_MODIFIED");
        let miss = CacheStatus { fwd_status: Some(200), ..CacheStatus::forward(Fwd::UriMiss) };
        assert_eq!(squid_code(&miss, 200), "TCP_MISS");
        let failed =
            CacheStatus { fwd: Some(Fwd::Stale), fwd_status: Some(503), ..CacheStatus::default() }
                .with_detail(Detail::StaleIfError);
        // Served from the store after the origin failed.
        let failed = CacheStatus { hit: true, served_stale: true, ..failed };
        assert_eq!(squid_code(&failed, 200), "TCP_REFRESH_FAIL_OLD");
        let offline =
            CacheStatus { served_stale: true, ..CacheStatus::hit(-5).with_detail(Detail::Offline) };
        assert_eq!(squid_code(&offline, 200), "TCP_OFFLINE_HIT");
        let robots = CacheStatus::default().with_detail(Detail::Robots);
        assert_eq!(squid_code(&robots, 403), "TCP_DENIED");
        assert_eq!(squid_code(&robots, 502), "NONE");
        let unreachable = CacheStatus::default().with_detail(Detail::UpstreamError);
        assert_eq!(
            squid_code(&unreachable, 502),
            "TCP_MISS",
            "a forwarding failure, as Squid logs TCP_MISS/502"
        );
        let only_if_cached = CacheStatus::default().with_detail(Detail::OnlyIfCached);
        assert_eq!(squid_code(&only_if_cached, 504), "NONE", "a refusal, not an error");
    }
}
