//! Load client for `benches/fleet.sh`: GETs through a forward proxy over
//! keep-alive HTTP/1.1 connections, in absolute form.
//!
//!   cargo bench --bench fleet_load -- --proxy 127.0.0.1:3128 \
//!       --url http://127.0.0.1:8080/hit --duration 10 [--connections 32]
//!   cargo bench --bench fleet_load -- --proxy 127.0.0.1:3128 \
//!       --url http://127.0.0.1:8080/obj --count 2000 [--connections 32]
//!
//! With `--duration S`, every connection requests `--url` over and over for
//! S seconds (cache hits). With `--count N`, the connections share the URLs
//! `URL0` .. `URL{N-1}`, each requested once (misses, or fleet-tier hits).
//! Every body is read in full; a status other than 200 counts as an error.
//! Prints `requests=N errors=E seconds=S req_per_s=X` on stdout.
//! Loopback benchmarking tool, not a test.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

struct Args {
    proxy: String,
    url: String,
    connections: usize,
    duration: Option<Duration>,
    count: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        proxy: String::new(),
        url: String::new(),
        connections: 32,
        duration: None,
        count: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--proxy" => a.proxy = v()?,
            "--url" => a.url = v()?,
            "--connections" => {
                a.connections = v()?.parse().map_err(|e| format!("--connections: {e}"))?
            }
            "--duration" => {
                a.duration =
                    Some(Duration::from_secs(v()?.parse().map_err(|e| format!("--duration: {e}"))?))
            }
            "--count" => a.count = Some(v()?.parse().map_err(|e| format!("--count: {e}"))?),
            "--bench" => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.proxy.is_empty() || a.url.is_empty() || a.duration.is_some() == a.count.is_some() {
        return Err("usage: fleet_load --proxy ADDR --url URL (--duration SECONDS | --count N) [--connections C]".into());
    }
    Ok(a)
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    errors: AtomicU64,
    next: AtomicU64,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn connection(
    args: Arc<Args>,
    c: Arc<Counters>,
    deadline: Option<Instant>,
) -> Result<(), BoxError> {
    let stream = TcpStream::connect(&args.proxy).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    loop {
        let url = match (deadline, args.count) {
            (Some(d), _) if Instant::now() >= d => return Ok(()),
            (Some(_), _) => args.url.clone(),
            (None, Some(n)) => {
                let i = c.next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok(());
                }
                format!("{}{i}", args.url)
            }
            (None, None) => return Ok(()),
        };
        let uri: http::Uri = url.parse()?;
        let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let req =
            http::Request::get(uri).header(http::header::HOST, host).body(Empty::<Bytes>::new())?;
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        let ok = resp.status() == 200;
        resp.into_body().collect().await?;
        c.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("fleet_load: {e}");
            std::process::exit(2);
        }
    };
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let counters = Arc::new(Counters::default());
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + d);
    rt.block_on(async {
        let tasks: Vec<_> = (0..args.connections)
            .map(|_| tokio::spawn(connection(args.clone(), counters.clone(), deadline)))
            .collect();
        for t in tasks {
            if let Ok(Err(e)) = t.await {
                eprintln!("fleet_load: a connection failed: {e}");
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let n = counters.requests.load(Ordering::Relaxed);
    println!(
        "requests={n} errors={} seconds={secs:.2} req_per_s={:.0}",
        counters.errors.load(Ordering::Relaxed),
        n as f64 / secs
    );
}
