//! The per-node state of the fleet tier ([`crate::tier`]), kept in
//! [`crate::Fleet`]: its own file so that the fleet's root does not import
//! the tier that works on it.

use crawlcache_base::collapse::Inflight;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

/// Publications running at once (each uploads at most one body).
pub const PUBLISH_CONCURRENCY: usize = 16;

/// Per-node state of the fleet tier.
pub struct TierState {
    /// Cross-node fetch locks this node holds: primary key → token.
    pub(crate) held: Mutex<HashMap<String, String>>,
    /// Local collapse of fills for requests that are not collapse leaders.
    pub(crate) fills: Inflight,
    /// Publications queued or running.
    pub(crate) queued: AtomicUsize,
    /// One permit per publication running.
    pub(crate) permits: tokio::sync::Semaphore,
}

impl Default for TierState {
    fn default() -> TierState {
        TierState {
            held: Mutex::new(HashMap::new()),
            fills: Inflight::default(),
            queued: AtomicUsize::new(0),
            permits: tokio::sync::Semaphore::new(PUBLISH_CONCURRENCY),
        }
    }
}
