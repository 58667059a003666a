//! HTTPS interception end to end (issue 6, "It must show"): real clients
//! (curl, Python requests) talk to the real crawlcache binary through
//! CONNECT, and crawlcache talks to a TLS origin on 127.0.0.1 whose
//! certificate comes from a test CA (rcgen) that crawlcache trusts only
//! through `upstream.extra_ca_file`.
//!
//! The origin here serves TLS and plain HTTP on the same port (it peeks at
//! the first byte of each connection), so `https://localhost:P` and
//! `http://localhost:P` differ by scheme alone: the robots.txt test shows
//! that the scheme is part of a snapshot's key.

mod common;

use common::tls::{test_pki, TestPki};
use common::tls_origin::{page, TlsOrigin};
use common::*;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CLIENT_LIMIT: Duration = Duration::from_secs(60);
const CMD_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Proxy set-up and clients
// ---------------------------------------------------------------------------

/// A crawlcache configuration: robots `mode`, the test CA as the extra
/// upstream CA file when given, then `extra` (more tables).
fn config(robots_mode: &str, extra_ca: Option<&Path>, extra: &str) -> String {
    let ca = extra_ca
        .map(|p| format!("extra_ca_file = {:?}\n", p.display().to_string()))
        .unwrap_or_default();
    format!("[robots]\nmode = \"{robots_mode}\"\n\n[upstream]\nresponse_timeout = \"10s\"\n{ca}\n{extra}\n")
}

