//! The error a command ends with: [`super::run`] prints it as
//! `crawlcache: <message>` and exits with 2.
//!
//! The errors of the layers below stay typed up to here (a command may
//! branch on one: [`AdminError::Refused`] is told apart from an unreachable
//! proxy); what a command words itself is a [`CommandError::Message`].

use std::net::SocketAddr;

/// Why a command failed. `Display` is the sentence the user reads: what
/// failed, on which file, URL or key, and why.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The running proxy could not be asked, or refused the request.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A streamed admin answer failed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A WARC upload to the running proxy failed.
    #[error(transparent)]
    Upload(#[from] UploadError),
    /// The store could not be opened, read or written.
    #[error(transparent)]
    Store(#[from] crawlcache_store::StoreError),
    /// The proxy could not start (or stop cleanly).
    #[error(transparent)]
    Serve(#[from] crate::proxy::ServeError),
    /// A URL given is not one the cache can look up.
    #[error(transparent)]
    Lookup(#[from] crate::ops::lookup::LookupError),
    /// A listing or a stored body could not be given.
    #[error(transparent)]
    Inspect(#[from] crate::ops::inspect::InspectError),
    /// A purge or prune removed nothing.
    #[error(transparent)]
    Maintain(#[from] crate::ops::maintain::MaintainError),
    /// A `--host` value is not a host.
    #[error(transparent)]
    HostFilter(#[from] crate::ops::host_filter::HostFilterError),
    /// A stored robots.txt snapshot could not be read or flushed.
    #[error(transparent)]
    Snapshot(#[from] crawlcache_robots::registry::SnapshotError),
    /// The CA could not be loaded, created or installed.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Anything else, worded by the command.
    #[error("{0}")]
    Message(String),
}

impl From<String> for CommandError {
    fn from(message: String) -> Self {
        CommandError::Message(message)
    }
}

impl From<&str> for CommandError {
    fn from(message: &str) -> Self {
        CommandError::Message(message.to_string())
    }
}

/// Why an admin request got no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No connection could be made (within 2 s).
    #[error("cannot reach the proxy at {addr}: {source}")]
    Unreachable {
        /// The proxy's address.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The request could not be sent.
    #[error("cannot talk to the proxy at {addr}: {source}")]
    Talk {
        /// The proxy's address.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The answer could not be read (within 30 s).
    #[error("cannot read the proxy's answer: {0}")]
    Read(std::io::Error),
    /// The answer has no status line.
    #[error("malformed answer from the proxy")]
    Malformed,
    /// The proxy refused the request (`401` or `403`: a token is needed or
    /// does not match, or the request does not address the proxy:
    /// docs/CASES.md C54); `Display` names what to set.
    #[error("the proxy at {addr} refused the admin request ({status}{}{said}); {hint}", if .said.is_empty() { "" } else { ": " })]
    Refused {
        /// The proxy's address.
        addr: SocketAddr,
        /// `401` or `403`.
        status: u16,
        /// The first line of the proxy's answer (at most 200 characters).
        said: String,
        /// What to set.
        hint: &'static str,
    },
}

/// Why [`super::access::admin_upload`] did not get an answer: the local file could not
/// be read before anything of it was sent (the caller may skip it and go
/// on), or the upload failed (the caller stops).
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Unreadable(String),
    /// The proxy could not be reached, stopped reading or answered nothing
    /// usable, or the file got shorter while it was sent.
    #[error("{0}")]
    Failed(String),
}

/// Why a streamed admin request failed.
#[derive(Debug)]
pub struct StreamError {
    /// The proxy's status code, when it answered with another than 200.
    pub status: Option<u16>,
    /// What went wrong (for a status: the proxy's message).
    pub message: String,
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for StreamError {
    fn from(message: String) -> Self {
        StreamError { status: None, message }
    }
}

impl std::error::Error for StreamError {}
