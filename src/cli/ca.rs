//! `crawlcache ca path|init|bundle|install|uninstall`: the local CA
//! certificate clients must trust: its path (`ca path`, plain `ca` too;
//! `--pem` for the certificate itself), creating it on purpose (`ca
//! init`), a bundle of the system roots plus it (`ca bundle FILE`), and
//! adding it to or removing it from the operating system's trust store
//! (`ca install`, `ca uninstall`, as root; see [`SYSTEM_STORES`]).
//!
//! Only `ca init` creates a CA: a data directory without one is reported
//! (where the certificate was looked for and how to make one) with exit
//! code 1, so a mistyped `--data-dir` never yields a second CA that
//! clients would then trust in vain.
//!
//! The flags that were verbs before (`ca --init`, `--pem`, `--bundle FILE`,
//! `--install`, `--uninstall`) still work, hidden from `--help`, each
//! saying on stderr which subcommand replaces it.

use super::common::{load_config, Common};
use crate::cli::error::CommandError;
use crate::tls::CertificateAuthority;
use clap::{Args, Subcommand};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where `ca bundle` looks for the system root certificates when neither
/// `--roots` nor `SSL_CERT_FILE` names a file: Debian/Ubuntu/Alpine/Arch,
/// Fedora/RHEL, then macOS and the BSDs.
pub const SYSTEM_ROOT_FILES: [&str; 3] =
    ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

/// Arguments of `ca`: a subcommand, or (plain `ca`) `ca path`, or the
/// old flag forms ([`LegacyCaFlags`]).
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CaArgs {
    /// The action; none for the old flag forms.
    #[command(subcommand)]
    pub command: Option<CaCommand>,
    /// The old flag forms (`ca --init`, `ca --bundle`, ...), kept as aliases that warn.
    #[command(flatten)]
    pub legacy: LegacyCaFlags,
}

/// `ca` subcommands.
#[derive(Subcommand, Debug)]
pub enum CaCommand {
    /// Print the path of the CA certificate (the default of plain `ca`);
    /// exit 1, saying where it looked, when there is none (never creates one).
    #[command(
        after_help = "Examples:\n  curl --proxy http://127.0.0.1:3128 --cacert \"$(crawlcache ca path)\" https://example.com/\n  NODE_EXTRA_CA_CERTS=\"$(crawlcache ca path --data-dir /srv/crawlcache)\" node crawler.js\n  crawlcache ca path --pem > crawlcache-ca.pem"
    )]
    Path {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// Print the certificate itself (PEM) instead of its path.
        #[arg(long)]
        pem: bool,
    },
    /// Create the CA when the data directory has none (what the first
    /// `serve` does), then print its path; an existing CA is kept.
    #[command(
        after_help = "Examples:\n  crawlcache ca init --data-dir /srv/crawlcache\n  sudo crawlcache ca init --data-dir /srv/crawlcache && sudo crawlcache ca install --data-dir /srv/crawlcache"
    )]
    Init {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
    },
    /// Write FILE: the system root certificates followed by the CA
    /// certificate, for clients whose CA option replaces their trust store
    /// (curl --cacert, REQUESTS_CA_BUNDLE), so hosts in tls.bypass_hosts
    /// still verify. Prints FILE's path.
    #[command(
        after_help = "Examples:\n  REQUESTS_CA_BUNDLE=$(crawlcache ca bundle crawlcache-bundle.pem) python crawl.py\n  crawlcache ca bundle bundle.pem --roots /etc/pki/tls/certs/ca-bundle.crt"
    )]
    Bundle {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
        /// The bundle to write (replaced atomically).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The root certificates (PEM). Default: $SSL_CERT_FILE, else the
        /// first of /etc/ssl/certs/ca-certificates.crt,
        /// /etc/pki/tls/certs/ca-bundle.crt, /etc/ssl/cert.pem.
        #[arg(long, value_name = "FILE")]
        roots: Option<PathBuf>,
    },
    /// Add the CA certificate to the operating system's trust store (as
    /// root): Debian, Ubuntu, Alpine (update-ca-certificates), Fedora,
    /// RHEL, CentOS, Amazon Linux (update-ca-trust), Arch (trust
    /// extract-compat), openSUSE (update-ca-certificates). Undo with
    /// `ca uninstall`.
    #[command(
        after_help = "Examples:\n  sudo crawlcache ca install --data-dir /srv/crawlcache\n  curl --proxy http://127.0.0.1:3128 https://example.com/   # no --cacert needed now"
    )]
    Install {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
    },
    /// Remove the CA certificate that `ca install` added from the operating
    /// system's trust store (as root).
    #[command(after_help = "Examples:\n  sudo crawlcache ca uninstall --data-dir /srv/crawlcache")]
    Uninstall {
        /// Where the configuration and the data directory are, and how to reach a running proxy.
        #[command(flatten)]
        common: Common,
    },
}