/// Writes the test CA certificate to `dir/origin-ca.pem`.
fn write_test_ca(dir: &TestDir, pki: &TestPki) -> PathBuf {
    let path = dir.join("origin-ca.pem");
    std::fs::write(&path, &pki.ca_pem)
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

fn path_str(p: &Path) -> String {
    p.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", p.display())).to_string()
}

/// `crawlcache ca path --data-dir DATA` (the CA certificate's path).
fn crawlcache_ca_path(data_dir: &Path) -> PathBuf {
    let out = crawlcache_cmd(&["ca", "path", "--data-dir", &path_str(data_dir)], CMD_LIMIT);
    assert!(
        out.status.success(),
        "crawlcache ca failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(p.is_file(), "crawlcache ca printed {}, which is not a file", p.display());
    p
}

/// `crawlcache ca path --pem --data-dir DATA`.
fn crawlcache_ca_pem(data_dir: &Path) -> String {
    let out =
        crawlcache_cmd(&["ca", "path", "--pem", "--data-dir", &path_str(data_dir)], CMD_LIMIT);
    assert!(
        out.status.success(),
        "crawlcache ca path --pem failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let pem = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "crawlcache ca path --pem printed: {pem}"
    );
    pem
}

/// What one curl run got.
struct CurlOut {
    /// curl's exit code (0 = a response arrived; 60 = certificate not trusted).
    exit: Option<i32>,
    status: u16,
    headers: Fields,
    body: String,
    stderr: String,
}

impl CurlOut {
    fn header(&self, name: &str) -> Option<&str> {
        field(&self.headers, name)
    }

    fn cache_status(&self) -> String {
        self.header("cache-status").unwrap_or("").to_string()
    }

    fn describe(&self) -> String {
        format!(
            "curl exit {:?}, status {}, headers {:?}\nbody: {}\nstderr: {}",
            self.exit, self.status, self.headers, self.body, self.stderr
        )
    }
}

fn curl_bin() -> PathBuf {
    find_tool(
        "curl",
        "CRAWLCACHE_TEST_CURL",
        &["/usr/bin/curl", "/usr/local/bin/curl"],
        "Install curl (apt-get install curl).",
    )
}

/// `curl -sS --proxy http://PROXY --cacert CACERT URL`, headers (the
/// CONNECT answer left out) and body captured. No .curlrc, no proxy
/// settings from the environment.
fn curl(proxy: SocketAddr, cacert: &Path, url: &str) -> CurlOut {
    let dir = TestDir::new("curl");
    let (hfile, bfile) = (dir.join("headers"), dir.join("body"));
    let mut cmd = Command::new(curl_bin());
    cmd.arg("-q")
        .args(["-sS", "--suppress-connect-headers", "--max-time", "30", "--noproxy", ""])
        .arg("--proxy")
        .arg(format!("http://{proxy}"))
        .arg("--cacert")
        .arg(cacert)
        .arg("-D")
        .arg(&hfile)
        .arg("-o")
        .arg(&bfile)
        .arg(url);
    for var in [
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
    ] {
        cmd.env_remove(var);
    }
    let out = run_bounded(&mut cmd, CLIENT_LIMIT, &format!("curl {url} through {proxy}"));
    let head =
        std::fs::read(&hfile).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    // The last header block is the final response (skips any 1xx).
    let block =
        head.split("\r\n\r\n").filter(|b| !b.trim().is_empty()).last().unwrap_or("").to_string();
    let mut lines = block.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Fields = lines
        .filter_map(|l| {
            l.split_once(':').map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    CurlOut {
        exit: out.status.code(),
        status,
        headers,
        body: std::fs::read(&bfile)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `curl` that must get a response (exit 0).
fn curl_ok(proxy: SocketAddr, cacert: &Path, url: &str) -> CurlOut {
    let r = curl(proxy, cacert, url);
    assert_eq!(
        r.exit,
        Some(0),
        "curl {url} through {proxy} with --cacert {} failed: {}",
        cacert.display(),
        r.describe()
    );
    r
}

const PY_GET: &str = r#"
import json, sys
import requests
r = requests.get(sys.argv[1], proxies={"http": sys.argv[2], "https": sys.argv[2]}, timeout=30)
print(json.dumps({"status": r.status_code, "cache_status": r.headers.get("Cache-Status"), "body": r.text}))
"#;

/// Python requests' `get(URL, proxies=...)` with `REQUESTS_CA_BUNDLE=CA`:
/// (status, Cache-Status, body).
fn python_get(proxy: SocketAddr, ca: &Path, url: &str) -> (u64, String, String) {
    let python = find_tool(
        "python3",
        "CRAWLCACHE_TEST_PYTHON",
        &["/usr/bin/python3", "/usr/local/bin/python3"],
        "Install python3.",
    );
    let probe = run_bounded(
        Command::new(&python).args(["-c", "import requests"]),
        CMD_LIMIT,
        "python3 -c 'import requests'",
    );
    assert!(
        probe.status.success(),
        "the Python module `requests` is missing ({}). `bash tests/run.sh` installs it (python3 -m pip install requests).",
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    let mut cmd = Command::new(&python);
    cmd.args(["-c", PY_GET, url, &format!("http://{proxy}")]).env("REQUESTS_CA_BUNDLE", ca);
    for var in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
        "CURL_CA_BUNDLE",
    ] {
        cmd.env_remove(var);
    }
    let out = run_bounded(&mut cmd, CLIENT_LIMIT, &format!("python3 requests.get({url})"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python3 requests.get({url}) failed ({}):\n{}\n{}",
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("python output is not JSON ({e}): {stdout}"));
    (
        v["status"].as_u64().unwrap_or(0),
        v["cache_status"].as_str().unwrap_or("").to_string(),
        v["body"].as_str().unwrap_or("").to_string(),
    )
}

fn is_hit(cache_status: &str) -> bool {
    cache_status.split(';').any(|p| p.trim() == "hit")
}

fn is_stored_miss(cache_status: &str) -> bool {
    cache_status.contains("fwd=uri-miss") && cache_status.contains("stored")
}

#[cfg(unix)]
fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("stat {}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

// ---------------------------------------------------------------------------
// 1. curl and Python requests: the second fetch is a hit
// ---------------------------------------------------------------------------

/// Item 1 (curl): an HTTPS page fetched twice through the proxy with curl
/// trusting crawlcache's CA; the second answer is a cache hit and the
/// origin saw one request.
#[test]
fn curl_https_second_fetch_is_a_cache_hit() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| page(&format!("secure page {path}")));
    let dir = TestDir::new("https-curl");
    let extra_ca = write_test_ca(&dir, &pki);
    let proxy =
        Proxy::start_with_config(&dir.subdir("data"), &config("off", Some(&extra_ca), ""), &[]);
    let ca = crawlcache_ca_path(proxy.data_dir());
    assert_eq!(
        ca,
        std::fs::canonicalize(proxy.data_dir().join("ca/ca.pem")).unwrap(),
        "crawlcache ca prints <data_dir>/ca/ca.pem"
    );

    let url = format!("https://localhost:{}/page", origin.port());
    let first = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(
        (first.status, first.body.as_str()),
        (200, "secure page /page"),
        "{}",
        first.describe()
    );
    assert!(
        is_stored_miss(&first.cache_status()),
        "first fetch is a stored miss: {}",
        first.describe()
    );
    assert!(
        first.header("via").is_some(),
        "the intercepted response carries Via: {}",
        first.describe()
    );

    let second = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(
        (second.status, second.body.as_str()),
        (200, "secure page /page"),
        "{}",
        second.describe()
    );
    assert!(is_hit(&second.cache_status()), "second fetch is a hit: {}", second.describe());
    assert_eq!(
        origin.count("https", "/page"),
        1,
        "the origin saw one request: {:?}",
        origin.all_counts()
    );

    // Stored under the https:// key.
    let show = crawlcache_cmd(
        &["cache", "show", "--data-dir", &path_str(proxy.data_dir()), &url],
        CMD_LIMIT,
    );
    assert!(
        show.status.success(),
        "cache show {url} lists a variant: {}",
        String::from_utf8_lossy(&show.stdout)
    );
}

/// Item 1 (Python requests): the same with `REQUESTS_CA_BUNDLE` and
/// `proxies={"https": ...}`.
#[test]
fn python_requests_https_second_fetch_is_a_cache_hit() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| page(&format!("py page {path}")));
    let dir = TestDir::new("https-python");
    let extra_ca = write_test_ca(&dir, &pki);
    let proxy =
        Proxy::start_with_config(&dir.subdir("data"), &config("off", Some(&extra_ca), ""), &[]);
    let ca = crawlcache_ca_path(proxy.data_dir());

    let url = format!("https://localhost:{}/py", origin.port());
    let (status, cs, body) = python_get(proxy.addr(), &ca, &url);
    assert_eq!((status, body.as_str()), (200, "py page /py"), "first fetch, Cache-Status {cs}");
    assert!(is_stored_miss(&cs), "first fetch is a stored miss: {cs}");
    let (status, cs, body) = python_get(proxy.addr(), &ca, &url);
    assert_eq!((status, body.as_str()), (200, "py page /py"), "second fetch, Cache-Status {cs}");
    assert!(is_hit(&cs), "second fetch is a hit: {cs}");
    assert_eq!(
        origin.count("https", "/py"),
        1,
        "the origin saw one request: {:?}",
        origin.all_counts()
    );
}

// ---------------------------------------------------------------------------
// 2. Untrusted origin, IP-addressed origin, bypassed host
// ---------------------------------------------------------------------------

/// Item 2: without the test CA in `upstream.extra_ca_file` the origin's
/// certificate cannot be verified: the client gets a 502 whose body says so,
/// and nothing is stored.
#[test]
fn untrusted_origin_certificate_gives_502_naming_the_reason() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, _| page("must not be served"));
    let dir = TestDir::new("https-untrusted");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config("off", None, ""), &[]);
    let ca = crawlcache_ca_path(proxy.data_dir());

    let url = format!("https://localhost:{}/secret", origin.port());
    let r = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(r.status, 502, "{}", r.describe());
    assert!(
        r.body.contains("not trusted"),
        "the body says the certificate is not trusted: {}",
        r.describe()
    );
    assert!(r.body.contains("localhost"), "the body names the origin: {}", r.describe());
    assert_eq!(
        origin.count("https", "/secret"),
        0,
        "no request got through: {:?}",
        origin.all_counts()
    );
    let stats: serde_json::Value =
        serde_json::from_slice(&proxy.admin("/stats").body).expect("stats JSON");
    assert_eq!(stats["store"]["entries"], 0, "nothing stored: {stats}");
}

/// Item 2: an origin addressed by IP address: crawlcache mints a leaf with
/// an IP SAN that curl accepts, verifies the origin's IP SAN upstream, and
/// caches under `https://127.0.0.1:PORT/...`.
#[test]
fn origin_addressed_by_ip_is_intercepted_and_cached() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| page(&format!("ip page {path}")));
    let dir = TestDir::new("https-ip");
    let extra_ca = write_test_ca(&dir, &pki);
    let proxy =
        Proxy::start_with_config(&dir.subdir("data"), &config("off", Some(&extra_ca), ""), &[]);
    let ca = crawlcache_ca_path(proxy.data_dir());

    let url = format!("https://127.0.0.1:{}/by-ip", origin.port());
    let first = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(
        (first.status, first.body.as_str()),
        (200, "ip page /by-ip"),
        "{}",
        first.describe()
    );
    assert!(is_stored_miss(&first.cache_status()), "{}", first.describe());
    let second = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(
        (second.status, second.body.as_str()),
        (200, "ip page /by-ip"),
        "{}",
        second.describe()
    );
    assert!(is_hit(&second.cache_status()), "{}", second.describe());
    assert_eq!(origin.count("https", "/by-ip"), 1, "{:?}", origin.all_counts());
}

