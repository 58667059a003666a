//! The record of one stored variant in the fleet tier, as kept in Redis
//! (the field of its secondary key in the hash `entry:{H}`).
//!
//! Layout (all integers big-endian):
//!
//! ```text
//! "CCE1"          magic and version, 4 bytes
//! stored_at_ms    u64: when the publishing node stored it
//! has_body        u8: 0 or 1
//! sha256, len     32 bytes and u64, when has_body = 1
//! head            the rest: the stored head exactly as the local index
//!                 keeps it (crawlcache_policy::cache::StoredResponse::to_bytes)
//! ```
//!
//! A record of 1 KB of fields takes about 1.1 KB. Nothing read back is
//! trusted: [`FleetEntry::decode`] checks the magic, every length, that the
//! head decodes and names the URL asked for, and that the body length is
//! within `cache.max_object_size`.

use crawlcache_policy::cache::StoredResponse;

const MAGIC: &[u8; 4] = b"CCE1";

/// Why a record read from Redis (an entry, [`FleetEntry::decode`], or a
/// robots.txt snapshot, [`crate::robots::decode`]) is not used: it is
/// counted in `crawlcache_fleet_invalid_total` and logged, never trusted.
#[derive(Debug, thiserror::Error)]
pub enum InvalidRecord {
    /// The bytes do not start with the magic of a record of this kind
    /// (`fleet` or `robots`).
    #[error("not a crawlcache {0} record (magic)")]
    Magic(&'static str),
    /// The bytes end inside the part named.
    #[error("record cut short ({0})")]
    CutShort(&'static str),
    /// The record or its body (`what`) is larger than this kind of record
    /// may be, in bytes.
    #[error("{what} of {len} bytes (more than {max})")]
    TooLarge {
        /// `record` or `body`.
        what: &'static str,
        /// Its length in bytes.
        len: u64,
        /// The most accepted, bytes.
        max: u64,
    },
    /// The body is larger than `cache.max_object_size` (both in bytes).
    #[error("body of {len} bytes is over cache.max_object_size ({max})")]
    OverMaxObjectSize {
        /// The body's length, bytes.
        len: u64,
        /// `cache.max_object_size`, bytes.
        max: u64,
    },
    /// The byte saying whether a body follows is neither 0 nor 1.
    #[error("bad body flag {0}")]
    BodyFlag(u8),
    /// A snapshot's head length is longer than the record or 64 KiB.
    #[error("bad head length {0}")]
    HeadLength(usize),
    /// The stored head (or the snapshot's JSON head) does not decode; the
    /// decoder's message when it gave one.
    #[error("the {what} does not decode{}", if .reason.is_empty() { String::new() } else { format!(": {}", .reason) })]
    Undecodable {
        /// `stored head` or `snapshot head`.
        what: &'static str,
        /// What the decoder said (may be empty).
        reason: String,
    },
    /// The record is about another URL or origin than the one asked for.
    #[error("the {what} is for {found}, not {wanted}")]
    Elsewhere {
        /// `stored head` or `snapshot`.
        what: &'static str,
        /// The URL or origin the record names.
        found: String,
        /// The URL or origin asked for.
        wanted: String,
    },
    /// A snapshot of a status that has no body (absent, unreachable) came
    /// with one.
    #[error("a {0} snapshot with a body")]
    UnexpectedBody(&'static str),
    /// The body does not hash to the SHA-256 the record names.
    #[error("the body does not hash to the snapshot's sha256")]
    Hash,
}

/// Most variants one URL keeps in the fleet tier; a node publishing one
/// more first drops the others (a URL varying on that many request fields
/// is not worth sharing).
pub const MAX_VARIANTS: usize = 16;

/// Largest record accepted from Redis, in bytes: the stored head is bounded
/// by the origin head limit (256 KiB by default) plus the URL and the
/// request fields `Vary` names.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// One variant of a URL in the fleet tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetEntry {
    /// The secondary key (RFC 9111 section 4.1), as the local index keys it.
    pub secondary_key: Vec<u8>,
    /// The stored head, in the local index's encoding.
    pub meta: Vec<u8>,
    /// The body's SHA-256 (lower-case hex) and length in bytes, if any.
    pub body: Option<(String, u64)>,
    /// When the publishing node stored it (ms since the Unix epoch).
    pub stored_at_ms: u64,
}

impl FleetEntry {
    /// The record bytes (the hash field's value).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 8 + 1 + 40 + self.meta.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.stored_at_ms.to_be_bytes());
        match &self.body {
            Some((sha, len)) => {
                out.push(1);
                let mut raw = [0u8; 32];
                // A hash that is not 64 hex digits is never published (see
                // `super::tier`); zeros then fail the check on download.
                let _ = hex::decode_to_slice(sha, &mut raw);
                out.extend_from_slice(&raw);
                out.extend_from_slice(&len.to_be_bytes());
            }
            None => out.push(0),
        }
        out.extend_from_slice(&self.meta);
        out
    }

    /// Reads and checks a record for `primary` (its URL must be the one the
    /// head names) under `secondary_key`, with a body of at most `max_len`
    /// bytes. Errors: [`InvalidRecord`], saying what is wrong.
    pub fn decode(
        primary: &str,
        secondary_key: &[u8],
        bytes: &[u8],
        max_len: u64,
    ) -> Result<(FleetEntry, StoredResponse), InvalidRecord> {
        use InvalidRecord::CutShort;
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(InvalidRecord::TooLarge {
                what: "record",
                len: bytes.len() as u64,
                max: MAX_RECORD_BYTES as u64,
            });
        }
        let rest = bytes.strip_prefix(MAGIC.as_slice()).ok_or(InvalidRecord::Magic("fleet"))?;
        let (at, rest) = split(rest, 8).ok_or(CutShort("stored time"))?;
        let stored_at_ms = u64::from_be_bytes(at.try_into().map_err(|_| CutShort("stored time"))?);
        let (flag, rest) = split(rest, 1).ok_or(CutShort("body flag"))?;
        let (body, meta) = match flag[0] {
            0 => (None, rest),
            1 => {
                let (sha, rest) = split(rest, 32).ok_or(CutShort("body hash"))?;
                let (len, rest) = split(rest, 8).ok_or(CutShort("body length"))?;
                let len = u64::from_be_bytes(len.try_into().map_err(|_| CutShort("body length"))?);
                if len > max_len {
                    return Err(InvalidRecord::OverMaxObjectSize { len, max: max_len });
                }
                (Some((hex::encode(sha), len)), rest)
            }
            f => return Err(InvalidRecord::BodyFlag(f)),
        };
        let stored = StoredResponse::from_bytes(meta)
            .ok_or(InvalidRecord::Undecodable { what: "stored head", reason: String::new() })?;
        if stored.url != primary {
            return Err(InvalidRecord::Elsewhere {
                what: "stored head",
                found: stored.url,
                wanted: primary.to_string(),
            });
        }
        let entry = FleetEntry {
            secondary_key: secondary_key.to_vec(),
            meta: meta.to_vec(),
            body,
            stored_at_ms,
        };
        Ok((entry, stored))
    }
}

