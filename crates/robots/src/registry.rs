//! The per-origin robots.txt registry: one [`Rules`] (snapshot and parsed
//! rule set) per origin, persisted in a `sled::Tree`, refreshed so that a
//! crawler never waits twice (RFC 9309 §2.4, SPEC §4).
//!
//! - The first sight of an origin waits for a fetch; concurrent first-sight
//!   callers share that one fetch.
//! - Afterwards [`RobotsRegistry::rules_for`] always answers at once from
//!   memory. When the snapshot is due for a refresh (no longer fresh, or
//!   `unavailable`, and past its back-off), the call starts one background
//!   conditional refresh; further callers see that one in flight and start
//!   none (collapsed per origin).
//! - A failed fetch recorded before this process started (a snapshot read
//!   from the tree whose last attempt failed) is retried at the first use
//!   of its origin, whatever its back-off: the cause (a certificate now
//!   trusted through `upstream.extra_ca_file`, DNS, the origin) may have
//!   been fixed before the restart, and there is no reload. The first use
//!   of an `unavailable` one waits for that retry.
//! - [`RobotsRegistry::refresh`] forces a conditional refresh now (joining
//!   one already in flight) and waits for it.
//! - Every fetch attempt counts as a request to the origin: the
//!   [`FetchHook`] is called before it (for pacing) and
//!   [`RobotsRegistry::fetch_count`] counts it.
//!
//! Rule sets are parsed once per new body and shared; a 304 or a kept
//! snapshot reuses the parsed set.
//!
//! One snapshot per origin is shared by every client. Each fetch is sent
//! under the identity of the request that needed it
//! ([`RobotsRegistry::rules_for_client`], [`crate::identity`]) and that
//! identity is recorded in the snapshot.
//!
//! Times: a fetch is stamped with the `now` of the call that started it
//! (the request time), so snapshot ages follow the caller's clock.
//!
//! Fleet mode: with [`RobotsRegistry::set_shared`], every fetch goes through
//! a [`SharedSnapshots`] (`crawlcache::fleet::robots`), which either fetches for
//! the whole fleet or hands over the snapshot another node fetched. What it
//! gives is kept and persisted here like a fetch, so the node carries on
//! alone from its local copies when the shared place is gone.

use crate::fetch::{apply_fetch, fetch_robots, RobotsFetch};
use crate::identity::fetch_identity;
pub use crate::origin_rules::Rules;
use crate::settings::RobotsConfig;
use crate::snapshot::{Disposition, FetchOutcome, Origin, RobotsStatus, Snapshot, State, Windows};
use crawlcache_base::locks::lock;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// Called before every robots.txt fetch attempt with the origin whose rules
/// are fetched, so that the attempt counts as a request to that origin for
/// pacing. Must not block.
pub type FetchHook = Arc<dyn Fn(&Origin) + Send + Sync>;

/// The fetch a [`SharedSnapshots`] may run: fetches the origin's robots.txt
/// now, with the given previous snapshot (for validators, and to keep on a
/// failure), and gives the snapshot to use.
pub type FetchOnce<'a> = Box<
    dyn FnOnce(Option<Snapshot>) -> Pin<Box<dyn Future<Output = Snapshot> + Send + 'a>> + Send + 'a,
>;

/// Where the nodes of a fleet share robots.txt snapshots (fleet mode,
/// implemented by `crawlcache::fleet`). The registry calls [`SharedSnapshots::obtain`]
/// wherever it would fetch; the implementation decides whether this node
/// fetches (calling `fetch`, at most once) or takes the snapshot another
/// node fetched. Either way the registry keeps the result as its local
/// copy, so the node goes on alone if the shared place goes away.
pub trait SharedSnapshots: Send + Sync + 'static {
    /// The snapshot to use for `origin`, whose local snapshot is `previous`,
    /// at `now` under `windows`: fetched with `fetch` or shared by another
    /// node. `forced`: a refresh asked for by an operator
    /// ([`RobotsRegistry::refresh`]), which takes only a snapshot attempted
    /// at or after `now`. Never fails: when the shared place cannot be
    /// used, it fetches.
    fn obtain<'a>(
        &'a self,
        origin: &'a Origin,
        previous: Option<Snapshot>,
        windows: Windows,
        now: SystemTime,
        forced: bool,
        fetch: FetchOnce<'a>,
    ) -> Pin<Box<dyn Future<Output = Snapshot> + Send + 'a>>;
}

