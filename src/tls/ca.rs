//! The local certificate authority: created on first start under
//! `<data_dir>/ca/`, loaded on every later one, and used to mint one leaf
//! certificate per intercepted host.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use lru::LruCache;
use rcgen::{Certificate, KeyPair};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::ServerSessionMemoryCache;
use rustls::{RootCertStore, ServerConfig};

use super::error::TlsError;
use super::leaf::{ca_params, leaf_params, LeafName, LEAF_RENEW_MARGIN};

/// How many leaf configurations are kept in memory (least recently used
/// first out).
pub const LEAF_CACHE_CAPACITY: usize = 4096;

/// TLS sessions remembered per leaf configuration for resumption. rustls
/// allocates a configuration's session cache up front (256 entries, about
/// 30 KiB, by default); with thousands of cached leaves that adds up, and a
/// client resuming with one host rarely needs more than this.
const SESSIONS_PER_LEAF: usize = 32;

/// File name of the CA certificate inside `<data_dir>/ca/`.
const CERT_FILE: &str = "ca.pem";
/// File name of the CA private key inside `<data_dir>/ca/`.
const KEY_FILE: &str = "ca.key";
/// Prefix of the temporary files written before an atomic rename.
const TEMP_PREFIX: &str = ".ca-tmp-";

/// Name of the throw-away leaf used to check, on load, that the key signs
/// certificates the stored CA certificate verifies.
const PROBE_NAME: &str = "ca-check.crawlcache.invalid";

/// The local certificate authority that signs the leaf certificates shown to
/// clients on intercepted `CONNECT` tunnels.
///
/// Cheap to clone (one `Arc`), `Send + Sync`; clones share the leaf cache.
#[derive(Clone)]
pub struct CertificateAuthority {
    inner: Arc<Authority>,
}

struct Authority {
    cert_path: PathBuf,
    cert_pem: String,
    /// The issuer as rcgen needs it to sign: same distinguished name and key
    /// as the stored certificate (rebuilt from them when loading).
    issuer: Certificate,
    key: KeyPair,
    provider: Arc<CryptoProvider>,
    leaves: Mutex<LruCache<String, CachedLeaf>>,
    /// Which hosts' leaves offer HTTP/2 by ALPN (`tls.http2`,
    /// `tls.http1_hosts`); none until [`CertificateAuthority::offer_http2`].
    http2: std::sync::RwLock<Option<crate::config::TlsConfig>>,
}

struct CachedLeaf {
    config: Arc<ServerConfig>,
    not_after: SystemTime,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert_path", &self.inner.cert_path)
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Loads the CA from `<data_dir>/ca/ca.pem` and `<data_dir>/ca/ca.key`,
    /// or creates them on first start: an ECDSA P-256 key and a self-signed
    /// certificate with common name "crawlcache local CA", valid for 10
    /// years.
    ///
    /// Creates `data_dir` with mode 0700 if it does not exist; if it exists
    /// and is accessible to all users, tightens it to 0700 and logs a warning
    /// (unless it is a shared sticky directory such as `/tmp`, which is left
    /// alone). `<data_dir>/ca` is kept at 0700 and the key file at 0600. Each
    /// file is written to a temporary file, synced and renamed into place, so
    /// a crash never leaves half a key; a key left without its certificate by
    /// a crash gets a new certificate on the next start.
    ///
    /// On load, a certificate signed with the key must verify against the
    /// stored CA certificate.
    ///
    /// Errors: [`TlsError::Io`] (directory or file operations),
    /// [`TlsError::InvalidKey`] / [`TlsError::InvalidCertificate`] (malformed
    /// files), [`TlsError::MissingKey`] (certificate without key),
    /// [`TlsError::KeyMismatch`] (key and certificate from different CAs),
    /// [`TlsError::Generate`].
    pub fn load_or_create(data_dir: &Path) -> Result<CertificateAuthority, TlsError> {
        let provider = Arc::new(interception_provider());
        ensure_data_dir(data_dir)?;
        let ca_dir = data_dir.join("ca");
        ensure_ca_dir(&ca_dir)?;
        sweep_temp_files(&ca_dir);
        let cert_path = ca_dir.join(CERT_FILE);
        let key_path = ca_dir.join(KEY_FILE);
        let now = SystemTime::now();

        // Two processes starting at once on an empty directory race to create
        // the files; the loser of a no-clobber rename reads the winner's.
        let mut attempts = 0;
        let (cert_pem, issuer, key) = loop {
            attempts += 1;
            match load_or_create_files(&ca_dir, &cert_path, &key_path, &provider, now) {
                Err(Created::Raced) if attempts < 3 => continue,
                Err(Created::Raced) => {
                    return Err(TlsError::io(
                        "create",
                        &key_path,
                        io::Error::new(
                            io::ErrorKind::AlreadyExists,
                            "another process keeps replacing the CA files",
                        ),
                    ))
                }
                Err(Created::Failed(err)) => return Err(err),
                Ok(files) => break files,
            }
        };

        let capacity = NonZeroUsize::new(LEAF_CACHE_CAPACITY).unwrap_or(NonZeroUsize::MIN);
        Ok(CertificateAuthority {
            inner: Arc::new(Authority {
                cert_path,
                cert_pem,
                issuer,
                key,
                provider,
                leaves: Mutex::new(LruCache::new(capacity)),
                http2: std::sync::RwLock::new(None),
            }),
        })
    }

