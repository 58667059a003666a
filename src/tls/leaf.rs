//! Leaf certificates: which name a host gets in its certificate, and the
//! parameters of the CA and of the per-host leaves it signs.
//!
//! Everything here is a pure function of its inputs (the host, `now`, random
//! bytes for the serial number); the authority in `ca.rs` owns the disk and
//! the cache.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyUsagePurpose, SanType, SerialNumber,
};
use rustls::pki_types::DnsName;

use super::error::TlsError;

/// Common name of the certificate authority crawlcache creates.
pub const CA_COMMON_NAME: &str = "crawlcache local CA";

/// Validity of a newly created CA certificate: 10 years (3650 days).
pub(crate) const CA_VALIDITY: Duration = Duration::from_secs(3650 * 24 * 3600);

/// Validity of a leaf certificate: 397 days, under the 398-day ceiling that
/// some clients enforce on TLS server certificates.
pub(crate) const LEAF_VALIDITY: Duration = Duration::from_secs(397 * 24 * 3600);

/// Certificates start this long before `now`, so a client whose clock is a
/// little behind still accepts them.
pub(crate) const BACKDATE: Duration = Duration::from_secs(24 * 3600);

/// A cached leaf is minted again when less than this is left of its validity.
pub(crate) const LEAF_RENEW_MARGIN: Duration = Duration::from_secs(24 * 3600);

/// The name a leaf certificate is issued for: the subject alternative name
/// it carries and the key it is cached under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum LeafName {
    /// A DNS name, lower-cased, without a trailing dot.
    Dns(String),
    /// An IP address literal.
    Ip(IpAddr),
}

impl LeafName {
    /// Parses a host as it appears in a `CONNECT` target or SNI: a DNS name,
    /// an IPv4 literal, or an IPv6 literal with or without `[]`.
    ///
    /// Errors: [`TlsError::InvalidHost`] when the host is neither.
    pub(crate) fn parse(host: &str) -> Result<LeafName, TlsError> {
        let invalid = || TlsError::InvalidHost { host: host.to_owned() };
        let trimmed = host.trim();
        let unbracketed = match trimmed.strip_prefix('[') {
            Some(rest) => rest.strip_suffix(']').ok_or_else(invalid)?,
            None => trimmed,
        };
        if let Ok(ip) = unbracketed.parse::<IpAddr>() {
            return Ok(LeafName::Ip(ip));
        }
        if unbracketed.len() != trimmed.len() {
            // Brackets hold IPv6 literals only.
            return Err(invalid());
        }
        let lower = unbracketed.to_ascii_lowercase();
        let name = lower.strip_suffix('.').unwrap_or(&lower);
        if name.is_empty() || DnsName::try_from(name).is_err() {
            return Err(invalid());
        }
        Ok(LeafName::Dns(name.to_owned()))
    }

    /// The key this name is cached under (the DNS name, or the IP address
    /// in its canonical text form).
    pub(crate) fn cache_key(&self) -> String {
        match self {
            LeafName::Dns(name) => name.clone(),
            LeafName::Ip(ip) => ip.to_string(),
        }
    }

    fn subject_alt_name(&self) -> Result<SanType, rcgen::Error> {
        Ok(match self {
            LeafName::Dns(name) => SanType::DnsName(name.clone().try_into()?),
            LeafName::Ip(ip) => SanType::IpAddress(*ip),
        })
    }
}

/// Parameters of the CA certificate, valid from `now - BACKDATE` for
/// [`CA_VALIDITY`].
///
/// The same parameters describe the issuer when an existing CA is loaded:
/// leaves name the issuer by this distinguished name, so it must stay the
/// same from one version of crawlcache to the next.
pub(crate) fn ca_params(now: SystemTime, serial: [u8; 16]) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(positive_serial(serial));
    params.not_before = now.checked_sub(BACKDATE).unwrap_or(now).into();
    params.not_after = now.checked_add(CA_VALIDITY).unwrap_or(now).into();
    params
}

