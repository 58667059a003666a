//! A test PKI for TLS origins: a CA made with rcgen (unrelated to
//! crawlcache's own) and one leaf signed by it, plus the rustls server
//! configuration an origin presents with that leaf.
//!
//! Test binaries that need nothing else of tests/common include this file
//! alone (`#[path = "common/tls.rs"] mod tls;`).
#![allow(dead_code)]

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A test CA and one leaf signed by it.
pub struct TestPki {
    /// The CA certificate, PEM (what a client or `upstream.extra_ca_file`
    /// trusts).
    pub ca_pem: String,
    pub leaf: CertificateDer<'static>,
    pub leaf_key: PrivatePkcs8KeyDer<'static>,
}

/// A fresh CA and a leaf for `leaf_names` (DNS names, or IP addresses, which
/// become IP SANs), e.g. `&["localhost", "127.0.0.1"]`.
pub fn test_pki(leaf_names: &[&str]) -> TestPki {
    let ca_key = KeyPair::generate().expect("generating the test CA key");
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name.push(DnType::CommonName, "crawlcache test origin CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca = ca_params.self_signed(&ca_key).expect("self-signing the test CA");
    let leaf_key = KeyPair::generate().expect("generating the origin leaf key");
    let names: Vec<String> = leaf_names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)
        .expect("origin leaf parameters")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("signing the origin leaf");
    TestPki {
        ca_pem: ca.pem(),
        leaf: leaf.der().clone(),
        leaf_key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
    }
}

impl TestPki {
    /// A rustls server configuration (ring provider, HTTP/1.1 by ALPN)
    /// presenting the leaf.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![self.leaf.clone()],
                PrivateKeyDer::Pkcs8(self.leaf_key.clone_key()),
            )
            .expect("origin server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// A self-signed certificate that is its own CA, as `openssl req -x509`
/// makes one (`basicConstraints: CA:TRUE`, the names as subject
/// alternative names), as a [`TestPki`] whose leaf is that certificate
/// and whose `ca_pem` is the same certificate in PEM.
pub fn self_signed_pki(names: &[&str]) -> TestPki {
    let key = KeyPair::generate().expect("generating the self-signed key");
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("self-signed parameters");
    params
        .distinguished_name
        .push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).expect("self-signing");
    TestPki {
        ca_pem: cert.pem(),
        leaf: cert.der().clone(),
        leaf_key: PrivatePkcs8KeyDer::from(key.serialize_der()),
    }
}
