//! WARC export and import (issue 12 item 7):
//! - the recorded crawl exported with `crawlcache export --warc`, read back
//!   by Python `warcio` (index, check with digests, payload digests
//!   recomputed), one response per recorded exchange; imported into an
//!   empty store it replays the crawl offline byte for byte; exported again
//!   through the running proxy's admin endpoint;
//! - wget's own `--warc-file` of the site, imported, replays the crawl
//!   offline byte for byte with no 504 (chunked bodies de-chunked);
//! - a WARC with a malformed record, a corrupt gzip member and a truncated
//!   end: the good records import, each bad one is reported at its offset,
//!   the store verifies clean;
//! - (issue 33) a wget `--warc-dedup` crawl: its revisits resolved across
//!   the files of one import and against what an earlier import stored,
//!   every URL replayed byte-identical; `export --revisits` and back; two
//!   captures of one URL from two dates, imported in either order, serve
//!   the newer; `import` into a running proxy is served at once.

use super::common::*;
use super::{gateway_timeouts, site, wget, ALL};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Reads each record of a WARC with warcio (independently of crawlcache):
/// one JSON object per record with its type, target URI, HTTP status,
/// payload length and whether the payload's SHA-256 equals its
/// `WARC-Payload-Digest` (base32, hex or base64, as warcio accepts).
const WARCIO_PAYLOADS: &str = r#"
import sys, json, hashlib, base64
from warcio.archiveiterator import ArchiveIterator
with open(sys.argv[1], 'rb') as f:
    for rec in ArchiveIterator(f):
        out = {'type': rec.rec_type, 'uri': rec.rec_headers.get_header('WARC-Target-URI')}
        if rec.rec_type == 'response':
            payload = rec.raw_stream.read()
            digest = rec.rec_headers.get_header('WARC-Payload-Digest') or ''
            algo, _, value = digest.partition(':')
            mine = hashlib.new(algo, payload).digest()
            out.update(status=rec.http_headers.get_statuscode(), len=len(payload), algo=algo,
                       digest_ok=value in (base64.b32encode(mine).decode(), mine.hex()))
        print(json.dumps(out))
"#;

pub(crate) fn python() -> PathBuf {
    find_tool(
        "python3",
        "PYTHON",
        &["/usr/bin/python3"],
        "Install Python 3 and `pip install warcio` (tests/run.sh does).",
    )
}

/// Runs `python3 args...`, bounded.
pub(crate) fn run_python(args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(python());
    cmd.args(args);
    run_bounded(&mut cmd, Duration::from_secs(120), &format!("python3 {}", args.join(" ")))
}

