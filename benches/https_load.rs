//! HTTPS load client for `benches/load.sh`, `benches/tls.sh` and
//! `benches/h2.sh` (wrk cannot send CONNECT; h2load cannot either).
//!
//!   cargo bench --bench https_load -- --url https://localhost:8443/1k.bin \
//!       --ca ca.pem [--proxy 127.0.0.1:3128] [--connections 32] [--duration 10s] \
//!       [--mode keepalive|tunnels|hosts] [--hosts 1000] [--h2 [--streams 32]] [--unique]
//!
//! Each connection: TCP -> (with --proxy: `CONNECT host:port` -> 200) -> TLS
//! (SNI host, trusting only --ca) -> HTTP/1.1 GET, reading every body in
//! full. `--mode keepalive` (the default) loops GETs on each connection;
//! `tunnels` opens a new connection (tunnel) for every GET; `hosts` opens
//! `--hosts N` tunnels in all, each with its own TLS server name
//! `hI.hosts.HOST` (I = 0..N, the CONNECT target and `Host` stay HOST: a proxy
//! that intercepts mints one leaf per name), once, and reports how fast
//! they went. An `http://` URL is fetched in clear: through --proxy as
//! absolute-form requests (plain proxied hits, to compare against). A
//! failed request counts as an error and the connection is rebuilt.
//!
//! `--h2` (kept-alive only, https URLs): the TLS offers ALPN `h2` alone and
//! each of the --connections is one HTTP/2 connection (through the tunnel
//! with --proxy, straight to the server without) carrying `--streams`
//! (default 32) request loops at once, each GET its own stream with the
//! absolute URL (`:scheme`, `:authority`, `:path`); a server that does not
//! choose `h2` is an error. A failed stream counts as an error; when the
//! connection itself has closed it is rebuilt. `--unique` appends
//! `n=COUNTER` to the URL's query, a new value for every request (misses
//! through a cache).
//!
//! Requests still running at the deadline are not counted. Prints
//! `requests=N errors=E req_per_s=X` (plus bytes and seconds) on stdout.
//! Loopback benchmarking tool, not a test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

struct Args {
    url: http::Uri,
    host: String,
    port: u16,
    proxy: Option<String>,
    ca: String,
    connections: usize,
    duration: Duration,
    mode: Mode,
    hosts: u64,
    /// HTTP/2 (ALPN h2) connections, `streams` request loops on each.
    h2: bool,
    streams: usize,
    /// A new `n=COUNTER` in the query of every request.
    unique: bool,
}

/// The counter `--unique` puts into each request's query.
static NEXT_UNIQUE: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    KeepAlive,
    Tunnels,
    Hosts,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    errors: AtomicU64,
    bytes: AtomicU64,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (n, mult) = match s.as_bytes().last() {
        Some(b's') => (&s[..s.len() - 1], 1),
        Some(b'm') => (&s[..s.len() - 1], 60),
        _ => (s, 1),
    };
    n.parse::<u64>()
        .map(|n| Duration::from_secs(n * mult))
        .map_err(|_| format!("bad duration {s:?}"))
}