    /// Makes the leaves minted from now on offer HTTP/2 (ALPN `h2`, then
    /// `http/1.1`; RFC 9113 section 3.2) to the hosts `tls` allows it for
    /// ([`crate::config::TlsConfig::offers_http2`]); the others, and every
    /// leaf until this is called, offer `http/1.1` only. Leaves cached
    /// before the call are dropped, so the next handshake mints them anew.
    pub fn offer_http2(&self, tls: &crate::config::TlsConfig) {
        *self.inner.http2.write().unwrap_or_else(|p| p.into_inner()) = Some(tls.clone());
        self.lock_leaves().clear();
    }

    /// The ALPN protocols a leaf for `host` offers, most preferred first.
    fn alpn_for(&self, host: &str) -> Vec<Vec<u8>> {
        let policy = self.inner.http2.read().unwrap_or_else(|p| p.into_inner());
        match policy.as_ref() {
            Some(tls) if tls.offers_http2(host) => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            _ => vec![b"http/1.1".to_vec()],
        }
    }

    /// Where the CA certificate of `data_dir` is kept, or will be once the
    /// CA exists (`<data_dir>/ca/ca.pem`). Looks at and creates nothing.
    pub fn cert_path_in(data_dir: &Path) -> PathBuf {
        data_dir.join("ca").join(CERT_FILE)
    }

    /// Path of the CA certificate (`<data_dir>/ca/ca.pem`), the file clients
    /// are told to trust (`curl --cacert`, `SSL_CERT_FILE`,
    /// `REQUESTS_CA_BUNDLE`).
    pub fn cert_path(&self) -> &Path {
        &self.inner.cert_path
    }

    /// The CA certificate as PEM text, as stored in [`Self::cert_path`].
    pub fn cert_pem(&self) -> &str {
        &self.inner.cert_pem
    }

    /// A rustls server configuration presenting a leaf certificate for
    /// `host`, signed by this CA, with ALPN `http/1.1`.
    ///
    /// `host` is a DNS name (any case, trailing dot allowed) or an IP
    /// literal (IPv6 with or without `[]`), without a port. DNS names get a
    /// DNS subject alternative name, IP addresses an IP one. Configurations
    /// are cached (the [`LEAF_CACHE_CAPACITY`] most recently used hosts) and
    /// the same `Arc` is returned until the leaf is within a day of expiring.
    ///
    /// Errors: [`TlsError::InvalidHost`], [`TlsError::Generate`],
    /// [`TlsError::Config`].
    pub fn server_config_for(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        self.server_config_for_at(host, SystemTime::now())
    }

    /// [`Self::server_config_for`] with the current time given: a cached
    /// leaf is reused while `now` is more than a day before its end of
    /// validity, and a new leaf is valid from a day before `now`.
    pub fn server_config_for_at(
        &self,
        host: &str,
        now: SystemTime,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let name = LeafName::parse(host)?;
        let key = name.cache_key();
        if let Some(config) = self.cached(&key, now) {
            return Ok(config);
        }
        // Minted outside the lock: signing must not hold up other hosts.
        let (config, not_after) = self.mint(&name, now)?;
        let mut leaves = self.lock_leaves();
        if let Some(existing) = leaves.get(&key) {
            if is_fresh(existing.not_after, now) {
                // Another task minted this host meanwhile: keep one Arc.
                return Ok(existing.config.clone());
            }
        }
        leaves.put(key, CachedLeaf { config: config.clone(), not_after });
        Ok(config)
    }

