//! The audit trail: one JSON line per proxied request (SPEC §4).
//!
//! Lines go to `<data_dir>/audit/audit-YYYY-MM-DD.jsonl`, the date being the
//! UTC date of the record's `time`, so files rotate daily by themselves.
//! [`AuditLog::append`] adds each whole line to the calling thread's buffer
//! (one of `SHARDS`, a thread's own unless more threads append, so the
//! serving threads share no lock on the request path); the buffers are written, their lines merged back into
//! the order they were appended, with a single `write` per day on a file
//! opened for appending when one reaches [`FLUSH_BYTES`], every
//! [`FLUSH_INTERVAL`] (a background thread), on [`AuditLog::flush`] and
//! when the log is dropped: concurrent writers never interleave, and a
//! request costs a copy, not a system call.
//! A crash can lose the lines of the last [`FLUSH_INTERVAL`].
//! [`skips`] reads the files back and lists the disallowed requests.
//!
//! Which requests get a line is `audit.mode` ([`AuditMode`]). Retention
//! (`audit.keep`, [`maintain`]): when the log opens and whenever the day a
//! line is written to changes, a background thread gzip-compresses the files
//! of past days (`audit-YYYY-MM-DD.jsonl.gz`) and deletes those older than
//! the last `keep` days; [`skips`] reads both forms, [`disk_bytes`] counts
//! what the directory holds.

use crawlcache_base::locks::lock;

mod retention;

use retention::{day_of, Keeper};
pub use retention::{disk_bytes, maintain, Maintained};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// `audit.mode`: which proxied requests get an audit line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditMode {
    /// Every proxied request (SPEC section 4: the rules in force for each).
    All,
    /// Only requests robots.txt disallowed.
    Disallowed,
    /// None: no audit log at all.
    Off,
}

/// `method` without a copy when it is one of RFC 9110's (section 9.3) or
/// PATCH, the methods nearly every request uses; a copy otherwise.
fn static_method(method: &str) -> Cow<'static, str> {
    const KNOWN: [&str; 9] =
        ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];
    match KNOWN.iter().find(|m| **m == method) {
        Some(m) => Cow::Borrowed(m),
        None => Cow::Owned(method.to_owned()),
    }
}

/// One proxied request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the request arrived, RFC 3339 in UTC with milliseconds
    /// (`2026-11-30T01:02:03.456Z`).
    pub time: String,
    /// Request method.
    pub method: Cow<'static, str>,
    /// Absolute target URL.
    pub url: String,
    /// The product token checked (`null` when robots handling is off or no
    /// token could be derived).
    pub agent: Option<Arc<str>>,
    /// SHA-256 (hex) of the robots.txt snapshot in force (`null` when robots
    /// handling is off).
    pub robots_sha256: Option<Arc<str>>,
    /// `fetched`, `cached`, `stale_usable`, `stale_degraded`, `expired` or
    /// `offline`.
    pub disposition: Option<Cow<'static, str>>,
    /// `allowed` or `disallowed`.
    pub verdict: Option<Cow<'static, str>>,
    /// The deciding rule (`Disallow: /private`, `rules unavailable`, ...).
    pub rule: Option<String>,
    /// The deciding rule's 1-based line in the robots.txt.
    pub line: Option<u32>,
    /// The `Cache-Status` value, or a short form such as `hit`, `miss`,
    /// `blocked`.
    pub cache_status: Arc<str>,
    /// Status code from the origin, `null` when it was not contacted.
    pub upstream_status: Option<u16>,
    /// Response body bytes sent to the client.
    pub bytes: u64,
    /// Milliseconds from request to end of response.
    pub ms: u64,
    /// The `User-Agent` the robots.txt snapshot in force was fetched as
    /// (`null` when robots handling is off or it was not recorded).
    #[serde(default)]
    pub robots_fetched_as: Option<Arc<str>>,
    /// A warning about the rules in force, e.g. `robots.txt answered 403 to
    /// <identity>: rules treated as allow-all (RFC 9309 2.3.1.3); check the
    /// crawler's identity` (`null` when there is none).
    #[serde(default)]
    pub robots_warning: Option<Arc<str>>,
    /// The cache key, when `cache.key_rules` made it differ from `url`
    /// (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `HTTP/2` when the client sent the request over HTTP/2 (absent:
    /// HTTP/1.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<Cow<'static, str>>,
    /// `HTTP/2` when crawlcache spoke HTTP/2 to the origin (absent:
    /// HTTP/1.1, or the origin was not contacted, as `upstream_status`
    /// says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_version: Option<Cow<'static, str>>,
}

impl AuditRecord {
    /// A record for a request that arrived at `at`, with the robots fields
    /// taken from `robots` (`None` when `robots.mode = "off"`; the check's
    /// strings move into the record, as the proxy's check ends with the
    /// request). The cache status, upstream status, bytes and milliseconds
    /// start empty; set them when the response is done.
    pub fn new(
        at: SystemTime,
        method: &str,
        url: &str,
        robots: Option<crawlcache_robots::enforce::RobotsCheck>,
    ) -> AuditRecord {
        AuditRecord::with_cache_status(at, method, url, robots, Arc::from(""))
    }

