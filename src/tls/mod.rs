//! TLS for crawlcache: the local certificate authority that lets the proxy
//! intercept `CONNECT` tunnels, and the verified TLS used towards origins.
//!
//! - [`CertificateAuthority`] (`ca.rs`) creates or loads `<data_dir>/ca/ca.pem`
//!   and `ca.key`, and hands out a cached [`rustls::ServerConfig`] per host
//!   whose leaf certificate (`leaf.rs`) it signs.
//! - [`upstream_client_config`] and [`upstream_connector`] (`upstream.rs`)
//!   build the client side: public roots plus an optional extra CA file;
//!   [`origin_connector`] is the same through an optional parent proxy.
//! - [`describe_tls_error`] turns a certificate failure into the sentence the
//!   proxy puts in its 502 body.
//!
//! Every rustls configuration here is built with the ring provider passed
//! explicitly; nothing relies on a process-wide default provider.

mod ca;
mod error;
mod leaf;
mod pinned;
mod upstream;

pub use ca::{CertificateAuthority, LEAF_CACHE_CAPACITY};
pub use error::TlsError;
pub use leaf::CA_COMMON_NAME;
pub use upstream::{
    describe_tls_error, origin_connector, upstream_client_config, upstream_connector,
};
