//! `crawlcache ca`: print the local CA certificate (its path, or `--pem`).

use super::{load_config, Common};
use clap::Args;
use std::process::ExitCode;

/// Arguments of `ca`.
#[derive(Args, Debug)]
pub struct CaArgs {
    #[command(flatten)]
    pub common: Common,
    /// Print the certificate itself (PEM) instead of its path.
    #[arg(long)]
    pub pem: bool,
}

/// Loads the CA of the data directory, creating the directory and the CA
/// when missing, and prints the certificate's absolute path (or the PEM).
/// Errors: the data directory or the CA cannot be created or read.
pub fn run(args: CaArgs) -> Result<ExitCode, String> {
    let cfg = load_config(&args.common)?;
    let dir = &cfg.server.data_dir;
    crate::fsutil::create_private_dir(dir).map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let ca = crate::tls::CertificateAuthority::load_or_create(dir).map_err(|e| e.to_string())?;
    if args.pem {
        out!("{}", ca.cert_pem());
    } else {
        let path = ca.cert_path();
        let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        outln!("{}", abs.display());
    }
    Ok(ExitCode::SUCCESS)
}
