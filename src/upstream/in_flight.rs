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
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Origins with a semaphore kept; those with no request in flight are
/// dropped when there are more.
const MAX_ORIGINS: usize = 4096;

/// The requests in flight per origin (`scheme://authority`), at most `cap`
/// each; `cap` 0 means no cap.
pub struct InFlight {
    cap: usize,
    wait: Duration,
    origins: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// No turn came within the wait ([`InFlight::enter`]): `cap` requests were
/// in flight to the origin for all of `waited`.
#[derive(Debug, Clone, Copy)]
pub struct NoTurn {
    /// The cap (`upstream.max_in_flight_per_origin`).
    pub cap: usize,
    /// How long the request waited (`upstream.queue_timeout`).
    pub waited: Duration,
}

impl InFlight {
    /// At most `cap` requests at once per origin (0: no cap), a request
    /// waiting at most `wait` for its turn.
    pub fn new(cap: usize, wait: Duration) -> InFlight {
        InFlight { cap, wait, origins: Mutex::new(HashMap::new()) }
    }

    /// Waits (at most the configured wait) for a turn to send a request to
    /// the origin `key`; the turn lasts as long as the returned permit
    /// (`None` without a cap). Errors: [`NoTurn`] when none came in time.
    pub async fn enter(&self, key: &str) -> Result<Option<OwnedSemaphorePermit>, NoTurn> {
        if self.cap == 0 {
            return Ok(None);
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
        match tokio::time::timeout(self.wait, semaphore.acquire_owned()).await {
            // The semaphore is never closed.
            Ok(permit) => Ok(permit.ok()),
            Err(_) => Err(NoTurn { cap: self.cap, waited: self.wait }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_cap_holds_per_origin_and_frees_with_the_permit() {
        let f = InFlight::new(2, Duration::from_secs(60));
        let a1 = f.enter("https://a").await.unwrap();
        let _a2 = f.enter("https://a").await.unwrap();
        // Another origin has turns of its own.
        assert!(f.enter("https://b").await.unwrap().is_some());
        let third = f.enter("https://a");
        tokio::pin!(third);
        assert!(futures_util::FutureExt::now_or_never(third.as_mut()).is_none());
        drop(a1);
        assert!(third.await.unwrap().is_some());
        let none = InFlight::new(0, Duration::ZERO);
        assert!(none.enter("https://a").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_request_that_gets_no_turn_in_time_says_so() {
        let f = InFlight::new(1, Duration::from_millis(20));
        let _held = f.enter("https://a").await.unwrap();
        match f.enter("https://a").await {
            Err(NoTurn { cap: 1, waited }) => assert_eq!(waited, Duration::from_millis(20)),
            other => panic!("expected no turn, got {other:?}"),
        }
    }
}
