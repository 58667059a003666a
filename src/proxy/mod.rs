//! The proxy: one accept loop, one place that routes each request
//! ([`route`]), the stages that carry routes out ([`stages`]), and
//! graceful shutdown.
//!
//! Shutdown: on SIGINT or SIGTERM the listener is closed, connections are
//! asked to finish their current exchange, background store writes are
//! given `server.shutdown_timeout` to complete, and the index is flushed.

pub mod collapse;
pub mod exchange;
pub mod invalidate;
pub mod body_cache;
pub mod meta_cache;
pub mod overload;
pub mod route;
pub mod stages;
pub mod tunnel;

use crate::metrics::Metrics;
use crate::wire::body::ProxyBody;
use crate::wire::origin as upstream;
use crate::cache::policy::PolicyConfig;
use crate::config::Config;
use crate::store::Store;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Serves requests addressed to crawlcache itself (origin-form: the admin
/// endpoints). Given to [`run`] by the caller, so the proxy does not depend
/// on what those endpoints are.
pub type SelfEndpoints = Arc<
    dyn Fn(Arc<ProxyState>, Request<Incoming>, SocketAddr) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<ProxyBody>> + Send>>
        + Send
        + Sync,
>;

/// Endpoints that answer every origin-form request with 404 (for states
/// that do not listen, such as command-line tools).
pub fn no_endpoints() -> SelfEndpoints {
    Arc::new(|_, _, _| {
        Box::pin(async {
            let status = crate::wire::cache_status::CacheStatus::default();
            crate::wire::error::error_response(http::StatusCode::NOT_FOUND, "crawlcache: no endpoints here", &status)
        })
    })
}

/// File in the data directory holding the running proxy's address.
pub const ADDR_FILE: &str = "proxy.addr";

/// Everything a request needs, shared by all connections.
pub struct ProxyState {
    /// The configuration in force.
    pub config: Config,
    /// Cache policy tunables derived from `config`.
    pub policy: PolicyConfig,
    /// The body store and index.
    pub store: Store,
    /// The client for origins.
    pub upstream: upstream::Upstream,
    /// Counters.
    pub metrics: Metrics,
    /// Upstream fetches in flight, for collapsed forwarding.
    pub inflight: collapse::Inflight,
    /// Background tasks (store writes, background revalidations) still running.
    pub tasks: Arc<Tasks>,
    /// The address the proxy listens on (for loop detection).
    pub local_addr: SocketAddr,
    /// Offline mode: never contact an origin.
    pub offline: bool,
    /// The local certificate authority used to intercept CONNECT tunnels.
    pub ca: crate::tls::CertificateAuthority,
    /// robots.txt snapshots per origin.
    pub robots: crate::robots::registry::RobotsRegistry,
    /// Crawl-delay pacing per origin.
    pub pacer: Arc<crate::robots::politeness::Pacer>,
    /// The audit trail.
    pub audit: Arc<crate::audit::AuditLog>,
    /// Decoded stored response heads, so hits skip parsing.
    pub meta_cache: meta_cache::MetaCache,
    /// Small stored bodies held in memory for hits (`cache.body_memory`).
    pub body_cache: body_cache::BodyCache,
    /// Set to true at shutdown: client connections (plain and intercepted)
    /// finish their current exchange and close.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// Client connections still open (plain and intercepted).
    pub conns: Arc<Tasks>,
    /// Each serving thread's count of open client connections (set when
    /// serving starts; `crawlcache_client_connections{thread}`).
    pub shares: Option<Arc<Shares>>,
    /// Recent invalidations, so a response still being stored when its URL
    /// is invalidated does not stay (RFC 9111 section 4.4).
    pub invalidations: invalidate::Invalidations,
    /// Requests addressed to crawlcache itself.
    pub endpoints: SelfEndpoints,
    /// Fleet mode (`[fleet]`): what this node shares with the others;
    /// `None` on a single node.
    pub fleet: Option<Arc<crate::fleet::Fleet>>,
    /// `server.max_connections` resolved, the open-file limit, and the
    /// connections beyond the limit ([`overload`]).
    pub overload: Arc<overload::Overload>,
}

impl crate::audit::HasAuditLog for ProxyState {
    fn audit_log(&self) -> &crate::audit::AuditLog {
        &self.audit
    }

    fn request_done(&self, record: &crate::audit::AuditRecord, status: u16, outcome: &'static str) {
        self.metrics.request_done(record, status, outcome);
    }
}

impl ProxyState {
    /// Opens the store in `config.server.data_dir` and builds the state.
    pub fn new(config: Config, local_addr: SocketAddr) -> Result<ProxyState, String> {
        let dir = &config.server.data_dir;
        crate::fsutil::create_private_dir(dir).map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
        let store = Store::open_with(dir, &config.store_options()).map_err(|e| format!("cannot open the cache in {}: {e}", dir.display()))?;
        Self::build(config, store, local_addr)
    }

    fn build(config: Config, store: Store, local_addr: SocketAddr) -> Result<ProxyState, String> {
        let dir = &config.server.data_dir;
        let ca = crate::tls::CertificateAuthority::load_or_create(dir).map_err(|e| e.to_string())?;
        let upstream = origin_client(&config)?;
        let robots = robots_registry(&config, &store, upstream.clone())?;
        let pacer = Arc::new(crate::robots::politeness::Pacer::new());
        // Fleet mode: robots.txt snapshots shared through Redis.
        let fleet = crate::fleet::Fleet::start(&config, &store)?;
        if let Some(f) = &fleet {
            robots.set_shared(Arc::new(crate::fleet::robots::FleetRobots { fleet: f.clone() }));
        }
        if config.robots.honor_crawl_delay {
            // A robots.txt fetch counts as a request to its origin (for the
            // fleet as a whole in fleet mode).
            let (p, min, f) = (pacer.clone(), config.robots.min_delay, fleet.clone());
            robots.set_fetch_hook(Arc::new(move |o: &crate::robots::snapshot::Origin| {
                p.reserve(&o.key(), min, std::time::SystemTime::now());
                if let Some(f) = f.clone() {
                    let key = o.key();
                    tokio::spawn(async move { f.reserve_slot(&key, min).await });
                }
            }));
        }
        let audit_dir = crate::audit::audit_dir(dir);
        let audit = Arc::new(
            crate::audit::AuditLog::open(&audit_dir).map_err(|e| format!("cannot open the audit log in {}: {e}", audit_dir.display()))?,
        );
        let config_max_connections = config.server.max_connections;
        Ok(ProxyState {
            closing: tokio::sync::watch::channel(false).0,
            conns: Arc::new(Tasks::default()),
            shares: None,
            meta_cache: meta_cache::MetaCache::new(config.store.head_cache()),
            body_cache: body_cache::BodyCache::new(config.cache.body_memory, config.cache.body_memory_max_object),
            robots,
            pacer,
            audit,
            policy: config.policy(),
            offline: config.server.offline,
            config,
            store,
            upstream,
            metrics: Metrics::default(),
            inflight: collapse::Inflight::default(),
            tasks: Arc::new(Tasks::default()),
            local_addr,
            ca,
            invalidations: invalidate::Invalidations::default(),
            endpoints: no_endpoints(),
            fleet,
            overload: Arc::new(overload::Overload::new(config_max_connections, overload::open_file_limit().ok())),
        })
    }
}

/// The client for origins as `[upstream]` configures it (timeouts, pool,
/// head limits, `extra_ca_file`, the parent `proxy` and its `no_proxy`
/// list; never the proxy environment variables). Errors: the extra CA file
/// or the parent proxy cannot be used.
pub fn origin_client(config: &Config) -> Result<upstream::Upstream, String> {
    let up = &config.upstream;
    let extra = &up.extra_ca_file;
    let extra = if extra.as_os_str().is_empty() { None } else { Some(extra.as_path()) };
    let tls = crate::tls::upstream_client_config(extra).map_err(|e| format!("configuration key `upstream.extra_ca_file`: {e}"))?;
    let parent = if up.proxy.is_empty() {
        None
    } else {
        let no_proxy: Vec<String> = up.no_proxy.iter().map(|e| e.to_string()).collect();
        let parent = crate::wire::parent::ParentProxy::new(up.proxy.as_str(), &no_proxy)
            .map_err(|e| format!("configuration key `upstream.proxy`: {e}"))?;
        tracing::info!(parent = parent.name(), no_proxy = ?no_proxy, "origins are reached through the parent proxy");
        Some(parent)
    };
    Ok(upstream::Upstream::with_parent(
        tls,
        up.connect_timeout,
        up.response_timeout,
        up.pool_idle_timeout,
        upstream::HeadLimits {
            max_bytes: usize::try_from(up.max_head_bytes).unwrap_or(usize::MAX),
            max_fields: up.max_head_fields,
        },
        parent,
    ))
}

/// The robots.txt registry over the store's index, fetching through `upstream`.
pub fn robots_registry(config: &Config, store: &Store, upstream: upstream::Upstream) -> Result<crate::robots::registry::RobotsRegistry, String> {
    let tree = store.extra_tree("robots").map_err(|e| format!("cannot open the robots.txt snapshots: {e}"))?;
    let fetch = crate::robots::http_fetch::UpstreamRobotsFetch::new(
        upstream,
        format!("crawlcache/{}", env!("CARGO_PKG_VERSION")),
        config.upstream.response_timeout,
        config.robots.max_size as usize,
    );
    Ok(crate::robots::registry::RobotsRegistry::new(tree, Arc::new(fetch), config.robots.clone()))
}

/// Counts background tasks so shutdown can wait for them.
#[derive(Default)]
pub struct Tasks {
    running: AtomicUsize,
    idle: Notify,
}

/// Held while a background task runs.
pub struct TaskGuard(Arc<Tasks>);

impl Tasks {
    /// How many are running now.
    pub fn count(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Registers a running task until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> TaskGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        TaskGuard(self.clone())
    }

    /// Waits until no task runs.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The HTTP/1.1 server settings for client connections (plain and
/// intercepted): keep-alive, a read buffer of 512 KiB, request fields
/// bounded by bytes as on the origin side (`exchange::MAX_HEADER_BYTES`,
/// 256 KiB, whose 431 names the limit), so crawlers carrying many cookies
/// (one `Cookie` line, RFC 6265 section 5.4) are served; header read
/// timeout. The field count stays at the HTTP library's 100, which it parses
/// without allocating: raising it makes every request, hits included, set
/// aside room for that many fields (measured: half the hit throughput at
/// 8192).
pub fn client_http1() -> http1::Builder {
    let mut b = http1::Builder::new();
    // hyper's header-read timeout (30 s) is armed for every request head:
    // a coarse timer keeps it cheap (crate::wire::coarse_timer).
    b.keep_alive(true).max_buf_size(512 * 1024).timer(crate::wire::coarse_timer::CoarseTimer);
    b
}

/// Drives a client connection until it ends; once `closing` turns true it
/// is asked (with `graceful`) to finish its current exchange and close.
pub async fn serve_until_closing<C, E>(
    conn: C,
    mut closing: tokio::sync::watch::Receiver<bool>,
    graceful: impl FnOnce(std::pin::Pin<&mut C>),
) -> Result<(), E>
where
    C: std::future::Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        _ = async { let _ = closing.wait_for(|c| *c).await; } => {
            graceful(conn.as_mut());
            conn.await
        }
    }
}

