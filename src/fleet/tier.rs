//! The fleet tier for stored responses: a second tier behind each node's
//! local store.
//!
//! - Where: bodies in the bucket as `bodies/SHA256`, uploaded once per body
//!   for the whole fleet (`body:{SHA256}` in Redis marks it uploaded);
//!   entry records ([`super::entry`]: the stored head the local index
//!   keeps, the body's hash and length, the stored time) in the Redis hash
//!   `entry:{H}`, one field per variant (secondary key).
//! - Lookup ([`before_origin`], called by the forward stage on a local
//!   miss): the most recent variant matching the request's secondary key is
//!   judged by the same policy code as a local entry
//!   (`route::reuse_decision`); if it may be served, or revalidated with its
//!   validators, its body is downloaded (verified against its name) into
//!   the local store and the entry inserted; the request then finds it
//!   locally and is served with `Cache-Status: crawlcache; hit; ...;
//!   detail=fleet`.
//! - Collapsed forwarding across nodes: a node's local leader for a URL
//!   takes `fetch:{H}` (`SET NX PX`) before going to the origin; leaders on
//!   other nodes poll (every [`POLL`], bounded by the longest an origin
//!   fetch may take) for its entry, and go to the origin themselves if the
//!   lock goes without one (the response was not storable) or the bound
//!   passes. The lock is released once the entry is published, or at once
//!   when nothing is stored.
//! - Publishing ([`publish_later`]): every response the node stores (and
//!   every 304 freshening) is published in the background, off the request
//!   path, at most [`PUBLISH_CONCURRENCY`] at a time, tried up to
//!   [`PUBLISH_ATTEMPTS`] times a second apart when an engine fails.
//!
//! Whatever fails on the way (Redis, the bucket, a record or a body that
//! does not check out) leaves the request on its single-node path: local
//! store, then origin.

use super::bucket::Download;
use super::entry::{FleetEntry, MAX_VARIANTS};
use super::keys;
use super::metrics::FleetMetrics;
use super::redis::FleetError;
use super::Fleet;
use crate::cache::policy::Reuse;
use crate::cache::StoredResponse;
use crate::proxy::collapse::{self, Inflight, Lead, Outcome, Role};
use crate::proxy::exchange::Exchange;
use crate::proxy::ProxyState;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often a node waiting for another node's origin fetch looks for its entry.
pub const POLL: Duration = Duration::from_millis(50);

/// Publications running at once (each uploads at most one body).
pub const PUBLISH_CONCURRENCY: usize = 16;

/// Attempts to publish one variant before giving up on it.
pub const PUBLISH_ATTEMPTS: u32 = 3;

/// Publications queued at most; more are dropped (and counted) rather than
/// held in memory while the bucket is slow.
pub const PUBLISH_QUEUE: usize = 10_000;

/// Per-node state of the fleet tier.
pub struct TierState {
    /// Cross-node fetch locks this node holds: primary key → token.
    held: Mutex<HashMap<String, String>>,
    /// Local collapse of fills for requests that are not collapse leaders.
    fills: Inflight,
    queued: AtomicUsize,
    permits: tokio::sync::Semaphore,
}

impl Default for TierState {
    fn default() -> TierState {
        TierState { held: Mutex::new(HashMap::new()), fills: Inflight::default(), queued: AtomicUsize::new(0), permits: tokio::sync::Semaphore::new(PUBLISH_CONCURRENCY) }
    }
}

fn held(fleet: &Fleet) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    crate::locks::lock(&fleet.tier.held)
}

/// What the forward stage does after [`before_origin`].
pub enum BeforeOrigin {
    /// The fleet tier filled the local store (the lead, if any, finished
    /// as stored): look the store up again.
    Filled,
    /// Go to the origin with this lead.
    Fetch(Option<Lead>),
}

impl Fleet {
    /// The variants the fleet tier holds for `primary`, checked. Records that
    /// do not check out are counted, logged and skipped.
    async fn variants(&self, primary: &str) -> Result<Vec<(FleetEntry, StoredResponse)>, FleetError> {
        let raw: HashMap<Vec<u8>, Vec<u8>> = self.redis.query(redis::cmd("HGETALL").arg(keys::entry(primary)).clone()).await?;
        if raw.len() > MAX_VARIANTS * 4 {
            FleetMetrics::inc(&self.metrics.invalid_records);
            return Err(FleetError::Invalid(format!("{} variants under {primary}", raw.len())));
        }
        let mut out = Vec::with_capacity(raw.len());
        for (sk, v) in raw {
            match FleetEntry::decode(primary, &sk, &v, self.max_object_size) {
                Ok(e) => out.push(e),
                Err(e) => {
                    FleetMetrics::inc(&self.metrics.invalid_records);
                    tracing::warn!("fleet: ignoring a record for {primary} in Redis: {e}");
                }
            }
        }
        Ok(out)
    }

