//! Helpers shared by crawlcache's integration tests, one concern per file:
//! - [`dirs`]: [`TestDir`], a temporary folder under `CARGO_TARGET_TMPDIR`,
//!   removed when the test passes and kept (its path printed) when it fails;
//! - [`process`]: free loopback ports, bounded commands, log tails, tools;
//! - [`proxy`]: [`Proxy`] spawns the `crawlcache` binary, waits for
//!   `GET /stats` to answer 200, and stops it with SIGTERM when dropped;
//!   [`start_with_origin`] is the scripted-origin-plus-proxy fixture;
//! - [`nginx`]: [`Nginx`] runs a throw-away nginx (no daemon, no master,
//!   every path in a temporary folder) serving a directory, with an access
//!   log to count origin hits;
//! - [`origin`]: [`Origin`] is a scriptable raw-TCP origin: a closure gets
//!   each parsed request and returns a [`Reply`] made of byte writes, pauses
//!   and closes, so a test can send any header, a 304, a truncated chunked
//!   body or a slow response;
//! - [`raw_origin`]: [`RawOrigin`] records the exact bytes of every
//!   request per connection, splits them as a strict HTTP/1.1 server would
//!   (noting every framing it would have had to guess) and answers with
//!   scripted [`Reply`]s, for framing and smuggling tests;
//! - [`client`]: [`Conn`], [`send_request`] and [`proxy_get`] are a small
//!   HTTP/1.1 client that reports multi-valued fields and whether the body
//!   arrived whole; [`wire`] is the message parsing both sides share;
//! - [`crawl`]: the Rust book, `wget -r` and file-tree comparison;
//! - [`tmpfs`]: a small tmpfs for the disk-full tests (root only);
//! - [`warc_records`]: `response` records written into a test's WARC file;
//! - [`tls`]: a test CA and leaf for TLS origins (and a self-signed one);
//! - [`tls_origin`]: [`tls_origin::TlsOrigin`], an HTTPS (and plain HTTP)
//!   origin answering with a closure;
//! - [`h2_origin`]: [`h2_origin::H2Origin`], an origin speaking HTTP/2
//!   and/or HTTP/1.1 as its ALPN list says (or h2c), counting connections
//!   and recording each request's version and fields;
//! - [`redis`]: [`RedisServer`], a throw-away `redis-server` (fleet tests);
//! - [`s3`]: [`S3Server`], a throw-away one-node Garage (a real
//!   S3-compatible object store) with a key and a bucket (fleet tests).
//! - [`browser`]: [`browser::Chromium`], headless Chromium driven over
//!   the DevTools protocol on pipes (the status page test);
//! - [`bulk_store`]: a data directory of many stored responses written
//!   through the crawlcache library, and a child process watched for its
//!   peak resident memory (`/proc/<pid>/status`, `VmHWM`).
//!
//! The HTTP-level helpers compile against nothing but the binary (they spawn
//! it) and use only std and tokio; `tls` uses rcgen and rustls, `bulk_store`
//! the crawlcache library. Every wait is bounded; every failure message says
//! what was being done and shows the relevant log. `tmpfs`, `tls` and
//! `bulk_store` use nothing from the other files,
//! so a test binary may include one of them alone with `#[path]`.
#![allow(dead_code, unused_imports)]

pub mod browser;
pub mod bulk_store;
pub mod client;
pub mod crawl;
pub mod dirs;
pub mod h2_origin;
pub mod nginx;
pub mod origin;
pub mod process;
pub mod proxy;
pub mod raw_origin;
pub mod redis;
pub mod s3;
pub mod tls;
pub mod tls_origin;
pub mod tmpfs;
pub mod warc_records;
pub mod wire;

pub use client::*;
pub use crawl::*;
pub use dirs::*;
pub use nginx::*;
pub use origin::*;
pub use process::*;
pub use proxy::*;
pub use raw_origin::*;
pub use redis::*;
pub use s3::*;
pub use wire::*;