/// Item 2: a host in `tls.bypass_hosts` is tunnelled untouched: the client
/// sees the origin's own certificate (it verifies with the test CA, not
/// with crawlcache's), every request reaches the origin, nothing is stored.
#[test]
fn bypass_hosts_are_tunnelled_untouched_and_not_stored() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| page(&format!("tunnelled {path}")));
    let dir = TestDir::new("https-bypass");
    let extra_ca = write_test_ca(&dir, &pki);
    let cfg = config("off", Some(&extra_ca), "[tls]\nbypass_hosts = [\"localhost\"]\n");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &cfg, &[]);
    let crawlcache_ca = crawlcache_ca_path(proxy.data_dir());

    let url = format!("https://localhost:{}/tunnel", origin.port());
    for i in 1..=2 {
        let r = curl_ok(proxy.addr(), &extra_ca, &url);
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "tunnelled /tunnel"),
            "fetch {i}: {}",
            r.describe()
        );
        assert_eq!(
            r.header("cache-status"),
            None,
            "fetch {i}: the proxy never saw the response inside the tunnel: {}",
            r.describe()
        );
        assert_eq!(r.header("via"), None, "fetch {i}: {}", r.describe());
    }
    assert_eq!(
        origin.count("https", "/tunnel"),
        2,
        "both fetches reached the origin: {:?}",
        origin.all_counts()
    );

    // Trusting only crawlcache's CA fails: the certificate is the origin's.
    let r = curl(proxy.addr(), &crawlcache_ca, &url);
    assert_eq!(
        r.exit,
        Some(60),
        "curl trusting only crawlcache's CA must reject the origin's certificate: {}",
        r.describe()
    );

    let show = crawlcache_cmd(
        &["cache", "show", "--json", "--data-dir", &path_str(proxy.data_dir()), &url],
        CMD_LIMIT,
    );
    let out = String::from_utf8_lossy(&show.stdout);
    assert_eq!(show.status.code(), Some(1), "cache show exits 1 when nothing is stored: {out}");
    assert!(out.contains("\"variants\": []"), "no variants for {url}: {out}");
    let stats: serde_json::Value =
        serde_json::from_slice(&proxy.admin("/stats").body).expect("stats JSON");
    assert_eq!(stats["store"]["entries"], 0, "nothing stored: {stats}");
}