    /// The cached configuration for `host`, if a fresh one is cached:
    /// never mints (for callers that mint off their thread, see
    /// [`Self::server_config_for`]). Errors: [`TlsError::InvalidHost`].
    pub fn cached_config_for(&self, host: &str) -> Result<Option<Arc<ServerConfig>>, TlsError> {
        let name = LeafName::parse(host)?;
        Ok(self.cached(&name.cache_key(), SystemTime::now()))
    }

    fn cached(&self, key: &str, now: SystemTime) -> Option<Arc<ServerConfig>> {
        let mut leaves = self.lock_leaves();
        match leaves.get(key) {
            Some(leaf) if is_fresh(leaf.not_after, now) => Some(leaf.config.clone()),
            _ => None,
        }
    }

    fn lock_leaves(&self) -> std::sync::MutexGuard<'_, LruCache<String, CachedLeaf>> {
        // The cache holds no invariant a panicking holder could break.
        self.inner.leaves.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn mint(
        &self,
        name: &LeafName,
        now: SystemTime,
    ) -> Result<(Arc<ServerConfig>, SystemTime), TlsError> {
        let inner = &self.inner;
        let (leaf_der, key_der, not_after) =
            sign_leaf(name, &inner.issuer, &inner.key, &inner.provider, now)?;
        let what = || format!("the server configuration for {}", name.cache_key());
        let mut config = ServerConfig::builder_with_provider(inner.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Config { what: what(), source })?
            .with_no_client_auth()
            .with_single_cert(vec![leaf_der], PrivateKeyDer::Pkcs8(key_der))
            .map_err(|source| TlsError::Config { what: what(), source })?;
        config.alpn_protocols = self.alpn_for(&name.cache_key());
        config.session_storage = ServerSessionMemoryCache::new(SESSIONS_PER_LEAF);
        // The provider's order of cipher suites decides (AES-128-GCM first,
        // see interception_provider).
        config.ignore_client_order = true;
        Ok((Arc::new(config), not_after))
    }
}

/// The ring provider for the intercepting side, its cipher suites in the
/// order the proxy prefers: AES-128-GCM first, then AES-256-GCM, then
/// ChaCha20-Poly1305 (TLS 1.3, then the same for TLS 1.2). Clients
/// (rustls, OpenSSL, Chromium) list AES-256 first; with AES-128 (10 AES
/// rounds instead of 14) a 16 KiB hit costs less on both ends of the
/// tunnel, at a security level no client refuses (it is TLS 1.3's
/// mandatory suite, RFC 8446 section 9.1). Crawlers run where AES is done
/// in hardware, so ChaCha20 is only a fallback.
fn interception_provider() -> CryptoProvider {
    use rustls::CipherSuite::*;
    let mut provider = rustls::crypto::ring::default_provider();
    let rank = |s: &rustls::SupportedCipherSuite| match s.suite() {
        TLS13_AES_128_GCM_SHA256 => 0,
        TLS13_AES_256_GCM_SHA384 => 1,
        TLS13_CHACHA20_POLY1305_SHA256 => 2,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 3,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 | TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 4,
        _ => 5,
    };
    provider.cipher_suites.sort_by_key(rank);
    provider
}

fn is_fresh(not_after: SystemTime, now: SystemTime) -> bool {
    now.checked_add(LEAF_RENEW_MARGIN).is_some_and(|limit| limit < not_after)
}

/// Generates a key pair for `name` and a leaf certificate for it signed by
/// the CA. Returns the certificate, the PKCS#8 key and the end of validity.
fn sign_leaf(
    name: &LeafName,
    issuer: &Certificate,
    issuer_key: &KeyPair,
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>, SystemTime), TlsError> {
    let generate = |source| TlsError::Generate {
        what: format!("a leaf certificate for {}", name.cache_key()),
        source,
    };
    let serial = random_serial(provider).map_err(generate)?;
    let (params, not_after) = leaf_params(name, now, serial).map_err(generate)?;
    let leaf_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(generate)?;
    let cert = params.signed_by(&leaf_key, issuer, issuer_key).map_err(generate)?;
    Ok((cert.der().clone(), PrivatePkcs8KeyDer::from(leaf_key.serialize_der()), not_after))
}

