//! WARC files (ISO 28500, WARC/1.1): the exchanges crawlcache holds written
//! out for other tools, and crawls archived by other tools (wget
//! `--warc-file`, warcio, Heritrix) read in for offline replay.
//!
//! - [`reader`]: a streaming reader of plain WARC files and gzip-compressed
//!   ones (one gzip member per record, or the whole file in one member). A
//!   truncated or malformed record is reported with its byte offset and
//!   skipped; reading goes on at the next record.
//! - [`writer`]: writes records, each as its own gzip member (the form
//!   `.warc.gz` tools expect, so a record can be read from its offset alone).
//! - [`http`]: the `application/http` blocks of request and response
//!   records: heads, chunked transfer coding, bodies.
//! - [`export`]: the store's exchanges (HTTP-cache entries and records, SPEC
//!   section 6) as `warcinfo`, `request` and `response` records.
//! - [`import`]: `response`, `resource` and `revisit` records (with their
//!   `request` records) into the record store, bodies into the
//!   content-addressed store; every record read counted by what became of
//!   it ([`import::Summary`]).
//!
//! Digests (`WARC-Block-Digest`, `WARC-Payload-Digest`) are written as
//! `sha1:` and the RFC 4648 base32 form of the SHA-1 (32 characters, no
//! padding): the form wget, Heritrix and warcprox write, the one pywb's
//! and OpenWayback's CDX indexers compute for a record without one (a CDX
//! `digest` column is this value without `sha1:`), and one `warcio check`
//! verifies. A SHA-256 in base32 needs `=` padding, which `warcio check`
//! requires and CDX tools do not expect inside a field; releases before
//! this one wrote that form (`sha256:` base32, padded), and [`import`]
//! still reads it, as it reads hex and base64. Dates (`WARC-Date`) are
//! RFC 3339 UTC to the second, as WARC/1.1 section 5.4 shows them.

pub mod export;
pub mod http;
pub mod import;
pub mod reader;
pub mod stream;
pub mod writer;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The extension field crawlcache writes on the `request` and `response`
/// records of a request with a body (a form's POST): the lower-case hex
/// SHA-256 of that body, which is the record key's `sha256=` (the body
/// itself is not kept, only its hash). Read back by [`import`] when the
/// request record carries no body.
pub const REQUEST_BODY_SHA256: &str = "Crawlcache-Request-Body-SHA256";

/// `sha1:` and the base32 form (RFC 4648 section 6, upper case; 32
/// characters, no padding) of the SHA-1 `digest` (20 bytes), as a WARC
/// digest field value.
pub fn sha1_label(digest: &[u8; 20]) -> String {
    format!("sha1:{}", data_encoding::BASE32_NOPAD.encode(digest))
}

/// The WARC digest field value ([`sha1_label`]) of the SHA-1 of `bytes`.
pub fn sha1_label_of(bytes: &[u8]) -> String {
    sha1_label(&sha1_smol::Sha1::from(bytes).digest().bytes())
}

/// A WARC-Date (RFC 3339 UTC, whole seconds: `2024-05-01T12:00:00Z`) for
/// `ms` milliseconds since the Unix epoch.
pub fn warc_date(ms: u64) -> String {
    crawlcache_base::time::format_rfc3339_seconds(ms / 1000)
}

/// Milliseconds since the Unix epoch of a WARC-Date (RFC 3339, with or
/// without fractional seconds, any offset); `None` when it is not one.
pub fn parse_warc_date(s: &str) -> Option<u64> {
    let t = crawlcache_base::time::parse_rfc3339(s.trim())?;
    u64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as u64
}

/// A new `WARC-Record-ID`: a random (version 4) UUID URN in angle brackets.
pub fn new_record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// A WARC field value that names a URI or record ID, without the angle
/// brackets WARC/1.0 writers (wget) put around `WARC-Target-URI`.
pub fn strip_angle_brackets(v: &str) -> &str {
    let v = v.trim();
    v.strip_prefix('<').and_then(|x| x.strip_suffix('>')).unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_base32_sha1_without_padding_as_wget_and_cdx_indexers_write_them() {
        // sha1("") in base32, as Python's base64.b32encode(hashlib.sha1(b"").digest()) gives
        // and wget writes it: 32 characters, nothing to pad.
        assert_eq!(sha1_label_of(b""), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
        assert_eq!(sha1_label_of(b"AAA\n").len(), "sha1:".len() + 32);
    }

    #[test]
    fn dates_round_trip_to_the_second() {
        assert_eq!(warc_date(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(parse_warc_date("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(parse_warc_date("2023-11-14T22:13:20.5Z"), Some(1_700_000_000_500));
        assert_eq!(parse_warc_date("yesterday"), None);
        assert_eq!(strip_angle_brackets(" <http://a/> "), "http://a/");
        assert_eq!(strip_angle_brackets("http://a/"), "http://a/");
    }
}