fn parse_args() -> Result<Args, String> {
    let env = |k: &str| std::env::var(k).ok();
    let mut url = env("HTTPS_LOAD_URL");
    let mut proxy = env("HTTPS_LOAD_PROXY");
    let mut ca = env("HTTPS_LOAD_CA");
    let mut connections = env("HTTPS_LOAD_CONNECTIONS");
    let mut duration = env("HTTPS_LOAD_DURATION");
    let mut mode = env("HTTPS_LOAD_MODE");
    let mut hosts = env("HTTPS_LOAD_HOSTS");
    let mut streams = env("HTTPS_LOAD_STREAMS");
    let mut h2 = false;
    let mut unique = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--url" => url = Some(val()?),
            "--proxy" => proxy = Some(val()?),
            "--ca" => ca = Some(val()?),
            "--connections" | "-c" => connections = Some(val()?),
            "--duration" | "-d" => duration = Some(val()?),
            "--mode" => mode = Some(val()?),
            "--hosts" => hosts = Some(val()?),
            "--streams" => streams = Some(val()?),
            "--h2" => h2 = true,
            "--unique" => unique = true,
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let url_s = url.ok_or("--url https://host:port/path is required")?;
    let url: http::Uri = url_s.parse().map_err(|e| format!("bad --url {url_s}: {e}"))?;
    if !matches!(url.scheme_str(), Some("https") | Some("http")) {
        return Err(format!("--url {url_s}: only http and https URLs"));
    }
    let host = url
        .host()
        .ok_or("--url has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url.port_u16().unwrap_or(if url.scheme_str() == Some("https") { 443 } else { 80 });
    let mode = match mode.as_deref().unwrap_or("keepalive") {
        "keepalive" => Mode::KeepAlive,
        "tunnels" => Mode::Tunnels,
        "hosts" => Mode::Hosts,
        other => return Err(format!("--mode {other}: keepalive, tunnels or hosts")),
    };
    let hosts = hosts.as_deref().unwrap_or("1000").parse().map_err(|_| "bad --hosts")?;
    let connections =
        connections.as_deref().unwrap_or("32").parse().map_err(|_| "bad --connections")?;
    let duration = parse_duration(duration.as_deref().unwrap_or("10s"))?;
    let streams: usize = streams.as_deref().unwrap_or("32").parse().map_err(|_| "bad --streams")?;
    if h2 && (mode != Mode::KeepAlive || url.scheme_str() != Some("https")) {
        return Err("--h2 needs an https --url and --mode keepalive".into());
    }
    if h2 && streams == 0 {
        return Err("--streams must be at least 1".into());
    }
    Ok(Args {
        url,
        host,
        port,
        proxy: proxy.filter(|p| !p.is_empty()),
        ca: ca.unwrap_or_default(),
        connections,
        duration,
        mode,
        hosts,
        h2,
        streams,
        unique,
    })
}

/// A client configuration for plain-HTTP runs, never used to connect.
fn plain_placeholder() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}

