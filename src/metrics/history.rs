//! The counters' recent past, for the status page: the per-request classes
//! and the bytes served, sampled once a second ([`SAMPLE_INTERVAL`]) into a
//! fixed ring of [`HISTORY_LEN`] samples (15 minutes). The request path
//! never touches it: a sample is a read of the counters the proxy keeps
//! anyway, taken by one background task.
//!
//! A window's figures ([`History::window`]) are the difference between the
//! newest sample and the one the window's length before it (or the oldest
//! kept, when the proxy has run for less than that).

use serde::Serialize;
use std::time::{Duration, SystemTime};

/// How often the counters are sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples kept: 15 minutes of one-second differences.
pub const HISTORY_LEN: usize = 15 * 60 + 1;

/// The counters at one moment (all monotonic since start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// When it was taken, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Requests proxied.
    pub requests: u64,
    /// Fresh hits.
    pub hits: u64,
    /// Served after a 304.
    pub revalidated: u64,
    /// Served stale.
    pub stale: u64,
    /// The origin's full response.
    pub misses: u64,
    /// Other methods passed through.
    pub passthrough: u64,
    /// Answered by crawlcache with an error or refusal.
    pub refused: u64,
    /// Body bytes sent to clients from the store.
    pub bytes_from_cache: u64,
    /// Body bytes sent to clients as they came from origins.
    pub bytes_from_origin: u64,
}

impl Sample {
    /// `self - earlier`, counter by counter (0 where a counter went back,
    /// which monotonic counters never do); `at_ms` is the span in ms.
    pub fn since(&self, earlier: &Sample) -> Sample {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Sample {
            at_ms: d(self.at_ms, earlier.at_ms),
            requests: d(self.requests, earlier.requests),
            hits: d(self.hits, earlier.hits),
            revalidated: d(self.revalidated, earlier.revalidated),
            stale: d(self.stale, earlier.stale),
            misses: d(self.misses, earlier.misses),
            passthrough: d(self.passthrough, earlier.passthrough),
            refused: d(self.refused, earlier.refused),
            bytes_from_cache: d(self.bytes_from_cache, earlier.bytes_from_cache),
            bytes_from_origin: d(self.bytes_from_origin, earlier.bytes_from_origin),
        }
    }
}

/// The figures of one window (1, 5 or 15 minutes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Window {
    /// The window asked for, in seconds.
    pub seconds: u64,
    /// The time the figures actually cover, in seconds (less than
    /// `seconds` while the proxy has run for less).
    pub covered_seconds: f64,
    /// The counters' growth over `covered_seconds`.
    pub counts: Sample,
    /// Requests per second over `covered_seconds` (0 when it is 0).
    pub requests_per_second: f64,
    /// Each class's share of the requests (0 when there were none).
    pub hit_ratio: f64,
    /// See `hit_ratio`.
    pub revalidated_ratio: f64,
    /// See `hit_ratio`.
    pub stale_ratio: f64,
    /// See `hit_ratio`.
    pub miss_ratio: f64,
}

impl Window {
    fn of(seconds: u64, counts: Sample) -> Window {
        let covered = counts.at_ms as f64 / 1000.0;
        let share =
            |n: u64| if counts.requests == 0 { 0.0 } else { n as f64 / counts.requests as f64 };
        Window {
            seconds,
            covered_seconds: covered,
            requests_per_second: if covered > 0.0 { counts.requests as f64 / covered } else { 0.0 },
            hit_ratio: share(counts.hits),
            revalidated_ratio: share(counts.revalidated),
            stale_ratio: share(counts.stale),
            miss_ratio: share(counts.misses),
            counts,
        }
    }
}

/// The ring of samples (see the module docs).
#[derive(Debug)]
pub struct History {
    ring: std::sync::Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    samples: Vec<Sample>,
    /// Where the next sample goes.
    next: usize,
    /// Samples kept (at most `samples.len()`).
    len: usize,
}

impl Default for History {
    fn default() -> History {
        History::with_capacity(HISTORY_LEN)
    }
}

impl History {
    /// A ring of `capacity` samples (at least 2).
    pub fn with_capacity(capacity: usize) -> History {
        History {
            ring: std::sync::Mutex::new(Ring {
                samples: vec![Sample::default(); capacity.max(2)],
                next: 0,
                len: 0,
            }),
        }
    }

    /// Adds `sample`, dropping the oldest when the ring is full.
    pub fn push(&self, sample: Sample) {
        let mut r = crawlcache_base::locks::lock(&self.ring);
        let cap = r.samples.len();
        let at = r.next;
        r.samples[at] = sample;
        r.next = (at + 1) % cap;
        r.len = (r.len + 1).min(cap);
    }

