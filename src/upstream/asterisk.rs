//! OPTIONS for a whole server (RFC 9112 section 3.2.4): a client asks a
//! proxy `OPTIONS http://host:port HTTP/1.1`, with an empty path, and the
//! last proxy on the way sends the origin `OPTIONS * HTTP/1.1`
//! (asterisk-form); a proxy sending it on to another proxy keeps the
//! absolute form, empty path included.
//!
//! The pooled client cannot send either: it writes the request-target from
//! the URI, and the URI type has no empty path (`http://host:port` is
//! written `/` in origin form and `http://host:port/` in absolute form,
//! both the resource `/`). So [`send`] takes a connection of its own from
//! the origin client's connector (direct, through the parent proxy, plain
//! or TLS alike) and drives one exchange on it with the HTTP library's
//! HTTP/1.1 client connection, whose request-target is the URI `*`. When
//! the connection goes to a parent proxy for a plain `http://` origin (the
//! connector marks it proxied), the request line's first bytes
//! `OPTIONS * ` are rewritten on their way out to `OPTIONS http://host:port `
//! (`TargetRewrite`), the one spelling no URI value writes. The
//! connection closes after the exchange; it is never pooled.

use crate::wire::body::ProxyBody;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::Connection;
use std::error::Error as StdError;
use std::pin::Pin;
use std::task::{Context, Poll};

type BoxError = Box<dyn StdError + Send + Sync>;

/// The start of the request line the HTTP library writes for the URI `*`.
const ASTERISK_LINE: &[u8] = b"OPTIONS * ";

/// Why [`send`] failed.
#[derive(Debug)]
pub struct ExchangeError {
    /// The connection could not be opened (the origin or the parent was not
    /// reached, or TLS failed): nothing was sent.
    pub connect: bool,
    source: BoxError,
}

impl ExchangeError {
    /// What failed: the connector's error (the parent's, TLS, TCP) or the
    /// HTTP library's.
    pub fn cause(&self) -> &(dyn StdError + 'static) {
        &*self.source
    }
}

/// Head limits of the response, as the pooled client's (`upstream.max_head_fields`, `upstream.max_head_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most fields in the response head.
    pub max_fields: usize,
    /// Most bytes buffered for the response head.
    pub max_bytes: usize,
}

/// Sends `req`, an OPTIONS whose URI (absolute, `http` or `https`) names
/// the server to ask, with its fields ready to go (`Host`, `Via`, a
/// parent's `Proxy-Authorization`), on a new connection from `connector`,
/// as `OPTIONS *` or, to a parent proxy, `OPTIONS scheme://authority`.
/// Returns the response head; its body arrives on the connection, which
/// closes once it is read. No time limit of its own: the caller bounds it.
pub async fn send<C>(
    mut connector: C,
    mut req: Request<ProxyBody>,
    limits: Limits,
) -> Result<Response<Incoming>, ExchangeError>
where
    C: tower_service::Service<Uri>,
    C::Response: Read + Write + Connection + Unpin + Send + 'static,
    C::Error: Into<BoxError>,
{
    let connect_error = |e: BoxError| ExchangeError { connect: true, source: e };
    let (scheme, authority) = match (req.uri().scheme_str(), req.uri().authority()) {
        (Some(s), Some(a)) => (s.to_string(), a.to_string()),
        _ => {
            return Err(connect_error(
                format!("OPTIONS for a whole server needs an absolute URI, not {}", req.uri())
                    .into(),
            ))
        }
    };
    let dst: Uri = format!("{scheme}://{authority}/")
        .parse()
        .map_err(|e: http::uri::InvalidUri| connect_error(e.into()))?;
    std::future::poll_fn(|cx| connector.poll_ready(cx))
        .await
        .map_err(|e| connect_error(e.into()))?;
    let io = connector.call(dst).await.map_err(|e| connect_error(e.into()))?;
    let connected = io.connected();
    if connected.is_negotiated_h2() {
        return Err(connect_error(format!("{authority} chose HTTP/2, where OPTIONS for the whole server is not sent by crawlcache").into()));
    }
    let absolute =
        connected.is_proxied().then(|| format!("OPTIONS {scheme}://{authority} ").into_bytes());
    let io = TargetRewrite { inner: io, absolute, pending: Vec::new() };
    let exchange_error = |e: hyper::Error| ExchangeError { connect: false, source: Box::new(e) };
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .allow_spaces_after_header_name_in_responses(true)
        .allow_obsolete_multiline_headers_in_responses(true)
        .max_headers(limits.max_fields)
        .max_buf_size(limits.max_bytes.max(8192))
        .writev(false)
        .handshake(io)
        .await
        .map_err(exchange_error)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("connection of an OPTIONS * to {authority} ended: {e}");
        }
    });
    *req.uri_mut() = Uri::from_static("*");
    sender.send_request(req).await.map_err(exchange_error)
}

