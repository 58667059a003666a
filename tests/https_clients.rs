//! The client matrix over HTTPS through the proxy (issue 30): each client a
//! crawler uses, configured as the README's table says, fetches an HTTPS
//! page from a TLS origin on 127.0.0.1 twice through crawlcache; the first
//! fetch is a stored miss, the second a hit, and the origin sees one
//! request. Rows: curl, wget, Python requests, httpx and aiohttp, Node
//! `fetch` through undici's `ProxyAgent`, Scrapy (a real spider, online
//! twice then with the proxy `--offline`; and verifying certificates
//! against the system trust store after `crawlcache ca install`), and
//! headless Chromium loading a page with its images and CSS twice (the
//! second load all hits) with a screenshot compared against a direct load.
//!
//! `bash tests/run.sh` installs every client when missing (apt-get:
//! wget, curl, chromium, libnss3-tools; pip: requests, httpx, aiohttp,
//! scrapy; npm: undici into `target/test-node`).

mod common;

use common::tls::test_pki;
use common::tls_origin::{Answer, TlsOrigin};
use common::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CLIENT_LIMIT: Duration = Duration::from_secs(90);
const CMD_LIMIT: Duration = Duration::from_secs(30);

/// Proxy variables a client could pick up from the test's environment.
const PROXY_VARS: [&str; 12] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
    "CURL_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
];

/// A clean command for a client: no proxy or CA variables inherited.
fn client(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for v in PROXY_VARS {
        cmd.env_remove(v);
    }
    cmd
}

fn path_str(p: &Path) -> String {
    p.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", p.display())).to_string()
}

// ---------------------------------------------------------------------------
// The site: a page, its stylesheet and two images
// ---------------------------------------------------------------------------

/// A solid `w`x`h` PNG of colour `rgb` (RFC 2083: signature, IHDR, one
/// zlib IDAT of filter-0 rows, IEND).
fn png(w: u32, h: u32, rgb: [u8; 3]) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.finalize().to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    let mut raw = Vec::new();
    for _ in 0..h {
        // Filter type 0, then the row's pixels.
        raw.push(0);
        raw.extend(std::iter::repeat_n(rgb, w as usize).flatten());
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&raw).unwrap();
    chunk(&mut out, b"IDAT", &z.finish().unwrap());
    chunk(&mut out, b"IEND", b"");
    out
}

const INDEX: &str =
    "<!doctype html><html><head><meta charset=utf-8><link rel=icon href=\"data:,\"><link rel=stylesheet href=/style.css><title>matrix</title></head>\
<body><h1>crawlcache</h1><img src=/red.png width=120 height=80> <img src=/blue.png width=120 height=80><p class=note>through the proxy</p></body></html>";
const STYLE: &str = "body{margin:0;background:#ffe9a8;font:20px sans-serif}h1{color:#1a5e20;margin:8px}.note{background:#222;color:#fff;padding:6px}img{border:6px solid #7a1fa2}";

/// The origin's answers: every resource cacheable for ten minutes.
fn site(_scheme: &str, path: &str) -> Answer {
    let cacheable = |ctype: &str, body: Vec<u8>| -> Answer {
        (
            200,
            vec![("Cache-Control", "max-age=600".to_string()), ("Content-Type", ctype.to_string())],
            body,
        )
    };
    match path {
        "/index.html" => cacheable("text/html; charset=utf-8", INDEX.as_bytes().to_vec()),
        "/style.css" => cacheable("text/css", STYLE.as_bytes().to_vec()),
        "/red.png" => cacheable("image/png", png(60, 40, [220, 30, 30])),
        "/blue.png" => cacheable("image/png", png(60, 40, [30, 60, 220])),
        p if p.starts_with("/page/") => cacheable("text/plain", format!("page {p}").into_bytes()),
        _ => (404, vec![("Cache-Control", "max-age=600".to_string())], b"not here".to_vec()),
    }
}

/// The TLS origin, the test CA crawlcache trusts it with, and a proxy.
struct Setup {
    origin: TlsOrigin,
    /// The test origin CA (what a client loading the origin directly trusts).
    origin_ca: PathBuf,
    /// crawlcache's CA certificate.
    ca: PathBuf,
    proxy: Proxy,
    dir: TestDir,
}

