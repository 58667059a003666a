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
    /// bytes. Errors name what is wrong.
    pub fn decode(
        primary: &str,
        secondary_key: &[u8],
        bytes: &[u8],
        max_len: u64,
    ) -> Result<(FleetEntry, StoredResponse), String> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(format!("record of {} bytes (more than {MAX_RECORD_BYTES})", bytes.len()));
        }
        let rest =
            bytes.strip_prefix(MAGIC.as_slice()).ok_or("not a crawlcache fleet record (magic)")?;
        let (at, rest) = split(rest, 8).ok_or("record cut short (stored time)")?;
        let stored_at_ms = u64::from_be_bytes(at.try_into().map_err(|_| "stored time")?);
        let (flag, rest) = split(rest, 1).ok_or("record cut short (body flag)")?;
        let (body, meta) = match flag[0] {
            0 => (None, rest),
            1 => {
                let (sha, rest) = split(rest, 32).ok_or("record cut short (body hash)")?;
                let (len, rest) = split(rest, 8).ok_or("record cut short (body length)")?;
                let len = u64::from_be_bytes(len.try_into().map_err(|_| "body length")?);
                if len > max_len {
                    return Err(format!(
                        "body of {len} bytes is over cache.max_object_size ({max_len})"
                    ));
                }
                (Some((hex::encode(sha), len)), rest)
            }
            f => return Err(format!("bad body flag {f}")),
        };
        let stored = StoredResponse::from_bytes(meta).ok_or("the stored head does not decode")?;
        if stored.url != primary {
            return Err(format!("the stored head is for {}, not {primary}", stored.url));
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
        assert!(e.contains("not http://e.test/other"), "{e}");
        assert!(FleetEntry::decode(u, b"", &good, 9).unwrap_err().contains("max_object_size"));
        let mut bad = good.clone();
        bad[12] = 7;
        assert!(FleetEntry::decode(u, b"", &bad, 1 << 20).is_err());
        assert!(FleetEntry::decode(u, b"", &vec![0u8; MAX_RECORD_BYTES + 1], u64::MAX).is_err());
    }
}
