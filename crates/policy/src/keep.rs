//! What becomes of a response from the origin: stored for the cache,
//! recorded for offline replay, both, or neither ([`keep`]). One pure
//! decision over the request, the response, the operator's rules and the
//! size limit, in this order:
//!
//! 1. RFC 9111 section 3 ([`crate::cache::storable()`]): the method, the status,
//!    `no-store`, `private`, `Authorization` (section 3.5), `Vary: *`
//!    (section 4.1), explicit freshness or a heuristically cacheable status;
//! 2. `cache.max_object_size`, when the response announces its length (a
//!    body of unknown length is measured while it is copied);
//! 3. the per-URL policy rules (`[[cache.rules]]`, SPEC section 6), which
//!    may forbid storing (`never_store`, `skip_status`) or store a status
//!    RFC 9111 finds no freshness information for (`store_status`,
//!    `min_ttl`);
//! 4. record and replay (`[record]`, SPEC section 6), which may keep a
//!    final response the cache does not.
//!
//! The store itself may still fail when the stage begins the copy: that is
//! the stage's to report (`detail=store-error`), not a decision.

use crate::cache::cache_control::CacheControl;
use crate::cache::{storable, NotStorable, PolicyConfig};
use crate::cache_rules::PolicyRule;
use crate::cache_status::Detail;
use http::{HeaderMap, Method};

/// The request a response answers, as [`keep`] reads it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The request method (RFC 9111 section 3: only GET responses are stored).
    pub method: &'a Method,
    /// The request's header fields (`Authorization`, and those `Vary` nominates).
    pub headers: &'a HeaderMap,
    /// The request's parsed `Cache-Control` ([`CacheControl::from_headers`]).
    pub cache_control: &'a CacheControl,
    /// The primary cache key (the target URI, RFC 9111 section 4.1), which
    /// the per-URL rules match.
    pub primary: &'a str,
}

/// The origin's response, as [`keep`] reads it.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    /// The status code.
    pub status: u16,
    /// The response's header fields, as received (hop-by-hop fields still there).
    pub headers: &'a HeaderMap,
    /// The body's length in bytes when the response announces it
    /// (`Content-Length`); `None` when it is framed otherwise.
    pub content_length: Option<u64>,
}

/// The operator's choices [`keep`] follows.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The `[cache]` tunables RFC 9111 leaves to the cache (a shared cache
    /// or a private one).
    pub policy: &'a PolicyConfig,
    /// The per-URL policy rules (`[[cache.rules]]`), tried in order.
    pub cache_rules: &'a [PolicyRule],
    /// What is recorded for offline replay (`[record]`).
    pub record: RecordRules<'a>,
}

/// The size limit [`keep`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest body stored, in bytes (`cache.max_object_size`).
    pub max_object_size: u64,
}

/// `[record]` as [`keep`] reads it (SPEC section 6): which final responses
/// are kept for offline replay beside the HTTP cache.
#[derive(Debug, Clone, Copy)]
pub struct RecordRules<'a> {
    /// `record.mode = "all"`: responses are recorded whether or not the
    /// cache stores them (`"cacheable"`: the cache is the record).
    pub all: bool,
    /// `record.methods`: the methods whose responses are recorded.
    pub methods: &'a [String],
    /// `record.no_store`: record `no-store` responses too.
    pub no_store: bool,
}

impl RecordRules<'_> {
    /// True when responses to `method` are recorded at all: `record.mode =
    /// "all"` and `method` is one of `record.methods`.
    pub fn records_method(&self, method: &Method) -> bool {
        self.all && self.methods.iter().any(|m| m.as_bytes() == method.as_str().as_bytes())
    }

    /// True when a final response with `response_headers` to a `method`
    /// request with `request_cc` is recorded: its method is recorded, and
    /// neither side said `no-store` (RFC 9111 sections 5.2.1.5 and 5.2.2.5)
    /// unless `record.no_store`.
    pub fn wants(
        &self,
        method: &Method,
        request_cc: &CacheControl,
        response_headers: &HeaderMap,
    ) -> bool {
        if !self.records_method(method) {
            return false;
        }
        if self.no_store {
            return true;
        }
        !request_cc.no_store && !CacheControl::from_headers(response_headers).no_store
    }
}