fn setup(label: &str) -> Setup {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, site);
    let dir = TestDir::new(label);
    let origin_ca = dir.join("origin-ca.pem");
    std::fs::write(&origin_ca, &pki.ca_pem).unwrap();
    let config = format!("[robots]\nmode = \"off\"\n\n[upstream]\nresponse_timeout = \"10s\"\nextra_ca_file = {:?}\n", path_str(&origin_ca));
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config, &[]);
    let ca = proxy.data_dir().join("ca/ca.pem");
    assert!(ca.is_file(), "the proxy created its CA at {}", ca.display());
    Setup { origin, origin_ca, ca, proxy, dir }
}

impl Setup {
    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.origin.port())
    }
}

/// What one fetch by a client got.
#[derive(Debug)]
struct Fetched {
    status: u16,
    cache_status: String,
    body: String,
}

/// Runs `cmd`, which prints one JSON object `{status, cache_status, body}`
/// on its last line of stdout.
fn run_json(cmd: &mut Command, what: &str) -> Fetched {
    let out = run_bounded(cmd, CLIENT_LIMIT, what);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{what}: output is not JSON ({e}): {stdout}"));
    Fetched {
        status: v["status"].as_u64().unwrap_or(0) as u16,
        cache_status: v["cache_status"].as_str().unwrap_or("").to_string(),
        body: v["body"].as_str().unwrap_or("").to_string(),
    }
}

/// Fetches `path` twice with `fetch` and checks the row's promise: the
/// page both times, a stored miss then a hit, one origin request.
fn twice(s: &Setup, row: &str, path: &str, fetch: impl Fn(&str) -> Fetched) {
    let url = s.url(path);
    let first = fetch(&url);
    assert_eq!(
        (first.status, first.body.as_str()),
        (200, format!("page {path}").as_str()),
        "{row}, first fetch: {first:?}"
    );
    assert!(
        first.cache_status.contains("fwd=uri-miss") && first.cache_status.contains("stored"),
        "{row}, first fetch is a stored miss: {first:?}"
    );
    let second = fetch(&url);
    assert_eq!(
        (second.status, second.body.as_str()),
        (200, format!("page {path}").as_str()),
        "{row}, second fetch: {second:?}"
    );
    assert!(
        second.cache_status.split(';').any(|p| p.trim() == "hit"),
        "{row}, second fetch is a hit: {second:?}"
    );
    assert_eq!(
        s.origin.count("https", path),
        1,
        "{row}: the origin saw one request: {:?}",
        s.origin.all_counts()
    );
}

fn python() -> PathBuf {
    find_tool(
        "python3",
        "CRAWLCACHE_TEST_PYTHON",
        &["/usr/bin/python3", "/usr/local/bin/python3"],
        "Install python3.",
    )
}