/// The flags `ca` took as verbs before its subcommands, hidden from
/// `--help` and kept for scripts: each prints which subcommand replaces it.
#[derive(Args, Debug, Default)]
pub struct LegacyCaFlags {
    /// Where the configuration and the data directory are, and how to reach a running proxy.
    #[command(flatten)]
    pub common: Common,
    /// Deprecated: `ca init`.
    #[arg(long, hide = true)]
    pub init: bool,
    /// Deprecated: `ca path --pem`.
    #[arg(long, hide = true, conflicts_with = "bundle")]
    pub pem: bool,
    /// Deprecated: `ca bundle FILE`.
    #[arg(long, hide = true, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// Deprecated: `ca bundle FILE --roots FILE`.
    #[arg(long, hide = true, value_name = "FILE", requires = "bundle")]
    pub roots: Option<PathBuf>,
    /// Deprecated: `ca install`.
    #[arg(long, hide = true, conflicts_with_all = ["pem", "bundle", "uninstall"])]
    pub install: bool,
    /// Deprecated: `ca uninstall`.
    #[arg(long, hide = true, conflicts_with_all = ["pem", "bundle", "init"])]
    pub uninstall: bool,
}

/// What a `ca` command does once the CA is found (or created).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Print the certificate's path, or with `pem` the certificate.
    Path { pem: bool },
    /// Write a bundle to `file` from `roots`.
    Bundle { file: PathBuf, roots: Option<PathBuf> },
    /// Add to the system trust store.
    Install,
    /// Remove from the system trust store.
    Uninstall,
}

impl LegacyCaFlags {
    /// Whether to create the CA and what to do, and the old command and
    /// the subcommands that replace it (`None` for plain `ca`, which is
    /// `ca path`).
    fn action(self) -> (Common, bool, Action, Option<(String, String)>) {
        let (init, mut words) = (self.init, Vec::new());
        let mut old = vec!["ca"];
        for (set, flag) in [
            (self.init, "--init"),
            (self.pem, "--pem"),
            (self.bundle.is_some(), "--bundle FILE"),
            (self.install, "--install"),
            (self.uninstall, "--uninstall"),
        ] {
            if set {
                old.push(flag);
            }
        }
        if init {
            words.push("ca init".to_string());
        }
        let action = if self.install {
            Action::Install
        } else if self.uninstall {
            Action::Uninstall
        } else if let Some(file) = self.bundle {
            Action::Bundle { file, roots: self.roots }
        } else {
            Action::Path { pem: self.pem }
        };
        match &action {
            Action::Install => words.push("ca install".into()),
            Action::Uninstall => words.push("ca uninstall".into()),
            Action::Bundle { file, roots } => {
                let roots = roots
                    .as_ref()
                    .map(|r| format!(" --roots {}", shell_word(&r.display().to_string())))
                    .unwrap_or_default();
                words.push(format!("ca bundle {}{roots}", shell_word(&file.display().to_string())));
            }
            Action::Path { pem: true } => words.push("ca path --pem".into()),
            Action::Path { pem: false } => {}
        }
        let replacement =
            (!words.is_empty()).then(|| (old.join(" "), words.join("` then `crawlcache ")));
        (self.common, init, action, replacement)
    }
}

/// One operating system's trust store for local CA certificates: where an
/// added certificate goes and the command that rebuilds the bundles
/// clients read (`/etc/ssl/certs/ca-certificates.crt` and the like).
#[derive(Debug, PartialEq, Eq)]
pub struct SystemStore {
    /// The distributions that use it, for messages.
    pub systems: &'static str,
    /// The folder of locally added CA certificates.
    pub dir: &'static str,
    /// The file name ending the tool picks up there.
    pub extension: &'static str,
    /// The command that rebuilds the bundles, and its arguments.
    pub command: &'static [&'static str],
}