/// Resolves when SIGINT or SIGTERM arrives.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The serving threads' shares of the client connections: each thread's
/// count of open connections, and a way to hand it a connection another
/// thread accepted.
///
/// Every thread accepts from the one listening socket, and a burst of
/// connections (a crawler opening its pool) is often accepted whole by the
/// thread that woke first: measured, all 16 connections of a miss run on
/// one thread, that thread at 90 % of a core, the other idle, a sixth of
/// the machine unused. So a connection goes to the thread its client's CPU
/// points to, unless that thread already serves more than [`SHARE_SLACK`]
/// connections beyond another thread's count: then to the least busy
/// thread, handed over before a byte of it is read (what nginx's
/// `accept_mutex` and `reuseport` do in their ways). With more threads
/// than CPUs, the threads beyond the CPU count get the connections the
/// slack passes on.
///
/// The client's CPU ([`crate::wire::net::incoming_cpu`]) keeps the
/// connections of one client thread on one serving thread: a client
/// thread opens its connections in a burst from the CPU it runs on. On a
/// machine where the crawler runs beside the proxy, each request and
/// response then wakes the one thread its partner talks to, and the
/// scheduler can keep the two on one CPU; spread evenly instead, every
/// exchange woke a thread on the other CPU, which on a virtual machine
/// costs an interrupt between CPUs each time. Measured (2 cores, wrk -t2
/// -c32, 1 KiB hits, 2 s runs): spread evenly, 23,000 to 27,000 such
/// interrupts in 2 s and 105,000 to 120,000 requests/s; kept by client
/// CPU, under 250 interrupts and 150,000 to 165,000 requests/s when each
/// wrk thread's connections ended up on one serving thread. The slack is
/// what lets a client thread's burst stay together: with 4, the first
/// burst was split after 5 connections.
pub struct Shares {
    open: Vec<std::sync::atomic::AtomicUsize>,
    handoff: Vec<tokio::sync::mpsc::UnboundedSender<(std::net::TcpStream, SocketAddr, OpenConnection)>>,
    /// The CPUs the proxy may run on, in increasing order (empty: not
    /// known); a client's CPU counts by its place in this list.
    cpus: Vec<usize>,
}