    /// Copies `entry` of `primary` into the local store: downloads and
    /// verifies its body, then inserts the entry. `Ok(false)` when the body
    /// is missing or wrong (the record is then removed from Redis) or the
    /// local store refuses it.
    async fn fill(&self, primary: &str, entry: &FleetEntry) -> Result<bool, FleetError> {
        let committed = match &entry.body {
            None => None,
            Some((sha, len)) => {
                let Some(bucket) = &self.bucket else { return Ok(false) };
                match bucket.download(&self.store, sha, *len).await? {
                    Download::Stored(c) => Some(c),
                    Download::Missing => {
                        FleetMetrics::inc(&self.metrics.body_missing);
                        tracing::info!("fleet: body {sha} of {primary} is not in the bucket; dropping its record");
                        self.forget(primary, &entry.secondary_key, sha).await;
                        return Ok(false);
                    }
                    Download::Mismatch(why) => {
                        FleetMetrics::inc(&self.metrics.body_mismatches);
                        tracing::warn!("fleet: discarded the body of {primary} from the bucket: {why}");
                        self.forget(primary, &entry.secondary_key, sha).await;
                        return Ok(false);
                    }
                }
            }
        };
        let (store, p, sk, meta) = (self.store.clone(), primary.to_string(), entry.secondary_key.clone(), entry.meta.clone());
        let inserted = tokio::task::spawn_blocking(move || {
            let r = store.insert(&p, &sk, &meta, committed.as_ref());
            if r.is_err() {
                if let Some(c) = &committed {
                    store.discard_body(c);
                }
            }
            r
        })
        .await;
        match inserted {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(e)) => {
                tracing::info!("fleet: not copying {primary} into the local store: {e}");
                Ok(false)
            }
            Err(e) => Err(FleetError::Failed(format!("local insert: {e}"))),
        }
    }

    /// Drops a record whose body is gone or wrong, and the body's mark.
    async fn forget(&self, primary: &str, secondary_key: &[u8], sha: &str) {
        let _ = self.redis.query::<i64>(redis::cmd("HDEL").arg(keys::entry(primary)).arg(secondary_key).clone()).await;
        let _ = self.redis.query::<i64>(redis::cmd("DEL").arg(keys::body_mark(sha)).clone()).await;
    }

    /// Publishes the local variant `(primary, secondary_key)`: uploads its
    /// body unless the bucket has it, then writes its record. Responses kept
    /// for the record only (`record:` keys) are not published.
    pub async fn publish(&self, primary: &str, secondary_key: &[u8]) -> Result<(), FleetError> {
        let Some(bucket) = &self.bucket else { return Ok(()) };
        if crate::store_key::StoreKey::is_record(primary) {
            return Ok(());
        }
        let entries = self.store.lookup(primary).map_err(|e| FleetError::Failed(format!("local lookup: {e}")))?;
        let Some(local) = entries.into_iter().find(|e| e.secondary_key == secondary_key) else { return Ok(()) };
        if let Some(b) = &local.body {
            let mark = keys::body_mark(&b.sha256);
            let known: bool = self.redis.query(redis::cmd("EXISTS").arg(&mark).clone()).await?;
            if known {
                FleetMetrics::inc(&self.metrics.uploads_skipped);
            } else {
                bucket.upload(&self.store, &local, &b.sha256, b.len).await?;
                FleetMetrics::inc(&self.metrics.uploads);
                self.redis.query::<()>(redis::cmd("SET").arg(&mark).arg(1).arg("EX").arg(self.config.entry_ttl.as_secs().max(1)).clone()).await?;
            }
        }
        let record = FleetEntry {
            secondary_key: local.secondary_key.clone(),
            meta: local.meta.clone(),
            body: local.body.as_ref().map(|b| (b.sha256.clone(), b.len)),
            stored_at_ms: crate::cache::to_millis(SystemTime::now()),
        };
        let key = keys::entry(primary);
        let variants: i64 = self.redis.query(redis::cmd("HLEN").arg(&key).clone()).await?;
        if variants as usize >= MAX_VARIANTS {
            self.redis.query::<i64>(redis::cmd("DEL").arg(&key).clone()).await?;
        }
        self.redis.query::<i64>(redis::cmd("HSET").arg(&key).arg(&record.secondary_key).arg(record.encode()).clone()).await?;
        self.redis.query::<i64>(redis::cmd("EXPIRE").arg(&key).arg(self.config.entry_ttl.as_secs().max(1)).clone()).await?;
        FleetMetrics::inc(&self.metrics.published);
        Ok(())
    }

    /// Takes the cross-node fetch lock of `primary`: `Some(token)` when this
    /// node now fetches for the fleet.
    async fn try_lead(&self, primary: &str) -> Result<Option<String>, FleetError> {
        let token = self.lock_token();
        let ms = self.lock_ttl.as_millis().max(1) as u64;
        let won: Option<String> = self.redis.query(redis::cmd("SET").arg(keys::fetch_lock(primary)).arg(&token).arg("NX").arg("PX").arg(ms).clone()).await?;
        Ok(won.map(|_| token))
    }

    /// Releases the cross-node fetch lock of `primary` if this node holds it.
    pub async fn release(&self, primary: &str) {
        let token = held(self).remove(primary);
        if let Some(t) = token {
            let key = keys::fetch_lock(primary);
            let _ = self.redis.script::<i64>(super::robots::unlock_script(), &[key.as_bytes()], &[t.as_bytes()]).await;
        }
    }
}