    /// [`AuditRecord::new`] with the `Cache-Status` value already known
    /// (the proxy's, from [`crawlcache_policy::cache_status::CacheStatus::apply`]).
    pub fn with_cache_status(
        at: SystemTime,
        method: &str,
        url: &str,
        robots: Option<crawlcache_robots::enforce::RobotsCheck>,
        cache_status: Arc<str>,
    ) -> AuditRecord {
        let mut record = AuditRecord {
            time: crawlcache_base::time::format_rfc3339(at),
            method: static_method(method),
            url: url.to_string(),
            agent: None,
            robots_sha256: None,
            disposition: None,
            verdict: None,
            rule: None,
            line: None,
            cache_status,
            upstream_status: None,
            bytes: 0,
            ms: 0,
            robots_fetched_as: None,
            robots_warning: None,
            key: None,
            client_version: None,
            upstream_version: None,
        };
        if let Some(r) = robots {
            record.disposition = Some(Cow::Borrowed(r.disposition.as_str()));
            record.verdict = Some(Cow::Borrowed(Self::verdict_str(r.verdict.allowed)));
            record.line = r.verdict.line;
            record.rule = r.verdict.rule;
            record.agent = Some(r.agent);
            record.robots_sha256 = Some(r.sha256);
            record.robots_fetched_as = r.fetched_as;
            record.robots_warning = r.warning;
        }
        record
    }

    /// Fills the cache fields from the request's outcome: `cache_status`
    /// (its `Cache-Status` value) and `upstream_status` (`fwd-status`).
    pub fn set_outcome(&mut self, status: &crawlcache_policy::cache_status::CacheStatus) {
        self.cache_status =
            status.to_field_value(crawlcache_policy::cache_status::CACHE_NAME).into();
        self.upstream_status = status.fwd_status;
    }

    /// The verdict string for `allowed`: `allowed` or `disallowed`.
    pub fn verdict_str(allowed: bool) -> &'static str {
        if allowed {
            "allowed"
        } else {
            "disallowed"
        }
    }

    /// Appends the record as one compact JSON object (no newline) to `out`:
    /// the bytes `serde_json::to_writer` writes for it (same field order,
    /// `null` for absent values, `key`, `client_version` and
    /// `upstream_version` left out when absent, strings escaped
    /// as RFC 8259 section 7 and serde_json do: `"`, `\` and control
    /// characters only), written directly, as the audit line of every
    /// request is; the serializer's generic path cost twice as much.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"time\":");
        json_str(out, &self.time);
        out.extend_from_slice(b",\"method\":");
        json_str(out, &self.method);
        out.extend_from_slice(b",\"url\":");
        json_str(out, &self.url);
        out.extend_from_slice(b",\"agent\":");
        json_opt_str(out, self.agent.as_deref());
        out.extend_from_slice(b",\"robots_sha256\":");
        json_opt_str(out, self.robots_sha256.as_deref());
        out.extend_from_slice(b",\"disposition\":");
        json_opt_str(out, self.disposition.as_deref());
        out.extend_from_slice(b",\"verdict\":");
        json_opt_str(out, self.verdict.as_deref());
        out.extend_from_slice(b",\"rule\":");
        json_opt_str(out, self.rule.as_deref());
        out.extend_from_slice(b",\"line\":");
        json_opt_u64(out, self.line.map(u64::from));
        out.extend_from_slice(b",\"cache_status\":");
        json_str(out, &self.cache_status);
        out.extend_from_slice(b",\"upstream_status\":");
        json_opt_u64(out, self.upstream_status.map(u64::from));
        out.extend_from_slice(b",\"bytes\":");
        json_u64(out, self.bytes);
        out.extend_from_slice(b",\"ms\":");
        json_u64(out, self.ms);
        out.extend_from_slice(b",\"robots_fetched_as\":");
        json_opt_str(out, self.robots_fetched_as.as_deref());
        out.extend_from_slice(b",\"robots_warning\":");
        json_opt_str(out, self.robots_warning.as_deref());
        if let Some(key) = &self.key {
            out.extend_from_slice(b",\"key\":");
            json_str(out, key);
        }
        if let Some(v) = &self.client_version {
            out.extend_from_slice(b",\"client_version\":");
            json_str(out, v);
        }
        if let Some(v) = &self.upstream_version {
            out.extend_from_slice(b",\"upstream_version\":");
            json_str(out, v);
        }
        out.push(b'}');
    }

    /// Whether the record is a disallowed request.
    pub fn is_disallowed(&self) -> bool {
        self.verdict.as_deref() == Some("disallowed")
    }

    /// The record's time, parsed back (`None` if malformed).
    pub fn at(&self) -> Option<SystemTime> {
        crawlcache_base::time::parse_rfc3339(&self.time)
    }
}

/// The audit directory inside a data directory: `<data_dir>/audit`.
pub fn audit_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("audit")
}

/// The file for the UTC day of `at`: `audit-YYYY-MM-DD.jsonl`.
pub fn file_name(at: SystemTime) -> String {
    format!("audit-{}.jsonl", &crawlcache_base::time::format_rfc3339(at)[..10])
}