/// What becomes of a response ([`keep`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Stored for the cache (RFC 9111 section 3) under `secondary_key`, the
    /// request's values of the fields `Vary` nominates (section 4.1); also
    /// under the record key when `record` (SPEC section 6).
    Store {
        /// The secondary cache key ([`crate::cache::key::secondary_key`]).
        secondary_key: Vec<u8>,
        /// Recorded for offline replay as well.
        record: bool,
    },
    /// Not stored for the cache, `why` being the `Cache-Status` detail
    /// (RFC 9211 section 2.8), but recorded for offline replay under the
    /// record key (SPEC section 6).
    Record {
        /// Why the cache does not store it.
        why: Detail,
    },
    /// Neither stored nor recorded: passed through, `why` being the
    /// `Cache-Status` detail.
    Neither {
        /// Why the cache does not store it.
        why: Detail,
    },
}

impl Keep {
    /// Why the cache does not store the response (`None`: it does).
    pub fn not_stored(&self) -> Option<Detail> {
        match self {
            Keep::Store { .. } => None,
            Keep::Record { why } | Keep::Neither { why } => Some(*why),
        }
    }

    /// True when the response is recorded for offline replay.
    pub fn records(&self) -> bool {
        matches!(self, Keep::Store { record: true, .. } | Keep::Record { .. })
    }
}

/// Decides what becomes of `response`, the origin's answer to `request`:
/// stored for the cache, recorded for replay, both, or neither.
///
/// - RFC 9111 section 3 ([`crate::cache::storable()`]): a GET, a final status the
///   cache understands (not 206 or 304; section 5.2.2.3 for
///   `must-understand`), no `no-store` on either side (sections 5.2.1.5,
///   5.2.2.5), no `private` in a shared cache (5.2.2.7), no
///   `Authorization` unless the response allows sharing it (3.5), no
///   `Vary: *` (4.1), and explicit freshness or a heuristically cacheable
///   status (4.2.2);
/// - then `limits.max_object_size` against the announced length
///   (`detail=too-large`);
/// - then the first `[[cache.rules]]` matching `request.primary`:
///   `never_store` or a status in `skip_status` is not stored
///   (`detail=rule`, unless RFC 9111 already refused it); a status in
///   `store_status`, or any rule with `min_ttl`, stores a GET response RFC
///   9111 refused for its status or for lack of freshness information
///   (`Vary: *` stays refused);
/// - then `[record]` ([`RecordRules::wants`]), except for a 304 or 206
///   (they answer the client's own conditional or range request, not the
///   URL) and for a URL a `never_store` rule keeps off the disk.
pub fn keep(
    request: &Request<'_>,
    response: &Response<'_>,
    rules: &Rules<'_>,
    limits: &Limits,
) -> Keep {
    let secondary_key = crate::cache::key::secondary_key(response.headers, request.headers);
    let mut not_stored: Option<Detail> = if request.method != Method::GET {
        Some(Detail::Method)
    } else if let Err(why) = storable(
        request.method,
        request.cache_control,
        request.headers,
        response.status,
        response.headers,
        rules.policy,
    ) {
        Some(not_storable_detail(why))
    } else if secondary_key.is_none() {
        Some(Detail::VaryStar)
    } else if response.content_length.is_some_and(|l| l > limits.max_object_size) {
        Some(Detail::TooLarge)
    } else {
        None
    };
    let rule = crate::cache_rules::find(rules.cache_rules, request.primary);
    let never_store = rule.is_some_and(|r| r.never_store);
    if let Some(rule) = rule {
        if rule.never_store || rule.skip_status.contains(&response.status) {
            not_stored = not_stored.or(Some(Detail::Rule));
        } else if matches!(not_stored, Some(Detail::NoFreshnessInformation | Detail::Status))
            && (rule.store_status.contains(&response.status) || rule.min_ttl.is_some())
            && request.method == Method::GET
            && secondary_key.is_some()
        {
            not_stored = None;
        }
    }
    let record = !never_store
        && response.status != 304
        && response.status != 206
        && rules.record.wants(request.method, request.cache_control, response.headers);
    match (not_stored, secondary_key) {
        (None, Some(secondary_key)) => Keep::Store { secondary_key, record },
        (why, _) => {
            let why = why.unwrap_or(Detail::VaryStar);
            if record {
                Keep::Record { why }
            } else {
                Keep::Neither { why }
            }
        }
    }
}

