//! Replay fidelity against a peer (issue 33): pywb, what web archivists
//! replay WARC files with, and crawlcache replay the same wget crawls (a
//! `--warc-file` crawl and a `--warc-dedup` one holding revisits) offline;
//! per URL, the status and the SHA-256 of the body must agree wherever
//! pywb answers from the archive. pywb serves each URL's newest capture at
//! its identity replay URL (`/COLLECTION/id_/URL`: the archived payload,
//! unrewritten); it answers from the archive when it sends
//! `Memento-Datetime`. The counts are printed (`--nocapture` shows them).
//!
//! One exception is pywb's on purpose: it replays a *revisit* of a redirect
//! with an empty body ("if redirect, don't load payload record, as it'll be
//! ignored by browser", `pywb/warcserver/resource/resolvingloader.py`),
//! while the revisit stands for the original capture's payload (WARC 1.1
//! §6.7.2, identical-payload-digest). For those URLs the payload compared
//! is the one pywb serves for the original capture, asked for by its
//! timestamp. The second crawl starts in a later second than the first, as
//! two crawls on two days would, so that every revisit is the newest
//! capture and that path is taken each run, not only when the crawls happen
//! to straddle a second.
//!
//! `resource` records (WARC/1.1 section 6.4) with an http(s) target, as
//! warcio writes them: pywb replays each as a `200` with the record's
//! `Content-Type` and the block as the body; crawlcache imports them so
//! that the offline replay answers the same status, `Content-Type` and
//! body. The rest of such a file (a `urn:` resource, `warcinfo`,
//! `metadata`) is counted by type in the import summary.

use super::common::*;
use super::warc::{
    config_file, import, import_summary, python, run_python, skipped_by_type, warcio_index,
    wget_warc_with,
};
use super::{site, ALL};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a pywb entry point (`pywb.manager.manager:main`, `pywb.apps.cli:wayback`)
/// with `args`, in `cwd`.
fn pywb_command(entry: &str, args: &[&str], cwd: &Path) -> Command {
    let (module, func) = entry.split_once(':').unwrap();
    let mut cmd = Command::new(python());
    cmd.arg("-c")
        .arg(format!("import sys; from {module} import {func}; sys.exit({func}())"))
        .args(args)
        .current_dir(cwd);
    cmd
}

/// A pywb `wayback` server on a loopback port, killed when dropped.
struct Wayback {
    child: Child,
    port: u16,
}

