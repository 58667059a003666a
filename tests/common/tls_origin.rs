//! [`TlsOrigin`]: an origin on 127.0.0.1 speaking HTTP/1.1 over TLS (a
//! leaf from [`super::tls::TestPki`]) or in clear on the same port, chosen
//! per connection by its first byte, answering with a closure of (scheme,
//! path) and counting requests per (scheme, path).

use super::tls::TestPki;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// What the origin answers: status, extra header fields, body.
pub type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);
pub type Handler = dyn Fn(&str, &str) -> Answer + Send + Sync;

/// A page that a shared cache may keep for a minute.
pub fn page(body: &str) -> Answer {
    (
        200,
        vec![
            ("Cache-Control", "max-age=60".to_string()),
            ("Content-Type", "text/plain".to_string()),
        ],
        body.as_bytes().to_vec(),
    )
}

/// An origin on 127.0.0.1:PORT speaking HTTP/1.1 over TLS (leaf from
/// [`TestPki`]) or in clear, chosen per connection by its first byte.
/// Counts requests per (scheme, path). Stopped on drop.
pub struct TlsOrigin {
    addr: SocketAddr,
    counts: Arc<Mutex<HashMap<(String, String), usize>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TlsOrigin {
    /// `handler(scheme, path)` answers each request.
    pub fn start(
        pki: &TestPki,
        handler: impl Fn(&str, &str) -> Answer + Send + Sync + 'static,
    ) -> TlsOrigin {
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config());
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("binding the TLS origin on 127.0.0.1:0");
        let addr = std_listener.local_addr().expect("TLS origin address");
        std_listener.set_nonblocking(true).expect("set_nonblocking");
        let counts: Arc<Mutex<HashMap<(String, String), usize>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let thread_counts = counts.clone();
        let thread = thread::Builder::new()
            .name(format!("tls-origin-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("origin runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(std_listener).expect("registering the origin listener");
                    loop {
                        let (tcp, _) = tokio::select! {
                            _ = &mut rx => return,
                            a = listener.accept() => match a {
                                Ok(x) => x,
                                Err(_) => { tokio::time::sleep(Duration::from_millis(10)).await; continue; }
                            },
                        };
                        let (acceptor, handler, counts) = (acceptor.clone(), handler.clone(), thread_counts.clone());
                        tokio::spawn(async move {
                            let mut first = [0u8; 1];
                            let tls = match tcp.peek(&mut first).await {
                                Ok(1) => first[0] == 0x16, // a TLS handshake record
                                _ => return,
                            };
                            if tls {
                                // Handshakes a client aborts (untrusted certificate) are expected.
                                let Ok(Ok(stream)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await else {
                                    return;
                                };
                                serve(TokioIo::new(stream), "https", handler, counts).await;
                            } else {
                                serve(TokioIo::new(tcp), "http", handler, counts).await;
                            }
                        });
                    }
                });
            })
            .expect("spawning the origin thread");
        TlsOrigin { addr, counts, shutdown: Some(tx), thread: Some(thread) }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requests seen for `path` over `scheme` ("https" or "http").
    pub fn count(&self, scheme: &str, path: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(&(scheme.to_string(), path.to_string()))
            .copied()
            .unwrap_or(0)
    }

    pub fn all_counts(&self) -> HashMap<(String, String), usize> {
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve<IO>(
    io: TokioIo<IO>,
    scheme: &'static str,
    handler: Arc<Handler>,
    counts: Arc<Mutex<HashMap<(String, String), usize>>>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let (handler, counts) = (handler.clone(), counts.clone());
        async move {
            let path = req.uri().path().to_string();
            *counts.lock().unwrap().entry((scheme.to_string(), path.clone())).or_default() += 1;
            let (status, headers, body) = handler(scheme, &path);
            let mut resp = hyper::Response::builder().status(status);
            for (n, v) in headers {
                resp = resp.header(n, v);
            }
            Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(body))).expect("origin response"))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
}