/// A thread's buffered lines are written (with every other thread's) once
/// they reach this many bytes.
pub const FLUSH_BYTES: usize = 64 * 1024;
/// Buffered lines are written at least this often.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Shards of the line buffer: each thread appends to one of them, assigned
/// in turn at its first append (threads share one only beyond this many), so
/// the serving threads do not share a lock or the cache lines of a buffer on
/// the request path.
const SHARDS: usize = 16;
/// Emptied shard buffers kept for reuse, at most.
const SPARES: usize = 4;

/// The audit writer for one directory.
pub struct AuditLog {
    shared: Arc<Shared>,
}

/// The buffer shards and the output, shared with the flushing thread.
struct Shared {
    dir: PathBuf,
    mode: AuditMode,
    /// Retention, run in the background (none: every file kept as written).
    keeper: Option<Arc<Keeper>>,
    shards: Box<[Shard]>,
    /// Taken first by every write: the open file, and buffers to reuse.
    out: Mutex<Out>,
}

/// One shard, alone on its cache lines.
#[repr(align(128))]
struct Shard(Mutex<Lines>);

/// Whole lines not yet written, in the order they were appended.
#[derive(Default)]
struct Lines {
    bytes: Vec<u8>,
    /// Per line: when it was appended, where it ends in `bytes`, its day
    /// (`YYYY-MM-DD`, the file it goes to).
    index: Vec<(std::time::Instant, usize, [u8; 10])>,
}

/// The open file (and its day), and emptied shard buffers kept for reuse.
struct Out {
    file: Option<([u8; 10], File)>,
    spare: Vec<Lines>,
}

impl Shared {
    /// Writes every shard's buffered lines, merged back into the order they
    /// were appended (each line's append time; a thread's own lines are in
    /// order already), with one `write_all` per day to the file of that day.
    /// The lines are dropped even on error (lost, and said so).
    fn write_out(&self) -> io::Result<()> {
        let mut out = lock(&self.out);
        let mut taken = Vec::new();
        // Every shard is held while any is emptied: lines are stamped under
        // their shard's lock, so every line taken is older than every line
        // left for the next write (emptying one shard after another would
        // let a later line on a shard not yet reached go out before an
        // earlier one on a shard already passed). No deadlock: `out` is
        // always taken first, the shards in one order, and an append holds
        // one shard and nothing else.
        let mut held: Vec<_> = self.shards.iter().map(|shard| lock(&shard.0)).collect();
        for lines in held.iter_mut() {
            if !lines.index.is_empty() {
                let fresh = out.spare.pop().unwrap_or_default();
                taken.push(std::mem::replace(&mut **lines, fresh));
            }
        }
        drop(held);
        if taken.is_empty() {
            return Ok(());
        }
        // (appended, shard, start, end, day) of every line, in append order.
        let mut order = Vec::with_capacity(taken.iter().map(|t| t.index.len()).sum());
        for (i, t) in taken.iter().enumerate() {
            let mut start = 0;
            for &(at, end, day) in &t.index {
                order.push((at, i, start, end, day));
                start = end;
            }
        }
        order.sort_by_key(|l| l.0);
        let mut result = Ok(());
        let mut run = Vec::with_capacity(taken.iter().map(|t| t.bytes.len()).sum());
        let mut k = 0;
        while k < order.len() {
            let day = order[k].4;
            run.clear();
            while k < order.len() && order[k].4 == day {
                let (_, i, start, end, _) = order[k];
                run.extend_from_slice(&taken[i].bytes[start..end]);
                k += 1;
            }
            result = result.and(self.write_day(&mut out, day, &run));
        }
        for mut t in taken {
            // A buffer a burst of huge lines grew is not kept.
            if t.bytes.capacity() <= 4 * FLUSH_BYTES && out.spare.len() < SPARES {
                t.bytes.clear();
                t.index.clear();
                out.spare.push(t);
            }
        }
        result
    }

    /// Appends `bytes` (whole lines) to the file of `day`, opening it (for
    /// appending) when the open one is of another day. A move to a later
    /// day starts a [`maintain`] run for that day.
    fn write_day(&self, out: &mut Out, day: [u8; 10], bytes: &[u8]) -> io::Result<()> {
        if out.file.as_ref().is_none_or(|(d, _)| *d != day) {
            let later = out.file.as_ref().is_some_and(|(d, _)| *d < day);
            out.file = None;
            if let Some(keeper) = self.keeper.as_ref().filter(|_| later) {
                keeper.start(day);
            }
            let path = self.dir.join(format!("audit-{}.jsonl", String::from_utf8_lossy(&day)));
            let f = OpenOptions::new().create(true).append(true).open(&path)?;
            out.file = Some((day, f));
        }
        match out.file.as_mut() {
            Some((_, f)) => f.write_all(bytes),
            None => Err(io::Error::other("audit file not open")),
        }
    }
}

/// The shard the calling thread appends to (by its
/// [`crawlcache_base::shard::thread_ordinal`]).
fn shard_index() -> usize {
    #[cfg(test)]
    if let Some(i) = FORCED_SHARD.with(std::cell::Cell::get) {
        return i;
    }
    crawlcache_base::shard::thread_ordinal() % SHARDS
}

