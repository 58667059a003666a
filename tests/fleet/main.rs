//! Fleet mode end to end: three crawlcache nodes on loopback sharing one
//! real Redis (`redis-server`) and one real S3-compatible bucket (a
//! one-node Garage, tests/common/s3.rs), in front of one scripted origin
//! whose request log is the evidence.
//!
//! - [`robots`]: first sight and refresh of an origin's robots.txt: one
//!   fetch for the fleet.
//! - [`tier`]: the fleet tier: a page fetched through one node is served by
//!   the others without the origin, byte-identical; concurrent misses across
//!   nodes make one origin fetch; a damaged body in the bucket is discarded.
//! - [`pace`]: `Crawl-delay: 1` holds for the fleet as a whole.
//! - [`faults`]: Redis, then the bucket, stopped mid-crawl and restarted.
//! - [`cluster`]: the same sharing over a three-primary Redis Cluster.
//!
//! The tests run one at a time (they measure request spacing and stop
//! servers); each takes seconds, the pacing one about 30 s.
//! `redis-server` and `garage` must be installed (tests/run.sh installs
//! them: apt-get and `cargo install garage --locked`); when they are
//! missing the tests fail naming what to install.

#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod faults;
mod pace;
mod robots;
mod support;
mod tier;
