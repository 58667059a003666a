//! The one error type of the `tls` module: every variant names the file or
//! host it is about, the cause, and where there is one, the fix.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why the certificate authority, a leaf certificate or a TLS configuration
/// could not be made.
///
/// `Display` gives a sentence for the user: it names the file (or host),
/// the cause and, where there is one, what to do about it.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A file or directory operation failed (`action` is what was attempted,
    /// for example "read" or "create directory").
    Io {
        /// What was attempted, as a verb phrase ("read", "write", ...).
        action: &'static str,
        /// The file or directory it was attempted on.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The CA private key file exists but cannot be used.
    InvalidKey {
        /// The key file (`<data_dir>/ca/ca.key`).
        path: PathBuf,
        /// What is wrong with it.
        cause: String,
    },
    /// A certificate file (the CA certificate or an extra CA file) exists
    /// but holds no usable certificate.
    InvalidCertificate {
        /// The certificate file.
        path: PathBuf,
        /// What is wrong with it.
        cause: String,
    },
    /// The CA certificate exists but its private key does not.
    MissingKey {
        /// The CA certificate (`<data_dir>/ca/ca.pem`).
        cert_path: PathBuf,
        /// Where the key was expected (`<data_dir>/ca/ca.key`).
        key_path: PathBuf,
    },
    /// The CA certificate and private key on disk do not belong together:
    /// a certificate signed with the key does not verify against the
    /// stored CA certificate.
    KeyMismatch {
        /// The CA certificate.
        cert_path: PathBuf,
        /// The CA private key.
        key_path: PathBuf,
        /// The verification error.
        cause: String,
    },
    /// A host name that cannot be put in a certificate (neither a DNS name
    /// nor an IP address).
    InvalidHost {
        /// The host as given.
        host: String,
    },
    /// Generating a key pair or signing a certificate failed.
    Generate {
        /// What was being generated ("the CA key pair", "a leaf for example.com").
        what: String,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// rustls refused a configuration.
    Config {
        /// Which configuration ("the server configuration for example.com").
        what: String,
        /// rustls's error.
        source: rustls::Error,
    },
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Io { action, path, source } => write!(f, "could not {action} {}: {source}", path.display()),
            TlsError::InvalidKey { path, cause } => write!(
                f,
                "the CA private key {} is not usable: {cause}; restore it from a backup, \
                 or delete it together with the CA certificate beside it to create a new CA \
                 (clients must then trust the new certificate)",
                path.display()
            ),
            TlsError::InvalidCertificate { path, cause } => write!(f, "the certificate file {} is not usable: {cause}", path.display()),
            TlsError::MissingKey { cert_path, key_path } => write!(
                f,
                "the CA certificate {} exists but its private key {} does not; restore the key, \
                 or delete the certificate to create a new CA (clients must then trust the new \
                 certificate)",
                cert_path.display(),
                key_path.display()
            ),
            TlsError::KeyMismatch { cert_path, key_path, cause } => write!(
                f,
                "the CA certificate {} and the private key {} do not belong together ({cause}); \
                 restore the matching pair, or delete both to create a new CA (clients must then \
                 trust the new certificate)",
                cert_path.display(),
                key_path.display()
            ),
            TlsError::InvalidHost { host } => write!(f, "cannot issue a certificate for {host:?}: it is neither a DNS name nor an IP address"),
            TlsError::Generate { what, source } => {
                write!(f, "could not generate {what}: {source}")
            }
            TlsError::Config { what, source } => write!(f, "could not build {what}: {source}"),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::Io { source, .. } => Some(source),
            TlsError::Generate { source, .. } => Some(source),
            TlsError::Config { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl TlsError {
    /// Shorthand for [`TlsError::Io`].
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        TlsError::Io { action, path: path.into(), source }
    }
}