type Inflight = watch::Receiver<Option<Arc<Rules>>>;

#[derive(Default)]
struct Slot {
    current: Option<Arc<Rules>>,
    inflight: Option<Inflight>,
    /// `current` was loaded from the tree and no attempt of this registry
    /// has replaced it yet: it comes from before this process started.
    from_before: bool,
}

struct Inner {
    tree: sled::Tree,
    fetcher: Arc<dyn RobotsFetch>,
    config: RobotsConfig,
    slots: Mutex<HashMap<String, Slot>>,
    hook: Mutex<Option<FetchHook>>,
    shared: Mutex<Option<Arc<dyn SharedSnapshots>>>,
    fetches: AtomicU64,
    outcomes: Mutex<HashMap<&'static str, u64>>,
    /// This registry's number in the process and how many times a fetch
    /// replaced rules in memory ([`RobotsRegistry::version`]).
    id: u64,
    replaced: AtomicU64,
}

/// The per-origin registry (see the module docs). Cheap to clone; all
/// clones share one state.
#[derive(Clone)]
pub struct RobotsRegistry {
    inner: Arc<Inner>,
}

/// Why a stored snapshot could not be read or the snapshots flushed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The tree could not be read.
    #[error("cannot read the robots.txt snapshot of {origin}: {source}")]
    Read {
        /// The origin whose snapshot was asked for.
        origin: Origin,
        /// sled's error.
        source: sled::Error,
    },
    /// The stored bytes are not a snapshot this version reads.
    #[error("the stored robots.txt snapshot of {origin} cannot be decoded: {source}")]
    Undecodable {
        /// The origin whose snapshot was asked for.
        origin: Origin,
        /// What the JSON decoder said.
        source: serde_json::Error,
    },
    /// The tree could not be written to disk.
    #[error("cannot flush robots.txt snapshots: {0}")]
    Flush(sled::Error),
}

/// Reads one origin's snapshot from `tree` (the store's `robots` tree),
/// without a registry: for `crawlcache robots show` while the proxy is
/// stopped. `Ok(None)` when there is none. Errors:
/// [`SnapshotError::Read`] or [`SnapshotError::Undecodable`], naming the
/// origin.
pub fn load_snapshot(
    tree: &sled::Tree,
    origin: &Origin,
) -> Result<Option<Snapshot>, SnapshotError> {
    match tree.get(origin.key().as_bytes()) {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| SnapshotError::Undecodable { origin: origin.clone(), source }),
        Err(source) => Err(SnapshotError::Read { origin: origin.clone(), source }),
    }
}

/// Every snapshot in `tree`, in key order; undecodable records are skipped.
pub fn list_snapshots(tree: &sled::Tree) -> Vec<Snapshot> {
    tree.iter()
        .filter_map(|r| r.ok())
        .filter_map(|(_, v)| serde_json::from_slice(&v).ok())
        .collect()
}

