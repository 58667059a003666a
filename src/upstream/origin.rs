//! The one client for origins: the only code that talks to them, used by
//! the proxy and by the robots.txt fetcher (an OPTIONS for a whole server
//! takes a connection of its own through [`super::asterisk`]).

use super::error::{classify, head_too_large, HeadLimits, UpstreamError, UpstreamErrorKind};
use super::h2::{H2Mode, H2Pool, Sent};
use super::in_flight::InFlight;
use super::parent::{Connector, ParentProxy};
use crate::wire::body::{Inbound, ProxyBody};
use crawlcache_base::locks::lock;
use crawlcache_policy::upstream_fields::upstream_fields;
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// The pooled HTTP client for origins.
///
/// Tolerant of real-world response heads: whitespace between a field name
/// and its colon is removed (RFC 9112 section 5.1), obsolete line folding
/// is unfolded (section 5.2), and heads are bounded by [`HeadLimits`].
/// An idempotent request (RFC 9110 section 9.2.2) whose body is empty and
/// that fails on a pooled connection before any response arrived (the
/// origin closed it, reset it, or the write broke) is sent once more on a
/// new connection (RFC 9112 section 9.3.1).
///
/// With a parent proxy ([`Upstream::with_parent`]), origins it routes are
/// reached through it: `http://` requests are sent to it in absolute form
/// (with `Proxy-Authorization` when credentials are configured),
/// `https://` origins through a `CONNECT` tunnel with TLS to the origin
/// over it. Failures on the way to the parent name the parent.
///
/// Each thread that sends requests gets its own connection pool (built on
/// first use from the same settings): a serving thread's requests then go
/// out on connections driven by that thread's own event loop, as nginx's
/// workers each keep their own upstream connections. With one pool shared
/// by all threads, a request often met a connection driven by another
/// thread, and every exchange on it crossed threads twice (to send, and
/// with the response): a 16 KiB miss took 130-140 us of CPU instead of
/// 92-100 (benches/runs/load-2026-12.md). Idle connections are then kept per
/// thread: up to [`MAX_IDLE_PER_ORIGIN`] per origin on each.
///
/// Response heads are parsed with room for [`COMPACT_FIELDS`] fields
/// first: the HTTP library allocates and fills room for as many fields as
/// it may accept on every response it parses, 144 KiB for 3,000, which
/// cost a 1 KiB miss about 4 us of its 42 (9 % of the samples). An origin
/// whose head has more fields than that (but no more than
/// `upstream.max_head_fields`) is remembered, and its requests go to a
/// second pool of connections with room for them; the request that found
/// out is sent again there when it may be (an idempotent method without a
/// body), and otherwise answered 502 with a sentence saying so (the next
/// request to that origin gets the room).
#[derive(Clone)]
pub struct Upstream {
    pools: Arc<PoolSettings>,
    response_timeout: Duration,
    limits: HeadLimits,
    parent: Option<Arc<ParentProxy>>,
    h2: Arc<H2Pool>,
    versions: Arc<Versions>,
    in_flight: Arc<InFlight>,
}

/// Which origins are spoken to over HTTP/2 (`[upstream]` `http2`,
/// `http1_hosts`, `h2c_hosts`); none by default.
#[derive(Debug, Clone, Default)]
pub struct Versions {
    /// Ask `https://` origins for `h2` by ALPN.
    pub alpn: bool,
    /// Host patterns always spoken to over HTTP/1.1.
    pub http1_hosts: Vec<String>,
    /// Host patterns of `http://` origins spoken to with prior knowledge.
    pub h2c_hosts: Vec<String>,
}

/// Why [`Upstream::send_h2`] did not give a response.
enum Http1Instead {
    /// The origin chose HTTP/1.1: the request, unsent, for those clients.
    Request(Box<Request<ProxyBody>>),
    /// It failed.
    Error(UpstreamError),
}

impl Upstream {
    /// A client verifying origins' TLS with `tls`, with the given connect
    /// timeout, response-head timeout and idle-connection lifetime.
    pub fn new(
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pool_idle_timeout: Duration,
    ) -> Upstream {
        Self::with_limits(
            tls,
            connect_timeout,
            response_timeout,
            pool_idle_timeout,
            HeadLimits::default(),
        )
    }

