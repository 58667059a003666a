//! The shapes of an admin answer: text, JSON and bodies streamed from
//! the blocking pool, each `Cache-Control: no-store`.

use crate::ops::maintain;
use crate::wire::body::ProxyBody;
use http::header::HeaderValue;
use http::{Response, StatusCode};

/// The field of a `GET /cache/export` answer that says how many exchanges
/// the export planned (`crawlcache warc export` shows progress against it).
pub const EXCHANGES_HEADER: &str = "crawlcache-export-exchanges";

/// A `200` with `body` as plain text, never stored.
pub fn text_ok(body: String) -> Response<ProxyBody> {
    text(StatusCode::OK, body)
}

/// A `status` answer with `body` as plain text, never stored.
pub fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A `status` answer with `v` as indented JSON and a final newline.
pub fn json(status: StatusCode, v: &serde_json::Value) -> Response<ProxyBody> {
    let mut body = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    body.push('\n');
    let mut resp = Response::new(ProxyBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The value of `name` in a query string, percent-decoded.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == name {
            Some(
                percent_encoding::percent_decode_str(&v.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned(),
            )
        } else {
            None
        }
    })
}

/// The answer to a purge or prune run on the blocking pool.
pub fn removal_answer(
    done: Result<Result<maintain::Removed, maintain::MaintainError>, tokio::task::JoinError>,
) -> Response<ProxyBody> {
    match done {
        Ok(Ok(removed)) => json(StatusCode::OK, &serde_json::to_value(removed).unwrap_or_default()),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, message(&e)),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, message(&e)),
    }
}

/// An error line for an admin answer: `crawlcache: ` once, then `e`.
pub fn message(e: &dyn std::fmt::Display) -> String {
    format!("crawlcache: {}\n", e.to_string().trim_start_matches("crawlcache: "))
}

/// A response whose body `produce` writes on the blocking pool, sent as it
/// is written (chunked, never held whole): bytes are passed on every
/// 32 KiB, and at least every 50 ms while some are waiting. A client that
/// goes away makes the writes fail, which stops `produce`; an error from
/// `produce` cuts the body short (the client sees an incomplete answer).
pub fn stream_blocking(
    content_type: &'static str,
    produce: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send + 'static,
) -> Response<ProxyBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::task::spawn_blocking(move || {
        let mut out =
            ChunkSink { tx, buf: Vec::with_capacity(CHUNK), last: std::time::Instant::now() };
        let result = produce(&mut out).and_then(|_| std::io::Write::flush(&mut out));
        if let Err(e) = result {
            let _ = out.tx.blocking_send(Err(e));
        }
    });
    let mut resp = Response::new(ProxyBody::Channel { rx, len: None });
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Bytes per chunk of a streamed admin answer.
const CHUNK: usize = 32 * 1024;

/// The writer behind [`stream_blocking`].
struct ChunkSink {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    buf: Vec<u8>,
    last: std::time::Instant,
}

impl std::io::Write for ChunkSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK || self.last.elapsed() >= std::time::Duration::from_millis(50) {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.last = std::time::Instant::now();
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}
