//! The fleet tier for stored responses: a second tier behind each node's
//! local store.
//!
//! - Where: bodies in the bucket as `bodies/SHA256`, uploaded once per body
//!   for the whole fleet (`body:{SHA256}` in Redis marks it uploaded);
//!   entry records ([`super::entry`]: the stored head the local index
//!   keeps, the body's hash and length, the stored time) in the Redis hash
//!   `entry:{H}`, one field per variant (secondary key).
//! - Lookup ([`before_origin`], called by the forward stage on a local
//!   miss with a [`FleetRequest`]): the variant the request selects
//!   (`crawlcache_policy::cache::variant::select`) is judged by the same
//!   policy code as a local entry (the request's `decide`, the proxy's
//!   `cache_rules::reuse_decision`); if it may be served, or revalidated with its
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
use crawlcache_base::collapse::{self, Lead, Outcome, Role};
use crawlcache_policy::cache::Reuse;
use crawlcache_policy::cache::StoredResponse;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How often a node waiting for another node's origin fetch looks for its entry.
pub const POLL: Duration = Duration::from_millis(50);

pub use super::tier_state::PUBLISH_CONCURRENCY;

/// Attempts to publish one variant before giving up on it.
pub const PUBLISH_ATTEMPTS: u32 = 3;

/// Publications queued at most; more are dropped (and counted) rather than
/// held in memory while the bucket is slow.
pub const PUBLISH_QUEUE: usize = 10_000;

fn held(fleet: &Fleet) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    crawlcache_base::locks::lock(&fleet.tier.held)
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
    async fn variants(
        &self,
        primary: &str,
    ) -> Result<Vec<(FleetEntry, StoredResponse)>, FleetError> {
        let raw: HashMap<Vec<u8>, Vec<u8>> =
            self.redis.query(redis::cmd("HGETALL").arg(keys::entry(primary)).clone()).await?;
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
                        tracing::warn!(
                            "fleet: discarded the body of {primary} from the bucket: {why}"
                        );
                        self.forget(primary, &entry.secondary_key, sha).await;
                        return Ok(false);
                    }
                }
            }
        };
        let (store, p, sk, meta) = (
            self.store.clone(),
            primary.to_string(),
            entry.secondary_key.clone(),
            entry.meta.clone(),
        );
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
        let _ = self
            .redis
            .query::<i64>(redis::cmd("HDEL").arg(keys::entry(primary)).arg(secondary_key).clone())
            .await;
        let _ = self.redis.query::<i64>(redis::cmd("DEL").arg(keys::body_mark(sha)).clone()).await;
    }

    /// Publishes the local variant `(primary, secondary_key)`: uploads its
    /// body unless the bucket has it, then writes its record. Responses kept
    /// for the record only (`record:` keys) are not published.
    pub async fn publish(&self, primary: &str, secondary_key: &[u8]) -> Result<(), FleetError> {
        let Some(bucket) = &self.bucket else { return Ok(()) };
        if crawlcache_policy::store_key::StoreKey::is_record(primary) {
            return Ok(());
        }
        let entries = self
            .store
            .lookup(primary)
            .map_err(|e| FleetError::Failed(format!("local lookup: {e}")))?;
        let Some(local) = entries.into_iter().find(|e| e.secondary_key == secondary_key) else {
            return Ok(());
        };
        if let Some(b) = &local.body {
            let mark = keys::body_mark(&b.sha256);
            let known: bool = self.redis.query(redis::cmd("EXISTS").arg(&mark).clone()).await?;
            if known {
                FleetMetrics::inc(&self.metrics.uploads_skipped);
            } else {
                bucket.upload(&self.store, &local, &b.sha256, b.len).await?;
                FleetMetrics::inc(&self.metrics.uploads);
                self.redis
                    .query::<()>(
                        redis::cmd("SET")
                            .arg(&mark)
                            .arg(1)
                            .arg("EX")
                            .arg(self.config.entry_ttl.as_secs().max(1))
                            .clone(),
                    )
                    .await?;
            }
        }
        let record = FleetEntry {
            secondary_key: local.secondary_key.clone(),
            meta: local.meta.clone(),
            body: local.body.as_ref().map(|b| (b.sha256.clone(), b.len)),
            stored_at_ms: crawlcache_policy::cache::to_millis(SystemTime::now()),
        };
        let key = keys::entry(primary);
        let variants: i64 = self.redis.query(redis::cmd("HLEN").arg(&key).clone()).await?;
        if variants as usize >= MAX_VARIANTS {
            self.redis.query::<i64>(redis::cmd("DEL").arg(&key).clone()).await?;
        }
        self.redis
            .query::<i64>(
                redis::cmd("HSET")
                    .arg(&key)
                    .arg(&record.secondary_key)
                    .arg(record.encode())
                    .clone(),
            )
            .await?;
        self.redis
            .query::<i64>(
                redis::cmd("EXPIRE").arg(&key).arg(self.config.entry_ttl.as_secs().max(1)).clone(),
            )
            .await?;
        FleetMetrics::inc(&self.metrics.published);
        Ok(())
    }

    /// Takes the cross-node fetch lock of `primary`: `Some(token)` when this
    /// node now fetches for the fleet.
    async fn try_lead(&self, primary: &str) -> Result<Option<String>, FleetError> {
        let token = self.lock_token();
        let ms = self.lock_ttl.as_millis().max(1) as u64;
        let won: Option<String> = self
            .redis
            .query(
                redis::cmd("SET")
                    .arg(keys::fetch_lock(primary))
                    .arg(&token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms)
                    .clone(),
            )
            .await?;
        Ok(won.map(|_| token))
    }

    /// Releases the cross-node fetch lock of `primary` if this node holds it.
    pub async fn release(&self, primary: &str) {
        let token = held(self).remove(primary);
        if let Some(t) = token {
            let key = keys::fetch_lock(primary);
            let _ = self
                .redis
                .script::<i64>(super::robots::unlock_script(), &[key.as_bytes()], &[t.as_bytes()])
                .await;
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

/// The request a local miss asks the fleet tier about: all the tier reads
/// of it.
pub struct FleetRequest<'a> {
    /// Its primary key (the normalised URL).
    pub primary: &'a str,
    /// Its header fields: the secondary key of a variant is matched
    /// against them (RFC 9111 section 4.1).
    pub headers: &'a http::HeaderMap,
    /// How a stored response could answer it now: the proxy's reuse
    /// decision (RFC 9111 section 4.2, with the per-URL rules).
    pub decide: &'a (dyn Fn(&StoredResponse) -> Reuse + Send + Sync),
}

impl FleetRequest<'_> {
    /// Whether the fleet variant `stored` is worth copying: it may be
    /// served now (fresh, or stale where allowed), or it must be validated
    /// and has validators (a 304 then saves the body transfer).
    fn usable(&self, stored: &StoredResponse) -> bool {
        match (self.decide)(stored) {
            Reuse::Serve | Reuse::ServeStaleAndRevalidate => true,
            Reuse::Revalidate => !crawlcache_policy::cache::conditional_headers(stored).is_empty(),
        }
    }
}