/// Panics, naming the install command, unless `import module` works.
fn require_python_module(module: &str, package: &str) {
    let probe = run_bounded(
        Command::new(python()).args(["-c", &format!("import {module}")]),
        CMD_LIMIT,
        &format!("python3 -c 'import {module}'"),
    );
    assert!(
        probe.status.success(),
        "the Python module `{module}` is missing ({}). `bash tests/run.sh` installs it (python3 -m pip install {package}).",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
}

// ---------------------------------------------------------------------------
// The command-line and library rows
// ---------------------------------------------------------------------------

#[test]
fn curl_with_cacert() {
    let s = setup("matrix-curl");
    let curl = find_tool(
        "curl",
        "CRAWLCACHE_TEST_CURL",
        &["/usr/bin/curl"],
        "Install curl (apt-get install curl).",
    );
    twice(&s, "curl", "/page/curl", |url| {
        let dir = TestDir::new("curl-out");
        let (h, b) = (dir.join("h"), dir.join("b"));
        let mut cmd = client(&curl);
        cmd.args([
            "-q",
            "-sS",
            "--suppress-connect-headers",
            "--max-time",
            "30",
            "--proxy",
            &s.proxy.url(),
            "--cacert",
            &path_str(&s.ca),
            "-D",
            &path_str(&h),
            "-o",
            &path_str(&b),
            url,
        ]);
        let out = run_bounded(&mut cmd, CLIENT_LIMIT, "curl");
        assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
        let head = std::fs::read_to_string(&h).unwrap_or_default();
        fetched_from_head(&head, std::fs::read_to_string(&b).unwrap_or_default())
    });
}

/// A [`Fetched`] from a response head as text (status line, fields).
fn fetched_from_head(head: &str, body: String) -> Fetched {
    let block = head.split("\r\n\r\n").filter(|b| !b.trim().is_empty()).last().unwrap_or("");
    let status = block
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cache_status = block
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("cache-status"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    Fetched { status, cache_status, body }
}

#[test]
fn wget_with_ca_certificate() {
    let s = setup("matrix-wget");
    let wget = find_tool(
        "wget",
        "CRAWLCACHE_TEST_WGET",
        &["/usr/bin/wget"],
        "Install wget (apt-get install wget).",
    );
    twice(&s, "wget", "/page/wget", |url| {
        let dir = TestDir::new("wget-out");
        let body = dir.join("b");
        let mut cmd = client(&wget);
        cmd.env("https_proxy", s.proxy.url()).args([
            "-q",
            "-S",
            "--tries=1",
            "--timeout=30",
            "--no-hsts",
            "--no-config",
            &format!("--ca-certificate={}", path_str(&s.ca)),
            "-O",
            &path_str(&body),
            url,
        ]);
        let out = run_bounded(&mut cmd, CLIENT_LIMIT, "wget");
        // wget -S prints the response head, indented, on stderr.
        let head = String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("\r\n");
        assert!(out.status.success(), "wget: {head}");
        let head = head.rfind("HTTP/1.1").map(|i| head[i..].to_string()).unwrap_or(head);
        fetched_from_head(&head, std::fs::read_to_string(&body).unwrap_or_default())
    });
}

const PY_REQUESTS: &str = r#"
import json, sys, requests
r = requests.get(sys.argv[1], proxies={"https": sys.argv[2]}, timeout=30)
print(json.dumps({"status": r.status_code, "cache_status": r.headers.get("Cache-Status"), "body": r.text}))
"#;

#[test]
fn python_requests_with_requests_ca_bundle() {
    require_python_module("requests", "requests");
    let s = setup("matrix-requests");
    twice(&s, "requests", "/page/requests", |url| {
        let mut cmd = client(&python());
        cmd.args(["-c", PY_REQUESTS, url, &s.proxy.url()]).env("REQUESTS_CA_BUNDLE", &s.ca);
        run_json(&mut cmd, "python3 requests")
    });
}

const PY_HTTPX: &str = r#"
import json, ssl, sys, httpx
ctx = ssl.create_default_context(cafile=sys.argv[3])
r = httpx.get(sys.argv[1], proxy=sys.argv[2], verify=ctx, timeout=30)
print(json.dumps({"status": r.status_code, "cache_status": r.headers.get("Cache-Status"), "body": r.text}))
"#;

#[test]
fn python_httpx_with_a_verify_context() {
    require_python_module("httpx", "httpx");
    let s = setup("matrix-httpx");
    twice(&s, "httpx", "/page/httpx", |url| {
        run_json(
            client(&python()).args(["-c", PY_HTTPX, url, &s.proxy.url(), &path_str(&s.ca)]),
            "python3 httpx",
        )
    });
}

const PY_HTTPX_H2: &str = r#"
import json, ssl, sys, httpx
ctx = ssl.create_default_context(cafile=sys.argv[3])
with httpx.Client(http2=True, proxy=sys.argv[2], verify=ctx, timeout=30) as c:
    r = c.get(sys.argv[1])
# What the client itself negotiated inside the tunnel.
assert r.http_version == "HTTP/2", f"httpx spoke {r.http_version}"
print(json.dumps({"status": r.status_code, "cache_status": r.headers.get("Cache-Status"), "body": r.text}))
"#;

/// Requests the proxy's clients sent over HTTP/2 so far.
fn client_h2_requests(proxy: &Proxy) -> u64 {
    proxy.metric("crawlcache_client_h2_requests_total")
}

/// Issue 43: httpx with `http2=True` gets HTTP/2 inside the tunnel (its
/// `http_version` says so), the second request a hit.
#[test]
fn python_httpx_with_http2_speaks_h2_inside_the_tunnel() {
    require_python_module("httpx", "httpx");
    require_python_module("h2", "h2");
    let s = setup("matrix-httpx-h2");
    let before = client_h2_requests(&s.proxy);
    twice(&s, "httpx http2", "/page/httpx-h2", |url| {
        let mut cmd = client(&python());
        cmd.args(["-c", PY_HTTPX_H2, url, &s.proxy.url(), &path_str(&s.ca)]);
        run_json(&mut cmd, "python3 httpx http2=True")
    });
    assert!(client_h2_requests(&s.proxy) >= before + 2);
}

const PY_AIOHTTP: &str = r#"
import asyncio, json, ssl, sys, aiohttp
async def main():
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    async with aiohttp.ClientSession() as session:
        async with session.get(sys.argv[1], proxy=sys.argv[2], ssl=ctx, timeout=aiohttp.ClientTimeout(total=30)) as r:
            body = await r.text()
            print(json.dumps({"status": r.status, "cache_status": r.headers.get("Cache-Status"), "body": body}))
asyncio.run(main())
"#;

#[test]
fn python_aiohttp_with_an_ssl_context() {
    require_python_module("aiohttp", "aiohttp");
    let s = setup("matrix-aiohttp");
    twice(&s, "aiohttp", "/page/aiohttp", |url| {
        run_json(
            client(&python()).args(["-c", PY_AIOHTTP, url, &s.proxy.url(), &path_str(&s.ca)]),
            "python3 aiohttp",
        )
    });
}

const NODE_UNDICI: &str = r#"
const fs = require("fs");
const { fetch, ProxyAgent } = require(process.env.UNDICI);
// With `node -e`, the arguments follow the program name directly.
const [url, proxy, ca] = process.argv.slice(1);
// allowH2 (undici 6): ALPN h2 inside the tunnel, as the client's own
// connections would use it; without it undici offers http/1.1 only.
const h2 = process.env.ALLOW_H2 === "1";
const dispatcher = new ProxyAgent({ uri: proxy, allowH2: h2, requestTls: { ca: fs.readFileSync(ca), allowH2: h2 } });
fetch(url, { dispatcher }).then(async (r) => {
  const body = await r.text();
  console.log(JSON.stringify({ status: r.status, cache_status: r.headers.get("cache-status"), body }));
  await dispatcher.close();
}).catch((e) => { console.error(e); process.exit(1); });
"#;

/// Where `tests/run.sh` installs undici (`npm install --prefix`).
fn undici_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or(Path::new("target"))
        .join("test-node/node_modules/undici");
    assert!(
        dir.join("package.json").is_file(),
        "undici is not installed at {}; `bash tests/run.sh` installs it (npm install --prefix target/test-node undici@6)",
        dir.display()
    );
    dir
}

#[test]
fn node_fetch_through_undici_proxy_agent() {
    let node = find_tool(
        "node",
        "CRAWLCACHE_TEST_NODE",
        &["/usr/bin/node", "/usr/local/bin/node"],
        "Install Node.js (apt-get install nodejs).",
    );
    let undici = undici_dir();
    let s = setup("matrix-node");
    twice(&s, "node undici", "/page/node", |url| {
        let mut cmd = client(&node);
        cmd.args(["-e", NODE_UNDICI, url, &s.proxy.url(), &path_str(&s.ca)]).env("UNDICI", &undici);
        run_json(&mut cmd, "node undici fetch")
    });
    // Issue 43: with `allowH2` its ProxyAgent speaks HTTP/2 inside the tunnel.
    let before = client_h2_requests(&s.proxy);
    twice(&s, "node undici allowH2", "/page/node-h2", |url| {
        let mut cmd = client(&node);
        cmd.args(["-e", NODE_UNDICI, url, &s.proxy.url(), &path_str(&s.ca)])
            .env("UNDICI", &undici)
            .env("ALLOW_H2", "1");
        run_json(&mut cmd, "node undici fetch with allowH2")
    });
    assert!(
        client_h2_requests(&s.proxy) >= before + 2,
        "undici with allowH2 sent its requests over HTTP/2"
    );
}

// ---------------------------------------------------------------------------
// Scrapy
// ---------------------------------------------------------------------------

/// A spider that fetches every URL given and writes one JSON line per
/// response (status, Cache-Status, body) to the file named by `OUT`. Stock
/// settings but for the log level: the proxy comes from `https_proxy`.
const SPIDER: &str = r#"
import json, os, sys
import scrapy
from scrapy.crawler import CrawlerProcess

class Matrix(scrapy.Spider):
    name = "matrix"
    def __init__(self, urls, **kw):
        super().__init__(**kw)
        self.urls = urls
    async def start(self):
        for u in self.urls:
            yield scrapy.Request(u, dont_filter=True)
    def parse(self, response):
        with open(os.environ["OUT"], "a") as f:
            cs = response.headers.get("Cache-Status")
            f.write(json.dumps({"url": response.url, "status": response.status,
                                "cache_status": cs.decode() if cs else "", "body": response.text}) + "\n")

settings = {"LOG_LEVEL": "WARNING", "RETRY_ENABLED": False, "TELNETCONSOLE_ENABLED": False}
if os.environ.get("VERIFY") == "1":
    settings["DOWNLOAD_VERIFY_CERTIFICATES"] = True
process = CrawlerProcess(settings)
process.crawl(Matrix, urls=sys.argv[1:])
process.start()
"#;

/// Runs the spider over `urls` through `proxy`; returns one parsed line
/// per response, in no particular order.
fn scrapy_crawl(proxy: &str, urls: &[String], verify: bool) -> Vec<serde_json::Value> {
    require_python_module("scrapy", "scrapy");
    let dir = TestDir::new("scrapy");
    let out = dir.join("out.jsonl");
    let mut cmd = client(&python());
    cmd.arg("-c")
        .arg(SPIDER)
        .args(urls)
        .env("https_proxy", proxy)
        .env("OUT", &out)
        .env("VERIFY", if verify { "1" } else { "0" })
        .current_dir(dir.path());
    let run = run_bounded(&mut cmd, CLIENT_LIMIT, "scrapy spider");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "the spider failed ({}): {stderr}", run.status);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let lines: Vec<serde_json::Value> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(
        lines.len(),
        urls.len(),
        "one response per URL; spider stderr:\n{stderr}\nresponses: {text}"
    );
    lines
}