/// How many connections a serving thread may already serve beyond the
/// least busy thread's count and still be given a new connection its
/// client's CPU points to (so it can end up one beyond this).
pub const SHARE_SLACK: usize = 8;

impl Shares {
    /// Open client connections per serving thread, in thread order.
    pub fn open_connections(&self) -> Vec<usize> {
        self.open.iter().map(|n| n.load(std::sync::atomic::Ordering::Relaxed)).collect()
    }

    /// The thread that should serve a connection accepted by thread `me`
    /// whose packets came in on `cpu`: the thread that CPU points to (its
    /// place among the CPUs the proxy may use, read at start, modulo the
    /// thread count; a CPU outside that list by its own number), unless
    /// that thread already serves more than [`SHARE_SLACK`] connections
    /// beyond the least busy thread: then the least busy thread. With `cpu`
    /// unknown: `me` unless another thread serves fewer connections.
    fn pick(&self, me: usize, cpu: Option<usize>) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.open.len();
        let load = |t: usize| self.open[t].load(Relaxed);
        let (least, count) = (0..n).map(|t| (t, load(t))).min_by_key(|&(_, l)| l).unwrap_or((me, 0));
        let Some(cpu) = cpu else {
            // Nothing to keep together: the least busy thread.
            return if count < load(me) { least } else { me };
        };
        let preferred = self.cpus.binary_search(&cpu).unwrap_or(cpu) % n;
        if load(preferred) > count + SHARE_SLACK {
            least
        } else {
            preferred
        }
    }
}

