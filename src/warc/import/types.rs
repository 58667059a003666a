//! The records and payloads an import holds while it reads: what the
//! files of [`super`] share.

use sha2::{Digest, Sha256};

use crate::warc::http::Field;
use crate::warc::stream::Offset;
use crawlcache_policy::cache::PolicyConfig;
use crawlcache_policy::cache::StoredResponse;
use crawlcache_policy::key_rules::KeyRule;
use crawlcache_store::CommittedBody;

/// The index tree (beside the store's own, [`crawlcache_store::Store::extra_tree`]) mapping
/// the payload digests of imported responses to the entry holding the
/// payload, so that a later import's revisits find it: key the digest
/// ([`PayloadDigest`]), value the body's SHA-256 (32 bytes), its length (8
/// bytes, big-endian), the entry's primary key, a 0 byte, its secondary
/// key. A row whose entry no longer holds that body is ignored.
pub const DIGEST_TREE: &str = "warc_payload_digests";

/// What an import needs from the configuration.
#[derive(Debug, Clone)]
pub struct Options {
    /// `cache.key_rules`: a URL's record key is its cache key.
    pub key_rules: Vec<KeyRule>,
    /// Which fields are kept (`cache.store_set_cookie`).
    pub policy: PolicyConfig,
}

/// What an import of one or more files did. Every record read is in
/// exactly one of `imported`, `already_present`, `older_kept_out`,
/// `failed` and `skipped_by_type` (see [`Summary::accounted`]); `revisits_resolved`
/// and `uris_normalised` say more about some of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Records read (well-formed or not).
    pub records: u64,
    /// Responses, resources and revisits stored as records.
    pub imported: u64,
    /// Responses, resources and revisits identical to what the store
    /// already holds for their URL and variant (the same head and the same
    /// body): not stored again.
    #[serde(default)]
    pub already_present: u64,
    /// Captures not stored because a newer capture of the same URL and
    /// variant is stored (by `WARC-Date`).
    #[serde(default)]
    pub older_kept_out: u64,
    /// Records reported and skipped: malformed, cut short, not storable.
    /// (Named `skipped` by the release before per-type counts.)
    #[serde(alias = "skipped")]
    pub failed: u64,
    /// Well-formed records that replay nothing, by `WARC-Type` (lower
    /// case): `warcinfo`, `metadata`, `request` (read for its response's
    /// method and variant), `conversion`, `continuation`, a `response`,
    /// `resource` or `revisit` whose target is not http(s) (`dns:`,
    /// `urn:`), a `revisit` whose original is found nowhere, and unknown
    /// types (at most `MAX_TYPES` names, the rest under `other`).
    #[serde(default)]
    pub skipped_by_type: std::collections::BTreeMap<String, u64>,
    /// Revisit records stored with the payload they refer to (counted in
    /// `imported`, `already_present` or `older_kept_out` too).
    #[serde(default)]
    pub revisits_resolved: u64,
    /// Target URIs turned into the form a client sends (an IRI, say).
    #[serde(default)]
    pub uris_normalised: u64,
}

/// The most `WARC-Type` names [`Summary::skipped_by_type`] keeps apart (a file of
/// made-up types cannot grow it without bound); the others are `other`.
pub const MAX_TYPES: usize = 24;

impl Summary {
    /// Adds `other` to this one.
    pub fn add(&mut self, other: &Summary) {
        self.records += other.records;
        self.imported += other.imported;
        self.already_present += other.already_present;
        self.older_kept_out += other.older_kept_out;
        self.failed += other.failed;
        for (kind, n) in &other.skipped_by_type {
            self.skip_n(kind, *n);
        }
        self.revisits_resolved += other.revisits_resolved;
        self.uris_normalised += other.uris_normalised;
    }

    /// Counts one record of `WARC-Type` `kind` as skipped.
    pub fn skip(&mut self, kind: &str) {
        self.skip_n(kind, 1);
    }

    fn skip_n(&mut self, kind: &str, n: u64) {
        let mut name: String = kind
            .trim()
            .chars()
            .filter(|c| c.is_ascii_graphic())
            .take(40)
            .collect::<String>()
            .to_ascii_lowercase();
        if name.is_empty() {
            name = "none".into();
        }
        if !self.skipped_by_type.contains_key(&name) && self.skipped_by_type.len() >= MAX_TYPES {
            name = "other".into();
        }
        *self.skipped_by_type.entry(name).or_default() += n;
    }

    /// Records skipped as not replayable, all types together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped_by_type.values().sum()
    }

    /// The records the categories account for: `imported +
    /// already_present + older_kept_out + failed + skipped_by_type`, which equals
    /// `records` once a whole import is done ([`super::Import::finish`]).
    pub fn accounted(&self) -> u64 {
        self.imported
            + self.already_present
            + self.older_kept_out
            + self.failed
            + self.skipped_total()
    }
}

impl std::fmt::Display for Summary {
    /// `N records read: M imported, A already present, O older captures
    /// kept out, F failed, S skipped (request 4, warcinfo 1); R revisits
    /// resolved, U target URIs normalised` (the types in name order, the
    /// parenthesis only when something was skipped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} records read: {} imported, {} already present, {} older captures kept out, {} failed, {} skipped",
            self.records,
            self.imported,
            self.already_present,
            self.older_kept_out,
            self.failed,
            self.skipped_total()
        )?;
        if !self.skipped_by_type.is_empty() {
            let kinds: Vec<String> =
                self.skipped_by_type.iter().map(|(k, n)| format!("{k} {n}")).collect();
            write!(f, " ({})", kinds.join(", "))?;
        }
        write!(
            f,
            "; {} revisits resolved, {} target URIs normalised",
            self.revisits_resolved, self.uris_normalised
        )
    }
}

