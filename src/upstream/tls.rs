//! TLS towards origins: the verified client configuration, the connector the
//! upstream client is built on, and the sentence a certificate failure
//! becomes in the proxy's 502 body.

use std::error::Error as StdError;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::UnixTime;
use rustls::{CertificateError, ClientConfig, RootCertStore};

use super::pinned::PinnedSelfSigned;
use crate::tls::TlsError;
use crate::upstream::parent::{OriginConnector, ParentProxy};

/// A rustls client configuration for talking to origins: the public roots
/// of `webpki-roots` plus, when given, every certificate in
/// `extra_ca_file` (PEM, one or more `CERTIFICATE` blocks). A certificate
/// of that file that an origin presents as its own (a self-signed one, as
/// `openssl req -x509` makes) is accepted as it is, its names and validity
/// checked (see `pinned.rs`); everything else is verified by webpki. ALPN
/// offers `http/1.1`. Uses the ring provider explicitly; no process-wide
/// default provider is needed.
///
/// Errors: [`TlsError::Io`] if the extra CA file cannot be read,
/// [`TlsError::InvalidCertificate`] if it holds no certificate or a
/// certificate that cannot be a trust anchor, [`TlsError::Config`].
pub fn upstream_client_config(extra_ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let listed = match extra_ca_file {
        Some(path) => add_pem_roots(&mut roots, path)?,
        None => Vec::new(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config_error =
        |source| TlsError::Config { what: "the upstream TLS client configuration".into(), source };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(config_error)?;
    let mut config = if listed.is_empty() {
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        let webpki =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| config_error(rustls::Error::General(e.to_string())))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedSelfSigned::new(webpki, listed)))
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Adds every certificate of the PEM file at `path` to `roots`; returns
/// them (DER).
fn add_pem_roots(
    roots: &mut RootCertStore,
    path: &Path,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    let bytes = fs::read(path).map_err(|err| TlsError::io("read the extra CA file", path, err))?;
    let invalid = |cause: String| TlsError::InvalidCertificate { path: path.to_owned(), cause };
    let mut added = Vec::new();
    for (index, item) in rustls::pki_types::CertificateDer::pem_slice_iter(&bytes).enumerate() {
        let der = item.map_err(|err| invalid(format!("malformed PEM: {err}")))?;
        roots.add(der.clone()).map_err(|err| {
            invalid(format!("certificate number {} cannot be a trust anchor: {err}", index + 1))
        })?;
        added.push(der);
    }
    if added.is_empty() {
        return Err(invalid(
            "it holds no \"CERTIFICATE\" PEM block; expected the CA certificate(s) in PEM".into(),
        ));
    }
    tracing::debug!(file = %path.display(), certificates = added.len(), "trusting extra CA certificates for origins");
    Ok(added)
}

/// A connector for hyper-util's legacy client: plain TCP for `http://` URIs,
/// TLS verified with `cfg` for `https://` URIs (server name from the URI's
/// host, IPv6 brackets removed). TCP connects give up after
/// `connect_timeout`; `TCP_NODELAY` is set.
pub fn upstream_connector(
    cfg: Arc<ClientConfig>,
    connect_timeout: Duration,
) -> HttpsConnector<HttpConnector> {
    HttpsConnector::from((tcp_connector(connect_timeout), cfg))
}

/// [`upstream_connector`] going through `parent` (see
/// [`crate::upstream::parent`]) for the origins it routes: `http://` requests
/// to the parent in absolute form, `https://` through a `CONNECT` tunnel
/// with TLS to the origin over it, verified with `cfg` as for a direct
/// connection. Without a parent, every origin is contacted directly.
pub fn origin_connector(
    cfg: Arc<ClientConfig>,
    connect_timeout: Duration,
    parent: Option<Arc<ParentProxy>>,
) -> HttpsConnector<OriginConnector> {
    HttpsConnector::from((OriginConnector::new(tcp_connector(connect_timeout), parent), cfg))
}

/// The TCP connector under the TLS layer.
fn tcp_connector(connect_timeout: Duration) -> HttpConnector {
    let mut http = HttpConnector::new();
    // The TLS layer above decides per scheme; HttpConnector must accept https URIs.
    http.enforce_http(false);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_nodelay(true);
    http
}

/// Finds a TLS failure in `err`'s chain of sources and says what it means
/// for the user, for the body of the proxy's 502: for example "the origin's
/// certificate is not trusted: UnknownIssuer (...)" or "the origin's
/// certificate is not valid for name example.com (it names: other.example)".
///
/// Certificate failures get a specific sentence; any other TLS error found
/// in the chain (an alert from the origin, no common protocol version...)
/// gets a general one. Returns `None` when the chain holds no TLS error
/// (DNS, refused connection, timeout...).
///
/// Looks inside `std::io::Error` wrappers too (tokio-rustls and
/// hyper-rustls wrap the rustls error in one or two of them, and
/// `io::Error::source` skips the wrapped error itself).
pub fn describe_tls_error(err: &(dyn StdError + 'static)) -> Option<String> {
    find_rustls_error(err, 0).map(describe_rustls_error)
}

/// Depth bound for the source-chain walk (chains are a handful long; this
/// only guards against a pathological cycle).
const MAX_CHAIN_DEPTH: usize = 32;

fn find_rustls_error<'a>(
    err: &'a (dyn StdError + 'static),
    depth: usize,
) -> Option<&'a rustls::Error> {
    if depth > MAX_CHAIN_DEPTH {
        return None;
    }
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    if let Some(io_err) = err.downcast_ref::<io::Error>() {
        if let Some(inner) = io_err.get_ref() {
            if let Some(found) = find_rustls_error(inner, depth + 1) {
                return Some(found);
            }
        }
    }
    err.source().and_then(|source| find_rustls_error(source, depth + 1))
}

