//! The one loopback test for socket addresses.

use std::net::IpAddr;

/// True for the loopback range (127.0.0.0/8, `::1`), also when written as an
/// IPv4-mapped IPv6 address (`::ffff:127.0.0.1`).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_in_every_family() {
        for s in ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"] {
            assert!(is_loopback(s.parse().unwrap()), "{s}");
        }
        for s in ["10.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "2001:db8::1"] {
            assert!(!is_loopback(s.parse().unwrap()), "{s}");
        }
    }
}
