//! The one loopback test for socket addresses, and the CPU a connection's
//! packets arrive on.

use std::net::IpAddr;

/// True for the loopback range (127.0.0.0/8, `::1`), also when written as an
/// IPv4-mapped IPv6 address (`::ffff:127.0.0.1`).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// True when `ip` is one of this machine's addresses: loopback, the
/// unspecified address (which reaches every local interface), or an
/// address of a local interface (one a socket can be bound to).
/// IPv4-mapped IPv6 addresses are judged as their IPv4 address.
pub fn is_local(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    is_loopback(ip) || ip.is_unspecified() || std::net::UdpSocket::bind((ip, 0)).is_ok()
}

/// Whether `host:port` names a socket of this process listening on
/// `listening`: the ports are equal and some address `host` resolves to
/// (any spelling: `127.1`, `2130706433`, `0x7f.0.0.1`, `[::ffff:127.0.0.1]`,
/// `0.0.0.0`, a name) is local ([`is_local`]) and is accepted by the
/// listener (the listener's own address, or any local address when it
/// listens on the unspecified address or on loopback and the target is
/// loopback). Name resolution is bounded by two seconds; a name that does
/// not resolve is not this process.
pub async fn names_listener(host: &str, port: u16, listening: std::net::SocketAddr) -> bool {
    if port != listening.port() {
        return false;
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match tokio::time::timeout(
            std::time::Duration::from_secs(2),
            tokio::net::lookup_host((host, port)),
        )
        .await
        {
            Ok(Ok(it)) => it.map(|a| a.ip()).collect(),
            _ => return false,
        },
    };
    let listen_ip = listening.ip();
    addrs.into_iter().any(|ip| {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        is_local(ip)
            && (ip == listen_ip
                || ip.is_unspecified()
                || listen_ip.is_unspecified()
                || (is_loopback(ip) && is_loopback(listen_ip)))
    })
}

#[cfg(test)]
mod self_tests {
    use super::*;

    #[tokio::test]
    async fn every_spelling_of_the_listener_is_recognised() {
        let listening: std::net::SocketAddr = "127.0.0.1:4711".parse().unwrap();
        for host in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.0.0.1",
            "[::ffff:127.0.0.1]",
            "0.0.0.0",
            "localhost",
            "127.0.0.2",
        ] {
            assert!(names_listener(host, 4711, listening).await, "{host}");
        }
        assert!(!names_listener("127.0.0.1", 4712, listening).await, "another port");
        assert!(
            !names_listener("192.0.2.1", 4711, listening).await,
            "a documentation address is not local"
        );
        assert!(!names_listener("no-such-host.invalid", 4711, listening).await);
    }
}

/// The CPU that last processed packets arriving on `stream` (Linux
/// `SO_INCOMING_CPU`, socket(7)): for a connection from this machine, the CPU
/// the client's thread ran on when it sent them (loopback delivery runs on
/// the sender's CPU); for a remote client, the CPU its network queue
/// interrupts on. `None` where the platform does not say.
pub fn incoming_cpu(stream: &impl std::os::fd::AsRawFd) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        let mut cpu: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt on a descriptor `stream` owns, into an int of
        // the length passed.
        let rc = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_INCOMING_CPU,
                (&mut cpu as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0 && cpu >= 0).then_some(cpu as usize)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        None
    }
}

/// The CPUs this process may run on, in increasing order (Linux
/// `sched_getaffinity`); empty where the platform does not say.
pub fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the call fills it
        // and CPU_ISSET reads it within its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            != 0
        {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

#[cfg(all(test, target_os = "linux"))]
mod cpu_tests {
    /// Pins the calling thread to `cpu`.
    fn pin(cpu: usize) {
        // SAFETY: as above; the set names one CPU the process may use.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(cpu, &mut set) };
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        assert_eq!(rc, 0, "sched_setaffinity");
    }

    #[test]
    fn a_loopback_connection_reports_the_cpu_its_client_sent_from() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        for cpu in super::allowed_cpus() {
            // The client runs pinned to `cpu`: loopback delivery runs in the
            // sender's context, so that is the CPU the packets came in on.
            let client = std::thread::spawn(move || {
                pin(cpu);
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                std::io::Write::write_all(&mut s, b"x").unwrap();
                s
            });
            // Asked at accept, as the proxy asks: the handshake has set it.
            let (server, _) = listener.accept().unwrap();
            assert_eq!(super::incoming_cpu(&server), Some(cpu));
            let mut byte = [0u8; 1];
            std::io::Read::read_exact(&mut &server, &mut byte).unwrap();
            assert_eq!(super::incoming_cpu(&server), Some(cpu));
            drop(client.join().unwrap());
        }
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