#[cfg(test)]
thread_local! {
    /// A shard a test put the calling thread on ([`use_shard`]).
    static FORCED_SHARD: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Makes the calling thread append to shard `i` from now on (tests that
/// need threads on distinct shards whatever else the process runs).
#[cfg(test)]
fn use_shard(i: usize) {
    FORCED_SHARD.with(|s| s.set(Some(i % SHARDS)));
}

impl AuditLog {
    /// A writer into `dir` (created, owner-only on Unix, if missing), with
    /// its background flushing thread, writing every request's line and
    /// leaving the files as written (no retention). Errors: the directory
    /// cannot be created or the thread cannot start.
    pub fn open(dir: &Path) -> io::Result<AuditLog> {
        AuditLog::open_as(dir, AuditMode::All, None)
    }

    /// [`AuditLog::open`] with `audit.mode` and retention for `audit.keep`
    /// (whole days, rounded up; zero keeps every file, past days are still
    /// compressed). Retention ([`maintain`]) runs once now for the current
    /// UTC day, in the background, and at each rollover.
    pub fn open_with(dir: &Path, mode: AuditMode, keep: Duration) -> io::Result<AuditLog> {
        AuditLog::open_as(dir, mode, Some(keep))
    }

    fn open_as(dir: &Path, mode: AuditMode, keep: Option<Duration>) -> io::Result<AuditLog> {
        crawlcache_base::fsutil::create_private_dir(dir)?;
        let shared = Arc::new_cyclic(|writer: &std::sync::Weak<Shared>| Shared {
            dir: dir.to_path_buf(),
            mode,
            keeper: keep.map(|keep| {
                let keep_days = keep.as_secs().div_ceil(86_400);
                let writer = writer.clone();
                let claim: retention::Claim = Box::new(move |day, from, to| {
                    let Some(writer) = writer.upgrade() else { return std::fs::rename(from, to) };
                    let mut out = lock(&writer.out);
                    if out.file.as_ref().is_some_and(|(d, _)| d == day.as_bytes()) {
                        out.file = None;
                    }
                    std::fs::rename(from, to)
                });
                Arc::new(Keeper {
                    dir: dir.to_path_buf(),
                    claim,
                    keep_days,
                    pending: Mutex::new(None),
                    busy: AtomicBool::new(false),
                })
            }),
            shards: (0..SHARDS).map(|_| Shard(Mutex::new(Lines::default()))).collect(),
            out: Mutex::new(Out { file: None, spare: Vec::new() }),
        });
        let today = utc_day(SystemTime::now());
        let weak = Arc::downgrade(&shared);
        let mut seen_day = today;
        let mut ticks = 0u32;
        std::thread::Builder::new().name("crawlcache-audit".into()).spawn(move || loop {
            std::thread::sleep(FLUSH_INTERVAL);
            let Some(shared) = weak.upgrade() else { return };
            if let Err(e) = shared.write_out() {
                tracing::warn!("cannot write the audit log in {}: {e}", shared.dir.display());
            }
            // The day's rollover prunes and compresses even when no line is
            // written that day (mode "disallowed" on a quiet crawl): the
            // clock is read once a second.
            ticks = ticks.wrapping_add(1);
            if let (Some(keeper), 0) = (&shared.keeper, ticks % 10) {
                let day = utc_day(SystemTime::now());
                if day > seen_day {
                    seen_day = day;
                    keeper.start(day);
                }
            }
        })?;
        if let Some(keeper) = &shared.keeper {
            keeper.start(today);
        }
        Ok(AuditLog { shared })
    }

    /// The directory written to.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Appends `record` as one line for the file of its day (switching files
    /// when the day changes). The line joins the buffer shard of the calling
    /// thread; see the module documentation for when it is written. Errors:
    /// the buffer was due and a file could not be opened or written for the
    /// lines then written (this thread's and the other threads'); the
    /// caller logs them and carries on.
    pub fn append(&self, record: &AuditRecord) -> io::Result<()> {
        match self.shared.mode {
            AuditMode::All => {}
            AuditMode::Disallowed if record.is_disallowed() => {}
            AuditMode::Disallowed | AuditMode::Off => return Ok(()),
        }
        thread_local! {
            /// The line being serialized, reused by each request on this thread.
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => self.append_with(record, &mut line),
            // Re-entered on this thread (never in practice): a buffer of its own.
            Err(_) => self.append_with(record, &mut Vec::new()),
        })
    }

    fn append_with(&self, record: &AuditRecord, line: &mut Vec<u8>) -> io::Result<()> {
        // The buffer a rare huge record (a very long URL) grew is not kept.
        if line.capacity() > 64 * 1024 {
            *line = Vec::new();
        }
        line.clear();
        record.write_json(line);
        line.push(b'\n');
        let mut day = [0u8; 10];
        match record.time.get(..10).filter(|d| crawlcache_base::time::is_date(d)) {
            Some(d) => day.copy_from_slice(d.as_bytes()),
            None => day.copy_from_slice(
                &crawlcache_base::time::format_rfc3339(SystemTime::now()).as_bytes()[..10],
            ),
        }
        let due = {
            let mut lines = lock(&self.shared.shards[shard_index()].0);
            lines.bytes.extend_from_slice(line);
            let end = lines.bytes.len();
            lines.index.push((std::time::Instant::now(), end, day));
            end >= FLUSH_BYTES
        };
        match due {
            true => self.shared.write_out(),
            false => Ok(()),
        }
    }

    /// Writes the buffered lines now (at shutdown; tests). Errors: the file
    /// cannot be opened or written.
    pub fn flush(&self) -> io::Result<()> {
        self.shared.write_out()
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("cannot write the audit log in {}: {e}", self.shared.dir.display());
        }
    }
}