// ---------------------------------------------------------------------------
// 3. robots.txt snapshots are per scheme
// ---------------------------------------------------------------------------

/// Item 3: `https://localhost:P` and `http://localhost:P` (same host, same
/// port) are different origins with separate robots.txt snapshots: the
/// HTTPS one disallows `/a`, the HTTP one `/b`, and enforcement follows
/// each; `crawlcache robots show` shows each body.
#[test]
fn robots_snapshots_are_separate_for_https_and_http() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |scheme, path| match (scheme, path) {
        ("https", "/robots.txt") => page("User-agent: *\nDisallow: /a\n"),
        ("http", "/robots.txt") => page("User-agent: *\nDisallow: /b\n"),
        _ => page(&format!("{scheme} {path}")),
    });
    let dir = TestDir::new("https-robots");
    let extra_ca = write_test_ca(&dir, &pki);
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, &config("enforce", Some(&extra_ca), ""), &[]);
    let ca = crawlcache_ca_path(&data);
    let port = origin.port();
    let https = format!("https://localhost:{port}");
    let http = format!("http://localhost:{port}");

    let r = curl_ok(proxy.addr(), &ca, &format!("{https}/a"));
    assert_eq!(r.status, 403, "https /a is disallowed by the HTTPS robots.txt: {}", r.describe());
    assert!(r.body.contains("Disallow: /a"), "{}", r.describe());
    assert!(
        r.body.contains(&format!("{https}/robots.txt")),
        "the 403 names the https robots.txt: {}",
        r.describe()
    );
    let r = curl_ok(proxy.addr(), &ca, &format!("{https}/b"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "https /b"),
        "https /b is allowed: {}",
        r.describe()
    );

    let r = proxy.get(&format!("{http}/b"), &[]);
    assert_eq!(r.status, 403, "http /b is disallowed by the HTTP robots.txt: {}", r.describe());
    assert!(r.text().contains("Disallow: /b"), "{}", r.describe());
    assert!(r.text().contains(&format!("{http}/robots.txt")), "{}", r.describe());
    let r = proxy.get(&format!("{http}/a"), &[]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "http /a"),
        "http /a is allowed: {}",
        r.describe()
    );

    assert_eq!(origin.count("https", "/a"), 0, "{:?}", origin.all_counts());
    assert_eq!(origin.count("http", "/b"), 0, "{:?}", origin.all_counts());
    assert_eq!(origin.count("https", "/robots.txt"), 1, "{:?}", origin.all_counts());
    assert_eq!(origin.count("http", "/robots.txt"), 1, "{:?}", origin.all_counts());

    // A client's own robots.txt request is answered from its scheme's snapshot.
    let r = curl_ok(proxy.addr(), &ca, &format!("{https}/robots.txt"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "User-agent: *\nDisallow: /a\n"),
        "{}",
        r.describe()
    );

    // Both while the proxy runs (admin endpoint) and once it stopped (store).
    let show = |origin_url: &str| {
        let out = crawlcache_cmd(
            &["robots", "show", "--data-dir", &path_str(&data), origin_url],
            CMD_LIMIT,
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "robots show {origin_url} failed ({}): {text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let check = |running: bool| {
        let s = show(&https);
        assert!(
            s.contains("status:        fetched")
                && s.contains("Disallow: /a")
                && !s.contains("Disallow: /b"),
            "running={running}, {https}: {s}"
        );
        assert!(s.contains(&format!("{https}/robots.txt")), "running={running}: {s}");
        let s = show(&http);
        assert!(
            s.contains("status:        fetched")
                && s.contains("Disallow: /b")
                && !s.contains("Disallow: /a"),
            "running={running}, {http}: {s}"
        );
        assert!(s.contains(&format!("{http}/robots.txt")), "running={running}: {s}");
    };
    check(true);
    proxy.stop_cleanly();
    check(false);
}

