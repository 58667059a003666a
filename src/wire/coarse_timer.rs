//! A coarse timer for the client connections' header-read timeout.
//!
//! hyper arms its header-read timeout (30 s by default) before reading each
//! request head and drops it when the head is complete: on a keep-alive
//! connection that is one timer created, registered and cancelled per
//! request. With tokio's timer that took about 3 % of a cache hit's CPU
//! (allocating the entry, locking the time driver to insert it into the
//! wheel and again to take it out). A timeout of tens of seconds does not
//! need millisecond precision, so [`CoarseTimer`] keeps the sleeps that are
//! waiting in a slab per thread (a slot taken on the first poll, given
//! back on drop, each under that thread's own uncontended lock), and one
//! background thread wakes those past their deadline every
//! [`TICK`]. A sleep fires at most one tick late; it never fires early.

use hyper::rt::{Sleep, Timer};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often the background thread looks for sleeps past their deadline:
/// the most a sleep fires late.
pub const TICK: Duration = Duration::from_millis(250);

/// A [`hyper::rt::Timer`] whose sleeps fire within [`TICK`] after their
/// deadline (for timeouts of seconds; see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct CoarseTimer;

impl Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        // A deadline past what `Instant` can hold is as good as a year away.
        let now = Instant::now();
        let deadline =
            now.checked_add(duration).unwrap_or_else(|| now + Duration::from_secs(365 * 86_400));
        self.sleep_until(deadline)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(CoarseSleep { deadline, slot: None })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        *sleep = self.sleep_until(new_deadline);
    }
}

/// One waiting sleep: its deadline and the task to wake.
type Waiting = Option<(Instant, Waker)>;

/// The sleeps waiting on one thread: slots, and the indices of free ones.
#[derive(Default)]
struct Slab {
    slots: Vec<Waiting>,
    free: Vec<usize>,
}

/// One thread's slab (shared with the background thread that wakes it).
#[derive(Default)]
struct Shard {
    slab: Mutex<Slab>,
}

impl Shard {
    fn lock(&self) -> MutexGuard<'_, Slab> {
        crawlcache_base::locks::lock(&self.slab)
    }
}

/// Every thread's shard, for the background thread.
static SHARDS: Mutex<Vec<Weak<Shard>>> = Mutex::new(Vec::new());

thread_local! {
    static SHARD: Arc<Shard> = {
        let shard = Arc::new(Shard::default());
        let mut all = crawlcache_base::locks::lock(&SHARDS);
        all.retain(|s| s.strong_count() > 0);
        all.push(Arc::downgrade(&shard));
        shard
    };
}

/// Starts the background thread once. If it cannot start, sleeps still
/// fire when their task is polled after the deadline, but nothing wakes
/// an idle one: the start failure is logged.
fn start_ticker() {
    static START: Once = Once::new();
    START.call_once(|| {
        let spawned = std::thread::Builder::new().name("crawlcache-timer".into()).spawn(|| loop {
            std::thread::sleep(TICK);
            wake_expired(Instant::now());
        });
        if let Err(e) = spawned {
            tracing::error!("cannot start the header-timeout thread: {e}; idle client connections are not timed out");
        }
    });
}

/// Wakes (and frees the slots of) every sleep whose deadline is at or
/// before `now`, on every thread.
fn wake_expired(now: Instant) {
    let shards: Vec<Arc<Shard>> =
        crawlcache_base::locks::lock(&SHARDS).iter().filter_map(Weak::upgrade).collect();
    for shard in shards {
        let mut due = Vec::new();
        {
            let mut slab = shard.lock();
            for slot in slab.slots.iter_mut() {
                if slot.as_ref().is_some_and(|(deadline, _)| *deadline <= now) {
                    due.extend(slot.take().map(|(_, w)| w));
                }
            }
        }
        // Woken outside the lock; each sleep sees its deadline passed, ends
        // and gives its slot back.
        due.into_iter().for_each(Waker::wake);
    }
}