/// Scrapy, stock settings, `https_proxy` only: the spider over HTTPS
/// through crawlcache (the root cause of issue 30: crawlcache's leaves
/// carried an explicit `cA FALSE` that Python's cryptography refuses),
/// online twice (the second run all hits, the origin sees each page once),
/// then with the proxy `--offline` and the origin stopped.
#[test]
fn scrapy_over_https_online_twice_then_offline() {
    let s = setup("matrix-scrapy");
    let urls: Vec<String> = ["/page/s1", "/page/s2", "/page/s3"].iter().map(|p| s.url(p)).collect();
    let proxy = s.proxy.url();
    for (run, expect) in [("first", "stored"), ("second", "hit")] {
        for line in scrapy_crawl(&proxy, &urls, false) {
            let url = line["url"].as_str().unwrap_or("");
            let path = url.trim_start_matches(&s.url(""));
            assert_eq!(line["status"], 200, "{run} run: {line}");
            assert_eq!(
                line["body"].as_str(),
                Some(format!("page {path}").as_str()),
                "{run} run: {line}"
            );
            assert!(
                line["cache_status"].as_str().unwrap_or("").contains(expect),
                "{run} run: {expect}: {line}"
            );
        }
    }
    for p in ["/page/s1", "/page/s2", "/page/s3"] {
        assert_eq!(s.origin.count("https", p), 1, "{p}: {:?}", s.origin.all_counts());
    }
    let Setup { origin, proxy, dir, .. } = s;
    drop(origin);
    let proxy = proxy.restart(&["--offline"]);
    for line in scrapy_crawl(&proxy.url(), &urls, false) {
        assert_eq!(line["status"], 200, "offline: {line}");
        assert!(
            line["cache_status"].as_str().unwrap_or("").contains("hit"),
            "offline: served from the store: {line}"
        );
    }
    drop(dir);
}

