//! Retention of the audit directory (`audit.keep`): past days
//! gzip-compressed, days beyond the last `keep` deleted, at start and at each
//! day's rollover, on a background thread ([`Keeper`]); and the bytes the
//! directory holds ([`disk_bytes`]).

use crawlcache_base::locks::lock;
use crawlcache_base::time::{format_rfc3339, parse_rfc3339};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs [`maintain`] in the background, one run at a time, for the latest
/// day asked.
/// How [`Keeper`] moves a day's plain file aside: `(day, from, to)`.
pub(super) type Claim = Box<dyn Fn(&str, &Path, &Path) -> io::Result<()> + Send + Sync>;

pub(super) struct Keeper {
    pub(super) dir: PathBuf,
    /// Moves a day's plain file (`day`, from, to) out of the writer's way
    /// before it is compressed: under the writer's lock, closing the file
    /// there first when it is the writer's open one, so no line is written
    /// to a file being compressed.
    pub(super) claim: Claim,
    /// Days of files kept (`audit.keep`), 0 for all.
    pub(super) keep_days: u64,
    /// The day the next run is for, when one was asked.
    pub(super) pending: Mutex<Option<[u8; 10]>>,
    /// Set while a thread runs.
    pub(super) busy: AtomicBool,
}

impl Keeper {
    /// Asks for a [`maintain`] run for `today`: on a thread of its own, or
    /// by the thread already running once it is done with its run (so no
    /// rollover is missed). Errors are logged.
    pub(super) fn start(self: &Arc<Self>, today: [u8; 10]) {
        *lock(&self.pending) = Some(today);
        if self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let spawned =
            std::thread::Builder::new().name("crawlcache-audit-keep".into()).spawn(move || loop {
                let Some(day) = lock(&me.pending).take() else {
                    me.busy.store(false, Ordering::Release);
                    // A day asked between the take and the store: take it on,
                    // unless a new thread already did.
                    if lock(&me.pending).is_none() || me.busy.swap(true, Ordering::AcqRel) {
                        return;
                    }
                    continue;
                };
                match maintain_with(
                    &me.dir,
                    &String::from_utf8_lossy(&day),
                    me.keep_days,
                    &*me.claim,
                ) {
                    Ok(done) if done.compressed + done.deleted > 0 => {
                        tracing::info!(
                            compressed = done.compressed,
                            deleted = done.deleted,
                            "audit log: past days compressed, days beyond audit.keep deleted"
                        )
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("audit log maintenance in {}: {e}", me.dir.display()),
                }
            });
        if spawned.is_err() {
            self.busy.store(false, Ordering::Release);
        }
    }
}

/// What one [`maintain`] run did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Maintained {
    /// Files of past days compressed.
    pub compressed: usize,
    /// Files deleted (older than the days kept).
    pub deleted: usize,
}

/// The UTC day (`YYYY-MM-DD`) of an audit file's name, plain or compressed.
pub(super) fn day_of(name: &str) -> Option<&str> {
    let day = name
        .strip_prefix("audit-")?
        .strip_suffix(".jsonl")
        .or_else(|| name.strip_prefix("audit-")?.strip_suffix(".jsonl.gz"))?;
    crawlcache_base::time::is_date(day).then_some(day)
}

/// Retention of the audit directory `dir` on the UTC day `today`
/// (`YYYY-MM-DD`): deletes the files of days before the last `keep_days`
/// (today included; 0 keeps all), then gzip-compresses each remaining
/// plain file of a day before `today` into `audit-DAY.jsonl.gz` (written
/// to a temporary name, synced, renamed; the plain file removed after).
/// A compressed file beside a plain one of the same day (lines written to
/// a past day after it was compressed, or a crash between the rename and
/// the removal) gets the plain file's lines appended as a second gzip
/// member, which readers of `.gz` read as one stream. Errors: the directory
/// or a file cannot be read or written (what was done before stays done).
pub fn maintain(dir: &Path, today: &str, keep_days: u64) -> io::Result<Maintained> {
    maintain_with(dir, today, keep_days, &|_, from, to| std::fs::rename(from, to))
}

/// [`maintain`] with `claim(day, from, to)` moving a day's plain file out
/// of the writer's way before it is compressed.
fn maintain_with(
    dir: &Path,
    today: &str,
    keep_days: u64,
    claim: &dyn Fn(&str, &Path, &Path) -> io::Result<()>,
) -> io::Result<Maintained> {
    let mut done = Maintained::default();
    let first_kept = match (keep_days, parse_rfc3339(&format!("{today}T00:00:00Z"))) {
        (0, _) | (_, None) => None,
        (n, Some(t)) => {
            Some(format_rfc3339(t - Duration::from_secs(86_400 * (n - 1)))[..10].to_string())
        }
    };
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| day_of(n).is_some())
            .collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e),
    };
    names.sort();
    for name in names {
        let Some(day) = day_of(&name) else { continue };
        let work = dir.join(format!(".audit-{day}.jsonl.compressing"));
        if first_kept.as_deref().is_some_and(|first| day < first) {
            // A run that stopped half way left its work file.
            let _ = std::fs::remove_file(&work);
        } else if work.exists() {
            append_member(dir, day, &work)?;
        }
        if first_kept.as_deref().is_some_and(|first| day < first) {
            std::fs::remove_file(dir.join(&name))?;
            done.deleted += 1;
        } else if day < today && name.ends_with(".jsonl") {
            compress_day(dir, day, claim)?;
            done.compressed += 1;
        }
    }
    Ok(done)
}

/// Compresses the plain file of `day` in `dir` into `audit-DAY.jsonl.gz`:
/// moves it aside with `claim` (to `.audit-DAY.jsonl.compressing`), then
/// [`append_member`]s it.
fn compress_day(
    dir: &Path,
    day: &str,
    claim: &dyn Fn(&str, &Path, &Path) -> io::Result<()>,
) -> io::Result<()> {
    let work = dir.join(format!(".audit-{day}.jsonl.compressing"));
    claim(day, &dir.join(format!("audit-{day}.jsonl")), &work)?;
    append_member(dir, day, &work)
}

/// Writes `audit-DAY.jsonl.gz` anew as its old bytes (if any) followed by
/// `work` as one more gzip member (to a temporary name, synced, renamed),
/// then removes `work`. A crash before the removal appends `work` again on
/// the next run: lines may repeat, never go missing.
fn append_member(dir: &Path, day: &str, work: &Path) -> io::Result<()> {
    let gz = dir.join(format!("audit-{day}.jsonl.gz"));
    let tmp = dir.join(format!(".audit-{day}.jsonl.gz.tmp"));
    {
        let mut out = File::create(&tmp)?;
        if let Ok(mut old) = File::open(&gz) {
            io::copy(&mut old, &mut out)?;
        }
        let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        io::copy(&mut File::open(work)?, &mut enc)?;
        enc.finish()?.sync_all()?;
    }
    std::fs::rename(&tmp, &gz)?;
    std::fs::remove_file(work)
}

/// Bytes of the audit files in `dir` (plain and compressed), 0 when there
/// is no directory.
pub fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_str().is_some_and(|n| day_of(n).is_some()))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