    /// [`Upstream::new`] with the given response-head limits.
    pub fn with_limits(
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pool_idle_timeout: Duration,
        limits: HeadLimits,
    ) -> Upstream {
        Self::with_parent(tls, connect_timeout, response_timeout, pool_idle_timeout, limits, None)
    }

    /// [`Upstream::with_limits`] reaching origins through `parent` (except
    /// those its `no_proxy` list exempts); `None` contacts every origin
    /// directly. The connect timeout then applies to the parent.
    pub fn with_parent(
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pool_idle_timeout: Duration,
        limits: HeadLimits,
        parent: Option<ParentProxy>,
    ) -> Upstream {
        let parent = parent.map(Arc::new);
        let mut h2_tls = (*tls).clone();
        h2_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let h2_connector =
            crate::upstream::origin_connector(Arc::new(h2_tls), connect_timeout, parent.clone());
        let h2 = Arc::new(H2Pool::new(h2_connector, limits, pool_idle_timeout));
        let connector = crate::upstream::origin_connector(tls, connect_timeout, parent.clone());
        let pools = Arc::new(PoolSettings {
            connector,
            pool_idle_timeout,
            limits,
            roomy_origins: std::sync::Mutex::new(std::collections::HashSet::new()),
            roomy_count: std::sync::atomic::AtomicUsize::new(0),
        });
        Upstream {
            pools,
            response_timeout,
            limits,
            parent,
            h2,
            versions: Arc::new(Versions::default()),
            in_flight: Arc::new(InFlight::new(0, Duration::ZERO)),
        }
    }

    /// This client speaking HTTP/2 to the origins `versions` names (see
    /// [`super::h2`]); by default every origin gets HTTP/1.1.
    pub fn with_versions(mut self, versions: Versions) -> Upstream {
        self.versions = Arc::new(versions);
        self
    }

    /// This client sending at most `per_origin` requests at once to each
    /// origin, waiting at most `wait` for a turn beyond that (0: no cap,
    /// the default).
    pub fn with_in_flight_cap(mut self, per_origin: usize, wait: Duration) -> Upstream {
        self.in_flight = Arc::new(InFlight::new(per_origin, wait));
        self
    }

    /// Open HTTP/2 connections to origins, by origin, for the status page.
    pub fn h2_connections(&self) -> Vec<(String, usize)> {
        self.h2.open_connections()
    }

    /// Starts sending `req` with this thread's client (see [`Upstream`]):
    /// the one with room for `upstream.max_head_fields` fields when `roomy`,
    /// else the one with room for [`COMPACT_FIELDS`].
    fn request(
        &self,
        req: Request<ProxyBody>,
        roomy: bool,
    ) -> hyper_util::client::legacy::ResponseFuture {
        THREAD_CLIENTS.with(|clients| {
            let mut clients = clients.borrow_mut();
            let mine = Arc::as_ptr(&self.pools);
            let at = match clients.iter().position(|c| std::ptr::eq(c.settings.as_ptr(), mine)) {
                Some(at) => at,
                None => {
                    // Pools of upstreams dropped since go with their settings.
                    clients.retain(|c| c.settings.strong_count() > 0);
                    clients.push(ThreadClient {
                        settings: Arc::downgrade(&self.pools),
                        compact: None,
                        roomy: None,
                    });
                    clients.len() - 1
                }
            };
            let mine = &mut clients[at];
            let fields = if roomy { self.limits.max_fields } else { self.pools.compact_fields() };
            let client = if roomy { &mut mine.roomy } else { &mut mine.compact };
            client.get_or_insert_with(|| self.pools.client(fields)).request(req)
        })
    }

    /// The parent proxy `uri` goes through, if any.
    fn parent_for(&self, uri: &Uri) -> Option<&ParentProxy> {
        self.parent.as_deref().filter(|p| p.routes(uri))
    }