/// Restores the system trust store when dropped (`ca uninstall`), so a
/// failing test does not leave a test CA trusted.
struct Installed(PathBuf);

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = crawlcache_cmd(&["ca", "uninstall", "--data-dir", &path_str(&self.0)], CMD_LIMIT);
    }
}

/// `crawlcache ca install` puts the CA in the operating system's trust
/// store (Debian: update-ca-certificates), and Scrapy with
/// `DOWNLOAD_VERIFY_CERTIFICATES = True`, which verifies against that
/// store, crawls through the proxy; `--uninstall` takes it out again, and
/// the same verifying spider then fails. Needs root and
/// update-ca-certificates (as CI has); reports itself skipped otherwise.
#[test]
fn scrapy_verifying_certificates_after_ca_install_then_uninstall() {
    let root = unsafe { libc::geteuid() } == 0;
    let tool = ["/usr/sbin/update-ca-certificates", "/usr/bin/update-ca-certificates"]
        .iter()
        .any(|p| Path::new(p).is_file());
    if !root || !tool || !Path::new("/usr/local/share/ca-certificates").is_dir() {
        eprintln!(
            "skipped: needs root and Debian's update-ca-certificates (root: {root}, tool: {tool})"
        );
        return;
    }
    let s = setup("matrix-scrapy-verify");
    let data = s.proxy.data_dir().to_path_buf();
    let out = crawlcache_cmd(
        &["ca", "install", "--data-dir", &path_str(&data)],
        Duration::from_secs(120),
    );
    let guard = Installed(data.clone());
    assert!(out.status.success(), "ca install failed: {}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("update-ca-certificates") && stderr.contains("uninstall"),
        "it says what it did and how to undo it: {stderr}"
    );
    assert!(
        stderr.contains(&format!("ca uninstall --data-dir {}", path_str(&data))),
        "the undo hint names the same data directory: {stderr}"
    );
    let installed: Vec<PathBuf> = std::fs::read_dir("/usr/local/share/ca-certificates")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("crawlcache-"))
                && std::fs::read(p).ok() == std::fs::read(&s.ca).ok()
        })
        .collect();
    assert_eq!(installed.len(), 1, "the CA is in the trust store's folder: {installed:?}");
    let bundle = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    let pem = std::fs::read_to_string(&s.ca).unwrap();
    assert!(bundle.contains(pem.trim()), "the rebuilt system bundle holds the CA");

    let url = vec![s.url("/page/verified")];
    let lines = scrapy_crawl(&s.proxy.url(), &url, true);
    assert_eq!(lines[0]["status"], 200, "{:?}", lines);

    let out = crawlcache_cmd(
        &["ca", "uninstall", "--data-dir", &path_str(&data)],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "ca uninstall failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!installed[0].exists(), "{} removed", installed[0].display());
    let bundle = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    assert!(!bundle.contains(pem.trim()), "the rebuilt system bundle no longer holds the CA");
    drop(guard);

    // Verifying against the store without the CA: the fetch fails.
    require_python_module("scrapy", "scrapy");
    let dir = TestDir::new("scrapy-after");
    let out_file = dir.join("out.jsonl");
    let mut cmd = client(&python());
    cmd.arg("-c")
        .arg(SPIDER)
        .arg(s.url("/page/unverified"))
        .env("https_proxy", s.proxy.url())
        .env("OUT", &out_file)
        .env("VERIFY", "1");
    let _ = run_bounded(&mut cmd, CLIENT_LIMIT, "scrapy spider after --uninstall");
    assert!(
        std::fs::read_to_string(&out_file).unwrap_or_default().trim().is_empty(),
        "no response once the CA is no longer trusted"
    );
}

