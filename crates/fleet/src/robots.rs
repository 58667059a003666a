//! robots.txt across the fleet: the [`SharedSnapshots`] the registry asks
//! instead of fetching (see `crawlcache_robots::registry`).
//!
//! [`FleetRobots::obtain`], for one origin:
//! 1. Read the shared snapshot (`robots:snap:{ORIGIN}:ID`). If it can be
//!    used as is (see [`adoptable`]), take it: no fetch.
//! 2. Otherwise try to become the fleet's refresher: `SET
//!    robots:refresh:{ORIGIN}:ID TOKEN NX EX ttl`, the TTL twice the longest
//!    an origin fetch may take. The winner reads the shared snapshot once
//!    more (another node may have finished meanwhile), else fetches
//!    (conditional on the newer of its own and the shared validators),
//!    writes the snapshot, and releases the lock (only its own token).
//! 3. A loser polls every [`POLL`] for the winner's snapshot, for at most
//!    the longest an origin fetch may take; if the lock goes without a
//!    snapshot it tries to win it; after the bound it fetches itself.
//!    For a refresh, nobody waits for this: the registry serves the stale
//!    snapshot meanwhile; at first sight the requests wait (bounded).
//!
//! The windows are computed from the snapshot's own fetched-at and
//! validated-at times, stamped by the node that fetched, so the fleet
//! agrees on fresh / stale / expired (to within the nodes' clock skew).
//! Whenever Redis cannot be used, the node fetches alone, as a single node
//! does; the registry keeps every snapshot it uses as its local copy.
//!
//! Record in Redis: `CCR1`, a u32 (big-endian) length, the snapshot as JSON
//! without its body, then the body (the rules text) raw. Checked on read:
//! the origin, the body length (at most 500 KiB), its SHA-256, and that only
//! a `fetched` snapshot has a body.

use super::entry::InvalidRecord;
use super::keys;
use super::metrics::FleetMetrics;
use super::redis::FleetError;
use super::Fleet;
use crawlcache_robots::registry::{FetchOnce, SharedSnapshots};
use crawlcache_robots::snapshot::{
    sha256_hex, Origin, RobotsStatus, Snapshot, Windows, MAX_ROBOTS_BYTES,
};
use redis::Script;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How often a node waiting for another node's robots.txt fetch looks.
pub const POLL: Duration = Duration::from_millis(100);

const MAGIC: &[u8; 4] = b"CCR1";

/// Deletes `KEYS[1]` only when it holds `ARGV[1]` (a lock released by its
/// holder only).
pub const UNLOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

pub(crate) fn unlock_script() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script::new(UNLOCK))
}

/// Encodes a snapshot for Redis (see the module docs).
pub fn encode(snapshot: &Snapshot) -> Vec<u8> {
    let mut head = snapshot.clone();
    head.body = Vec::new();
    let json = serde_json::to_vec(&head).unwrap_or_default();
    let mut out = Vec::with_capacity(8 + json.len() + snapshot.body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&snapshot.body);
    out
}

/// Decodes and checks a snapshot read from Redis for `origin`. Errors:
/// [`InvalidRecord`], saying what is wrong.
pub fn decode(origin: &Origin, bytes: &[u8]) -> Result<Snapshot, InvalidRecord> {
    let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or(InvalidRecord::Magic("robots"))?;
    if rest.len() < 4 {
        return Err(InvalidRecord::CutShort("head length"));
    }
    let (len, rest) = rest.split_at(4);
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > rest.len() || len > 64 * 1024 {
        return Err(InvalidRecord::HeadLength(len));
    }
    let (json, body) = rest.split_at(len);
    let mut s: Snapshot = serde_json::from_slice(json)
        .map_err(|e| InvalidRecord::Undecodable { what: "snapshot head", reason: e.to_string() })?;
    if &s.origin != origin {
        return Err(InvalidRecord::Elsewhere {
            what: "snapshot",
            found: s.origin.to_string(),
            wanted: origin.to_string(),
        });
    }
    if body.len() > MAX_ROBOTS_BYTES {
        return Err(InvalidRecord::TooLarge {
            what: "body",
            len: body.len() as u64,
            max: MAX_ROBOTS_BYTES as u64,
        });
    }
    if s.status != RobotsStatus::Fetched && !body.is_empty() {
        return Err(InvalidRecord::UnexpectedBody(s.status.as_str()));
    }
    if sha256_hex(body) != s.sha256 {
        return Err(InvalidRecord::Hash);
    }
    s.body = body.to_vec();
    Ok(s)
}

