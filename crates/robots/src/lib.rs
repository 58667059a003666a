//! crawlcache's robots.txt engine: an RFC 9309 parser and matcher that
//! gives the verdicts of Google's open-source library
//! (github.com/google/robotstxt).
//!
//! [`RobotsTxt::parse`] reads a body once into a compiled rule set;
//! [`RobotsTxt::check`] then answers (product token, URL) questions without
//! looking at the body again. The parse keeps a [`LineReport`] per line, the
//! `Sitemap` values and the `Crawl-delay` values.
//!
//! # Behaviour (Google's library, which implements RFC 9309)
//! - Lines end at LF, CR or CRLF; a leading, possibly partial, UTF-8 BOM is
//!   skipped; `#` starts a comment anywhere; lines are cut after
//!   [`MAX_LINE_BYTES`] bytes; the rest of a line after a NUL byte is
//!   ignored (Google reads lines as C strings). There is no size limit
//!   on the body: keeping only the first 500 KiB is the fetcher's job.
//! - Keys match by case-insensitive prefix, with Google's accepted
//!   misspellings (`useragent`, `user agent`, `dissallow`, `dissalow`,
//!   `disalow`, `diasllow`, `disallaw`, `site-map`); `allow` has none. A
//!   missing colon is accepted only when the line is exactly two
//!   whitespace-separated tokens.
//! - Groups (§2.2.1): consecutive `User-agent` lines share the rules that
//!   follow, even across blank, `Sitemap` or unknown lines; rules before any
//!   `User-agent` line are ignored; all groups naming a product token merge;
//!   the `*` groups apply only when no group names the token. A `User-agent`
//!   value is cut at the first byte outside `[A-Za-z_-]` and compared with
//!   the caller's token whole and case-insensitively (no prefix matching:
//!   `Googlebot-Image` does not fall back to `Googlebot`).
//! - Matching (§2.2.2, §2.2.3): patterns are escaped like Google's
//!   `MaybeEscapePattern` ([`escape_pattern`]); nothing is ever decoded,
//!   on either side, so `%7E` and `~` never match each other. The URL is
//!   reduced to path, params and query ([`path_params_query`]). `*` matches
//!   any bytes, a final `$` anchors. The longest pattern (in bytes after
//!   escaping, `*` and `$` included) wins; `Allow` wins ties; an empty
//!   pattern matches nothing. `Allow: /d/index.htm*` also allows `/d/`.
//!   A verdict names its rule as the file wrote it; bytes that are not
//!   UTF-8 are named `%XX`, as the file has them ([`octets_text`]).
//! - `Crawl-delay` (not in RFC 9309; §2.2.4 lets crawlers read other
//!   records; Google ignores it) is recorded in seconds, fractions allowed,
//!   invalid values ignored. It never ends a group (as in Google's parser, so
//!   the rules are unaffected), and it applies to the `User-agent` lines above
//!   it in its group: in `User-agent: *` / `Crawl-delay: 10` / `User-agent:
//!   fastbot` / `Disallow: /x` both agents share the rule, only `*` gets the
//!   delay. A token gets the first such value in file order, from the groups
//!   that apply to it (those naming it, else the `*` groups).
//!
//! # Deliberate deviations from Google's library
//! 1. **`/robots.txt` is always allowed** (RFC 9309 §2.2.2: "The
//!    /robots.txt URI is implicitly allowed"): a URL whose path and query are
//!    exactly `/robots.txt` is allowed whatever the rules say; Google's
//!    library applies the rules to it. The verdict then has no rule and no
//!    line. `/robots.txt?x` and `/robots.txt/x` follow the rules. Tested by
//!    `robots_txt::tests::rfc9309_2_2_2_robots_txt_is_implicitly_allowed` and by
//!    `crates/robots/tests/robots_vectors.rs`
//!    `google_probe_vectors_agree_except_documented_robots_txt_deviation`,
//!    which expects the opposite of Google's answer for exactly that record
//!    (`robots_txt_disallow_all`).
//!
//! Nothing else deviates: the vector, probe and corpus tests in this
//! crate's `tests/` compare every verdict with Google's (their data is in
//! `testdata/robots/` at the workspace's root).
//!
//! # Layout
//! The synchronous engine, built with `default-features = false` (what the
//! fuzz targets in `fuzz/` use): the parser and matcher ([`RobotsTxt`],
//! [`product_token_from_user_agent`]), content codings
//! ([`decode`]), snapshots and their states ([`snapshot`], [`origin_rules`]),
//! the decision of a fetch attempt ([`fetch`], over the [`fetch::RobotsFetch`]
//! trait, runtime-agnostic) and how one ended ([`outcome`]: the cause of a
//! failure and what fixes it), fetch identities ([`identity`]), pacing
//! ([`politeness`]), enforcement ([`enforce`]) and the `[robots]` settings
//! ([`settings`]).
//!
//! The `runtime` feature (default) adds [`registry`]: the per-origin
//! registry with background refreshes on tokio and snapshots persisted in
//! sled. The fetcher over the proxy's upstream client lives in the proxy
//! (`crawlcache::robots::http_fetch`).
//!
//! This crate uses no other crate of the workspace but `crawlcache-base`.

pub mod decode;
pub mod enforce;
pub mod fetch;
pub mod identity;
pub mod origin_rules;
pub mod outcome;
mod parse;
mod pattern;
pub mod politeness;
#[cfg(feature = "runtime")]
pub mod registry;
mod robots_txt;
mod rules;
pub mod settings;
pub mod snapshot;
mod token;

pub use parse::{escape_pattern, octets_text, LineMetadata, LineReport, LineTag, MAX_LINE_BYTES};
pub use pattern::path_params_query;
pub use robots_txt::{RobotsTxt, Verdict};
pub use token::{is_valid_product_token, product_token_from_user_agent};