/// The UTC day of `at`, `YYYY-MM-DD` as bytes (the audit files' names).
fn utc_day(at: SystemTime) -> [u8; 10] {
    let mut day = [0u8; 10];
    day.copy_from_slice(&crawlcache_base::time::format_rfc3339(at).as_bytes()[..10]);
    day
}

/// What [`skips`] read: the disallowed requests, and the day files it could
/// not read through (path and error), whose lines before the damage are in
/// `records`.
#[derive(Debug, Default)]
pub struct Skips {
    /// The disallowed requests, oldest first.
    pub records: Vec<AuditRecord>,
    /// Files not read through, with the reason.
    pub damaged: Vec<(PathBuf, String)>,
}

/// The disallowed requests recorded in `dir` at or after `since`, oldest
/// first (for `crawlcache audit skips [--since DURATION]`), from plain and
/// gzip-compressed day files. Files of days before `since` are not read;
/// malformed lines are skipped. A missing
/// directory gives an empty list. A file that cannot be read through (a
/// truncated or damaged `.gz`) gives what was read before the damage and
/// its path and error in [`Skips::damaged`]; the other days are still read.
/// Errors: the directory cannot be listed.
pub fn skips(dir: &Path, since: SystemTime) -> io::Result<Skips> {
    let first_day = crawlcache_base::time::format_rfc3339(since)[..10].to_string();
    // The day files, plain, compressed, or being compressed (a day's file
    // moved aside by retention before its lines reach the `.gz`).
    let list = || -> io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    let name = name
                        .strip_prefix('.')
                        .and_then(|n| n.strip_suffix(".compressing"))
                        .unwrap_or(name);
                    day_of(name).is_some_and(|day| day >= first_day.as_str())
                })
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        files.sort();
        Ok(files)
    };
    // Retention moving a day's lines while they are read shows as another
    // list of files afterwards: read again (a few times at most).
    let mut files = list()?;
    let mut attempt = 0;
    loop {
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        let mut vanished = false;
        for path in &files {
            let f = match File::open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    vanished = true;
                    break;
                }
                Err(e) => {
                    damaged.push((path.clone(), e.to_string()));
                    continue;
                }
            };
            let reader: Box<dyn BufRead> = match path.extension().is_some_and(|e| e == "gz") {
                true => Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(f))),
                false => Box::new(BufReader::new(f)),
            };
            for line in reader.split(b'\n') {
                let line = match line {
                    Ok(l) => l,
                    Err(e) => {
                        damaged.push((path.clone(), e.to_string()));
                        break;
                    }
                };
                let Ok(rec) = serde_json::from_slice::<AuditRecord>(&line) else { continue };
                if rec.is_disallowed() && rec.at().is_some_and(|t| t >= since) {
                    out.push(rec);
                }
            }
        }
        let now = list()?;
        if (!vanished && now == files) || attempt == 4 {
            out.sort_by_key(AuditRecord::at);
            return Ok(Skips { records: out, damaged });
        }
        files = now;
        attempt += 1;
    }
}

