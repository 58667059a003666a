//! Request latency by outcome: one Prometheus histogram per class of
//! request (`crawlcache_request_duration_seconds{outcome="hit"}`, ...),
//! observed once per proxied request when its response body has ended
//! (where the audit and access-log lines are written), so the time covers
//! the whole transfer.
//!
//! Each bucket is a [`Counter`] of per-thread slots: observing is two
//! relaxed atomic additions on the calling thread's cache lines, no lock.
//! Buckets hold the observations that fall in them alone; the cumulative
//! counts Prometheus expects are summed when the exposition is written, so
//! they are monotone and `_count` always equals the `+Inf` bucket.

use super::counter::Counter;
use crawlcache_policy::cache_status::Outcome;
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: from half a millisecond (a hit
/// from memory on loopback) to ten seconds (a slow origin), roughly 1-2.5-5
/// per decade. Beyond the last is the `+Inf` bucket.
pub const BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The same bounds in microseconds, compared with an observation.
const BUCKETS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// The classes, in the order of their label values in the exposition.
pub const OUTCOMES: [Outcome; 7] = [
    Outcome::Hit,
    Outcome::Stale,
    Outcome::Revalidated,
    Outcome::Miss,
    Outcome::Pass,
    Outcome::Refused,
    Outcome::Error,
];

/// One histogram: the observations per bucket (the last is `+Inf`) and
/// their sum in microseconds.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [Counter; BUCKETS.len() + 1],
    sum_us: Counter,
}

impl Histogram {
    /// Counts one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let i = BUCKETS_US.partition_point(|&b| b < us);
        self.buckets[i].add(1);
        self.sum_us.add(us);
    }

    /// The cumulative counts, one per bound of [`BUCKETS`] then `+Inf`
    /// (which is the count of observations), and the sum in seconds.
    pub fn snapshot(&self) -> ([u64; BUCKETS.len() + 1], f64) {
        let mut cumulative = [0u64; BUCKETS.len() + 1];
        let mut total = 0u64;
        for (c, b) in cumulative.iter_mut().zip(&self.buckets) {
            total = total.wrapping_add(b.get());
            *c = total;
        }
        (cumulative, self.sum_us.get() as f64 / 1e6)
    }
}

/// The histograms of every class.
#[derive(Debug, Default)]
pub struct Latency {
    by_outcome: [Histogram; OUTCOMES.len()],
}

impl Latency {
    /// Counts one request of class `outcome` that took `elapsed` from its
    /// arrival to the end of its response body.
    pub fn observe(&self, outcome: Outcome, elapsed: Duration) {
        self.of(outcome).observe(elapsed);
    }

    /// The histogram of `outcome`.
    pub fn of(&self, outcome: Outcome) -> &Histogram {
        let i = match outcome {
            Outcome::Hit => 0,
            Outcome::Stale => 1,
            Outcome::Revalidated => 2,
            Outcome::Miss => 3,
            Outcome::Pass => 4,
            Outcome::Refused => 5,
            Outcome::Error => 6,
        };
        &self.by_outcome[i]
    }

    /// Appends the histograms in Prometheus text format (one family,
    /// `crawlcache_request_duration_seconds`, labelled by `outcome`).
    pub fn write_prometheus(&self, out: &mut String) {
        use std::fmt::Write as _;
        let name = "crawlcache_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a proxied request's arrival to the end of its response body, by class (as the access log names it).\n# TYPE {name} histogram"
        );
        for outcome in OUTCOMES {
            let label = outcome.as_str();
            let (cumulative, sum) = self.of(outcome).snapshot();
            for (bound, n) in BUCKETS.iter().zip(&cumulative) {
                let _ = writeln!(out, "{name}_bucket{{outcome=\"{label}\",le=\"{bound}\"}} {n}");
            }
            let count = cumulative[BUCKETS.len()];
            let _ = writeln!(out, "{name}_bucket{{outcome=\"{label}\",le=\"+Inf\"}} {count}");
            let _ = writeln!(out, "{name}_sum{{outcome=\"{label}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{outcome=\"{label}\"}} {count}");
        }
    }

    /// The histograms as JSON for `/stats`: per class, `count`,
    /// `sum_seconds` and `buckets`, `[upper bound in seconds, cumulative
    /// count]` pairs (the last bound is `null`, for `+Inf`).
    pub fn json(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        for outcome in OUTCOMES {
            let (cumulative, sum) = self.of(outcome).snapshot();
            let bounds = BUCKETS
                .iter()
                .map(|b| serde_json::json!(b))
                .chain(std::iter::once(serde_json::Value::Null));
            let buckets: Vec<serde_json::Value> =
                bounds.zip(cumulative).map(|(b, n)| serde_json::json!([b, n])).collect();
            map.insert(outcome.as_str().to_string(), serde_json::json!({ "count": cumulative[BUCKETS.len()], "sum_seconds": sum, "buckets": buckets }));
        }
        serde_json::Value::Object(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observation lands in the first bucket whose bound is at or above
    /// it (`le` is inclusive), every later cumulative count includes it,
    /// and `_count` is the `+Inf` bucket.
    #[test]
    fn buckets_are_inclusive_cumulative_and_end_with_the_count() {
        let l = Latency::default();
        l.observe(Outcome::Hit, Duration::from_micros(500));
        l.observe(Outcome::Hit, Duration::from_micros(501));
        l.observe(Outcome::Hit, Duration::from_secs(60));
        l.observe(Outcome::Miss, Duration::from_millis(30));
        let (hit, sum) = l.of(Outcome::Hit).snapshot();
        assert_eq!(&hit[..3], &[1, 2, 2]);
        assert_eq!(hit[BUCKETS.len() - 1], 2, "60 s is beyond the last bound");
        assert_eq!(hit[BUCKETS.len()], 3);
        assert!((sum - 60.001001).abs() < 1e-9, "{sum}");
        assert!(hit.windows(2).all(|w| w[0] <= w[1]));
        let (miss, _) = l.of(Outcome::Miss).snapshot();
        assert_eq!(miss[5], 0, "30 ms is above the 25 ms bound");
        assert_eq!(miss[6], 1);
        let mut text = String::new();
        l.write_prometheus(&mut text);
        assert!(
            text.contains(
                "crawlcache_request_duration_seconds_bucket{outcome=\"hit\",le=\"0.0005\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "crawlcache_request_duration_seconds_bucket{outcome=\"hit\",le=\"+Inf\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("crawlcache_request_duration_seconds_count{outcome=\"miss\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("crawlcache_request_duration_seconds_count{outcome=\"refused\"} 0\n"),
            "{text}"
        );
    }
}