/// Whether the shared snapshot `shared` may be used instead of fetching, for
/// a node whose own snapshot is `previous`, at `now`, in a process started
/// at `started`: it is not due for a refresh (fresh, or in its back-off
/// after a failed attempt), and no older than what the node has; at first
/// sight also a stale one that is not expired (the next request starts its
/// refresh). A forced refresh takes only a snapshot attempted at or after
/// `now`. A snapshot whose last attempt failed before `started` is never
/// taken: this node retries it (once; the fleet then shares its attempt),
/// since what failed (a certificate, DNS, the origin) may have been fixed
/// before the restart.
pub fn adoptable(
    shared: &Snapshot,
    previous: Option<&Snapshot>,
    windows: &Windows,
    now: SystemTime,
    forced: bool,
    started: SystemTime,
) -> bool {
    if forced {
        return shared.last_attempt >= now;
    }
    if shared.failures > 0 && shared.last_attempt < started {
        return false;
    }
    let newer = previous.is_none_or(|p| shared.last_attempt >= p.last_attempt);
    if !shared.refresh_due(windows, now) {
        return newer;
    }
    previous.is_none()
        && shared.status.is_good()
        && shared.state(windows, now) != crawlcache_robots::snapshot::State::Expired
}

/// The fleet's [`SharedSnapshots`].
pub struct FleetRobots {
    /// The fleet.
    pub fleet: Arc<Fleet>,
    /// When this process started: failed attempts from before it are
    /// retried, not taken ([`adoptable`]).
    pub started: SystemTime,
}

impl FleetRobots {
    async fn load(&self, origin: &Origin, key: &str) -> Result<Option<Snapshot>, FleetError> {
        let raw: Option<Vec<u8>> =
            self.fleet.redis.query(redis::cmd("GET").arg(key).clone()).await?;
        match raw {
            None => Ok(None),
            Some(b) => match decode(origin, &b) {
                Ok(s) => Ok(Some(s)),
                Err(e) => {
                    FleetMetrics::inc(&self.fleet.metrics.invalid_records);
                    tracing::warn!(
                        "fleet: ignoring the robots.txt snapshot of {origin} in Redis: {e}"
                    );
                    Ok(None)
                }
            },
        }
    }

    async fn store(&self, key: &str, snapshot: &Snapshot, windows: &Windows) {
        let ttl = windows.hard_max.as_secs().saturating_add(86_400).max(60);
        let cmd = redis::cmd("SET").arg(key).arg(encode(snapshot)).arg("EX").arg(ttl).clone();
        if let Err(e) = self.fleet.redis.query::<()>(cmd).await {
            tracing::debug!("fleet: robots.txt snapshot of {} not shared: {e}", snapshot.origin);
        }
    }

    async fn unlock(&self, key: &str, token: &str) {
        let _ = self
            .fleet
            .redis
            .script::<i64>(unlock_script(), &[key.as_bytes()], &[token.as_bytes()])
            .await;
    }

