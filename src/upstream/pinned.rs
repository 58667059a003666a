//! Self-signed origin certificates trusted by being listed explicitly in
//! `upstream.extra_ca_file` (issue 30).
//!
//! A certificate made with `openssl req -x509` is its own CA (it carries
//! `basicConstraints: CA:TRUE`). Put in a trust store and presented by a
//! server as its own certificate, curl (OpenSSL) and browsers accept it;
//! webpki refuses it (`CaUsedAsEndEntity`), since a CA certificate may not
//! be an end-entity one. [`PinnedSelfSigned`] keeps webpki's verdict for
//! everything, and only when webpki refuses a certificate that is
//! byte-for-byte one listed in the extra CA file does it accept that
//! certificate, after checking what still applies to it: the server name
//! against its subject alternative names (RFC 9110 section 4.3.4) and its
//! validity period (RFC 5280 section 4.1.2.5). The handshake signature is
//! still verified with the certificate's key, so the server holds its
//! private key.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

/// webpki's verifier, plus acceptance of the exact self-signed certificates
/// listed in the extra CA file (see the module documentation).
#[derive(Debug)]
pub(crate) struct PinnedSelfSigned {
    inner: Arc<WebPkiServerVerifier>,
    /// The certificates of `upstream.extra_ca_file`, DER.
    listed: Vec<CertificateDer<'static>>,
}

impl PinnedSelfSigned {
    /// Wraps `inner`; `listed` are the certificates of the extra CA file.
    pub(crate) fn new(
        inner: Arc<WebPkiServerVerifier>,
        listed: Vec<CertificateDer<'static>>,
    ) -> PinnedSelfSigned {
        PinnedSelfSigned { inner, listed }
    }
}

