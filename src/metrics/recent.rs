//! The last errors, for the status page: responses with a 5xx status
//! (crawlcache's own, such as a 502 for an origin that cannot be reached,
//! and origins' alike), and every log event at `WARN` or `ERROR`
//! ([`RecentLayer`], installed with the log subscriber by `serve`).
//!
//! One process-wide ring ([`RECENT`]) of [`RECENT_ERRORS`] entries: what
//! it costs is paid only when an error happens.

use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

/// Errors kept.
pub const RECENT_ERRORS: usize = 50;

/// Longest message kept, in bytes (longer ones are cut at a character boundary).
pub const MAX_MESSAGE: usize = 500;

/// One error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecentError {
    /// When it happened, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `response` (a 5xx sent to a client) or `log` (a warning or error
    /// logged).
    pub kind: &'static str,
    /// The response's status code, or the log level (`WARN`, `ERROR`).
    pub what: String,
    /// For a response: method, URL and `Cache-Status`; for a log event:
    /// its message and fields.
    pub message: String,
}

/// A ring of the latest errors.
#[derive(Debug)]
pub struct RecentErrors {
    ring: Mutex<VecDeque<RecentError>>,
    total: AtomicU64,
}

/// The process's errors (logging is process-wide too).
pub static RECENT: RecentErrors = RecentErrors::new();

impl Default for RecentErrors {
    fn default() -> Self {
        RecentErrors::new()
    }
}

impl RecentErrors {
    /// An empty ring.
    pub const fn new() -> RecentErrors {
        RecentErrors { ring: Mutex::new(VecDeque::new()), total: AtomicU64::new(0) }
    }

    /// Adds an error at `at`, dropping the oldest beyond [`RECENT_ERRORS`].
    pub fn push(&self, at: SystemTime, kind: &'static str, what: String, mut message: String) {
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        self.total.fetch_add(1, Ordering::Relaxed);
        let mut r = crawlcache_base::locks::lock(&self.ring);
        if r.len() == RECENT_ERRORS {
            r.pop_front();
        }
        r.push_back(RecentError { at_ms: super::history::unix_ms(at), kind, what, message });
    }

    /// The errors kept, newest first.
    pub fn newest_first(&self) -> Vec<RecentError> {
        crawlcache_base::locks::lock(&self.ring).iter().rev().cloned().collect()
    }

    /// Errors seen since start (kept or not).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// A `tracing` layer that copies `WARN` and `ERROR` events into [`RECENT`]
/// (whatever the log filter lets through to stderr).
#[derive(Debug, Default, Clone, Copy)]
pub struct RecentLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for RecentLayer {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let level = *event.metadata().level();
        if level > tracing::Level::WARN {
            return;
        }
        let mut text = MessageText::default();
        event.record(&mut text);
        RECENT.push(SystemTime::now(), "log", level.to_string(), text.0);
    }
}

/// The message and fields of an event as one line: `message key=value ...`.
#[derive(Default)]
struct MessageText(String);

impl tracing::field::Visit for MessageText {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            self.0.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_errors_and_counts_them_all() {
        let r = RecentErrors::new();
        for i in 0..RECENT_ERRORS + 5 {
            r.push(
                SystemTime::UNIX_EPOCH,
                "response",
                "502".into(),
                format!("GET http://a.test/{i}"),
            );
        }
        let kept = r.newest_first();
        assert_eq!(kept.len(), RECENT_ERRORS);
        assert_eq!(kept[0].message, format!("GET http://a.test/{}", RECENT_ERRORS + 4));
        assert_eq!(r.total(), (RECENT_ERRORS + 5) as u64);
        r.push(SystemTime::UNIX_EPOCH, "log", "WARN".into(), "é".repeat(MAX_MESSAGE));
        assert!(r.newest_first()[0].message.len() <= MAX_MESSAGE + '…'.len_utf8());
    }

    #[test]
    fn warnings_logged_through_the_layer_are_kept() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(RecentLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("not an error");
            tracing::warn!(origin = "http://a.test", "fleet: redis unusable");
        });
        let w = RECENT
            .newest_first()
            .into_iter()
            .find(|e| e.message.contains("fleet: redis unusable"))
            .expect("the warning is kept");
        assert_eq!((w.kind, w.what.as_str()), ("log", "WARN"));
        assert!(w.message.contains("origin=\"http://a.test\""), "{}", w.message);
        assert!(!RECENT.newest_first().iter().any(|e| e.message == "not an error"));
    }
}