/// The variant of `req`'s URL in the fleet tier that `req` selects, if
/// usable.
async fn find(fleet: &Fleet, req: &FleetRequest<'_>) -> Result<Option<FleetEntry>, FleetError> {
    let variants = fleet.variants(req.primary).await?;
    let matching = |(entry, stored): &(FleetEntry, StoredResponse)| {
        crawlcache_policy::cache::variant::matches(
            &entry.secondary_key,
            &stored.header_map(),
            req.headers,
        )
    };
    let best = crawlcache_policy::cache::variant::select(variants, matching, |(_, stored)| stored);
    Ok(best.filter(|(_, s)| req.usable(s)).map(|(e, _)| e))
}

/// Looks `req` up in the fleet tier and copies what it finds; true when the
/// local store now has it.
async fn look_and_fill(fleet: &Fleet, req: &FleetRequest<'_>) -> bool {
    match find(fleet, req).await {
        Ok(Some(entry)) => matches!(fleet.fill(req.primary, &entry).await, Ok(true)),
        _ => false,
    }
}

/// The fleet side of a local miss of a GET, before the origin (called at
/// most once per request by the forward stage with the request's local
/// collapse `lead`): the fleet tier, then the cross-node fetch lock (see
/// the module docs). Without a bucket it goes straight to the origin.
pub async fn before_origin(
    fleet: &Arc<Fleet>,
    req: &FleetRequest<'_>,
    lead: Option<Lead>,
) -> BeforeOrigin {
    if fleet.bucket.is_none() {
        return BeforeOrigin::Fetch(lead);
    }
    let primary = req.primary.to_string();
    let filled = |lead: Option<Lead>| {
        FleetMetrics::inc(&fleet.metrics.tier_hits);
        if let Some(l) = lead {
            l.finish(Outcome::Stored);
        }
        BeforeOrigin::Filled
    };
    let Some(lead) = lead else {
        // Not a collapse leader: one fill per URL at a time on this node.
        return match fleet.tier.fills.join(&primary) {
            Role::Leader(fill) => {
                if look_and_fill(fleet, req).await {
                    fill.finish(Outcome::Stored);
                    filled(None)
                } else {
                    FleetMetrics::inc(&fleet.metrics.tier_misses);
                    BeforeOrigin::Fetch(None)
                }
            }
            Role::Follower(rx) => {
                if collapse::wait(rx).await == Outcome::Stored {
                    filled(None)
                } else {
                    BeforeOrigin::Fetch(None)
                }
            }
        };
    };
    if look_and_fill(fleet, req).await {
        return filled(Some(lead));
    }
    // Nothing usable: one node fetches from the origin for the fleet.
    let deadline = Instant::now() + fleet.wait_bound;
    let mut waited = false;
    loop {
        match fleet.try_lead(&primary).await {
            Err(_) => break,
            Ok(Some(token)) => {
                held(fleet).insert(primary.clone(), token);
                FleetMetrics::inc(&fleet.metrics.tier_misses);
                return BeforeOrigin::Fetch(Some(release_unless_stored(
                    fleet.clone(),
                    primary,
                    lead,
                )));
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
                tracing::info!(
                    "fleet: no entry for {primary} from the fleet within {} s; fetching it here",
                    fleet.wait_bound.as_secs()
                );
                FleetMetrics::inc(&fleet.metrics.tier_misses);
                return BeforeOrigin::Fetch(Some(lead));
            }
            tokio::time::sleep(POLL).await;
            match find(fleet, req).await {
                Err(_) => return BeforeOrigin::Fetch(Some(lead)),
                Ok(Some(entry)) => {
                    if matches!(fleet.fill(&primary, &entry).await, Ok(true)) {
                        return filled(Some(lead));
                    }
                    return BeforeOrigin::Fetch(Some(lead));
                }
                Ok(None) => {}
            }
            match fleet
                .redis
                .query::<bool>(redis::cmd("EXISTS").arg(keys::fetch_lock(&primary)).clone())
                .await
            {
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
    let key = primary.clone();
    collapse::relay(&key, move |outcome| async move {
        lead.finish(outcome);
        if outcome != Outcome::Stored {
            fleet.release(&primary).await;
        }
    })
}
