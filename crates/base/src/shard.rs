//! Picking a per-thread shard: the ordinal of the calling thread.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The number of the calling thread, given in turn (0, 1, 2, ...) at its
/// first call: what per-thread slots and shards are picked by (the metrics
/// counters, the audit log's buffers), so that the first threads to serve
/// requests get distinct ones. 0 while the thread is being torn down.
pub fn thread_ordinal() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static ORDINAL: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ORDINAL.try_with(|n| *n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_distinct_ordinals_and_keep_them() {
        let here = thread_ordinal();
        assert_eq!(here, thread_ordinal());
        let other = std::thread::spawn(thread_ordinal).join().unwrap();
        assert_ne!(here, other);
    }
}