    /// The samples kept, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        let r = crawlcache_base::locks::lock(&self.ring);
        let cap = r.samples.len();
        let first = (r.next + cap - r.len) % cap;
        (0..r.len).map(|i| r.samples[(first + i) % cap]).collect()
    }

    /// The newest sample, if any.
    pub fn latest(&self) -> Option<Sample> {
        let r = crawlcache_base::locks::lock(&self.ring);
        let cap = r.samples.len();
        (r.len > 0).then(|| r.samples[(r.next + cap - 1) % cap])
    }

    /// The window of the last `seconds`: the newest sample less the newest
    /// one at least `seconds` older (or the oldest kept). `None` before the
    /// first sample.
    pub fn window(&self, seconds: u64) -> Option<Window> {
        window_of(&self.samples(), seconds)
    }

    /// The samples' growth in buckets of `bucket` seconds, oldest first,
    /// ending at the newest sample and covering at most `span` seconds:
    /// the series the status page draws.
    pub fn buckets(&self, bucket: u64, span: u64) -> Vec<Sample> {
        buckets_of(&self.samples(), bucket, span)
    }
}

/// [`History::window`] over `samples` (oldest first).
pub fn window_of(samples: &[Sample], seconds: u64) -> Option<Window> {
    let newest = samples.last()?;
    let since = newest.at_ms.saturating_sub(seconds * 1000);
    // The newest sample taken at or before `since`, else the oldest.
    let base = samples.iter().rev().find(|s| s.at_ms <= since).unwrap_or(&samples[0]);
    Some(Window::of(seconds, newest.since(base)))
}

/// [`History::buckets`] over `samples` (oldest first): each bucket is the
/// growth from the sample at its start to the one at its end (every
/// `bucket` samples apart, counted back from the newest); the oldest may
/// be shorter (from the first sample kept), so nothing since the first
/// sample is left out. Each bucket's `at_ms` is the time it covers.
pub fn buckets_of(samples: &[Sample], bucket: u64, span: u64) -> Vec<Sample> {
    let step = bucket.max(1) as usize;
    let n = ((span / bucket.max(1)) as usize).max(1);
    let mut out = Vec::with_capacity(n);
    let mut end = match samples.len().checked_sub(1) {
        Some(e) => e,
        None => return out,
    };
    while out.len() < n && end > 0 {
        let start = end.saturating_sub(step);
        out.push(samples[end].since(&samples[start]));
        end = start;
    }
    out.reverse();
    out
}

/// Milliseconds since the Unix epoch of `t` (0 before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_s: u64, requests: u64, hits: u64) -> Sample {
        Sample { at_ms: at_s * 1000, requests, hits, misses: requests - hits, ..Sample::default() }
    }

    #[test]
    fn a_window_is_the_growth_since_the_sample_its_length_ago() {
        let h = History::with_capacity(400);
        assert!(h.window(60).is_none());
        for t in 0..=300 {
            // Two requests a second, one of them a hit.
            h.push(s(t, 2 * t, t));
        }
        let w = h.window(60).unwrap();
        assert_eq!((w.counts.requests, w.counts.hits, w.covered_seconds), (120, 60, 60.0));
        assert_eq!((w.hit_ratio, w.miss_ratio, w.requests_per_second), (0.5, 0.5, 2.0));
        // Longer than the history: what there is.
        let w = h.window(900).unwrap();
        assert_eq!((w.counts.requests, w.covered_seconds), (600, 300.0));
    }

    #[test]
    fn the_ring_keeps_the_newest_samples_in_order() {
        let h = History::with_capacity(3);
        for t in 0..5 {
            h.push(s(t, t, 0));
        }
        let at: Vec<u64> = h.samples().iter().map(|x| x.at_ms / 1000).collect();
        assert_eq!(at, vec![2, 3, 4]);
        assert_eq!(h.latest().unwrap().requests, 4);
    }

    #[test]
    fn buckets_end_at_the_newest_sample() {
        let samples: Vec<Sample> = (0..=25).map(|t| s(t, t * 3, t)).collect();
        let b = buckets_of(&samples, 10, 900);
        assert_eq!(b.len(), 3, "two whole buckets of 10 s in 25 s, and the first 5 s");
        assert_eq!((b[0].requests, b[0].at_ms), (15, 5_000), "{b:?}");
        assert!(
            b[1..].iter().all(|x| x.requests == 30 && x.hits == 10 && x.at_ms == 10_000),
            "{b:?}"
        );
        assert_eq!(buckets_of(&samples, 10, 10).len(), 1);
        assert!(buckets_of(&[], 10, 900).is_empty());
    }
}
