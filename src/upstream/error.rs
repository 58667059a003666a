//! What the origin client says when an exchange fails: the kind of
//! failure (which decides 502 or 504, and whether the origin counts as
//! unreachable, RFC 9111 section 4.2.4) and a sentence naming the cause,
//! for the error body and the logs.

use super::parent::{find_parent_error, ParentError};
use http::StatusCode;

/// Bounds on an origin's response head. Real sites send heads with more
/// than 100 fields (cookies, security headers); peers bound a head by bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// Largest response head, in bytes (`upstream.max_head_bytes`).
    pub max_bytes: usize,
    /// Most fields in a response head (`upstream.max_head_fields`).
    pub max_fields: usize,
}

impl Default for HeadLimits {
    fn default() -> HeadLimits {
        HeadLimits { max_bytes: 256 * 1024, max_fields: 3000 }
    }
}

/// Why an upstream exchange failed, with a sentence for the client.
#[derive(Debug, Clone)]
pub struct UpstreamError {
    /// What kind of failure this was.
    pub kind: UpstreamErrorKind,
    /// Human-readable cause, used in the error body and logs.
    pub message: String,
}

/// Kinds of upstream failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// The host name did not resolve.
    Dns,
    /// The TCP connection could not be opened (refused, unreachable, connect timeout).
    Connect,
    /// The origin did not send its response head in time.
    Timeout,
    /// The origin's TLS certificate could not be verified.
    Tls,
    /// The origin broke the protocol or closed the connection.
    Protocol,
}

impl UpstreamError {
    /// True when the origin could not be reached at all: the cache is then
    /// disconnected in the sense of RFC 9111 section 4.2.4.
    pub fn unreachable(&self) -> bool {
        matches!(
            self.kind,
            UpstreamErrorKind::Dns | UpstreamErrorKind::Connect | UpstreamErrorKind::Timeout
        )
    }

    /// The status to answer the client with: 504 for a timeout, 502 otherwise.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            UpstreamErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        }
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Turns a client error into a kind and a sentence naming the cause;
/// `connect_failed` when the connection could not be opened at all.
pub(super) fn classify(
    host: &str,
    err: &(dyn std::error::Error + 'static),
    connect_failed: bool,
    limits: &HeadLimits,
) -> UpstreamError {
    let mut chain = String::new();
    let mut io_kind = None;
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        if e.is::<ParentError>() {
            // Its sentence leads the message instead (see below).
            src = e.source();
            continue;
        }
        let s = e.to_string();
        if !s.is_empty() && !chain.contains(&s) {
            if !chain.is_empty() {
                chain.push_str(": ");
            }
            chain.push_str(&s);
        }
        src = e.source();
    }
    if let Some(sentence) = crate::upstream::describe_tls_error(err) {
        return UpstreamError {
            kind: UpstreamErrorKind::Tls,
            message: format!("TLS with origin {host} failed: {sentence}"),
        };
    }
    // hyper-util's connector says "dns error" only in its message (its
    // ConnectError has no kind to ask), so resolution failures are told by
    // their text; timeouts by the I/O error kind first.
    let lower = chain.to_ascii_lowercase();
    let dns = lower.contains("dns error")
        || lower.contains("failed to lookup")
        || lower.contains("name or service not known");
    let timed_out = io_kind == Some(std::io::ErrorKind::TimedOut) || lower.contains("timed out");
    if let Some(p) = find_parent_error(err) {
        // The parent, not the origin, could not be reached or refused the tunnel.
        let parent = &p.parent;
        if p.failure != super::parent::ParentFailure::Connect {
            // A refused or broken CONNECT: its sentence names the origin already.
            return UpstreamError {
                kind: UpstreamErrorKind::Connect,
                message: format!("{p}: {chain}"),
            };
        }
        let (kind, sentence) = if dns {
            (UpstreamErrorKind::Dns, format!("could not resolve the parent proxy host {parent}"))
        } else if timed_out {
            (
                UpstreamErrorKind::Timeout,
                format!("connecting to the parent proxy {parent} timed out"),
            )
        } else {
            (UpstreamErrorKind::Connect, p.to_string())
        };
        return UpstreamError { kind, message: format!("{sentence} (for origin {host}): {chain}") };
    }
    if head_too_large(err) {
        return UpstreamError {
            kind: UpstreamErrorKind::Protocol,
            message: format!(
                "origin {host} sent a response head beyond the limits (upstream.max_head_bytes = {} bytes, upstream.max_head_fields = {}): {chain}",
                limits.max_bytes, limits.max_fields
            ),
        };
    }
    let kind = if dns {
        UpstreamErrorKind::Dns
    } else if timed_out {
        UpstreamErrorKind::Timeout
    } else if connect_failed {
        UpstreamErrorKind::Connect
    } else {
        UpstreamErrorKind::Protocol
    };
    let message = match kind {
        UpstreamErrorKind::Dns => format!("could not resolve origin host {host}: {chain}"),
        UpstreamErrorKind::Connect => format!("could not connect to origin {host}: {chain}"),
        UpstreamErrorKind::Timeout => format!("connecting to origin {host} timed out: {chain}"),
        UpstreamErrorKind::Tls => format!("TLS with origin {host} failed: {chain}"),
        UpstreamErrorKind::Protocol => format!("origin {host} failed: {chain}"),
    };
    UpstreamError { kind, message }
}

/// True when `err` is the HTTP library refusing a response head as too
/// large: more fields than its parser had room for, or more bytes.
pub(super) fn head_too_large(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = src {
        if e.downcast_ref::<hyper::Error>().is_some_and(|h| h.is_parse_too_large()) {
            return true;
        }
        src = e.source();
    }
    false
}
