//! [`RobotsFetch`] over the proxy's upstream client: the only way robots.txt
//! requests reach origins.
//!
//! One `GET` per call, never following redirects (the caller does, RFC 9309
//! §2.3.1.2), conditional when validators are given (RFC 9110 §13.1.1,
//! §13.1.3), sent as the caller's `User-Agent` ([`crawlcache_robots::identity`]) and
//! with `Accept-Encoding: gzip, deflate, br` (only what [`crawlcache_robots::decode`]
//! undoes). A 2xx body is read within the body timeout and its content
//! codings undone, keeping at most `max_bytes` of decoded text (RFC 9309
//! §2.5; a decompression bomb stops there). Coded bytes are read up to
//! twice that plus 64 KiB, more than any real coding of `max_bytes` of
//! text needs. A body that does not decode is
//! [`FetchError::Undecodable`]. Bodies of other statuses are not read.

use crate::upstream::error::UpstreamErrorKind;
use crate::upstream::origin::Upstream;
use crate::wire::body::ProxyBody;
use crawlcache_robots::decode::{decode, parse_content_encoding, ACCEPT_ENCODING};
use crawlcache_robots::fetch::{FetchError, FetchFuture, RawRobotsResponse, RobotsFetch};
use crawlcache_robots::snapshot::Validators;
use http::header::{
    ACCEPT, ACCEPT_ENCODING as ACCEPT_ENCODING_FIELD, CONTENT_ENCODING, ETAG, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED, LOCATION, RETRY_AFTER, USER_AGENT,
};
use http::{HeaderMap, Request};
use http_body_util::BodyExt;
use std::time::Duration;

/// Fetches robots.txt files through an [`Upstream`].
#[derive(Clone)]
pub struct UpstreamRobotsFetch {
    upstream: Upstream,
    user_agent: String,
    body_timeout: Duration,
    max_bytes: usize,
}

impl UpstreamRobotsFetch {
    /// A fetcher sending `User-Agent: user_agent` when a call names none,
    /// giving up on a body not complete within `body_timeout` after the
    /// response head, and keeping at most `max_bytes` bytes of decoded text
    /// (500 KiB: `snapshot::MAX_ROBOTS_BYTES`).
    /// Connect and response-head timeouts are the upstream client's.
    pub fn new(
        upstream: Upstream,
        user_agent: impl Into<String>,
        body_timeout: Duration,
        max_bytes: usize,
    ) -> UpstreamRobotsFetch {
        UpstreamRobotsFetch { upstream, user_agent: user_agent.into(), body_timeout, max_bytes }
    }
}

fn header(h: &HeaderMap, name: http::header::HeaderName) -> Option<String> {
    h.get(name).and_then(|v| v.to_str().ok()).map(|s| s.trim().to_string())
}

impl RobotsFetch for UpstreamRobotsFetch {
    fn fetch(&self, url: &str, validators: Option<Validators>, user_agent: &str) -> FetchFuture {
        let this = self.clone();
        let url = url.to_string();
        let user_agent =
            if user_agent.is_empty() { self.user_agent.clone() } else { user_agent.to_string() };
        Box::pin(async move {
            let uri: http::Uri = url
                .parse()
                .map_err(|e| FetchError::Other(format!("bad robots.txt URL {url}: {e}")))?;
            let mut req = Request::get(uri)
                .header(ACCEPT, "text/plain, */*;q=0.5")
                .header(ACCEPT_ENCODING_FIELD, ACCEPT_ENCODING);
            if !user_agent.is_empty() {
                req = req.header(USER_AGENT, user_agent.as_str());
            }
            if let Some(v) = validators {
                if let Some(etag) = v.etag {
                    req = req.header(IF_NONE_MATCH, etag);
                }
                if let Some(lm) = v.last_modified {
                    req = req.header(IF_MODIFIED_SINCE, lm);
                }
            }
            let req = req.body(ProxyBody::empty()).map_err(|e| {
                FetchError::Other(format!("cannot build the request for {url}: {e}"))
            })?;
            let resp = this.upstream.send(req).await.map_err(|e| match e.kind {
                UpstreamErrorKind::Dns => FetchError::Dns(e.message),
                UpstreamErrorKind::Connect => FetchError::Connect(e.message),
                UpstreamErrorKind::Tls => FetchError::Tls(e.message),
                UpstreamErrorKind::Timeout => FetchError::Timeout,
                UpstreamErrorKind::Protocol => FetchError::Other(e.message),
            })?;
            let status = resp.status().as_u16();
            let h = resp.headers();
            let mut raw = RawRobotsResponse {
                status,
                location: header(h, LOCATION),
                etag: header(h, ETAG),
                last_modified: header(h, LAST_MODIFIED),
                retry_after: header(h, RETRY_AFTER),
                body: Vec::new(),
                truncated: false,
                content_encoding: None,
            };
            if !(200..300).contains(&status) {
                return Ok(raw);
            }
            let codings = parse_content_encoding(
                h.get_all(CONTENT_ENCODING).iter().map(|v| v.to_str().unwrap_or("(not text)")),
            );
            let max = this.max_bytes;
            // Coded bytes are kept up to a larger bound; decoding then keeps
            // `max` bytes of text.
            let read_max = if codings.is_empty() {
                max
            } else {
                max.saturating_mul(2).saturating_add(64 * 1024)
            };
            let mut body = resp.into_body();
            let read = async {
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| {
                        FetchError::Other(format!("robots.txt body from {url} cut short: {e}"))
                    })?;
                    if let Ok(data) = frame.into_data() {
                        let room = read_max.saturating_sub(raw.body.len());
                        if data.len() > room {
                            raw.body.extend_from_slice(&data[..room]);
                            raw.truncated = true;
                            break;
                        }
                        raw.body.extend_from_slice(&data);
                    }
                }
                Ok::<(), FetchError>(())
            };
            match tokio::time::timeout(this.body_timeout, read).await {
                Err(_) => return Err(FetchError::Timeout),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(())) => {}
            }
            if codings.is_empty() {
                return Ok(raw);
            }
            // RFC 9110 §8.4: the rules are in the decoded text (C40).
            let listed = codings.join(", ");
            let decoded = decode(&codings, &raw.body, max).map_err(|e| {
                let cut = if raw.truncated {
                    format!(" (coded body cut at {read_max} bytes)")
                } else {
                    String::new()
                };
                FetchError::Undecodable(format!(
                    "robots.txt from {url} with Content-Encoding `{listed}`: {e}{cut}"
                ))
            })?;
            raw.body = decoded.body;
            raw.truncated = decoded.truncated;
            raw.content_encoding = Some(listed);
            Ok(raw)
        })
    }
}
