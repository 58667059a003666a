//! [`StoredResponse`]: the head of a stored response (status, fields, the
//! request and response times RFC 9111 section 4.2.3 needs, the request
//! fields `Vary` nominated) and its binary encoding in the store.

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The stored head of a response, as serialized into the store's entry
/// metadata (a compact binary encoding, see [`StoredResponse::to_bytes`];
/// heads written as JSON by store format 1 are still read). Field lines keep
/// their order and repetitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The status code (200, 301, 404, ...).
    pub status: u16,
    /// Response field lines in the order received; names lower-case.
    /// Hop-by-hop fields, `Set-Cookie`, and fields named by qualified
    /// `no-cache="..."` / `private="..."` are already removed.
    pub headers: Vec<(String, Vec<u8>)>,
    /// `request_time` of RFC 9111 section 4.2.3, in milliseconds since the Unix epoch.
    pub request_time_ms: u64,
    /// `response_time` of RFC 9111 section 4.2.3, in milliseconds since the Unix epoch.
    pub response_time_ms: u64,
    /// The normalised target URI (the primary key).
    pub url: String,
    /// The request field lines nominated by `Vary`, as the storing request
    /// carried them (for display; matching uses the secondary key).
    #[serde(default)]
    pub vary_request: Vec<(String, Vec<u8>)>,
}

impl StoredResponse {
    /// The response headers as an [`http::HeaderMap`] (invalid names or values are skipped).
    pub fn header_map(&self) -> http::HeaderMap {
        let mut map = http::HeaderMap::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            if let (Ok(n), Ok(v)) = (
                http::header::HeaderName::from_bytes(name.as_bytes()),
                http::header::HeaderValue::from_bytes(value),
            ) {
                map.append(n, v);
            }
        }
        map
    }

    /// Serializes for the store ([`encode_head`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        encode_head(
            self.status,
            self.request_time_ms,
            self.response_time_ms,
            &self.url,
            self.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
            self.vary_request.iter().map(|(n, v)| (n.as_str(), v.as_slice())),
        )
    }

    /// The JSON encoding written by store format 1 (kept to build fixtures
    /// of that format; [`StoredResponse::from_bytes`] still reads it).
    pub fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses metadata read from the store, in either encoding (binary,
    /// starting with [`HEAD_MAGIC`], or the JSON object of store format 1,
    /// starting with `{`); `None` if it is not a valid record.
    pub fn from_bytes(bytes: &[u8]) -> Option<StoredResponse> {
        match bytes.first()? {
            b'{' => serde_json::from_slice(bytes).ok(),
            _ if bytes.starts_with(&HEAD_MAGIC) => decode_binary(&bytes[2..]),
            _ => None,
        }
    }
}

/// The stored head of a response as [`StoredResponse::to_bytes`] writes it,
/// from borrowed field lines (the miss path encodes the origin's fields
/// without building a [`StoredResponse`]). Layout: [`HEAD_MAGIC`] (2 bytes),
/// `status` (u16 BE), `request_time_ms` and `response_time_ms` (u64 BE
/// each, milliseconds since the Unix epoch), then `url`, the `headers` and
/// the `vary_request` fields, each string as a LEB128 length and its
/// bytes, each list as a LEB128 count and its pairs.
pub fn encode_head<'a, H, V>(
    status: u16,
    request_time_ms: u64,
    response_time_ms: u64,
    url: &str,
    headers: H,
    vary_request: V,
) -> Vec<u8>
where
    H: ExactSizeIterator<Item = (&'a str, &'a [u8])> + Clone,
    V: ExactSizeIterator<Item = (&'a str, &'a [u8])> + Clone,
{
    let fields: usize = headers.clone().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>()
        + vary_request.clone().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>();
    let mut out = Vec::with_capacity(2 + 2 + 16 + url.len() + 4 + fields + 4);
    out.extend_from_slice(&HEAD_MAGIC);
    out.extend_from_slice(&status.to_be_bytes());
    out.extend_from_slice(&request_time_ms.to_be_bytes());
    out.extend_from_slice(&response_time_ms.to_be_bytes());
    put_bytes(&mut out, url.as_bytes());
    put_varint(&mut out, headers.len() as u64);
    for (n, v) in headers {
        put_bytes(&mut out, n.as_bytes());
        put_bytes(&mut out, v);
    }
    put_varint(&mut out, vary_request.len() as u64);
    for (n, v) in vary_request {
        put_bytes(&mut out, n.as_bytes());
        put_bytes(&mut out, v);
    }
    out
}