    /// `host:port` of the parent proxy a request to `uri` goes through,
    /// `None` when it goes to the origin directly (for the access log).
    pub fn parent_name(&self, uri: &Uri) -> Option<&str> {
        self.parent_for(uri).map(ParentProxy::name)
    }

    /// Sends `req` (absolute URI) once it has a turn under
    /// `upstream.max_in_flight_per_origin` (waiting at most
    /// `upstream.queue_timeout`), then waits for the response head, at
    /// most the configured response timeout (for both attempts together
    /// when the request is resent, see [`Upstream`]). The response's body
    /// holds the turn until it ends or is dropped ([`Inbound`]). Over
    /// HTTP/2 when the origin is asked for it and chooses it
    /// ([`super::h2`]), else over HTTP/1.1. Errors: an [`UpstreamError`]
    /// (a timeout naming the cap when no turn came).
    pub async fn send(
        &self,
        mut req: Request<ProxyBody>,
    ) -> Result<Response<Inbound>, UpstreamError> {
        let host = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
        let (parent, plain_via_parent) = self.parent_leg(&mut req);
        let key = origin_key(req.uri());
        let mode = self.h2_mode(req.uri(), &key, plain_via_parent);
        let turn = self.in_flight.enter(&key).await.map_err(|n| no_turn(&host, n))?;
        let exchange = async {
            let req = match mode {
                Some(mode) => match self.send_h2(&key, req, mode, &host).await {
                    Ok(resp) => return self.check_response(resp, &host, None),
                    Err(Http1Instead::Error(e)) => return Err(e),
                    Err(Http1Instead::Request(req)) => *req,
                },
                None => req,
            };
            self.send_http1(req, &host, parent.filter(|_| plain_via_parent)).await
        };
        let resp = match tokio::time::timeout(self.response_timeout, exchange).await {
            Err(_) => return Err(self.timed_out(&host, parent)),
            Ok(result) => result?,
        };
        // The turn goes with the body: the request is in flight until the
        // body has arrived (or is dropped), not only its head; so does an
        // HTTP/2 stream's place in its connection's count.
        let (mut parts, body) = resp.into_parts();
        let stream = parts.extensions.remove::<Arc<super::h2::OpenStream>>();
        let stream = stream.map(|s| s as Arc<dyn Send + Sync>);
        Ok(Response::from_parts(parts, Inbound::new(body, turn, stream)))
    }

    /// How `uri` (of origin `key`) is sent over HTTP/2, if it is:
    /// `https://` by ALPN when `upstream.http2` is on and the origin has not
    /// chosen `http/1.1` before, `http://` with prior knowledge when its host
    /// is in `upstream.h2c_hosts` and it does not go to a parent proxy in
    /// plain (`plain_via_parent`); never for a host in `upstream.http1_hosts`.
    fn h2_mode(&self, uri: &Uri, key: &str, plain_via_parent: bool) -> Option<H2Mode> {
        let v = &self.versions;
        if !v.alpn && v.h2c_hosts.is_empty() {
            return None;
        }
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        if crate::config::host_matches(&v.http1_hosts, host) {
            return None;
        }
        match uri.scheme_str() {
            Some("https") if v.alpn && !self.h2.chose_http1(key) => Some(H2Mode::Alpn),
            Some("http")
                if !plain_via_parent && crate::config::host_matches(&v.h2c_hosts, host) =>
            {
                Some(H2Mode::PriorKnowledge)
            }
            _ => None,
        }
    }