/// The trust stores `ca install` knows, in the order they are looked for:
/// the first whose folder exists and whose command is on `PATH` is used.
pub const SYSTEM_STORES: [SystemStore; 4] = [
    SystemStore {
        systems: "Fedora, RHEL, CentOS, Amazon Linux",
        dir: "/etc/pki/ca-trust/source/anchors",
        extension: "pem",
        command: &["update-ca-trust", "extract"],
    },
    SystemStore {
        systems: "Arch Linux",
        dir: "/etc/ca-certificates/trust-source/anchors",
        extension: "crt",
        command: &["trust", "extract-compat"],
    },
    SystemStore {
        systems: "openSUSE, SLES",
        dir: "/etc/pki/trust/anchors",
        extension: "pem",
        command: &["update-ca-certificates"],
    },
    SystemStore {
        systems: "Debian, Ubuntu, Alpine",
        dir: "/usr/local/share/ca-certificates",
        extension: "crt",
        command: &["update-ca-certificates"],
    },
];

/// The trust store of this system among `stores`: the first whose folder
/// exists (`dir_exists`) and whose command is found (`on_path`). `None`
/// when none is.
pub fn choose_store(
    stores: &[SystemStore],
    dir_exists: impl Fn(&Path) -> bool,
    on_path: impl Fn(&str) -> bool,
) -> Option<&SystemStore> {
    stores
        .iter()
        .find(|s| dir_exists(Path::new(s.dir)) && s.command.first().is_some_and(|c| on_path(c)))
}

/// The file name the CA certificate `ca_der` gets in a trust store's
/// folder: `crawlcache-` and the first 16 hex digits of its SHA-256, so
/// the CAs of several data directories can be installed side by side and
/// each removed alone.
pub fn installed_name(ca_der: &[u8], extension: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(ca_der);
    format!("crawlcache-{}.{extension}", &hex::encode(digest)[..16])
}

/// Whether `program` is an executable file in a folder of `PATH` (or of
/// the system folders root's `PATH` has, for a `sudo` without them).
fn on_path(program: &str) -> bool {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(
        ["/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"].iter().map(PathBuf::from),
    );
    dirs.iter().any(|d| d.join(program).is_file())
}

/// What `ca install` and `ca uninstall` tell a user who could not use
/// them, or who uses a system they do not know.
const MANUAL_TRUST: &str = "on macOS: sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain CA_FILE; \
on Windows: certutil -addstore Root CA_FILE; elsewhere, copy CA_FILE where the system's trust store takes local CA certificates and rebuild it";

/// `ca install` (or, with `uninstall`, `ca uninstall`) of the CA certificate
/// at `cert_path` (PEM `pem`) in this system's trust store; `flags` are the
/// `--config` / `--data-dir` the command was given, repeated in the undo
/// hint so that it names the same CA. Errors: no known
/// store; the certificate cannot be written or removed (not root); the
/// store's command fails.
fn install(cert_path: &Path, pem: &str, uninstall: bool, flags: &str) -> Result<(), CommandError> {
    let store = choose_store(&SYSTEM_STORES, |p| p.is_dir(), on_path).ok_or_else(|| {
        let known: Vec<String> = SYSTEM_STORES
            .iter()
            .map(|s| format!("{} ({} with {})", s.systems, s.dir, s.command.join(" ")))
            .collect();
        format!(
            "no system trust store found that crawlcache knows: looked for {}; {}",
            known.join(", "),
            MANUAL_TRUST.replace("CA_FILE", &cert_path.display().to_string())
        )
    })?;
    let der = pem_certs(pem.as_bytes())
        .ok()
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| format!("{}: no certificate in the CA file", cert_path.display()))?;
    let target = Path::new(store.dir).join(installed_name(der.as_ref(), store.extension));
    let as_root = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            format!("cannot change {}: {e}; the system trust store belongs to root: run this command with sudo", target.display())
        } else {
            format!("cannot change {}: {e}", target.display())
        }
    };
    if uninstall {
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "crawlcache: {} is not installed ({} does not exist); nothing to remove",
                    cert_path.display(),
                    target.display()
                );
                return Ok(());
            }
            Err(e) => return Err(as_root(e).into()),
        }
    } else {
        write_file(&target, pem.as_bytes()).map_err(as_root)?;
    }
    let (program, args) = store.command.split_first().ok_or("empty trust store command")?;
    let out = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!("cannot run `{}` to rebuild the trust store: {e}", store.command.join(" "))
        })?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}{}",
            store.command.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        )
        .into());
    }
    if uninstall {
        eprintln!(
            "crawlcache: removed {} from the system trust store ({}) and ran `{}`",
            target.display(),
            store.systems,
            store.command.join(" ")
        );
    } else {
        eprintln!(
            "crawlcache: added {} to the system trust store as {} ({}) and ran `{}`; undo with `crawlcache ca uninstall{flags}`",
            cert_path.display(),
            target.display(),
            store.systems,
            store.command.join(" ")
        );
        eprintln!("crawlcache: clients that read the system store now trust the CA (curl, wget, OpenSSL, Scrapy with DOWNLOAD_VERIFY_CERTIFICATES = True); Python requests reads its own bundle (REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt), Node its own (NODE_EXTRA_CA_CERTS), Chromium and Firefox their NSS database (certutil)");
    }
    Ok(())
}