/// One serving thread (number `me`): accepts connections from `listener`,
/// and takes those other threads hand it (see [`Shares`]), until the proxy
/// is closing, serving each on this thread's runtime; then waits (at most
/// `server.shutdown_timeout`) for the exchanges and background tasks in
/// flight, so the runtime is not dropped under them.
async fn serve_thread(
    state: Arc<ProxyState>,
    listener: std::net::TcpListener,
    me: usize,
    shares: Arc<Shares>,
    mut handed: tokio::sync::mpsc::UnboundedReceiver<(std::net::TcpStream, SocketAddr, OpenConnection)>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("a serving thread cannot use the listening socket: {e}");
            return;
        }
    };
    let mut closing = state.closing.subscribe();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // One load per connection (the count shutdown needs anyway).
                let open = state.conns.count();
                if overload::is_over(&state.overload, open) {
                    overload::over_limit(&state, stream, peer, open).await;
                    continue;
                }
                place(&state, &shares, me, stream, peer);
            }
            Some((std_stream, peer, open)) = handed.recv() => {
                match tokio::net::TcpStream::from_std(std_stream) {
                    Ok(stream) => serve_connection(&state, stream, peer, open),
                    Err(e) => tracing::warn!("cannot serve a connection from {peer} handed over by another thread: {e}"),
                }
            }
            _ = closing.wait_for(|c| *c) => break,
        }
    }
    drop(listener);
    drain(&state).await;
}

/// Waits, at most `server.shutdown_timeout`, until no client connection and
/// no background task runs. Returns whether they all finished in time.
async fn drain(state: &ProxyState) -> bool {
    let (conns, tasks) = (&state.conns, &state.tasks);
    tokio::time::timeout(state.config.server.shutdown_timeout, async {
        conns.wait_idle().await;
        tasks.wait_idle().await;
    })
    .await
    .is_ok()
}