fn split(b: &[u8], n: usize) -> Option<(&[u8], &[u8])> {
    (b.len() >= n).then(|| b.split_at(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(url: &str) -> Vec<u8> {
        StoredResponse {
            status: 200,
            headers: vec![("cache-control".into(), b"max-age=60".to_vec())],
            request_time_ms: 1,
            response_time_ms: 2,
            url: url.into(),
            vary_request: vec![],
        }
        .to_bytes()
    }

    #[test]
    fn records_round_trip_with_and_without_a_body() {
        let u = "http://e.test/a";
        let sha = crawlcache_robots::snapshot::sha256_hex(b"hello");
        let e = FleetEntry {
            secondary_key: b"gzip".to_vec(),
            meta: head(u),
            body: Some((sha, 5)),
            stored_at_ms: 77,
        };
        let (back, stored) = FleetEntry::decode(u, b"gzip", &e.encode(), 1 << 20).unwrap();
        assert_eq!(back, e);
        assert_eq!(stored.status, 200);
        let e = FleetEntry { secondary_key: vec![], meta: head(u), body: None, stored_at_ms: 1 };
        assert_eq!(FleetEntry::decode(u, b"", &e.encode(), 10).unwrap().0, e);
    }

    #[test]
    fn nothing_from_redis_is_trusted_unchecked() {
        let u = "http://e.test/a";
        let good = FleetEntry {
            secondary_key: vec![],
            meta: head(u),
            body: Some(("ab".repeat(32), 10)),
            stored_at_ms: 1,
        }
        .encode();
        for n in 0..good.len() {
            assert!(
                FleetEntry::decode(u, b"", &good[..n], 1 << 20).is_err(),
                "prefix of {n} bytes"
            );
        }
        let e = FleetEntry::decode("http://e.test/other", b"", &good, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not http://e.test/other"), "{e}");
        assert!(matches!(
            FleetEntry::decode(u, b"", &good, 9),
            Err(InvalidRecord::OverMaxObjectSize { len: 10, max: 9 })
        ));
        let mut bad = good.clone();
        bad[12] = 7;
        assert!(FleetEntry::decode(u, b"", &bad, 1 << 20).is_err());
        assert!(FleetEntry::decode(u, b"", &vec![0u8; MAX_RECORD_BYTES + 1], u64::MAX).is_err());
    }
}
