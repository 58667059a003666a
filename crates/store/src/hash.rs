//! The SHA-256 digests bodies are named by, and the small hash of keys
//! the in-memory filters and counters use.

/// A raw SHA-256 digest.
pub(crate) type Hash = [u8; 32];
/// Parses a lower-case hex SHA-256 as found in a file name or a
/// [`super::CommittedBody`].
pub(crate) fn parse_hash(hex_str: &str) -> Option<Hash> {
    if hex_str.len() != 64
        || !hex_str.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_str, &mut out).ok()?;
    Some(out)
}

/// FNV-1a (64 bits) of `bytes`: the hash of primary keys for the change
/// counters and the filter of stored keys (crates/store/src/presence.rs).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
