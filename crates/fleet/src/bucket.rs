//! The bucket side of the fleet tier: bodies under their SHA-256 in an
//! S3-compatible bucket, through `object_store`'s S3 client.
//!
//! The S3 client sends its requests through `HyperService`, the same
//! hyper client and rustls (ring) configuration as the proxy's own origin
//! connections, so no second HTTP stack is built. Credentials are
//! `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`)
//! from the environment; nothing else is read from it, and the instance
//! metadata service is never asked.
//!
//! Every transfer is bounded: `fleet.timeout` plus one second per MB; a
//! download must have exactly the length the entry says, and a body whose
//! SHA-256 is not its name is discarded ([`Download::Mismatch`]).

use super::config::FleetConfig;
use super::health::Health;
use super::keys;
use super::redis::FleetError;
use bytes::Bytes;
use crawlcache_store::{CommittedBody, Store};
use futures_util::StreamExt;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use object_store::aws::AmazonS3Builder;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpRequestBody,
    HttpResponse, HttpResponseBody, HttpService,
};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The connector the bucket's HTTP client dials with (TLS through rustls
/// on ring, or plain TCP for an `http://` endpoint).
pub type Connector =
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>;

/// `object_store`'s HTTP requests over hyper-util's client.
#[derive(Clone)]
struct HyperService {
    client: Client<Connector, HttpRequestBody>,
    timeout: Duration,
}

impl std::fmt::Debug for HyperService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HyperService")
    }
}

#[async_trait::async_trait]
impl HttpService for HyperService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let sent = tokio::time::timeout(self.timeout, self.client.request(req)).await;
        let resp = match sent {
            Err(_) => {
                return Err(HttpError::new(
                    HttpErrorKind::Timeout,
                    std::io::Error::other("no response head in time"),
                ))
            }
            Ok(Err(e)) => {
                let kind =
                    if e.is_connect() { HttpErrorKind::Connect } else { HttpErrorKind::Request };
                return Err(HttpError::new(kind, e));
            }
            Ok(Ok(r)) => r,
        };
        let (parts, body) = resp.into_parts();
        let body =
            HttpResponseBody::new(body.map_err(|e| HttpError::new(HttpErrorKind::Interrupted, e)));
        Ok(HttpResponse::from_parts(parts, body))
    }
}

#[derive(Debug)]
struct HyperConnector(HyperService);

impl HttpConnector for HyperConnector {
    fn connect(&self, _options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(self.0.clone()))
    }
}

/// What a download gave.
#[derive(Debug)]
pub enum Download {
    /// The body, verified against its name, now in the local store (pinned
    /// until inserted or discarded).
    Stored(CommittedBody),
    /// The bucket has no such object (it expired, or was lost).
    Missing,
    /// The bytes did not hash to the name, or had another length: discarded.
    Mismatch(String),
}

/// The fleet's bucket.
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    timeout: Duration,
    /// Up or down, errors, warnings.
    pub health: Health,
    name: String,
}