/// Publishes the local variant `(primary, secondary_key)` to the fleet tier
/// in the background, then releases this node's fetch lock for `primary`
/// if it holds one. Returns at once.
pub fn publish_later(fleet: &Arc<Fleet>, primary: &str, secondary_key: &[u8]) {
    if fleet.bucket.is_none() {
        return;
    }
    if fleet.tier.queued.fetch_add(1, Ordering::Relaxed) >= PUBLISH_QUEUE {
        fleet.tier.queued.fetch_sub(1, Ordering::Relaxed);
        FleetMetrics::inc(&fleet.metrics.publish_dropped);
        let f = fleet.clone();
        let p = primary.to_string();
        tokio::spawn(async move { f.release(&p).await });
        return;
    }
    let (f, p, sk) = (fleet.clone(), primary.to_string(), secondary_key.to_vec());
    tokio::spawn(async move {
        let permit = f.tier.permits.acquire().await;
        // An engine that failed a moment ago gets up to two more chances,
        // a second apart (it may be reconnecting after an outage).
        for attempt in 1..=PUBLISH_ATTEMPTS {
            match f.publish(&p, &sk).await {
                Ok(()) => break,
                Err(e) if attempt < PUBLISH_ATTEMPTS && !matches!(e, FleetError::Invalid(_)) => {
                    tokio::time::sleep(super::health::RETRY_AFTER).await;
                }
                Err(e) => tracing::debug!("fleet: {p} not published: {e}"),
            }
        }
        drop(permit);
        f.tier.queued.fetch_sub(1, Ordering::Relaxed);
        f.release(&p).await;
    });
}

/// Whether the fleet variant `stored` is worth copying for `ex`: it may be
/// served now (fresh, or stale where allowed), or it must be validated and
/// has validators (a 304 then saves the body transfer).
fn usable(state: &ProxyState, ex: &Exchange, stored: &StoredResponse) -> bool {
    let d = crate::proxy::route::reuse_decision(ex, stored, SystemTime::now(), &state.policy, &state.config.cache.rules);
    match d.reuse {
        Reuse::Serve | Reuse::ServeStaleAndRevalidate => true,
        Reuse::Revalidate => !crate::cache::policy::conditional_headers(stored).is_empty(),
    }
}

/// The newest variant of `ex`'s URL in the fleet tier matching its
/// secondary key, if usable.
async fn find(fleet: &Fleet, state: &ProxyState, ex: &Exchange) -> Result<Option<FleetEntry>, FleetError> {
    let mut best: Option<(FleetEntry, StoredResponse)> = None;
    for (entry, stored) in fleet.variants(ex.primary()).await? {
        let Some(sk) = crate::cache::key::secondary_key(&stored.header_map(), &ex.parts.headers) else { continue };
        if sk != entry.secondary_key {
            continue;
        }
        if best.as_ref().is_none_or(|(_, b)| stored.response_time_ms > b.response_time_ms) {
            best = Some((entry, stored));
        }
    }
    Ok(best.filter(|(_, s)| usable(state, ex, s)).map(|(e, _)| e))
}

/// Looks `ex` up in the fleet tier and copies what it finds; true when the
/// local store now has it.
async fn look_and_fill(fleet: &Fleet, state: &ProxyState, ex: &Exchange) -> bool {
    match find(fleet, state, ex).await {
        Ok(Some(entry)) => matches!(fleet.fill(ex.primary(), &entry).await, Ok(true)),
        _ => false,
    }
}

