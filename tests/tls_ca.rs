//! The local certificate authority against the disk and against real TLS
//! handshakes on 127.0.0.1: files and permissions, survival across
//! restarts, malformed files, and leaves that a client trusting only the CA
//! verifies by DNS name and by IP address.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crawlcache::tls::{CertificateAuthority, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn ca_der(ca: &CertificateAuthority) -> CertificateDer<'static> {
    rustls::pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes())
        .next()
        .expect("a certificate in cert_pem")
        .expect("valid PEM")
}

/// A client that trusts the crawlcache CA and nothing else.
fn client_trusting(ca: &CertificateAuthority) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    roots.add(ca_der(ca)).unwrap();
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config
}

/// Serves one TLS connection on 127.0.0.1 with `server`, connects to it
/// with `client` naming the server `name`, and exchanges a ping and a pong.
/// Returns the negotiated ALPN protocol and the leaf the client saw.
async fn handshake(
    server: Arc<rustls::ServerConfig>,
    client: ClientConfig,
    name: ServerName<'static>,
) -> Result<(Option<Vec<u8>>, CertificateDer<'static>), std::io::Error> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let acceptor = TlsAcceptor::from(server);
    let server_task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let mut tls = acceptor.accept(tcp).await?;
        let mut ping = [0u8; 4];
        tls.read_exact(&mut ping).await?;
        assert_eq!(&ping, b"ping");
        tls.write_all(b"pong").await?;
        tls.shutdown().await?;
        Ok::<_, std::io::Error>(())
    });
    let tcp = TcpStream::connect(addr).await?;
    let mut tls = TlsConnector::from(Arc::new(client)).connect(name, tcp).await?;
    tls.write_all(b"ping").await?;
    let mut pong = [0u8; 4];
    tls.read_exact(&mut pong).await?;
    assert_eq!(&pong, b"pong");
    let (_, conn) = tls.get_ref();
    let alpn = conn.alpn_protocol().map(|p| p.to_vec());
    let leaf = conn.peer_certificates().unwrap()[0].clone().into_owned();
    server_task.await.unwrap()?;
    Ok((alpn, leaf))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn first_start_creates_a_private_ca_directory_and_an_owner_only_key() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let ca = CertificateAuthority::load_or_create(&data_dir).unwrap();

    assert_eq!(ca.cert_path(), data_dir.join("ca").join("ca.pem"));
    assert_eq!(mode(&data_dir) & 0o077, 0, "data dir must not be accessible to others");
    assert_eq!(mode(&data_dir.join("ca")), 0o700);
    assert_eq!(mode(&data_dir.join("ca").join("ca.key")), 0o600);
    assert_eq!(fs::read_to_string(ca.cert_path()).unwrap(), ca.cert_pem());
    assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    let key = fs::read_to_string(data_dir.join("ca").join("ca.key")).unwrap();
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
    // No temporary files are left beside them.
    let mut names: Vec<_> = fs::read_dir(data_dir.join("ca"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["ca.key", "ca.pem"]);
    // The CA's name is in its subject.
    assert!(contains(ca_der(&ca).as_ref(), b"crawlcache local CA"));
}

#[test]
fn the_ca_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let first = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let key_before = fs::read(tmp.path().join("ca/ca.key")).unwrap();
    let second = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    assert_eq!(first.cert_pem(), second.cert_pem());
    assert_eq!(fs::read(tmp.path().join("ca/ca.key")).unwrap(), key_before);
}

#[tokio::test]
async fn leaves_from_a_reloaded_ca_verify_against_the_original_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let original = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let reloaded = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let server = reloaded.server_config_for("localhost").unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    handshake(server, client_trusting(&original), name)
        .await
        .expect("a leaf signed after a restart verifies against the CA clients already trust");
}