    /// Sends `req` to origin `key` over HTTP/2 ([`super::h2::H2Pool`]),
    /// once more when the first attempt failed in a way that left it
    /// unprocessed (`REFUSED_STREAM`, `GOAWAY`, a closed connection) and it
    /// may be resent (an idempotent method without a body). Errors: the
    /// request back when the origin chose HTTP/1.1 meanwhile, or the
    /// failure as a 502/504 names it.
    async fn send_h2(
        &self,
        key: &str,
        req: Request<ProxyBody>,
        mode: H2Mode,
        host: &str,
    ) -> Result<Response<Incoming>, Http1Instead> {
        let replay = replayable(&req);
        let failure = match self.h2.send(key, req, mode).await {
            Ok(Sent::Response(r)) => return Ok(r),
            Ok(Sent::UseHttp1(r)) => return Err(Http1Instead::Request(r)),
            Err(f) => f,
        };
        let again = match replay {
            Some((parts, ())) if failure.retryable() => {
                tracing::debug!(
                    "HTTP/2 request to {host} was not processed ({failure}); sending it once more"
                );
                Request::from_parts(parts, ProxyBody::empty())
            }
            _ => {
                return Err(Http1Instead::Error(classify(
                    host,
                    &failure,
                    failure.connect,
                    &self.limits,
                )))
            }
        };
        match self.h2.send(key, again, mode).await {
            Ok(Sent::Response(r)) => Ok(r),
            Ok(Sent::UseHttp1(r)) => Err(Http1Instead::Request(r)),
            Err(f) => Err(Http1Instead::Error(classify(host, &f, f.connect, &self.limits))),
        }
    }

    /// Sends `req` over HTTP/1.1 with this thread's pooled clients, resent
    /// once when that is safe (see [`Upstream`]), and checks the response
    /// (`plain_parent`: the parent proxy a plain request went to).
    async fn send_http1(
        &self,
        req: Request<ProxyBody>,
        host: &str,
        plain_parent: Option<&ParentProxy>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let roomy = self.pools.is_roomy(req.uri());
        let uri = req.uri().clone();
        let mut replay = replayable(&req);
        let mut not_resent = false;
        let result = {
            let first = match self.request(req, roomy).await {
                Err(e) if replay.is_some() && failed_before_response(&e) => {
                    tracing::debug!("request to {host} failed on a pooled connection before any response ({e}); sending it once more");
                    let again = replay.as_ref().map(|(p, ())| {
                        Request::from_parts(
                            copy_head(&p.method, &p.uri, p.version, &p.headers).0,
                            ProxyBody::empty(),
                        )
                    });
                    match again {
                        Some(r) => self.request(r, roomy).await,
                        None => Err(e),
                    }
                }
                other => other,
            };
            match first {
                Err(e)
                    if !roomy
                        && head_too_large(&e)
                        && !over_head_bytes(&e, self.limits.max_bytes) =>
                {
                    // More fields than the compact parser has room for
                    // (not more bytes than allowed, which the roomy one
                    // refuses as well): this origin gets the room from now on.
                    self.pools.remember_roomy(&uri);
                    match replay.take() {
                        Some((parts, ())) => {
                            tracing::debug!(
                            "origin {host} sent a response head with more than {} fields; sending the request again with room for {}",
                            self.pools.compact_fields(),
                            self.limits.max_fields
                        );
                            self.request(Request::from_parts(parts, ProxyBody::empty()), true).await
                        }
                        None => {
                            not_resent = true;
                            Err(e)
                        }
                    }
                }
                other => other,
            }
        };
        match result {
            Ok(resp) => self.check_response(resp, host, plain_parent),
            Err(e) if not_resent => Err(UpstreamError {
                kind: UpstreamErrorKind::Protocol,
                message: format!(
                    "origin {host} sent a response head larger than the first parse has room for ({} fields), and this request cannot be sent again (not idempotent, or it has a body); later requests to {host} are parsed with room for upstream.max_head_fields = {} fields and upstream.max_head_bytes = {} bytes: {}",
                    self.pools.compact_fields(),
                    self.limits.max_fields,
                    self.limits.max_bytes,
                    classify(host, &e, e.is_connect(), &self.limits).message
                ),
            }),
            Err(e) => Err(classify(host, &e, e.is_connect(), &self.limits)),
        }
    }