/// A connection whose first request line, written for the URI `*`, goes
/// out with `absolute` (`OPTIONS http://host:port `) in place of
/// [`ASTERISK_LINE`]; unchanged when `absolute` is `None`.
struct TargetRewrite<T> {
    inner: T,
    /// The replacement, until the first write.
    absolute: Option<Vec<u8>>,
    /// Bytes of the replacement not yet written.
    pending: Vec<u8>,
}

impl<T: Write + Unpin> TargetRewrite<T> {
    /// Writes the pending bytes; `Ready(Ok)` once none are left.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.pending.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.pending) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n.min(self.pending.len()));
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: Read + Unpin> Read for TargetRewrite<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for TargetRewrite<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        if let Some(absolute) = this.absolute.take() {
            if buf.starts_with(ASTERISK_LINE) {
                // The library's bytes up to the target are taken; the
                // replacement goes out before the rest of them.
                this.pending = absolute;
                return Poll::Ready(Ok(ASTERISK_LINE.len()));
            }
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The request line the HTTP library writes for the URI `*` through a
    /// [`TargetRewrite`], as the other end reads it; answered with `200`.
    async fn request_line(absolute: Option<&str>) -> String {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let io = TargetRewrite {
            inner: TokioIo::new(client),
            absolute: absolute.map(|a| a.as_bytes().to_vec()),
            pending: Vec::new(),
        };
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .writev(false)
            .handshake::<_, ProxyBody>(io)
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let mut req = Request::new(ProxyBody::empty());
        *req.method_mut() = http::Method::OPTIONS;
        *req.uri_mut() = Uri::from_static("*");
        req.headers_mut()
            .insert(http::header::HOST, http::HeaderValue::from_static("example.org:8080"));
        let response = tokio::spawn(async move { sender.send_request(req).await });
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(
                server.read(&mut byte).await.expect("reading the request"),
                1,
                "request cut short: {head:?}"
            );
            head.push(byte[0]);
        }
        server.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await.expect("answering");
        let response = response.await.expect("the exchange task").expect("the response");
        assert_eq!(response.status(), 200);
        String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string()
    }

    /// RFC 9112 section 3.2.4: asterisk-form to the origin, the absolute
    /// form with its empty path to a parent proxy.
    #[tokio::test]
    async fn the_request_line_is_asterisk_or_absolute_with_an_empty_path_rfc9112_3_2_4() {
        let limit = std::time::Duration::from_secs(10);
        let asterisk = tokio::time::timeout(limit, request_line(None)).await.expect("in time");
        assert_eq!(asterisk, "OPTIONS * HTTP/1.1");
        let absolute =
            tokio::time::timeout(limit, request_line(Some("OPTIONS http://example.org:8080 ")))
                .await
                .expect("in time");
        assert_eq!(absolute, "OPTIONS http://example.org:8080 HTTP/1.1");
    }
}