    async fn run<'a>(
        &'a self,
        origin: &'a Origin,
        previous: Option<Snapshot>,
        windows: Windows,
        now: SystemTime,
        forced: bool,
        fetch: FetchOnce<'a>,
    ) -> Snapshot {
        let fleet = &self.fleet;
        let okey = origin.key();
        let snap_key = keys::robots_snapshot(&okey, &fleet.robots_identity);
        let lock_key = keys::robots_refresh(&okey, &fleet.robots_identity);
        let alone = |fetch: FetchOnce<'a>, prev: Option<Snapshot>| {
            FleetMetrics::inc(&fleet.metrics.robots_fetched_alone);
            fetch(prev)
        };
        let shared = match self.load(origin, &snap_key).await {
            Ok(s) => s,
            Err(_) => return alone(fetch, previous).await,
        };
        if let Some(s) =
            shared.filter(|s| adoptable(s, previous.as_ref(), &windows, now, forced, self.started))
        {
            FleetMetrics::inc(&fleet.metrics.robots_shared);
            return s;
        }
        let deadline = Instant::now() + fleet.wait_bound;
        loop {
            let token = fleet.lock_token();
            let won: Result<Option<String>, _> = fleet
                .redis
                .query(
                    redis::cmd("SET")
                        .arg(&lock_key)
                        .arg(&token)
                        .arg("NX")
                        .arg("EX")
                        .arg(fleet.lock_ttl.as_secs().max(1))
                        .clone(),
                )
                .await;
            match won {
                Err(_) => return alone(fetch, previous).await,
                Ok(Some(_)) => {
                    // Another node may have finished just before we won.
                    let shared = self.load(origin, &snap_key).await.ok().flatten();
                    if let Some(s) = shared.as_ref().filter(|s| {
                        adoptable(s, previous.as_ref(), &windows, now, forced, self.started)
                    }) {
                        self.unlock(&lock_key, &token).await;
                        FleetMetrics::inc(&fleet.metrics.robots_shared);
                        return s.clone();
                    }
                    // Validators from the newer of the two snapshots.
                    let base = match (previous, shared) {
                        (Some(p), Some(s))
                            if s.status.is_good() && s.last_attempt > p.last_attempt =>
                        {
                            Some(s)
                        }
                        (None, Some(s)) if s.status.is_good() => Some(s),
                        (p, _) => p,
                    };
                    FleetMetrics::inc(&fleet.metrics.robots_fetched_for_fleet);
                    let snapshot = fetch(base).await;
                    self.store(&snap_key, &snapshot, &windows).await;
                    self.unlock(&lock_key, &token).await;
                    return snapshot;
                }
                Ok(None) => {}
            }
            // Another node is fetching: wait for its snapshot.
            loop {
                if Instant::now() >= deadline {
                    tracing::info!("fleet: no robots.txt of {origin} from the fleet within {} s; fetching it here", fleet.wait_bound.as_secs());
                    return alone(fetch, previous).await;
                }
                tokio::time::sleep(POLL).await;
                match self.load(origin, &snap_key).await {
                    Err(_) => return alone(fetch, previous).await,
                    Ok(Some(s))
                        if adoptable(
                            &s,
                            previous.as_ref(),
                            &windows,
                            now,
                            forced,
                            self.started,
                        ) =>
                    {
                        FleetMetrics::inc(&fleet.metrics.robots_shared);
                        return s;
                    }
                    Ok(_) => {}
                }
                match fleet.redis.query::<bool>(redis::cmd("EXISTS").arg(&lock_key).clone()).await {
                    Err(_) => return alone(fetch, previous).await,
                    Ok(false) => break,
                    Ok(true) => {}
                }
            }
        }
    }
}