    /// Sends `req`, an OPTIONS whose URI has an empty path: a question about
    /// the origin server as a whole (RFC 9112 section 3.2.4). It goes on a
    /// new connection of its own (see [`super::asterisk`]) as `OPTIONS *`,
    /// or, to a parent proxy for a plain `http://` origin, as `OPTIONS
    /// http://host:port` for the parent to send the asterisk. Bounded by
    /// the response timeout, checked, failing and taking a turn under
    /// `upstream.max_in_flight_per_origin` as [`Upstream::send`]; never
    /// sent twice.
    pub async fn send_server_options(
        &self,
        mut req: Request<ProxyBody>,
    ) -> Result<Response<Inbound>, UpstreamError> {
        let host = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
        let (parent, plain_via_parent) = self.parent_leg(&mut req);
        let limits = super::asterisk::Limits {
            max_fields: self.limits.max_fields,
            max_bytes: self.limits.max_bytes,
        };
        let key = origin_key(req.uri());
        let turn = self.in_flight.enter(&key).await.map_err(|n| no_turn(&host, n))?;
        let exchange = super::asterisk::send(self.pools.connector.clone(), req, limits);
        match tokio::time::timeout(self.response_timeout, exchange).await {
            Err(_) => Err(self.timed_out(&host, parent)),
            Ok(Ok(resp)) => self
                .check_response(resp, &host, parent.filter(|_| plain_via_parent))
                .map(|resp| resp.map(|body| Inbound::new(body, turn, None))),
            Ok(Err(e)) => Err(classify(&host, e.cause(), e.connect, &self.limits)),
        }
    }

    /// The parent proxy `req` goes through, if any, and whether it goes to
    /// it as a plain `http://` request, which then carries the parent's
    /// credentials itself (a CONNECT tunnel sends them on CONNECT).
    fn parent_leg(&self, req: &mut Request<ProxyBody>) -> (Option<&ParentProxy>, bool) {
        let parent = self.parent_for(req.uri());
        let plain_via_parent =
            parent.is_some() && req.uri().scheme() == Some(&http::uri::Scheme::HTTP);
        if plain_via_parent {
            if let Some(auth) = parent.and_then(|p| p.authorization(req.uri())) {
                req.headers_mut().insert(http::header::PROXY_AUTHORIZATION, auth);
            }
        }
        (parent, plain_via_parent)
    }

    /// The error for an origin `host` that sent no response head within the
    /// response timeout.
    fn timed_out(&self, host: &str, parent: Option<&ParentProxy>) -> UpstreamError {
        let via =
            parent.map(|p| format!(" (through the parent proxy {})", p.name())).unwrap_or_default();
        UpstreamError {
            kind: UpstreamErrorKind::Timeout,
            message: format!(
                "origin {host} did not answer within {} s{via}",
                self.response_timeout.as_secs_f64()
            ),
        }
    }

    /// `resp` from origin `host`, unless it is refused: a 407 from the
    /// parent proxy that a plain request went to (`plain_parent`), a
    /// transfer coding other than chunked (C51), a head beyond the limits.
    fn check_response(
        &self,
        resp: Response<Incoming>,
        host: &str,
        plain_parent: Option<&ParentProxy>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        if let (Some(parent), StatusCode::PROXY_AUTHENTICATION_REQUIRED) =
            (plain_parent, resp.status())
        {
            return Err(UpstreamError {
                kind: UpstreamErrorKind::Connect,
                message: format!(
                    "the parent proxy {} answered 407 Proxy Authentication Required for origin {host} (credentials missing or wrong in upstream.proxy)",
                    parent.name()
                ),
            });
        }
        // C51: a transfer coding the HTTP library did not apply (it
        // decodes chunked only) would reach the client and the store
        // as if it were the content once the hop-by-hop field is gone.
        if let Some(codings) = crawlcache_policy::hop_by_hop::other_transfer_codings(resp.headers())
        {
            return Err(UpstreamError {
                kind: UpstreamErrorKind::Protocol,
                message: format!(
                    "origin {host} sent a response with Transfer-Encoding: {codings}, a transfer coding crawlcache does not decode (only chunked, RFC 9112 section 6.1); refused rather than handed on coded"
                ),
            });
        }
        match head_size(&resp) {
            (bytes, fields) if bytes > self.limits.max_bytes || fields > self.limits.max_fields => Err(UpstreamError {
                kind: UpstreamErrorKind::Protocol,
                message: format!(
                    "origin {host} sent a response head of {bytes} bytes and {fields} fields, beyond the limits (upstream.max_head_bytes = {} bytes, upstream.max_head_fields = {})",
                    self.limits.max_bytes, self.limits.max_fields
                ),
            }),
            _ => Ok(resp),
        }
    }
}

