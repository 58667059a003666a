//! The origin client: everything that reaches an origin server. Its
//! floor is above the plumbing of [`crate::wire`] and the certificate
//! errors of [`crate::tls`], below every part of the proxy that asks an
//! origin (the stages of [`crate::proxy`], the robots.txt fetcher of
//! [`crate::robots`]); docs/architecture.md draws the floors.
//!
//! - [`origin`]: the one client for origins ([`origin::Upstream`]): pooled
//!   connections, timeouts, response-head limits, the errors a 502 names.
//! - [`error`]: why an exchange with an origin failed ([`error::UpstreamError`]),
//!   as a 502 or 504 names it.
//! - [`parent`]: the parent (upstream) proxy the origin client may go
//!   through, and the connector that goes direct or via it.
//! - [`h2`]: HTTP/2 to origins, one multiplexed connection per origin.
//! - [`in_flight`]: the cap on requests in flight to one origin.
//! - [`asterisk`]: OPTIONS for a whole server, sent as `OPTIONS *` on a
//!   connection of its own (RFC 9112 section 3.2.4).
//! - [`upstream_client_config`] and [`upstream_connector`] (`tls.rs`)
//!   build TLS towards origins: public roots plus an optional extra CA
//!   file; [`origin_connector`] is the same through an optional parent
//!   proxy; [`describe_tls_error`] turns a certificate failure into the
//!   sentence the proxy puts in its 502 body.
//! - `pinned.rs`: the verifier that accepts an origin's self-signed
//!   certificate when it is the one the extra CA file holds.
//!
//! Every rustls configuration here is built with the ring provider passed
//! explicitly; nothing relies on a process-wide default provider.

pub mod asterisk;
pub mod error;
pub mod h2;
pub mod in_flight;
pub mod origin;
pub mod parent;
mod pinned;
mod tls;

pub use tls::{describe_tls_error, origin_connector, upstream_client_config, upstream_connector};
