//! Undoing the content codings of a robots.txt body (RFC 9110 §8.4), with
//! a bound on the decoded size.
//!
//! The rules are in the decoded text (RFC 9309 §2.3), so every reader of a
//! robots.txt body decodes it first: [`decode`] takes the
//! `Content-Encoding` codings as listed ([`parse_content_encoding`]) and
//! undoes them in reverse order of listing (`gzip, br` means gzip was
//! applied first: br is undone, then gzip). Known codings: `gzip` and
//! `x-gzip` (RFC 1952, concatenated members allowed), `deflate` (RFC 9110
//! §8.4.1.2 says zlib, RFC 1950; raw RFC 1951 streams are common too: a
//! stream that starts with a valid zlib header is read as zlib, and read
//! again as raw deflate if that fails; any other as raw deflate) and `br`
//! (RFC 7932). `identity` is ignored.
//!
//! [`reader`] gives the same layers as a stream without a bound (for
//! `cache cat --decode`).
//!
//! Decoding streams through the layers and stops after `limit + 1` decoded
//! bytes, so a decompression bomb costs at most that much memory and time:
//! its first `limit` bytes are kept and marked truncated (RFC 9309 §2.5
//! allows parsing only the first 500 KiB). An unknown coding, or bytes that
//! do not decode as labelled, are an error naming the coding: the caller
//! treats it as a failed fetch, never as rules.

use brotli::Decompressor;
use flate2::read::{DeflateDecoder, MultiGzDecoder, ZlibDecoder};
use std::fmt;
use std::io::{self, Cursor, Read};

/// The `Accept-Encoding` sent on robots.txt fetches: exactly the codings
/// [`decode`] can undo.
pub const ACCEPT_ENCODING: &str = "gzip, deflate, br";

/// A content coding [`decode`] can undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    Gzip,
    Deflate,
    Brotli,
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A coding crawlcache does not know (it never asks for one).
    Unknown {
        /// The coding as listed (lower-case).
        coding: String,
    },
    /// The bytes are not valid data of that coding (for example plain text
    /// labelled `gzip`, or a stream cut short).
    Corrupt {
        /// The coding whose data is bad.
        coding: String,
        /// The decoder's message.
        detail: String,
    },
}

impl DecodeError {
    /// The coding the error is about.
    pub fn coding(&self) -> &str {
        match self {
            DecodeError::Unknown { coding } | DecodeError::Corrupt { coding, .. } => coding,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Unknown { coding } => write!(f, "unknown Content-Encoding `{coding}`"),
            DecodeError::Corrupt { coding, detail } => {
                write!(f, "body does not decode as Content-Encoding `{coding}`: {detail}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// A decoded body: at most `limit` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The first `limit` decoded bytes (all of them when not truncated).
    pub body: Vec<u8>,
    /// Whether the decoded text was longer than `limit`.
    pub truncated: bool,
}

/// The codings of one or more `Content-Encoding` field values, in order of
/// listing, lower-case, `identity` and empty members dropped.
pub fn parse_content_encoding<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    values
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

fn coding(name: &str) -> Option<Coding> {
    match name {
        "gzip" | "x-gzip" => Some(Coding::Gzip),
        "deflate" => Some(Coding::Deflate),
        "br" => Some(Coding::Brotli),
        _ => None,
    }
}

/// Undoes `codings` (as listed in `Content-Encoding`, see
/// [`parse_content_encoding`]) on `body`, keeping at most `limit` decoded
/// bytes. No codings: the body as is, cut at `limit`. See the module docs.
pub fn decode(codings: &[String], body: &[u8], limit: usize) -> Result<Decoded, DecodeError> {
    let mut known = Vec::with_capacity(codings.len());
    for c in codings {
        match coding(c) {
            Some(k) => known.push((k, c.as_str())),
            None => return Err(DecodeError::Unknown { coding: c.clone() }),
        }
    }
    match run(&known, body, limit, false) {
        Err(first) if known.iter().any(|(c, _)| *c == Coding::Deflate) => {
            // A raw deflate stream may happen to start like a zlib header.
            run(&known, body, limit, true).map_err(|_| first)
        }
        r => r,
    }
}

fn run(
    codings: &[(Coding, &str)],
    body: &[u8],
    limit: usize,
    raw_deflate: bool,
) -> Result<Decoded, DecodeError> {
    let reader = layers(codings, Box::new(body), raw_deflate)?;
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(cap).read_to_end(&mut out).map_err(|e| {
        match e.get_ref().and_then(|i| i.downcast_ref::<DecodeError>()) {
            Some(d) => d.clone(),
            None => corrupt(codings.first().map_or("identity", |c| c.1), &e),
        }
    })?;
    let truncated = out.len() > limit;
    out.truncate(limit);
    Ok(Decoded { body: out, truncated })
}

/// The decoding layers over `reader`: the last coding listed was applied
/// last, so it is undone first. Errors: `Corrupt` when a deflate stream
/// cannot even be started.
fn layers<'a>(
    codings: &[(Coding, &str)],
    mut reader: Box<dyn Read + Send + 'a>,
    raw_deflate: bool,
) -> Result<Box<dyn Read + Send + 'a>, DecodeError> {
    for &(c, name) in codings.iter().rev() {
        let inner: Box<dyn Read + Send + 'a> = match c {
            Coding::Gzip => Box::new(MultiGzDecoder::new(reader)),
            Coding::Brotli => Box::new(Decompressor::new(reader, 4096)),
            Coding::Deflate => {
                let (head, rest) = peek2(reader).map_err(|e| corrupt(name, &e))?;
                let r = Cursor::new(head.clone()).chain(rest);
                if !raw_deflate && is_zlib_header(&head) {
                    Box::new(ZlibDecoder::new(r))
                } else {
                    Box::new(DeflateDecoder::new(r))
                }
            }
        };
        reader = Box::new(Labelled { inner, coding: name.to_string() });
    }
    Ok(reader)
}

/// A streaming decoder (for `cache cat --decode`): reads `body` and yields
/// it with `codings` (as listed in `Content-Encoding`) undone, with no
/// bound on the decoded size. Same codings as [`decode`]; `deflate` is read
/// as zlib when it starts with a valid zlib header and as raw deflate
/// otherwise (without [`decode`]'s second attempt, which needs the whole
/// body). Errors: `Unknown` for a coding it cannot undo (before anything
/// is read); later, a read error whose inner error is the [`DecodeError`]
/// naming the coding whose data is bad.
pub fn reader<'a>(
    codings: &[String],
    body: impl Read + Send + 'a,
) -> Result<Box<dyn Read + Send + 'a>, DecodeError> {
    let mut known = Vec::with_capacity(codings.len());
    for c in codings {
        match coding(c) {
            Some(k) => known.push((k, c.as_str())),
            None => return Err(DecodeError::Unknown { coding: c.clone() }),
        }
    }
    layers(&known, Box::new(body), false)
}

