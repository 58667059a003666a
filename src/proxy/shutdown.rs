//! Graceful shutdown: the signals that start it, the counts of what it
//! waits for ([`Tasks`]), and driving a connection until it is asked to
//! finish.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// Counts background tasks so shutdown can wait for them.
#[derive(Default)]
pub struct Tasks {
    running: AtomicUsize,
    idle: Notify,
}

/// Held while a background task runs.
pub struct TaskGuard(Arc<Tasks>);

impl Tasks {
    /// How many are running now.
    pub fn count(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Registers a running task until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> TaskGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        TaskGuard(self.clone())
    }

    /// Waits until no task runs.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Drives a client connection until it ends; once `closing` turns true it
/// is asked (with `graceful`) to finish its current exchange and close.
pub async fn serve_until_closing<C, E>(
    conn: C,
    mut closing: tokio::sync::watch::Receiver<bool>,
    graceful: impl FnOnce(std::pin::Pin<&mut C>),
) -> Result<(), E>
where
    C: std::future::Future<Output = Result<(), E>>,
{
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        _ = async { let _ = closing.wait_for(|c| *c).await; } => {
            graceful(conn.as_mut());
            conn.await
        }
    }
}

/// Resolves when SIGINT or SIGTERM arrives.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
