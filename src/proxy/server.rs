//! The server: binding the address, the serving threads and their
//! runtimes, the accept loop, and the shutdown sequence.

use super::overflow;
use super::overload;
use super::placement::{place, serve_connection};
use super::shares::{serving_threads, OpenConnection, Shares};
use super::state::{ProxyState, SelfEndpoints, ServeError};
use crate::config::Config;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// File in the data directory holding the running proxy's address.
pub const ADDR_FILE: &str = "proxy.addr";

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
    mut handed: tokio::sync::mpsc::UnboundedReceiver<(
        std::net::TcpStream,
        SocketAddr,
        OpenConnection,
    )>,
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
                    overflow::over_limit(&state, stream, peer, open).await;
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

/// Most threads the serving threads' runtimes run blocking work on
/// (finishing and indexing bodies, verify), all serving threads together;
/// the start-up runtime (`crate::cli::serve`) takes as many. The jobs are
/// short (a body's last write and an entry's insert; the group commit that
/// makes them durable runs on the store's own thread), so when store work
/// lags behind a burst of misses they queue rather than each getting a
/// thread: every thread that allocates keeps its stack and a heap of its
/// own in the allocator (tokio's default of 512 per runtime, and later 64,
/// let resident memory grow past `store.memory_ceiling` by hundreds of MiB
/// in a fill past the budget).
pub const BLOCKING_THREADS: usize = 16;

/// Raises the soft open-file limit to the hard one and logs the result;
/// the limit in force (`None` when it cannot be read).
fn raise_file_limit() -> Option<overload::FileLimit> {
    match overload::raise_open_file_limit() {
        Ok(l) => {
            if l.soft != l.soft_at_start {
                tracing::info!(
                    "raised the soft open-file limit from {} to {} (the hard limit is {})",
                    l.soft_at_start,
                    l.soft,
                    l.hard
                );
            } else {
                tracing::info!("open-file limit: soft {}, hard {}", l.soft, l.hard);
            }
            Some(l)
        }
        Err(e) => {
            tracing::warn!("{e}");
            overload::open_file_limit().ok()
        }
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
/// `ready` is called once with the address bound (the port the system
/// chose when `server.listen` has port 0) when the serving threads accept.
///
/// Errors: the address cannot be bound, a runtime cannot be started, or
/// the store cannot be opened.
pub async fn run(
    config: Config,
    endpoints: SelfEndpoints,
    shutdown: impl std::future::Future<Output = ()>,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    // Polled once now, so that a signal handler it installs is in place
    // before the proxy answers anyone (a SIGTERM right after start must
    // shut down gracefully, not kill).
    let mut shutdown = std::pin::pin!(shutdown);
    let stop_at_once = futures_util::future::poll_immediate(&mut shutdown).await.is_some();
    let file_limit = raise_file_limit();
    let listen = config.server.listen;
    let cannot_listen = |source| ServeError::Listen { addr: listen, source };
    let listener = std::net::TcpListener::bind(listen).map_err(cannot_listen)?;
    listener.set_nonblocking(true).map_err(cannot_listen)?;
    let local_addr =
        listener.local_addr().map_err(ServeError::threads("read the listening address"))?;
    let threads = serving_threads(config.server.threads);
    let mut state = ProxyState::new(config, local_addr)?;
    state.endpoints = endpoints;
    state.overload =
        Arc::new(overload::Overload::new(state.config.server.max_connections, file_limit));
    log_connection_limit(&state, file_limit);
    let mut receivers = Vec::with_capacity(threads);
    let mut handoff = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        handoff.push(tx);
        receivers.push(rx);
    }
    let cpus = crate::wire::net::allowed_cpus();
    let shares = Arc::new(Shares {
        open: (0..threads).map(|_| std::sync::atomic::AtomicUsize::new(0)).collect(),
        handoff,
        cpus,
    });
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
            .map_err(ServeError::threads("start a serving thread's runtime"))?;
        let l = listener.try_clone().map_err(ServeError::threads("share the listening socket"))?;
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
        let spawned = std::thread::Builder::new()
            .name(format!("crawlcache-serve-{i}"))
            .spawn(move || rt.block_on(serve_thread(st, l, i, sh, handed)));
        if let Err(e) = spawned {
            let _ = state.closing.send(true);
            return Err(ServeError::threads("start a serving thread")(e));
        }
    }
    // logrotate renames the access log's file and sends SIGHUP.
    crate::access::spawn_reopener(state.access_log.as_ref(), state.closing.subscribe())
        .map_err(ServeError::threads("handle SIGHUP for the access log"))?;
    ready(local_addr);
    let sampler = spawn_sampler(&state);
    if !stop_at_once {
        shutdown.await;
    }
    let _ = state.closing.send(true);
    let _ = sampler.await;
    finish(&state, &addr_file).await
}

/// Says in the log how many client connections are served at once, and
/// warns when `server.max_connections` may need more open files than the
/// process may have (`file_limit`, from [`raise_file_limit`]).
fn log_connection_limit(state: &ProxyState, file_limit: Option<overload::FileLimit>) {
    let (max, nofile) = (state.overload.max_connections, file_limit.map_or(0, |l| l.soft));
    let needed = (max as u64)
        .saturating_mul(overload::FDS_PER_CONNECTION)
        .saturating_add(overload::reserve(nofile));
    if state.config.server.max_connections != 0 && nofile != 0 && needed > nofile {
        tracing::warn!(
            "server.max_connections = {max} may need about {needed} open files, more than the open-file limit of {nofile}: \
             beyond that accepting waits, and the store may fail to open files; lower it or raise the limit (LimitNOFILE=, ulimit -n)"
        );
    }
    tracing::info!(
        "serving at most {max} client connections at once (server.max_connections{})",
        if state.config.server.max_connections == 0 {
            ", derived from the open-file limit"
        } else {
            ""
        }
    );
}

/// The status page's history: the counters sampled once a second
/// ([`crate::metrics::history::SAMPLE_INTERVAL`]) until the proxy closes.
fn spawn_sampler(state: &Arc<ProxyState>) -> tokio::task::JoinHandle<()> {
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
}

/// The end of [`run`]: finishes what is in flight (at most
/// `server.shutdown_timeout`), flushes the robots cache, the audit and
/// access logs and the index, and removes the address file.
///
/// Errors: the index cannot be flushed.
async fn finish(state: &Arc<ProxyState>, addr_file: &std::path::Path) -> Result<(), ServeError> {
    let grace = state.config.server.shutdown_timeout;
    tracing::info!(
        "shutting down: finishing responses in flight (at most {} s)",
        grace.as_secs_f64()
    );
    if !drain(state).await {
        tracing::warn!("shutdown timeout reached; unfinished store writes are dropped (nothing partial is kept)");
    }
    if let Err(e) = state.robots.flush() {
        tracing::warn!("{e}");
    }
    if let Err(e) = state.audit.flush() {
        tracing::warn!("cannot write the audit log in {}: {e}", state.audit.dir().display());
    }
    if let Some(log) = state.access_log.clone() {
        log.flush_within(grace).await;
    }
    state.store.flush().map_err(ServeError::Flush)?;
    let _ = std::fs::remove_file(addr_file);
    tracing::info!("cache index flushed; bye");
    Ok(())
}
