//! The upstream side against local origins on 127.0.0.1: a hyper-util client
//! over `upstream_connector` reaches a TLS origin whose certificate comes
//! from a test CA only when that CA is in the extra CA file, speaks plain
//! HTTP for http:// URIs, and turns certificate failures into sentences.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crawlcache::tls::TlsError;
use crawlcache::upstream::{describe_tls_error, upstream_client_config, upstream_connector};
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

#[path = "common/tls.rs"]
mod tls;

use tls::{test_pki, TestPki};

async fn hello(_req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello from the origin"))))
}

/// An HTTPS origin on 127.0.0.1 presenting `pki`'s leaf; serves until the
/// test ends.
async fn tls_origin(pki: &TestPki) -> SocketAddr {
    let acceptor = TlsAcceptor::from(pki.server_config());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // Handshakes the client aborts are expected in these tests.
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service_fn(hello))
                        .await;
                }
            });
        }
    });
    addr
}

/// A plain-HTTP origin on 127.0.0.1.
async fn plain_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service_fn(hello))
                    .await;
            });
        }
    });
    addr
}

fn write_ca_file(dir: &tempfile::TempDir, pem: &str) -> PathBuf {
    let path = dir.path().join("extra-ca.pem");
    std::fs::write(&path, pem).unwrap();
    path
}

async fn get(
    config: Arc<rustls::ClientConfig>,
    uri: &str,
) -> Result<(hyper::StatusCode, Bytes), hyper_util::client::legacy::Error> {
    let connector = upstream_connector(config, Duration::from_secs(5));
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let response = client.get(uri.parse().unwrap()).await?;
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Ok((status, body))
}

#[tokio::test]
async fn an_origin_signed_by_the_extra_ca_is_reached_over_verified_tls() {
    let pki = test_pki(&["127.0.0.1", "localhost"]);
    let addr = tls_origin(&pki).await;
    let dir = tempfile::tempdir().unwrap();
    let extra = write_ca_file(&dir, &pki.ca_pem);
    let config = upstream_client_config(Some(&extra)).unwrap();
    assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    let (status, body) =
        get(config, &format!("https://127.0.0.1:{}/page", addr.port())).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(&body[..], b"hello from the origin");
}

#[tokio::test]
async fn without_the_extra_ca_the_origin_is_not_trusted() {
    let pki = test_pki(&["127.0.0.1", "localhost"]);
    let addr = tls_origin(&pki).await;
    let config = upstream_client_config(None).unwrap();
    let err = get(config, &format!("https://127.0.0.1:{}/page", addr.port())).await.unwrap_err();
    let text = describe_tls_error(&err).expect("a TLS failure in the chain");
    assert!(text.contains("certificate is not trusted"), "{text}");
    assert!(text.contains("UnknownIssuer"), "{text}");
}

#[tokio::test]
async fn an_origin_certificate_for_another_name_is_refused_with_the_name() {
    let pki = test_pki(&["origin.example"]);
    let addr = tls_origin(&pki).await;
    let dir = tempfile::tempdir().unwrap();
    let extra = write_ca_file(&dir, &pki.ca_pem);
    let config = upstream_client_config(Some(&extra)).unwrap();
    let err = get(config, &format!("https://127.0.0.1:{}/", addr.port())).await.unwrap_err();
    let text = describe_tls_error(&err).expect("a TLS failure in the chain");
    assert!(text.contains("not valid for name 127.0.0.1"), "{text}");
    assert!(text.contains("origin.example"), "{text}");
}

#[tokio::test]
async fn plain_http_uris_go_over_plain_tcp() {
    let addr = plain_origin().await;
    let config = upstream_client_config(None).unwrap();
    let (status, body) = get(config, &format!("http://127.0.0.1:{}/", addr.port())).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(&body[..], b"hello from the origin");
}

#[tokio::test]
async fn a_refused_connection_is_not_described_as_a_tls_failure() {
    // Bind then drop to get a port nothing listens on.
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = upstream_client_config(None).unwrap();
    let err = get(config, &format!("https://127.0.0.1:{port}/")).await.unwrap_err();
    assert_eq!(describe_tls_error(&err), None);
}

#[test]
fn an_extra_ca_file_without_certificates_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_ca_file(&dir, "no certificates here\n");
    let err = upstream_client_config(Some(&path)).unwrap_err();
    assert!(matches!(err, TlsError::InvalidCertificate { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");

    let path =
        write_ca_file(&dir, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    let err = upstream_client_config(Some(&path)).unwrap_err();
    assert!(matches!(err, TlsError::InvalidCertificate { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
}

#[test]
fn a_missing_extra_ca_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.pem");
    let err = upstream_client_config(Some(&path)).unwrap_err();
    assert!(matches!(err, TlsError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
}

/// Over the HTTP/2 client (`upstream.http2`), requests that wait for the
/// one connection being opened to an origin fail with the same cause as
/// the request that opened it: an untrusted certificate is named as a TLS
/// failure for each of them, not as a failure to connect.
#[tokio::test]
async fn every_request_waiting_for_a_failed_h2_connect_names_the_tls_failure() {
    let pki = test_pki(&["127.0.0.1", "localhost"]);
    let addr = tls_origin(&pki).await;
    let config = upstream_client_config(None).unwrap();
    let up = crawlcache::upstream::origin::Upstream::new(
        config,
        Duration::from_secs(5),
        Duration::from_secs(10),
        Duration::from_secs(4),
    )
    .with_versions(crawlcache::upstream::origin::Versions { alpn: true, ..Default::default() });
    let url: http::Uri = format!("https://127.0.0.1:{}/page", addr.port()).parse().unwrap();
    let send = |up: crawlcache::upstream::origin::Upstream, url: http::Uri| async move {
        let req = crawlcache::upstream::origin::forward_request(
            &http::Method::GET,
            &url,
            &http::HeaderMap::new(),
            crawlcache::wire::body::ProxyBody::empty(),
            http::Version::HTTP_11,
        );
        up.send(req).await
    };
    let waits: Vec<_> = (0..4).map(|_| tokio::spawn(send(up.clone(), url.clone()))).collect();
    for w in waits {
        let err = w.await.unwrap().expect_err("the origin is not trusted");
        assert_eq!(err.kind, crawlcache::upstream::error::UpstreamErrorKind::Tls, "{err}");
        assert!(err.message.contains("certificate is not trusted"), "{err}");
    }
}
