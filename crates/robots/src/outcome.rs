//! [`FetchOutcome`]: how one robots.txt fetch attempt ended, its metric
//! label, and, for a failure, the sentence a user reads: the cause
//! (certificate, DNS, connection, timeout, status, ...) and what fixes it
//! ([`FetchOutcome::failure_cause`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The outcome of one fetch attempt, for display and the
/// `robots_fetch_total{outcome}` metric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FetchOutcome {
    /// 2xx: the body was parsed.
    Ok {
        /// The status code.
        status: u16,
    },
    /// 304 to a conditional request: the stored body is still current.
    NotModified,
    /// 4xx other than 429: no rules.
    ClientError {
        /// The status code.
        status: u16,
    },
    /// 429 Too Many Requests.
    TooManyRequests,
    /// 5xx.
    ServerError {
        /// The status code.
        status: u16,
    },
    /// Any other status (1xx, 3xx without `Location`, unsolicited 304, ...).
    UnexpectedStatus {
        /// The status code.
        status: u16,
    },
    /// No response in time.
    Timeout,
    /// The host name did not resolve.
    Dns {
        /// The resolver's message.
        detail: String,
    },
    /// The connection could not be made (refused, reset).
    Connect {
        /// The cause.
        detail: String,
    },
    /// The TLS handshake with the origin failed: most often its
    /// certificate could not be verified.
    Tls {
        /// The cause, naming the certificate problem.
        detail: String,
    },
    /// The body's content coding is unknown or its bytes do not decode
    /// (C40): a failed fetch, never rules.
    Undecodable {
        /// What failed, naming the coding.
        detail: String,
    },
    /// Any other transport failure.
    Other {
        /// The cause.
        detail: String,
    },
    /// A redirect outside the configured scope (`robots.redirects`).
    RedirectRefused {
        /// The refused target URL.
        to: String,
    },
    /// More than five redirects (RFC 9309 §2.3.1.2): given up, the rules
    /// are `absent`.
    TooManyRedirects {
        /// The target of the redirect not followed.
        to: String,
    },
    /// A redirect to a URL already in the chain (RFC 9309 §2.3.1.2): given
    /// up without fetching it again, the rules are `absent`.
    RedirectLoop {
        /// The repeated URL, not fetched again.
        to: String,
    },
}

impl FetchOutcome {
    /// The metric label: `fetched`, `not_modified`, `absent`, `rate_limited`,
    /// `server_error`, `unexpected_status`, `timeout`, `dns`, `connect`,
    /// `tls`, `undecodable`, `other`, `redirect_refused`,
    /// `too_many_redirects`, `redirect_loop`.
    pub fn label(&self) -> &'static str {
        match self {
            FetchOutcome::Ok { .. } => "fetched",
            FetchOutcome::NotModified => "not_modified",
            FetchOutcome::ClientError { .. } => "absent",
            FetchOutcome::TooManyRequests => "rate_limited",
            FetchOutcome::ServerError { .. } => "server_error",
            FetchOutcome::UnexpectedStatus { .. } => "unexpected_status",
            FetchOutcome::Timeout => "timeout",
            FetchOutcome::Dns { .. } => "dns",
            FetchOutcome::Connect { .. } => "connect",
            FetchOutcome::Tls { .. } => "tls",
            FetchOutcome::Undecodable { .. } => "undecodable",
            FetchOutcome::Other { .. } => "other",
            FetchOutcome::RedirectRefused { .. } => "redirect_refused",
            FetchOutcome::TooManyRedirects { .. } => "too_many_redirects",
            FetchOutcome::RedirectLoop { .. } => "redirect_loop",
        }
    }

    /// For an attempt that leaves the rules unknown (RFC 9309 §2.3.1.4),
    /// the cause and what fixes it, for a person: the certificate problem
    /// and `upstream.extra_ca_file`; a host that does not resolve or a
    /// connection that fails (the origin is unreachable); a timeout and
    /// the `upstream` timeouts; the status the origin answered; a refused
    /// redirect and `robots.redirects`. `None` for an outcome that gives
    /// rules (2xx, a 4xx, a redirect chain given up) or keeps them (304).
    pub fn failure_cause(&self) -> Option<String> {
        Some(match self {
            FetchOutcome::Ok { .. } | FetchOutcome::ClientError { .. } | FetchOutcome::TooManyRedirects { .. } | FetchOutcome::RedirectLoop { .. } => {
                return None
            }
            FetchOutcome::NotModified => "status: the origin answered 304 to a request that had no validators".to_string(),
            FetchOutcome::TooManyRequests => "status: the origin answered 429 (too many requests); retried after its Retry-After".to_string(),
            FetchOutcome::ServerError { status } => format!("status: the origin answered {status} (server error)"),
            FetchOutcome::UnexpectedStatus { status } => format!("status: the origin answered {status}, which is not an answer for a robots.txt"),
            FetchOutcome::Timeout => {
                "timeout: the origin did not answer within `upstream.connect_timeout` and `upstream.response_timeout`: it is unreachable or too slow"
                    .to_string()
            }
            FetchOutcome::Dns { detail } => format!("DNS: {detail}; the origin is unreachable: its host name does not resolve from this machine"),
            FetchOutcome::Connect { detail } => format!("connection: {detail}; the origin is unreachable"),
            FetchOutcome::Tls { detail } => format!(
                "certificate: {detail}; if the origin's certificate comes from a private CA, or is self-signed, add that certificate to `upstream.extra_ca_file`"
            ),
            FetchOutcome::Undecodable { detail } => format!("undecodable body: {detail}"),
            FetchOutcome::Other { detail } => format!("fetch failure: {detail}"),
            FetchOutcome::RedirectRefused { to } => format!("redirect to {to} refused by `robots.redirects`"),
        })
    }
}

