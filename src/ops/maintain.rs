//! `cache purge` and `cache prune`: removing stored responses, from the
//! HTTP cache and the record alike, shared by the command line (store
//! opened directly) and the admin endpoints `POST /cache/purge` and
//! `POST /cache/prune` (through a running proxy).
//!
//! Both walk the index once with [`Store::scan`] and remove each matching
//! entry as they meet it, so their memory does not grow with the store.
//! Bodies no longer referenced are deleted by the store in the background.

use super::inspect::{key_url, KeyFilter};
use crawlcache_policy::cache::{self, PolicyConfig};
use crawlcache_policy::cache::{from_millis, StoredResponse};
use crawlcache_policy::cache_rules::PolicyRule;
use crawlcache_store::{Entry, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// What a purge or prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removed {
    /// Entries removed (cache variants and records).
    pub entries: u64,
    /// Bytes of the bodies those entries referenced (a body shared by
    /// several entries counts for each).
    pub bytes: u64,
    /// Bytes of bodies whose last reference went with them, each counted
    /// once: what the removal gave back to the size budget (a body file is
    /// deleted at once, pack space is reclaimed by compaction). A body
    /// another entry still has frees nothing.
    pub freed: u64,
}

impl std::fmt::Display for Removed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "removed {} entries ({} body bytes); {} bytes freed (bodies no other entry references)",
            self.entries, self.bytes, self.freed
        )
    }
}

/// Why a purge or prune removed nothing.
#[derive(Debug, thiserror::Error)]
pub enum MaintainError {
    /// A purge with no criterion (it never removes everything).
    #[error("purge needs a URL, --host, --prefix or --older-than")]
    NothingSelected,
    /// The `--host` filter is not a host.
    #[error(transparent)]
    HostFilter(#[from] super::host_filter::HostFilterError),
    /// The index could not be read.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The entries under `key` could not be removed.
    #[error("{key}: {source}")]
    Remove {
        /// The store key.
        key: String,
        /// The store's error.
        source: StoreError,
    },
}

/// Which entries `cache purge` removes: every criterion given must hold.
/// At least one must be given (a purge never removes everything by
/// default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeSelection {
    /// The cache keys of one URL (normalised, as stored and after
    /// `cache.key_rules`): every cache variant and every record of it
    /// (any method, any request body).
    pub urls: Vec<String>,
    /// Host and URL prefix filters.
    pub filter: KeyFilter,
    /// Only responses received (`response_time`) longer ago than this.
    pub older_than: Option<Duration>,
}

impl PurgeSelection {
    /// Checks that something was asked for. Errors:
    /// [`MaintainError::NothingSelected`], or the host filter's
    /// [`MaintainError::HostFilter`].
    pub fn validate(&self) -> Result<(), MaintainError> {
        if self.urls.is_empty()
            && self.filter.host.is_none()
            && self.filter.prefix.is_none()
            && self.older_than.is_none()
        {
            return Err(MaintainError::NothingSelected);
        }
        Ok(self.filter.validate()?)
    }

    /// Whether `e` is selected at `now`.
    fn selects(&self, e: &Entry, now: SystemTime) -> bool {
        if !self.urls.is_empty() && !self.urls.iter().any(|u| key_url(&e.primary_key) == u) {
            return false;
        }
        if !self.filter.matches(&e.primary_key) {
            return false;
        }
        if let Some(age) = self.older_than {
            let Some(stored) = StoredResponse::from_bytes(&e.meta) else { return false };
            let received = from_millis(stored.response_time_ms);
            if now.duration_since(received).unwrap_or(Duration::ZERO) <= age {
                return false;
            }
        }
        true
    }
}

/// Removes the entries of `store` that `selection` selects at `now`.
/// Errors: the selection is empty ([`PurgeSelection::validate`]), or the
/// index cannot be read or written.
pub fn purge(
    store: &Store,
    selection: &PurgeSelection,
    now: SystemTime,
) -> Result<Removed, MaintainError> {
    selection.validate()?;
    remove_where(store, |e| selection.selects(e, now))
}

/// What [`purge`] would remove from `store` at `now`, without removing
/// anything: the entries selected and the bytes of their bodies
/// (`freed` is 0: what a removal frees depends on the entries left).
/// Errors: as [`purge`].
pub fn would_purge(
    store: &Store,
    selection: &PurgeSelection,
    now: SystemTime,
) -> Result<Removed, MaintainError> {
    selection.validate()?;
    let mut would = Removed::default();
    for e in store.scan("") {
        let e = e?;
        if selection.selects(&e, now) {
            would.entries += 1;
            would.bytes += e.body.as_ref().map_or(0, |b| b.len);
        }
    }
    Ok(would)
}

/// How `cache prune` decides.
#[derive(Debug, Clone)]
pub struct PruneSpec {
    /// Remove only entries not used (stored, served, freshened) for at
    /// least this long.
    pub unused_for: Duration,
    /// Prune records too (by default they are kept: they are what an
    /// offline re-run replays, and most are never fresh).
    pub records: bool,
    /// The cache policy freshness is judged by.
    pub policy: PolicyConfig,
    /// `[[cache.rules]]` (their `min_ttl` / `max_ttl` bound freshness).
    pub rules: Vec<PolicyRule>,
}

/// The default of `cache prune --unused-for`.
pub const DEFAULT_UNUSED_FOR: &str = "7d";