/// Runs `ca`: loads the CA of the data directory (creating it only for
/// `ca init`) and prints the certificate's absolute path, the PEM, or
/// writes the bundle and prints its path, or changes the system trust
/// store. Exit 1, after saying on stderr where the certificate was looked
/// for, when there is no CA and the command is not `ca init`.
/// Errors: the CA cannot be created or read; the bundle's roots cannot be
/// found or read, or the bundle cannot be written; the trust store cannot
/// be changed.
pub fn run(args: CaArgs) -> Result<ExitCode, CommandError> {
    let (common, init, action) = match args.command {
        Some(CaCommand::Path { common, pem }) => (common, false, Action::Path { pem }),
        Some(CaCommand::Init { common }) => (common, true, Action::Path { pem: false }),
        Some(CaCommand::Bundle { common, file, roots }) => {
            (common, false, Action::Bundle { file, roots })
        }
        Some(CaCommand::Install { common }) => (common, false, Action::Install),
        Some(CaCommand::Uninstall { common }) => (common, false, Action::Uninstall),
        None => {
            let (common, init, action, replacement) = args.legacy.action();
            if let Some((old, new)) = replacement {
                super::common::deprecated(&old, &new);
            }
            (common, init, action)
        }
    };
    let cfg = load_config(&common)?;
    let dir = &cfg.server.data_dir;
    super::common::check_data_dir(dir)?;
    let expected = CertificateAuthority::cert_path_in(dir);
    let existed = expected.try_exists().map_err(|e| {
        format!("cannot look for the CA certificate {}: {e}", absolute(&expected).display())
    })?;
    if !existed && !init {
        eprintln!("crawlcache: no CA certificate at {}", absolute(&expected).display());
        let flags = flags_of(&common);
        eprintln!("crawlcache: create one with `crawlcache serve{flags}` (its first start creates it) or `crawlcache ca init{flags}`");
        return Ok(ExitCode::from(1));
    }
    crawlcache_base::fsutil::create_private_dir(dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", dir.display()))?;
    let ca = CertificateAuthority::load_or_create(dir).map_err(|e| e.to_string())?;
    let cert_path =
        std::fs::canonicalize(ca.cert_path()).unwrap_or_else(|_| absolute(ca.cert_path()));
    if !existed {
        eprintln!("crawlcache: created a new local CA; clients must trust {}", cert_path.display());
    }
    let uninstall = action == Action::Uninstall;
    match action {
        Action::Install | Action::Uninstall => {
            install(&cert_path, ca.cert_pem(), uninstall, &flags_of(&common))?;
            outln!("{}", cert_path.display());
        }
        Action::Bundle { file: bundle, roots } => {
            let roots = find_roots(
                roots.as_deref(),
                std::env::var_os("SSL_CERT_FILE"),
                &SYSTEM_ROOT_FILES,
            )?;
            let text = std::fs::read(&roots.path).map_err(|e| {
                format!("cannot read the root certificates {}: {e}", roots.describe())
            })?;
            let (contents, n) = bundle_contents(&text, &roots, ca.cert_pem(), &cert_path)?;
            write_file(&bundle, &contents)
                .map_err(|e| format!("cannot write the bundle {}: {e}", bundle.display()))?;
            eprintln!(
                "crawlcache: wrote {n} root certificate(s) from {} and the crawlcache CA to {}",
                roots.path.display(),
                bundle.display()
            );
            outln!("{}", absolute(&bundle).display());
        }
        Action::Path { pem: true } => out!("{}", ca.cert_pem()),
        Action::Path { pem: false } => outln!("{}", cert_path.display()),
    }
    Ok(ExitCode::SUCCESS)
}

/// `path` made absolute against the current directory (symlinks kept; the
/// path need not exist).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// ` --config FILE --data-dir DIR` as the user gave them, for the commands
/// suggested in a message.
fn flags_of(common: &Common) -> String {
    let mut s = String::new();
    if let Some(c) = &common.config {
        s.push_str(&format!(" --config {}", shell_word(&c.display().to_string())));
    }
    if let Some(d) = &common.data_dir {
        s.push_str(&format!(" --data-dir {}", shell_word(&d.display().to_string())));
    }
    s
}

/// `w`, single-quoted when a shell would otherwise split or expand it.
fn shell_word(w: &str) -> String {
    let plain =
        !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// The file of root certificates a bundle starts from, and who named it.
#[derive(Debug, PartialEq, Eq)]
pub struct Roots {
    /// The file of root certificates.
    pub path: PathBuf,
    /// Who named it.
    pub source: RootsSource,
}

/// Who named the roots file.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RootsSource {
    /// `--roots FILE`.
    Option,
    /// The `SSL_CERT_FILE` environment variable.
    SslCertFile,
    /// The first existing file of [`SYSTEM_ROOT_FILES`].
    System,
}

impl Roots {
    /// The path and, unless given with `--roots`, where it came from.
    fn describe(&self) -> String {
        match self.source {
            RootsSource::Option => self.path.display().to_string(),
            RootsSource::SslCertFile => format!("{} (from SSL_CERT_FILE)", self.path.display()),
            RootsSource::System => format!("{} (the system's)", self.path.display()),
        }
    }
}

/// The roots file for a bundle: `explicit` (`--roots`), else
/// `ssl_cert_file` (the value of `SSL_CERT_FILE`, when set and not empty),
/// else the first of `candidates` that is a file. Errors: none of them
/// applies; the message names every path tried.
pub fn find_roots(
    explicit: Option<&Path>,
    ssl_cert_file: Option<OsString>,
    candidates: &[&str],
) -> Result<Roots, CommandError> {
    if let Some(p) = explicit {
        return Ok(Roots { path: p.to_path_buf(), source: RootsSource::Option });
    }
    if let Some(v) = ssl_cert_file.filter(|v| !v.is_empty()) {
        return Ok(Roots { path: PathBuf::from(v), source: RootsSource::SslCertFile });
    }
    if let Some(p) = candidates.iter().map(Path::new).find(|p| p.is_file()) {
        return Ok(Roots { path: p.to_path_buf(), source: RootsSource::System });
    }
    Err(format!(
        "no system root certificates found: SSL_CERT_FILE is not set and none of {} exists; name a file of PEM root certificates with --roots FILE",
        candidates.join(", ")
    ).into())
}

/// The bundle: the roots file as it is, then (unless the roots already hold
/// it) a comment naming `ca_path` and the CA certificate `ca_pem`. Returns
/// the text and how many root certificates other than the CA it holds.
/// Errors: the roots are not PEM certificates, or hold none besides the CA
/// (`SSL_CERT_FILE` pointing at crawlcache's own CA would otherwise give a
/// bundle without a single public root).
pub fn bundle_contents(
    roots_text: &[u8],
    roots: &Roots,
    ca_pem: &str,
    ca_path: &Path,
) -> Result<(Vec<u8>, usize), CommandError> {
    let certs = pem_certs(roots_text)
        .map_err(|e| format!("{}: not a PEM certificate file: {e}", roots.describe()))?;
    let ca_der = pem_certs(ca_pem.as_bytes())
        .ok()
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| format!("{}: no certificate in the CA file", ca_path.display()))?;
    let others = certs.iter().filter(|c| **c != ca_der).count();
    if others == 0 {
        return Err(format!(
            "{} holds no root certificate{}; name the system roots with --roots FILE",
            roots.describe(),
            if certs.is_empty() { "" } else { " besides crawlcache's own CA" }
        )
        .into());
    }
    let mut out = roots_text.to_vec();
    if !certs.contains(&ca_der) {
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(
            format!("\n# crawlcache local CA ({})\n", ca_path.display()).as_bytes(),
        );
        out.extend_from_slice(ca_pem.as_bytes());
        if !ca_pem.ends_with('\n') {
            out.push(b'\n');
        }
    }
    Ok((out, others))
}

