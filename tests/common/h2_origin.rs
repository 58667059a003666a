//! [`H2Origin`]: an origin on 127.0.0.1 that speaks what its ALPN list
//! says (`h2`, `http/1.1`, or both) over TLS with a leaf from
//! [`super::tls::TestPki`], or HTTP/2 with prior knowledge in clear (h2c).
//! It counts the TCP connections it accepted, records every request (its
//! HTTP version, path and fields), and the most requests it had in flight
//! at once; each answer may be delayed, so concurrent requests overlap.
//! Under `/slow/` the head goes out at once and the body after the delay:
//! the request is in flight until its body's last byte. Under
//! `/trailers/` the body ends with a trailer section (`x-checksum`).
//! `/robots.txt` disallows `/private/` to every crawler.

use super::tls::TestPki;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One request as the origin received it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `HTTP/2.0` or `HTTP/1.1`.
    pub version: String,
    pub path: String,
    /// Every field, in order (names lower-case), repeated ones apart.
    pub fields: Vec<(String, String)>,
}

impl Seen {
    /// Every value of the field `name`.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.fields.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }
}

/// What the origin speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaks {
    /// TLS offering these ALPN protocols; a client offering none of them
    /// is refused in the handshake (`no_application_protocol`).
    Tls(&'static [&'static str]),
    /// HTTP/2 with prior knowledge in clear.
    H2c,
}

#[derive(Default)]
struct Shared {
    accepted: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

/// The origin; stopped when dropped.
pub struct H2Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl H2Origin {
    /// Starts the origin: every request is answered 200 with
    /// `Cache-Control: max-age=60` and the body `origin <path>` after
    /// `delay`; under `/vary/`, with `Vary: Cookie` and the cookie fields
    /// received in the body.
    pub fn start(pki: &TestPki, speaks: Speaks, delay: Duration) -> H2Origin {
        let mut config = (*pki.server_config()).clone();
        if let Speaks::Tls(alpn) = speaks {
            config.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the origin");
        let addr = listener.local_addr().expect("origin address");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let shared: Arc<Shared> = Arc::default();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = thread::Builder::new()
            .name(format!("h2-origin-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("origin runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    loop {
                        let tcp = tokio::select! {
                            _ = &mut rx => return,
                            a = listener.accept() => match a {
                                Ok((tcp, _)) => tcp,
                                Err(_) => continue,
                            },
                        };
                        state.accepted.fetch_add(1, Ordering::SeqCst);
                        let (acceptor, state) = (acceptor.clone(), state.clone());
                        tokio::spawn(async move {
                            match speaks {
                                Speaks::H2c => serve(TokioIo::new(tcp), true, state, delay).await,
                                Speaks::Tls(_) => {
                                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                                    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                                    serve(TokioIo::new(tls), h2, state, delay).await
                                }
                            }
                        });
                    }
                });
            })
            .expect("spawning the origin thread");
        H2Origin { addr, shared, shutdown: Some(tx), thread: Some(thread) }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// The most requests in flight at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

impl Drop for H2Origin {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve<IO>(io: TokioIo<IO>, h2: bool, state: Arc<Shared>, delay: Duration)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let state = state.clone();
        async move {
            let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            state.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let seen = Seen {
                version: format!("{:?}", req.version()),
                path: req.uri().path().to_string(),
                fields: req
                    .headers()
                    .iter()
                    .map(|(n, v)| (n.as_str().to_string(), v.to_str().unwrap_or("?").to_string()))
                    .collect(),
            };
            // Paths under /vary/ vary on Cookie and say which they got.
            let vary = seen.path.starts_with("/vary/");
            let inm = seen.all("if-none-match").first().map(|v| v.to_string());
            let body = if vary {
                format!("origin {} cookie [{}]", seen.path, seen.all("cookie").join(" | "))
            } else if seen.path == "/robots.txt" {
                "User-agent: *\nDisallow: /private/\n".to_string()
            } else {
                format!("origin {}", seen.path)
            };
            let slow = seen.path.starts_with("/slow/");
            let trailers = seen.path.starts_with("/trailers/");
            state.seen.lock().unwrap().push(seen);
            if slow {
                let body = SlowBody {
                    sleep: Box::pin(tokio::time::sleep(delay)),
                    data: Some(Bytes::from(body)),
                    state: state.clone(),
                };
                let resp = hyper::Response::builder()
                    .header("cache-control", "max-age=60")
                    .header("content-type", "text/plain")
                    .body(body.boxed())
                    .expect("origin response");
                return Ok::<_, Infallible>(resp);
            }
            tokio::time::sleep(delay).await;
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            if trailers {
                let mut fields = hyper::HeaderMap::new();
                fields.insert("x-checksum", hyper::header::HeaderValue::from_static("abc123"));
                let body = TrailedBody { data: Some(Bytes::from(body)), trailers: Some(fields) };
                let resp = hyper::Response::builder()
                    .header("cache-control", "max-age=60")
                    .header("content-type", "text/plain")
                    .header("trailer", "x-checksum")
                    .body(body.boxed())
                    .expect("origin response");
                return Ok::<_, Infallible>(resp);
            }
            // Paths under /etag/ must be revalidated every time: ETag,
            // max-age=0, and 304 to a matching If-None-Match.
            let etag = body.starts_with("origin /etag/");
            let mut resp = hyper::Response::builder()
                .header("cache-control", if etag { "max-age=0" } else { "max-age=60" })
                .header("content-type", "text/plain");
            if vary {
                resp = resp.header("vary", "cookie");
            }
            if etag {
                resp = resp.header("etag", "\"v1\"");
                if inm.as_deref() == Some("\"v1\"") {
                    resp = resp.status(304);
                    let resp = resp.body(Full::new(Bytes::new()).boxed()).expect("origin 304");
                    return Ok::<_, Infallible>(resp);
                }
            }
            let resp = resp.body(Full::new(Bytes::from(body)).boxed()).expect("origin response");
            Ok::<_, Infallible>(resp)
        }
    });
    if h2 {
        let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        b.max_concurrent_streams(256);
        let _ = b.serve_connection(io, svc).await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
    }
}

/// A `/slow/` body: nothing until the delay is over, then all of it. The
/// request stops counting as in flight when its last byte is handed to
/// the connection, before the client can have read it.
struct SlowBody {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    data: Option<Bytes>,
    state: Arc<Shared>,
}

impl hyper::body::Body for SlowBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        use std::task::Poll;
        if self.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        match self.data.take() {
            Some(data) => {
                self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
                Poll::Ready(Some(Ok(hyper::body::Frame::data(data))))
            }
            None => Poll::Ready(None),
        }
    }
}

impl Drop for SlowBody {
    fn drop(&mut self) {
        // A body dropped before it was sent still ends its request.
        if self.data.is_some() {
            self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A `/trailers/` body: the data, then a trailer section.
struct TrailedBody {
    data: Option<Bytes>,
    trailers: Option<hyper::HeaderMap>,
}

impl hyper::body::Body for TrailedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        let frame = match self.data.take() {
            Some(data) => Some(hyper::body::Frame::data(data)),
            None => self.trailers.take().map(hyper::body::Frame::trailers),
        };
        std::task::Poll::Ready(frame.map(Ok))
    }
}
