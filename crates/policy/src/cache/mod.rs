//! HTTP caching decisions (RFC 9111, RFC 5861), kept pure: every function
//! takes parsed headers and a `now`, and returns a value. No I/O, no clock.
//!
//! - [`cache_control`]: the `Cache-Control` / `Pragma` directive parser.
//! - [`key`]: the primary cache key (normalised target URI) and the
//!   secondary key built from the request fields nominated by `Vary`.
//! - [`stored`]: [`StoredResponse`], the stored head of a response, and
//!   its encoding in the store; [`variant`]: which stored variant answers.
//! - `tests.rs`: the decision tests, grouped by field case and by RFC 9111
//!   section (each group names the file below it covers).
//!
//! The decisions, one file per section of RFC 9111, each function naming
//! the section it implements (re-exported here: `cache::decide`,
//! `cache::storable`, ...):
//!
//! - `storable.rs`: section 3 and 3.1, may a response be stored, and which
//!   of its field lines ([`storable`], [`headers_to_store`]).
//! - `freshness.rs`: section 4.2, freshness lifetime, current age, the reuse
//!   decision ([`decide`]); stale on error (4.2.4, RFC 5861).
//! - `validation.rs`: section 4.3, conditional requests, 304 and HEAD
//!   updates ([`freshen`]), a client's own conditionals.
//! - `invalidation.rs`: section 4.4, what an unsafe request invalidates.
//! - `field_lines.rs`: single stored field lines and their dates, shared by all.
//! - `dates.rs`: the HTTP-date parsers, all forms of RFC 9110 section 5.6.7:
//!   strict for `Expires` ([`parse_http_date_strict`]), robust for the
//!   other dates ([`parse_http_date`]).
//!
//! Choices where the RFCs leave room (pinned by tests in `cache/tests.rs`):
//! - `Vary: *` (in any member of any line) is not storable ([`NotStorable::VaryStar`]).
//! - `Set-Cookie` / `Set-Cookie2` are stripped before storing (C08), unless
//!   `PolicyConfig::store_set_cookie`; a qualified `no-cache="set-cookie"` or
//!   `private="set-cookie"` strips them regardless.
//! - Heuristic freshness (section 4.2.2): `heuristic_fraction` of
//!   (`Date` − `Last-Modified`), capped at `heuristic_max`, for heuristically
//!   cacheable statuses or `public`, only without `max-age`, `s-maxage` or
//!   `Expires` (even an invalid one); without `Last-Modified`, `default_ttl`.
//! - A received `Age` follows section 5.1 ([`age_value`]): of a list (one
//!   line or several) the first member counts; an invalid first member (a
//!   sign, a fraction, a parameter, letters, nothing) is ignored, age 0, and
//!   does not make the response stale. http-cache-tests 0.4.5 expects stale
//!   for 9 of its 12 `age-parse-*` tests; crawlcache follows the RFC.
//! - HTTP-dates are read in all three forms of RFC 9110 section 5.6.7, in
//!   any letter case (section 4.2) and with any day name; an RFC 850
//!   two-digit year is placed within 50 years of when the stored response
//!   was received. `Expires` is read exactly by the grammar otherwise
//!   ([`parse_http_date_strict`]): anything else is invalid, and an invalid
//!   `Expires` means already expired (section 5.3), so a near-miss such as
//!   `Fri, 01-Jan-2100 00:00:00 GMT` or extra spaces is not read as the
//!   date it seems to mean (issue 41). `Date`, `Last-Modified` and
//!   `If-Modified-Since` are read robustly as RFC 9110 section 5.6.7
//!   encourages, with loose spacing, a one-digit day and either day name
//!   in either layout ([`parse_http_date`]). A stored `Last-Modified` is
//!   sent back as `If-Modified-Since` byte for byte, whatever its form (RFC
//!   9110 section 13.1.3).
//! - `s-maxage` implies `proxy-revalidate` (section 5.2.2.10): no `max-stale`
//!   and no disconnected stale serving; but the origin's explicit
//!   `stale-while-revalidate` / `stale-if-error` still apply (C23).
//! - A response's own `stale-if-error` bounds stale serving on error, also
//!   when the origin is unreachable (C22 step 4); `max_stale_on_error` applies
//!   only to responses without it.
//! - A 304 never changes the fields that describe the stored content
//!   (`Content-Length`, `Content-Encoding`, `Content-MD5`, `Content-Range`,
//!   digests, `ETag`), and restarts the age calculation from its own `Age`
//!   and `Date`.

pub mod cache_control;
pub mod key;
pub mod stored;
pub mod variant;

pub use stored::{encode_head, from_millis, to_millis, StoredResponse, HEAD_MAGIC};

mod config;
mod dates;
mod field_lines;
mod freshness;
mod invalidation;
mod storable;
mod validation;

pub use config::PolicyConfig;
pub use dates::{parse_http_date, parse_http_date_strict};
pub use freshness::{
    age_value, current_age, decide, decide_bounded, decide_with, freshness_lifetime,
    may_serve_stale_on_error, Decision, Freshness, OriginError, Reuse,
};
pub use invalidation::invalidation_targets;
pub use storable::{
    fields_to_store, headers_to_store, heuristically_cacheable, status_understood, storable,
    NotStorable,
};
pub use validation::{
    client_not_modified, conditional_headers, freshen, head_matches, not_modified_matches,
};

#[cfg(test)]
mod tests;