/// The first bytes of a binary stored head: 0xC1 never starts UTF-8 (so
/// never JSON), then the encoding's version.
pub const HEAD_MAGIC: [u8; 2] = [0xC1, 0x02];

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A cursor over a binary head; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.take(1)?.first()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }
    fn fields(&mut self) -> Option<Vec<(String, Vec<u8>)>> {
        let n = usize::try_from(self.varint()?).ok()?;
        // Each field takes at least two bytes: a count beyond that is garbage.
        if n > self.0.len() / 2 {
            return None;
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let name = std::str::from_utf8(self.bytes()?).ok()?.to_string();
            out.push((name, self.bytes()?.to_vec()));
        }
        Some(out)
    }
}

fn decode_binary(bytes: &[u8]) -> Option<StoredResponse> {
    let mut r = Reader(bytes);
    let status = u16::from_be_bytes(r.take(2)?.try_into().ok()?);
    let request_time_ms = r.u64()?;
    let response_time_ms = r.u64()?;
    let url = std::str::from_utf8(r.bytes()?).ok()?.to_string();
    let headers = r.fields()?;
    let vary_request = r.fields()?;
    if !r.0.is_empty() {
        return None;
    }
    Some(StoredResponse { status, headers, request_time_ms, response_time_ms, url, vary_request })
}

/// Milliseconds since the Unix epoch for `t` (0 before the epoch).
pub fn to_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The `SystemTime` for `ms` milliseconds since the Unix epoch.
pub fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

#[cfg(test)]
mod encoding_tests {
    use super::*;

    fn sample() -> StoredResponse {
        StoredResponse {
            status: 200,
            headers: vec![
                ("etag".into(), b"\"a\"".to_vec()),
                ("x-bin".into(), vec![0, 255, 10]),
                ("etag".into(), vec![]),
            ],
            request_time_ms: 1_700_000_000_123,
            response_time_ms: 1_700_000_000_456,
            url: "http://example.com/\u{e9}?q=1".into(),
            vary_request: vec![("accept-encoding".into(), b"gzip".to_vec())],
        }
    }

    #[test]
    fn binary_heads_round_trip_and_json_heads_of_format_1_still_read() {
        let s = sample();
        let bin = s.to_bytes();
        assert!(bin.starts_with(&HEAD_MAGIC));
        assert_eq!(StoredResponse::from_bytes(&bin), Some(s.clone()));
        assert!(bin.len() < s.to_json_bytes().len() / 2, "binary is compact");
        assert_eq!(StoredResponse::from_bytes(&s.to_json_bytes()), Some(s.clone()));
        let mut long = s.clone();
        long.headers.push(("x-long".into(), vec![b'v'; 300]));
        assert_eq!(StoredResponse::from_bytes(&long.to_bytes()), Some(long));
    }

    #[test]
    fn truncated_or_garbage_heads_are_rejected_not_misread() {
        let bin = sample().to_bytes();
        for n in 0..bin.len() {
            assert_eq!(StoredResponse::from_bytes(&bin[..n]), None, "prefix of {n} bytes");
        }
        let mut extra = bin.clone();
        extra.push(0);
        assert_eq!(StoredResponse::from_bytes(&extra), None);
        for garbage in [
            &b""[..],
            b"not json",
            &[0xC1, 0x03, 0, 200][..],
            &[0xC1, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..],
        ] {
            assert_eq!(StoredResponse::from_bytes(garbage), None);
        }
    }
}