fn random_serial(provider: &CryptoProvider) -> Result<[u8; 16], rcgen::Error> {
    let mut serial = [0u8; 16];
    provider.secure_random.fill(&mut serial).map_err(|_| rcgen::Error::RingUnspecified)?;
    Ok(serial)
}

/// How an attempt at loading or creating the CA files ended badly.
enum Created {
    /// Another process created a file between our check and our rename.
    Raced,
    Failed(TlsError),
}

impl From<TlsError> for Created {
    fn from(err: TlsError) -> Self {
        Created::Failed(err)
    }
}

/// One pass of the load-or-create state machine over the two files.
fn load_or_create_files(
    ca_dir: &Path,
    cert_path: &Path,
    key_path: &Path,
    provider: &Arc<CryptoProvider>,
    now: SystemTime,
) -> Result<(String, Certificate, KeyPair), Created> {
    let have_key = exists(key_path)?;
    let have_cert = exists(cert_path)?;
    match (have_key, have_cert) {
        (true, true) => {
            let key = read_key(key_path)?;
            let (cert_pem, cert_der) = read_cert(cert_path)?;
            let issuer = issuer_for(&key, provider, now)?;
            check_pair(&cert_der, &issuer, &key, provider, now).map_err(|e| {
                TlsError::KeyMismatch {
                    cert_path: cert_path.to_owned(),
                    key_path: key_path.to_owned(),
                    cause: e.to_string(),
                }
            })?;
            tracing::debug!(cert = %cert_path.display(), "loaded the local CA");
            Ok((cert_pem, issuer, key))
        }
        (true, false) => {
            // A crash between writing the key and the certificate.
            let key = read_key(key_path)?;
            let issuer = issuer_for(&key, provider, now)?;
            let cert_pem = issuer.pem();
            if !write_new_file(ca_dir, cert_path, cert_pem.as_bytes(), 0o644)? {
                return Err(Created::Raced);
            }
            tracing::warn!(
                cert = %cert_path.display(),
                "the CA key had no certificate; wrote a new CA certificate for it (clients must trust this file)"
            );
            Ok((cert_pem, issuer, key))
        }
        (false, true) => Err(TlsError::MissingKey {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
        }
        .into()),
        (false, false) => {
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .map_err(|source| TlsError::Generate { what: "the CA key pair".into(), source })?;
            let issuer = issuer_for(&key, provider, now)?;
            let key_pem = key.serialize_pem();
            let cert_pem = issuer.pem();
            // Key first: a crash before the certificate is written is
            // repaired by the (true, false) arm on the next start.
            if !write_new_file(ca_dir, key_path, key_pem.as_bytes(), 0o600)? {
                return Err(Created::Raced);
            }
            if !write_new_file(ca_dir, cert_path, cert_pem.as_bytes(), 0o644)? {
                return Err(Created::Raced);
            }
            tracing::info!(
                cert = %cert_path.display(),
                "created the local CA; clients must trust this certificate to use HTTPS through crawlcache"
            );
            Ok((cert_pem, issuer, key))
        }
    }
}

