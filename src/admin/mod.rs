//! Endpoints addressed to crawlcache itself (origin-form requests, or
//! absolute-form ones naming the proxy), under the access rules of
//! [`auth`] (docs/CASES.md C54):
//!
//! - `GET /` and `GET /status`: the status page ([`status`]), which polls
//!   `GET /status.json`.
//! - `GET /cache/browse[?q=TEXT&by=host|prefix|url][&after=CURSOR]` and
//!   `GET /cache/entry?url=URL`: the cache browser ([`browse`]), HTML
//!   pages linked from the status page.
//! - `GET /metrics`: Prometheus text.
//! - `GET /stats`: JSON counters and store figures.
//! - `GET /cache/show?url=URL`: the stored variants of a URL, as JSON.
//! - `GET /cache/ls[?host=H][&prefix=URL][&json=1]`: the stored responses,
//!   one line each, streamed ([`crate::ops::inspect`]).
//! - `GET /cache/cat?url=URL[&decode=1]`: a stored body, streamed
//!   ([`crate::ops::inspect::pick`]).
//! - `POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION`:
//!   removes the selected responses from the cache and the record
//!   ([`crate::ops::maintain`]), answering with the counts as JSON; `GET` with the
//!   same query counts what it would remove and removes nothing
//!   (`cache purge --dry-run`).
//! - `POST /cache/prune[?unused_for=DURATION][&records=1]`: removes stale
//!   responses not used for that long ([`crate::ops::maintain::prune`]).
//! - `GET /cache/verify`: checks the store's invariants; `POST
//!   /cache/verify?repair=1` also repairs (a `GET` with `repair` is answered
//!   `405`: nothing changes state over `GET`).
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
pub mod browse;
pub mod endpoints;
pub mod import;
pub mod origin_figures;
pub mod respond;
pub mod stats;
pub mod status;

use crate::metrics::Metrics;
use crate::proxy::{ProxyState, SelfEndpoints};
use crate::wire::body::ProxyBody;
use http::header::HeaderValue;
use http::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;

/// The admin endpoints, for [`crate::proxy::run`].
pub fn endpoints() -> SelfEndpoints {
    std::sync::Arc::new(|state, req, peer| Box::pin(async move { handle(&state, req, peer).await }))
}

/// Serves a request addressed to the proxy: checks it ([`auth::check`]:
/// its `Host`, the token or loopback rule, and whether another page started
/// it), then hands it to its endpoint's function in [`mod@endpoints`] (404 with
/// the list of endpoints for any other path). A refusal is answered `403`
/// (`401` asking a browser for the token on the status page), logged and
/// counted (`crawlcache_admin_refused_total`). Every answer carries
/// `X-Content-Type-Options: nosniff`, `Cross-Origin-Resource-Policy:
/// same-origin` and `X-Frame-Options: DENY`, so no other page can embed or
/// read it.
pub async fn handle<B>(state: &ProxyState, req: Request<B>, peer: SocketAddr) -> Response<ProxyBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut resp = serve(state, req, peer).await;
    let h = resp.headers_mut();
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    resp
}

async fn serve<B>(state: &ProxyState, req: Request<B>, peer: SocketAddr) -> Response<ProxyBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let judged = auth::AdminRequest {
        method: req.method(),
        path: req.uri().path(),
        authority: req.uri().authority().map(|a| a.as_str()),
        headers: req.headers(),
        peer,
        local_addr: state.local_addr,
    };
    if let Err(why) = auth::check(&state.config.server, &judged) {
        Metrics::inc(&state.metrics.admin_refused);
        tracing::warn!("admin: refused {} {} from {peer}: {why}", req.method(), req.uri().path());
        let page =
            status::is_status_path(req.uri().path()) || browse::is_browser_path(req.uri().path());
        if page && why == auth::Refusal::NoToken {
            return status::unauthorized(&why.to_string());
        }
        return respond::text(StatusCode::FORBIDDEN, format!("crawlcache: {why}\n"));
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let q = query.as_str();
    match (method, path.as_str()) {
        (Method::GET, p) if status::is_status_path(p) => status::respond(state, p)
            .unwrap_or_else(|| respond::text(StatusCode::NOT_FOUND, String::new())),
        (Method::GET, "/cache/browse") => browse::browse(state, q).await,
        (Method::GET, "/cache/entry") => browse::entry(state, q).await,
        (Method::GET, "/metrics") => endpoints::metrics(state),
        (Method::GET, "/stats") => respond::json(StatusCode::OK, &stats::stats_json(state)),
        (Method::GET, "/cache/show") => endpoints::show(state, q),
        (Method::GET, "/cache/ls") => endpoints::ls(state, q),
        (Method::GET, "/cache/cat") => endpoints::cat(state, q),
        (Method::POST | Method::DELETE, "/cache/purge") => endpoints::purge(state, q).await,
        (Method::GET, "/cache/purge") => endpoints::purge_preview(state, q).await,
        (Method::POST, "/cache/prune") => endpoints::prune(state, q).await,
        (Method::GET, "/cache/export") => endpoints::export(state, q).await,
        (Method::POST, "/cache/compact") => endpoints::compact(state).await,
        (Method::GET, "/cache/verify") if endpoints::repairs(q) => {
            endpoints::use_post("/cache/verify?repair=1")
        }
        (Method::GET | Method::POST, "/cache/verify") => endpoints::verify(state, q).await,
        (Method::POST, "/cache/import/upload") => import::upload(state, req, q).await,
        (Method::POST, "/cache/import") => import::run(state, q),
        (Method::GET, "/robots/show") => endpoints::robots_show(state, q),
        (Method::POST, "/robots/refresh") => endpoints::robots_refresh(state, q).await,
        // Endpoints that change state, asked with another method.
        (
            _,
            p @ ("/cache/prune"
            | "/cache/compact"
            | "/cache/import"
            | "/cache/import/upload"
            | "/robots/refresh"),
        ) => endpoints::use_post(p),
        _ => endpoints::not_found(),
    }
}
