//! The error a command ends with: [`super::run`] prints it as
//! `crawlcache: <message>` and exits with 2.
//!
//! The errors of the layers below stay typed up to here (a command may
//! branch on one: [`AdminError::Refused`] is told apart from an unreachable
//! proxy); what a command words itself is a [`CommandError::Message`].

use super::access::{AdminError, StreamError, UploadError};

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