/// The fleet side of a local miss, before the origin (called once per
/// request by the forward stage with the request's local collapse `lead`):
/// the fleet tier, then the cross-node fetch lock (see the module docs).
pub async fn before_origin(state: &Arc<ProxyState>, ex: &mut Exchange, lead: Option<Lead>) -> BeforeOrigin {
    let Some(fleet) = state.fleet.clone() else { return BeforeOrigin::Fetch(lead) };
    if fleet.bucket.is_none() || ex.fleet_checked || ex.parts.method != http::Method::GET {
        return BeforeOrigin::Fetch(lead);
    }
    ex.fleet_checked = true;
    let primary = ex.primary().to_string();
    let filled = |ex: &mut Exchange, lead: Option<Lead>| {
        FleetMetrics::inc(&fleet.metrics.tier_hits);
        ex.from_fleet = true;
        if let Some(l) = lead {
            l.finish(Outcome::Stored);
        }
        BeforeOrigin::Filled
    };
    let Some(lead) = lead else {
        // Not a collapse leader: one fill per URL at a time on this node.
        return match fleet.tier.fills.join(&primary) {
            Role::Leader(fill) => {
                if look_and_fill(&fleet, state, ex).await {
                    fill.finish(Outcome::Stored);
                    filled(ex, None)
                } else {
                    FleetMetrics::inc(&fleet.metrics.tier_misses);
                    BeforeOrigin::Fetch(None)
                }
            }
            Role::Follower(rx) => {
                if collapse::wait(rx).await == Outcome::Stored {
                    filled(ex, None)
                } else {
                    BeforeOrigin::Fetch(None)
                }
            }
        };
    };
    if look_and_fill(&fleet, state, ex).await {
        return filled(ex, Some(lead));
    }
    // Nothing usable: one node fetches from the origin for the fleet.
    let deadline = Instant::now() + fleet.wait_bound;
    let mut waited = false;
    loop {
        match fleet.try_lead(&primary).await {
            Err(_) => break,
            Ok(Some(token)) => {
                held(&fleet).insert(primary.clone(), token);
                FleetMetrics::inc(&fleet.metrics.tier_misses);
                return BeforeOrigin::Fetch(Some(release_unless_stored(fleet.clone(), primary, lead)));
            }
            Ok(None) => {}
        }
        if !waited {
            waited = true;
            FleetMetrics::inc(&fleet.metrics.tier_waits);
        }
        // Another node is fetching it: wait for its entry.
        loop {
            if Instant::now() >= deadline {
                tracing::info!("fleet: no entry for {primary} from the fleet within {} s; fetching it here", fleet.wait_bound.as_secs());
                FleetMetrics::inc(&fleet.metrics.tier_misses);
                return BeforeOrigin::Fetch(Some(lead));
            }
            tokio::time::sleep(POLL).await;
            match find(&fleet, state, ex).await {
                Err(_) => return BeforeOrigin::Fetch(Some(lead)),
                Ok(Some(entry)) => {
                    if matches!(fleet.fill(&primary, &entry).await, Ok(true)) {
                        return filled(ex, Some(lead));
                    }
                    return BeforeOrigin::Fetch(Some(lead));
                }
                Ok(None) => {}
            }
            match fleet.redis.query::<bool>(redis::cmd("EXISTS").arg(keys::fetch_lock(&primary)).clone()).await {
                Err(_) => return BeforeOrigin::Fetch(Some(lead)),
                // Gone without an entry: not storable, or its holder died.
                Ok(false) => break,
                Ok(true) => {}
            }
        }
    }
    FleetMetrics::inc(&fleet.metrics.tier_misses);
    BeforeOrigin::Fetch(Some(lead))
}

/// A lead standing in for `lead` that releases this node's fetch lock for
/// `primary` when the response is not stored. When it is stored, the
/// publication releases the lock once the entry is in Redis (the tee's
/// publish hook, [`publish_later`]).
fn release_unless_stored(fleet: Arc<Fleet>, primary: String, lead: Lead) -> Lead {
    let private = Inflight::default();
    let Role::Leader(relay) = private.join(&primary) else {
        // A fresh registry always makes the first caller its leader.
        return lead;
    };
    let rx = private.follow(&primary);
    tokio::spawn(async move {
        let outcome = match rx {
            Some(rx) => collapse::wait(rx).await,
            None => Outcome::NotShared,
        };
        lead.finish(outcome);
        if outcome != Outcome::Stored {
            fleet.release(&primary).await;
        }
    });
    relay
}
