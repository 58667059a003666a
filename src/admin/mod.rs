//! Endpoints addressed to crawlcache itself (origin-form requests), served
//! to loopback clients only:
//!
//! - `GET /` and `GET /status`: the status page ([`status`]), which polls
//!   `GET /status.json`.
//! - `GET /metrics`: Prometheus text.
//! - `GET /stats`: JSON counters and store figures.
//! - `GET /cache/show?url=URL`: the stored variants of a URL, as JSON.
//! - `GET /cache/ls[?host=H][&prefix=URL][&json=1]`: the stored responses,
//!   one line each, streamed ([`inspect`]).
//! - `GET /cache/cat?url=URL[&decode=1]`: a stored body, streamed
//!   ([`inspect::pick`]).
//! - `POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION`:
//!   removes the selected responses from the cache and the record
//!   ([`maintain`]), answering with the counts as JSON.
//! - `POST /cache/prune[?unused_for=DURATION][&records=1]`: removes stale
//!   responses not used for that long ([`maintain::prune`]).
//! - `GET /cache/verify` (`?repair=1` to fix): checks the store's invariants.
//! - `POST /cache/compact`: compacts the whole pack now (`cache compact`),
//!   answering its sizes before and after as JSON.
//! - `GET /cache/export[?host=H&prefix=URL&filename=NAME&revisits=1]`: the
//!   stored exchanges as a WARC file, streamed ([`crate::warc::export`]);
//!   the field `crawlcache-export-exchanges` says how many exchanges are
//!   planned.
//! - `POST /cache/import/upload?name=NAME` (a WARC file as the body), then
//!   `POST /cache/import?uploads=ID,...`: `crawlcache import` into the
//!   running proxy's store, progress streamed ([`import`]).
//! - `GET /robots/show?origin=ORIGIN`: the robots.txt snapshot of an origin.
//! - `POST /robots/refresh[?origin=ORIGIN]`: a conditional refresh now (of
//!   every known origin without `origin`).

pub mod auth;
pub mod endpoints;
pub mod host_filter;
pub mod import;
pub mod inspect;
pub mod lookup;
pub mod maintain;
pub mod respond;
pub mod stats;
pub mod status;

use crate::proxy::{ProxyState, SelfEndpoints};
use crate::wire::body::ProxyBody;
use http::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;

/// The admin endpoints, for [`crate::proxy::run`].
pub fn endpoints() -> SelfEndpoints {
    std::sync::Arc::new(|state, req, peer| Box::pin(async move { handle(&state, req, peer).await }))
}

/// Serves an origin-form request addressed to the proxy: admits it
/// ([`auth::admitted`]), then hands it to its endpoint's function in
/// [`endpoints`] (404 with the list of endpoints for any other path).
pub async fn handle<B>(state: &ProxyState, req: Request<B>, peer: SocketAddr) -> Response<ProxyBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if let Err(why) = auth::admitted(&state.config.server, req.headers(), peer) {
        if status::is_status_path(req.uri().path()) && !state.config.server.admin_token.trim().is_empty() {
            return status::unauthorized(why);
        }
        return respond::text(StatusCode::FORBIDDEN, format!("crawlcache: {why}\n"));
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let q = query.as_str();
    match (method, path.as_str()) {
        (Method::GET, p) if status::is_status_path(p) => status::respond(state, p).unwrap_or_else(|| respond::text(StatusCode::NOT_FOUND, String::new())),
        (Method::GET, "/metrics") => endpoints::metrics(state),
        (Method::GET, "/stats") => respond::json(StatusCode::OK, &stats::stats_json(state)),
        (Method::GET, "/cache/show") => endpoints::show(state, q),
        (Method::GET, "/cache/ls") => endpoints::ls(state, q),
        (Method::GET, "/cache/cat") => endpoints::cat(state, q),
        (Method::POST | Method::DELETE, "/cache/purge") => endpoints::purge(state, q).await,
        (Method::POST, "/cache/prune") => endpoints::prune(state, q).await,
        (Method::GET, "/cache/export") => endpoints::export(state, q).await,
        (Method::POST, "/cache/compact") => endpoints::compact(state).await,
        (Method::GET, "/cache/verify") => endpoints::verify(state, q).await,
        (Method::POST, "/cache/import/upload") => import::upload(state, req, q).await,
        (Method::POST, "/cache/import") => import::run(state, q),
        (Method::GET, "/robots/show") => endpoints::robots_show(state, q),
        (Method::POST, "/robots/refresh") => endpoints::robots_refresh(state, q).await,
        _ => endpoints::not_found(),
    }
}