fn corrupt(coding: &str, e: &io::Error) -> DecodeError {
    match e.get_ref().and_then(|i| i.downcast_ref::<DecodeError>()) {
        Some(d) => d.clone(),
        None => DecodeError::Corrupt { coding: coding.to_string(), detail: e.to_string() },
    }
}

/// Reads up to two bytes (fewer only at the end of the stream).
fn peek2<'a>(mut r: Box<dyn Read + Send + 'a>) -> io::Result<(Vec<u8>, Box<dyn Read + Send + 'a>)> {
    let mut head = [0u8; 2];
    let mut n = 0;
    while n < 2 {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((head[..n].to_vec(), r))
}

/// RFC 1950 §2.2: CM = 8 (deflate), CINFO ≤ 7, and CMF·256 + FLG a
/// multiple of 31.
fn is_zlib_header(h: &[u8]) -> bool {
    matches!(h, [cmf, flg] if cmf & 0x0f == 8 && cmf >> 4 <= 7 && (u16::from(*cmf) * 256 + u16::from(*flg)) % 31 == 0)
}

/// Tags the errors of one decoding layer with its coding, leaving errors
/// already tagged by an inner layer as they are.
struct Labelled<'a> {
    inner: Box<dyn Read + Send + 'a>,
    coding: String,
}