/// A `WARC-Payload-Digest` in one form whatever its encoding: the
/// algorithm lower-cased, `:`, the digest's bytes in lower-case hex (read
/// from base32, as wget and Heritrix write it, hex or base64). A value
/// that decodes in none of them is kept as written, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PayloadDigest(pub(super) String);

impl PayloadDigest {
    /// Reads a digest field value (`sha1:BASE32...`); `None` when empty.
    pub fn parse(value: &str) -> Option<PayloadDigest> {
        let (algo, digest) = value.trim().split_once(':')?;
        let (algo, digest) = (algo.trim().to_ascii_lowercase(), digest.trim());
        if algo.is_empty() || digest.is_empty() {
            return None;
        }
        let expected = match algo.as_str() {
            "sha1" => Some(20),
            "sha256" | "sha-256" => Some(32),
            "md5" => Some(16),
            _ => None,
        };
        let upper = digest.to_ascii_uppercase();
        let candidates = [
            data_encoding::BASE32.decode(upper.as_bytes()).ok(),
            data_encoding::BASE32_NOPAD.decode(upper.trim_end_matches('=').as_bytes()).ok(),
            hex::decode(digest).ok(),
            data_encoding::BASE64.decode(digest.as_bytes()).ok(),
        ];
        let raw = candidates.into_iter().flatten().find(|b| expected.is_none_or(|n| b.len() == n));
        let algo = if algo == "sha-256" { "sha256".to_string() } else { algo };
        Some(match raw {
            Some(b) => PayloadDigest(format!("{algo}:{}", hex::encode(b))),
            None => PayloadDigest(format!("{algo}:{}", digest.to_ascii_lowercase())),
        })
    }

    /// The digest of `bytes` in the same algorithm, when it is one
    /// crawlcache computes (SHA-1, SHA-256) and this one decoded.
    pub(super) fn of(
        &self,
        bytes_sha1: &sha1_smol::Sha1,
        bytes_sha256: &Sha256,
    ) -> Option<PayloadDigest> {
        let (algo, digest) = self.0.split_once(':')?;
        // A value that did not decode cannot be checked.
        if !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        match algo {
            "sha1" if digest.len() == 40 => {
                Some(PayloadDigest(format!("sha1:{}", bytes_sha1.digest())))
            }
            "sha256" if digest.len() == 64 => Some(PayloadDigest(format!(
                "sha256:{}",
                hex::encode(bytes_sha256.clone().finalize())
            ))),
            _ => None,
        }
    }

    /// The SHA-256 it names, for a `sha256:` digest.
    pub(super) fn sha256_hex(&self) -> Option<&str> {
        self.0.strip_prefix("sha256:").filter(|h| h.len() == 64)
    }
}

/// A request record, as far as the record key needs it.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) id: String,
    pub(super) uri: String,
    pub(super) method: String,
    /// The request target of its request line (origin-form, as sent).
    pub(super) target: String,
    /// Hex SHA-256 of the request body (methods other than GET and HEAD).
    pub(super) body_sha256: Option<String>,
    pub(super) date_ms: Option<u64>,
    pub(super) fields: Vec<Field>,
    /// The record IDs it names in `WARC-Concurrent-To`.
    pub(super) concurrent: Vec<String>,
}

/// What a revisit record refers to (WARC/1.1 section 6.7).
#[derive(Debug, Clone)]
pub(super) struct RevisitOf {
    pub(super) refers_to: Option<String>,
    pub(super) target: Option<String>,
    pub(super) date_ms: Option<u64>,
    /// The `server-not-modified` profile, or a `304` head: the original's
    /// head is replayed, freshened by this one's fields.
    pub(super) not_modified: bool,
}

/// A response (or revisit) read and its body written (pinned), waiting
/// for its request.
pub(super) struct Pending {
    pub(super) file: u32,
    pub(super) offset: Offset,
    pub(super) id: String,
    pub(super) concurrent: Vec<String>,
    pub(super) uri: String,
    pub(super) date_ms: u64,
    pub(super) status: u16,
    pub(super) fields: Vec<Field>,
    pub(super) body: Option<CommittedBody>,
    /// The head announced a body (`Content-Length` > 0) the block lacks:
    /// fine for an answer to HEAD only.
    pub(super) body_missing: Option<u64>,
    pub(super) body_sha256: Option<String>,
    pub(super) payload_digest: Option<PayloadDigest>,
    pub(super) revisit: Option<RevisitOf>,
}

/// Where a payload of this import is: its response record, and its body
/// as first stored (it may have been released since).
#[derive(Debug, Clone, Copy)]
pub(super) struct Source {
    pub(super) file: u32,
    pub(super) offset: Offset,
    /// SHA-256 and length of the body; `None` for a response without one.
    pub(super) body: Option<([u8; 32], u64)>,
}

impl Source {
    pub(super) fn committed(&self) -> Option<CommittedBody> {
        self.body.map(|(h, len)| CommittedBody { sha256: hex::encode(h), len })
    }
}

/// The payload a revisit refers to, found.
pub(super) enum Payload {
    /// A response of this import.
    InImport(Source),
    /// A stored entry's body (and head).
    Stored { body: Option<CommittedBody>, head: Option<StoredResponse> },
}

/// The most bytes of field lines the revisits waiting for their original
/// may hold (a file of revisits whose originals never come cannot fill
/// the memory): past it, a revisit not resolved when read is reported.
pub const MAX_DEFERRED_BYTES: usize = 64 * 1024 * 1024;

/// Short, fixed-size keys for the import's maps (the first 16 bytes of a
/// SHA-256 of the text).
pub(super) type MapKey = [u8; 16];

pub(super) fn map_key(parts: &[&[u8]]) -> MapKey {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}
