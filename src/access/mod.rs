//! The access log: one line per proxied request, written when its response
//! body has ended, as JSON or in Squid's native format ([`mod@format`]), to
//! standard output or to a file that `SIGHUP` reopens (`server.access_log`,
//! `server.access_log_format`).
//!
//! The serving threads never write: a line is formatted on the thread that
//! finished the response and appended to a buffer in memory (one short
//! lock); a thread of its own writes the buffer out every
//! [`FLUSH_INTERVAL`]. When the destination does not keep up (a full pipe,
//! a stalled disk), lines beyond [`MAX_PENDING`] bytes are dropped rather
//! than hold requests, and a warning says how many.
//!
//! The old form of `server.access_log` (a level: `"info"`, ...) is not
//! handled here: it is a tracing event ([`crate::wire::body::AccessLine`]).

pub mod format;

use crate::config::{AccessLogFormat, AccessLogTarget, ServerConfig};
use crawlcache_base::locks::lock;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tracing target of this module's own messages: not the module path,
/// `crawlcache::access`, which is the target of the old form's access lines
/// (and a filter on it would match these too).
const LOG_TARGET: &str = "crawlcache";

/// How often buffered lines are written out.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// The most bytes of lines waiting to be written; further lines are
/// dropped (and counted) until the writer catches up.
pub const MAX_PENDING: usize = 4 * 1024 * 1024;

/// Where lines go.
enum Sink {
    Stdout,
    File { path: PathBuf, file: File },
}

impl Sink {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Sink::File { file, .. } => file.write_all(bytes),
        }
    }
}

/// Opens `path` for appending, creating it if missing.
fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// What the serving threads and the writer share.
struct Shared {
    format: AccessLogFormat,
    /// Lines formatted and not yet written.
    pending: Mutex<Vec<u8>>,
    /// The destination, held while writing or reopening.
    sink: Mutex<Sink>,
    /// Lines dropped since the last warning.
    dropped: AtomicU64,
    /// The last write failed: the next failure is not warned about again
    /// (the writer retries ten times a second), the next success is.
    failing: AtomicBool,
}

impl Shared {
    /// Writes the pending lines out (swapping buffers, so the serving
    /// threads wait only for the swap). Errors: the destination's.
    fn write_out(&self, sink: &mut Sink, spare: &mut Vec<u8>) -> io::Result<()> {
        spare.clear();
        std::mem::swap(&mut *lock(&self.pending), spare);
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(target: LOG_TARGET, "access log: {dropped} lines dropped, the destination did not keep up");
        }
        if spare.is_empty() {
            return Ok(());
        }
        let written = sink.write_all(spare);
        if written.is_ok() && self.failing.swap(false, Ordering::Relaxed) {
            tracing::warn!(target: LOG_TARGET, "the access log is written again");
        }
        written
    }

    /// Warns that lines could not be written to `sink`, once per run of
    /// failures; the proxy carries on (those lines are lost).
    fn warn_write(&self, sink: &Sink, e: &io::Error) {
        if self.failing.swap(true, Ordering::Relaxed) {
            return;
        }
        match sink {
            Sink::Stdout => {
                tracing::warn!(target: LOG_TARGET, "cannot write the access log to standard output, lines are lost until it works again: {e}")
            }
            Sink::File { path, .. } => {
                tracing::warn!(target: LOG_TARGET, "cannot write the access log {}, lines are lost until it works again: {e}", path.display())
            }
        }
    }
}

/// The access-log writer. Cheap to share; lines still buffered are written
/// by [`AccessLog::flush`] (the proxy calls it at shutdown).
pub struct AccessLog {
    shared: Arc<Shared>,
}

/// Why the access log could not be started.
#[derive(Debug, thiserror::Error)]
pub enum AccessLogError {
    /// The file `server.access_log` names cannot be opened for appending.
    #[error("cannot open the access log {} (server.access_log): {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The writing thread could not be started.
    #[error("cannot start the access log writer: {0}")]
    Writer(io::Error),
}