/// Parameters of a leaf for `name`: the name as its only subject alternative
/// name (DNS or IP), TLS server authentication, no basicConstraints
/// extension (strict DER parsers refuse an encoded `cA FALSE`), valid from `now - BACKDATE`
/// until the returned time (`now + LEAF_VALIDITY`).
pub(crate) fn leaf_params(
    name: &LeafName,
    now: SystemTime,
    serial: [u8; 16],
) -> Result<(CertificateParams, SystemTime), rcgen::Error> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    let common_name = name.cache_key();
    // X.520 bounds a common name to 64 characters; the SAN is what clients check.
    if common_name.len() <= 64 {
        dn.push(DnType::CommonName, common_name);
    }
    params.distinguished_name = dn;
    params.subject_alt_names = vec![name.subject_alt_name()?];
    // No basicConstraints extension at all (RFC 5280 section 4.2.1.9 lets an
    // end-entity certificate omit it). rcgen's `ExplicitNoCa` writes
    // `cA FALSE` explicitly, which DER forbids for a DEFAULT value (X.690
    // section 11.5): Python's `cryptography`, which Scrapy's hostname check
    // runs on every certificate it is shown, refuses to parse such a
    // certificate ("EncodedDefault"), and the handshake then fails with
    // "certificate verify failed" (issue 30).
    params.is_ca = IsCa::NoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(positive_serial(serial));
    let not_after = now.checked_add(LEAF_VALIDITY).unwrap_or(now);
    params.not_before = now.checked_sub(BACKDATE).unwrap_or(now).into();
    params.not_after = not_after.into();
    Ok((params, not_after))
}

/// A serial number from 16 random bytes, kept positive and 16 bytes long
/// (RFC 5280 §4.1.2.2: positive, at most 20 octets).
fn positive_serial(mut bytes: [u8; 16]) -> SerialNumber {
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn dns_names_are_lower_cased_and_lose_a_trailing_dot() {
        assert_eq!(
            LeafName::parse("WWW.Example.COM.").ok(),
            Some(LeafName::Dns("www.example.com".into()))
        );
        assert_eq!(LeafName::parse("localhost").ok(), Some(LeafName::Dns("localhost".into())));
    }

    #[test]
    fn ip_literals_become_ip_names_with_or_without_brackets() {
        assert_eq!(
            LeafName::parse("127.0.0.1").ok(),
            Some(LeafName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)))
        );
        assert_eq!(
            LeafName::parse("[::1]").ok(),
            Some(LeafName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)))
        );
        assert_eq!(
            LeafName::parse("::1").ok(),
            Some(LeafName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)))
        );
        assert_eq!(
            LeafName::parse("[2001:DB8::1]").map(|n| n.cache_key()).ok(),
            Some("2001:db8::1".to_owned())
        );
    }

    #[test]
    fn hosts_that_are_neither_are_refused() {
        for bad in ["", " ", ".", "bad host", "a..b", "[example.com]", "[::1", "fe80::1%eth0"] {
            assert!(
                matches!(LeafName::parse(bad), Err(TlsError::InvalidHost { .. })),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn leaf_validity_starts_before_now_and_ends_after_leaf_validity() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (params, not_after) =
            leaf_params(&LeafName::Dns("example.com".into()), now, [0xff; 16]).unwrap();
        assert_eq!(not_after, now + LEAF_VALIDITY);
        assert_eq!(SystemTime::from(params.not_after), now + LEAF_VALIDITY);
        assert_eq!(SystemTime::from(params.not_before), now - BACKDATE);
        assert_eq!(params.extended_key_usages, vec![ExtendedKeyUsagePurpose::ServerAuth]);
        // The serial is positive and keeps its 16 bytes.
        let serial = params.serial_number.unwrap().to_bytes();
        assert_eq!(serial.len(), 16);
        assert_eq!(serial[0] & 0x80, 0);
    }

    /// The DER of the basicConstraints extension's OID (2.5.29.19).
    const BASIC_CONSTRAINTS_OID: [u8; 5] = [0x06, 0x03, 0x55, 0x1d, 0x13];

    #[test]
    fn leaves_carry_no_basic_constraints_so_strict_der_parsers_accept_them() {
        // Issue 30: an explicit `cA FALSE` (what rcgen's ExplicitNoCa
        // writes) breaks Python's cryptography and so Scrapy's handshake.
        let now = SystemTime::now();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca_params(now, [1; 16]).self_signed(&ca_key).unwrap();
        let (params, _) = leaf_params(&LeafName::Dns("example.com".into()), now, [2; 16]).unwrap();
        assert_eq!(params.is_ca, IsCa::NoCa);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
        let der = leaf.der().as_ref();
        assert!(
            !der.windows(5).any(|w| w == BASIC_CONSTRAINTS_OID),
            "the leaf has a basicConstraints extension"
        );
        // The CA keeps its own (cA TRUE, pathLenConstraint 0).
        assert!(ca.der().as_ref().windows(5).any(|w| w == BASIC_CONSTRAINTS_OID));
    }

    #[test]
    fn ca_is_a_ca_for_ten_years() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let params = ca_params(now, [0; 16]);
        assert_eq!(params.is_ca, IsCa::Ca(BasicConstraints::Constrained(0)));
        assert_eq!(SystemTime::from(params.not_after), now + CA_VALIDITY);
        assert!(params.key_usages.contains(&KeyUsagePurpose::KeyCertSign));
    }
}