fn describe_rustls_error(err: &rustls::Error) -> String {
    match err {
        rustls::Error::InvalidCertificate(cert_err) => describe_certificate_error(cert_err),
        rustls::Error::AlertReceived(alert) => {
            format!("the TLS handshake with the origin failed: the origin sent the alert {alert:?}")
        }
        rustls::Error::PeerIncompatible(why) => {
            format!("the TLS handshake with the origin failed: the origin's TLS is incompatible with crawlcache's ({why:?})")
        }
        other => format!("the TLS handshake with the origin failed: {other}"),
    }
}

#[allow(deprecated)] // matching the context-free variants older rustls versions produce
fn describe_certificate_error(err: &CertificateError) -> String {
    match err {
        CertificateError::UnknownIssuer => {
            "the origin's certificate is not trusted: UnknownIssuer \
             (it is not signed by a known certificate authority; if the origin uses a private CA, \
             add that CA's certificate to the extra CA file in the configuration)"
                .to_owned()
        }
        CertificateError::NotValidForNameContext { expected, presented } => {
            let name = expected.to_str();
            if presented.is_empty() {
                format!("the origin's certificate is not valid for name {name} (it names no host)")
            } else {
                format!(
                    "the origin's certificate is not valid for name {name} (it names: {})",
                    presented.join(", ")
                )
            }
        }
        CertificateError::NotValidForName => {
            "the origin's certificate is not valid for the requested host name".to_owned()
        }
        CertificateError::ExpiredContext { not_after, .. } => {
            format!("the origin's certificate has expired (valid until {})", http_date(*not_after))
        }
        CertificateError::Expired => "the origin's certificate has expired".to_owned(),
        CertificateError::NotValidYetContext { not_before, .. } => {
            format!("the origin's certificate is not valid yet (valid from {}); check this machine's clock", http_date(*not_before))
        }
        CertificateError::NotValidYet => {
            "the origin's certificate is not valid yet; check this machine's clock".to_owned()
        }
        CertificateError::Revoked => "the origin's certificate has been revoked".to_owned(),
        CertificateError::BadSignature => {
            "the origin's certificate is not trusted: its signature is invalid".to_owned()
        }
        CertificateError::BadEncoding => "the origin's certificate is malformed".to_owned(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "the origin's certificate is not valid for a TLS server".to_owned()
        }
        CertificateError::UnsupportedSignatureAlgorithm
        | CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => {
            "the origin's certificate uses a signature algorithm crawlcache does not support"
                .to_owned()
        }
        other => format!("the origin's certificate was rejected: {other}"),
    }
}

fn http_date(time: UnixTime) -> String {
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(time.as_secs());
    httpdate::fmt_http_date(when)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;

    fn wrapped(err: rustls::Error) -> Box<dyn StdError + Send + Sync> {
        // As hyper-rustls hands it to hyper-util: io::Error(io::Error(rustls::Error)).
        let inner = io::Error::new(io::ErrorKind::InvalidData, err);
        Box::new(io::Error::other(inner))
    }

    #[test]
    fn unknown_issuer_is_found_through_io_error_wrappers() {
        let err = wrapped(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer));
        let text = describe_tls_error(err.as_ref()).unwrap();
        assert!(
            text.starts_with("the origin's certificate is not trusted: UnknownIssuer"),
            "{text}"
        );
    }

    #[test]
    fn name_mismatch_names_the_expected_and_presented_names() {
        let err =
            wrapped(rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("example.com").unwrap(),
                presented: vec!["other.example".into(), "*.other.example".into()],
            }));
        let text = describe_tls_error(err.as_ref()).unwrap();
        assert_eq!(text, "the origin's certificate is not valid for name example.com (it names: other.example, *.other.example)");
    }

    #[test]
    fn expiry_is_given_as_an_http_date() {
        let err = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(Duration::from_secs(1_000_000_000)),
            not_after: UnixTime::since_unix_epoch(Duration::from_secs(0)),
        });
        assert_eq!(
            describe_tls_error(&err).unwrap(),
            "the origin's certificate has expired (valid until Thu, 01 Jan 1970 00:00:00 GMT)"
        );
    }

    #[test]
    fn other_tls_errors_get_a_general_sentence() {
        let err = wrapped(rustls::Error::AlertReceived(rustls::AlertDescription::HandshakeFailure));
        let text = describe_tls_error(err.as_ref()).unwrap();
        assert!(text.starts_with("the TLS handshake with the origin failed"), "{text}");
    }

    #[test]
    fn errors_without_tls_in_their_chain_give_none() {
        let err = io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(describe_tls_error(&err), None);
        let err = wrapped_plain();
        assert_eq!(describe_tls_error(err.as_ref()), None);
    }

    fn wrapped_plain() -> Box<dyn StdError + Send + Sync> {
        Box::new(io::Error::other(io::Error::new(io::ErrorKind::TimedOut, "timed out")))
    }

    #[test]
    fn missing_extra_ca_file_names_the_file() {
        let err = upstream_client_config(Some(Path::new("/nonexistent/extra-ca.pem"))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/extra-ca.pem"), "{text}");
    }
}