/// The `Cache-Status` detail for a response RFC 9111 section 3 does not
/// let the cache store.
fn not_storable_detail(why: NotStorable) -> Detail {
    match why {
        NotStorable::Method => Detail::Method,
        NotStorable::Status => Detail::Status,
        NotStorable::NoStore => Detail::NoStore,
        NotStorable::Private => Detail::Private,
        NotStorable::Authorization => Detail::Authorization,
        NotStorable::NoFreshnessOrValidator => Detail::NoFreshnessInformation,
        NotStorable::VaryStar => Detail::VaryStar,
    }
}

#[cfg(test)]
mod tests {
    //! One test per clause of [`keep`], named by the section it follows
    //! (RFC 9111, or SPEC section 6 for the operator's rules and the record).

    use super::*;
    use std::time::Duration;

    const URL: &str = "http://example.com/a";

    fn hm(fields: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in fields {
            h.append(
                http::header::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    /// One decision: `method` with `request` fields, answered `status`
    /// with `response` fields, under the default shared-cache policy, a
    /// 1000-byte limit, `cache_rules` and `record`.
    struct Case<'a> {
        method: Method,
        request: HeaderMap,
        status: u16,
        response: HeaderMap,
        content_length: Option<u64>,
        policy: PolicyConfig,
        cache_rules: Vec<PolicyRule>,
        record: RecordRules<'a>,
    }

    const NO_RECORD: RecordRules<'static> =
        RecordRules { all: false, methods: &[], no_store: false };

    fn case(status: u16, response: &[(&str, &str)]) -> Case<'static> {
        Case {
            method: Method::GET,
            request: HeaderMap::new(),
            status,
            response: hm(response),
            content_length: None,
            policy: PolicyConfig::default(),
            cache_rules: Vec::new(),
            record: NO_RECORD,
        }
    }

    impl Case<'_> {
        fn keep(&self) -> Keep {
            let cache_control = CacheControl::from_headers(&self.request);
            keep(
                &Request {
                    method: &self.method,
                    headers: &self.request,
                    cache_control: &cache_control,
                    primary: URL,
                },
                &Response {
                    status: self.status,
                    headers: &self.response,
                    content_length: self.content_length,
                },
                &Rules {
                    policy: &self.policy,
                    cache_rules: &self.cache_rules,
                    record: self.record,
                },
                &Limits { max_object_size: 1000 },
            )
        }

        fn not_stored(&self) -> Option<Detail> {
            self.keep().not_stored()
        }
    }

    fn rule(toml_rule: &str) -> PolicyRule {
        #[derive(serde::Deserialize)]
        struct Wrap {
            r: PolicyRule,
        }
        toml::from_str::<Wrap>(&format!("[r]\n{toml_rule}")).unwrap().r
    }

