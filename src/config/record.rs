//! `[record]`: what is kept for offline replay (docs/record-replay.md).
//! The settings live on the configuration's floor; [`crate::record`]
//! writes the records and `crawlcache_policy::keep` decides, with what the
//! cache stores, what is recorded.

use crawlcache_policy::cache::cache_control::CacheControl;
use crawlcache_policy::keep::RecordRules;
use http::Method;
use serde::Deserialize;

/// `record.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordMode {
    /// Only what the HTTP cache stores (the cache is the record).
    Cacheable,
    /// Every final response to a method in `record.methods`.
    All,
}

/// `[record]`: what is kept for offline replay.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordConfig {
    /// `cacheable` (default) or `all`.
    pub mode: RecordMode,
    /// Record `no-store` responses too.
    pub no_store: bool,
    /// Methods whose responses are recorded.
    pub methods: Vec<String>,
}

impl RecordConfig {
    /// Checks `record.methods`.
    pub fn validate(&self) -> Result<(), String> {
        for m in &self.methods {
            match Method::from_bytes(m.as_bytes()) {
                Ok(Method::CONNECT) | Err(_) => return Err(format!("bad value for key `record.methods`: {m:?} is not a method that can be recorded")),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// `[record]` as the storable decision reads it
    /// ([`crawlcache_policy::keep()`]).
    pub fn rules(&self) -> RecordRules<'_> {
        RecordRules {
            all: self.mode == RecordMode::All,
            methods: &self.methods,
            no_store: self.no_store,
        }
    }

    /// True when responses to `method` are recorded at all
    /// ([`RecordRules::records_method`]).
    pub fn records_method(&self, method: &Method) -> bool {
        self.rules().records_method(method)
    }

    /// True when the final response (`response_cc` being its
    /// `Cache-Control`) to a `method` request with `request_cc` is recorded
    /// ([`RecordRules::wants`]).
    pub fn wants(
        &self,
        method: &Method,
        request_cc: &CacheControl,
        response_headers: &http::HeaderMap,
    ) -> bool {
        self.rules().wants(method, request_cc, response_headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: RecordMode, no_store: bool) -> RecordConfig {
        RecordConfig { mode, no_store, methods: vec!["GET".into(), "HEAD".into(), "POST".into()] }
    }

    #[test]
    fn mode_methods_and_no_store_decide_what_is_recorded() {
        let none = http::HeaderMap::new();
        let mut ns = http::HeaderMap::new();
        ns.insert("cache-control", "no-store".parse().unwrap());
        let cc = CacheControl::default();
        assert!(!cfg(RecordMode::Cacheable, true).wants(&Method::GET, &cc, &none));
        assert!(cfg(RecordMode::All, false).wants(&Method::GET, &cc, &none));
        assert!(cfg(RecordMode::All, false).wants(&Method::POST, &cc, &none));
        assert!(!cfg(RecordMode::All, false).wants(&Method::PUT, &cc, &none));
        assert!(!cfg(RecordMode::All, false).wants(&Method::GET, &cc, &ns));
        assert!(cfg(RecordMode::All, true).wants(&Method::GET, &cc, &ns));
        let mut req_ns = http::HeaderMap::new();
        req_ns.insert("cache-control", "no-store".parse().unwrap());
        assert!(!cfg(RecordMode::All, false).wants(
            &Method::GET,
            &CacheControl::from_headers(&req_ns),
            &none
        ));
    }

    #[test]
    fn methods_are_validated() {
        let mut c = cfg(RecordMode::All, false);
        assert!(c.validate().is_ok());
        c.methods.push("CONNECT".into());
        assert!(c.validate().is_err());
    }
}
