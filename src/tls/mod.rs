//! The TLS of interception: the local certificate authority that lets the
//! proxy intercept `CONNECT` tunnels. (TLS towards origins is the origin
//! client's, in [`crate::upstream`].)
//!
//! - [`CertificateAuthority`] (`ca.rs`) creates or loads `<data_dir>/ca/ca.pem`
//!   and `ca.key`, and hands out a cached [`rustls::ServerConfig`] per host
//!   whose leaf certificate (`leaf.rs`) it signs.
//! - [`TlsError`] (`error.rs`): what can go wrong with certificates and keys
//!   on disk, shared with the origin client's extra CA file.
//!
//! Every rustls configuration here is built with the ring provider passed
//! explicitly; nothing relies on a process-wide default provider.

mod ca;
mod error;
mod leaf;

pub use ca::{CertificateAuthority, LEAF_CACHE_CAPACITY};
pub use error::TlsError;
pub use leaf::CA_COMMON_NAME;