fn tls_config(ca_path: &str, h2: bool) -> Result<Arc<rustls::ClientConfig>, String> {
    let pem = std::fs::read(ca_path).map_err(|e| format!("reading {ca_path}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("{ca_path}: {e}"))?;
        roots.add(cert).map_err(|e| format!("{ca_path}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{ca_path}: no CERTIFICATE in it"));
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![if h2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
    Ok(Arc::new(cfg))
}

/// Opens one connection (through the proxy's CONNECT when there is one) and
/// returns a hyper HTTP/1.1 sender over TLS.
async fn connect(
    args: &Args,
    tls: &TlsConnector,
    sni: Option<&str>,
) -> Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>, BoxError> {
    let authority = format!("{}:{}", args.host, args.port);
    if args.url.scheme_str() == Some("http") {
        // In clear: to the proxy (absolute-form requests) or the origin.
        let tcp = TcpStream::connect(args.proxy.as_deref().unwrap_or(&authority)).await?;
        tcp.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        return Ok(sender);
    }
    let tls_stream = open_tls(args, tls, sni).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls_stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Opens one HTTP/2 connection over TLS (ALPN `h2`), through the proxy's
/// CONNECT when there is one.
async fn connect_h2(
    args: &Args,
    tls: &TlsConnector,
) -> Result<hyper::client::conn::http2::SendRequest<Empty<Bytes>>, BoxError> {
    let tls_stream = open_tls(args, tls, None).await?;
    if tls_stream.get_ref().1.alpn_protocol() != Some(b"h2") {
        return Err("the server did not choose h2 by ALPN".into());
    }
    // hyper's defaults: 2 MiB stream and 5 MiB connection windows.
    let builder = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    let (sender, conn) = builder.handshake(TokioIo::new(tls_stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// TCP, `CONNECT` through --proxy when there is one, and the TLS handshake.
async fn open_tls(
    args: &Args,
    tls: &TlsConnector,
    sni: Option<&str>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, BoxError> {
    let authority = format!("{}:{}", args.host, args.port);
    let tcp = match &args.proxy {
        None => TcpStream::connect(&authority).await?,
        Some(proxy) => {
            let mut tcp = TcpStream::connect(proxy).await?;
            tcp.set_nodelay(true)?;
            tcp.write_all(
                format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
            )
            .await?;
            // Read the response head byte by byte: nothing after it may be
            // consumed (the TLS server hello follows only after our hello).
            let mut head = Vec::with_capacity(256);
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if tcp.read(&mut b).await? == 0 || head.len() > 16 * 1024 {
                    return Err("proxy closed or sent an oversized CONNECT response".into());
                }
                head.push(b[0]);
            }
            let status_line = head.split(|&c| c == b'\r').next().unwrap_or_default();
            let status_line = String::from_utf8_lossy(status_line);
            if status_line.split_whitespace().nth(1) != Some("200") {
                return Err(format!("CONNECT {authority}: {status_line}").into());
            }
            tcp
        }
    };
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(sni.unwrap_or(&args.host).to_string())?;
    Ok(tls.connect(name, tcp).await?)
}

async fn one_request(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    args: &Args,
    host_header: &str,
) -> Result<u64, BoxError> {
    sender.ready().await?;
    let path = match (&args.proxy, args.url.scheme_str()) {
        (Some(_), Some("http")) => args.url.to_string(),
        _ => args.url.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string(),
    };
    let req = http::Request::get(with_unique(args, path))
        .header(http::header::HOST, host_header)
        .body(Empty::<Bytes>::new())?;
    body_length(sender.send_request(req).await?).await
}

/// Reads `resp`'s body to its end; its length in bytes, or an error for a
/// status other than 2xx (after the body, so the connection stays usable).
async fn body_length(resp: http::Response<hyper::body::Incoming>) -> Result<u64, BoxError> {
    let status = resp.status();
    let mut body = resp.into_body();
    let mut n = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            n += data.len() as u64;
        }
    }
    if !status.is_success() {
        return Err(format!("status {status}").into());
    }
    Ok(n)
}

/// `target` with `n=COUNTER` added to its query under `--unique`.
fn with_unique(args: &Args, target: String) -> String {
    if !args.unique {
        return target;
    }
    let n = NEXT_UNIQUE.fetch_add(1, Ordering::Relaxed);
    let sep = if target.contains('?') { '&' } else { '?' };
    format!("{target}{sep}n={n}")
}

/// One GET on a stream of an HTTP/2 connection, the absolute URL as its
/// `:scheme`, `:authority` and `:path`; returns the body's length.
async fn one_request_h2(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    args: &Args,
) -> Result<u64, BoxError> {
    sender.ready().await?;
    let req = http::Request::get(with_unique(args, args.url.to_string()))
        .version(http::Version::HTTP_2)
        .body(Empty::<Bytes>::new())?;
    body_length(sender.send_request(req).await?).await
}

/// `--h2`: one HTTP/2 connection at a time with `--streams` request loops
/// on it until the deadline; a new connection when it closed early.
async fn h2_worker(args: Arc<Args>, tls: TlsConnector, counters: Arc<Counters>, deadline: Instant) {
    let per_request = Duration::from_secs(30);
    let reported = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let report = |what: String| {
        if !reported.swap(true, Ordering::Relaxed) {
            eprintln!("https_load: {what}");
        }
    };
    while Instant::now() < deadline {
        let sender = match tokio::time::timeout(per_request, connect_h2(&args, &tls)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                report(format!("connect: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let loops: Vec<_> = (0..args.streams)
            .map(|_| {
                let mut sender = sender.clone();
                let (args, counters, reported) = (args.clone(), counters.clone(), reported.clone());
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        match tokio::time::timeout(per_request, one_request_h2(&mut sender, &args))
                            .await
                        {
                            Ok(Ok(n)) => {
                                if Instant::now() <= deadline {
                                    counters.requests.fetch_add(1, Ordering::Relaxed);
                                    counters.bytes.fetch_add(n, Ordering::Relaxed);
                                }
                            }
                            res => {
                                counters.errors.fetch_add(1, Ordering::Relaxed);
                                if !reported.swap(true, Ordering::Relaxed) {
                                    match res {
                                        Ok(Err(e)) => eprintln!("https_load: request: {e}"),
                                        _ => eprintln!("https_load: request timed out"),
                                    }
                                }
                                if sender.is_closed() {
                                    return; // the connection is rebuilt
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        drop(sender);
        for l in loops {
            let _ = l.await;
        }
    }
}

/// `--mode hosts`: takes the next host number from `next` until `--hosts`
/// are done; each a new tunnel with its own server name and one request.
async fn host_worker(
    args: Arc<Args>,
    tls: TlsConnector,
    counters: Arc<Counters>,
    next: Arc<AtomicU64>,
) {
    let host_header = format!("{}:{}", args.host, args.port);
    // `hI.hosts.HOST`: an origin whose certificate names `*.hosts.HOST`
    // also verifies for a peer that sends the client's name on upstream.
    let suffix = if args.host.parse::<std::net::IpAddr>().is_ok() {
        "hosts.test".to_string()
    } else {
        format!("hosts.{}", args.host)
    };
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= args.hosts {
            return;
        }
        let sni = format!("h{i}.{suffix}");
        let done = async {
            let mut sender = connect(&args, &tls, Some(&sni)).await?;
            one_request(&mut sender, &args, &host_header).await
        };
        match tokio::time::timeout(Duration::from_secs(30), done).await {
            Ok(Ok(n)) => {
                counters.requests.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(n, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                if counters.errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!("https_load: host {sni}: {e}");
                }
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

async fn worker(args: Arc<Args>, tls: TlsConnector, counters: Arc<Counters>, deadline: Instant) {
    let host_header =
        if args.port == 443 { args.host.clone() } else { format!("{}:{}", args.host, args.port) };
    let per_request = Duration::from_secs(30);
    let mut reported = false;
    while Instant::now() < deadline {
        let mut sender = match tokio::time::timeout(per_request, connect(&args, &tls, None)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                if !reported {
                    eprintln!("https_load: connect: {e}");
                    reported = true;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        while Instant::now() < deadline {
            match tokio::time::timeout(per_request, one_request(&mut sender, &args, &host_header))
                .await
            {
                Ok(Ok(n)) => {
                    if Instant::now() <= deadline {
                        counters.requests.fetch_add(1, Ordering::Relaxed);
                        counters.bytes.fetch_add(n, Ordering::Relaxed);
                    }
                    if args.mode == Mode::Tunnels {
                        break; // one request per tunnel
                    }
                }
                res => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    if !reported {
                        match res {
                            Ok(Err(e)) => eprintln!("https_load: request: {e}"),
                            _ => eprintln!("https_load: request timed out"),
                        }
                        reported = true;
                    }
                    break; // rebuild the connection
                }
            }
        }
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("https_load: {e}");
            std::process::exit(2);
        }
    };
    let tls = match if args.url.scheme_str() == Some("http") {
        Ok(Arc::new(plain_placeholder()))
    } else {
        tls_config(&args.ca, args.h2)
    } {
        Ok(c) => TlsConnector::from(c),
        Err(e) => {
            eprintln!("https_load: {e}");
            std::process::exit(2);
        }
    };
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let counters = Arc::new(Counters::default());
    let start = Instant::now();
    let deadline = start + args.duration;
    if args.mode == Mode::Hosts {
        let next = Arc::new(AtomicU64::new(0));
        rt.block_on(async {
            let tasks: Vec<_> = (0..args.connections)
                .map(|_| {
                    tokio::spawn(host_worker(
                        args.clone(),
                        tls.clone(),
                        counters.clone(),
                        next.clone(),
                    ))
                })
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        });
        let secs = start.elapsed().as_secs_f64();
        let requests = counters.requests.load(Ordering::Relaxed);
        println!(
            "requests={requests} errors={} req_per_s={:.2} bytes={} secs={secs:.2}",
            counters.errors.load(Ordering::Relaxed),
            requests as f64 / secs,
            counters.bytes.load(Ordering::Relaxed)
        );
        return;
    }
    rt.block_on(async {
        let tasks: Vec<_> = (0..args.connections)
            .map(|_| {
                if args.h2 {
                    tokio::spawn(h2_worker(args.clone(), tls.clone(), counters.clone(), deadline))
                } else {
                    tokio::spawn(worker(args.clone(), tls.clone(), counters.clone(), deadline))
                }
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    let secs = args.duration.as_secs_f64();
    let requests = counters.requests.load(Ordering::Relaxed);
    let errors = counters.errors.load(Ordering::Relaxed);
    let bytes = counters.bytes.load(Ordering::Relaxed);
    println!(
        "requests={requests} errors={errors} req_per_s={:.2} bytes={bytes} secs={:.2}",
        requests as f64 / secs,
        start.elapsed().as_secs_f64()
    );
}
