//! One function per admin endpoint (the table is [`super::handle`]).

use super::lookup::{show_json, url_keys};
use super::respond::{
    json, message, query_param, removal_answer, stream_blocking, text, text_ok, EXCHANGES_HEADER,
};
use super::{inspect, maintain};
use crate::proxy::ProxyState;
use crate::wire::body::ProxyBody;
use http::header::HeaderValue;
use http::{Response, StatusCode};

/// Why a purge query selects nothing it may run: answered `400 Bad
/// Request` with this message.
#[derive(Debug, thiserror::Error)]
pub enum PurgeQueryError {
    /// `url` is not an absolute http(s) URL.
    #[error(transparent)]
    Url(#[from] super::lookup::LookupError),
    /// `older_than` is not a duration.
    #[error("older_than: {0}")]
    OlderThan(crawlcache_base::units::UnitError),
    /// Nothing selected, or a bad `host`.
    #[error(transparent)]
    Selection(#[from] maintain::MaintainError),
}

/// The selection of a `POST /cache/purge` query: `url` (its cache key under
/// `rules`, and the exact URL when that differs), `host`, `prefix`,
/// `older_than` (a duration). Errors: [`PurgeQueryError`], a bad URL or
/// duration, or nothing selected.
pub fn purge_selection(
    query: &str,
    rules: &[crawlcache_policy::key_rules::KeyRule],
) -> Result<maintain::PurgeSelection, PurgeQueryError> {
    let mut selection = maintain::PurgeSelection {
        filter: inspect::KeyFilter {
            host: query_param(query, "host"),
            prefix: query_param(query, "prefix"),
        },
        ..Default::default()
    };
    if let Some(url) = query_param(query, "url") {
        selection.urls = url_keys(&url, rules)?;
    }
    if let Some(d) = query_param(query, "older_than") {
        selection.older_than =
            Some(crawlcache_base::units::parse_duration(&d).map_err(PurgeQueryError::OlderThan)?);
    }
    selection.validate()?;
    Ok(selection)
}

/// `GET /cache/cat`: the stored body of `url` (see [`inspect::pick`]),
/// streamed; `X-Crawlcache-Source` says `cache` or `record`,
/// `X-Crawlcache-Key` the store key. 404 when nothing is stored for it;
/// 400 for a bad URL or, with `decode`, a coding that cannot be undone.
fn cat_url(state: &ProxyState, url: &str, decode: bool) -> Response<ProxyBody> {
    let picked = match inspect::pick(&state.store, url, &state.config.cache.key_rules) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return text(
                StatusCode::NOT_FOUND,
                format!(
                    "crawlcache: {url} is not stored (neither in the cache nor in the record)\n"
                ),
            )
        }
        Err(e) => return text(e.status(), message(&e.to_string())),
    };
    let mut body = match picked.body(&state.store, decode) {
        Ok(b) => b,
        Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
    };
    let key = picked.key.clone();
    let mut resp = stream_blocking("application/octet-stream", move |out| {
        std::io::copy(&mut body, out)
            .map(|_| ())
            .inspect_err(|e| tracing::warn!("cache cat {key}: {e}"))
    });
    resp.headers_mut().insert("x-crawlcache-source", HeaderValue::from_static(picked.source()));
    if let Ok(v) = HeaderValue::from_str(&picked.key) {
        resp.headers_mut().insert("x-crawlcache-key", v);
    }
    resp
}

/// `GET /cache/export`: plans the export (a blocking scan of the index),
/// then streams the WARC file as it is written by a blocking task. A client
/// that goes away stops the writing. Exchanges left out are logged.
pub async fn export(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let filter = crate::warc::export::Filter {
        host: query_param(query, "host"),
        prefix: query_param(query, "prefix"),
    };
    if let Err(e) = filter.validate() {
        return text(StatusCode::BAD_REQUEST, message(&e));
    }
    let opts = crate::warc::export::WriteOptions {
        filename: query_param(query, "filename")
            .unwrap_or_else(|| "crawlcache.warc.gz".to_string()),
        description: crate::warc::export::description(&filter),
        revisits: query_param(query, "revisits").is_some_and(|v| v != "0"),
    };
    let store = state.store.clone();
    let planned =
        tokio::task::spawn_blocking(move || crate::warc::export::plan(&store, &filter)).await;
    let (plan, undecodable) = match planned {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            return text(StatusCode::INTERNAL_SERVER_ERROR, format!("export failed: {e}\n"))
        }
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("export failed: {e}\n")),
    };
    for u in &undecodable {
        tracing::warn!("export: leaving out {u}");
    }
    let planned = plan.len() + undecodable.len();
    let store = state.store.clone();
    let mut resp =
        stream_blocking("application/warc", move |out| {
            match crate::warc::export::write(&store, &plan, out, &opts, &mut |_| {}) {
                Ok((_, summary)) => {
                    tracing::info!(
                        exchanges = summary.exchanges,
                        skipped = summary.skipped.len(),
                        "export streamed"
                    );
                    Ok(())
                }
                Err(e) => {
                    tracing::warn!("export stopped: {e}");
                    Err(e)
                }
            }
        });
    resp.headers_mut().insert(EXCHANGES_HEADER, HeaderValue::from(planned));
    resp
}

