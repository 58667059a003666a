//! The `[robots]` configuration as the robots modules use it.
//!
//! [`RobotsConfig`] deserialises from the `[robots]` table (durations as
//! `"6h"`, sizes as `"500KiB"`, like the rest of the configuration) and has
//! the documented defaults; `[robots.hosts."HOST"]` overrides the windows
//! for one host.

use crate::fetch::{Backoff, RedirectPolicy};
use crate::snapshot::{Windows, MAX_ROBOTS_BYTES};
// Durations and sizes are read exactly as in the rest of the configuration.
use crawlcache_base::units::{de_duration, de_size};
use serde::{Deserialize, Deserializer};
use std::collections::HashMap;
use std::time::Duration;

/// `robots.mode`: what the proxy does with verdicts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RobotsMode {
    /// No robots.txt handling at all.
    Off,
    /// Verdict in the audit log and a `Robots-Status` response header (default).
    #[default]
    Annotate,
    /// Disallowed requests get 403 and never reach the origin.
    Enforce,
}

/// `[robots]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RobotsConfig {
    /// `robots.mode`: `off`, `annotate` (default) or `enforce`.
    #[serde(default)]
    pub mode: RobotsMode,
    /// `robots.agent`: the product token checked; empty (default) → taken
    /// from each request's `User-Agent`.
    #[serde(default)]
    pub agent: String,
    /// `robots.user_agent`: the `User-Agent` robots.txt fetches are sent
    /// under; empty (default) → derived from `robots.agent` and the
    /// requesting client's `User-Agent` (see `robots::identity`).
    #[serde(default)]
    pub user_agent: String,
    /// `robots.fresh` (default `6h`).
    #[serde(default = "d_fresh", deserialize_with = "de_duration")]
    pub fresh: Duration,
    /// `robots.stale_usable` (default `24h`).
    #[serde(default = "d_stale_usable", deserialize_with = "de_duration")]
    pub stale_usable: Duration,
    /// `robots.hard_max` (default `3d`).
    #[serde(default = "d_hard_max", deserialize_with = "de_duration")]
    pub hard_max: Duration,
    /// `robots.redirects`: `any` (default, RFC 9309 §2.3.1.2), `same-host`
    /// or `same-origin`.
    #[serde(default)]
    pub redirects: RedirectPolicy,
    /// `robots.max_size`: bytes of a robots.txt kept (default and maximum
    /// `500KiB`).
    #[serde(default = "d_max_size", deserialize_with = "de_size")]
    pub max_size: u64,
    /// `robots.honor_crawl_delay` (default false).
    #[serde(default)]
    pub honor_crawl_delay: bool,
    /// `robots.min_delay`: least spacing between requests to one origin when
    /// honouring Crawl-delay (default `0s`).
    #[serde(default, deserialize_with = "de_duration")]
    pub min_delay: Duration,
    /// `robots.max_delay`: largest spacing used, whatever Crawl-delay says
    /// (default `30s`).
    #[serde(default = "d_max_delay", deserialize_with = "de_duration")]
    pub max_delay: Duration,
    /// `robots.retry_initial`: first retry delay after a failed fetch
    /// (default `1m`, doubling).
    #[serde(default = "d_retry_initial", deserialize_with = "de_duration")]
    pub retry_initial: Duration,
    /// `robots.retry_max`: longest retry delay (default `1h`).
    #[serde(default = "d_retry_max", deserialize_with = "de_duration")]
    pub retry_max: Duration,
    /// `[robots.hosts."HOST"]`: per-host window overrides, keyed by
    /// lower-case host name.
    #[serde(default)]
    pub hosts: HashMap<String, HostOverride>,
}

/// `[robots.hosts."HOST"]`: any of the three windows for one host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostOverride {
    /// Overrides `robots.fresh`.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub fresh: Option<Duration>,
    /// Overrides `robots.stale_usable`.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub stale_usable: Option<Duration>,
    /// Overrides `robots.hard_max`.
    #[serde(default, deserialize_with = "de_opt_duration")]
    pub hard_max: Option<Duration>,
}

fn d_fresh() -> Duration {
    Windows::default().fresh
}
fn d_stale_usable() -> Duration {
    Windows::default().stale_usable
}
fn d_hard_max() -> Duration {
    Windows::default().hard_max
}
fn d_max_size() -> u64 {
    MAX_ROBOTS_BYTES as u64
}
fn d_max_delay() -> Duration {
    Duration::from_secs(30)
}
fn d_retry_initial() -> Duration {
    Backoff::default().initial
}
fn d_retry_max() -> Duration {
    Backoff::default().max
}

impl Default for RobotsConfig {
    fn default() -> RobotsConfig {
        RobotsConfig {
            mode: RobotsMode::Annotate,
            agent: String::new(),
            user_agent: String::new(),
            fresh: d_fresh(),
            stale_usable: d_stale_usable(),
            hard_max: d_hard_max(),
            redirects: RedirectPolicy::Any,
            max_size: d_max_size(),
            honor_crawl_delay: false,
            min_delay: Duration::ZERO,
            max_delay: d_max_delay(),
            retry_initial: d_retry_initial(),
            retry_max: d_retry_max(),
            hosts: HashMap::new(),
        }
    }
}

