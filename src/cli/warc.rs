//! `crawlcache export --warc FILE` and `crawlcache import FILE...`: the
//! store's exchanges to a WARC/1.1 file and WARC files into the record
//! store (formats in [`crate::warc`]).
//!
//! `export` reads the store directly when the proxy is stopped and streams
//! the file from the running proxy's `GET /cache/export` otherwise.
//! `import` writes to the store directly when the proxy is stopped, and
//! through the running proxy's admin endpoints otherwise (the files are
//! uploaded, then imported by the proxy: [`crate::admin::import`]).

use super::access::{admin_stream, encode, open_store, StoreAccess, STREAM_IDLE_TIMEOUT};
use super::common::{load_config, Common};
use super::progress::{Progress, Unit};
use crate::cli::error::CommandError;
use crate::warc::{export, import};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `crawlcache export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Where the configuration and the data directory are, and how to reach a running proxy.
    #[command(flatten)]
    pub common: Common,
    /// The WARC file to write (gzip-compressed, one member per record).
    #[arg(long, value_name = "FILE.warc.gz")]
    pub warc: PathBuf,
    /// Only exchanges of this host (and port), or of the host of this URL.
    #[arg(long, value_name = "HOST[:PORT]|URL", value_parser = super::cache::host_arg, help = super::cache::HOST_HELP)]
    pub host: Option<String>,
    /// Only exchanges whose URL starts with this prefix.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Write a body already written in this file once: later exchanges
    /// with the same body become `revisit` records referring to the first
    /// (WARC/1.1 identical-payload-digest), which `import` resolves.
    #[arg(long)]
    pub revisits: bool,
}

/// `crawlcache import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Where the configuration and the data directory are, and how to reach a running proxy.
    #[command(flatten)]
    pub common: Common,
    /// WARC files (`.warc`, `.warc.gz`), as wget `--warc-file`, warcio or
    /// `crawlcache export` write them.
    #[arg(required = true, value_name = "FILE.warc[.gz]")]
    pub files: Vec<PathBuf>,
}