/// A human-readable description of `snapshot` at `now` for `crawlcache
/// robots show` and the admin endpoint: state, age, status, SHA-256,
/// identity it was fetched as (and a warning when it got 401/403),
/// content coding, validators, redirects, last outcome (and, when the
/// verdicts are not the file's rules, why: [`Snapshot::verdict_reason`]),
/// retry schedule, then the body (decoded text; bytes that are not UTF-8
/// as `%XX`, [`crate::octets_text`]).
pub fn describe(snapshot: &Snapshot, windows: &Windows, now: SystemTime) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let state = if snapshot.status == RobotsStatus::Unavailable {
        "unavailable"
    } else {
        snapshot.state(windows, now).as_str()
    };
    let _ = writeln!(s, "origin:        {}", snapshot.origin);
    let _ = writeln!(s, "robots url:    {}", snapshot.origin.robots_url());
    let _ = writeln!(s, "state:         {state}");
    let _ = writeln!(s, "age:           {}", crawlcache_base::units::format_age(snapshot.age(now)));
    let _ = writeln!(s, "status:        {}", snapshot.status.as_str());
    if let Some(code) = snapshot.http_status {
        let _ = writeln!(s, "http status:   {code}");
    }
    if let Some(w) = snapshot.identity_warning() {
        let _ = writeln!(s, "warning:       {w}");
    }
    let _ = writeln!(s, "fetched as:    {}", snapshot.fetched_as.as_deref().unwrap_or("-"));
    let _ = writeln!(s, "sha256:        {}", snapshot.sha256);
    if let Some(c) = &snapshot.content_encoding {
        let _ =
            writeln!(s, "coding:        {c} (decoded; body and sha256 are of the decoded text)");
    }
    let _ = writeln!(s, "etag:          {}", snapshot.etag.as_deref().unwrap_or("-"));
    let _ = writeln!(s, "last-modified: {}", snapshot.last_modified.as_deref().unwrap_or("-"));
    let _ = writeln!(s, "fetched at:    {}", httpdate::fmt_http_date(snapshot.fetched_at));
    let _ = writeln!(s, "validated at:  {}", httpdate::fmt_http_date(snapshot.validated_at));
    let _ = writeln!(
        s,
        "last attempt:  {} ({})",
        httpdate::fmt_http_date(snapshot.last_attempt),
        snapshot.last_outcome
    );
    if let Some(why) = snapshot.verdict_reason() {
        let _ = writeln!(s, "why:           {why}");
    }
    let _ = writeln!(s, "failures:      {}", snapshot.failures);
    if let Some(r) = snapshot.retry_after {
        let _ = writeln!(s, "retry-after:   {}", httpdate::fmt_http_date(r));
    }
    if let Some(r) = snapshot.next_retry {
        let _ = writeln!(s, "next retry:    {}", httpdate::fmt_http_date(r));
    }
    let r = &snapshot.redirects;
    let _ = writeln!(s, "redirects:     {}", r.hops.len());
    for h in &r.hops {
        let _ = writeln!(s, "  -> {h}");
    }
    if let Some(f) = &r.final_url {
        let _ = writeln!(s, "final url:     {f}");
    }
    if let Some(d) = &r.refused {
        let _ = writeln!(
            s,
            "refused:       {d} ({})",
            r.refused_reason.as_deref().unwrap_or("outside scope")
        );
    }
    let _ = writeln!(
        s,
        "body:          {} bytes{}",
        snapshot.body.len(),
        if snapshot.truncated { " (truncated)" } else { "" }
    );
    if !snapshot.body.is_empty() {
        s.push('\n');
        s.push_str(&crate::octets_text(&snapshot.body));
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}

impl RobotsRegistry {
    /// A registry persisting in `tree` (the store passes
    /// `db.open_tree("robots")`), fetching through `fetcher`, with the
    /// windows, redirect policy, size limit and back-off of `config`.
    /// Snapshots already in `tree` are loaded lazily, on first use of their
    /// origin.
    pub fn new(
        tree: sled::Tree,
        fetcher: Arc<dyn RobotsFetch>,
        config: RobotsConfig,
    ) -> RobotsRegistry {
        RobotsRegistry {
            inner: Arc::new(Inner {
                tree,
                fetcher,
                config,
                slots: Mutex::new(HashMap::new()),
                hook: Mutex::new(None),
                shared: Mutex::new(None),
                fetches: AtomicU64::new(0),
                outcomes: Mutex::new(HashMap::new()),
                id: {
                    static REGISTRIES: AtomicU64 = AtomicU64::new(0);
                    REGISTRIES.fetch_add(1, Ordering::Relaxed)
                },
                replaced: AtomicU64::new(0),
            }),
        }
    }

    /// Installs the hook called before every fetch attempt (pacing).
    pub fn set_fetch_hook(&self, hook: FetchHook) {
        *lock(&self.inner.hook) = Some(hook);
    }

    /// Shares snapshots with a fleet through `shared` (fleet mode): every
    /// fetch goes through [`SharedSnapshots::obtain`].
    pub fn set_shared(&self, shared: Arc<dyn SharedSnapshots>) {
        *lock(&self.inner.shared) = Some(shared);
    }

    /// The configuration in use.
    pub fn config(&self) -> &RobotsConfig {
        &self.inner.config
    }

    /// The windows of `origin`'s host.
    pub fn windows(&self, origin: &Origin) -> Windows {
        self.inner.config.windows_for(&origin.host)
    }