/// A sleep of [`CoarseTimer`].
struct CoarseSleep {
    deadline: Instant,
    /// The shard and slot it waits in, once polled.
    slot: Option<(Arc<Shard>, usize)>,
}

impl Sleep for CoarseSleep {}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            this.release();
            return Poll::Ready(());
        }
        match &this.slot {
            Some((shard, i)) => {
                let mut slab = shard.lock();
                match slab.slots.get_mut(*i) {
                    // Still waiting: keep the latest waker.
                    Some(Some((_, w))) if !w.will_wake(cx.waker()) => *w = cx.waker().clone(),
                    Some(Some(_)) => {}
                    // Woken by the ticker (which empties the slot but
                    // leaves it to this sleep): wait again in it.
                    Some(slot @ None) => *slot = Some((this.deadline, cx.waker().clone())),
                    None => {}
                }
            }
            None => {
                start_ticker();
                let Ok(shard) = SHARD.try_with(Arc::clone) else {
                    // The thread is ending: nothing will wake this sleep, and
                    // nothing waits on it past the thread's end.
                    return Poll::Pending;
                };
                let i = {
                    let mut slab = shard.lock();
                    let waiting = Some((this.deadline, cx.waker().clone()));
                    match slab.free.pop() {
                        Some(i) => {
                            slab.slots[i] = waiting;
                            i
                        }
                        None => {
                            slab.slots.push(waiting);
                            slab.slots.len() - 1
                        }
                    }
                };
                this.slot = Some((shard, i));
            }
        }
        Poll::Pending
    }
}

impl CoarseSleep {
    /// Gives its slot back (if it holds one). A slot stays this sleep's
    /// until then, also after the ticker emptied it.
    fn release(&mut self) {
        if let Some((shard, i)) = self.slot.take() {
            let mut slab = shard.lock();
            if let Some(slot) = slab.slots.get_mut(i) {
                *slot = None;
                slab.free.push(i);
            }
        }
    }
}

impl Drop for CoarseSleep {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots_in_use() -> usize {
        SHARD.with(|s| {
            let slab = s.lock();
            slab.slots.len() - slab.free.len()
        })
    }

    /// A sleep ends after its deadline, not before, and within a few ticks
    /// even when nothing else polls its task.
    #[tokio::test]
    async fn a_sleep_wakes_its_task_after_the_deadline() {
        let start = Instant::now();
        CoarseTimer.sleep(Duration::from_millis(300)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(300), "fired early: {took:?}");
        assert!(took < Duration::from_secs(5), "never woken in time: {took:?}");
        assert_eq!(slots_in_use(), 0, "its slot is free again");
    }

    /// Sleeps dropped before their deadline (a request head arrived in
    /// time) give their slots back, so the slab stays as small as the
    /// number of sleeps waiting at once.
    #[tokio::test]
    async fn dropped_sleeps_leave_no_slot_behind() {
        let before = slots_in_use();
        for _ in 0..1000 {
            let mut s = CoarseTimer.sleep(Duration::from_secs(30));
            let waker = futures_noop_waker();
            let mut cx = Context::from_waker(&waker);
            assert!(s.as_mut().poll(&mut cx).is_pending());
            assert_eq!(slots_in_use(), before + 1);
        }
        assert_eq!(slots_in_use(), before);
        SHARD.with(|s| assert!(s.lock().slots.len() <= before + 1, "slots are reused"));
    }

    /// hyper closes a client connection that does not send a complete
    /// head within its header-read timeout, with this timer.
    #[tokio::test]
    async fn hyper_times_out_a_slow_head_with_it() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let svc = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
            });
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(CoarseTimer).header_read_timeout(Duration::from_millis(500));
            let _ = b.serve_connection(hyper_util::rt::TokioIo::new(stream), svc).await;
        });
        let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n").await.expect("write");
        let start = Instant::now();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "the connection was closed by the timeout");
        assert!(
            start.elapsed() >= Duration::from_millis(400),
            "not before the timeout: {:?}",
            start.elapsed()
        );
    }

    fn futures_noop_waker() -> Waker {
        Waker::noop().clone()
    }
}
