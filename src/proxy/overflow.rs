//! Connections beyond `server.max_connections` (see [`super::overload`]):
//! a few seconds to send one request, answered by crawlcache's own
//! endpoints or with 503.

use super::overload::{
    refuse_now, unavailable, Closed, EVICTION_WAIT, OVERFLOW_HEAD_TIMEOUT, OVERFLOW_SERVE_TIMEOUT,
};
use super::state::ProxyState;
use crate::metrics::Metrics;
use crawlcache_policy::cache_status::CacheStatus;
use std::net::SocketAddr;
use std::sync::Arc;

/// Handles a connection accepted while `open` client connections were
/// open, at or beyond the limit (see the module docs), on the current
/// runtime. When it takes over the slot of a connection that sent nothing,
/// it returns once that one's socket is closed (at most [`EVICTION_WAIT`]),
/// so a flood of idle connections never holds more descriptors than the
/// slots: the accept loop awaits it before accepting the next.
pub async fn over_limit(
    state: &Arc<ProxyState>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    open: usize,
) {
    state.overload.warn(open);
    let Some((mut slot, closing)) = state.overload.enter() else {
        tracing::debug!("connection from {peer} beyond server.max_connections: every slot is serving, answered 503 at once");
        Metrics::inc(&state.metrics.overload_refused);
        refuse_now(&stream, state.overload.max_connections);
        return;
    };
    let state = state.clone();
    tokio::spawn(async move {
        let mut evicted = slot.evicted.take();
        // A byte that has really arrived (readiness alone may be spurious).
        let mut first = [0u8; 1];
        let mut closed: Option<Closed> = None;
        let first_byte = tokio::select! {
            r = stream.peek(&mut first) => matches!(r, Ok(n) if n > 0),
            c = async { match evicted.as_mut() { Some(rx) => rx.await.ok(), None => None } } => {
                closed = c;
                false
            }
            _ = tokio::time::sleep(OVERFLOW_HEAD_TIMEOUT) => false,
        };
        if !first_byte {
            tracing::debug!("connection from {peer} beyond server.max_connections sent nothing in time (or gave its slot to a newer one): answered 503");
            Metrics::inc(&state.metrics.overload_refused);
            refuse_now(&stream, state.overload.max_connections);
            drop(stream);
            drop(slot);
            if let Some(c) = closed {
                let _ = c.send(());
            }
            return;
        }
        slot.started();
        serve_one(state, stream, peer).await;
        drop(slot);
    });
    if let Some(rx) = closing {
        let _ = tokio::time::timeout(EVICTION_WAIT, rx).await;
    }
}

/// Serves one request on a connection beyond the limit (then closes it):
/// origin-form requests go to crawlcache's own endpoints, any other gets
/// [`unavailable`].
async fn serve_one(state: Arc<ProxyState>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let st = state.clone();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let st = st.clone();
        async move {
            let own = req.method() != http::Method::CONNECT
                && req.uri().scheme().is_none()
                && req.uri().authority().is_none();
            if own {
                return Ok::<_, std::convert::Infallible>(
                    (st.endpoints)(st.clone(), req, peer).await,
                );
            }
            Metrics::inc(&st.metrics.overload_refused);
            let status = CacheStatus::default();
            st.metrics.record(status.outcome_for(503));
            Ok(unavailable(st.overload.max_connections, &status))
        }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.keep_alive(false)
        .timer(crate::wire::coarse_timer::CoarseTimer)
        .header_read_timeout(OVERFLOW_HEAD_TIMEOUT);
    let conn = b.serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    if let Err(e) = tokio::time::timeout(OVERFLOW_SERVE_TIMEOUT, conn).await.unwrap_or(Ok(())) {
        tracing::debug!(
            "connection from {peer} beyond server.max_connections ended with an error: {e}"
        );
    }
}