#[test]
fn a_world_readable_data_directory_is_tightened() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    fs::create_dir(&data_dir).unwrap();
    fs::set_permissions(&data_dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(data_dir.join("ca")).unwrap();
    fs::set_permissions(data_dir.join("ca"), fs::Permissions::from_mode(0o755)).unwrap();
    CertificateAuthority::load_or_create(&data_dir).unwrap();
    assert_eq!(mode(&data_dir), 0o700);
    assert_eq!(mode(&data_dir.join("ca")), 0o700);
}

#[test]
fn a_key_readable_by_others_is_tightened_on_load() {
    let tmp = tempfile::tempdir().unwrap();
    CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let key_path = tmp.path().join("ca/ca.key");
    fs::set_permissions(&key_path, fs::Permissions::from_mode(0o644)).unwrap();
    CertificateAuthority::load_or_create(tmp.path()).unwrap();
    assert_eq!(mode(&key_path), 0o600);
}

#[test]
fn a_garbage_key_is_an_error_naming_the_key_file() {
    let tmp = tempfile::tempdir().unwrap();
    CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let key_path = tmp.path().join("ca/ca.key");
    fs::write(&key_path, b"this is not a key\n\x00\xff").unwrap();
    let err = CertificateAuthority::load_or_create(tmp.path()).unwrap_err();
    assert!(matches!(err, TlsError::InvalidKey { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&key_path.display().to_string()), "{text}");

    // A PEM file that holds no key is refused the same way.
    fs::write(&key_path, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
    let err = CertificateAuthority::load_or_create(tmp.path()).unwrap_err();
    assert!(matches!(err, TlsError::InvalidKey { .. }), "{err:?}");
}

#[test]
fn a_garbage_certificate_is_an_error_naming_the_certificate_file() {
    let tmp = tempfile::tempdir().unwrap();
    CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let cert_path = tmp.path().join("ca/ca.pem");
    fs::write(&cert_path, "not a certificate").unwrap();
    let err = CertificateAuthority::load_or_create(tmp.path()).unwrap_err();
    assert!(matches!(err, TlsError::InvalidCertificate { .. }), "{err:?}");
    assert!(err.to_string().contains(&cert_path.display().to_string()), "{err}");
}

#[test]
fn a_key_from_another_ca_is_refused() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    CertificateAuthority::load_or_create(one.path()).unwrap();
    CertificateAuthority::load_or_create(two.path()).unwrap();
    fs::copy(two.path().join("ca/ca.key"), one.path().join("ca/ca.key")).unwrap();
    let err = CertificateAuthority::load_or_create(one.path()).unwrap_err();
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("ca.pem") && text.contains("ca.key"), "{text}");
}

#[test]
fn a_certificate_without_its_key_is_refused_and_left_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    fs::remove_file(tmp.path().join("ca/ca.key")).unwrap();
    let err = CertificateAuthority::load_or_create(tmp.path()).unwrap_err();
    assert!(matches!(err, TlsError::MissingKey { .. }), "{err:?}");
    assert_eq!(fs::read_to_string(ca.cert_path()).unwrap(), ca.cert_pem());
}

#[test]
fn a_key_left_without_its_certificate_gets_a_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let key = fs::read(tmp.path().join("ca/ca.key")).unwrap();
    fs::remove_file(ca.cert_path()).unwrap();
    // A crash also leaves a temporary file behind.
    fs::write(tmp.path().join("ca/.ca-tmp-leftover"), b"half").unwrap();
    let repaired = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    assert_eq!(fs::read(tmp.path().join("ca/ca.key")).unwrap(), key);
    assert_eq!(fs::read_to_string(repaired.cert_path()).unwrap(), repaired.cert_pem());
    assert!(!tmp.path().join("ca/.ca-tmp-leftover").exists());
    // And the pair loads cleanly afterwards.
    let again = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    assert_eq!(again.cert_pem(), repaired.cert_pem());
}

#[test]
fn a_data_dir_that_is_a_file_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data");
    fs::write(&file, b"").unwrap();
    let err = CertificateAuthority::load_or_create(&file).unwrap_err();
    assert!(err.to_string().contains(&file.display().to_string()), "{err}");
}