impl PruneSpec {
    /// Whether `e` goes at `now`: it is not fresh (freshness_lifetime,
    /// bounded by the matching rule, not above current_age; RFC 9111
    /// section 4.2) and its last use, and its receipt, are at least
    /// `unused_for` ago. An entry whose head cannot be read is left to
    /// `cache verify`.
    pub fn prunes(&self, e: &Entry, now: SystemTime) -> bool {
        if crawlcache_policy::store_key::StoreKey::is_record(&e.primary_key) && !self.records {
            return false;
        }
        let Some(stored) = StoredResponse::from_bytes(&e.meta) else { return false };
        let url = key_url(&e.primary_key);
        let lifetime = crawlcache_policy::cache_rules::freshness_lifetime(
            &self.rules,
            url,
            &stored,
            &self.policy,
        );
        if lifetime > cache::current_age(&stored, now) {
            return false;
        }
        let received = from_millis(stored.response_time_ms);
        let last_use = e.last_used_at().map_or(received, |t| t.max(received));
        now.duration_since(last_use).unwrap_or(Duration::ZERO) >= self.unused_for
    }
}

/// Removes the entries `spec` prunes at `now`. Errors: the index cannot be
/// read or written.
pub fn prune(store: &Store, spec: &PruneSpec, now: SystemTime) -> Result<Removed, MaintainError> {
    remove_where(store, |e| spec.prunes(e, now))
}

/// One pass over the index removing every entry `select` accepts.
fn remove_where(
    store: &Store,
    mut select: impl FnMut(&Entry) -> bool,
) -> Result<Removed, MaintainError> {
    let mut removed = Removed::default();
    for e in store.scan("") {
        let e = e?;
        if !select(&e) {
            continue;
        }
        let gone = store
            .remove_variant_freeing(&e.primary_key, &e.secondary_key)
            .map_err(|source| MaintainError::Remove { key: e.primary_key.clone(), source })?;
        if gone.entries > 0 {
            removed.entries += gone.entries;
            removed.bytes += e.body.as_ref().map_or(0, |b| b.len);
            removed.freed += gone.freed;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlcache_policy::store_key::RecordKey;

    fn entry(
        key: &str,
        cache_control: &str,
        received: SystemTime,
        last_used: Option<SystemTime>,
    ) -> Entry {
        let head = StoredResponse {
            status: 200,
            headers: vec![("cache-control".into(), cache_control.as_bytes().to_vec())],
            request_time_ms: crawlcache_policy::cache::to_millis(received),
            response_time_ms: crawlcache_policy::cache::to_millis(received),
            url: key_url(key).into(),
            vary_request: vec![],
        };
        Entry {
            primary_key: key.into(),
            secondary_key: vec![],
            meta: head.to_bytes(),
            body: None,
            last_used: last_used.map_or(7, crawlcache_store::clock_micros),
        }
    }

    #[test]
    fn prune_takes_stale_entries_unused_for_long_enough() {
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        let spec = PruneSpec {
            unused_for: hour,
            records: false,
            policy: PolicyConfig::default(),
            rules: vec![],
        };
        let day_ago = now - 24 * hour;
        assert!(spec.prunes(&entry("http://a/", "max-age=60", day_ago, Some(day_ago)), now));
        assert!(
            !spec.prunes(&entry("http://a/", "max-age=172800", day_ago, Some(day_ago)), now),
            "still fresh"
        );
        assert!(
            !spec.prunes(
                &entry("http://a/", "max-age=60", day_ago, Some(now - Duration::from_secs(60))),
                now
            ),
            "used a minute ago"
        );
        assert!(
            spec.prunes(&entry("http://a/", "max-age=60", day_ago, None), now),
            "no clock stamp: counted from receipt"
        );
        assert!(
            !spec.prunes(
                &entry("http://a/", "max-age=60", now - Duration::from_secs(120), None),
                now
            ),
            "received two minutes ago"
        );
        assert!(
            !spec.prunes(
                &entry(
                    &RecordKey::get("http://a/").primary(),
                    "max-age=60",
                    day_ago,
                    Some(day_ago)
                ),
                now
            ),
            "records are kept"
        );
        assert!(PruneSpec { records: true, ..spec.clone() }.prunes(
            &entry(&RecordKey::get("http://a/").primary(), "max-age=60", day_ago, Some(day_ago)),
            now
        ));
        // A min_ttl rule keeps it fresh.
        let rules: toml::Table = toml::from_str("[[r]]\nmin_ttl = \"2d\"\n").unwrap();
        let rules: Vec<PolicyRule> = rules["r"].clone().try_into().unwrap();
        assert!(!PruneSpec { rules, ..spec }
            .prunes(&entry("http://a/", "max-age=60", day_ago, Some(day_ago)), now));
    }

    #[test]
    fn a_purge_selects_by_url_host_prefix_and_age() {
        let now = SystemTime::now();
        let old = now - Duration::from_secs(7200);
        let sel = |urls: &[&str], host: Option<&str>, prefix: Option<&str>, older: Option<u64>| {
            PurgeSelection {
                urls: urls.iter().map(|u| u.to_string()).collect(),
                filter: KeyFilter {
                    host: host.map(str::to_string),
                    prefix: prefix.map(str::to_string),
                },
                older_than: older.map(Duration::from_secs),
            }
        };
        let e = entry(
            &RecordKey::new(&http::Method::POST, "http://a.test/f", Some("00")).primary(),
            "max-age=60",
            old,
            None,
        );
        assert!(sel(&["http://a.test/f"], None, None, None).selects(&e, now));
        assert!(!sel(&["http://a.test/"], None, None, None).selects(&e, now));
        assert!(sel(&[], Some("a.test"), None, Some(3600)).selects(&e, now));
        assert!(
            !sel(&[], Some("a.test"), None, Some(3 * 3600)).selects(&e, now),
            "received two hours ago"
        );
        assert!(!sel(&[], None, Some("http://b.test/"), None).selects(&e, now));
        assert!(sel(&[], None, None, None).validate().is_err(), "nothing asked: refused");
    }
}