/// `GET /metrics`: Prometheus text ([`super::stats::prometheus`]).
pub fn metrics(state: &ProxyState) -> Response<ProxyBody> {
    let mut resp = text(StatusCode::OK, super::stats::prometheus(state));
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    resp
}

/// `GET /cache/show?url=URL`: the stored variants and records of a URL.
pub fn show(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    match query_param(query, "url") {
        Some(url) => match show_json(&state.store, &url, &state.config.cache.key_rules) {
            Ok(v) => json(StatusCode::OK, &v),
            Err(e) => text(e.status(), message(&e.to_string())),
        },
        None => text(StatusCode::BAD_REQUEST, "crawlcache: /cache/show needs ?url=URL\n".into()),
    }
}

/// `GET /cache/ls[?host=H][&prefix=URL][&json=1]`: one line per stored
/// response, streamed ([`inspect::Listing`]).
pub fn ls(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let filter = inspect::KeyFilter {
        host: query_param(query, "host"),
        prefix: query_param(query, "prefix"),
    };
    if let Err(e) = filter.validate() {
        return text(StatusCode::BAD_REQUEST, message(&e));
    }
    let as_json = query_param(query, "json").is_some_and(|v| v != "0");
    let spec = inspect::ListSpec {
        filter,
        policy: state.policy.clone(),
        rules: state.config.cache.rules.clone(),
        now: std::time::SystemTime::now(),
    };
    let store = state.store.clone();
    stream_blocking("text/plain; charset=utf-8", move |out| {
        for row in inspect::Listing::new(&store, spec) {
            let row = row.map_err(std::io::Error::other)?;
            writeln!(out, "{}", if as_json { row.json() } else { row.text() })?;
        }
        Ok(())
    })
}

/// `GET /cache/cat?url=URL[&decode=1]`: a stored body, streamed.
pub fn cat(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let Some(url) = query_param(query, "url") else {
        return text(StatusCode::BAD_REQUEST, "crawlcache: /cache/cat needs ?url=URL\n".into());
    };
    let decode = query_param(query, "decode").is_some_and(|v| v != "0");
    cat_url(state, &url, decode)
}

/// `POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION`: the
/// counts removed, as JSON ([`maintain::purge`]). With `then=entry` and a
/// `url` (the cache browser's purge button), a `303 See Other` back to
/// that URL's entry page, which says what was purged, instead of JSON a
/// person would be left looking at.
pub async fn purge(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let selection = match purge_selection(query, &state.config.cache.key_rules) {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
    };
    let store = state.store.clone();
    let now = std::time::SystemTime::now();
    let done = tokio::task::spawn_blocking(move || maintain::purge(&store, &selection, now)).await;
    match (&done, query_param(query, "then").as_deref(), query_param(query, "url")) {
        (Ok(Ok(removed)), Some("entry"), Some(url)) => {
            let to = format!(
                "/cache/entry?url={}&purged={}",
                super::status::query_escape(&url),
                removed.entries
            );
            let mut resp = Response::new(ProxyBody::empty());
            *resp.status_mut() = StatusCode::SEE_OTHER;
            if let Ok(v) = HeaderValue::from_str(&to) {
                resp.headers_mut().insert(http::header::LOCATION, v);
            }
            resp.headers_mut()
                .insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        _ => removal_answer(done),
    }
}

/// `GET /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION`: what
/// the same `POST` would remove, counted and left in place, as JSON
/// (`cache purge --dry-run`; [`maintain::would_purge`]).
pub async fn purge_preview(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let selection = match purge_selection(query, &state.config.cache.key_rules) {
        Ok(s) => s,
        Err(e) => return text(StatusCode::BAD_REQUEST, message(&e)),
    };
    let store = state.store.clone();
    let now = std::time::SystemTime::now();
    removal_answer(
        tokio::task::spawn_blocking(move || maintain::would_purge(&store, &selection, now)).await,
    )
}

/// `POST /cache/prune[?unused_for=DURATION][&records=1]` ([`maintain::prune`]).
pub async fn prune(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let unused_for =
        query_param(query, "unused_for").unwrap_or_else(|| maintain::DEFAULT_UNUSED_FOR.into());
    let unused_for = match crawlcache_base::units::parse_duration(&unused_for) {
        Ok(d) => d,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("crawlcache: unused_for: {e}\n")),
    };
    let spec = maintain::PruneSpec {
        unused_for,
        records: query_param(query, "records").is_some_and(|v| v != "0"),
        policy: state.policy.clone(),
        rules: state.config.cache.rules.clone(),
    };
    let store = state.store.clone();
    let now = std::time::SystemTime::now();
    removal_answer(tokio::task::spawn_blocking(move || maintain::prune(&store, &spec, now)).await)
}

