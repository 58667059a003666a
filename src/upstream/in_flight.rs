//! A cap on the requests in flight to one origin at once
//! (`upstream.max_in_flight_per_origin`), whatever the HTTP version:
//! politeness, as 64 HTTP/2 streams are 64 concurrent requests to the
//! origin just as 64 HTTP/1.1 connections are. A turn is taken before the
//! request is sent ([`super::origin::Upstream::send`]) and ends when the
//! response's body has arrived whole, failed or been dropped
//! ([`crate::wire::body::Inbound`]), or when no response came.

use crawlcache_base::locks::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Origins with a semaphore kept; those with no request in flight are
/// dropped when there are more.
const MAX_ORIGINS: usize = 4096;

/// The requests in flight per origin (`scheme://authority`), at most `cap`
/// each; `cap` 0 means no cap.
pub struct InFlight {
    cap: usize,
    origins: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl InFlight {
    /// At most `cap` requests at once per origin (0: no cap).
    pub fn new(cap: usize) -> InFlight {
        InFlight { cap, origins: Mutex::new(HashMap::new()) }
    }

    /// Waits for a turn to send a request to the origin `key`; the turn
    /// lasts as long as the returned permit (`None` without a cap).
    pub async fn enter(&self, key: &str) -> Option<OwnedSemaphorePermit> {
        if self.cap == 0 {
            return None;
        }
        let semaphore = {
            let mut origins = lock(&self.origins);
            match origins.get(key) {
                Some(s) => s.clone(),
                None => {
                    if origins.len() >= MAX_ORIGINS {
                        let cap = self.cap;
                        origins.retain(|_, s| s.available_permits() < cap);
                    }
                    origins
                        .entry(key.to_string())
                        .or_insert_with(|| Arc::new(Semaphore::new(self.cap)))
                        .clone()
                }
            }
        };
        // The semaphore is never closed.
        semaphore.acquire_owned().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_cap_holds_per_origin_and_frees_with_the_permit() {
        let f = InFlight::new(2);
        let a1 = f.enter("https://a").await;
        let _a2 = f.enter("https://a").await;
        // Another origin has turns of its own.
        assert!(f.enter("https://b").await.is_some());
        let third = f.enter("https://a");
        tokio::pin!(third);
        assert!(futures_util::FutureExt::now_or_never(third.as_mut()).is_none());
        drop(a1);
        assert!(third.await.is_some());
        assert!(InFlight::new(0).enter("https://a").await.is_none());
    }
}