// ---------------------------------------------------------------------------
// 4. The CA key is private and the CA survives restarts
// ---------------------------------------------------------------------------

/// Item 4: `ca.key` is mode 0600 (its folder 0700); after a restart on the
/// same data dir `crawlcache ca path --pem` prints the same certificate and an
/// HTTPS fetch through the new process verifies with a copy of the original
/// CA file.
#[test]
#[cfg(unix)]
fn ca_key_is_private_and_the_ca_survives_restarts() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| page(&format!("persistent {path}")));
    let dir = TestDir::new("https-ca-restart");
    let extra_ca = write_test_ca(&dir, &pki);
    let data = dir.subdir("data");
    let cfg = config("off", Some(&extra_ca), "");
    let proxy = Proxy::start_with_config(&data, &cfg, &[]);

    let key = data.join("ca/ca.key");
    assert_eq!(mode_of(&key), 0o600, "{} is readable by its owner only", key.display());
    assert_eq!(mode_of(&data.join("ca")) & 0o077, 0, "the ca folder is private");
    let key_bytes = std::fs::read(&key).unwrap();
    let pem_before = crawlcache_ca_pem(&data);
    assert_eq!(pem_before, std::fs::read_to_string(data.join("ca/ca.pem")).unwrap());
    // The client keeps its own copy of the CA, as a real crawler would.
    let original_ca = dir.join("trusted-crawlcache-ca.pem");
    std::fs::copy(crawlcache_ca_path(&data), &original_ca).unwrap();

    let url1 = format!("https://localhost:{}/one", origin.port());
    let r = curl_ok(proxy.addr(), &original_ca, &url1);
    assert_eq!((r.status, r.body.as_str()), (200, "persistent /one"), "{}", r.describe());

    proxy.stop_cleanly();
    assert_eq!(mode_of(&key), 0o600, "still 0600 after a stop");
    let proxy = Proxy::start_with_config(&data, &cfg, &[]);

    let pem_after = crawlcache_ca_pem(&data);
    assert_eq!(pem_before, pem_after, "the CA certificate is the same after a restart");
    assert_eq!(std::fs::read(&key).unwrap(), key_bytes, "the CA key is the same after a restart");
    assert_eq!(mode_of(&key), 0o600, "still 0600 after a restart");

    // A new leaf (minted by the new process) verifies with the original CA...
    let url2 = format!("https://localhost:{}/two", origin.port());
    let r = curl_ok(proxy.addr(), &original_ca, &url2);
    assert_eq!((r.status, r.body.as_str()), (200, "persistent /two"), "{}", r.describe());
    assert!(is_stored_miss(&r.cache_status()), "{}", r.describe());
    // ...and what the first process stored is served from disk.
    let r = curl_ok(proxy.addr(), &original_ca, &url1);
    assert_eq!((r.status, r.body.as_str()), (200, "persistent /one"), "{}", r.describe());
    assert!(is_hit(&r.cache_status()), "{}", r.describe());
    assert_eq!(origin.count("https", "/one"), 1, "{:?}", origin.all_counts());
    assert_eq!(origin.count("https", "/two"), 1, "{:?}", origin.all_counts());
}

