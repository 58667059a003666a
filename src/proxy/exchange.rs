//! One request's state on its way through the proxy: read once when the
//! request arrives, then filled in by the robots gate and the stages.
//!
//! Everything [`super::route::route`] decides on lives here: the request
//! head, the primary cache key, the parsed request `Cache-Control`, the
//! robots verdict and pacing, the arrival time; and the [`CacheStatus`]
//! that every stage writes and that the response, the audit line and the
//! metrics are made from.

use super::robots_gate::RobotsGate;
use crawlcache_policy::cache::cache_control::CacheControl;
use crawlcache_policy::cache::key;
use crawlcache_policy::cache_status::CacheStatus;
use http::request::Parts;
use http::{Method, Request, Uri};
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

/// Largest total size of a request's header fields, in bytes: the same
/// bound as the origin side's default (`upstream.max_head_bytes`), so a
/// crawler carrying many cookies is not refused below what an origin may
/// send. Larger requests get 431 naming the limit.
pub const MAX_HEADER_BYTES: usize = 256 * 1024;

/// What the request line addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Origin-form (`GET /metrics`): crawlcache itself.
    SelfEndpoint,
    /// `CONNECT host:port`.
    Connect,
    /// An absolute `http://` or `https://` URI, with its primary cache key.
    Absolute {
        /// The primary cache key (SPEC section 2).
        primary: String,
    },
    /// An absolute URI with another scheme.
    UnsupportedScheme,
    /// An absolute URI that cannot be turned into a cache key.
    Unusable,
}

/// One request on its way through the proxy.
pub struct Exchange {
    /// The request head.
    pub parts: Parts,
    /// The request body, until a stage forwards it.
    pub body: Option<Incoming>,
    /// The client's socket address.
    pub peer: SocketAddr,
    /// What the request line addresses.
    pub target: Target,
    /// The target to send upstream: built from the URL as requested, in
    /// its primary-key form (scheme and host lower-cased, userinfo and
    /// fragment dropped, default port elided), so its authority is the
    /// cache key's; `None` unless the target is absolute. Parsed when first
    /// needed (a cache hit never needs it): see [`Exchange::upstream_target`].
    upstream_uri: std::sync::OnceLock<Option<Uri>>,
    /// The request carries content (a body of at least one byte, or chunked).
    pub has_body: bool,
    /// The transfer codings other than `chunked` the request applies
    /// (refused with 501, RFC 9112 section 6.1), as
    /// [`crawlcache_policy::hop_by_hop::other_transfer_codings`] names them.
    pub transfer_codings: Option<String>,
    /// The request asks for a protocol upgrade to WebSocket (`Upgrade:
    /// websocket` with `Connection: upgrade`, RFC 9110 section 7.8).
    pub upgrade: bool,
    /// The request already carries this process's `Via`: a loop.
    pub via_loop: bool,
    /// Whether the target names this proxy itself, once resolved (`None`:
    /// not resolved yet, or its port is not the listener's).
    pub names_self: Option<bool>,
    /// Inside an intercepted tunnel: a `Host` that names another authority
    /// than the CONNECT target (refused with 421).
    pub misdirected: Option<String>,
    /// Where the origin's 1xx interim responses go (the client connection).
    pub interim: Option<crate::wire::interim::InterimSender>,
    /// Total bytes of the request's header fields (names, values, 4 bytes
    /// of separators each).
    pub header_bytes: usize,
    /// The request's `Cache-Control` (and `Pragma`), parsed once.
    pub request_cc: CacheControl,
    /// The robots verdict and what to do with it (`None` when robots
    /// handling does not apply).
    pub robots: Option<RobotsGate>,
    /// Whether the robots gate ran.
    pub robots_checked: bool,
    /// When the request arrived (wall clock, for the audit line and pacing).
    pub arrived: SystemTime,
    /// When the request arrived (monotonic, for durations).
    pub started: Instant,
    /// How many times the cache was looked up for this request (a follower
    /// of a collapsed fetch looks again).
    pub lookups: u32,
    /// The store's [`crawlcache_store::LookupVersion`] of the primary key, read
    /// before the last lookup: unchanged since, that lookup still holds.
    pub looked_up: Option<crawlcache_store::LookupVersion>,
    /// The outcome so far; written by the stages.
    pub status: CacheStatus,
    /// The URL as requested (normalised), when `cache.key_rules` made the
    /// primary key differ from it.
    pub exact_url: Option<String>,
    /// Whether the fleet tier was consulted for this request (fleet mode).
    pub fleet_checked: bool,
    /// Whether the fleet tier filled the local store for this request: its
    /// hit says `detail=fleet`.
    pub from_fleet: bool,
    /// The HTTP version of the upstream response this request got, when it
    /// sent one itself (the origin's, or the parent proxy's): for the
    /// access log.
    pub upstream_version: Option<http::Version>,
}