impl Bucket {
    /// The bucket of `config`, with credentials from the environment,
    /// reached through `connector` (the proxy's own origin connector: its
    /// rustls configuration and connect timeout).
    /// Errors: credentials missing, or a configuration `object_store`
    /// refuses.
    pub fn new(config: &FleetConfig, connector: Connector) -> Result<Bucket, FleetError> {
        let key = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default();
        let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_default();
        if key.trim().is_empty() || secret.trim().is_empty() {
            return Err(FleetError::Setup(format!(
                "`fleet.s3_bucket` is \"{}\" but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set in the environment (crawlcache reads the bucket's credentials from there, as AWS tools do)",
                config.s3_bucket
            )));
        }
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        let service = HyperService { client, timeout: config.timeout };
        let region =
            if config.s3_region.trim().is_empty() { "us-east-1" } else { config.s3_region.trim() };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(config.s3_bucket.trim())
            .with_region(region)
            .with_access_key_id(key.trim())
            .with_secret_access_key(secret.trim())
            .with_http_connector(HyperConnector(service))
            // One retry at most (a pooled connection the server closed), then
            // a failing bucket marks the engine down instead of holding
            // requests through object_store's default ten retries.
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(50),
                    max_backoff: Duration::from_millis(200),
                    base: 2.0,
                },
                max_retries: 1,
                retry_timeout: config.timeout,
            });
        if let Ok(token) = std::env::var("AWS_SESSION_TOKEN") {
            if !token.trim().is_empty() {
                builder = builder.with_token(token.trim());
            }
        }
        let endpoint = config.s3_endpoint.trim();
        if !endpoint.is_empty() {
            builder = builder
                .with_endpoint(endpoint.trim_end_matches('/'))
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let store = builder
            .build()
            .map_err(|e| FleetError::Setup(format!("configuration keys `fleet.s3_*`: {e}")))?;
        Ok(Bucket {
            store: Arc::new(store),
            timeout: config.timeout,
            health: Health::new("bucket"),
            name: config.s3_bucket.trim().to_string(),
        })
    }

    /// Asks the bucket for an object that does not exist: an answer (found
    /// or not) means it is reachable. For the health probe.
    pub async fn probe(&self) -> Result<(), FleetError> {
        let path = ObjectPath::from("bodies/crawlcache-probe");
        match tokio::time::timeout(self.timeout, self.store.head(&path)).await {
            Ok(Ok(_)) | Ok(Err(object_store::Error::NotFound { .. })) => {
                self.health.succeeded();
                Ok(())
            }
            Ok(Err(e)) => Err(self.failed("HEAD", &e.to_string())),
            Err(_) => Err(self.failed("HEAD", "no answer in time")),
        }
    }

    /// The bucket's name, for logs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bound for a transfer of `len` bytes: the timeout plus one second
    /// per MB.
    fn transfer_timeout(&self, len: u64) -> Duration {
        self.timeout + Duration::from_secs(len / 1_000_000)
    }

    fn check(&self) -> Result<(), FleetError> {
        if self.health.allows() {
            Ok(())
        } else {
            Err(FleetError::Down)
        }
    }

    fn failed(&self, what: &str, e: &str) -> FleetError {
        self.health.failed(what, e);
        FleetError::Failed(format!("bucket {what}: {e}"))
    }

    /// Uploads the body of the stored `entry` (`sha256`, `len` bytes) from
    /// `store` to `bodies/SHA256` (streamed; multipart above 10 MB).
    pub async fn upload(
        &self,
        store: &Store,
        entry: &crawlcache_store::Entry,
        sha256: &str,
        len: u64,
    ) -> Result<(), FleetError> {
        self.check()?;
        let body = store
            .read_body(entry)
            .map_err(|e| FleetError::Failed(format!("reading body {sha256}: {e}")))?;
        let mut file: Box<dyn tokio::io::AsyncRead + Unpin + Send> = match body {
            crawlcache_store::BodyData::File(f) => Box::new(tokio::fs::File::from_std(f)),
            crawlcache_store::BodyData::Bytes(b) => Box::new(std::io::Cursor::new(b)),
        };
        let path = ObjectPath::from(keys::body_object(sha256));
        let work = async {
            let mut w = object_store::buffered::BufWriter::new(self.store.clone(), path);
            let copied = tokio::io::copy(&mut file, &mut w).await;
            match copied {
                Ok(n) if n == len => w.shutdown().await.map_err(|e| e.to_string()),
                Ok(n) => {
                    let _ = w.abort().await;
                    Err(format!("the stored body has {n} bytes, its entry says {len}"))
                }
                Err(e) => {
                    let _ = w.abort().await;
                    Err(e.to_string())
                }
            }
        };
        match tokio::time::timeout(self.transfer_timeout(len), work).await {
            Ok(Ok(())) => {
                self.health.succeeded();
                Ok(())
            }
            Ok(Err(e)) => Err(self.failed("PUT", &e)),
            Err(_) => Err(self.failed("PUT", "no answer in time")),
        }
    }

    /// Downloads `bodies/SHA256` (expected `len` bytes) into `store`,
    /// checking length and hash on the way.
    pub async fn download(
        &self,
        store: &Store,
        sha256: &str,
        len: u64,
    ) -> Result<Download, FleetError> {
        self.check()?;
        let path = ObjectPath::from(keys::body_object(sha256));
        // Err((true, _)): the bucket failed; Err((false, _)): the local store did.
        let work = async {
            let got = match self.store.get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(Download::Missing),
                Err(e) => return Err((true, e.to_string())),
            };
            if got.meta.size != len {
                return Ok(Download::Mismatch(format!(
                    "the bucket object has {} bytes, the entry says {len}",
                    got.meta.size
                )));
            }
            let mut writer =
                store.begin_body().map_err(|e| (false, format!("local store: {e}")))?;
            let mut stream = got.into_stream();
            let mut seen: u64 = 0;
            while let Some(chunk) = stream.next().await {
                let chunk: Bytes = chunk.map_err(|e| (true, e.to_string()))?;
                seen += chunk.len() as u64;
                if seen > len {
                    return Ok(Download::Mismatch(format!(
                        "the bucket object sent more than the {len} bytes of its entry"
                    )));
                }
                writer.write(&chunk).map_err(|e| (false, format!("local store: {e}")))?;
            }
            if seen != len {
                return Ok(Download::Mismatch(format!(
                    "the bucket object ended after {seen} of {len} bytes"
                )));
            }
            let committed = tokio::task::spawn_blocking(move || writer.finish())
                .await
                .map_err(|e| (false, format!("local store: {e}")))?
                .map_err(|e| (false, format!("local store: {e}")))?;
            if committed.sha256 != sha256 {
                store.discard_body(&committed);
                return Ok(Download::Mismatch(format!(
                    "the bytes of bodies/{sha256} hash to {}",
                    committed.sha256
                )));
            }
            Ok(Download::Stored(committed))
        };
        match tokio::time::timeout(self.transfer_timeout(len), work).await {
            Ok(Ok(d)) => {
                self.health.succeeded();
                Ok(d)
            }
            Ok(Err((true, e))) => Err(self.failed("GET", &e)),
            Ok(Err((false, e))) => Err(FleetError::Failed(e)),
            Err(_) => Err(self.failed("GET", "no answer in time")),
        }
    }
}