impl AccessLog {
    /// The writer `server` asks for: `None` when `access_log` is `off` or
    /// the old level form (which is logged through tracing; a warning
    /// saying so is logged once, here). Starts the writing thread.
    /// Errors: [`AccessLogError`], the file cannot be opened (the message
    /// names it and the key) or the thread started.
    pub fn open(server: &ServerConfig) -> Result<Option<AccessLog>, AccessLogError> {
        let sink = match &server.access_log {
            AccessLogTarget::Off => return Ok(None),
            AccessLogTarget::Level(level) => {
                tracing::warn!(
                    target: LOG_TARGET,
                    "server.access_log = \"{}\" is the old form (a line in the process log at that level, when `log` shows it); \
                     write server.access_log = \"stdout\" or a file path, with server.access_log_format = \"json\" or \"squid\"",
                    level.as_str().to_ascii_lowercase()
                );
                return Ok(None);
            }
            AccessLogTarget::Stdout => Sink::Stdout,
            AccessLogTarget::File(path) => {
                let file = open_append(path)
                    .map_err(|source| AccessLogError::Open { path: path.clone(), source })?;
                Sink::File { path: path.clone(), file }
            }
        };
        AccessLog::start(sink, server.access_log_format).map(Some).map_err(AccessLogError::Writer)
    }

