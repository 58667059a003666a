//! Operations on the store that several front ends share: the command
//! line (`crawlcache cache ...`), the admin endpoints of the running proxy
//! ([`crate::admin`]) and the WARC export ([`crate::warc`]). Their floor
//! is above the proxy and below all three (docs/architecture.md).
//!
//! - [`inspect`]: listing stored responses (`cache ls`), picking the
//!   variant a URL's body is read from (`cache cat`), key filters.
//! - [`maintain`]: purge (by URL, host, prefix or age) and prune.
//! - [`lookup`]: the stored variants of one URL (`cache show`).
//! - [`host_filter`]: the `--host` pattern (`example.com`,
//!   `*.example.com`) and the host of a stored URL.

pub mod host_filter;
pub mod inspect;
pub mod lookup;
pub mod maintain;
