//! `crawlcache import` through the running proxy, which holds the store
//! (sled locks it to one process): the same [`crate::warc::import`] run by
//! the proxy, whose store then serves the records at once.
//!
//! Two steps, so that one import of several files resolves revisits across
//! them ([`crate::warc::import::Import`]):
//!
//! 1. `POST /cache/import/upload?name=NAME` with a WARC file as the body
//!    (`Content-Length` bytes): the proxy writes it under
//!    `<data-dir>/import/` and answers `{"upload": ID, "bytes": N}`.
//!    Uploads left over for more than a day are deleted by the next one.
//! 2. `POST /cache/import?uploads=ID,ID...`: imports the uploaded files in
//!    that order, streaming JSON lines as it goes: `{"file": NAME,
//!    "offset": N}` (progress, bytes of the file read, at most every 100
//!    ms), `{"problem": LINE}` for each record that failed (or revisit
//!    whose original was found nowhere), and last `{"summary": {...}}`
//!    ([`crate::warc::import::Summary`]: `records`, `imported`,
//!    `already_present`, `older_kept_out`, `failed`, `skipped_by_type`
//!    (`{"request": 12, "warcinfo": 1}`), which add up to `records`, and
//!    `revisits_resolved`, `uris_normalised`). The uploads are deleted when
//!    it ends.
//!
//! The admin endpoints' admission rules apply (loopback clients, or the
//! `server.admin_token`).

use super::respond::{json, message, query_param, stream_blocking, text};
use crate::proxy::ProxyState;
use crate::wire::body::ProxyBody;
use http::{Request, Response, StatusCode};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The folder of the data directory uploads are written to.
pub const UPLOAD_DIR: &str = "import";

/// How long an upload no import used is kept.
const UPLOAD_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The upload folder of the proxy's data directory.
fn upload_dir(state: &ProxyState) -> PathBuf {
    state.config.server.data_dir.join(UPLOAD_DIR)
}

/// Whether `id` is an upload ID this module makes (a UUID): nothing else
/// is ever opened under the upload folder.
fn valid_id(id: &str) -> bool {
    id.len() == 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `POST /cache/import/upload?name=NAME`: writes the request body to a new
/// upload file. 400 when the body fails or is cut short (the partial file
/// is removed), 500 when the file cannot be written.
pub async fn upload<B>(state: &ProxyState, req: Request<B>, query: &str) -> Response<ProxyBody>
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt;
    let name = query_param(query, "name").unwrap_or_else(|| "upload.warc".to_string());
    let dir = upload_dir(state);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            message(&format!("cannot create {}: {e}", dir.display())),
        );
    }
    sweep(&dir);
    let id = uuid::Uuid::new_v4().to_string();
    let path = dir.join(format!("{id}.warc"));
    let announced: Option<u64> = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let mut file = match std::fs::File::create(&path) {
        Ok(f) => std::io::BufWriter::with_capacity(256 * 1024, f),
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                message(&format!("cannot create {}: {e}", path.display())),
            )
        }
    };
    let mut body = req.into_body();
    let mut bytes = 0u64;
    let failed = loop {
        match body.frame().await {
            None => break None,
            Some(Err(e)) => {
                break Some((StatusCode::BAD_REQUEST, format!("the upload of {name} failed: {e}")))
            }
            Some(Ok(f)) => {
                let Ok(data) = f.into_data() else { continue };
                bytes += data.len() as u64;
                // Page-cache writes of at most 256 KiB at a time.
                if let Err(e) = file.write_all(&data) {
                    break Some((
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("cannot write {}: {e}", path.display()),
                    ));
                }
            }
        }
    };
    let failed = failed.or_else(|| {
        announced.filter(|&n| n != bytes).map(|n| {
            (
                StatusCode::BAD_REQUEST,
                format!("the upload of {name} is cut short: {bytes} of {n} bytes"),
            )
        })
    });
    let failed = failed.or_else(|| {
        file.flush().err().map(|e| {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot write {}: {e}", path.display()))
        })
    });
    if let Some((status, why)) = failed {
        drop(file);
        let _ = std::fs::remove_file(&path);
        return text(status, message(&why));
    }
    if let Err(e) = std::fs::write(dir.join(format!("{id}.name")), name.as_bytes()) {
        let _ = std::fs::remove_file(&path);
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            message(&format!("cannot write in {}: {e}", dir.display())),
        );
    }
    json(StatusCode::OK, &serde_json::json!({ "upload": id, "bytes": bytes }))
}