/// `POST /cache/compact`: the pack's sizes before and after, as JSON.
pub async fn compact(state: &ProxyState) -> Response<ProxyBody> {
    let store = state.store.clone();
    match tokio::task::spawn_blocking(move || store.compact()).await {
        Ok(Ok(c)) => json(StatusCode::OK, &serde_json::to_value(c).unwrap_or_default()),
        Ok(Err(e)) => {
            text(StatusCode::INTERNAL_SERVER_ERROR, format!("crawlcache: compaction failed: {e}\n"))
        }
        Err(e) => {
            text(StatusCode::INTERNAL_SERVER_ERROR, format!("crawlcache: compaction failed: {e}\n"))
        }
    }
}

/// Whether a `/cache/verify` query asks for a repair (`repair=1` or
/// `repair=true`).
pub fn repairs(query: &str) -> bool {
    query_param(query, "repair").is_some_and(|v| v == "1" || v == "true")
}

/// `405` for a request to an endpoint that changes state sent with
/// another method than `POST` (a `GET` above all): `Allow: POST`, and the
/// request to send instead (`post`).
pub fn use_post(post: &str) -> Response<ProxyBody> {
    let mut resp =
        text(StatusCode::METHOD_NOT_ALLOWED, format!("crawlcache: this changes state and takes POST only (nothing changes state over GET): POST {post}\n"));
    resp.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// `GET /cache/verify` (checks) or `POST /cache/verify[?repair=1]` (checks
/// and repairs): the store's invariants, as JSON.
pub async fn verify(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let repair = repairs(query);
    let store = state.store.clone();
    match tokio::task::spawn_blocking(move || store.verify(repair)).await {
        Ok(Ok(report)) => json(
            StatusCode::OK,
            &serde_json::json!({ "clean": report.is_clean(), "report": report }),
        ),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("verify failed: {e}\n")),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("verify failed: {e}\n")),
    }
}

/// `GET /robots/show?origin=ORIGIN`: the robots.txt snapshot in force.
pub fn robots_show(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    match query_param(query, "origin")
        .and_then(|o| crawlcache_robots::snapshot::Origin::from_url(&o))
    {
        Some(origin) => match state.robots.current(&origin) {
            Some(rules) => text_ok(crawlcache_robots::registry::describe(
                &rules.snapshot,
                &state.robots.windows(&origin),
                std::time::SystemTime::now(),
            )),
            None => text(
                StatusCode::NOT_FOUND,
                format!("crawlcache: no robots.txt snapshot for {origin} yet\n"),
            ),
        },
        None => text(
            StatusCode::BAD_REQUEST,
            "crawlcache: /robots/show needs ?origin=http://host[:port]\n".into(),
        ),
    }
}

/// `POST /robots/refresh[?origin=ORIGIN]`: a conditional refresh now, of
/// one origin or of every known one.
pub async fn robots_refresh(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let now = std::time::SystemTime::now();
    let origins: Vec<crawlcache_robots::snapshot::Origin> = match query_param(query, "origin") {
        Some(o) => match crawlcache_robots::snapshot::Origin::from_url(&o) {
            Some(origin) => vec![origin],
            None => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("crawlcache: '{o}' is not an origin (http://host[:port])\n"),
                )
            }
        },
        None => state.robots.ages(now).into_iter().map(|(o, _)| o).collect(),
    };
    let mut out = String::new();
    for origin in origins {
        let rules = state.robots.refresh(&origin, now).await;
        out.push_str(&crawlcache_robots::registry::describe(
            &rules.snapshot,
            &state.robots.windows(&origin),
            std::time::SystemTime::now(),
        ));
        out.push('\n');
    }
    text_ok(out)
}

/// Any other path: 404 with the list of endpoints.
pub fn not_found() -> Response<ProxyBody> {
    text(
        StatusCode::NOT_FOUND,
        "crawlcache: this is a forward proxy; send absolute-form requests (GET http://host/path).\n\
         Admin endpoints: GET / (the status page), GET /cache/browse (the cache browser), GET /metrics, GET /stats, GET /cache/show?url=URL, GET /cache/ls[?host=H&prefix=URL&json=1],\n\
         GET /cache/cat?url=URL[&decode=1], POST /cache/purge?url=URL|host=H|prefix=URL|older_than=DURATION (GET: what it would remove),\n\
         POST /cache/prune[?unused_for=DURATION&records=1], GET /cache/verify, POST /cache/verify?repair=1, POST /cache/compact,\n\
         GET /cache/export[?host=H&prefix=URL&revisits=1], POST /cache/import/upload?name=NAME, POST /cache/import?uploads=ID,...,\n\
         GET /robots/show?origin=ORIGIN, POST /robots/refresh[?origin=ORIGIN]\n"
            .into(),
    )
}