/// Appends `s` as a JSON string: quoted, with `"` and `\` escaped by a
/// backslash, `\b \f \n \r \t` for those controls and `\u00XX` for
/// the other control characters (U+0000 to U+001F); everything else,
/// non-ASCII included, as it is (RFC 8259 section 7, as serde_json writes it).
fn json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    // Most strings (URLs, tokens, hashes) need no escape at all.
    if !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                &[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// [`json_str`], or `null` for `None`.
fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `n` in decimal (a JSON number).
fn json_u64(out: &mut Vec<u8>, n: u64) {
    let (digits, at) = crawlcache_base::time::decimal(n, 1);
    out.extend_from_slice(&digits[at..]);
}

/// [`json_u64`], or `null` for `None`.
fn json_opt_u64(out: &mut Vec<u8>, n: Option<u64>) {
    match n {
        Some(n) => json_u64(out, n),
        None => out.extend_from_slice(b"null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn at(s: &str) -> SystemTime {
        crawlcache_base::time::parse_rfc3339(s).expect("valid time")
    }

    fn rec(time: SystemTime, url: &str, allowed: bool) -> AuditRecord {
        AuditRecord {
            time: crawlcache_base::time::format_rfc3339(time),
            method: "GET".into(),
            url: url.into(),
            agent: Some("ExampleBot".into()),
            robots_sha256: Some("ab".repeat(32).into()),
            disposition: Some("cached".into()),
            verdict: Some(AuditRecord::verdict_str(allowed).into()),
            rule: (!allowed).then(|| "Disallow: /private".into()),
            line: (!allowed).then_some(2),
            cache_status: "crawlcache; fwd=uri-miss".into(),
            upstream_status: allowed.then_some(200),
            bytes: 12,
            ms: 3,
            robots_fetched_as: Some("ExampleBot/1.0".into()),
            robots_warning: None,
            key: None,
            client_version: None,
            upstream_version: None,
        }
    }

    #[test]
    fn the_audit_line_is_what_serde_json_writes_and_reads_back() {
        // Strings with every character JSON escapes, and some it does not.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet: Vec<char> =
            (0u8..0x80).map(char::from).chain(['é', '€', '𝄞', '\u{2028}', '\u{7f}']).collect();
        let mut text = |n: u64| -> String {
            (0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect()
        };
        let mut records =
            vec![rec(at("2026-11-30T01:02:03.456Z"), "http://example.org/a?b=\"c\"", true)];
        for i in 0..300u64 {
            let mut r = rec(at("2026-11-30T01:02:03Z"), &text(i % 40), i % 3 == 0);
            r.method = text(i % 5).into();
            r.agent = (i % 4 != 0).then(|| text(8).into());
            r.rule = (i % 2 == 0).then(|| text(i % 17));
            r.line = (i % 5 == 0).then_some(u32::MAX - i as u32);
            r.cache_status = text(i % 23).into();
            r.upstream_status = (i % 6 != 0).then_some(i as u16 * 7);
            r.bytes = if i % 7 == 0 { u64::MAX } else { i * 1013 };
            r.ms = i;
            r.robots_warning = (i % 9 == 0).then(|| text(30).into());
            r.key = (i % 2 == 1).then(|| text(12));
            r.client_version = (i % 3 == 1).then(|| "HTTP/2".into());
            r.upstream_version = (i % 4 == 1).then(|| text(6).into());
            records.push(r);
        }
        for r in records {
            let mut line = Vec::new();
            r.write_json(&mut line);
            assert_eq!(
                String::from_utf8_lossy(&line),
                String::from_utf8_lossy(&serde_json::to_vec(&r).unwrap())
            );
            assert_eq!(serde_json::from_slice::<AuditRecord>(&line).unwrap(), r);
        }
    }

    #[test]
    fn a_damaged_compressed_day_is_named_and_the_other_days_still_read() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        let d1 = at("2026-11-29T12:00:00.000Z");
        let d2 = at("2026-11-30T12:00:00.000Z");
        for i in 0..200 {
            log.append(&rec(
                d1 + Duration::from_millis(i),
                &format!("http://a/private/old{i}"),
                false,
            ))
            .unwrap();
        }
        log.append(&rec(d2, "http://a/private/new", false)).unwrap();
        log.flush().unwrap();
        // The first day compressed, then cut short.
        let plain = std::fs::read(dir.path().join("audit-2026-11-29.jsonl")).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        std::fs::write(dir.path().join("audit-2026-11-29.jsonl.gz"), &gz[..gz.len() / 2]).unwrap();
        std::fs::remove_file(dir.path().join("audit-2026-11-29.jsonl")).unwrap();
        let read = skips(dir.path(), d1 - Duration::from_secs(3600)).unwrap();
        assert_eq!(read.damaged.len(), 1, "{:?}", read.damaged);
        assert!(read.damaged[0].0.ends_with("audit-2026-11-29.jsonl.gz"));
        assert!(
            read.records.iter().any(|r| r.url == "http://a/private/new"),
            "the undamaged day is read"
        );
        assert!(read.records.len() < 201, "the damaged day gives only what came before the damage");
    }

    #[test]
    fn lines_are_json_rotate_by_day_and_skips_lists_disallowed_since() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        let d1 = at("2026-11-29T23:59:59.000Z");
        let d2 = at("2026-11-30T00:00:01.000Z");
        log.append(&rec(d1, "http://a/private/1", false)).unwrap();
        log.append(&rec(d1, "http://a/ok", true)).unwrap();
        log.append(&rec(d2, "http://a/private/2", false)).unwrap();
        log.append(&rec(d2 + Duration::from_secs(5), "http://a/ok2", true)).unwrap();
        log.flush().unwrap();
        let f1 = std::fs::read_to_string(dir.path().join("audit-2026-11-29.jsonl")).unwrap();
        let f2 = std::fs::read_to_string(dir.path().join("audit-2026-11-30.jsonl")).unwrap();
        assert_eq!((f1.lines().count(), f2.lines().count()), (2, 2));
        for l in f1.lines().chain(f2.lines()) {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            for k in [
                "time",
                "method",
                "url",
                "agent",
                "robots_sha256",
                "disposition",
                "verdict",
                "rule",
                "line",
                "cache_status",
                "upstream_status",
                "bytes",
                "ms",
            ] {
                assert!(v.get(k).is_some(), "{k} missing in {l}");
            }
        }
        let all = skips(dir.path(), d1 - Duration::from_secs(3600)).unwrap().records;
        assert_eq!(
            all.iter().map(|r| r.url.as_str()).collect::<Vec<_>>(),
            ["http://a/private/1", "http://a/private/2"]
        );
        let later = skips(dir.path(), d2).unwrap().records;
        assert_eq!(
            later.iter().map(|r| r.url.as_str()).collect::<Vec<_>>(),
            ["http://a/private/2"]
        );
        assert!(skips(&dir.path().join("none"), d1).unwrap().records.is_empty());
        // Lines written before `robots_fetched_as` and `robots_warning`
        // existed still read.
        let old = r#"{"time":"2026-11-30T00:00:02.000Z","method":"GET","url":"http://a/old","agent":"B","robots_sha256":null,"disposition":"cached","verdict":"disallowed","rule":"Disallow: /","line":2,"cache_status":"x","upstream_status":null,"bytes":0,"ms":0}"#;
        let r: AuditRecord = serde_json::from_str(old).unwrap();
        assert_eq!((r.robots_fetched_as, r.robots_warning), (None, None));
    }

    #[test]
    fn record_from_a_robots_check_carries_the_rules_sha256_and_verdict() {
        use crawlcache_robots::enforce::RobotsCheck;
        use crawlcache_robots::registry::Rules;
        use crawlcache_robots::snapshot::{
            sha256_hex, Disposition, FetchOutcome, Origin, RobotsStatus, Snapshot, Windows,
        };
        let t = at("2026-11-30T12:00:00Z");
        let body = b"User-agent: *\nDisallow: /private\n";
        let s = Snapshot::new(
            Origin::new("http", "a.test", 80),
            RobotsStatus::Fetched,
            body.to_vec(),
            FetchOutcome::Ok { status: 200 },
            t,
        );
        let rules =
            Rules::new(Snapshot { fetched_as: Some("Bot/1.0 (+http://a.test/bot)".into()), ..s });
        let check = RobotsCheck::new(
            &rules,
            Disposition::StaleUsable,
            &Windows::default(),
            t,
            "Bot",
            "http://a.test/private/1",
        );
        let r = AuditRecord::new(t, "GET", "http://a.test/private/1", Some(check));
        assert_eq!(r.robots_sha256.as_deref(), Some(sha256_hex(body).as_str()));
        assert_eq!(
            (r.verdict.as_deref(), r.rule.as_deref(), r.line),
            (Some("disallowed"), Some("Disallow: /private"), Some(2))
        );
        assert_eq!(r.disposition.as_deref(), Some("stale_usable"));
        assert_eq!(r.agent.as_deref(), Some("Bot"));
        assert_eq!(r.time, "2026-11-30T12:00:00.000Z");
        assert_eq!(r.robots_fetched_as.as_deref(), Some("Bot/1.0 (+http://a.test/bot)"));
        assert_eq!(r.robots_warning, None);
        let off = AuditRecord::new(t, "GET", "http://a.test/", None);
        assert!(off.verdict.is_none() && off.robots_sha256.is_none());
    }

    #[test]
    fn concurrent_writers_never_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(AuditLog::open(dir.path()).unwrap());
        let t = at("2026-11-30T12:00:00Z");
        let long = format!("http://a/{}", "x".repeat(5000));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let log = log.clone();
                let url = format!("{long}/{i}");
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        log.append(&rec(t, &url, false)).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        log.flush().unwrap();
        let text = std::fs::read_to_string(dir.path().join("audit-2026-11-30.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1600);
        assert!(text.lines().all(|l| serde_json::from_str::<AuditRecord>(l).is_ok()));
        // A torn or foreign line in a file is skipped by the reader.
        std::fs::write(dir.path().join("audit-2026-11-30.jsonl"), format!("{text}{{not json\n"))
            .unwrap();
        assert_eq!(skips(dir.path(), t).unwrap().records.len(), 1600);
    }

    /// Two threads taking turns, each on a buffer of its own, leave their
    /// lines in the file in the order they appended them, across the writes
    /// that full buffers cause and while a third thread writes the buffers
    /// out all the time (as the background flush does, at any moment).
    #[test]
    fn lines_of_several_threads_are_written_in_the_order_they_were_appended() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(AuditLog::open(dir.path()).unwrap());
        let t = at("2026-11-30T12:00:00Z");
        let pad = "p".repeat(3000);
        let (to_b, b_rx) = std::sync::mpsc::channel::<usize>();
        let (to_a, a_rx) = std::sync::mpsc::channel::<usize>();
        let (lb, pb) = (log.clone(), pad.clone());
        let b = std::thread::spawn(move || {
            use_shard(1);
            while let Ok(i) = b_rx.recv() {
                lb.append(&rec(t, &format!("http://a/{pb}/{i}"), true)).unwrap();
                if to_a.send(i + 1).is_err() {
                    return;
                }
            }
        });
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (lf, df) = (log.clone(), done.clone());
        let flusher = std::thread::spawn(move || {
            while !df.load(std::sync::atomic::Ordering::Relaxed) {
                lf.flush().unwrap();
            }
        });
        // This thread appends the even lines, the other the odd ones.
        use_shard(0);
        let mut i = 0;
        while i < 2000 {
            log.append(&rec(t, &format!("http://a/{pad}/{i}"), true)).unwrap();
            to_b.send(i + 1).unwrap();
            i = a_rx.recv().unwrap();
        }
        drop(to_b);
        b.join().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        flusher.join().unwrap();
        log.flush().unwrap();
        let text = std::fs::read_to_string(dir.path().join("audit-2026-11-30.jsonl")).unwrap();
        let order: Vec<usize> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<AuditRecord>(l)
                    .unwrap()
                    .url
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(order.len(), 2000, "every line written once");
        let wrong = order.iter().enumerate().find(|(i, n)| *i != **n);
        let from = wrong.map_or(0, |w| w.0.saturating_sub(2));
        assert!(
            wrong.is_none(),
            "line {wrong:?} is out of place: {:?}",
            &order[from..(from + 5).min(order.len())]
        );
    }

    #[test]
    fn buffered_lines_reach_the_file_within_the_flush_interval_and_at_drop() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(dir.path()).unwrap();
        let t = at("2026-11-30T12:00:00Z");
        log.append(&rec(t, "http://a/1", true)).unwrap();
        let path = dir.path().join("audit-2026-11-30.jsonl");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(&path).map(|t| t.lines().count()).unwrap_or(0) < 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the background thread writes buffered lines"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        log.append(&rec(t, "http://a/2", true)).unwrap();
        drop(log);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            2,
            "dropping the log writes the rest"
        );
    }

    /// The files in `dir`, sorted.
    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// A week of days (the records' times are the clock: a day's first line
    /// rolls the log over) with `audit.keep = "3d"`: the files of the last
    /// three days are left, the past two compressed, and `skips` still
    /// reads the disallowed requests of the last two days from them.
    #[test]
    fn a_week_with_keep_3d_leaves_three_days_past_ones_compressed_and_skips_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let today = crawlcache_base::time::format_rfc3339(SystemTime::now())[..10].to_string();
        let midnight = crawlcache_base::time::parse_rfc3339(&format!("{today}T00:00:00Z")).unwrap();
        let day = |back: u64| midnight - Duration::from_secs(86_400 * back);
        let log = AuditLog::open_with(dir.path(), AuditMode::All, Duration::from_secs(3 * 86_400))
            .unwrap();
        for back in (0..7).rev() {
            for i in 0..50 {
                let t = day(back) + Duration::from_secs(3600 + i);
                log.append(&rec(t, &format!("http://a/{back}/{i}"), i % 10 != 0)).unwrap();
            }
            log.flush().unwrap();
        }
        let name = |back: u64| {
            format!("audit-{}.jsonl", &crawlcache_base::time::format_rfc3339(day(back))[..10])
        };
        let expected = vec![format!("{}.gz", name(2)), format!("{}.gz", name(1)), name(0)];
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while files(dir.path()) != expected {
            assert!(
                std::time::Instant::now() < deadline,
                "retention within 20 s: {:?}, expected {expected:?}",
                files(dir.path())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut text = String::new();
        flate2::read::GzDecoder::new(File::open(dir.path().join(&expected[0])).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text.lines().count(), 50, "a compressed day holds its lines");
        // `audit skips --since 2d`: from two days back, compressed or not.
        let since = SystemTime::now() - Duration::from_secs(2 * 86_400);
        let got: Vec<String> =
            skips(dir.path(), since).unwrap().records.into_iter().map(|r| r.url).collect();
        let wanted: Vec<String> = (0..3u64)
            .rev()
            .flat_map(|back| {
                (0..50u64).step_by(10).map(move |i| {
                    (day(back) + Duration::from_secs(3600 + i), format!("http://a/{back}/{i}"))
                })
            })
            .filter(|(t, _)| *t >= since)
            .map(|(_, url)| url)
            .collect();
        assert!(wanted.len() >= 10, "today's and yesterday's refusals at least: {wanted:?}");
        assert_eq!(got, wanted, "the disallowed requests since two days ago, oldest first");
        assert!(disk_bytes(dir.path()) > 0);
        drop(log);
    }

    /// `audit.mode`: `disallowed` writes only refused requests, `off`
    /// nothing at all.
    #[test]
    fn mode_disallowed_writes_only_refusals_and_off_writes_nothing() {
        let t = at("2026-11-30T12:00:00Z");
        for (mode, lines) in [(AuditMode::All, 2), (AuditMode::Disallowed, 1), (AuditMode::Off, 0)]
        {
            let dir = tempfile::tempdir().unwrap();
            let log = AuditLog::open_with(dir.path(), mode, Duration::ZERO).unwrap();
            log.append(&rec(t, "http://a/allowed", true)).unwrap();
            log.append(&rec(t, "http://a/refused", false)).unwrap();
            log.flush().unwrap();
            let text = std::fs::read_to_string(dir.path().join("audit-2026-11-30.jsonl"))
                .unwrap_or_default();
            assert_eq!(text.lines().count(), lines, "{mode:?}: {text}");
            if mode == AuditMode::Disallowed {
                assert!(text.contains("http://a/refused"), "{text}");
            }
        }
    }

    /// A plain file beside the compressed one of the same day (lines that
    /// arrived after the day was compressed) is joined to it, not lost.
    #[test]
    fn late_lines_of_a_compressed_day_are_appended_as_another_gzip_member() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("audit-2026-11-29.jsonl"), "one\n").unwrap();
        assert_eq!(
            maintain(dir.path(), "2026-11-30", 0).unwrap(),
            Maintained { compressed: 1, deleted: 0 }
        );
        std::fs::write(dir.path().join("audit-2026-11-29.jsonl"), "two\n").unwrap();
        maintain(dir.path(), "2026-11-30", 0).unwrap();
        assert_eq!(files(dir.path()), vec!["audit-2026-11-29.jsonl.gz".to_string()]);
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(
            File::open(dir.path().join("audit-2026-11-29.jsonl.gz")).unwrap(),
        )
        .read_to_string(&mut text)
        .unwrap();
        assert_eq!(text, "one\ntwo\n");
    }
}