// ---------------------------------------------------------------------------
// 5. Self-signed origin certificates listed in upstream.extra_ca_file
// ---------------------------------------------------------------------------

/// Issue 30: an origin whose certificate is its own CA (what `openssl req
/// -x509` makes), listed in `upstream.extra_ca_file`, is accepted as the
/// origin's certificate (curl and browsers do so): the page is fetched and
/// cached. Another self-signed certificate, not listed, still gets the 502.
#[test]
fn a_self_signed_origin_listed_in_the_extra_ca_file_is_accepted() {
    let listed = common::tls::self_signed_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&listed, |_, path| page(&format!("self-signed {path}")));
    let unlisted = common::tls::self_signed_pki(&["localhost", "127.0.0.1"]);
    let other = TlsOrigin::start(&unlisted, |_, _| page("must not be served"));
    let dir = TestDir::new("https-self-signed");
    let extra_ca = write_test_ca(&dir, &listed);
    let proxy =
        Proxy::start_with_config(&dir.subdir("data"), &config("off", Some(&extra_ca), ""), &[]);
    let ca = crawlcache_ca_path(proxy.data_dir());

    let url = format!("https://localhost:{}/ss", origin.port());
    let first = curl_ok(proxy.addr(), &ca, &url);
    assert_eq!(
        (first.status, first.body.as_str()),
        (200, "self-signed /ss"),
        "{}",
        first.describe()
    );
    assert!(is_stored_miss(&first.cache_status()), "{}", first.describe());
    let second = curl_ok(proxy.addr(), &ca, &url);
    assert!(is_hit(&second.cache_status()), "{}", second.describe());
    assert_eq!(origin.count("https", "/ss"), 1, "{:?}", origin.all_counts());

    let r = curl_ok(proxy.addr(), &ca, &format!("https://localhost:{}/ss", other.port()));
    assert_eq!(
        r.status,
        502,
        "an unlisted self-signed certificate is still refused: {}",
        r.describe()
    );
    assert_eq!(other.count("https", "/ss"), 0, "{:?}", other.all_counts());
}