#[tokio::test]
async fn a_leaf_for_localhost_verifies_with_sni_and_negotiates_http_1_1() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let server = ca.server_config_for("localhost").unwrap();
    assert_eq!(server.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let name = ServerName::try_from("localhost").unwrap();
    let (alpn, leaf) = handshake(server, client_trusting(&ca), name).await.unwrap();
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    // DNS SAN: [2] IMPLICIT IA5String "localhost".
    assert!(contains(leaf.as_ref(), b"\x82\x09localhost"));
}

#[tokio::test]
async fn a_leaf_for_another_host_does_not_verify_for_localhost() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let server = ca.server_config_for("example.com").unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let err = handshake(server, client_trusting(&ca), name).await.unwrap_err();
    let text = crawlcache::upstream::describe_tls_error(&err).unwrap();
    assert!(text.contains("not valid for name localhost"), "{text}");
}

#[tokio::test]
async fn a_leaf_for_an_ip_address_has_an_ip_san_and_verifies_by_address() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let server = ca.server_config_for("127.0.0.1").unwrap();
    let name = ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into());
    let (_, leaf) = handshake(server, client_trusting(&ca), name).await.unwrap();
    // IP SAN: [7] IMPLICIT OCTET STRING 127.0.0.1.
    assert!(contains(leaf.as_ref(), &[0x87, 4, 127, 0, 0, 1]));
}

#[tokio::test]
async fn a_leaf_for_a_bracketed_ipv6_literal_verifies_by_address() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let server = ca.server_config_for("[::1]").unwrap();
    assert!(Arc::ptr_eq(&server, &ca.server_config_for("::1").unwrap()));
    // The TCP connection is over 127.0.0.1; only the verified name is ::1.
    let name = ServerName::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST).into());
    let (_, leaf) = handshake(server, client_trusting(&ca), name).await.unwrap();
    let mut san = vec![0x87, 16];
    san.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    assert!(contains(leaf.as_ref(), &san));
}

#[test]
fn leaves_are_cached_and_shared_between_clones() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let first = ca.server_config_for("localhost").unwrap();
    let second = ca.server_config_for("localhost").unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    assert!(Arc::ptr_eq(&first, &ca.server_config_for("LocalHost.").unwrap()));
    assert!(Arc::ptr_eq(&first, &ca.clone().server_config_for("localhost").unwrap()));
    let other = ca.server_config_for("example.com").unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
}

#[test]
fn a_leaf_near_its_end_of_validity_is_minted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let now = SystemTime::now();
    let first = ca.server_config_for_at("localhost", now).unwrap();
    let next_month = now + Duration::from_secs(30 * 24 * 3600);
    assert!(Arc::ptr_eq(&first, &ca.server_config_for_at("localhost", next_month).unwrap()));
    let next_year = now + Duration::from_secs(400 * 24 * 3600);
    let renewed = ca.server_config_for_at("localhost", next_year).unwrap();
    assert!(!Arc::ptr_eq(&first, &renewed));
    assert!(Arc::ptr_eq(&renewed, &ca.server_config_for_at("localhost", next_year).unwrap()));
}

#[test]
fn hosts_that_cannot_be_in_a_certificate_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    for bad in ["", "bad host", "[example.com]", "exa mple.com"] {
        let err = ca.server_config_for(bad).unwrap_err();
        assert!(matches!(err, TlsError::InvalidHost { .. }), "{bad:?}: {err:?}");
    }
}

#[test]
fn concurrent_requests_for_one_host_share_one_config() {
    let tmp = tempfile::tempdir().unwrap();
    let ca = CertificateAuthority::load_or_create(tmp.path()).unwrap();
    let configs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let ca = ca.clone();
                scope.spawn(move || ca.server_config_for("race.example").unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cached = ca.server_config_for("race.example").unwrap();
    // A leaf minted by a caller that lost the race is dropped for the winner's.
    assert!(configs.iter().all(|c| Arc::ptr_eq(c, &cached)));
}
