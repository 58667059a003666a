//! What every request shares: the configuration, the store, the origin
//! client, the robots registry, the metrics and the rest of [`ProxyState`],
//! and how it is built from the configuration.

use super::shares::Shares;
use super::shutdown::Tasks;
use super::{body_cache, invalidate, meta_cache, overload};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::upstream::origin as upstream;
use crate::wire::body::ProxyBody;
use crawlcache_base::collapse;
use crawlcache_policy::cache::PolicyConfig;
use crawlcache_store::{Store, StoreError};
use http::{Request, Response};
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves requests addressed to crawlcache itself (origin-form: the admin
/// endpoints). Given to [`crate::proxy::server::run`] by the caller, so the proxy does not depend
/// on what those endpoints are.
pub type SelfEndpoints = Arc<
    dyn Fn(
            Arc<ProxyState>,
            Request<Incoming>,
            SocketAddr,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<ProxyBody>> + Send>>
        + Send
        + Sync,
>;

/// Endpoints that answer every origin-form request with 404 (for states
/// that do not listen, such as command-line tools).
pub fn no_endpoints() -> SelfEndpoints {
    Arc::new(|_, _, _| {
        Box::pin(async {
            let status = crawlcache_policy::cache_status::CacheStatus::default();
            crate::wire::error::error_response(
                http::StatusCode::NOT_FOUND,
                "crawlcache: no endpoints here",
                &status,
            )
        })
    })
}

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
    pub robots: crawlcache_robots::registry::RobotsRegistry,
    /// Crawl-delay pacing per origin.
    pub pacer: Arc<crawlcache_robots::politeness::Pacer>,
    /// The audit trail.
    pub audit: Arc<crate::audit::AuditLog>,
    /// The access log, when `server.access_log` names a destination.
    pub access_log: Option<Arc<crate::access::AccessLog>>,
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
    pub fleet: Option<Arc<crawlcache_fleet::Fleet>>,
    /// `server.max_connections` resolved, the open-file limit, and the
    /// connections beyond the limit ([`overload`]).
    pub overload: Arc<overload::Overload>,
}

impl crate::wire::body::HasAuditLog for ProxyState {
    fn audit_log(&self) -> &crate::audit::AuditLog {
        &self.audit
    }

    fn request_done(&self, record: &crate::audit::AuditRecord, status: u16, outcome: &'static str) {
        self.metrics.request_done(record, status, outcome);
    }

    fn request_ended(
        &self,
        record: &crate::audit::AuditRecord,
        access: &crate::wire::body::AccessLine,
        elapsed: std::time::Duration,
    ) {
        self.metrics.latency.observe(access.outcome, elapsed);
        if let (Some(log), Some(f)) = (&self.access_log, &access.fields) {
            log.write(&crate::access::format::Entry {
                time: std::time::SystemTime::now(),
                client: f.client,
                method: &record.method,
                url: &record.url,
                key: record.key.as_deref(),
                status: access.status,
                outcome: access.outcome,
                squid_code: f.squid_code,
                bytes: record.bytes,
                elapsed,
                user_agent: f.user_agent.as_deref(),
                robots: access.robots,
                client_version: f.client_version,
                upstream_version: f.upstream_version,
                peer: f.peer.as_ref().map(|(h, p)| (*h, p.as_str())),
                content_type: f.content_type.as_deref(),
            });
        }
    }
}

/// Why the proxy did not start, or did not stop cleanly
/// ([`ProxyState::new`], [`crate::proxy::server::run`]). `Display` names
/// the directory, file, key or address, and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The data directory could not be created.
    #[error("cannot create data directory {}: {source}", path.display())]
    DataDir {
        /// `server.data_dir`.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The store could not be opened (another process holds it, or it is
    /// damaged or of another format).
    #[error("cannot open the cache in {}: {source}", path.display())]
    Store {
        /// `server.data_dir`.
        path: std::path::PathBuf,
        /// The store's error.
        source: StoreError,
    },
    /// The interception CA could not be loaded or created.
    #[error(transparent)]
    Ca(crate::tls::TlsError),
    /// `upstream.extra_ca_file` cannot be used.
    #[error("configuration key `upstream.extra_ca_file`: {0}")]
    ExtraCa(crate::tls::TlsError),
    /// `upstream.proxy` is not a usable proxy URL.
    #[error("configuration key `upstream.proxy`: {0}")]
    ParentProxy(crate::upstream::parent::NotAProxyUrl),
    /// The robots.txt snapshots' tree could not be opened.
    #[error("cannot open the robots.txt snapshots: {0}")]
    Robots(StoreError),
    /// The fleet could not be set up from `[fleet]`.
    #[error("{0}")]
    Fleet(#[from] crawlcache_fleet::redis::FleetError),
    /// The audit log directory could not be opened.
    #[error("cannot open the audit log in {}: {source}", path.display())]
    Audit {
        /// The audit log's directory.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The access log could not be started.
    #[error(transparent)]
    AccessLog(#[from] crate::access::AccessLogError),
    /// `server.listen` could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// `server.listen`.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A step of starting the serving threads failed (`what`: `read the
    /// listening address`, `start a serving thread`, ...).
    #[error("cannot {what}: {source}")]
    Threads {
        /// What could not be done.
        what: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The index could not be flushed at shutdown.
    #[error("flushing the cache index failed: {0}")]
    Flush(StoreError),
}

impl ServeError {
    /// A [`ServeError::Threads`] for `what`, to `map_err` with.
    pub fn threads(what: &'static str) -> impl FnOnce(std::io::Error) -> ServeError {
        move |source| ServeError::Threads { what, source }
    }
}

impl ProxyState {
    /// Opens the store in `config.server.data_dir` and builds the state.
    /// Errors: [`ServeError`].
    pub fn new(config: Config, local_addr: SocketAddr) -> Result<ProxyState, ServeError> {
        let dir = &config.server.data_dir;
        crawlcache_base::fsutil::create_private_dir(dir)
            .map_err(|source| ServeError::DataDir { path: dir.clone(), source })?;
        let store = Store::open_with(dir, &config.store_options())
            .map_err(|source| ServeError::Store { path: dir.clone(), source })?;
        Self::build(config, store, local_addr)
    }

    fn build(
        config: Config,
        store: Store,
        local_addr: SocketAddr,
    ) -> Result<ProxyState, ServeError> {
        let dir = &config.server.data_dir;
        let ca = crate::tls::CertificateAuthority::load_or_create(dir).map_err(ServeError::Ca)?;
        ca.offer_http2(&config.tls);
        let upstream = origin_client(&config)?;
        let robots = robots_registry(&config, &store, upstream.clone())?;
        let pacer = Arc::new(crawlcache_robots::politeness::Pacer::new());
        // Fleet mode: robots.txt snapshots shared through Redis.
        let fleet = crawlcache_fleet::Fleet::start(crawlcache_fleet::NodeSettings {
            config: &config.fleet,
            store: &store,
            max_object_size: config.cache.max_object_size,
            fetch_time: config.upstream.connect_timeout + config.upstream.response_timeout,
            robots_identity: crawlcache_fleet::keys::identity_id(
                &config.robots.user_agent,
                &config.robots.agent,
            ),
            bucket_connector: &|| {
                let tls = crate::upstream::upstream_client_config(None).map_err(|e| {
                    crawlcache_fleet::redis::FleetError::Setup(format!("fleet bucket TLS: {e}"))
                })?;
                Ok(crate::upstream::upstream_connector(tls, config.fleet.timeout))
            },
        })?;
        if let Some(f) = &fleet {
            robots.set_shared(Arc::new(crawlcache_fleet::robots::FleetRobots {
                fleet: f.clone(),
                started: std::time::SystemTime::now(),
            }));
        }
        if config.robots.honor_crawl_delay {
            // A robots.txt fetch counts as a request to its origin (for the
            // fleet as a whole in fleet mode).
            let (p, min, f) = (pacer.clone(), config.robots.min_delay, fleet.clone());
            robots.set_fetch_hook(Arc::new(move |o: &crawlcache_robots::snapshot::Origin| {
                p.reserve(&o.key(), min, std::time::SystemTime::now());
                if let Some(f) = f.clone() {
                    let key = o.key();
                    tokio::spawn(async move { f.reserve_slot(&key, min).await });
                }
            }));
        }
        let audit_dir = crate::audit::audit_dir(dir);
        let audit = Arc::new(
            crate::audit::AuditLog::open_with(&audit_dir, config.audit.mode, config.audit.keep)
                .map_err(|source| ServeError::Audit { path: audit_dir.clone(), source })?,
        );
        let access_log = crate::access::AccessLog::open(&config.server)?.map(Arc::new);
        let config_max_connections = config.server.max_connections;
        Ok(ProxyState {
            closing: tokio::sync::watch::channel(false).0,
            conns: Arc::new(Tasks::default()),
            shares: None,
            meta_cache: meta_cache::MetaCache::new(config.store.memory_budget().head_cache()),
            body_cache: body_cache::BodyCache::new(
                config.cache.body_memory,
                config.cache.body_memory_max_object,
            ),
            robots,
            pacer,
            audit,
            access_log,
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
            overload: Arc::new(overload::Overload::new(
                config_max_connections,
                overload::open_file_limit().ok(),
            )),
        })
    }
}

/// The client for origins as `[upstream]` configures it (timeouts, pool,
/// head limits, `extra_ca_file`, the parent `proxy` and its `no_proxy`
/// list; never the proxy environment variables). Errors: the extra CA file
/// or the parent proxy cannot be used ([`ServeError::ExtraCa`],
/// [`ServeError::ParentProxy`]).
pub fn origin_client(config: &Config) -> Result<upstream::Upstream, ServeError> {
    let up = &config.upstream;
    let extra = &up.extra_ca_file;
    let extra = if extra.as_os_str().is_empty() { None } else { Some(extra.as_path()) };
    let tls = crate::upstream::upstream_client_config(extra).map_err(ServeError::ExtraCa)?;
    let parent = if up.proxy.is_empty() {
        None
    } else {
        let no_proxy: Vec<String> = up.no_proxy.iter().map(|e| e.to_string()).collect();
        let parent = crate::upstream::parent::ParentProxy::new(up.proxy.as_str(), &no_proxy)
            .map_err(ServeError::ParentProxy)?;
        tracing::info!(parent = parent.name(), no_proxy = ?no_proxy, "origins are reached through the parent proxy");
        Some(parent)
    };
    Ok(upstream::Upstream::with_parent(
        tls,
        up.connect_timeout,
        up.response_timeout,
        up.pool_idle_timeout,
        crate::upstream::error::HeadLimits {
            max_bytes: usize::try_from(up.max_head_bytes).unwrap_or(usize::MAX),
            max_fields: up.max_head_fields,
        },
        parent,
    )
    .with_versions(upstream::Versions {
        alpn: up.http2,
        http1_hosts: up.http1_hosts.clone(),
        h2c_hosts: up.h2c_hosts.clone(),
    })
    .with_in_flight_cap(up.max_in_flight_per_origin, up.queue_timeout))
}

/// The robots.txt registry over the store's index, fetching through
/// `upstream`. Errors: [`ServeError::Robots`], its tree cannot be opened.
pub fn robots_registry(
    config: &Config,
    store: &Store,
    upstream: upstream::Upstream,
) -> Result<crawlcache_robots::registry::RobotsRegistry, ServeError> {
    let tree = store.extra_tree("robots").map_err(ServeError::Robots)?;
    let fetch = crate::robots::http_fetch::UpstreamRobotsFetch::new(
        upstream,
        format!("crawlcache/{}", env!("CARGO_PKG_VERSION")),
        config.upstream.response_timeout,
        config.robots.max_size as usize,
    );
    Ok(crawlcache_robots::registry::RobotsRegistry::new(
        tree,
        Arc::new(fetch),
        config.robots.clone(),
    ))
}