impl SharedSnapshots for FleetRobots {
    fn obtain<'a>(
        &'a self,
        origin: &'a Origin,
        previous: Option<Snapshot>,
        windows: Windows,
        now: SystemTime,
        forced: bool,
        fetch: FetchOnce<'a>,
    ) -> Pin<Box<dyn Future<Output = Snapshot> + Send + 'a>> {
        Box::pin(self.run(origin, previous, windows, now, forced, fetch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crawlcache_robots::snapshot::FetchOutcome;

    /// A snapshot of a fetched robots.txt `body` at `at`.
    fn snap(body: &[u8], at: SystemTime) -> Snapshot {
        let s = Snapshot::new(
            Origin::new("http", "example.org", 80),
            RobotsStatus::Fetched,
            body.to_vec(),
            FetchOutcome::Ok { status: 200 },
            at,
        );
        Snapshot { etag: Some("\"v1\"".into()), fetched_as: Some("Bot/1.0".into()), ..s }
    }

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    #[test]
    fn snapshots_round_trip_and_bad_records_are_refused() {
        let s = snap(b"User-agent: *\nDisallow: /x\n", t(0));
        let o = s.origin.clone();
        assert_eq!(decode(&o, &encode(&s)).unwrap(), s);
        let enc = encode(&s);
        for n in 0..enc.len() {
            assert!(decode(&o, &enc[..n]).is_err(), "prefix of {n} bytes");
        }
        assert!(decode(&Origin::new("http", "other.test", 80), &enc)
            .unwrap_err()
            .to_string()
            .contains("not http://other.test"));
        let mut tampered = enc.clone();
        let last = tampered.len() - 2;
        tampered[last] = b'y';
        assert!(matches!(decode(&o, &tampered), Err(InvalidRecord::Hash)));
        let mut absent = snap(b"", t(0));
        absent.status = RobotsStatus::Absent;
        let mut with_body = encode(&absent);
        with_body.push(b'x');
        assert!(decode(&o, &with_body).is_err());
    }

    #[test]
    fn what_a_node_takes_from_the_fleet() {
        let w = Windows {
            fresh: Duration::from_secs(60),
            stale_usable: Duration::from_secs(120),
            hard_max: Duration::from_secs(300),
        };
        let old = snap(b"a", t(0));
        let fresh = snap(b"b", t(100));
        assert!(
            adoptable(&fresh, Some(&old), &w, t(110), false, t(0)),
            "a fresher snapshot than ours"
        );
        assert!(adoptable(&fresh, None, &w, t(110), false, t(0)), "first sight");
        assert!(
            !adoptable(&old, Some(&old), &w, t(100), false, t(0)),
            "due for a refresh: someone must fetch"
        );
        assert!(
            adoptable(&old, None, &w, t(100), false, t(0)),
            "first sight takes a stale, unexpired snapshot"
        );
        assert!(!adoptable(&old, None, &w, t(400), false, t(0)), "expired");
        assert!(!adoptable(&old, Some(&fresh), &w, t(50), false, t(0)), "older than ours");
        let mut failed = old.clone();
        failed.last_attempt = t(100);
        failed.next_retry = Some(t(160));
        assert!(
            adoptable(&failed, Some(&old), &w, t(110), false, t(0)),
            "the fleet shares a back-off"
        );
        assert!(
            !adoptable(&fresh, Some(&old), &w, t(110), true, t(0)),
            "a forced refresh wants an attempt after it was asked"
        );
        assert!(adoptable(&fresh, Some(&old), &w, t(100), true, t(0)));
    }

    #[test]
    fn a_failure_from_before_this_process_started_is_retried_not_taken() {
        let w = Windows {
            fresh: Duration::from_secs(60),
            stale_usable: Duration::from_secs(120),
            hard_max: Duration::from_secs(300),
        };
        let o = Origin::new("https", "example.org", 443);
        let outcome = FetchOutcome::Tls {
            detail: "the origin's certificate is not trusted: UnknownIssuer".into(),
        };
        let mut failed = Snapshot::new(o, RobotsStatus::Unavailable, Vec::new(), outcome, t(100));
        failed.next_retry = Some(t(3700));
        // Started after the failure (a restart, perhaps with the CA now in
        // `upstream.extra_ca_file`): not taken, at first sight or not.
        assert!(
            !adoptable(&failed, None, &w, t(200), false, t(150)),
            "first sight after a restart"
        );
        assert!(
            !adoptable(&failed, Some(&failed), &w, t(200), false, t(150)),
            "our own copy of it after a restart"
        );
        // A failure of this process's time is the fleet's shared back-off.
        assert!(adoptable(&failed, None, &w, t(200), false, t(50)));
        // A good snapshot kept through failures before the restart: retried too.
        let mut kept = snap(b"a", t(0));
        (kept.failures, kept.last_attempt, kept.next_retry) = (2, t(100), Some(t(400)));
        assert!(!adoptable(&kept, None, &w, t(200), false, t(150)));
        assert!(adoptable(&kept, None, &w, t(200), false, t(50)));
    }
}