/// Serves `stream` on the thread [`Shares::pick`] chooses, handing it over
/// when that is not this thread (`me`).
fn place(state: &Arc<ProxyState>, shares: &Arc<Shares>, me: usize, stream: tokio::net::TcpStream, peer: SocketAddr) {
    // Counted at once in the share of the thread that will serve it, so
    // the next accept of a burst sees it.
    let to = shares.pick(me, crate::wire::net::incoming_cpu(&stream));
    let open = OpenConnection::new(shares.clone(), to, state.conns.enter());
    if to != me {
        let std_stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("cannot hand the connection from {peer} to another serving thread: {e}; it is closed");
                return;
            }
        };
        if let Err(tokio::sync::mpsc::error::SendError((std_stream, peer, open))) = shares.handoff[to].send((std_stream, peer, open)) {
            // That thread has stopped: serve it here.
            if let Ok(stream) = tokio::net::TcpStream::from_std(std_stream) {
                let here = OpenConnection::new(shares.clone(), me, state.conns.enter());
                drop(open);
                serve_connection(state, stream, peer, here);
            }
        }
        return;
    }
    serve_connection(state, stream, peer, open);
}

/// Serves one accepted client connection on the current runtime (refused
/// at once when the client is not allowed by `server.allow_clients`).
/// `open`: the connection in its serving thread's count ([`Shares`]).
fn serve_connection(state: &Arc<ProxyState>, stream: tokio::net::TcpStream, peer: SocketAddr, open: OpenConnection) {
    let ip = peer.ip();
    if !crate::wire::net::is_loopback(ip) && !state.config.server.allow_clients.iter().any(|n| n.contains(ip)) {
        tracing::warn!("refused connection from {peer}: not in server.allow_clients");
        return;
    }
    let _ = stream.set_nodelay(true);
    let st = state.clone();
    let (io, interim) = crate::wire::interim::InterimIo::new(crate::wire::sendfile::SendfileIo::new(stream, state.config.server.sendfile));
    let svc = service_fn(move |req| route::handle(st.clone(), req, peer, interim.clone()));
    let conn = client_http1().serve_connection(io, svc).with_upgrades();
    let closing = state.closing.subscribe();
    tokio::spawn(async move {
        let _open = open;
        let result = serve_until_closing(conn, closing, |c| c.graceful_shutdown()).await;
        if let Err(e) = result {
            tracing::debug!("connection from {peer} ended with an error: {e}");
        }
    });
}

/// One open connection in a serving thread's count ([`Shares`]) and in
/// the proxy's ([`ProxyState::conns`], taken when it was accepted, so a
/// burst handed to other threads counts against `server.max_connections`
/// at once), until dropped.
struct OpenConnection {
    shares: Arc<Shares>,
    me: usize,
    _conn: TaskGuard,
}