impl fmt::Display for FetchOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchOutcome::Ok { status } => write!(f, "{status}"),
            FetchOutcome::NotModified => f.write_str("304 not modified"),
            FetchOutcome::ClientError { status } => write!(f, "{status} (no rules published)"),
            FetchOutcome::TooManyRequests => f.write_str("429 too many requests"),
            FetchOutcome::ServerError { status } => write!(f, "{status} server error"),
            FetchOutcome::UnexpectedStatus { status } => write!(f, "unexpected status {status}"),
            FetchOutcome::Timeout => f.write_str("timeout"),
            FetchOutcome::Dns { detail } => write!(f, "DNS failure: {detail}"),
            FetchOutcome::Connect { detail } => write!(f, "connection failure: {detail}"),
            FetchOutcome::Tls { detail } => write!(f, "TLS failure: {detail}"),
            FetchOutcome::Undecodable { detail } => write!(f, "undecodable body: {detail}"),
            FetchOutcome::Other { detail } => write!(f, "fetch failure: {detail}"),
            FetchOutcome::RedirectRefused { to } => write!(f, "redirect to {to} refused"),
            FetchOutcome::TooManyRedirects { to } => {
                write!(f, "more than 5 redirects (next: {to})")
            }
            FetchOutcome::RedirectLoop { to } => write!(f, "redirect loop (back to {to})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_names_its_cause_and_what_fixes_it() {
        let tls = FetchOutcome::Tls {
            detail: "the origin's certificate is not trusted: UnknownIssuer".into(),
        };
        let c = tls.failure_cause().unwrap();
        assert!(
            c.starts_with("certificate: ")
                && c.contains("UnknownIssuer")
                && c.contains("`upstream.extra_ca_file`"),
            "{c}"
        );
        let c = FetchOutcome::Dns { detail: "could not resolve origin host nowhere.test".into() }
            .failure_cause()
            .unwrap();
        assert!(
            c.starts_with("DNS: ")
                && c.contains("nowhere.test")
                && c.contains("the origin is unreachable"),
            "{c}"
        );
        let c = FetchOutcome::Connect {
            detail: "could not connect to origin 127.0.0.1:9: Connection refused".into(),
        }
        .failure_cause()
        .unwrap();
        assert!(
            c.starts_with("connection: ")
                && c.contains("Connection refused")
                && c.contains("the origin is unreachable"),
            "{c}"
        );
        let c = FetchOutcome::ServerError { status: 503 }.failure_cause().unwrap();
        assert_eq!(c, "status: the origin answered 503 (server error)");
        assert!(FetchOutcome::TooManyRequests.failure_cause().unwrap().contains("429"));
        assert!(FetchOutcome::Timeout
            .failure_cause()
            .unwrap()
            .contains("`upstream.response_timeout`"));
        assert!(FetchOutcome::RedirectRefused { to: "http://b.test/r".into() }
            .failure_cause()
            .unwrap()
            .contains("`robots.redirects`"));
        for rules in [
            FetchOutcome::Ok { status: 200 },
            FetchOutcome::ClientError { status: 404 },
            FetchOutcome::TooManyRedirects { to: "http://a.test/6".into() },
            FetchOutcome::RedirectLoop { to: "http://a.test/robots.txt".into() },
        ] {
            assert_eq!(rules.failure_cause(), None, "{rules}");
        }
    }

    #[test]
    fn outcomes_stored_before_tls_and_loops_were_told_apart_still_load() {
        let old: FetchOutcome =
            serde_json::from_str(r#"{"kind":"connect","detail":"TLS with origin a.test failed"}"#)
                .unwrap();
        assert_eq!(old.label(), "connect");
        let tls = FetchOutcome::Tls { detail: "x".into() };
        assert_eq!(
            serde_json::from_str::<FetchOutcome>(&serde_json::to_string(&tls).unwrap()).unwrap(),
            tls
        );
    }
}