    /// The rules in force for `origin` at `now`, and how they were obtained.
    ///
    /// Waits only at the first sight of the origin (no snapshot in memory or
    /// in the tree), at the first use of an `unavailable` snapshot stored
    /// before this registry was made (a restart: the failure is retried then,
    /// whatever its back-off; a good snapshot with failures behind it is
    /// retried in the background), or when its snapshot is past the hard
    /// maximum and a refresh may be tried: then it fetches (or joins the fetch already
    /// running) and returns [`Disposition::Fetched`] (or `Expired` if the
    /// refresh failed and the old snapshot is all there is). Otherwise it returns at once
    /// with the disposition of the snapshot's state, after starting one
    /// background refresh when due ([`Snapshot::refresh_due`]) and none is
    /// in flight. Never fails: a fetch that cannot be made gives an
    /// `unavailable` snapshot.
    ///
    /// Fetches go out under the identity [`crate::identity`] derives without
    /// a client; see [`RobotsRegistry::rules_for_client`].
    pub async fn rules_for(&self, origin: &Origin, now: SystemTime) -> (Arc<Rules>, Disposition) {
        self.rules_for_client(origin, now, None).await
    }

    /// [`RobotsRegistry::rules_for`] for a request whose `User-Agent` is
    /// `client_user_agent`: a fetch this call starts is sent under the
    /// identity derived from it ([`fetch_identity`]).
    pub async fn rules_for_client(
        &self,
        origin: &Origin,
        now: SystemTime,
        client_user_agent: Option<&str>,
    ) -> (Arc<Rules>, Disposition) {
        let windows = self.windows(origin);
        let (rx, expired) = {
            let mut slots = lock(&self.inner.slots);
            let slot = self.slot(&mut slots, origin);
            if let Some(cur) = slot.current.clone() {
                // A failure recorded before this process started is retried
                // at first use, whatever its back-off: its cause (a
                // certificate, DNS, the origin itself) may have been fixed
                // before the restart (there is no reload).
                let retry_now = slot.from_before && cur.snapshot.failures > 0;
                if slot.inflight.is_none() && (retry_now || cur.snapshot.refresh_due(&windows, now))
                {
                    let id = self.identity(Some(&cur), client_user_agent);
                    slot.inflight =
                        Some(self.spawn_fetch(origin.clone(), Some(cur.clone()), now, id, false));
                }
                // Rules unknown since before the restart: wait for that
                // retry, as at first sight (rules of the file, if any, are
                // kept in use while it runs).
                let wait_retry = retry_now && cur.snapshot.status == RobotsStatus::Unavailable;
                let state = cur.snapshot.state(&windows, now);
                if state != State::Expired && !wait_retry {
                    return (cur, Disposition::from_state(state));
                }
                // Expired rules cannot be used at all: as at first sight,
                // wait for the refresh (when back-off allows one) instead of
                // refusing a request the fresh rules may well allow.
                match &slot.inflight {
                    Some(rx) => (rx.clone(), (!wait_retry).then_some(cur)),
                    None => return (cur, Disposition::Expired),
                }
            } else {
                match &slot.inflight {
                    Some(rx) => (rx.clone(), None),
                    None => {
                        let rx = self.spawn_fetch(
                            origin.clone(),
                            None,
                            now,
                            self.identity(None, client_user_agent),
                            false,
                        );
                        slot.inflight = Some(rx.clone());
                        (rx, None)
                    }
                }
            }
        };
        let rules = self.wait(origin, rx, now).await;
        if let Some(old) = expired {
            // The refresh failed: the host stays "not crawlable: rules too
            // old" for this request, as the expired snapshot says.
            if rules.snapshot.status == RobotsStatus::Unavailable
                || rules.snapshot.state(&windows, now) == State::Expired
            {
                return (old, Disposition::Expired);
            }
        }
        (rules, Disposition::Fetched)
    }

    /// A value that moves whenever a fetch replaces an origin's rules in
    /// memory (and differs between registries of one process). Rules that
    /// [`RobotsRegistry::rules_for_client`] returned as fresh
    /// ([`Disposition::Cached`]) under one version are what it returns for
    /// that origin until the snapshot's fresh window ends, while the
    /// version is unchanged; read the version before the call.
    pub fn version(&self) -> (u64, u64) {
        (self.inner.id, self.inner.replaced.load(Ordering::Acquire))
    }

