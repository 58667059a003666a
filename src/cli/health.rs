//! `crawlcache health`: whether a proxy answers HTTP at its address, for a
//! container's `HEALTHCHECK` or a service monitor, with no other tool.

use super::access::{admin_request, Admin};
use super::common::{load_config, Common};
use crate::cli::error::CommandError;
use clap::Args;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;

/// Arguments of `health`.
#[derive(Args, Debug)]
pub struct HealthArgs {
    /// Where the configuration and the data directory are, and how to reach a running proxy.
    #[command(flatten)]
    pub common: Common,
    /// The proxy's address (default: `server.listen` of the configuration;
    /// an unspecified IP such as 0.0.0.0 is asked on loopback).
    #[arg(long)]
    pub addr: Option<SocketAddr>,
}

/// Sends `GET /stats` to the proxy and exits 0 when it answers with any
/// HTTP status (200, or 403 where the admin endpoints are closed to this
/// client: either way the accept loop and the request path are alive),
/// printing the status; exits 1 with the reason on standard error when it
/// cannot be reached or its answer is not HTTP (1, not 2, because Docker
/// reserves 2 in a health check). Errors: the configuration cannot be read.
pub fn run(args: HealthArgs) -> Result<ExitCode, CommandError> {
    let cfg = load_config(&args.common)?;
    let mut addr = args.addr.unwrap_or(cfg.server.listen);
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        IpAddr::V6(ip) if ip.is_unspecified() => addr.set_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        _ => {}
    }
    let admin = Admin { addr, token: cfg.server.admin_token.trim().to_string() };
    match admin_request(&admin, "GET", "/stats") {
        Ok((status, _)) => {
            println!("crawlcache answers at {addr} (GET /stats: {status})");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("crawlcache: unhealthy: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