impl OpenConnection {
    fn new(shares: Arc<Shares>, me: usize, conn: TaskGuard) -> OpenConnection {
        shares.open[me].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenConnection { shares, me, _conn: conn }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.shares.open[self.me].fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Most threads each serving thread's runtime runs blocking work on
/// (finishing and indexing bodies, verify), all serving threads together:
/// when store work lags behind a burst of misses the jobs queue instead of
/// each getting a thread (tokio's default allows 512 per runtime, and every
/// thread keeps its stack and malloc arena: resident memory grew past the
/// store.memory_ceiling with them).
pub const BLOCKING_THREADS: usize = 64;

/// How many threads serve connections for `server.threads` (0: one per CPU
/// core, at least one).
pub fn serving_threads(configured: usize) -> usize {
    match configured {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Binds the configured address and serves until `shutdown` resolves.
///
/// Connections are served by `server.threads` threads, each with its own
/// single-threaded runtime accepting from the same listening socket; a
/// connection is handed once, before a byte of it is read, to the thread
/// [`Shares`] chooses, and stays there (tasks it spawns too), so an
/// exchange never waits for another thread to pick it up. The
/// caller's runtime only waits for `shutdown`, then for the threads to
/// finish what is in flight (at most `server.shutdown_timeout`).
///
/// Errors: the address cannot be bound, a runtime cannot be started, or
/// the store cannot be opened.
pub async fn run(config: Config, endpoints: SelfEndpoints, shutdown: impl std::future::Future<Output = ()>) -> Result<(), String> {
    // Polled once now, so that a signal handler it installs is in place
    // before the proxy answers anyone (a SIGTERM right after start must
    // shut down gracefully, not kill).
    let mut shutdown = std::pin::pin!(shutdown);
    let stop_at_once = futures_util::future::poll_immediate(&mut shutdown).await.is_some();
    let file_limit = match overload::raise_open_file_limit() {
        Ok(l) => {
            if l.soft != l.soft_at_start {
                tracing::info!("raised the soft open-file limit from {} to {} (the hard limit is {})", l.soft_at_start, l.soft, l.hard);
            } else {
                tracing::info!("open-file limit: soft {}, hard {}", l.soft, l.hard);
            }
            Some(l)
        }
        Err(e) => {
            tracing::warn!("{e}");
            overload::open_file_limit().ok()
        }
    };
    let listen = config.server.listen;
    let listener = std::net::TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let local_addr = listener.local_addr().map_err(|e| format!("cannot read the listening address: {e}"))?;
    let threads = serving_threads(config.server.threads);
    let mut state = ProxyState::new(config, local_addr)?;
    state.endpoints = endpoints;
    state.overload = Arc::new(overload::Overload::new(state.config.server.max_connections, file_limit));
    let (max, nofile) = (state.overload.max_connections, file_limit.map_or(0, |l| l.soft));
    let needed = (max as u64).saturating_mul(overload::FDS_PER_CONNECTION).saturating_add(overload::reserve(nofile));
    if state.config.server.max_connections != 0 && nofile != 0 && needed > nofile {
        tracing::warn!(
            "server.max_connections = {max} may need about {needed} open files, more than the open-file limit of {nofile}: \
             beyond that accepting waits, and the store may fail to open files; lower it or raise the limit (LimitNOFILE=, ulimit -n)"
        );
    }
    tracing::info!("serving at most {max} client connections at once (server.max_connections{})", if state.config.server.max_connections == 0 { ", derived from the open-file limit" } else { "" });
    let mut receivers = Vec::with_capacity(threads);
    let mut handoff = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        handoff.push(tx);
        receivers.push(rx);
    }
    let cpus = crate::wire::net::allowed_cpus();
    let shares = Arc::new(Shares { open: (0..threads).map(|_| std::sync::atomic::AtomicUsize::new(0)).collect(), handoff, cpus });
    state.shares = Some(shares.clone());
    let state = Arc::new(state);
    // Every runtime is built before any thread starts, so a failure stops
    // the start-up rather than leaving fewer threads serving.
    let mut runtimes = Vec::with_capacity(threads);
    for _ in 0..threads {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads((BLOCKING_THREADS / threads).max(4))
            .build()
            .map_err(|e| format!("cannot start a serving thread's runtime: {e}"))?;
        let l = listener.try_clone().map_err(|e| format!("cannot share the listening socket: {e}"))?;
        runtimes.push((rt, l));
    }
    drop(listener);
    tracing::info!(
        "crawlcache listening on http://{local_addr} (data directory {}, {}, {threads} serving thread{})",
        state.config.server.data_dir.display(),
        if state.offline { "offline: no origin will be contacted" } else { "online" },
        if threads == 1 { "" } else { "s" }
    );
    // Tells `crawlcache cache ...` where the running proxy answers while it
    // holds the index.
    let addr_file = state.config.server.data_dir.join(ADDR_FILE);
    if let Err(e) = std::fs::write(&addr_file, format!("{local_addr}\n")) {
        tracing::warn!("cannot write {}: {e}", addr_file.display());
    }
    for (i, ((rt, l), handed)) in runtimes.into_iter().zip(receivers).enumerate() {
        let st = state.clone();
        let sh = shares.clone();
        let spawned = std::thread::Builder::new().name(format!("crawlcache-serve-{i}")).spawn(move || rt.block_on(serve_thread(st, l, i, sh, handed)));
        if let Err(e) = spawned {
            let _ = state.closing.send(true);
            return Err(format!("cannot start a serving thread: {e}"));
        }
    }
    // The status page's history: the counters sampled once a second.
    let sampler = {
        let st = state.clone();
        let mut closing = state.closing.subscribe();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::metrics::history::SAMPLE_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => st.metrics.sample(std::time::SystemTime::now()),
                    _ = closing.wait_for(|c| *c) => break,
                }
            }
        })
    };
    if !stop_at_once {
        shutdown.await;
    }
    let _ = state.closing.send(true);
    let _ = sampler.await;
    let grace = state.config.server.shutdown_timeout;
    tracing::info!("shutting down: finishing responses in flight (at most {} s)", grace.as_secs_f64());
    if !drain(&state).await {
        tracing::warn!("shutdown timeout reached; unfinished store writes are dropped (nothing partial is kept)");
    }
    if let Err(e) = state.robots.flush() {
        tracing::warn!("{e}");
    }
    if let Err(e) = state.audit.flush() {
        tracing::warn!("cannot write the audit log in {}: {e}", state.audit.dir().display());
    }
    state.store.flush().map_err(|e| format!("flushing the cache index failed: {e}"))?;
    let _ = std::fs::remove_file(&addr_file);
    tracing::info!("cache index flushed; bye");
    Ok(())
}