impl Drop for Wayback {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Wayback {
    /// Makes the collection `crawl` of `warcs` under `dir` and serves it.
    fn start(dir: &Path, warcs: &[&Path]) -> Wayback {
        let check = run_bounded(
            Command::new(python()).args(["-c", "import pywb"]),
            Duration::from_secs(60),
            "import pywb",
        );
        assert!(
            check.status.success(),
            "pywb is not installed: `pip install pywb` (tests/run.sh does)\n{}",
            String::from_utf8_lossy(&check.stderr)
        );
        std::fs::create_dir_all(dir).unwrap();
        let out = run_bounded(
            &mut pywb_command("pywb.manager.manager:main", &["init", "crawl"], dir),
            Duration::from_secs(120),
            "wb-manager init",
        );
        assert!(out.status.success(), "wb-manager init: {}", String::from_utf8_lossy(&out.stderr));
        let mut args = vec!["add", "crawl"];
        args.extend(warcs.iter().map(|w| w.to_str().unwrap()));
        let out = run_bounded(
            &mut pywb_command("pywb.manager.manager:main", &args, dir),
            Duration::from_secs(120),
            "wb-manager add",
        );
        assert!(out.status.success(), "wb-manager add: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let log = std::fs::File::create(dir.join("wayback.log")).unwrap();
        let child = pywb_command(
            "pywb.apps.cli:wayback",
            &["-p", &port.to_string(), "-b", "127.0.0.1"],
            dir,
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start pywb's wayback");
        let w = Wayback { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(mut c) = Conn::try_open(w.addr(), Duration::from_millis(500)) {
                c.set_timeout(Duration::from_secs(10));
                if c.try_send("GET", "/crawl/", &[("Host", "127.0.0.1")], b"").is_ok() {
                    return w;
                }
            }
            assert!(
                Instant::now() < deadline,
                "pywb did not answer within 60 s:\n{}",
                tail_file(&dir.join("wayback.log"), 30)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The identity replay of `url`'s newest capture.
    fn get(&self, url: &str) -> Response {
        self.get_at(url, "")
    }

    /// The identity replay of `url`'s capture closest to `timestamp`
    /// (`YYYYMMDDhhmmss`; empty: the newest).
    fn get_at(&self, url: &str, timestamp: &str) -> Response {
        let mut c = Conn::open(self.addr());
        c.set_timeout(Duration::from_secs(30));
        c.send(
            "GET",
            &format!("/crawl/{timestamp}id_/{url}"),
            &[("Host", &format!("127.0.0.1:{}", self.port))],
            b"",
        )
    }
}

/// URL -> timestamp (`YYYYMMDDhhmmss`) of its capture in a CDX file wget
/// wrote with `--warc-cdx` (fields ` CDX a b ...`: URL, then timestamp).
fn cdx_timestamps(cdx: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(cdx).unwrap_or_else(|e| panic!("{}: {e}", cdx.display()));
    text.lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| {
            let mut f = l.split(' ');
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
        .collect()
}

fn sha(body: &[u8]) -> String {
    hex::encode(Sha256::digest(body))
}

#[test]
fn offline_replay_answers_every_url_pywb_answers_byte_identical() {
    let dir = TestDir::new("pywb-fidelity");
    let origin = Origin::start(site);
    let start = origin.url("/");
    let (_, first) =
        wget_warc_with(&start, &dir.join("first"), &dir.join("one"), &["--warc-cdx".to_string()]);
    // WARC dates have whole seconds: the second crawl starts in a later one.
    let first_done = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    std::thread::sleep(Duration::from_millis(1050 - u64::from(first_done.subsec_millis())));
    let (_, second) = wget_warc_with(
        &start,
        &dir.join("second"),
        &dir.join("two"),
        &[format!("--warc-dedup={}", dir.join("one.cdx").display())],
    );
    drop(origin);
    let first_captures = cdx_timestamps(&dir.join("one.cdx"));
    let mut urls = BTreeSet::new();
    let mut revisits = 0;
    for w in [&first, &second] {
        for (kind, uri) in warcio_index(w) {
            if kind == "response" || kind == "revisit" {
                urls.insert(uri.trim_matches(['<', '>']).to_string());
                revisits += usize::from(kind == "revisit");
            }
        }
    }
    assert!(urls.len() >= 10 && revisits >= 8, "{} URLs, {revisits} revisits", urls.len());

    let cfg = config_file(&dir, ALL);
    let data = dir.subdir("data");
    let out = import(&cfg, &data, &[&first, &second]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let wayback = Wayback::start(&dir.join("pywb"), &[&first, &second]);

    let (mut by_pywb, mut by_crawlcache, mut identical) = (0, 0, 0);
    let mut differences = Vec::new();
    let mut not_by_pywb = Vec::new();
    let mut redirect_revisits = Vec::new();
    for url in &urls {
        let mut p = wayback.get(url);
        let c = offline.get(url, &[]);
        let pywb_answered = p.header("memento-datetime").is_some();
        if pywb_answered && p.status / 100 == 3 && p.body.is_empty() {
            // Possibly pywb's empty replay of a redirect's revisit: the
            // payload is the original capture's, as pywb serves that one.
            if let Some(timestamp) = first_captures.get(url.as_str()) {
                let original = wayback.get_at(url, timestamp);
                if original.status == p.status
                    && original.header("location") == p.header("location")
                {
                    p.body = original.body;
                    redirect_revisits.push(url.rsplit('/').next().unwrap_or(url).to_string());
                }
            }
        }
        let crawlcache_answered = c.cache_status().is_some_and(|cs| cs.contains("hit"));
        by_pywb += usize::from(pywb_answered);
        if !pywb_answered {
            not_by_pywb.push(format!("{url} (pywb {})", p.status));
        }
        by_crawlcache += usize::from(crawlcache_answered);
        let same = pywb_answered
            && crawlcache_answered
            && p.status == c.status
            && sha(&p.body) == sha(&c.body);
        identical += usize::from(same);
        if pywb_answered && !same {
            differences.push(format!(
                "{url}: pywb {} {} / crawlcache {} {}",
                p.status,
                sha(&p.body),
                c.status,
                sha(&c.body)
            ));
        }
    }
    eprintln!("pywb comparison: {} URLs ({revisits} revisits), answered by pywb {by_pywb}, by crawlcache {by_crawlcache}, identical {identical}; not answered by pywb: {not_by_pywb:?}; redirect revisits compared with their original capture: {redirect_revisits:?}", urls.len());
    assert!(
        by_pywb >= urls.len() - 1,
        "pywb answers (nearly) every URL of its own WARC files: {by_pywb} of {}",
        urls.len()
    );
    assert!(
        differences.is_empty(),
        "crawlcache answers every URL pywb answers, byte-identical:\n{}",
        differences.join("\n")
    );
    assert_eq!(by_crawlcache, urls.len(), "crawlcache answers every URL");
    offline.stop_cleanly();
}

/// Writes (warcio) a WARC of `resource` records under the base URL
/// `argv[2]`: HTML, binary, JSON, an empty one, one warcio types
/// `application/warc-record` itself; plus one under a `urn:` target, a
/// `warcinfo`, a `metadata` and a `response` record.
const WARCIO_RESOURCES: &str = r#"
import sys, io
from warcio.warcwriter import WARCWriter
from warcio.statusandheaders import StatusAndHeaders
base = sys.argv[2]
with open(sys.argv[1], 'wb') as f:
    w = WARCWriter(f, gzip=True)
    w.write_record(w.create_warcinfo_record('resources.warc.gz', {'software': 'warcio'}))
    def res(uri, body, ct=None):
        w.write_record(w.create_warc_record(uri, 'resource', payload=io.BytesIO(body), length=len(body), warc_content_type=ct))
    res(base + '/res/page.html', b'<html><body>a page kept as a resource</body></html>', 'text/html; charset=utf-8')
    res(base + '/res/logo.png', bytes(range(256)) * 4, 'image/png')
    res(base + '/res/data.json', b'{"a": 1}', 'application/json')
    res(base + '/res/empty.txt', b'', 'text/plain')
    res(base + '/res/untyped', b'warcio types it itself')
    res('urn:pageinfo:' + base + '/res/page.html', b'{"title": "page"}', 'application/json')
    w.write_record(w.create_warc_record(base + '/res/page.html', 'metadata', payload=io.BytesIO(b'outlink: x\r\n'), warc_content_type='application/warc-fields'))
    head = StatusAndHeaders('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', '8')], protocol='HTTP/1.1')
    w.write_record(w.create_warc_record(base + '/res/response.txt', 'response', payload=io.BytesIO(b'response'), http_headers=head))
"#;

#[test]
fn resource_records_replay_as_pywb_replays_them_warc_1_1_section_6_4() {
    let dir = TestDir::new("pywb-resources");
    // Nothing listens there: both replay from the archive only.
    let base = "http://127.0.0.1:9";
    let warc = dir.join("resources.warc.gz");
    let out = run_python(&["-c", WARCIO_RESOURCES, warc.to_str().unwrap(), base]);
    assert!(out.status.success(), "warcio: {}", String::from_utf8_lossy(&out.stderr));
    // warcio always writes a Content-Type: a resource without one, by hand.
    let untyped = dir.join("untyped.warc");
    let body = b"no content type at all";
    let mut rec = format!(
        "WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n\
         WARC-Target-URI: {base}/res/none\r\nWARC-Date: 2024-05-01T12:00:00Z\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    rec.extend_from_slice(body);
    rec.extend_from_slice(b"\r\n\r\n");
    std::fs::write(&untyped, rec).unwrap();

    let cfg = config_file(&dir, ALL);
    let data = dir.subdir("data");
    let out = import(&cfg, &data, &[&warc, &untyped]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        import_summary(&stderr),
        (10, 7, 0),
        "six http(s) resources and a response imported: {stderr}"
    );
    let by_type: Vec<(String, u64)> = skipped_by_type(&stderr).into_iter().collect();
    assert_eq!(
        by_type,
        [("metadata".to_string(), 1), ("resource".to_string(), 1), ("warcinfo".to_string(), 1)],
        "{stderr}"
    );

    let offline = Proxy::start_with_config(&data, ALL, &["--offline"]);
    let wayback = Wayback::start(&dir.join("pywb"), &[&warc, &untyped]);
    for path in
        ["page.html", "logo.png", "data.json", "empty.txt", "untyped", "none", "response.txt"]
    {
        let url = format!("{base}/res/{path}");
        let p = wayback.get(&url);
        let c = offline.get(&url, &[]);
        assert!(
            p.header("memento-datetime").is_some(),
            "pywb answers {url} from the archive: {}",
            p.describe()
        );
        assert!(
            c.cache_status().is_some_and(|cs| cs.contains("hit")),
            "crawlcache answers {url} from the record: {}",
            c.describe()
        );
        assert_eq!(
            (c.status, c.header("content-type"), sha(&c.body)),
            (p.status, p.header("content-type"), sha(&p.body)),
            "{url}: the status, Content-Type and body pywb replays"
        );
    }
    assert_eq!(offline.get(&format!("{base}/res/nothing"), &[]).status, 504);
    offline.stop_cleanly();
}