/// Idle HTTP/1.1 connections kept per origin by each thread's pool: as
/// many as `upstream.max_in_flight_per_origin`'s default lets be busy at
/// once. With 32, a sustained 64 requests at once to one HTTP/1.1 origin
/// closed the connections beyond 32 as they came back and opened them
/// again with a new TLS handshake (benches/runs/h2-2026-12-07.md: 10 to
/// 15 requests per connection).
pub const MAX_IDLE_PER_ORIGIN: usize = 64;

/// Fields the first parse of an origin's response head has room for (see
/// [`Upstream`]); `upstream.max_head_fields` when that is smaller.
pub const COMPACT_FIELDS: usize = 256;

/// Origins remembered as sending heads beyond [`COMPACT_FIELDS`] fields, at
/// most; the set is emptied when full (each origin then costs one more
/// resent request to be learned again).
const MAX_ROOMY_ORIGINS: usize = 4096;

/// What each thread's client for an [`Upstream`] is built from.
struct PoolSettings {
    connector: Connector,
    pool_idle_timeout: Duration,
    limits: HeadLimits,
    /// Origins (`scheme://authority`) whose heads need more room than
    /// [`COMPACT_FIELDS`], shared by every thread's clients.
    roomy_origins: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The number of `roomy_origins`, read without the lock.
    roomy_count: std::sync::atomic::AtomicUsize,
}

/// The key an origin is remembered by: scheme and authority of `uri`
/// (`http://example.org:8080`).
fn origin_key(uri: &Uri) -> String {
    format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map(|a| a.as_str()).unwrap_or("")
    )
}

impl PoolSettings {
    /// Room for fields in the compact clients' parser.
    fn compact_fields(&self) -> usize {
        COMPACT_FIELDS.min(self.limits.max_fields)
    }

    /// Whether requests to the origin of `uri` go to the roomy clients: it
    /// sent a head beyond the compact room before, or there is no
    /// difference.
    fn is_roomy(&self, uri: &Uri) -> bool {
        if self.limits.max_fields <= COMPACT_FIELDS {
            return true;
        }
        // No origin remembered (the usual case): no key, no lock.
        if self.roomy_count.load(std::sync::atomic::Ordering::Acquire) == 0 {
            return false;
        }
        lock(&self.roomy_origins).contains(&origin_key(uri))
    }

    /// Remembers that the origin of `uri` needs the roomy clients.
    fn remember_roomy(&self, uri: &Uri) {
        let mut set = lock(&self.roomy_origins);
        if set.len() >= MAX_ROOMY_ORIGINS {
            set.clear();
        }
        set.insert(origin_key(uri));
        self.roomy_count.store(set.len(), std::sync::atomic::Ordering::Release);
    }

    /// A new client with its own connection pool: at most
    /// [`MAX_IDLE_PER_ORIGIN`] idle
    /// connections per origin, each closed after `pool_idle_timeout`, and
    /// room for `fields` fields in a response head.
    fn client(&self, fields: usize) -> Client<Connector, ProxyBody> {
        Client::builder(TokioExecutor::new())
            // The timer lets the pool close idle connections in the
            // background; without it they were only dropped when a request
            // to the same origin found them expired.
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .pool_idle_timeout(self.pool_idle_timeout)
            .pool_max_idle_per_host(MAX_IDLE_PER_ORIGIN)
            .http1_allow_spaces_after_header_name_in_responses(true)
            .http1_allow_obsolete_multiline_headers_in_responses(true)
            .http1_max_headers(fields)
            .http1_max_buf_size(self.limits.max_bytes.max(8192))
            .build(self.connector.clone())
    }
}

/// One thread's clients for one [`Upstream`], each built on first use.
struct ThreadClient {
    settings: std::sync::Weak<PoolSettings>,
    compact: Option<Client<Connector, ProxyBody>>,
    roomy: Option<Client<Connector, ProxyBody>>,
}

type ThreadClients = std::cell::RefCell<Vec<ThreadClient>>;

