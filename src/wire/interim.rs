//! Forwarding 1xx interim responses to the client (RFC 9110 section 15.2:
//! a proxy MUST forward them).
//!
//! The client library hands interim responses from an origin to a callback
//! (`hyper::ext::on_informational`); the server library (hyper 1.12) has no
//! API to send a 1xx on an HTTP/1.1 connection. So each client connection's
//! I/O is wrapped in an [`InterimIo`]: the callback serialises the interim
//! response into the connection's [`InterimSender`], and the wrapper writes
//! those bytes ahead of the next bytes the server writes, which are the
//! final response's head. Interim responses therefore reach the client in
//! order, just before the final response (not earlier). They are never
//! stored: the cache only ever sees the final response.
//!
//! `100 Continue` is not relayed (the server answers the client's
//! `Expect: 100-continue` itself), nor `101` (upgrades are not proxied).
//!
//! The other way, the wrapper shows the bytes the connection receives to a
//! [`RequestLines`], which notes what the URI type loses of an OPTIONS
//! request line (an empty path, RFC 9112 section 3.2.4); the connection's
//! requests ask it through the same [`InterimSender`].

use super::request_line::RequestLines;
use http::HeaderMap;
use hyper::rt::{Read, ReadBufCursor, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Largest amount of interim-response bytes held for one connection; more
/// are dropped (an origin sending endless 1xx must not grow memory).
pub const MAX_PENDING_BYTES: usize = 64 * 1024;

/// Where interim responses for one client connection are queued; also
/// what the connection's OPTIONS request lines said.
#[derive(Clone, Default, Debug)]
pub struct InterimSender(Arc<Mutex<Vec<u8>>>, Arc<Mutex<RequestLines>>);

impl InterimSender {
    /// Queues an interim response with `status` (102, 103, ...) and
    /// `headers` (hop-by-hop fields removed) for the client. Ignores 100,
    /// 101 and non-1xx statuses.
    pub fn push(&self, status: u16, headers: &HeaderMap) {
        if !(102..200).contains(&status) {
            return;
        }
        let mut bytes = format!("HTTP/1.1 {status} {}\r\n", reason(status)).into_bytes();
        let mut headers = headers.clone();
        crawlcache_policy::hop_by_hop::remove_hop_by_hop(&mut headers);
        headers.remove(http::header::CONTENT_LENGTH);
        for (name, value) in &headers {
            bytes.extend_from_slice(name.as_str().as_bytes());
            bytes.extend_from_slice(b": ");
            bytes.extend_from_slice(value.as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        let mut q = crawlcache_base::locks::lock(&self.0);
        if q.len() + bytes.len() <= MAX_PENDING_BYTES {
            q.extend_from_slice(&bytes);
        }
    }

    /// Whether the request line of an OPTIONS the HTTP library read as
    /// `target` (`scheme://authority/`, without the slash) had an empty
    /// path: a question about the whole server (RFC 9112 section 3.2.4).
    /// Asked once per such request, in order (see [`RequestLines`]).
    pub fn take_whole_server(&self, target: &str) -> bool {
        crawlcache_base::locks::lock(&self.1).take_whole_server(target)
    }

    /// Registers this sender on an upstream request, so interim responses
    /// to it are queued for the client.
    pub fn relay_for<B>(&self, req: &mut http::Request<B>) {
        let tx = self.clone();
        hyper::ext::on_informational(req, move |res| tx.push(res.status().as_u16(), res.headers()));
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        102 => "Processing",
        103 => "Early Hints",
        _ => "Informational",
    }
}

/// A client connection's I/O that writes queued interim responses before
/// the server's next bytes.
pub struct InterimIo<T> {
    inner: T,
    pending: InterimSender,
}

impl<T> InterimIo<T> {
    /// Wraps `inner`; interim responses are queued with the returned sender.
    pub fn new(inner: T) -> (InterimIo<T>, InterimSender) {
        let pending = InterimSender::default();
        (InterimIo { inner, pending: pending.clone() }, pending)
    }

    /// The connection inside, when no interim response waits to be
    /// written on it; else `Err(self)`, unchanged.
    pub fn into_inner(self) -> Result<T, InterimIo<T>> {
        let idle = crawlcache_base::locks::lock(&self.pending.0).is_empty();
        if idle {
            Ok(self.inner)
        } else {
            Err(self)
        }
    }
}

impl<T: Write + Unpin> InterimIo<T> {
    /// Writes queued interim bytes; `Ready(Ok)` once none are left.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        loop {
            let chunk = {
                let q = crawlcache_base::locks::lock(&self.pending.0);
                if q.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                q.clone()
            };
            match Pin::new(&mut self.inner).poll_write(cx, &chunk) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => {
                    let mut q = crawlcache_base::locks::lock(&self.pending.0);
                    let n = n.min(q.len());
                    q.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<T: Read + Unpin> Read for InterimIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        // SAFETY: the inner reader is handed the cursor's unfilled bytes
        // through a ReadBuf over them, which it only ever initialises,
        // never de-initialises.
        let mut inner_buf = hyper::rt::ReadBuf::uninit(unsafe { buf.as_mut() });
        match Pin::new(&mut this.inner).poll_read(cx, inner_buf.unfilled()) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let filled = inner_buf.filled();
        crawlcache_base::locks::lock(&this.pending.1).feed(filled);
        let n = filled.len();
        // SAFETY: the read filled (initialised) exactly `n` bytes at the
        // start of the cursor's unfilled part.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: Write + Unpin> Write for InterimIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_write(cx, buf),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match this.poll_pending(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_interim_statuses_are_queued_without_hop_by_hop_fields() {
        let tx = InterimSender::default();
        let mut h = HeaderMap::new();
        h.insert("link", "</style.css>; rel=preload".parse().unwrap());
        h.insert("connection", "keep-alive".parse().unwrap());
        tx.push(100, &h);
        tx.push(200, &h);
        tx.push(103, &h);
        let q = tx.0.lock().unwrap().clone();
        assert_eq!(
            String::from_utf8(q).unwrap(),
            "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
        );
    }
}