impl Read for Labelled<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted
                || e.get_ref().is_some_and(|i| i.is::<DecodeError>())
            {
                return e;
            }
            let detail = e.to_string();
            io::Error::new(e.kind(), DecodeError::Corrupt { coding: self.coding.clone(), detail })
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    const TEXT: &[u8] = b"User-agent: *\nDisallow: /private/\n";

    pub(crate) fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }
    pub(crate) fn zlib(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }
    pub(crate) fn raw_deflate(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }
    pub(crate) fn brotli(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
            w.write_all(b).unwrap();
        }
        out
    }
    fn codings(s: &str) -> Vec<String> {
        parse_content_encoding([s])
    }
    fn ok(body: &[u8]) -> Decoded {
        Decoded { body: body.to_vec(), truncated: false }
    }

    #[test]
    fn rfc9110_8_4_each_known_coding_is_undone() {
        assert_eq!(decode(&codings("gzip"), &gzip(TEXT), 1000), Ok(ok(TEXT)));
        assert_eq!(decode(&codings("x-gzip"), &gzip(TEXT), 1000), Ok(ok(TEXT)));
        assert_eq!(
            decode(&codings("deflate"), &zlib(TEXT), 1000),
            Ok(ok(TEXT)),
            "zlib-wrapped deflate"
        );
        assert_eq!(
            decode(&codings("deflate"), &raw_deflate(TEXT), 1000),
            Ok(ok(TEXT)),
            "raw deflate"
        );
        assert_eq!(decode(&codings("br"), &brotli(TEXT), 1000), Ok(ok(TEXT)));
        assert_eq!(
            decode(&codings("GZip"), &gzip(TEXT), 1000),
            Ok(ok(TEXT)),
            "codings are case-insensitive"
        );
        // Concatenated gzip members (RFC 1952 §2.2).
        let mut two = gzip(b"User-agent: *\n");
        two.extend(gzip(b"Disallow: /private/\n"));
        assert_eq!(decode(&codings("gzip"), &two, 1000), Ok(ok(TEXT)));
    }

    #[test]
    fn identity_and_no_coding_leave_the_body_as_is() {
        assert_eq!(decode(&codings("identity"), TEXT, 1000), Ok(ok(TEXT)));
        assert_eq!(decode(&[], TEXT, 1000), Ok(ok(TEXT)));
        assert_eq!(decode(&[], TEXT, 4), Ok(Decoded { body: TEXT[..4].to_vec(), truncated: true }));
        assert_eq!(parse_content_encoding(["gzip, identity", " br ", ""]), vec!["gzip", "br"]);
    }

    #[test]
    fn stacked_codings_are_undone_in_reverse_order_of_listing() {
        // `gzip, br`: gzip applied first, then br.
        let coded = brotli(&gzip(TEXT));
        assert_eq!(decode(&codings("gzip, br"), &coded, 1000), Ok(ok(TEXT)));
        // The same over two field lines.
        assert_eq!(decode(&parse_content_encoding(["gzip", "br"]), &coded, 1000), Ok(ok(TEXT)));
        // Listed the other way round, the bytes do not decode: br's data is
        // not gzip.
        let e = decode(&codings("br, gzip"), &coded, 1000).unwrap_err();
        assert_eq!(e.coding(), "gzip", "{e}");
        let coded = gzip(&raw_deflate(&brotli(TEXT)));
        assert_eq!(decode(&codings("br, deflate, gzip"), &coded, 1000), Ok(ok(TEXT)));
    }

    #[test]
    fn rfc9309_2_5_a_bomb_stops_at_the_limit() {
        let limit = 500 * 1024;
        let bomb = gzip(&vec![b'#'; 50 * 1024 * 1024]);
        assert!(bomb.len() < 100 * 1024, "{}", bomb.len());
        let d = decode(&codings("gzip"), &bomb, limit).unwrap();
        assert_eq!(d.body.len(), limit);
        assert!(d.truncated);
        // Stacked, the inner layer is never inflated in full either.
        let d = decode(&codings("gzip, br"), &brotli(&bomb), limit).unwrap();
        assert_eq!((d.body.len(), d.truncated), (limit, true));
        let d = decode(&codings("br"), &brotli(&vec![b'#'; 20 * 1024 * 1024]), limit).unwrap();
        assert_eq!((d.body.len(), d.truncated), (limit, true));
        // Exactly at the limit: not truncated.
        let d = decode(&codings("deflate"), &zlib(&vec![b'#'; limit]), limit).unwrap();
        assert_eq!((d.body.len(), d.truncated), (limit, false));
    }

    #[test]
    fn an_unknown_coding_is_an_error_naming_it() {
        let e = decode(&codings("zstd-x"), TEXT, 1000).unwrap_err();
        assert_eq!(e, DecodeError::Unknown { coding: "zstd-x".into() });
        assert!(e.to_string().contains("zstd-x"));
        assert_eq!(
            decode(&codings("gzip, compress"), &gzip(TEXT), 1000).unwrap_err().coding(),
            "compress"
        );
    }

    #[test]
    fn mislabelled_or_cut_bytes_are_an_error_naming_the_coding() {
        for c in ["gzip", "br", "deflate"] {
            let e = decode(&codings(c), TEXT, 1000).unwrap_err();
            assert!(matches!(&e, DecodeError::Corrupt { coding, .. } if coding == c), "{c}: {e:?}");
            assert!(e.to_string().contains(c), "{e}");
        }
        let g = gzip(TEXT);
        let e = decode(&codings("gzip"), &g[..g.len() - 6], 1000).unwrap_err();
        assert_eq!(e.coding(), "gzip", "a gzip stream without its trailer: {e}");
        let b = brotli(TEXT);
        assert!(decode(&codings("br"), &b[..b.len() / 2], 1000).is_err(), "a cut brotli stream");
        assert!(decode(&codings("gzip"), b"", 1000).is_err(), "an empty body is not gzip");
        // The inner layer is named when the outer one decodes fine.
        let e = decode(&codings("gzip, br"), &brotli(TEXT), 1000).unwrap_err();
        assert_eq!(e.coding(), "gzip", "{e}");
    }

    #[test]
    fn never_panics_on_arbitrary_bytes() {
        let mut x: u32 = 12345;
        for len in [0usize, 1, 2, 3, 10, 100, 1000] {
            for _ in 0..50 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        (x >> 16) as u8
                    })
                    .collect();
                for c in ["gzip", "deflate", "br", "gzip, br", "deflate, deflate"] {
                    let _ = decode(&codings(c), &bytes, 1000);
                }
            }
        }
    }
}