// ---------------------------------------------------------------------------
// Headless Chromium
// ---------------------------------------------------------------------------

fn chromium() -> PathBuf {
    find_tool(
        "chromium",
        "CRAWLCACHE_TEST_CHROMIUM",
        &["/usr/bin/chromium"],
        "Install it with apt-get install chromium (bash tests/run.sh does).",
    )
}

/// An NSS database in `home/.pki/nssdb` (where Chromium on Linux reads
/// its trust settings) trusting `ca` for TLS servers.
fn nss_home(home: &Path, ca: &Path) {
    let certutil = find_tool(
        "certutil",
        "CRAWLCACHE_TEST_CERTUTIL",
        &["/usr/bin/certutil"],
        "Install it with apt-get install libnss3-tools (bash tests/run.sh does).",
    );
    let db = home.join(".pki/nssdb");
    std::fs::create_dir_all(&db).unwrap();
    let db_arg = format!("sql:{}", path_str(&db));
    let out = run_bounded(
        Command::new(&certutil).args(["-N", "-d", &db_arg, "--empty-password"]),
        CMD_LIMIT,
        "certutil -N",
    );
    assert!(out.status.success(), "certutil -N: {}", String::from_utf8_lossy(&out.stderr));
    let out = run_bounded(
        Command::new(&certutil).args([
            "-A",
            "-d",
            &db_arg,
            "-t",
            "C,,",
            "-n",
            "crawlcache-test",
            "-i",
            &path_str(ca),
        ]),
        CMD_LIMIT,
        "certutil -A",
    );
    assert!(out.status.success(), "certutil -A: {}", String::from_utf8_lossy(&out.stderr));
}