    /// Forces a conditional refresh of `origin` now, whatever the snapshot's
    /// age or back-off (for `crawlcache robots refresh` and the admin
    /// endpoint), and returns the resulting rules. Joins a fetch already in
    /// flight instead of starting a second one. Sent under the identity the
    /// snapshot was fetched as, unless configuration says otherwise
    /// ([`crate::identity`]).
    pub async fn refresh(&self, origin: &Origin, now: SystemTime) -> Arc<Rules> {
        let rx = {
            let mut slots = lock(&self.inner.slots);
            let slot = self.slot(&mut slots, origin);
            match &slot.inflight {
                Some(rx) => rx.clone(),
                None => {
                    let id = self.identity(slot.current.as_deref(), None);
                    let rx = self.spawn_fetch(origin.clone(), slot.current.clone(), now, id, true);
                    slot.inflight = Some(rx.clone());
                    rx
                }
            }
        };
        self.wait(origin, rx, now).await
    }

    /// The current rules of `origin` without fetching (memory, else the
    /// tree); `None` if it was never fetched.
    pub fn current(&self, origin: &Origin) -> Option<Arc<Rules>> {
        let mut slots = lock(&self.inner.slots);
        self.slot(&mut slots, origin).current.clone()
    }

    /// Every origin in memory with its snapshot's age at `now` (for the
    /// `robots_snapshot_age_seconds{origin}` gauge).
    pub fn ages(&self, now: SystemTime) -> Vec<(Origin, Duration)> {
        let slots = lock(&self.inner.slots);
        let mut v: Vec<_> = slots
            .values()
            .filter_map(|s| s.current.as_ref())
            .map(|r| (r.snapshot.origin.clone(), r.snapshot.age(now)))
            .collect();
        v.sort();
        v
    }

    /// How many fetch attempts were made (each counts as a request to its
    /// origin).
    pub fn fetch_count(&self) -> u64 {
        self.inner.fetches.load(Ordering::Relaxed)
    }

    /// Fetch attempts by outcome label ([`FetchOutcome::label`]), for
    /// `robots_fetch_total{outcome}`; sorted by label.
    pub fn fetch_outcomes(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<_> = lock(&self.inner.outcomes).iter().map(|(k, v)| (*k, *v)).collect();
        v.sort();
        v
    }

    /// Whether a fetch of `origin` is in flight (for tests and status pages).
    pub fn is_refreshing(&self, origin: &Origin) -> bool {
        lock(&self.inner.slots).get(&origin.key()).is_some_and(|s| s.inflight.is_some())
    }

    /// Flushes the tree to disk. Errors: [`SnapshotError::Flush`].
    pub fn flush(&self) -> Result<(), SnapshotError> {
        self.inner.tree.flush().map(|_| ()).map_err(SnapshotError::Flush)
    }

    /// The slot of `origin`, loading its snapshot from the tree the first
    /// time.
    fn slot<'a>(&self, slots: &'a mut HashMap<String, Slot>, origin: &Origin) -> &'a mut Slot {
        let slot = slots.entry(origin.key()).or_default();
        if slot.current.is_none() && slot.inflight.is_none() {
            match load_snapshot(&self.inner.tree, origin) {
                Ok(Some(s)) => {
                    slot.current = Some(Arc::new(Rules::new(s)));
                    slot.from_before = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("{e}; fetching it again"),
            }
        }
        slot
    }

    async fn wait(&self, origin: &Origin, mut rx: Inflight, now: SystemTime) -> Arc<Rules> {
        let got = match rx.wait_for(|v| v.is_some()).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        match got {
            Some(r) => r,
            None => {
                // The fetch task ended without an answer (it cannot, short of
                // a panic): the rules are unknown.
                let previous = self.current(origin);
                previous.unwrap_or_else(|| {
                    Arc::new(Rules::new(unavailable(origin, "robots.txt fetch task ended", now)))
                })
            }
        }
    }

    /// The `User-Agent` for a fetch needed by a client sending
    /// `client_user_agent`, given the rules in force (`previous`).
    fn identity(&self, previous: Option<&Rules>, client_user_agent: Option<&str>) -> String {
        let c = &self.inner.config;
        fetch_identity(
            &c.user_agent,
            &c.agent,
            client_user_agent,
            previous.and_then(|p| p.snapshot.fetched_as.as_deref()),
        )
    }

    fn spawn_fetch(
        &self,
        origin: Origin,
        previous: Option<Arc<Rules>>,
        now: SystemTime,
        identity: String,
        forced: bool,
    ) -> Inflight {
        let (tx, rx) = watch::channel(None);
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let mut guard = InflightGuard { inner: inner.clone(), key: origin.key(), done: false };
            let rules = inner.fetch(&origin, previous, now, &identity, forced).await;
            {
                let mut slots = lock(&inner.slots);
                let slot = slots.entry(origin.key()).or_default();
                slot.current = Some(rules.clone());
                slot.inflight = None;
                slot.from_before = false;
                inner.replaced.fetch_add(1, Ordering::AcqRel);
            }
            guard.done = true;
            drop(guard);
            let _ = tx.send(Some(rules));
        });
        rx
    }
}