/// The CA certificate rebuilt from its fixed parameters and `key`: it has
/// the stored certificate's subject and key, which is all a leaf's issuer
/// field and signature depend on.
fn issuer_for(
    key: &KeyPair,
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Certificate, TlsError> {
    let generate = |source| TlsError::Generate { what: "the CA certificate".into(), source };
    let serial = random_serial(provider).map_err(generate)?;
    ca_params(now, serial).self_signed(key).map_err(generate)
}

/// Signs a probe leaf with `key` and verifies it against the stored CA
/// certificate, so a key and certificate from different CAs are caught at
/// start-up rather than by every client. Errors: [`PairError`].
fn check_pair(
    cert_der: &CertificateDer<'static>,
    issuer: &Certificate,
    key: &KeyPair,
    provider: &Arc<CryptoProvider>,
    now: SystemTime,
) -> Result<(), PairError> {
    let mut roots = RootCertStore::empty();
    roots.add(cert_der.clone()).map_err(PairError::Anchor)?;
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(PairError::Verifier)?;
    let probe = LeafName::Dns(PROBE_NAME.to_owned());
    let (leaf_der, _, _) = sign_leaf(&probe, issuer, key, provider, now)?;
    let server_name = ServerName::try_from(PROBE_NAME).map_err(PairError::ProbeName)?;
    let unix_now =
        UnixTime::since_unix_epoch(now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default());
    verifier
        .verify_server_cert(&leaf_der, &[], &server_name, &[], unix_now)
        .map(|_| ())
        .map_err(PairError::Mismatch)
}

/// Why [`check_pair`] found the CA key and certificate unusable together
/// (the `cause` of [`TlsError::KeyMismatch`]).
#[derive(Debug, thiserror::Error)]
enum PairError {
    /// The certificate cannot be a trust anchor.
    #[error("the CA certificate is not usable as a trust anchor: {0}")]
    Anchor(rustls::Error),
    /// No verifier could be built over it.
    #[error("{0}")]
    Verifier(rustls::server::VerifierBuilderError),
    /// The probe leaf could not be signed.
    #[error("{0}")]
    Sign(#[from] TlsError),
    /// The probe name is refused (never: it is a constant).
    #[error("probe name: {0}")]
    ProbeName(rustls::pki_types::InvalidDnsNameError),
    /// A leaf signed with the key does not verify against the certificate.
    #[error("a certificate signed with the key does not verify: {0}")]
    Mismatch(rustls::Error),
}

fn exists(path: &Path) -> Result<bool, TlsError> {
    match fs::metadata(path) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(TlsError::io("inspect", path, err)),
    }
}

fn read_key(path: &Path) -> Result<KeyPair, TlsError> {
    let bytes = fs::read(path).map_err(|err| TlsError::io("read", path, err))?;
    let invalid = |cause: String| TlsError::InvalidKey { path: path.to_owned(), cause };
    let text =
        std::str::from_utf8(&bytes).map_err(|_| invalid("it is not a PEM text file".into()))?;
    let key = KeyPair::from_pem(text).map_err(|err| {
        invalid(format!("expected an unencrypted PKCS#8 \"PRIVATE KEY\" PEM block ({err})"))
    })?;
    restrict_key_permissions(path)?;
    Ok(key)
}

/// Reads the CA certificate: the file's text and its first certificate.
fn read_cert(path: &Path) -> Result<(String, CertificateDer<'static>), TlsError> {
    let bytes = fs::read(path).map_err(|err| TlsError::io("read", path, err))?;
    let invalid = |cause: String| TlsError::InvalidCertificate { path: path.to_owned(), cause };
    let text = String::from_utf8(bytes).map_err(|_| invalid("it is not a PEM text file".into()))?;
    let first = rustls::pki_types::CertificateDer::pem_slice_iter(text.as_bytes()).next();
    match first {
        Some(Ok(der)) => Ok((text, der)),
        Some(Err(err)) => Err(invalid(format!("malformed PEM: {err}"))),
        None => Err(invalid("it holds no \"CERTIFICATE\" PEM block".into())),
    }
}

/// Writes `contents` to `path` atomically (temporary file in `dir`, synced,
/// renamed without replacing an existing file, directory synced) with the
/// given Unix mode. Returns `false` if `path` appeared meanwhile.
fn write_new_file(dir: &Path, path: &Path, contents: &[u8], mode: u32) -> Result<bool, TlsError> {
    let mut temp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|err| TlsError::io("create a temporary file in", dir, err))?;
    let temp_path = temp.path().to_owned();
    temp.write_all(contents).map_err(|err| TlsError::io("write", &temp_path, err))?;
    set_mode(temp.as_file(), mode)
        .map_err(|err| TlsError::io("set permissions of", &temp_path, err))?;
    temp.as_file().sync_all().map_err(|err| TlsError::io("sync", &temp_path, err))?;
    match temp.persist_noclobber(path) {
        Ok(_) => {}
        Err(err) if err.error.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
        Err(err) => return Err(TlsError::io("write", path, err.error)),
    }
    if let Err(err) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), error = %err, "could not sync the CA directory");
    }
    Ok(true)
}

/// Removes temporary files a crash left behind in `<data_dir>/ca`.
fn sweep_temp_files(ca_dir: &Path) {
    let Ok(entries) = fs::read_dir(ca_dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            if let Err(err) = fs::remove_file(entry.path()) {
                tracing::warn!(file = %entry.path().display(), error = %err, "could not remove a leftover temporary file");
            }
        }
    }
}