impl Exchange {
    /// Reads a request once: its target, key, header size and directives.
    pub fn read(req: Request<Incoming>, peer: SocketAddr) -> Exchange {
        let (mut parts, body) = req.into_parts();
        join_cookie_fields(&mut parts.headers);
        let target = classify(&parts.method, &parts.uri);
        let header_bytes = parts.headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
        let request_cc = CacheControl::from_headers(&parts.headers);
        let has_body = !http_body::Body::is_end_stream(&body);
        let via_loop = crawlcache_policy::hop_by_hop::via_names_us(&parts.headers);
        let transfer_codings =
            crawlcache_policy::hop_by_hop::other_transfer_codings(&parts.headers);
        let upgrade =
            crawlcache_policy::hop_by_hop::is_websocket_upgrade(&parts.method, &parts.headers);
        Exchange {
            upstream_uri: std::sync::OnceLock::new(),
            has_body,
            transfer_codings,
            upgrade,
            via_loop,
            names_self: None,
            misdirected: None,
            interim: None,
            parts,
            body: Some(body),
            peer,
            target,
            header_bytes,
            request_cc,
            robots: None,
            robots_checked: false,
            arrived: SystemTime::now(),
            started: Instant::now(),
            lookups: 0,
            looked_up: None,
            status: CacheStatus::default(),
            exact_url: None,
            fleet_checked: false,
            from_fleet: false,
            upstream_version: None,
        }
    }

    /// Rewrites the primary key by the first of `rules` matching the
    /// target (SPEC section 6); the upstream target stays the URL as
    /// requested.
    pub fn apply_key_rules(&mut self, rules: &[crawlcache_policy::key_rules::KeyRule]) {
        if rules.is_empty() {
            // Nothing to rewrite (the default): no copy of the key to compare.
            return;
        }
        if let Target::Absolute { primary } = &mut self.target {
            let key = crawlcache_policy::key_rules::apply(rules, primary);
            if key != *primary {
                self.exact_url = Some(std::mem::replace(primary, key));
            }
        }
    }

    /// The URL as requested, normalised (the primary key unless key rules
    /// rewrote it).
    pub fn url(&self) -> &str {
        self.exact_url.as_deref().unwrap_or(self.primary())
    }

    /// The primary cache key ("" when the target is not an absolute URI).
    pub fn primary(&self) -> &str {
        match &self.target {
            Target::Absolute { primary } => primary,
            _ => "",
        }
    }

    /// The URI to send upstream (the URL as requested, in primary-key form); the
    /// request's own URI when there is none.
    pub fn upstream_target(&self) -> &Uri {
        let parsed = self.upstream_uri.get_or_init(|| match &self.target {
            // The URL as requested (the primary key before key rules).
            Target::Absolute { .. } => self.url().parse::<Uri>().ok(),
            _ => None,
        });
        parsed.as_ref().unwrap_or(&self.parts.uri)
    }

    /// The upstream request for this exchange: `method` on the upstream
    /// target with the client's fields (see
    /// [`crate::upstream::origin::forward_request`]), relaying the origin's 1xx
    /// interim responses to the client.
    pub fn upstream_request(
        &self,
        method: &Method,
        body: crate::wire::body::ProxyBody,
    ) -> Request<crate::wire::body::ProxyBody> {
        let mut req = crate::upstream::origin::forward_request(
            method,
            self.upstream_target(),
            &self.parts.headers,
            body,
            self.parts.version,
        );
        if let Some(tx) = &self.interim {
            tx.relay_for(&mut req);
        }
        req
    }

    /// The request method.
    pub fn method(&self) -> &Method {
        &self.parts.method
    }

    /// True for GET and HEAD, the methods answered from the cache.
    pub fn is_cacheable_method(&self) -> bool {
        self.parts.method == Method::GET || self.parts.method == Method::HEAD
    }

    /// True for HEAD.
    pub fn is_head(&self) -> bool {
        self.parts.method == Method::HEAD
    }

    /// The request's `User-Agent`, if it is text.
    pub fn user_agent(&self) -> Option<&str> {
        self.parts.headers.get(http::header::USER_AGENT).and_then(|v| v.to_str().ok())
    }

    /// The request as received, for the stages that hand it on whole
    /// (admin endpoints, tunnels); `None` when its body was already taken.
    pub fn take_request(&mut self) -> Option<Request<Incoming>> {
        let body = self.body.take()?;
        let parts = std::mem::replace(&mut self.parts, Request::new(()).into_parts().0);
        Some(Request::from_parts(parts, body))
    }

    /// A copy of this request's head as a GET for a background
    /// revalidation, with its own outcome.
    pub fn detached_get(&self) -> Exchange {
        let mut req = Request::new(());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = self.parts.uri.clone();
        *req.headers_mut() = self.parts.headers.clone();
        let (parts, ()) = req.into_parts();
        Exchange {
            upstream_uri: self.upstream_uri.clone(),
            has_body: false,
            transfer_codings: None,
            upgrade: false,
            via_loop: self.via_loop,
            names_self: self.names_self,
            misdirected: None,
            interim: None,
            parts,
            body: None,
            peer: self.peer,
            target: self.target.clone(),
            header_bytes: self.header_bytes,
            request_cc: self.request_cc.clone(),
            robots: self.robots.clone(),
            robots_checked: self.robots_checked,
            arrived: SystemTime::now(),
            started: Instant::now(),
            lookups: 0,
            looked_up: None,
            status: CacheStatus::default(),
            exact_url: self.exact_url.clone(),
            fleet_checked: false,
            from_fleet: false,
            upstream_version: None,
        }
    }
}

