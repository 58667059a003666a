//! `crawlcache robots show` and `crawlcache robots refresh`: the robots.txt
//! snapshots kept in the data directory, read directly when the proxy is
//! stopped and through its admin endpoints when it runs.
//!
//! With the proxy stopped, `refresh` builds only what a fetch needs: the
//! store, an upstream client and the robots registry. It creates no
//! certificate authority and no audit log in the data directory.

use crate::cli::access::{admin_request, encode, open_store, StoreAccess};
use crate::cli::common::{load_config, Common};
use crate::cli::error::CommandError;
use crate::config::Config;
use crawlcache_robots::registry::{self, RobotsRegistry};
use crawlcache_robots::snapshot::Origin;
use crawlcache_store::Store;
use std::process::ExitCode;
use std::time::SystemTime;

/// Parses an origin argument (`https://example.org`, `http://host:8080`).
fn parse_origin(s: &str) -> Result<Origin, CommandError> {
    Ok(Origin::from_url(s).ok_or_else(|| {
        format!("'{s}' is not an origin (expected e.g. https://example.org or http://host:8080)")
    })?)
}

/// Prints the snapshot of `origin` (state, age, status, SHA-256, ETag,
/// redirects, body). Exit 1 when there is none. Errors: a bad origin, or
/// the data directory cannot be read.
pub fn show(common: &Common, origin: &str) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let origin = parse_origin(origin)?;
    match open_store(&cfg)? {
        StoreAccess::Direct(store) => {
            let tree = store.extra_tree("robots").map_err(|e| e.to_string())?;
            match registry::load_snapshot(&tree, &origin)? {
                Some(snap) => {
                    let windows = cfg.robots.windows_for(&origin.host);
                    out!("{}", registry::describe(&snap, &windows, SystemTime::now()));
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("no robots.txt snapshot for {origin} yet");
                    Ok(ExitCode::from(1))
                }
            }
        }
        StoreAccess::Daemon(a) => {
            let (status, body) = admin_request(
                &a,
                "GET",
                &format!("/robots/show?origin={}", encode(&origin.to_string())),
            )?;
            out!("{body}");
            Ok(if status == 200 { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}

/// Refreshes the snapshots of `origins` (every stored one when empty) now,
/// conditionally, and prints each resulting snapshot. Errors: a bad origin,
/// the data directory, `upstream.extra_ca_file`, or the proxy refusing.
pub fn refresh(common: &Common, origins: &[String]) -> Result<ExitCode, CommandError> {
    let cfg = load_config(common)?;
    let parsed = origins.iter().map(|o| parse_origin(o)).collect::<Result<Vec<_>, _>>()?;
    match open_store(&cfg)? {
        StoreAccess::Daemon(a) => {
            if parsed.is_empty() {
                out!("{}", admin_request(&a, "POST", "/robots/refresh")?.1);
            }
            for o in &parsed {
                let (status, body) = admin_request(
                    &a,
                    "POST",
                    &format!("/robots/refresh?origin={}", encode(&o.to_string())),
                )?;
                if status != 200 {
                    return Err(body.trim().into());
                }
                out!("{body}");
            }
            Ok(ExitCode::SUCCESS)
        }
        StoreAccess::Direct(store) => {
            let text = refresh_direct(&cfg, &store, parsed)?;
            store.flush().map_err(|e| e.to_string())?;
            out!("{text}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Refreshes `origins` (every stored one when empty) in the store opened by
/// this process and returns the description of each resulting snapshot,
/// one after the other.
fn refresh_direct(
    cfg: &Config,
    store: &Store,
    origins: Vec<Origin>,
) -> Result<String, CommandError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async {
        let robots = robots_registry(cfg, store)?;
        let targets = if origins.is_empty() {
            let tree = store.extra_tree("robots").map_err(|e| e.to_string())?;
            registry::list_snapshots(&tree).into_iter().map(|s| s.origin).collect()
        } else {
            origins
        };
        let mut out = String::new();
        for o in targets {
            let rules = robots.refresh(&o, SystemTime::now()).await;
            out.push_str(&registry::describe(
                &rules.snapshot,
                &robots.windows(&o),
                SystemTime::now(),
            ));
            out.push('\n');
        }
        robots.flush()?;
        Ok(out)
    })
}

/// The robots registry over `store`, fetching through a new upstream client
/// configured as the proxy's would be (`[upstream]` timeouts and
/// `upstream.extra_ca_file`). Errors: the extra CA file cannot be used, or
/// the snapshot tree cannot be opened.
fn robots_registry(cfg: &Config, store: &Store) -> Result<RobotsRegistry, CommandError> {
    Ok(crate::proxy::robots_registry(cfg, store, crate::proxy::origin_client(cfg)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file and directory under `dir`, relative to it.
    fn tree(dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
                if p.is_dir() {
                    todo.push(p);
                }
            }
        }
        out
    }

    #[test]
    fn refresh_with_the_proxy_stopped_creates_no_certificate_authority_or_audit_log() {
        let data = tempfile::tempdir().unwrap();
        // A port nothing listens on: the fetch fails at once and is recorded.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let common = Common { config: None, data_dir: Some(data.path().to_path_buf()) };

        let code = refresh(&common, &[format!("http://{closed}")]).unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        let code = refresh(&common, &[]).unwrap();
        assert_eq!(code, ExitCode::SUCCESS);

        let files = tree(data.path());
        // tls/ca.rs keeps the CA in <data_dir>/ca/ca.pem and ca.key.
        for ca_file in ["ca", "ca/ca.pem", "ca/ca.key"] {
            assert!(!files.iter().any(|f| f == ca_file), "{ca_file} was created: {files:?}");
        }
        assert!(!data.path().join("audit").exists(), "an audit log was created: {files:?}");
        assert!(data.path().join("index").is_dir(), "the snapshot is kept in the index: {files:?}");

        let store = Store::open(data.path(), 1 << 20).unwrap();
        let snapshots = registry::list_snapshots(&store.extra_tree("robots").unwrap());
        assert_eq!(snapshots.len(), 1, "the failed fetch is recorded as a snapshot");
    }
}
