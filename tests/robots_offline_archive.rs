//! Offline `enforce` with robots.txt rules that only an imported archive
//! holds (issue 41): `crawlcache import` of a WARC file whose captures
//! include an origin's `/robots.txt`, then `serve --offline` with no stored
//! snapshot of that origin. The newest robots.txt capture of the origin is
//! judged as a stored snapshot is (2xx parsed, 4xx absent, 5xx
//! unavailable); nothing reaches the network.

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

const CONFIG: &str = "[robots]\nmode = \"enforce\"\n";
/// The older capture, which must not apply.
const OLD_RULES: &str = "User-agent: *\nDisallow: /public\n";
const RULES: &str = "User-agent: *\nDisallow: /private/\n";

/// One `response` record: `url` answered `status` with `body` at `date`.
fn response(
    w: &mut crawlcache::warc::writer::WarcWriter<Vec<u8>>,
    url: &str,
    date: &str,
    status: &str,
    body: &[u8],
) {
    let id = format!(
        "<urn:uuid:{:08x}-0000-4000-8000-{:012x}>",
        url.len() * 7919 + date.len(),
        url.bytes().chain(date.bytes()).map(u64::from).sum::<u64>()
    );
    common::warc_records::write_response(w, &id, url, date, status, body);
}

fn audit_lines(data_dir: &Path, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(data_dir.join("audit")) {
            let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            files.sort();
            for f in files {
                for line in std::fs::read_to_string(&f)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                {
                    out.push(
                        serde_json::from_str(line)
                            .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {line}")),
                    );
                }
            }
        }
        if out.len() >= n || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An archive holding `http://127.0.0.1:9/robots.txt` twice (2023:
/// `Disallow: /public`; 2024: `Disallow: /private/`), a page under
/// `/private/` and one outside, and an origin whose robots.txt answered
/// 503: offline `enforce` refuses `/private/page` naming the rule of the
/// newest capture (403, `disposition=offline`, audit line), serves
/// `/public` from the archive, and refuses the 503 origin's pages as
/// `rules unavailable`, naming the status.
#[test]
fn offline_enforce_judges_by_the_newest_robots_txt_capture_of_an_imported_warc() {
    let dir = TestDir::new("robots-offline-archive");
    let (a, b) = ("http://127.0.0.1:9", "http://127.0.0.1:10");
    let mut w = crawlcache::warc::writer::WarcWriter::new(Vec::new());
    response(
        &mut w,
        &format!("{a}/robots.txt"),
        "2024-03-01T10:00:00Z",
        "200 OK",
        RULES.as_bytes(),
    );
    response(
        &mut w,
        &format!("{a}/robots.txt"),
        "2023-03-01T10:00:00Z",
        "200 OK",
        OLD_RULES.as_bytes(),
    );
    response(&mut w, &format!("{a}/private/page"), "2024-03-01T10:00:01Z", "200 OK", b"secret");
    response(&mut w, &format!("{a}/public"), "2024-03-01T10:00:02Z", "200 OK", b"public page");
    response(
        &mut w,
        &format!("{b}/robots.txt"),
        "2024-03-01T10:00:03Z",
        "503 Service Unavailable",
        b"down",
    );
    response(&mut w, &format!("{b}/page"), "2024-03-01T10:00:04Z", "200 OK", b"b page");
    let warc = dir.join("crawl.warc.gz");
    std::fs::write(&warc, w.finish().expect("finishing the WARC")).expect("writing the WARC");
    let cfg = dir.join("crawlcache.toml");
    std::fs::write(&cfg, CONFIG).expect("config");
    let data = dir.subdir("data");
    let (cfg, data_arg, warc_arg) =
        (cfg.display().to_string(), data.display().to_string(), warc.display().to_string());
    let out = crawlcache_cmd(
        &["import", "--config", &cfg, "--data-dir", &data_arg, &warc_arg],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "import failed: {}", String::from_utf8_lossy(&out.stderr));

    let proxy = Proxy::start_with_config(&data, CONFIG, &["--offline"]);
    let ua = [("User-Agent", "ExampleBot/1.0")];
    let r = proxy.get(&format!("{a}/private/page"), &ua);
    assert_eq!(r.status, 403, "the archived robots.txt disallows /private/: {}", r.describe());
    assert!(
        r.text().contains("rule `Disallow: /private/` (line 2)")
            && r.text().contains(&format!("{a}/robots.txt")),
        "{}",
        r.text()
    );
    let rs = r.header("robots-status").unwrap_or("").to_string();
    let sha = crawlcache_robots::snapshot::sha256_hex(RULES.as_bytes());
    assert!(
        rs.starts_with("disallowed; rule=\"Disallow: /private/\"; line=2")
            && rs.contains(&sha)
            && rs.ends_with("disposition=offline"),
        "{rs}"
    );

    let r = proxy.get(&format!("{a}/public"), &ua);
    assert_eq!(
        (r.status, r.text()),
        (200, "public page".to_string()),
        "the older capture does not apply: {}",
        r.describe()
    );
    assert!(
        r.header("robots-status").unwrap_or("").starts_with("allowed; sha256="),
        "{}",
        r.describe()
    );

    let r = proxy.get(&format!("{b}/page"), &ua);
    assert_eq!(r.status, 403, "an archived 503 robots.txt: rules unavailable: {}", r.describe());
    assert!(
        r.text().contains("could not be fetched") && r.text().contains("the origin answered 503"),
        "{}",
        r.text()
    );
    assert!(
        r.header("robots-status")
            .unwrap_or("")
            .starts_with("disallowed; rule=\"rules unavailable\""),
        "{}",
        r.describe()
    );

    let lines = audit_lines(&data, 3);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines.iter().all(|l| l["disposition"] == "offline"), "{lines:#?}");
    assert_eq!(
        (lines[0]["verdict"].as_str(), lines[0]["rule"].as_str()),
        (Some("disallowed"), Some("Disallow: /private/")),
        "{}",
        lines[0]
    );
    assert_eq!(lines[0]["robots_sha256"], sha.as_str());
    assert_eq!(lines[1]["verdict"], "allowed");
}
