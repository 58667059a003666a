//! Connection placement: which serving thread serves an accepted
//! connection (`super::shares::Shares::pick`), handing it over before a
//! byte is read, and serving it there.

use super::shares::{OpenConnection, Shares};
use super::shutdown::serve_until_closing;
use super::state::ProxyState;
use super::{conn, route};
use hyper::service::service_fn;
use std::net::SocketAddr;
use std::sync::Arc;

/// Serves `stream` on the thread `Shares::pick` chooses, handing it over
/// when that is not this thread (`me`).
pub fn place(
    state: &Arc<ProxyState>,
    shares: &Arc<Shares>,
    me: usize,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
) {
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
        if let Err(tokio::sync::mpsc::error::SendError((std_stream, peer, open))) =
            shares.handoff[to].send((std_stream, peer, open))
        {
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
pub fn serve_connection(
    state: &Arc<ProxyState>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    open: OpenConnection,
) {
    let ip = peer.ip();
    if !crate::wire::net::is_loopback(ip)
        && !state.config.server.allow_clients.iter().any(|n| n.contains(ip))
    {
        tracing::warn!("refused connection from {peer}: not in server.allow_clients");
        return;
    }
    let _ = stream.set_nodelay(true);
    let st = state.clone();
    let (io, interim) = crate::wire::interim::InterimIo::new(
        crate::wire::sendfile::SendfileIo::new(stream, state.config.server.sendfile),
    );
    let svc = service_fn(move |req| route::handle(st.clone(), req, peer, interim.clone()));
    let conn = conn::client_http1().serve_connection(io, svc).with_upgrades();
    let closing = state.closing.subscribe();
    tokio::spawn(async move {
        let _open = open;
        let result = serve_until_closing(conn, closing, |c| c.graceful_shutdown()).await;
        if let Err(e) = result {
            tracing::debug!("connection from {peer} ended with an error: {e}");
        }
    });
}