    fn record_all(methods: &[String]) -> RecordRules<'_> {
        RecordRules { all: true, methods, no_store: false }
    }

    fn get_head() -> Vec<String> {
        vec!["GET".into(), "HEAD".into()]
    }

    #[test]
    fn section_3_a_get_with_explicit_freshness_is_stored_under_its_secondary_key() {
        let mut c = case(200, &[("cache-control", "max-age=60"), ("vary", "Accept")]);
        c.request = hm(&[("accept", "text/html")]);
        let want = crate::cache::key::secondary_key(&c.response, &c.request).unwrap();
        assert_eq!(c.keep(), Keep::Store { secondary_key: want, record: false });
    }

    #[test]
    fn section_3_only_get_responses_are_stored() {
        for m in [Method::HEAD, Method::POST, Method::PUT, Method::OPTIONS] {
            let mut c = case(200, &[("cache-control", "max-age=60")]);
            c.method = m.clone();
            assert_eq!(c.keep(), Keep::Neither { why: Detail::Method }, "{m}");
        }
    }

    #[test]
    fn section_3_only_final_statuses_and_not_206_or_304_are_stored() {
        for status in [100, 103, 206, 304] {
            let c = case(status, &[("cache-control", "max-age=60")]);
            assert_eq!(c.not_stored(), Some(Detail::Status), "{status}");
        }
    }

    #[test]
    fn section_5_2_2_3_must_understand_needs_a_status_the_cache_understands() {
        let c = case(299, &[("cache-control", "max-age=60, must-understand")]);
        assert_eq!(c.not_stored(), Some(Detail::Status));
        // An understood status stores, and the response's no-store is ignored.
        let c = case(200, &[("cache-control", "max-age=60, must-understand, no-store")]);
        assert_eq!(c.not_stored(), None);
    }

    #[test]
    fn section_3_no_store_in_the_request_is_never_stored() {
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.request = hm(&[("cache-control", "no-store")]);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::NoStore });
    }

    #[test]
    fn section_3_no_store_in_the_response_is_never_stored() {
        let c = case(200, &[("cache-control", "max-age=60, no-store")]);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::NoStore });
    }

    #[test]
    fn section_3_private_is_not_stored_by_a_shared_cache() {
        let mut c = case(200, &[("cache-control", "max-age=60, private")]);
        assert_eq!(c.not_stored(), Some(Detail::Private));
        c.policy.shared = false;
        assert_eq!(c.not_stored(), None);
    }

    #[test]
    fn section_3_5_authorization_needs_public_s_maxage_or_must_revalidate() {
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.request = hm(&[("authorization", "Basic YTpi")]);
        assert_eq!(c.not_stored(), Some(Detail::Authorization));
        for allows in ["public, max-age=60", "s-maxage=60", "max-age=60, must-revalidate"] {
            c.response = hm(&[("cache-control", allows)]);
            assert_eq!(c.not_stored(), None, "{allows}");
        }
    }

    #[test]
    fn section_4_1_vary_star_is_not_stored() {
        let c = case(200, &[("cache-control", "max-age=60"), ("vary", "Accept, *")]);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::VaryStar });
    }

    #[test]
    fn section_3_explicit_freshness_or_a_heuristically_cacheable_status() {
        // Heuristically cacheable (RFC 9110 section 15.1) without any freshness.
        for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
            assert_eq!(case(status, &[]).not_stored(), None, "{status}");
        }
        // Not heuristically cacheable: only with explicit freshness.
        for status in [302, 303, 307, 403, 500, 503] {
            assert_eq!(case(status, &[]).not_stored(), Some(Detail::NoFreshnessInformation));
            for explicit in [
                ("cache-control", "max-age=60"),
                ("cache-control", "s-maxage=60"),
                ("cache-control", "public"),
                ("expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
                // An invalid Expires is explicit too (already expired, section 5.3).
                ("expires", "0"),
            ] {
                assert_eq!(case(status, &[explicit]).not_stored(), None, "{status} {explicit:?}");
            }
        }
    }

    #[test]
    fn max_object_size_refuses_an_announced_length_over_the_limit() {
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.content_length = Some(1000);
        assert_eq!(c.not_stored(), None);
        c.content_length = Some(1001);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::TooLarge });
        // A length not announced is measured while the body is copied.
        c.content_length = None;
        assert_eq!(c.not_stored(), None);
        // RFC 9111's reason comes first.
        c.content_length = Some(1001);
        c.response = hm(&[("cache-control", "no-store")]);
        assert_eq!(c.not_stored(), Some(Detail::NoStore));
    }

    #[test]
    fn spec_6_a_never_store_rule_keeps_the_url_out_of_the_cache_and_the_record() {
        let methods = get_head();
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.cache_rules = vec![rule("never_store = true")];
        c.record = record_all(&methods);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::Rule });
        // RFC 9111's own reason is kept.
        c.response = hm(&[("cache-control", "private")]);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::Private });
    }

    #[test]
    fn spec_6_a_rule_matches_the_host_and_path_of_the_primary_key() {
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.cache_rules = vec![rule("host = \"other.example\"\nnever_store = true")];
        assert_eq!(c.not_stored(), None);
        c.cache_rules = vec![rule("host = \"*.com\"\npath_prefix = \"/a\"\nnever_store = true")];
        assert_eq!(c.not_stored(), Some(Detail::Rule));
    }

    #[test]
    fn spec_6_skip_status_is_not_stored_and_is_still_recorded() {
        let methods = get_head();
        let mut c = case(404, &[("cache-control", "max-age=60")]);
        c.cache_rules = vec![rule("skip_status = [404]")];
        assert_eq!(c.keep(), Keep::Neither { why: Detail::Rule });
        c.record = record_all(&methods);
        assert_eq!(c.keep(), Keep::Record { why: Detail::Rule });
        c.status = 200;
        assert_eq!(c.not_stored(), None);
    }

    #[test]
    fn spec_6_store_status_stores_what_rfc_9111_finds_no_freshness_information_for() {
        let mut c = case(302, &[]);
        c.cache_rules = vec![rule("store_status = [302]")];
        assert_eq!(c.not_stored(), None);
        c.status = 303;
        assert_eq!(c.not_stored(), Some(Detail::NoFreshnessInformation));
        // Never over no-store, private or Vary: *.
        c.status = 302;
        for refused in [("cache-control", "no-store"), ("cache-control", "private"), ("vary", "*")]
        {
            c.response = hm(&[refused]);
            assert!(c.not_stored().is_some(), "{refused:?}");
        }
    }

    #[test]
    fn spec_6_min_ttl_stores_any_status_rfc_9111_refused_for_its_status_or_freshness() {
        let mut c = case(302, &[]);
        c.cache_rules = vec![rule("min_ttl = \"1m\"")];
        assert_eq!(c.not_stored(), None);
        assert_eq!(c.cache_rules[0].min_ttl, Some(Duration::from_secs(60)));
        // A GET only.
        c.method = Method::HEAD;
        assert_eq!(c.not_stored(), Some(Detail::Method));
    }

    #[test]
    fn spec_6_record_all_keeps_a_final_response_the_cache_does_not() {
        let methods = get_head();
        let mut c = case(200, &[("cache-control", "private")]);
        c.record = record_all(&methods);
        assert_eq!(c.keep(), Keep::Record { why: Detail::Private });
        assert!(c.keep().records());
        // The answer to a HEAD: recorded, never stored.
        c.method = Method::HEAD;
        assert_eq!(c.keep(), Keep::Record { why: Detail::Method });
        // A method not in record.methods.
        c.method = Method::POST;
        assert_eq!(c.keep(), Keep::Neither { why: Detail::Method });
    }

    #[test]
    fn spec_6_record_all_records_what_the_cache_stores_too() {
        let methods = get_head();
        let mut c = case(200, &[("cache-control", "max-age=60")]);
        c.record = record_all(&methods);
        assert!(matches!(c.keep(), Keep::Store { record: true, .. }));
        // record.mode = "cacheable": the cache is the record.
        c.record = RecordRules { all: false, methods: &methods, no_store: true };
        assert!(matches!(c.keep(), Keep::Store { record: false, .. }));
        c.record = record_all(&[]);
        assert!(!c.keep().records());
    }

    #[test]
    fn spec_6_no_store_is_recorded_only_with_record_no_store() {
        let methods = get_head();
        let mut c = case(200, &[("cache-control", "no-store")]);
        c.record = record_all(&methods);
        assert_eq!(c.keep(), Keep::Neither { why: Detail::NoStore });
        c.record.no_store = true;
        assert_eq!(c.keep(), Keep::Record { why: Detail::NoStore });
        c.response = HeaderMap::new();
        c.request = hm(&[("cache-control", "no-store")]);
        assert_eq!(c.keep(), Keep::Record { why: Detail::NoStore });
        c.record.no_store = false;
        assert_eq!(c.keep(), Keep::Neither { why: Detail::NoStore });
    }

    #[test]
    fn spec_6_a_304_or_206_is_never_recorded() {
        let methods = get_head();
        for status in [304, 206] {
            let mut c = case(status, &[]);
            c.record = record_all(&methods);
            assert_eq!(c.keep(), Keep::Neither { why: Detail::Status }, "{status}");
        }
    }
}