/// Headless Chromium with the flags this machine needs (no sandbox as
/// root, no GPU, no QUIC, no background traffic), a fresh profile, the
/// trust of `home`'s NSS database, and `proxy` when given (loopback
/// targets included: Chromium bypasses the proxy for them by default);
/// takes a screenshot of `url` into `png`.
fn chromium_screenshot(home: &Path, proxy: Option<&str>, url: &str, png: &Path) {
    let profile = TestDir::new("chromium-profile");
    let mut cmd = client(&chromium());
    cmd.env("HOME", home).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--hide-scrollbars",
        "--window-size=480,320",
        "--virtual-time-budget=5000",
    ]);
    cmd.arg(format!("--user-data-dir={}", path_str(profile.path())));
    if let Some(p) = proxy {
        cmd.arg(format!("--proxy-server={p}")).arg("--proxy-bypass-list=<-loopback>");
    }
    cmd.arg(format!("--screenshot={}", path_str(png))).arg(url);
    let out = run_bounded(&mut cmd, CLIENT_LIMIT, "chromium --screenshot");
    assert!(
        png.is_file(),
        "chromium wrote no screenshot ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Chromium loads the page with its stylesheet and images through the
/// proxy twice, trusting crawlcache's CA from an NSS database (certutil):
/// the first load fetches each resource from the origin once, the second
/// load is all hits (the origin sees nothing new), and both screenshots
/// equal one of a direct load (trusting the origin's CA).
#[test]
fn chromium_loads_a_page_with_images_and_css_twice_second_all_hits() {
    let s = setup("matrix-chromium");
    let url = s.url("/index.html");
    let resources = ["/index.html", "/style.css", "/red.png", "/blue.png"];
    let direct_home = s.dir.subdir("home-direct");
    nss_home(&direct_home, &s.origin_ca);
    let direct = s.dir.join("direct.png");
    chromium_screenshot(&direct_home, None, &url, &direct);
    for r in resources {
        assert_eq!(
            s.origin.count("https", r),
            1,
            "the direct load fetched {r}: {:?}",
            s.origin.all_counts()
        );
    }
    let proxied_home = s.dir.subdir("home-proxied");
    nss_home(&proxied_home, &s.ca);
    let shots: Vec<PathBuf> = (1..=2).map(|i| s.dir.join(format!("proxied-{i}.png"))).collect();
    chromium_screenshot(&proxied_home, Some(&s.proxy.url()), &url, &shots[0]);
    for r in resources {
        assert_eq!(
            s.origin.count("https", r),
            2,
            "the first proxied load fetched {r} once: {:?}",
            s.origin.all_counts()
        );
    }
    let stats = |p: &Proxy| -> serde_json::Value {
        serde_json::from_slice(&p.admin("/stats").body).expect("stats JSON")
    };
    let before = stats(&s.proxy);
    chromium_screenshot(&proxied_home, Some(&s.proxy.url()), &url, &shots[1]);
    for r in resources {
        assert_eq!(
            s.origin.count("https", r),
            2,
            "the second proxied load is all hits ({r}): {:?}",
            s.origin.all_counts()
        );
    }
    let after = stats(&s.proxy);
    let hits = |v: &serde_json::Value| v["proxy"]["hits"].as_u64().unwrap_or(0);
    assert!(
        hits(&after) >= hits(&before) + resources.len() as u64,
        "the second load's {} resources were hits through the proxy: {before} -> {after}",
        resources.len()
    );
    let direct_bytes = std::fs::read(&direct).unwrap();
    for shot in &shots {
        assert!(
            std::fs::read(shot).unwrap() == direct_bytes,
            "{} differs from the direct load {}",
            shot.display(),
            direct.display()
        );
    }
}