#[cfg(test)]
mod share_tests {
    use super::{Shares, SHARE_SLACK};
    use std::sync::atomic::Ordering::Relaxed;

    /// Shares for `threads` serving threads on a machine whose CPUs are
    /// numbered 0 to `cpus` - 1.
    fn shares(threads: usize, cpus: usize) -> Shares {
        shares_on(threads, (0..cpus).collect())
    }

    /// Shares for `threads` serving threads on the CPUs `cpus`.
    fn shares_on(threads: usize, cpus: Vec<usize>) -> Shares {
        let handoff = (0..threads).map(|_| tokio::sync::mpsc::unbounded_channel().0).collect();
        Shares { open: (0..threads).map(|_| std::sync::atomic::AtomicUsize::new(0)).collect(), handoff, cpus }
    }

    /// Accepts a connection from `cpu` on thread 0 and counts it where
    /// `pick` sends it.
    fn accept(s: &Shares, cpu: Option<usize>) -> usize {
        let to = s.pick(0, cpu);
        s.open[to].fetch_add(1, Relaxed);
        to
    }

    #[test]
    fn two_client_threads_on_two_cpus_get_a_serving_thread_each() {
        let s = shares(2, 2);
        // wrk -t2 -c32: the two threads' connections arrive interleaved.
        for i in 0..32 {
            let cpu = i % 2;
            assert_eq!(accept(&s, Some(cpu)), cpu, "connection {i} from CPU {cpu}");
        }
        assert_eq!(s.open_connections(), vec![16, 16]);
        // CPU numbers beyond the thread count wrap around.
        assert_eq!(s.pick(1, Some(3)), 1);
        assert_eq!(s.pick(1, Some(6)), 0);
    }

    #[test]
    fn clients_all_on_one_cpu_are_still_spread_within_the_slack() {
        let s = shares(2, 2);
        for _ in 0..32 {
            accept(&s, Some(0));
        }
        let open = s.open_connections();
        assert_eq!(open.iter().sum::<usize>(), 32);
        assert!(open[0].abs_diff(open[1]) <= SHARE_SLACK + 1, "{open:?}");
        // The first connections stay together on the CPU's thread.
        a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(&shares(2, 2));
    }

    /// Connections from CPU 0 to an idle `s` of two threads: the first
    /// beyond-the-slack-many go to thread 0, the next to thread 1.
    fn a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(s: &Shares) {
        let first: Vec<usize> = (0..=SHARE_SLACK).map(|_| accept(s, Some(0))).collect();
        assert!(first.iter().all(|&t| t == 0), "{first:?}");
        assert_eq!(accept(s, Some(0)), 1, "one beyond the slack goes to the idle thread");
    }

    #[test]
    fn with_more_threads_than_cpus_a_cpu_still_keeps_its_clients_together() {
        // One CPU, two threads (a container limited to one CPU): a client
        // thread's connections stay on one thread up to the slack.
        a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(&shares(2, 1));
        let s = shares(4, 2);
        let from_cpu1: Vec<usize> = (0..4).map(|_| accept(&s, Some(1))).collect();
        assert_eq!(from_cpu1, vec![1, 1, 1, 1]);
        assert_eq!(accept(&s, Some(0)), 0);
    }

    #[test]
    fn a_client_cpu_counts_by_its_place_among_the_cpus_the_proxy_may_use() {
        // A cpuset of CPUs 4 and 6: both even, yet two places.
        let s = shares_on(2, vec![4, 6]);
        assert_eq!(s.pick(0, Some(4)), 0);
        assert_eq!(s.pick(0, Some(6)), 1);
    }

    #[test]
    fn an_unknown_cpu_goes_to_the_least_busy_thread() {
        let s = shares(2, 2);
        for _ in 0..10 {
            accept(&s, None);
        }
        assert_eq!(s.open_connections(), vec![5, 5]);
    }
}