impl RobotsConfig {
    /// The windows for `host` (case-insensitive; a trailing dot ignored):
    /// the global ones with that host's overrides laid over them.
    pub fn windows_for(&self, host: &str) -> Windows {
        let mut w =
            Windows { fresh: self.fresh, stale_usable: self.stale_usable, hard_max: self.hard_max };
        if self.hosts.is_empty() {
            // The usual case, checked for every proxied request: nothing to look up.
            return w;
        }
        let host = host.trim_end_matches('.');
        let o = self.hosts.get(host).or_else(|| {
            self.hosts
                .iter()
                .find(|(k, _)| k.trim_end_matches('.').eq_ignore_ascii_case(host))
                .map(|(_, v)| v)
        });
        if let Some(o) = o {
            w.fresh = o.fresh.unwrap_or(w.fresh);
            w.stale_usable = o.stale_usable.unwrap_or(w.stale_usable);
            w.hard_max = o.hard_max.unwrap_or(w.hard_max);
        }
        w
    }

    /// The retry back-off.
    pub fn backoff(&self) -> Backoff {
        Backoff { initial: self.retry_initial, max: self.retry_max.max(self.retry_initial) }
    }

    /// Checks that the windows are ordered (`fresh` ≤ `stale_usable` ≤
    /// `hard_max`, globally and per host), `max_size` is 1..=500 KiB and
    /// `user_agent` is a valid field value. Errors: [`SettingsError`],
    /// naming the key.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let check = |w: Windows, at: &str| {
            if w.fresh > w.stale_usable || w.stale_usable > w.hard_max {
                Err(SettingsError::Windows { at: at.to_string() })
            } else {
                Ok(())
            }
        };
        check(self.windows_for(""), "robots")?;
        for h in self.hosts.keys() {
            check(self.windows_for(h), &format!("robots.hosts.\"{h}\""))?;
        }
        if self.max_size == 0 || self.max_size > MAX_ROBOTS_BYTES as u64 {
            return Err(SettingsError::MaxSize(self.max_size));
        }
        if http::HeaderValue::from_str(self.user_agent.trim()).is_err() {
            return Err(SettingsError::UserAgent);
        }
        if self.min_delay > self.max_delay {
            return Err(SettingsError::Delays);
        }
        Ok(())
    }
}

/// A `[robots]` configuration [`RobotsConfig::validate`] refuses; `Display`
/// names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// The windows of `at` (`robots` or `robots.hosts."HOST"`) are not
    /// ordered.
    #[error("bad windows for `{at}`: need fresh <= stale_usable <= hard_max")]
    Windows {
        /// The table the windows are set in.
        at: String,
    },
    /// `robots.max_size` (bytes) is 0 or over 512000.
    #[error("bad value for key `robots.max_size`: {0} (must be 1 to 512000 bytes)")]
    MaxSize(u64),
    /// `robots.user_agent` cannot be sent as a field value.
    #[error("bad value for key `robots.user_agent`: not a valid User-Agent field value")]
    UserAgent,
    /// `robots.min_delay` is larger than `robots.max_delay`.
    #[error("bad value for key `robots.min_delay`: larger than `robots.max_delay`")]
    Delays,
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_toml_with_host_override() {
        let c: RobotsConfig = toml::from_str("").unwrap();
        assert_eq!(c, RobotsConfig::default());
        assert_eq!(c.windows_for("x"), Windows::default());
        assert_eq!(c.redirects, RedirectPolicy::Any, "RFC 9309 §2.3.1.2: across hosts by default");
        assert_eq!(c.user_agent, "");
        let c: RobotsConfig = toml::from_str(
            "mode = \"enforce\"\nfresh = \"2s\"\nstale_usable = \"4s\"\nhard_max = \"8s\"\nredirects = \"same-host\"\nmax_size = \"100KiB\"\n\
             user_agent = \"ExampleBot/1.0 (+http://example.org/bot)\"\n\
             [hosts.\"Slow.Example\"]\nfresh = \"1h\"\nstale_usable = \"2h\"\nhard_max = \"1d\"\n",
        )
        .unwrap();
        assert_eq!(c.mode, RobotsMode::Enforce);
        assert_eq!(c.redirects, RedirectPolicy::SameHost);
        assert_eq!(c.user_agent, "ExampleBot/1.0 (+http://example.org/bot)");
        assert_eq!(c.max_size, 102_400);
        assert_eq!(c.windows_for("other").fresh, Duration::from_secs(2));
        let w = c.windows_for("slow.example.");
        assert_eq!(
            (w.fresh, w.stale_usable, w.hard_max),
            (Duration::from_secs(3600), Duration::from_secs(7200), Duration::from_secs(86_400))
        );
        c.validate().unwrap();
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(toml::from_str::<RobotsConfig>("redirects = \"sideways\"").is_err());
        assert!(toml::from_str::<RobotsConfig>("fresh = \"soon\"").is_err());
        assert!(toml::from_str::<RobotsConfig>("[hosts.h]\nfreshness = \"1h\"").is_err());
        let c: RobotsConfig = toml::from_str("fresh = \"2d\"").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("fresh"));
        let c: RobotsConfig = toml::from_str("max_size = \"1MiB\"").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("robots.max_size"));
        let c: RobotsConfig = toml::from_str("user_agent = \"bad\\u0001\"").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("robots.user_agent"));
    }
}
