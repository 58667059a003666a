//! The serving threads' shares of the client connections, and the count a
//! connection holds in them while it is open.

use super::shutdown::TaskGuard;
use std::net::SocketAddr;
use std::sync::Arc;

/// The serving threads' shares of the client connections: each thread's
/// count of open connections, and a way to hand it a connection another
/// thread accepted.
///
/// Every thread accepts from the one listening socket, and a burst of
/// connections (a crawler opening its pool) is often accepted whole by the
/// thread that woke first: measured, all 16 connections of a miss run on
/// one thread, that thread at 90 % of a core, the other idle, a sixth of
/// the machine unused. So a connection goes to the thread its client's CPU
/// points to, unless that thread already serves more than [`SHARE_SLACK`]
/// connections beyond another thread's count: then to the least busy
/// thread, handed over before a byte of it is read (what nginx's
/// `accept_mutex` and `reuseport` do in their ways). With more threads
/// than CPUs, the threads beyond the CPU count get the connections the
/// slack passes on.
///
/// The client's CPU ([`crate::wire::net::incoming_cpu`]) keeps the
/// connections of one client thread on one serving thread: a client
/// thread opens its connections in a burst from the CPU it runs on. On a
/// machine where the crawler runs beside the proxy, each request and
/// response then wakes the one thread its partner talks to, and the
/// scheduler can keep the two on one CPU; spread evenly instead, every
/// exchange woke a thread on the other CPU, which on a virtual machine
/// costs an interrupt between CPUs each time. Measured (2 cores, wrk -t2
/// -c32, 1 KiB hits, 2 s runs): spread evenly, 23,000 to 27,000 such
/// interrupts in 2 s and 105,000 to 120,000 requests/s; kept by client
/// CPU, under 250 interrupts and 150,000 to 165,000 requests/s when each
/// wrk thread's connections ended up on one serving thread. The slack is
/// what lets a client thread's burst stay together: with 4, the first
/// burst was split after 5 connections.
pub struct Shares {
    pub(super) open: Vec<std::sync::atomic::AtomicUsize>,
    pub(super) handoff:
        Vec<tokio::sync::mpsc::UnboundedSender<(std::net::TcpStream, SocketAddr, OpenConnection)>>,
    /// The CPUs the proxy may run on, in increasing order (empty: not
    /// known); a client's CPU counts by its place in this list.
    pub(super) cpus: Vec<usize>,
}

/// How many connections a serving thread may already serve beyond the
/// least busy thread's count and still be given a new connection its
/// client's CPU points to (so it can end up one beyond this).
pub const SHARE_SLACK: usize = 8;

impl Shares {
    /// Open client connections per serving thread, in thread order.
    pub fn open_connections(&self) -> Vec<usize> {
        self.open.iter().map(|n| n.load(std::sync::atomic::Ordering::Relaxed)).collect()
    }

    /// The thread that should serve a connection accepted by thread `me`
    /// whose packets came in on `cpu`: the thread that CPU points to (its
    /// place among the CPUs the proxy may use, read at start, modulo the
    /// thread count; a CPU outside that list by its own number), unless
    /// that thread already serves more than [`SHARE_SLACK`] connections
    /// beyond the least busy thread: then the least busy thread. With `cpu`
    /// unknown: `me` unless another thread serves fewer connections.
    pub(super) fn pick(&self, me: usize, cpu: Option<usize>) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.open.len();
        let load = |t: usize| self.open[t].load(Relaxed);
        let (least, count) =
            (0..n).map(|t| (t, load(t))).min_by_key(|&(_, l)| l).unwrap_or((me, 0));
        let Some(cpu) = cpu else {
            // Nothing to keep together: the least busy thread.
            return if count < load(me) { least } else { me };
        };
        let preferred = self.cpus.binary_search(&cpu).unwrap_or(cpu) % n;
        if load(preferred) > count + SHARE_SLACK {
            least
        } else {
            preferred
        }
    }
}

/// One open connection in a serving thread's count ([`Shares`]) and in
/// the proxy's ([`crate::proxy::ProxyState::conns`], taken when it was accepted, so a
/// burst handed to other threads counts against `server.max_connections`
/// at once), until dropped.
pub struct OpenConnection {
    shares: Arc<Shares>,
    me: usize,
    _conn: TaskGuard,
}