/// Deletes uploads older than [`UPLOAD_KEPT`] (an import that never came).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > UPLOAD_KEPT);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// One line of the streamed answer of `POST /cache/import`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ImportLine {
    /// Progress: bytes of the named file read.
    #[serde(rename = "progress")]
    Progress {
        /// The file's name, as uploaded.
        file: String,
        /// Bytes of it read so far.
        offset: u64,
    },
    /// A record skipped, with its file, offset and why.
    Problem(String),
    /// What the import did; the last line.
    Summary(crate::warc::import::Summary),
}

/// `POST /cache/import?uploads=ID,...`: imports the uploads in order (see
/// the module docs). 400 for an unknown or malformed upload ID.
pub fn run(state: &ProxyState, query: &str) -> Response<ProxyBody> {
    let dir = upload_dir(state);
    let ids: Vec<String> = query_param(query, "uploads")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if ids.is_empty() {
        return text(StatusCode::BAD_REQUEST, "crawlcache: /cache/import needs ?uploads=ID[,ID...] (from POST /cache/import/upload)\n".into());
    }
    let mut files = Vec::new();
    for id in &ids {
        let path = dir.join(format!("{id}.warc"));
        if !valid_id(id) || !path.is_file() {
            return text(StatusCode::BAD_REQUEST, format!("crawlcache: no upload {id:?} (upload the file first with POST /cache/import/upload)\n"));
        }
        let name =
            std::fs::read_to_string(dir.join(format!("{id}.name"))).unwrap_or_else(|_| id.clone());
        files.push((path, name));
    }
    let store = state.store.clone();
    let opts = crate::warc::import::Options {
        key_rules: state.config.cache.key_rules.clone(),
        policy: state.policy.clone(),
    };
    stream_blocking("application/x-ndjson", move |out| {
        let result = run_blocking(&store, opts, &files, out);
        for (path, _) in &files {
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_file(path.with_extension("name"));
        }
        result
    })
}

/// The import itself, writing [`ImportLine`]s to `out` as it goes. A
/// write error (the client went away) is returned at the end of the file
/// being read; what was imported stays.
fn run_blocking(
    store: &crawlcache_store::Store,
    opts: crate::warc::import::Options,
    files: &[(PathBuf, String)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let sink = std::cell::RefCell::new(Sink { out, failed: None });
    let mut import = crate::warc::import::Import::new(store, opts);
    for (path, name) in files {
        let mut last = Instant::now();
        let result = import.file(
            path,
            name,
            &mut |p| sink.borrow_mut().emit(&ImportLine::Problem(p)),
            &mut |offset| {
                if last.elapsed() >= Duration::from_millis(100) {
                    last = Instant::now();
                    sink.borrow_mut().emit(&ImportLine::Progress { file: name.clone(), offset });
                }
            },
        );
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut s = sink.borrow_mut();
        s.emit(&ImportLine::Progress { file: name.clone(), offset: size });
        if let Err(e) = result {
            s.emit(&ImportLine::Problem(format!("cannot read {name}: {e}")));
        }
        if let Some(e) = s.failed.take() {
            return Err(e);
        }
    }
    let summary = import.finish(&mut |p| sink.borrow_mut().emit(&ImportLine::Problem(p)));
    let mut s = sink.borrow_mut();
    if let Err(e) = store.flush() {
        s.emit(&ImportLine::Problem(format!("cannot write the cache index: {e}")));
    }
    s.emit(&ImportLine::Summary(summary));
    s.failed.take().map_or(Ok(()), Err)
}

/// Where the answer's lines go; the first write error is kept.
struct Sink<'a> {
    out: &'a mut dyn Write,
    failed: Option<std::io::Error>,
}

impl Sink<'_> {
    fn emit(&mut self, line: &ImportLine) {
        if self.failed.is_none() {
            let text = serde_json::to_string(line).unwrap_or_default();
            if let Err(e) = writeln!(self.out, "{text}") {
                self.failed = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_ids_are_uuids_only() {
        assert!(valid_id(&uuid::Uuid::new_v4().to_string()));
        assert!(!valid_id("../../etc/passwd"));
        assert!(!valid_id("0123456789abcdef0123456789abcdef/../x"));
    }

    #[test]
    fn lines_round_trip_as_json() {
        for line in [
            ImportLine::Progress { file: "a.warc.gz".into(), offset: 7 },
            ImportLine::Problem("a.warc.gz: record at offset 0: bad; skipped".into()),
            ImportLine::Summary(crate::warc::import::Summary {
                records: 5,
                imported: 2,
                failed: 1,
                skipped_by_type: [("warcinfo".to_string(), 1), ("request".to_string(), 1)].into(),
                ..Default::default()
            }),
        ] {
            let text = serde_json::to_string(&line).unwrap();
            assert_eq!(serde_json::from_str::<ImportLine>(&text).unwrap(), line, "{text}");
        }
    }
}