#[cfg(unix)]
fn set_mode(file: &fs::File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_file: &fs::File, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Creates `data_dir` (0700) or, if it exists and all users can access it,
/// tightens it to 0700.
#[cfg(unix)]
fn ensure_data_dir(data_dir: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    match fs::metadata(data_dir) {
        Ok(meta) if !meta.is_dir() => Err(TlsError::io(
            "use as the data directory",
            data_dir,
            io::Error::other("it is not a directory"),
        )),
        Ok(meta) => {
            let mode = meta.permissions().mode();
            if mode & 0o007 == 0 {
                return Ok(());
            }
            if mode & 0o1000 != 0 {
                tracing::warn!(
                    dir = %data_dir.display(),
                    "the data directory is a shared sticky directory; leaving its permissions alone (the CA directory inside is private)"
                );
                return Ok(());
            }
            match fs::set_permissions(data_dir, fs::Permissions::from_mode(0o700)) {
                Ok(()) => tracing::warn!(
                    dir = %data_dir.display(),
                    old_mode = format!("{:o}", mode & 0o7777),
                    "the data directory was accessible to all users; tightened it to 0700"
                ),
                Err(err) => tracing::warn!(
                    dir = %data_dir.display(),
                    error = %err,
                    "the data directory is accessible to all users and could not be tightened to 0700"
                ),
            }
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            create_private_dir(data_dir)?;
            Ok(())
        }
        Err(err) => Err(TlsError::io("inspect", data_dir, err)),
    }
}

#[cfg(not(unix))]
fn ensure_data_dir(data_dir: &Path) -> Result<(), TlsError> {
    fs::create_dir_all(data_dir).map_err(|err| TlsError::io("create directory", data_dir, err))
}

/// Creates `<data_dir>/ca` (0700), or tightens it to 0700 if others can
/// access it.
#[cfg(unix)]
fn ensure_ca_dir(ca_dir: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    match fs::metadata(ca_dir) {
        Ok(meta) if !meta.is_dir() => Err(TlsError::io(
            "use as the CA directory",
            ca_dir,
            io::Error::other("it is not a directory"),
        )),
        Ok(meta) => {
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                fs::set_permissions(ca_dir, fs::Permissions::from_mode(0o700)).map_err(|err| {
                    TlsError::io("restrict permissions (to 0700) of", ca_dir, err)
                })?;
                tracing::warn!(
                    dir = %ca_dir.display(),
                    old_mode = format!("{:o}", mode & 0o7777),
                    "the CA directory was accessible to other users; tightened it to 0700"
                );
            }
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => create_private_dir(ca_dir),
        Err(err) => Err(TlsError::io("inspect", ca_dir, err)),
    }
}

#[cfg(not(unix))]
fn ensure_ca_dir(ca_dir: &Path) -> Result<(), TlsError> {
    fs::create_dir_all(ca_dir).map_err(|err| TlsError::io("create directory", ca_dir, err))
}

/// Creates a new private directory (0700; see [`crawlcache_base::fsutil::create_private_dir`]).
#[cfg(unix)]
fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    crawlcache_base::fsutil::create_private_dir(dir)
        .map_err(|err| TlsError::io("create directory", dir, err))
}

/// Makes the key file readable by its owner only (0600) if it is not already.
#[cfg(unix)]
fn restrict_key_permissions(path: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::metadata(path).map_err(|err| TlsError::io("inspect", path, err))?;
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .map_err(|err| TlsError::io("restrict permissions (to 0600) of", path, err))?;
        tracing::warn!(
            file = %path.display(),
            old_mode = format!("{:o}", mode & 0o7777),
            "the CA private key was readable by other users; tightened it to 0600"
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn restrict_key_permissions(_path: &Path) -> Result<(), TlsError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn authority_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<CertificateAuthority>();
    }

    #[test]
    fn the_intercepting_side_prefers_aes_128_gcm() {
        let p = interception_provider();
        assert_eq!(p.cipher_suites[0].suite(), rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert_eq!(
            p.cipher_suites.len(),
            rustls::crypto::ring::default_provider().cipher_suites.len(),
            "no suite dropped"
        );
    }

    #[test]
    fn cached_leaves_are_renewed_a_day_before_they_expire() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let not_after = now + Duration::from_secs(10 * 24 * 3600);
        assert!(is_fresh(not_after, now));
        assert!(is_fresh(not_after, not_after - Duration::from_secs(24 * 3600 + 1)));
        assert!(!is_fresh(not_after, not_after - Duration::from_secs(24 * 3600)));
        assert!(!is_fresh(not_after, not_after + Duration::from_secs(1)));
    }
}