impl OpenConnection {
    /// Counts a connection open on serving thread `me` until the value is
    /// dropped; `conn` keeps the shutdown waiting for it meanwhile.
    pub fn new(shares: Arc<Shares>, me: usize, conn: TaskGuard) -> OpenConnection {
        shares.open[me].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenConnection { shares, me, _conn: conn }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.shares.open[self.me].fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// How many threads serve connections for `server.threads` (0: one per CPU
/// core, at least one).
pub fn serving_threads(configured: usize) -> usize {
    match configured {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

#[cfg(test)]
mod tests {
    use super::{Shares, SHARE_SLACK};
    use std::sync::atomic::Ordering::Relaxed;

    /// Shares for `threads` serving threads on a machine whose CPUs are
    /// numbered 0 to `cpus` - 1.
    fn shares(threads: usize, cpus: usize) -> Shares {
        shares_on(threads, (0..cpus).collect())
    }

    /// Shares for `threads` serving threads on the CPUs `cpus`.
    fn shares_on(threads: usize, cpus: Vec<usize>) -> Shares {
        let handoff = (0..threads).map(|_| tokio::sync::mpsc::unbounded_channel().0).collect();
        Shares {
            open: (0..threads).map(|_| std::sync::atomic::AtomicUsize::new(0)).collect(),
            handoff,
            cpus,
        }
    }

    /// Accepts a connection from `cpu` on thread 0 and counts it where
    /// `pick` sends it.
    fn accept(s: &Shares, cpu: Option<usize>) -> usize {
        let to = s.pick(0, cpu);
        s.open[to].fetch_add(1, Relaxed);
        to
    }

    #[test]
    fn two_client_threads_on_two_cpus_get_a_serving_thread_each() {
        let s = shares(2, 2);
        // wrk -t2 -c32: the two threads' connections arrive interleaved.
        for i in 0..32 {
            let cpu = i % 2;
            assert_eq!(accept(&s, Some(cpu)), cpu, "connection {i} from CPU {cpu}");
        }
        assert_eq!(s.open_connections(), vec![16, 16]);
        // CPU numbers beyond the thread count wrap around.
        assert_eq!(s.pick(1, Some(3)), 1);
        assert_eq!(s.pick(1, Some(6)), 0);
    }

    #[test]
    fn clients_all_on_one_cpu_are_still_spread_within_the_slack() {
        let s = shares(2, 2);
        for _ in 0..32 {
            accept(&s, Some(0));
        }
        let open = s.open_connections();
        assert_eq!(open.iter().sum::<usize>(), 32);
        assert!(open[0].abs_diff(open[1]) <= SHARE_SLACK + 1, "{open:?}");
        // The first connections stay together on the CPU's thread.
        a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(&shares(2, 2));
    }

    /// Connections from CPU 0 to an idle `s` of two threads: the first
    /// beyond-the-slack-many go to thread 0, the next to thread 1.
    fn a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(s: &Shares) {
        let first: Vec<usize> = (0..=SHARE_SLACK).map(|_| accept(s, Some(0))).collect();
        assert!(first.iter().all(|&t| t == 0), "{first:?}");
        assert_eq!(accept(s, Some(0)), 1, "one beyond the slack goes to the idle thread");
    }

    #[test]
    fn with_more_threads_than_cpus_a_cpu_still_keeps_its_clients_together() {
        // One CPU, two threads (a container limited to one CPU): a client
        // thread's connections stay on one thread up to the slack.
        a_burst_from_cpu_0_stays_on_thread_0_up_to_the_slack(&shares(2, 1));
        let s = shares(4, 2);
        let from_cpu1: Vec<usize> = (0..4).map(|_| accept(&s, Some(1))).collect();
        assert_eq!(from_cpu1, vec![1, 1, 1, 1]);
        assert_eq!(accept(&s, Some(0)), 0);
    }

    #[test]
    fn a_client_cpu_counts_by_its_place_among_the_cpus_the_proxy_may_use() {
        // A cpuset of CPUs 4 and 6: both even, yet two places.
        let s = shares_on(2, vec![4, 6]);
        assert_eq!(s.pick(0, Some(4)), 0);
        assert_eq!(s.pick(0, Some(6)), 1);
    }

    #[test]
    fn an_unknown_cpu_goes_to_the_least_busy_thread() {
        let s = shares(2, 2);
        for _ in 0..10 {
            accept(&s, None);
        }
        assert_eq!(s.open_connections(), vec![5, 5]);
    }
}