/// What a request line with `method` and `uri` addresses.
fn classify(method: &Method, uri: &Uri) -> Target {
    if method == Method::CONNECT {
        return Target::Connect;
    }
    if uri.scheme().is_none() || uri.authority().is_none() {
        return Target::SelfEndpoint;
    }
    if !matches!(uri.scheme_str(), Some("http") | Some("https")) {
        return Target::UnsupportedScheme;
    }
    // The target sent upstream is built from the key: a key that is not a
    // URI (`http://a@b[c:80]/`, which the URI parser takes with host `b[c`)
    // is unusable, rather than forwarded in the client's own spelling.
    match key::primary_key(uri) {
        Some(primary)
            if (plain_host(uri) && primary.len() < MAX_PLAIN_KEY)
                || primary.parse::<Uri>().is_ok() =>
        {
            Target::Absolute { primary }
        }
        _ => Target::Unusable,
    }
}

/// Below this length a key with a [`plain_host`] needs no second parse
/// (the URI parser's own limit is 65,534 bytes).
const MAX_PLAIN_KEY: usize = 60_000;

/// Whether `uri`'s host is letters, digits, `.`, `-` and `_` only: the key
/// built from it (scheme, that host, a port, then the path and query the
/// URI parser already accepted) is then a URI without parsing it again.
/// Anything else (IP literals in brackets, odd characters the parser let
/// into a host) is checked by parsing the key.
fn plain_host(uri: &Uri) -> bool {
    uri.host().is_some_and(|h| {
        !h.is_empty()
            && h.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    })
}

/// Joins a request's `cookie` fields into one, separated by `; ` (RFC 9113
/// section 8.2.3: an HTTP/2 client may split them; they are joined before
/// the request goes to an HTTP/1.1 origin, and before any cache decision
/// looks at them, such as a `Vary: Cookie` secondary key). One field, or
/// none, is left as it is.
pub fn join_cookie_fields(headers: &mut http::HeaderMap) {
    let mut values = headers.get_all(http::header::COOKIE).iter();
    if values.next().is_none() || values.next().is_none() {
        return;
    }
    let mut joined = Vec::new();
    for v in headers.get_all(http::header::COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(v.as_bytes());
    }
    if let Ok(v) = http::HeaderValue::from_bytes(&joined) {
        headers.insert(http::header::COOKIE, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_host_key_is_a_uri_and_an_odd_one_is_checked() {
        // Whatever the parser accepted with a plain host, the key built from
        // it parses too: the shortcut in `classify` never admits a key the
        // full check would refuse.
        for target in [
            "http://Example.COM:8080/a%20b?x=1&y=[2]",
            "HTTP://a_b.example/",
            "http://example.com?q",
            "http://example.com:80",
            "https://x.y/a;b,c!$&'()*+=:@~?d=%22&e=/?",
            "http://user:pw@example.com/p",
            "http://example.com/a?b#c",
        ] {
            let uri: Uri = target.parse().unwrap_or_else(|e| panic!("{target}: {e}"));
            assert!(plain_host(&uri), "{target}");
            let Target::Absolute { primary } = classify(&Method::GET, &uri) else {
                panic!("{target} is not usable")
            };
            assert!(primary.parse::<Uri>().is_ok(), "{target} -> {primary}");
        }
        // Not plain: checked by parsing the key.
        let v6: Uri = "http://[::1]:8080/p".parse().unwrap();
        assert!(!plain_host(&v6));
        assert!(matches!(classify(&Method::GET, &v6), Target::Absolute { .. }));
        // The URI parser takes this one with host `b[c`; its key is no URI.
        let odd: Uri = "http://a@b[c:80]/".parse().expect("the URI parser accepts it");
        assert!(!plain_host(&odd));
        assert!(matches!(classify(&Method::GET, &odd), Target::Unusable));
    }

    #[test]
    fn split_cookie_fields_are_joined_as_rfc_9113_section_8_2_3_says() {
        let mut h = http::HeaderMap::new();
        h.append(http::header::COOKIE, "a=1".parse().unwrap());
        h.append(http::header::COOKIE, "b=2".parse().unwrap());
        h.append(http::header::COOKIE, "c=3".parse().unwrap());
        join_cookie_fields(&mut h);
        let all: Vec<_> = h.get_all(http::header::COOKIE).iter().collect();
        assert_eq!(all, ["a=1; b=2; c=3"]);
        let mut one = http::HeaderMap::new();
        one.append(http::header::COOKIE, "a=1; b=2".parse().unwrap());
        join_cookie_fields(&mut one);
        assert_eq!(one.get(http::header::COOKIE).unwrap(), "a=1; b=2");
    }
}
