//! Collapsed forwarding: concurrent requests for one key share one upstream
//! fetch (C17).
//!
//! The first request for a key becomes the leader and holds a [`Lead`]; the
//! others wait on it. When the leader is done it reports whether the
//! response was stored (then waiters look the key up again and find it) or
//! not shareable (then each waiter goes to the origin on its own, because a
//! `no-store` or `private` response must never be handed to another client).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// How a leader's fetch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running.
    Pending,
    /// A response was stored (or freshened) for the key: look it up again.
    Stored,
    /// The response was not stored: waiters must fetch on their own.
    NotShared,
}

/// The registry of fetches in flight, keyed by cache key.
#[derive(Default, Clone)]
pub struct Inflight {
    map: Arc<Mutex<HashMap<String, watch::Receiver<Outcome>>>>,
}

/// Either the lead for a key, or a ticket to wait for the current leader.
pub enum Role {
    /// This caller fetches; the others wait for its [`Outcome`].
    Leader(Lead),
    /// Another caller fetches: wait on this for its [`Outcome`].
    Follower(watch::Receiver<Outcome>),
}

/// Held by the request that fetches for a key. Dropping it without calling
/// [`Lead::finish`] reports [`Outcome::NotShared`], so waiters are never
/// stranded by a cancelled or failed fetch.
pub struct Lead {
    key: String,
    tx: watch::Sender<Outcome>,
    map: Arc<Mutex<HashMap<String, watch::Receiver<Outcome>>>>,
    done: bool,
}

impl Inflight {
    /// Becomes the leader for `key`, or returns a receiver to wait on.
    pub fn join(&self, key: &str) -> Role {
        let mut map = match self.map.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(rx) = map.get(key) {
            if *rx.borrow() == Outcome::Pending {
                return Role::Follower(rx.clone());
            }
        }
        let (tx, rx) = watch::channel(Outcome::Pending);
        map.insert(key.to_string(), rx);
        Role::Leader(Lead { key: key.to_string(), tx, map: self.map.clone(), done: false })
    }

    /// A receiver to wait on if a fetch for `key` is running, without ever
    /// becoming the leader (for requests that must not lead, such as HEAD).
    pub fn follow(&self, key: &str) -> Option<watch::Receiver<Outcome>> {
        let map = match self.map.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        map.get(key).filter(|rx| *rx.borrow() == Outcome::Pending).cloned()
    }
}

/// A lead that stands in for another while a stage acts on the outcome:
/// once the request holding it reports (or drops it), `then` runs on the
/// tokio runtime with the outcome (it copies an entry, releases a lock,
/// then finishes the lead it stands in for). Must be called inside a
/// tokio runtime.
pub fn relay<F, Fut>(key: &str, then: F) -> Lead
where
    F: FnOnce(Outcome) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = watch::channel(Outcome::Pending);
    tokio::spawn(async move { then(wait(rx).await).await });
    Lead { key: key.to_string(), tx, map: Arc::default(), done: false }
}

/// Waits until the leader reports; returns its outcome.
pub async fn wait(mut rx: watch::Receiver<Outcome>) -> Outcome {
    match rx.wait_for(|o| *o != Outcome::Pending).await {
        Ok(o) => *o,
        Err(_) => Outcome::NotShared,
    }
}

impl Lead {
    /// Reports the outcome to every waiter and releases the key.
    pub fn finish(mut self, outcome: Outcome) {
        self.release(outcome);
    }

    fn release(&mut self, outcome: Outcome) {
        if self.done {
            return;
        }
        self.done = true;
        {
            let mut map = match self.map.lock() {
                Ok(m) => m,
                Err(p) => p.into_inner(),
            };
            map.remove(&self.key);
        }
        let _ = self.tx.send(outcome);
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.release(Outcome::NotShared);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn followers_see_the_leaders_outcome() {
        let inf = Inflight::default();
        let Role::Leader(lead) = inf.join("k") else { panic!("first join must lead") };
        let Role::Follower(rx) = inf.join("k") else { panic!("second join must follow") };
        let w = tokio::spawn(wait(rx));
        lead.finish(Outcome::Stored);
        assert_eq!(w.await.unwrap(), Outcome::Stored);
        assert!(matches!(inf.join("k"), Role::Leader(_)), "key is free again");
    }

    #[tokio::test]
    async fn a_relay_hands_the_outcome_on_and_a_dropped_relay_reports_not_shared() {
        for (finish, want) in [(true, Outcome::Stored), (false, Outcome::NotShared)] {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let lead = relay("k", move |o| async move {
                let _ = tx.send(o);
            });
            if finish {
                lead.finish(Outcome::Stored);
            } else {
                drop(lead);
            }
            assert_eq!(rx.await.unwrap(), want);
        }
    }

    #[tokio::test]
    async fn dropped_lead_releases_waiters_as_not_shared() {
        let inf = Inflight::default();
        let Role::Leader(lead) = inf.join("k") else { panic!() };
        let Role::Follower(rx) = inf.join("k") else { panic!() };
        drop(lead);
        assert_eq!(wait(rx).await, Outcome::NotShared);
    }
}