/// Every `CERTIFICATE` block of a PEM text (other blocks are skipped).
fn pem_certs(text: &[u8]) -> Result<Vec<CertificateDer<'static>>, std::io::Error> {
    CertificateDer::pem_slice_iter(text)
        .collect::<Result<_, _>>()
        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err.to_string()))
}

/// Writes `contents` to `path` through a temporary file beside it, renamed
/// into place (mode 0644: certificates are public), so a reader never sees
/// half a bundle and the roots file may be the bundle itself.
fn write_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new().prefix(".crawlcache-bundle-").tempfile_in(parent)?;
    tmp.write_all(contents)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem_of(name: &str) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    fn roots(path: &str) -> Roots {
        Roots { path: PathBuf::from(path), source: RootsSource::Option }
    }

    #[test]
    fn roots_come_from_the_option_then_ssl_cert_file_then_the_first_existing_system_file() {
        let tmp = tempfile::tempdir().unwrap();
        let second = tmp.path().join("second.pem");
        std::fs::write(&second, "x").unwrap();
        let missing = tmp.path().join("missing.pem");
        let candidates = [missing.to_str().unwrap(), second.to_str().unwrap()];

        let r = find_roots(Some(Path::new("/given.pem")), Some("/env.pem".into()), &candidates)
            .unwrap();
        assert_eq!(r, Roots { path: "/given.pem".into(), source: RootsSource::Option });
        let r = find_roots(None, Some("/env.pem".into()), &candidates).unwrap();
        assert_eq!(r, Roots { path: "/env.pem".into(), source: RootsSource::SslCertFile });
        let r = find_roots(None, Some("".into()), &candidates).unwrap();
        assert_eq!(r, Roots { path: second.clone(), source: RootsSource::System });
        let r = find_roots(None, None, &candidates).unwrap();
        assert_eq!(r, Roots { path: second, source: RootsSource::System });
    }

    #[test]
    fn no_roots_file_is_an_error_naming_every_path_tried() {
        let err = find_roots(None, None, &["/nonexistent/a.crt", "/nonexistent/b.pem"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("SSL_CERT_FILE is not set"), "{err}");
        assert!(err.contains("/nonexistent/a.crt, /nonexistent/b.pem"), "{err}");
        assert!(err.contains("--roots FILE"), "{err}");
    }

    #[test]
    fn the_bundle_is_the_roots_file_then_the_ca() {
        let (a, b, ca) = (pem_of("a.test"), pem_of("b.test"), pem_of("ca.test"));
        // No newline at the end of the roots file: the CA still starts a line.
        let text = format!("# system roots\n{a}{}", b.trim_end());
        let (out, n) =
            bundle_contents(text.as_bytes(), &roots("r.pem"), &ca, Path::new("/d/ca/ca.pem"))
                .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(n, 2);
        assert!(out.starts_with(&text), "{out}");
        assert!(out.ends_with(&format!("\n# crawlcache local CA (/d/ca/ca.pem)\n{ca}")), "{out}");
        assert_eq!(pem_certs(out.as_bytes()).unwrap().len(), 3);
    }

    #[test]
    fn a_roots_file_that_already_holds_the_ca_gets_no_second_copy() {
        let (a, ca) = (pem_of("a.test"), pem_of("ca.test"));
        let text = format!("{a}{ca}");
        let (out, n) =
            bundle_contents(text.as_bytes(), &roots("r.pem"), &ca, Path::new("ca.pem")).unwrap();
        assert_eq!((out, n), (text.into_bytes(), 1));
    }

    #[test]
    fn roots_without_a_certificate_besides_the_ca_are_refused() {
        let ca = pem_of("ca.test");
        let env = Roots { path: "/d/ca/ca.pem".into(), source: RootsSource::SslCertFile };
        let err = bundle_contents(ca.as_bytes(), &env, &ca, Path::new("/d/ca/ca.pem"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/d/ca/ca.pem (from SSL_CERT_FILE) holds no root certificate besides crawlcache's own CA"), "{err}");
        let err =
            bundle_contents(b"not a certificate\n", &roots("r.pem"), &ca, Path::new("ca.pem"))
                .unwrap_err()
                .to_string();
        assert!(err.starts_with("r.pem holds no root certificate;"), "{err}");
    }

    #[test]
    fn the_trust_store_is_the_first_whose_folder_and_command_exist() {
        let debian = |p: &Path| p == Path::new("/usr/local/share/ca-certificates");
        let store =
            choose_store(&SYSTEM_STORES, debian, |c| c == "update-ca-certificates").unwrap();
        assert_eq!(store.command, &["update-ca-certificates"]);
        assert!(store.systems.contains("Debian"));
        // The folder without its command (ca-certificates not installed).
        assert_eq!(choose_store(&SYSTEM_STORES, debian, |_| false), None);
        let fedora = |p: &Path| {
            p == Path::new("/etc/pki/ca-trust/source/anchors")
                || p == Path::new("/usr/local/share/ca-certificates")
        };
        let store = choose_store(&SYSTEM_STORES, fedora, |_| true).unwrap();
        assert_eq!(store.command, &["update-ca-trust", "extract"]);
        let suse = |p: &Path| p == Path::new("/etc/pki/trust/anchors");
        assert_eq!(
            choose_store(&SYSTEM_STORES, suse, |c| c == "update-ca-certificates").unwrap().dir,
            "/etc/pki/trust/anchors"
        );
    }

    #[test]
    fn an_installed_ca_is_named_by_its_fingerprint() {
        let a = installed_name(b"one certificate", "crt");
        assert!(
            a.starts_with("crawlcache-")
                && a.ends_with(".crt")
                && a.len() == "crawlcache-".len() + 16 + 4,
            "{a}"
        );
        assert_ne!(a, installed_name(b"another certificate", "crt"));
        assert_eq!(a, installed_name(b"one certificate", "crt"));
    }

    #[test]
    fn each_old_flag_names_the_subcommand_that_replaces_it() {
        let words = |f: LegacyCaFlags| f.action().3.map(|(_, new)| new);
        assert_eq!(words(LegacyCaFlags::default()), None, "plain `ca` is `ca path`");
        assert_eq!(
            words(LegacyCaFlags { init: true, ..Default::default() }).as_deref(),
            Some("ca init")
        );
        assert_eq!(
            words(LegacyCaFlags { pem: true, ..Default::default() }).as_deref(),
            Some("ca path --pem")
        );
        assert_eq!(
            words(LegacyCaFlags { init: true, install: true, ..Default::default() }).as_deref(),
            Some("ca init` then `crawlcache ca install")
        );
        let bundle = LegacyCaFlags {
            bundle: Some("my b.pem".into()),
            roots: Some("r.pem".into()),
            ..Default::default()
        };
        let (_, init, action, new) = bundle.action();
        assert!(!init);
        assert_eq!(action, Action::Bundle { file: "my b.pem".into(), roots: Some("r.pem".into()) });
        assert_eq!(
            new,
            Some((
                "ca --bundle FILE".to_string(),
                "ca bundle 'my b.pem' --roots r.pem".to_string()
            ))
        );
    }

    #[test]
    fn suggested_commands_repeat_the_flags_given_quoted_for_a_shell() {
        let common =
            Common { config: Some("my conf.toml".into()), data_dir: Some("/srv/data".into()) };
        assert_eq!(flags_of(&common), " --config 'my conf.toml' --data-dir /srv/data");
        assert_eq!(flags_of(&Common::default()), "");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