/// Writes the WARC file; exit 1 when an exchange had to be left out.
pub fn export(args: ExportArgs) -> Result<ExitCode, CommandError> {
    let cfg = load_config(&args.common)?;
    let filter = export::Filter { host: args.host.clone(), prefix: args.prefix.clone() };
    let filename =
        args.warc.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = match args.warc.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Written beside the target and renamed into place when complete.
    let mut builder = tempfile::Builder::new();
    builder.prefix(".crawlcache-export-").suffix(".tmp");
    // The permissions a newly created file gets (0666 less the umask), not
    // the temporary file's 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder
        .tempfile_in(&dir)
        .map_err(|e| format!("cannot create a file in {}: {e}", dir.display()))?;
    let (exchanges, records, bytes, skipped) = match open_store(&cfg)? {
        StoreAccess::Direct(store) => export_direct(&store, &args, &filter, &filename, &tmp)?,
        StoreAccess::Daemon(admin) => export_from_daemon(&admin, &args, &filename, &tmp)?,
    };
    tmp.as_file().sync_all().map_err(|e| format!("cannot write {}: {e}", args.warc.display()))?;
    tmp.persist(&args.warc)
        .map_err(|e| format!("cannot write {}: {}", args.warc.display(), e.error))?;
    eprintln!("export: {exchanges} exchanges ({records} records) written to {}, {bytes} bytes; {skipped} skipped", args.warc.display());
    if exchanges == 0 && skipped == 0 && filter.is_set() {
        eprintln!("export: nothing stored matches {}", filter.describe());
    }
    Ok(if skipped > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Writes the WARC of `filter` from the store opened directly into `tmp`:
/// (exchanges, records, bytes, exchanges left out).
fn export_direct(
    store: &crawlcache_store::Store,
    args: &ExportArgs,
    filter: &export::Filter,
    filename: &str,
    tmp: &tempfile::NamedTempFile,
) -> Result<(u64, u64, u64, u64), String> {
    let (plan, undecodable) = export::plan(store, filter).map_err(|e| e.to_string())?;
    let progress = Progress::new("export", Some(plan.len() as u64), Unit::Items("exchanges"));
    for u in &undecodable {
        progress.println(&format!("export: leaving out {u}"));
    }
    let opts = export::WriteOptions {
        filename: filename.to_string(),
        description: export::description(filter),
        revisits: args.revisits,
    };
    let out = std::io::BufWriter::new(tmp.as_file());
    let result = export::write(store, &plan, out, &opts, &mut |n| progress.set(n));
    let (out, summary) = match result {
        Ok(r) => r,
        Err(e) => {
            progress
                .finish(&format!("export: failed after writing part of {}", args.warc.display()));
            return Err(format!("cannot write {}: {e}", args.warc.display()));
        }
    };
    drop(out);
    for s in &summary.skipped {
        progress.println(&format!("export: left out {s}"));
    }
    progress.clear();
    Ok((
        summary.exchanges,
        summary.records,
        summary.bytes,
        summary.skipped.len() as u64 + undecodable.len() as u64,
    ))
}

/// Streams the WARC from the running proxy's admin endpoint into `tmp`:
/// (exchanges, records, bytes, exchanges the proxy left out).
fn export_from_daemon(
    admin: &super::access::Admin,
    args: &ExportArgs,
    filename: &str,
    tmp: &tempfile::NamedTempFile,
) -> Result<(u64, u64, u64, u64), String> {
    let mut path = format!("/cache/export?filename={}", encode(filename));
    if let Some(h) = &args.host {
        path.push_str(&format!("&host={}", encode(h)));
    }
    if let Some(p) = &args.prefix {
        path.push_str(&format!("&prefix={}", encode(p)));
    }
    if args.revisits {
        path.push_str("&revisits=1");
    }
    let progress = Progress::new("export", None, Unit::Bytes);
    progress.message(format!("from the running proxy at {}", admin.addr));
    let mut out = std::io::BufWriter::new(tmp.as_file());
    let mut bytes = 0u64;
    let head = admin_stream(admin, "GET", &path, STREAM_IDLE_TIMEOUT, &mut |chunk: &[u8]| {
        out.write_all(chunk)?;
        bytes += chunk.len() as u64;
        progress.set(bytes);
        Ok(())
    });
    let head = match head {
        Ok(head) => head,
        Err(e) => {
            progress.finish("export: failed");
            return Err(match e.status {
                Some(status) => {
                    format!("the running proxy refused the export ({status}): {}", e.message)
                }
                None => format!("the running proxy's export failed ({}); see its log", e.message),
            });
        }
    };
    let planned: u64 = head
        .headers
        .get(crate::admin::respond::EXCHANGES_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    out.flush().map_err(|e| format!("cannot write {}: {e}", args.warc.display()))?;
    drop(out);
    progress.clear();
    // Count what arrived: each exchange is one response (or revisit) record.
    let (responses, records) = count_records(tmp.path())
        .map_err(|e| format!("cannot read back {}: {e}", tmp.path().display()))?;
    let skipped = planned.saturating_sub(responses);
    if skipped > 0 {
        eprintln!("export: the proxy left out {skipped} exchange(s) (see its log)");
    }
    Ok((responses, records, bytes, skipped))
}

/// (response and revisit records, all records) in the WARC file at `path`.
fn count_records(path: &Path) -> std::io::Result<(u64, u64)> {
    let mut r = crate::warc::reader::WarcReader::open(path)?;
    let (mut responses, mut records) = (0, 0);
    while let Some(next) = r.next_record() {
        match next {
            Ok(head) => {
                records += 1;
                responses +=
                    u64::from(matches!(head.record_type().as_str(), "response" | "revisit"));
            }
            Err(e) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
            }
        }
    }
    Ok((responses, records))
}

/// Imports the files, as one import (revisits resolved across them, the
/// newest capture of a URL kept whatever the order): into the store
/// directly when the proxy is stopped, through the running proxy's admin
/// endpoints when it holds the store ([`crate::admin::import`]), which
/// then serves the records at once. Exit 1 when a record was skipped or a
/// file could not be read.
pub fn import(args: ImportArgs) -> Result<ExitCode, CommandError> {
    let cfg = load_config(&args.common)?;
    let dir = &cfg.server.data_dir;
    // A new data directory is made; an existing one is opened as the
    // `cache` commands open it (or reached through the proxy holding it).
    let access = if dir.exists() {
        open_store(&cfg)?
    } else {
        match crawlcache_store::Store::open_with(dir, &cfg.store_options()) {
            Ok(s) => StoreAccess::Direct(s),
            Err(e) => return Err(format!("cannot open the cache in {}: {e}", dir.display()).into()),
        }
    };
    let sizes: Vec<u64> =
        args.files.iter().map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0)).collect();
    let (total, unreadable, reported) = match access {
        StoreAccess::Direct(store) => import_direct(&cfg, &store, &args.files, &sizes)?,
        StoreAccess::Daemon(admin) => import_through(&admin, &args.files, &sizes)?,
    };
    let files =
        if unreadable > 0 { format!(" ({unreadable} file(s) unreadable)") } else { String::new() };
    eprintln!("import: {total}{files}");
    // Records of types that replay nothing are counted, not reported; a
    // record that failed or a revisit whose original was found nowhere is
    // reported, and makes the exit status 1.
    Ok(if total.failed > 0 || reported > 0 || unreadable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// [`import`] into the store opened here: (what it did, files unreadable,
/// problems reported).
fn import_direct(
    cfg: &crate::config::Config,
    store: &crawlcache_store::Store,
    files: &[PathBuf],
    sizes: &[u64],
) -> Result<(import::Summary, u64, u64), CommandError> {
    let opts = import::Options { key_rules: cfg.cache.key_rules.clone(), policy: cfg.policy() };
    let progress = Progress::new("import", Some(sizes.iter().sum()), Unit::Bytes);
    let mut run = import::Import::new(store, opts);
    let mut unreadable = 0u64;
    let mut done_before = 0u64;
    let reported = std::cell::Cell::new(0u64);
    let report = |line: String| {
        reported.set(reported.get() + 1);
        progress.println(&format!("import: {line}"));
    };
    for (file, size) in files.iter().zip(sizes) {
        progress.message(file.display().to_string());
        let name = file.display().to_string();
        let result = run.file(file, &name, &mut |line| report(line), &mut |pos| {
            progress.set(done_before + pos)
        });
        if let Err(e) = result {
            unreadable += 1;
            progress.println(&format!("import: cannot read {}: {e}", file.display()));
        }
        done_before += size;
    }
    let total = run.finish(&mut |line| report(line));
    store.flush().map_err(|e| {
        format!("cannot write the cache index in {}: {e}", cfg.server.data_dir.display())
    })?;
    progress.clear();
    Ok((total, unreadable, reported.get()))
}

/// [`import`] through the running proxy: each file uploaded, then one
/// import of them all, its progress and problems streamed back. Returns as
/// [`import_direct`].
fn import_through(
    admin: &super::access::Admin,
    files: &[PathBuf],
    sizes: &[u64],
) -> Result<(import::Summary, u64, u64), CommandError> {
    let progress = Progress::new("import", Some(sizes.iter().sum::<u64>() * 2), Unit::Bytes);
    progress.message(format!("uploading to the running proxy at {}", admin.addr));
    let mut uploads = Vec::new();
    let mut names: Vec<(String, u64)> = Vec::new();
    let mut unreadable = 0u64;
    let mut done_before = 0u64;
    for (file, size) in files.iter().zip(sizes) {
        let name = file.display().to_string();
        let path = format!("/cache/import/upload?name={}", encode(&name));
        match super::access::admin_upload(admin, &path, file, &mut |sent| {
            progress.set(done_before + sent)
        }) {
            Ok((200, body)) => {
                let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                    format!("the running proxy's answer to the upload of {name}: {e}")
                })?;
                let id = v["upload"].as_str().ok_or_else(|| {
                    format!("the running proxy's answer to the upload of {name} names no upload")
                })?;
                uploads.push(id.to_string());
                names.push((name, done_before));
            }
            Ok((status, body)) => {
                let text = body.trim().trim_start_matches("crawlcache: ").to_string();
                return Err(
                    format!("the running proxy refused the import ({status}): {text}").into()
                );
            }
            Err(super::access::UploadError::Unreadable(e)) => {
                unreadable += 1;
                progress.println(&format!("import: {e}"));
            }
            Err(e) => return Err(e.into()),
        }
        done_before += size;
    }
    let total_size: u64 = sizes.iter().sum();
    if uploads.is_empty() {
        progress.clear();
        return Ok((import::Summary::default(), unreadable, 0));
    }
    progress.message(format!("imported by the running proxy at {}", admin.addr));
    let path = format!("/cache/import?uploads={}", uploads.join(","));
    let mut pending = Vec::new();
    let mut summary: Option<import::Summary> = None;
    let mut reported = 0u64;
    let result = admin_stream(admin, "POST", &path, STREAM_IDLE_TIMEOUT, &mut |chunk: &[u8]| {
        pending.extend_from_slice(chunk);
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=i).collect();
            match serde_json::from_slice::<crate::admin::import::ImportLine>(&line) {
                Ok(crate::admin::import::ImportLine::Progress { file, offset }) => {
                    let before = names.iter().find(|(n, _)| *n == file).map_or(0, |(_, b)| *b);
                    progress.set(total_size + before + offset);
                }
                Ok(crate::admin::import::ImportLine::Problem(p)) => {
                    reported += 1;
                    progress.println(&format!("import: {p}"));
                }
                Ok(crate::admin::import::ImportLine::Summary(s)) => summary = Some(s),
                Err(_) => {
                    progress.println(&format!("import: {}", String::from_utf8_lossy(&line).trim()))
                }
            }
        }
        Ok(())
    });
    progress.clear();
    match result {
        Ok(_) => summary.map(|s| (s, unreadable, reported)).ok_or_else(|| {
            "the running proxy's import ended without a summary (see its log)".into()
        }),
        Err(e) => Err(match e.status {
            Some(status) => {
                format!("the running proxy refused the import ({status}): {}", e.message)
            }
            None => format!("the running proxy's import failed ({}); see its log", e.message),
        }
        .into()),
    }
}
