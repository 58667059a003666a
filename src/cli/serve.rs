//! `crawlcache serve`: run the proxy until SIGINT or SIGTERM.

#![allow(
    rustdoc::bare_urls,
    rustdoc::broken_intra_doc_links,
    reason = "the doc comments of the arguments are --help text, read in a terminal: URLs and [::1] stay as typed"
)]

use super::common::{load_config, Common};
use crate::cli::error::CommandError;
use crate::config::Config;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Arguments of `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where the configuration and the data directory are, and how to reach a running proxy.
    #[command(flatten)]
    pub common: Common,
    /// Address to listen on: IP:PORT (127.0.0.1:3128, [::1]:3128,
    /// 0.0.0.0:3128 for every interface), or a port alone (3130 or :3130),
    /// which listens on 127.0.0.1.
    #[arg(long, value_name = "ADDR", value_parser = crate::config::parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Never contact an origin: serve what is stored, whatever its age.
    #[arg(long)]
    pub offline: bool,
    /// Once the proxy accepts connections, print its address as one line
    /// `http://IP:PORT` on standard output (the port the system chose with
    /// `--listen 127.0.0.1:0`); nothing else is printed there, unless
    /// `server.access_log = "stdout"`, whose lines follow it.
    #[arg(long)]
    pub print_address: bool,
    /// Stop, as on SIGTERM, when standard input reaches its end: a program
    /// that starts the proxy for its own lifetime keeps a pipe to it open,
    /// and the proxy stops when that program exits or dies.
    #[arg(long)]
    pub exit_on_stdin_close: bool,
}

/// Runs the proxy with `--listen` and `--offline` laid over the
/// configuration. Errors: the configuration, the runtime, or the proxy
/// failing to start (the message says which).
pub fn run(args: ServeArgs) -> Result<ExitCode, CommandError> {
    let mut cfg = load_config(&args.common)?;
    if let Some(l) = args.listen {
        cfg.server.listen = l;
    }
    if args.offline {
        cfg.server.offline = true;
    }
    // Held until the proxy has stopped, so buffered log lines are written.
    let _log_writer = init_logging(&cfg);
    // This runtime starts the proxy and waits for the signal; connections
    // are served by the proxy's own threads (`server.threads`).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .max_blocking_threads(crate::proxy::BLOCKING_THREADS)
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let print_address = args.print_address;
    let ready = move |addr: SocketAddr| {
        if print_address {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "http://{addr}").and_then(|_| out.flush());
        }
    };
    let stdin_closed = args.exit_on_stdin_close.then(stdin_closed);
    let shutdown = async move {
        match stdin_closed {
            Some(closed) => tokio::select! {
                _ = crate::proxy::shutdown_signal() => {}
                Ok(()) = closed => tracing::info!("standard input closed (--exit-on-stdin-close): stopping"),
            },
            None => crate::proxy::shutdown_signal().await,
        }
    };
    rt.block_on(crate::proxy::run(cfg, crate::admin::endpoints(), shutdown, ready))?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves when standard input reaches end of file or fails to read
/// (what is read is discarded), from a thread of its own: a parent that
/// holds the pipe's other end exited or died.
fn stdin_closed() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("crawlcache-stdin".into()).spawn(move || {
        use std::io::Read as _;
        let mut buf = [0u8; 512];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch standard input (--exit-on-stdin-close): {e}");
    }
    rx
}

/// Logs to stderr with `RUST_LOG`, else `server.log`, else `info`; as text
/// or one JSON object per line (`server.log_format`). Lines are handed to a
/// writer thread (the access log writes one per request, and a request must
/// not wait for a `write` to stderr); the returned guard flushes it when
/// dropped.
fn init_logging(cfg: &Config) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cfg.server.log))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    let ansi = std::io::stderr().is_terminal();
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .finish(std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    // Warnings and errors are also kept for the status page, whatever the
    // filter shows on stderr (filtered at WARN: a layer without a filter
    // would enable every debug and trace call site).
    let registry = tracing_subscriber::registry().with(
        crate::metrics::recent::RecentLayer
            .with_filter(tracing_subscriber::filter::LevelFilter::WARN),
    );
    let _ = match cfg.server.log_format {
        crate::config::LogFormat::Json => {
            registry.with(fmt.json().flatten_event(true).with_filter(filter)).try_init()
        }
        crate::config::LogFormat::Text => {
            registry.with(fmt.with_ansi(ansi).with_filter(filter)).try_init()
        }
    };
    guard
}