/// `warcio check -v FILE` must exit 0 and pass the digests of every record.
fn assert_warcio_checks(file: &Path, records: usize) {
    let f = file.to_str().unwrap();
    let out = run_python(&["-m", "warcio.cli", "check", "-v", f]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "warcio check {f}: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("fail"), "{text}");
    assert_eq!(
        text.matches("digest pass").count(),
        records,
        "every record's digests are checked and pass:\n{text}"
    );
}

/// Each record's digest fields as warcio reads them (type, URI, block, payload).
const WARCIO_DIGESTS: &str = r#"
import sys, json
from warcio.archiveiterator import ArchiveIterator
with open(sys.argv[1], 'rb') as f:
    for rec in ArchiveIterator(f):
        h = rec.rec_headers
        print(json.dumps({'type': rec.rec_type, 'uri': h.get_header('WARC-Target-URI'),
                          'block': h.get_header('WARC-Block-Digest'), 'payload': h.get_header('WARC-Payload-Digest')}))
"#;

/// Every digest field of `file` is `sha1:` and 32 base32 characters, no
/// padding (what wget and Heritrix write), and pywb's CDX indexer
/// (`cdx-indexer -j`) reads the file and puts each response's payload
/// digest, without `sha1:`, in its `digest` field.
fn assert_digests_unpadded_and_indexed(file: &Path) {
    let out = run_python(&["-c", WARCIO_DIGESTS, file.to_str().unwrap()]);
    assert!(out.status.success(), "warcio: {}", String::from_utf8_lossy(&out.stderr));
    let mut payloads = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        for field in ["block", "payload"] {
            let Some(d) = r[field].as_str() else { continue };
            let value =
                d.strip_prefix("sha1:").unwrap_or_else(|| panic!("{field} digest not sha1: {r}"));
            assert!(
                value.len() == 32
                    && value.bytes().all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)),
                "{field} digest is base32 without padding: {r}"
            );
        }
        if r["type"] == "response" || r["type"] == "revisit" {
            payloads.push((
                r["uri"].as_str().unwrap().to_string(),
                r["payload"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    let out = run_python(&[
        "-c",
        "import sys; from pywb.indexer.cdxindexer import main; sys.exit(main())",
        "-j",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "pywb cdx-indexer: {}", String::from_utf8_lossy(&out.stderr));
    let mut indexed = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let json = line.splitn(3, ' ').nth(2).unwrap_or_else(|| panic!("a CDXJ line: {line}"));
        let v: serde_json::Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {line}"));
        indexed.push((
            v["url"].as_str().unwrap_or("").to_string(),
            format!("sha1:{}", v["digest"].as_str().unwrap_or("")),
        ));
    }
    payloads.sort();
    indexed.sort();
    assert_eq!(indexed, payloads, "pywb's indexer lists every response and revisit with its payload digest (the CDX digest is it without `sha1:`)");
}

/// The records of `file` as warcio reads them.
pub(crate) fn warcio_records(file: &Path) -> Vec<serde_json::Value> {
    let out = run_python(&["-c", WARCIO_PAYLOADS, file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "warcio read {}: {}\n{}",
        file.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `warcio index` must read the file: (WARC-Type, WARC-Target-URI) per record.
pub(crate) fn warcio_index(file: &Path) -> Vec<(String, String)> {
    let out = run_python(&[
        "-m",
        "warcio.cli",
        "index",
        "-f",
        "warc-type,warc-target-uri",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "warcio index: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (
                v["warc-type"].as_str().unwrap_or("").to_string(),
                v["warc-target-uri"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The recorded entries of a stopped store: (record key, URL).
fn recorded(data: &Path) -> Vec<(String, String)> {
    let out = crawlcache_cmd(
        &["cache", "ls", "--json", "--data-dir", data.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["record"].as_bool() == Some(true))
        .map(|v| {
            // One line per URL: `key` is the cache entry's when the URL is in
            // both; the record key follows from the method and body hash.
            let url = v["url"].as_str().unwrap().to_string();
            let method = v["method"].as_str().unwrap_or("GET");
            let body = v["request_body_sha256"]
                .as_str()
                .map(|h| format!(" sha256={h}"))
                .unwrap_or_default();
            (format!("record:{method} {url}{body}"), url)
        })
        .collect()
}

pub(crate) fn config_file(dir: &TestDir, toml: &str) -> String {
    let path = dir.join("crawlcache.toml");
    std::fs::write(&path, toml).unwrap();
    path.to_str().unwrap().to_string()
}

/// `crawlcache import` with the configuration `cfg` into `data`.
pub(crate) fn import(cfg: &str, data: &Path, files: &[&Path]) -> std::process::Output {
    let mut args = vec!["import", "--config", cfg, "--data-dir", data.to_str().unwrap()];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    crawlcache_cmd(&args, Duration::from_secs(120))
}

/// The numbers of the import summary line `N records read: M imported,
/// A already present, O older captures kept out, F failed, S skipped (TYPE
/// n, ...); ...`: (N, M, F).
pub(crate) fn import_summary(stderr: &str) -> (u64, u64, u64) {
    (
        summary_count(stderr, "records read"),
        summary_count(stderr, "imported"),
        summary_count(stderr, "failed"),
    )
}

/// The per-type counts of the summary line's `S skipped (request 12, warcinfo 1)`,
/// checked to add up with the other categories to the records read.
pub(crate) fn skipped_by_type(stderr: &str) -> BTreeMap<String, u64> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("records read"))
        .unwrap_or_else(|| panic!("no summary line:\n{stderr}"));
    let mut by_type = BTreeMap::new();
    if let Some(list) = line
        .split_once(" skipped (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
    {
        for item in list.split(", ") {
            let (kind, n) = item.rsplit_once(' ').unwrap_or_else(|| panic!("{item:?} in {line}"));
            by_type.insert(
                kind.to_string(),
                n.parse().unwrap_or_else(|_| panic!("{item:?} in {line}")),
            );
        }
    }
    let skipped: u64 = by_type.values().sum();
    assert_eq!(summary_count(stderr, "skipped"), skipped, "{line}");
    let accounted = ["imported", "already present", "older captures kept out", "failed"]
        .iter()
        .map(|w| summary_count(stderr, w))
        .sum::<u64>()
        + skipped;
    assert_eq!(
        accounted,
        summary_count(stderr, "records read"),
        "every record read is accounted for: {line}"
    );
    by_type
}

/// The count before `what` in the import summary line (`3 revisits resolved`).
pub(crate) fn summary_count(stderr: &str, what: &str) -> u64 {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("records read"))
        .unwrap_or_else(|| panic!("no summary line:\n{stderr}"));
    let before = line
        .split(what)
        .next()
        .filter(|b| b.len() < line.len())
        .unwrap_or_else(|| panic!("no {what:?} in {line}"));
    before
        .trim_end()
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before {what:?} in {line}"))
}

/// Online crawl through a recording proxy (record.mode = "all"), plus the
/// form's POST; returns the files wget saved and the POST's answer.
fn record_crawl(
    dir: &TestDir,
    data: &Path,
) -> (BTreeMap<PathBuf, Vec<u8>>, Vec<u8>, String, Origin) {
    let origin = Origin::start(site);
    let proxy = Proxy::start_with_config(data, ALL, &[]);
    let start = origin.url("/");
    let (online, log) = wget(&start, &proxy.url(), &dir.join("online"));
    assert!(online.len() >= 9, "{log}");
    let post = send_request(
        proxy.addr(),
        "POST",
        &origin.url("/form"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=crawl",
    );
    assert_eq!(post.status, 200);
    std::thread::sleep(Duration::from_millis(300));
    proxy.stop_cleanly();
    (online, post.body, start, origin)
}

#[test]
fn an_exported_crawl_reads_back_with_warcio_and_replays_after_import() {
    let dir = TestDir::new("warc-export");
    let data = dir.subdir("data");
    let (online, post_online, start, origin) = record_crawl(&dir, &data);
    let form = origin.url("/form");
    drop(origin);
    let cfg = config_file(&dir, ALL);
    let warc = dir.join("crawl.warc.gz");
    let out = crawlcache_cmd(
        &[
            "export",
            "--warc",
            warc.to_str().unwrap(),
            "--config",
            &cfg,
            "--data-dir",
            data.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" exchanges (") && stderr.contains("; 0 skipped"), "{stderr}");

    // One response per recorded exchange; the target URIs are the recorded URLs.
    let records = recorded(&data);
    let recorded_urls: BTreeSet<String> = records.iter().map(|(_, u)| u.clone()).collect();
    let index = warcio_index(&warc);
    assert_eq!(index.first().map(|r| r.0.as_str()), Some("warcinfo"));
    // No local path goes into a file that may be shared.
    let mut whole = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&warc).unwrap())
        .read_to_end(&mut whole)
        .unwrap();
    let whole = String::from_utf8_lossy(&whole);
    assert!(
        !whole.contains(data.to_str().unwrap()) && !whole.contains(dir.path().to_str().unwrap()),
        "the export names a local path"
    );
    let responses: Vec<&str> =
        index.iter().filter(|r| r.0 == "response").map(|r| r.1.as_str()).collect();
    let requests = index.iter().filter(|r| r.0 == "request").count();
    assert_eq!(responses.len(), records.len(), "one response per record:\n{index:?}\n{records:?}");
    assert_eq!(requests, records.len());
    assert_eq!(responses.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(), recorded_urls);
    assert!(
        recorded_urls.iter().any(|u| u.ends_with("/chunked"))
            && recorded_urls.iter().any(|u| u.ends_with("/form"))
    );

    // warcio verifies every block and payload digest; the payload digests
    // recomputed here agree, and the bodies are the stored ones.
    assert_warcio_checks(&warc, index.len());
    let read = warcio_records(&warc);
    let resp: Vec<&serde_json::Value> = read.iter().filter(|r| r["type"] == "response").collect();
    assert_eq!(resp.len(), records.len());
    for r in &resp {
        assert_eq!(r["algo"], "sha1", "{r}");
        assert_eq!(r["digest_ok"], true, "{r}");
    }
    assert_digests_unpadded_and_indexed(&warc);
    let chunked = resp.iter().find(|r| r["uri"].as_str().unwrap().ends_with("/chunked")).unwrap();
    assert_eq!(
        chunked["len"].as_u64(),
        Some(b"<html>chunked page</html>".len() as u64),
        "stored de-chunked: {chunked}"
    );
    let r302 = resp.iter().find(|r| r["uri"].as_str().unwrap().ends_with("/r302")).unwrap();
    assert_eq!(r302["status"], "302");

    // Imported into an empty store, the export replays the crawl offline.
    let data2 = dir.subdir("imported");
    let out = import(&cfg, &data2, &[&warc]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (read_n, imported, failed) = import_summary(&stderr);
    assert_eq!(
        (read_n, imported, failed),
        (index.len() as u64, records.len() as u64, 0),
        "{stderr}"
    );
    let requests = records.len() as u64;
    assert_eq!(
        skipped_by_type(&stderr),
        BTreeMap::from([("request".to_string(), requests), ("warcinfo".to_string(), 1)]),
        "{stderr}"
    );
    assert_eq!(
        recorded(&data2).into_iter().map(|(k, _)| k).collect::<BTreeSet<_>>(),
        records.iter().map(|(k, _)| k.clone()).collect::<BTreeSet<_>>(),
        "the same record keys, the POST's body hash included"
    );
    assert_cache_verifies(&data2);
    let offline = Proxy::start_with_config(&data2, ALL, &["--offline"]);
    let (replayed, log) = wget(&start, &offline.url(), &dir.join("replayed"));
    let mut expected = online.clone();
    expected.retain(|p, _| !p.ends_with("nostore"));
    assert_trees_equal(
        &expected,
        &replayed,
        "offline replay of the imported export vs the online crawl",
    );
    assert_eq!(gateway_timeouts(&log), 1, "only /nostore (never recorded) is 504:\n{log}");
    let post = send_request(
        offline.addr(),
        "POST",
        &form,
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"q=crawl",
    );
    assert_eq!(post.status, 200, "{}", post.describe());
    assert_eq!(post.body, post_online);

    // Export through the running proxy (it holds the index): the same exchanges.
    let warc2 = dir.join("from-proxy.warc.gz");
    let out = crawlcache_cmd(
        &[
            "export",
            "--warc",
            warc2.to_str().unwrap(),
            "--config",
            &cfg,
            "--data-dir",
            data2.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{} exchanges", records.len())) && stderr.contains("; 0 skipped"),
        "{stderr}"
    );
    let index2 = warcio_index(&warc2);
    assert_eq!(
        index2.iter().filter(|r| r.0 == "response").map(|r| r.1.clone()).collect::<BTreeSet<_>>(),
        recorded_urls,
        "{index2:?}"
    );
    assert_warcio_checks(&warc2, index2.len());
    offline.stop_cleanly();
}

/// `wget -r --warc-file=BASE` straight at the origin (no proxy); returns
/// the files saved and the path of `BASE.warc.gz`.
pub(crate) fn wget_warc(
    start: &str,
    out: &Path,
    base: &Path,
) -> (BTreeMap<PathBuf, Vec<u8>>, PathBuf) {
    wget_warc_with(start, out, base, &[])
}

/// [`wget_warc`] with more wget arguments (`--warc-cdx`, `--warc-dedup=CDX`).
pub(crate) fn wget_warc_with(
    start: &str,
    out: &Path,
    base: &Path,
    extra: &[String],
) -> (BTreeMap<PathBuf, Vec<u8>>, PathBuf) {
    std::fs::create_dir_all(out).unwrap();
    let mut cmd = Command::new(wget_bin());
    cmd.args([
        "--no-config",
        "-r",
        "-nH",
        "-e",
        "robots=off",
        "--no-verbose",
        "--tries=1",
        "--timeout=10",
        "--no-proxy",
    ])
    .arg(format!("--warc-file={}", base.display()))
    .args(extra)
    .arg("-P")
    .arg(out)
    .arg(start);
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"] {
        cmd.env_remove(var);
    }
    let o = run_bounded(&mut cmd, Duration::from_secs(120), "wget -r --warc-file");
    assert!(
        matches!(o.status.code(), Some(0) | Some(8)),
        "wget exited {:?}:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let warc = PathBuf::from(format!("{}.warc.gz", base.display()));
    assert!(warc.is_file(), "wget wrote no {}", warc.display());
    (read_tree(out), warc)
}

#[test]
fn a_wget_warc_imported_replays_the_crawl_offline_byte_identical() {
    let dir = TestDir::new("warc-wget-import");
    let origin = Origin::start(site);
    let start = origin.url("/");
    let (online, warc) = wget_warc(&start, &dir.join("online"), &dir.join("site"));
    assert!(
        online.len() >= 10 && online.keys().any(|p| p.ends_with("chunked")),
        "{:?}",
        online.keys()
    );
    drop(origin);

    let cfg = config_file(&dir, ALL);
    let data = dir.subdir("data");
    let out = import(&cfg, &data, &[&warc]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (_, imported, failed) = import_summary(&stderr);
    assert_eq!(failed, 0, "{stderr}");
    // Every response wget got (redirect hops and the 404 included); every
    // other record (warcinfo, requests, wget's log and arguments as
    // `metadata://` resources, its manifest as metadata) counted under its type.
    // The two tracking-parameter spellings of /news are one record under
    // the key rule: the second capture, the same head and body at the same
    // date, is already present.
    let index = warcio_index(&warc);
    let responses = index.iter().filter(|r| r.0 == "response").count() as u64;
    assert_eq!(
        (imported, summary_count(&stderr, "already present")),
        (responses - 1, 1),
        "{stderr}"
    );
    let mut others: BTreeMap<String, u64> = BTreeMap::new();
    for (kind, _) in index.iter().filter(|r| r.0 != "response") {
        *others.entry(kind.clone()).or_default() += 1;
    }
    assert!(
        others.contains_key("warcinfo")
            && others.contains_key("request")
            && others.contains_key("resource"),
        "{others:?}"
    );
    assert_eq!(skipped_by_type(&stderr), others, "{stderr}");
    assert_cache_verifies(&data);

    // The same file again: every response is already present, none stored twice.
    let out = import(&cfg, &data, &[&warc]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        (import_summary(&stderr).1, summary_count(&stderr, "already present")),
        (0, responses),
        "{stderr}"
    );
    assert_eq!(skipped_by_type(&stderr), others, "{stderr}");

    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let (replayed, log) = wget(&start, &offline.url(), &dir.join("replayed"));
    assert_trees_equal(&online, &replayed, "offline replay of wget's WARC vs wget's own crawl");
    assert_eq!(gateway_timeouts(&log), 0, "{log}");
    let chunked = offline.get(&format!("{start}chunked"), &[]);
    assert_eq!(
        chunked.header("content-length"),
        Some("25"),
        "de-chunked, with its length: {}",
        chunked.describe()
    );
    assert!(
        chunked.cache_status().unwrap_or_default().contains("key=\"record:GET"),
        "{}",
        chunked.describe()
    );
    offline.stop_cleanly();
}

/// The gzip members of `file`: (offset, compressed length, decompressed bytes).
fn gzip_members(file: &[u8]) -> Vec<(usize, usize, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < file.len() {
        let mut rest = &file[at..];
        let before = rest.len();
        let mut text = Vec::new();
        flate2::bufread::GzDecoder::new(&mut rest).read_to_end(&mut text).unwrap();
        let len = before - rest.len();
        out.push((at, len, text));
        at += len;
    }
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The member holding the response record for the URL ending in `path`.
fn response_member(members: &[(usize, usize, Vec<u8>)], path: &str) -> usize {
    members
        .iter()
        .position(|(_, _, text)| {
            let head = String::from_utf8_lossy(&text[..text.len().min(1024)]).into_owned();
            head.contains("WARC-Type: response")
                && head.lines().any(|l| {
                    l.starts_with("WARC-Target-URI")
                        && l.trim_end().trim_end_matches('>').ends_with(path)
                })
        })
        .unwrap_or_else(|| panic!("no response record for {path}"))
}

#[test]
fn bad_records_are_reported_at_their_offsets_and_the_rest_imports() {
    let dir = TestDir::new("warc-bad-input");
    let origin = Origin::start(site);
    let (_, warc) = wget_warc(&origin.url("/"), &dir.join("online"), &dir.join("site"));
    drop(origin);
    let good = std::fs::read(&warc).unwrap();
    let members = gzip_members(&good);
    let malformed = response_member(&members, "/a");
    let corrupt = response_member(&members, "/b");
    let truncated =
        response_member(&members, "/chunked").max(response_member(&members, "/nocache"));
    assert!(malformed < truncated && corrupt < truncated);

    // Rebuild the file: one record with a field line that has no colon, one
    // gzip member whose deflate data is garbled, and the file cut in the
    // middle of a later record.
    let mut bad = Vec::new();
    let mut offsets = BTreeMap::new();
    for (i, (at, len, text)) in members.iter().enumerate() {
        offsets.insert(i, bad.len());
        if i == malformed {
            let broken = String::from_utf8_lossy(text).replacen(
                "WARC-Type: response\r\n",
                "WARC-Type: response\r\nthis line has no colon\r\n",
                1,
            );
            bad.extend(gzip(broken.as_bytes()));
        } else if i == corrupt {
            let mut m = good[*at..at + len].to_vec();
            for b in &mut m[12..len - 10] {
                *b ^= 0x55;
            }
            bad.extend(m);
        } else if i == truncated {
            bad.extend(&good[*at..at + len / 2]);
            break;
        } else {
            bad.extend(&good[*at..at + len]);
        }
    }
    let bad_file = dir.join("bad.warc.gz");
    std::fs::write(&bad_file, &bad).unwrap();

    let cfg = config_file(&dir, ALL);
    let data = dir.subdir("data");
    let out = import(&cfg, &data, &[&bad_file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a skipped record makes the exit status 1:\n{stderr}");
    for (what, i) in [("malformed", malformed), ("corrupt", corrupt), ("truncated", truncated)] {
        let needle = format!("record at offset {}:", offsets[&i]);
        assert!(
            stderr.lines().any(|l| l.contains(&needle) && l.contains("skipped")),
            "the {what} record is reported ({needle}):\n{stderr}"
        );
    }
    assert!(
        stderr.contains("without a colon")
            && stderr.contains("does not decompress")
            && stderr.contains("cut short"),
        "{stderr}"
    );
    let (_, imported, failed) = import_summary(&stderr);
    assert_eq!(failed, 3, "{stderr}");
    skipped_by_type(&stderr);
    assert!(imported >= 5, "{stderr}");
    assert!(
        stderr.lines().last().unwrap_or("").contains("records read"),
        "the summary comes last:\n{stderr}"
    );

    // The good records are there, the bad ones are not; nothing half-written.
    let keys: BTreeSet<String> = recorded(&data).into_iter().map(|(k, _)| k).collect();
    let has = |path: &str| keys.iter().any(|k| k.ends_with(path));
    assert!(has("/") && has("/r301") && has("/r302") && has("/dir/"), "{keys:?}");
    assert!(!has("/a") && !has("/b"), "{keys:?}");
    // The two tracking-parameter spellings of /news share one key (the second is already present).
    assert_eq!(
        (keys.len() as u64, summary_count(&stderr, "already present")),
        (imported, 1),
        "{keys:?}\n{stderr}"
    );
    assert_cache_verifies(&data);
    let leftovers = std::fs::read_dir(data.join("tmp")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 0, "no temporary body left behind");
}

#[test]
fn import_into_a_running_proxy_is_served_at_once_and_export_says_what_it_wrote() {
    let dir = TestDir::new("warc-running");
    let origin = Origin::start(site);
    let start = origin.url("/");
    let (online, warc) = wget_warc(&start, &dir.join("online"), &dir.join("site"));
    drop(origin);
    let data = dir.subdir("data");
    let cfg = config_file(&dir, ALL);
    let running = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let before = running.get(&format!("{start}a"), &[]);
    assert_eq!(before.status, 504, "nothing stored yet: {}", before.describe());

    // The proxy holds the store: the import goes through its admin endpoint.
    let out = import(&cfg, &data, &[&warc]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (_, imported, failed) = import_summary(&stderr);
    let responses = warcio_index(&warc).into_iter().filter(|r| r.0 == "response").count() as u64;
    assert_eq!(
        (imported + summary_count(&stderr, "already present"), failed),
        (responses, 0),
        "{stderr}"
    );
    assert!(
        skipped_by_type(&stderr).contains_key("request"),
        "the proxy's summary carries the per-type counts: {stderr}"
    );
    // Served at once, by the proxy that imported them, byte for byte.
    let a = running.get(&format!("{start}a"), &[]);
    assert_eq!(a.status, 200, "{}", a.describe());
    // wget saved /a under the name of the redirect to it (r301).
    assert_eq!(
        (a.body.as_slice(), online.get(Path::new("r301")).map(Vec::as_slice)),
        (&b"<html>page /a</html>"[..], Some(&b"<html>page /a</html>"[..])),
        "{}",
        a.describe()
    );
    assert!(a.cache_status().unwrap_or_default().contains("key=\"record:GET"), "{}", a.describe());
    let (replayed, log) = wget(&start, &running.url(), &dir.join("replayed"));
    assert_trees_equal(&online, &replayed, "replay right after an import into the running proxy");
    assert_eq!(gateway_timeouts(&log), 0, "{log}");

    // The same refusal rules as the other admin commands: a bad file is
    // reported and the exit status says so; a missing one cannot be read.
    let empty = dir.join("empty.warc");
    std::fs::write(&empty, b"").unwrap();
    let out = import(&cfg, &data, &[&empty]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("0 records read: 0 imported, 0 already present, 0 older captures kept out, 0 failed, 0 skipped;"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = import(&cfg, &data, &[&dir.join("missing.warc.gz")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let garbage = dir.join("garbage.warc");
    std::fs::write(&garbage, b"WARC/1.1\r\nthis line has no colon\r\n\r\n").unwrap();
    let out = import(&cfg, &data, &[&garbage]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("garbage.warc") && stderr.contains("offset 0"),
        "the file and offset are named: {stderr}"
    );
    assert!(
        std::fs::read_dir(data.join("import")).map(|d| d.count()).unwrap_or(0) == 0,
        "no upload left behind"
    );
    running.stop_cleanly();

    // Stopped, the store itself: an empty file imports nothing and succeeds.
    let out = import(&cfg, &data, &[&empty]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 records read: 0 imported, 0 already present, 0 older captures kept out, 0 failed, 0 skipped;"));
    // --host filters the export.
    let warc = dir.join("none.warc.gz");
    let out = crawlcache_cmd(
        &[
            "export",
            "--warc",
            warc.to_str().unwrap(),
            "--host",
            "example.org",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("0 exchanges (1 records)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(warcio_index(&warc), vec![("warcinfo".to_string(), String::new())]);
    assert_cache_verifies(&data);
}

#[test]
fn a_wget_warc_dedup_crawl_imported_replays_every_revisited_url_byte_identical() {
    let dir = TestDir::new("warc-dedup");
    let origin = Origin::start(site);
    let start = origin.url("/");
    let (first_files, first) =
        wget_warc_with(&start, &dir.join("first"), &dir.join("one"), &["--warc-cdx".to_string()]);
    let cdx = dir.join("one.cdx");
    assert!(cdx.is_file(), "wget --warc-cdx wrote no {}", cdx.display());
    let (second_files, second) = wget_warc_with(
        &start,
        &dir.join("second"),
        &dir.join("two"),
        &[format!("--warc-dedup={}", cdx.display())],
    );
    drop(origin);
    let index = warcio_index(&second);
    let revisited: BTreeSet<String> = index
        .iter()
        .filter(|r| r.0 == "revisit")
        .map(|r| r.1.trim_matches(['<', '>']).to_string())
        .collect();
    let revisits = index.iter().filter(|r| r.0 == "revisit").count() as u64;
    assert!(
        revisits >= 8 && revisited.iter().any(|u| u.ends_with("/a")),
        "wget wrote revisits for what did not change: {index:?}"
    );
    assert_eq!(first_files, second_files, "the site did not change");

    // One import of both files, the deduplicated crawl first: its revisits
    // wait for the payloads of the file after it.
    let cfg = config_file(&dir, ALL);
    let data = dir.subdir("data");
    let out = import(&cfg, &data, &[&second, &first]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(import_summary(&stderr).2, 0, "{stderr}");
    assert_eq!(
        summary_count(&stderr, "revisits resolved"),
        revisits,
        "every revisit resolved: {stderr}"
    );
    assert_cache_verifies(&data);
    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let (replayed, log) = wget(&start, &offline.url(), &dir.join("replayed"));
    assert_trees_equal(
        &second_files,
        &replayed,
        "offline replay of the deduplicated crawl vs wget's own",
    );
    assert_eq!(gateway_timeouts(&log), 0, "{log}");
    for url in &revisited {
        let r = offline.get(url, &[]);
        let path = url.strip_prefix(&start).unwrap_or("");
        // A redirect's saved file holds its target (wget saves it under the
        // redirecting name): only a 200 is compared with it.
        if let (200, Some(saved)) = (
            r.status,
            second_files.get(Path::new(if path.is_empty() { "index.html" } else { path })),
        ) {
            assert_eq!(&r.body, saved, "{url}: byte-identical: {}", r.describe());
        }
        assert!(r.status < 500, "{url}: {}", r.describe());
    }
    offline.stop_cleanly();

    // Against what is already stored: the first crawl in one import, the
    // deduplicated one in the next.
    let data2 = dir.subdir("data2");
    assert!(import(&cfg, &data2, &[&first]).status.success());
    let out = import(&cfg, &data2, &[&second]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(summary_count(&stderr, "revisits resolved"), revisits, "{stderr}");
    let offline = Proxy::start_with_config(&data2, ALL, &["--offline"]);
    let (replayed, _) = wget(&start, &offline.url(), &dir.join("replayed2"));
    assert_trees_equal(&second_files, &replayed, "replay after two imports");
    offline.stop_cleanly();

    // Exported with --revisits, each body is written once; the round trip
    // replays the same crawl. Without the key rule, the two spellings of
    // /news are two records of one body.
    let plain = dir.join("plain.toml");
    std::fs::write(&plain, "[record]\nmode = \"all\"\n").unwrap();
    let plain = plain.to_str().unwrap();
    let data4 = dir.subdir("data4");
    assert!(import(plain, &data4, &[&first, &second]).status.success());
    let small = dir.join("small.warc.gz");
    let out = crawlcache_cmd(
        &[
            "export",
            "--revisits",
            "--warc",
            small.to_str().unwrap(),
            "--config",
            plain,
            "--data-dir",
            data4.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported = warcio_index(&small);
    let written = exported.iter().filter(|r| r.0 == "revisit").count();
    let full = dir.join("full.warc.gz");
    assert!(crawlcache_cmd(
        &[
            "export",
            "--warc",
            full.to_str().unwrap(),
            "--config",
            plain,
            "--data-dir",
            data4.to_str().unwrap()
        ],
        Duration::from_secs(120)
    )
    .status
    .success());
    // Each body once: a response record fewer for each revisit (the bodies
    // here are a few bytes, so the file is not smaller for it).
    let responses = |index: &[(String, String)]| index.iter().filter(|r| r.0 == "response").count();
    let full_index = warcio_index(&full);
    assert!(
        written >= 1 && responses(&exported) + written == responses(&full_index),
        "{exported:?}\n{full_index:?}"
    );
    assert_warcio_checks(&small, exported.len() - written); // warcio leaves revisit digests unchecked
    assert_digests_unpadded_and_indexed(&small);
    let data3 = dir.subdir("data3");
    let out = import(plain, &data3, &[&small]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(summary_count(&stderr, "revisits resolved"), written as u64, "{stderr}");
    let offline = Proxy::start_with_config(&data3, "[record]\nmode = \"all\"\n", &["--offline"]);
    let (replayed, log) = wget(&start, &offline.url(), &dir.join("replayed3"));
    assert_trees_equal(&second_files, &replayed, "replay of an export with revisits");
    assert_eq!(gateway_timeouts(&log), 0, "{log}");
    offline.stop_cleanly();
}

/// A WARC file with one capture of `url` at `date` whose body is `body`.
fn capture_file(path: &Path, url: &str, date: &str, body: &[u8]) {
    let mut w = crawlcache::warc::writer::WarcWriter::new(Vec::new());
    let id = format!("<urn:uuid:{}>", uuid_like(date));
    super::common::warc_records::write_response(&mut w, &id, url, date, "200 OK", body);
    std::fs::write(path, w.finish().unwrap()).unwrap();
}

fn uuid_like(seed: &str) -> String {
    let h: u64 =
        seed.bytes().fold(1469598103934665603, |h, b| (h ^ b as u64).wrapping_mul(1099511628211));
    format!("{:08x}-0000-4000-8000-{:012x}", h >> 32, h & 0xffff_ffff_ffff)
}

#[test]
fn two_captures_of_one_url_from_two_dates_serve_the_newer_in_either_order() {
    let dir = TestDir::new("warc-two-dates");
    let url = "http://127.0.0.1:9/page";
    let (old, new) = (dir.join("2023.warc.gz"), dir.join("2024.warc.gz"));
    capture_file(&old, url, "2023-03-01T10:00:00Z", b"the page in 2023");
    capture_file(&new, url, "2024-03-01T10:00:00Z", b"the page in 2024");
    let cfg = config_file(&dir, ALL);
    for (label, files) in [("old-first", [&old, &new]), ("new-first", [&new, &old])] {
        // One import of both files, and one import per file.
        for together in [true, false] {
            let data = dir.subdir(format!("{label}-{together}"));
            if together {
                let out = import(&cfg, &data, &[files[0].as_path(), files[1].as_path()]);
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            } else {
                for f in files {
                    let out = import(&cfg, &data, &[f.as_path()]);
                    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                }
            }
            let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
            let r = offline.get(url, &[]);
            assert_eq!(
                (r.status, r.body.as_slice()),
                (200, &b"the page in 2024"[..]),
                "{label}, together={together}: {}",
                r.describe()
            );
            offline.stop_cleanly();
        }
    }
}

#[test]
fn progress_is_drawn_on_a_terminal_only() {
    let dir = TestDir::new("warc-progress");
    let origin = Origin::start(site);
    let (_, warc) = wget_warc(&origin.url("/"), &dir.join("online"), &dir.join("site"));
    drop(origin);
    let cfg = config_file(&dir, ALL);
    // Piped: the summary only.
    let out = import(&cfg, &dir.subdir("piped"), &[&warc]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b') && stderr.lines().count() == 1,
        "{stderr:?}"
    );
    // On a terminal (script(1) gives the command a pseudo-terminal): a bar, then the summary.
    let script =
        find_tool("script", "SCRIPT", &["/usr/bin/script"], "Install util-linux (bsdutils).");
    let command = format!(
        "{} import --config {cfg} --data-dir {} {}",
        crawlcache_bin().display(),
        dir.subdir("tty").display(),
        warc.display()
    );
    let mut cmd = Command::new(script);
    cmd.args(["-qec", &command, "/dev/null"]).env("TERM", "xterm");
    let out = run_bounded(&mut cmd, Duration::from_secs(60), "script crawlcache import");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("import [") && screen.contains("records read"), "{screen:?}");
}