/// Clears an origin's in-flight mark if its fetch task dies early, so later
/// calls can start another.
struct InflightGuard {
    inner: Arc<Inner>,
    key: String,
    done: bool,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(slot) = lock(&self.inner.slots).get_mut(&self.key) {
            slot.inflight = None;
        }
    }
}

fn unavailable(origin: &Origin, detail: &str, now: SystemTime) -> Snapshot {
    Snapshot::new(
        origin.clone(),
        RobotsStatus::Unavailable,
        Vec::new(),
        FetchOutcome::Other { detail: detail.to_string() },
        now,
    )
}

impl Inner {
    /// The rules after one attempt as `identity` (or, in fleet mode, the
    /// snapshot another node fetched): persisted, parsed.
    async fn fetch(
        &self,
        origin: &Origin,
        previous: Option<Arc<Rules>>,
        now: SystemTime,
        identity: &str,
        forced: bool,
    ) -> Arc<Rules> {
        let shared = lock(&self.shared).clone();
        let snapshot = match shared {
            None => {
                self.fetch_snapshot(
                    origin,
                    previous.as_ref().map(|p| p.snapshot.clone()),
                    now,
                    identity,
                )
                .await
            }
            Some(shared) => {
                let windows = self.config.windows_for(&origin.host);
                let fetch: FetchOnce<'_> = Box::new(move |prev| {
                    Box::pin(self.fetch_snapshot(origin, prev, now, identity))
                });
                shared
                    .obtain(
                        origin,
                        previous.as_ref().map(|p| p.snapshot.clone()),
                        windows,
                        now,
                        forced,
                        fetch,
                    )
                    .await
            }
        };
        self.keep(origin, previous, snapshot)
    }

    /// One attempt as `identity`: hook, fetch with redirects, cap, map.
    async fn fetch_snapshot(
        &self,
        origin: &Origin,
        previous: Option<Snapshot>,
        now: SystemTime,
        identity: &str,
    ) -> Snapshot {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let hook = lock(&self.hook).clone();
        if let Some(h) = hook {
            h(origin);
        }
        let validators = previous.as_ref().and_then(|p| p.validators());
        let mut result =
            fetch_robots(&*self.fetcher, origin, validators, self.config.redirects, identity).await;
        let max = usize::try_from(self.config.max_size).unwrap_or(usize::MAX);
        if let Some(r) = result.response.as_mut() {
            if r.body.len() > max {
                r.body.truncate(max);
                r.truncated = true;
            }
        }
        *lock(&self.outcomes).entry(result.outcome.label()).or_insert(0) += 1;
        tracing::debug!(origin = %origin, outcome = %result.outcome, user_agent = identity, "robots.txt fetch");
        let windows = self.config.windows_for(&origin.host);
        let snapshot =
            apply_fetch(origin, previous.as_ref(), result, &windows, &self.config.backoff(), now);
        if let Some(w) = snapshot.identity_warning() {
            tracing::warn!("{origin}: {w}");
        }
        snapshot
    }

    /// Persists `snapshot` as `origin`'s local copy and parses it (reusing
    /// `previous`'s parsed rules when the body is the same).
    fn keep(
        &self,
        origin: &Origin,
        previous: Option<Arc<Rules>>,
        snapshot: Snapshot,
    ) -> Arc<Rules> {
        match serde_json::to_vec(&snapshot) {
            Ok(bytes) => {
                if let Err(e) = self.tree.insert(origin.key().as_bytes(), bytes) {
                    tracing::warn!("cannot store the robots.txt snapshot of {origin}: {e}");
                }
            }
            Err(e) => tracing::warn!("cannot encode the robots.txt snapshot of {origin}: {e}"),
        }
        // Reuse the parsed rules when the body did not change (304, kept).
        match previous {
            Some(p)
                if p.snapshot.status == snapshot.status && p.snapshot.sha256 == snapshot.sha256 =>
            {
                Arc::new(Rules::with_parsed(snapshot, p.robots.clone()))
            }
            _ => Arc::new(Rules::new(snapshot)),
        }
    }
}