impl ServerCertVerifier for PinnedSelfSigned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let verdict = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verdict {
            Err(Error::InvalidCertificate(ref why))
                if may_be_pinned(why)
                    && self.listed.iter().any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                verify_pinned(end_entity, server_name, now)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The refusals a listed self-signed certificate meets in webpki: it is a
/// CA used as an end entity, or (without the CA bit) its issuer is only
/// itself.
fn may_be_pinned(why: &CertificateError) -> bool {
    match why {
        CertificateError::UnknownIssuer => true,
        // rustls wraps webpki errors it has no variant for.
        CertificateError::Other(other) => matches!(
            other.0.downcast_ref::<webpki::Error>(),
            Some(webpki::Error::CaUsedAsEndEntity)
        ),
        _ => false,
    }
}

/// Checks a listed certificate presented as the server's own: its names
/// cover `server_name` and `now` lies within its validity period.
/// Errors: the rustls error for a name mismatch, an expired or not yet
/// valid certificate, or a certificate that cannot be parsed.
fn verify_pinned(
    der: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), Error> {
    let parsed = rustls::server::ParsedCertificate::try_from(der)?;
    rustls::client::verify_server_name(&parsed, server_name)?;
    let (not_before, not_after) =
        validity(der.as_ref()).ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let at = now.as_secs();
    if at < not_before {
        return Err(Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if at > not_after {
        return Err(Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

/// The validity period of an X.509 certificate (DER), as Unix seconds
/// (notBefore, notAfter), RFC 5280 section 4.1.2.5. `None` when the
/// certificate is not DER as RFC 5280 lays it out.
pub(crate) fn validity(der: &[u8]) -> Option<(u64, u64)> {
    let (tag, cert, _) = tlv(der)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, tbs, _) = tlv(cert)?;
    if tag != 0x30 {
        return None;
    }
    let mut rest = tbs;
    // [0] EXPLICIT version, when present.
    let (tag, _, after) = tlv(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    // serialNumber, signature, issuer.
    for expected in [0x02, 0x30, 0x30] {
        let (tag, _, after) = tlv(rest)?;
        if tag != expected {
            return None;
        }
        rest = after;
    }
    let (tag, validity, _) = tlv(rest)?;
    if tag != 0x30 {
        return None;
    }
    let (tag1, t1, after) = tlv(validity)?;
    let (tag2, t2, _) = tlv(after)?;
    Some((x509_time(tag1, t1)?, x509_time(tag2, t2)?))
}

/// One DER tag-length-value: (tag, contents, what follows). `None` when
/// the input is too short or uses a length form DER does not allow.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// A UTCTime (tag 0x17, `YYMMDDHHMMSSZ`, years 1950-2049) or
/// GeneralizedTime (tag 0x18, `YYYYMMDDHHMMSSZ`) as Unix seconds.
fn x509_time(tag: u8, text: &[u8]) -> Option<u64> {
    let digits = |s: &[u8]| -> Option<u64> {
        s.iter()
            .try_fold(0u64, |acc, &b| b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0')))
    };
    let (year, rest) = match (tag, text.len()) {
        (0x17, 13) => {
            let yy = digits(&text[..2])?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (0x18, 15) => (digits(&text[..4])?, &text[4..]),
        _ => return None,
    };
    if rest.last() != Some(&b'Z') {
        return None;
    }
    let (month, day) = (digits(&rest[0..2])?, digits(&rest[2..4])?);
    let (hour, minute, second) =
        (digits(&rest[4..6])?, digits(&rest[6..8])?, digits(&rest[8..10])?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
        || year < 1970
    {
        return None;
    }
    let days = u64::try_from(crawlcache_base::time::days_from_civil(
        year as i64,
        month as i64,
        day as i64,
    ))
    .ok()?;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::RootCertStore;
    use std::time::{Duration, SystemTime};

    /// `time` as the [`UnixTime`] rustls verifies at.
    fn unix(time: SystemTime) -> UnixTime {
        UnixTime::since_unix_epoch(
            time.duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO),
        )
    }

    /// A self-signed CA certificate for `names`, as `openssl req -x509`
    /// makes one, valid from `from` to `to` (Unix seconds).
    fn self_signed(names: &[&str], from: u64, to: u64) -> CertificateDer<'static> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_before = (SystemTime::UNIX_EPOCH + Duration::from_secs(from)).into();
        params.not_after = (SystemTime::UNIX_EPOCH + Duration::from_secs(to)).into();
        params.self_signed(&key).unwrap().der().clone()
    }

    fn verifier(listed: &[CertificateDer<'static>]) -> PinnedSelfSigned {
        let mut roots = RootCertStore::empty();
        for c in listed {
            roots.add(c.clone()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
        PinnedSelfSigned::new(inner, listed.to_vec())
    }

    const DAY: u64 = 86_400;

    #[test]
    fn a_listed_self_signed_ca_is_accepted_as_the_server_certificate() {
        let now = SystemTime::now();
        let t = now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        let cert = self_signed(&["localhost"], t - DAY, t + DAY);
        let v = verifier(std::slice::from_ref(&cert));
        let name = ServerName::try_from("localhost").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &name, &[], unix(now)).is_ok());
        // webpki alone refuses it.
        assert!(v.inner.verify_server_cert(&cert, &[], &name, &[], unix(now)).is_err());
    }

    #[test]
    fn a_listed_self_signed_ca_must_still_name_the_host_and_be_valid_now() {
        let now = SystemTime::now();
        let t = now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        let cert = self_signed(&["localhost"], t - DAY, t + DAY);
        let v = verifier(std::slice::from_ref(&cert));
        let other = ServerName::try_from("other.example").unwrap();
        assert!(v.verify_server_cert(&cert, &[], &other, &[], unix(now)).is_err(), "wrong name");
        let expired = self_signed(&["localhost"], t - 3 * DAY, t - DAY);
        let v = verifier(std::slice::from_ref(&expired));
        let name = ServerName::try_from("localhost").unwrap();
        let err = v.verify_server_cert(&expired, &[], &name, &[], unix(now)).unwrap_err();
        // webpki reports the expiry itself, before the CA-as-end-entity refusal.
        assert!(
            matches!(
                err,
                Error::InvalidCertificate(
                    CertificateError::Expired | CertificateError::ExpiredContext { .. }
                )
            ),
            "{err:?}"
        );
    }

    #[test]
    fn an_unlisted_self_signed_ca_is_still_refused() {
        let now = SystemTime::now();
        let t = now.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        let listed = self_signed(&["localhost"], t - DAY, t + DAY);
        let presented = self_signed(&["localhost"], t - DAY, t + DAY);
        let v = verifier(&[listed]);
        let name = ServerName::try_from("localhost").unwrap();
        assert!(v.verify_server_cert(&presented, &[], &name, &[], unix(now)).is_err());
    }

    #[test]
    fn validity_reads_both_time_forms() {
        // 2000-01-01T00:00:00Z and 2060-06-30T12:00:00Z (GeneralizedTime
        // from 2050 on).
        let cert = self_signed(&["a.test"], 946_684_800, 2_856_168_000);
        assert_eq!(validity(cert.as_ref()), Some((946_684_800, 2_856_168_000)));
        assert_eq!(validity(b"\x30\x03\x02\x01\x00"), None);
        assert_eq!(validity(b""), None);
        assert_eq!(x509_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(x509_time(0x17, b"7001010000Z"), None);
    }
}