    fn start(sink: Sink, format: AccessLogFormat) -> io::Result<AccessLog> {
        let shared = Arc::new(Shared {
            format,
            pending: Mutex::new(Vec::with_capacity(64 * 1024)),
            sink: Mutex::new(sink),
            dropped: AtomicU64::new(0),
            failing: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new().name("crawlcache-access".into()).spawn(move || {
            let mut spare = Vec::with_capacity(64 * 1024);
            loop {
                std::thread::sleep(FLUSH_INTERVAL);
                let Some(shared) = weak.upgrade() else { return };
                let mut sink = lock(&shared.sink);
                if let Err(e) = shared.write_out(&mut sink, &mut spare) {
                    shared.warn_write(&sink, &e);
                }
            }
        })?;
        Ok(AccessLog { shared })
    }

    /// Whether the destination is a file (which `SIGHUP` reopens).
    pub fn is_file(&self) -> bool {
        matches!(*lock(&self.shared.sink), Sink::File { .. })
    }

    /// Formats `entry` and queues it for writing; drops it (counted, and
    /// warned about by the writer) when [`MAX_PENDING`] bytes already wait.
    pub fn write(&self, entry: &format::Entry<'_>) {
        thread_local! {
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let _ = LINE.try_with(|line| {
            let Ok(mut line) = line.try_borrow_mut() else { return };
            line.clear();
            match self.shared.format {
                AccessLogFormat::Json => format::json(entry, &mut line),
                AccessLogFormat::Squid => format::squid(entry, &mut line),
            }
            let mut pending = lock(&self.shared.pending);
            if pending.len() + line.len() > MAX_PENDING {
                drop(pending);
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            pending.extend_from_slice(&line);
        });
    }

    /// Writes out every line queued so far. Errors: the destination's.
    pub fn flush(&self) -> io::Result<()> {
        let mut sink = lock(&self.shared.sink);
        self.shared.write_out(&mut sink, &mut Vec::new())
    }

    /// [`AccessLog::flush`] on a blocking thread, given up (with a warning)
    /// after `limit`: standard output may be a pipe nobody reads any more,
    /// and the proxy must still stop. Errors are warned about.
    pub async fn flush_within(self: Arc<Self>, limit: Duration) {
        match tokio::time::timeout(limit, tokio::task::spawn_blocking(move || self.flush())).await {
            Ok(Ok(Err(e))) => {
                tracing::warn!(target: LOG_TARGET, "cannot write the access log: {e}")
            }
            Err(_) => {
                tracing::warn!(target: LOG_TARGET, "the access log could not be written within {} s; its last lines are lost", limit.as_secs_f64())
            }
            Ok(_) => {}
        }
    }

    /// Writes out the lines queued so far to the file as it was, then opens
    /// the file's path again (after logrotate renamed it: a new file). On
    /// failure the old file is kept and a warning names the path. Nothing
    /// for standard output.
    pub fn reopen(&self) {
        let mut sink = lock(&self.shared.sink);
        if let Err(e) = self.shared.write_out(&mut sink, &mut Vec::new()) {
            self.shared.warn_write(&sink, &e);
        }
        if let Sink::File { path, file } = &mut *sink {
            match open_append(path) {
                Ok(f) => {
                    *file = f;
                    tracing::info!(target: LOG_TARGET, "access log {} reopened (SIGHUP)", path.display());
                }
                Err(e) => {
                    tracing::warn!(target: LOG_TARGET, "cannot reopen the access log {} on SIGHUP, still writing to the file it was: {e}", path.display())
                }
            }
        }
    }
}

/// Spawns the task that reopens `log`'s file on every `SIGHUP` (logrotate
/// renamed it) until `closing` turns true, when `log` writes to a file;
/// otherwise nothing, and `SIGHUP` keeps its default action. The handler
/// is installed before this returns, so a `SIGHUP` right after start
/// cannot kill the process. Call it inside a tokio runtime. Errors: the
/// handler cannot be installed.
pub fn spawn_reopener(
    log: Option<&Arc<AccessLog>>,
    mut closing: tokio::sync::watch::Receiver<bool>,
) -> io::Result<()> {
    let Some(log) = log.filter(|l| l.is_file()).cloned() else { return Ok(()) };
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = hup.recv() => log.reopen(),
                _ = closing.wait_for(|c| *c) => break,
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlcache_policy::cache_status::Outcome;

    fn entry(url: &str) -> format::Entry<'_> {
        format::Entry {
            time: std::time::SystemTime::now(),
            client: "127.0.0.1:1".parse().unwrap(),
            method: "GET",
            url,
            key: None,
            status: 200,
            outcome: Outcome::Miss,
            squid_code: "TCP_MISS",
            bytes: 1,
            elapsed: Duration::from_millis(1),
            user_agent: None,
            robots: "-",
            client_version: http::Version::HTTP_11,
            upstream_version: Some(http::Version::HTTP_11),
            peer: None,
            content_type: None,
        }
    }

    /// A destination that refuses writes (a full disk: /dev/full) loses
    /// lines without stopping anything: `write` still queues, the writer
    /// reports the error, and it is warned about once per run of failures.
    #[test]
    fn a_failing_destination_reports_and_keeps_accepting_lines() {
        let full = Path::new("/dev/full");
        let Ok(file) = open_append(full) else { return };
        let log =
            AccessLog::start(Sink::File { path: full.to_path_buf(), file }, AccessLogFormat::Squid)
                .unwrap();
        log.write(&entry("http://a.test/1"));
        let e = log.flush().unwrap_err();
        let sink = lock(&log.shared.sink);
        log.shared.warn_write(&sink, &e);
        assert!(log.shared.failing.load(Ordering::Relaxed));
        drop(sink);
        log.write(&entry("http://a.test/2"));
        assert!(log.flush().is_err());
    }

    /// After the file is renamed (as logrotate does), `reopen` writes what
    /// was queued to the renamed file and later lines to a new file at the
    /// configured path.
    #[test]
    fn reopen_starts_a_new_file_at_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let log = AccessLog::start(
            Sink::File { path: path.clone(), file: open_append(&path).unwrap() },
            AccessLogFormat::Json,
        )
        .unwrap();
        log.write(&entry("http://a.test/1"));
        let rotated = dir.path().join("access.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        log.reopen();
        log.write(&entry("http://a.test/2"));
        log.flush().unwrap();
        let old = std::fs::read_to_string(&rotated).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert!(old.contains("http://a.test/1") && !old.contains("http://a.test/2"), "{old}");
        assert!(new.contains("http://a.test/2") && !new.contains("http://a.test/1"), "{new}");
    }
}