/// True when the connection `err` happened on had received at least
/// `max_bytes` since it sent the request: a head refused as too large was
/// refused for its bytes (`upstream.max_head_bytes`), not for its fields
/// (the library reports both alike). Counted on the connection
/// ([`super::parent::ReadSinceWrite`]); encrypted bytes on TLS, a few
/// percent more than the head's.
fn over_head_bytes(err: &hyper_util::client::legacy::Error, max_bytes: usize) -> bool {
    let Some(info) = err.connect_info() else { return false };
    let mut extras = http::Extensions::new();
    info.get_extras(&mut extras);
    extras.get::<super::parent::ReadSinceWrite>().is_some_and(|r| r.bytes() >= max_bytes)
}

thread_local! {
    /// This thread's clients, one per live [`Upstream`] (by its settings).
    static THREAD_CLIENTS: ThreadClients = const { std::cell::RefCell::new(Vec::new()) };
}

/// The size of a response head as received, in bytes (status line, and per
/// field its name, value, `: ` and CRLF), and its number of fields.
fn head_size(resp: &Response<Incoming>) -> (usize, usize) {
    let fields = resp.headers().len();
    let bytes = resp
        .headers()
        .iter()
        .fold(17, |n, (name, value)| n + name.as_str().len() + value.len() + 4);
    (bytes, fields)
}

/// A copy of `req`'s head when it may be resent automatically: an
/// idempotent method (RFC 9110 section 9.2.2) and no body to replay.
fn replayable(req: &Request<ProxyBody>) -> Option<(http::request::Parts, ())> {
    let idempotent =
        matches!(req.method().as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE");
    if !idempotent || !http_body::Body::is_end_stream(req.body()) {
        return None;
    }
    Some(copy_head(req.method(), req.uri(), req.version(), req.headers()))
}

/// A request head (without extensions) with these parts.
fn copy_head(
    method: &Method,
    uri: &Uri,
    version: Version,
    headers: &HeaderMap,
) -> (http::request::Parts, ()) {
    let mut copy = Request::new(());
    *copy.method_mut() = method.clone();
    *copy.uri_mut() = uri.clone();
    *copy.version_mut() = version;
    *copy.headers_mut() = headers.clone();
    copy.into_parts()
}

/// True when `err` says the connection failed before any response
/// arrived: closed before the response (an idle pooled connection the
/// origin had closed), reset, or a broken pipe while writing. A failure to
/// connect is not one (it is not retried here: the origin is unreachable).
fn failed_before_response(err: &hyper_util::client::legacy::Error) -> bool {
    if err.is_connect() {
        return false;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if let Some(h) = e.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() || h.is_closed() {
                return true;
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof)
            {
                return true;
            }
        }
        src = e.source();
    }
    false
}

/// The failure of a request that got no turn to origin `host` within
/// `upstream.queue_timeout`: a timeout (504; the origin counts as
/// unreachable for serving stale, RFC 9111 section 4.2.4) whose message
/// says the origin was not asked and names the cap.
fn no_turn(host: &str, n: super::in_flight::NoTurn) -> UpstreamError {
    UpstreamError {
        kind: UpstreamErrorKind::Timeout,
        message: format!(
            "no turn to origin {host} within {} s: {} requests were in flight to it all that time (upstream.max_in_flight_per_origin; upstream.queue_timeout bounds the wait); the origin was not asked",
            n.waited.as_secs_f64(),
            n.cap
        ),
    }
}

/// The request to send to the origin for a client's request: `method` on
/// `uri` with the fields [`upstream_fields`] makes from the client's
/// `headers` (addressing and framing from what is sent, never from what
/// was received; `Via` names the version the request was `received`
/// over), as HTTP/1.1 (the version the origin is spoken to over is chosen
/// when it is sent).
pub fn forward_request(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: ProxyBody,
    received: Version,
) -> Request<ProxyBody> {
    let unknown_length = !http_body::Body::is_end_stream(&body)
        && http_body::Body::size_hint(&body).exact().is_none();
    let headers = upstream_fields(uri, headers, unknown_length, received);
    let mut req = Request::new(body);
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}
