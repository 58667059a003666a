//! robots.txt failures do not outlive their cause (issue 41): an HTTPS
//! origin whose certificate crawlcache could not verify gets "rules
//! unavailable" naming the certificate problem and `upstream.extra_ca_file`;
//! once the proxy is restarted with the origin's CA in that file, the very
//! first request retries the robots.txt (whatever the back-off said) and is
//! judged by the rules. Other causes name themselves (connection, status).
//! The fleet side (a failure shared through Redis from before a node
//! started) is in `tests/fleet/robots.rs`.

mod common;

use common::tls::test_pki;
use common::tls_origin::{page, TlsOrigin};
use common::*;
use std::path::Path;

const RULES: &str = "User-agent: *\nDisallow: /private/\n";
const UA: [(&str, &str); 1] = [("User-Agent", "ExampleBot/1.0")];

fn config(extra_ca: Option<&Path>) -> String {
    let ca = extra_ca
        .map(|p| format!("extra_ca_file = {:?}\n", p.display().to_string()))
        .unwrap_or_default();
    format!("[robots]\nmode = \"enforce\"\n[upstream]\nresponse_timeout = \"5s\"\n{ca}")
}

/// `GET url` (absolute-form `https://...`: the proxy fetches it over TLS
/// itself) through `proxy`, on a fresh connection.
fn get(proxy: &Proxy, url: &str) -> Response {
    send_request(proxy.addr(), "GET", url, &UA, b"")
}

fn audit_lines(data_dir: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(data_dir.join("audit")) else { return out };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    for f in files {
        for line in
            std::fs::read_to_string(&f).unwrap_or_default().lines().filter(|l| !l.trim().is_empty())
        {
            out.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {line}")),
            );
        }
    }
    out
}

/// A TLS origin whose certificate comes from a test CA: the first proxy
/// (CA not trusted) refuses its pages with 403 naming the certificate and
/// `upstream.extra_ca_file` (body, `Robots-Status`, audit line); restarted
/// with the CA in `upstream.extra_ca_file`, its first request, within the
/// one-minute back-off of the failure, is judged by the origin's rules:
/// `/page` served, `/private/x` refused by `Disallow: /private/`.
#[test]
fn a_certificate_failure_is_retried_at_the_first_request_after_a_restart_with_extra_ca_file() {
    let pki = test_pki(&["localhost", "127.0.0.1"]);
    let origin = TlsOrigin::start(&pki, |_, path| match path {
        "/robots.txt" => {
            (200, vec![("Content-Type", "text/plain".to_string())], RULES.as_bytes().to_vec())
        }
        _ => page("page"),
    });
    let https = format!("https://localhost:{}", origin.port());
    let dir = TestDir::new("robots-restart-tls");
    let data = dir.subdir("data");
    let ca = dir.join("origin-ca.pem");
    std::fs::write(&ca, &pki.ca_pem).expect("writing the test CA");

    let proxy = Proxy::start_with_config(&data, &config(None), &[]);
    let r = get(&proxy, &format!("{https}/page"));
    assert_eq!(r.status, 403, "{}", r.describe());
    let text = r.text();
    assert!(
        text.contains("could not be fetched (certificate: ")
            && text.contains("`upstream.extra_ca_file`"),
        "{text}"
    );
    let rs = r.header("robots-status").unwrap_or("").to_string();
    assert!(
        rs.starts_with("disallowed; rule=\"rules unavailable\"")
            && rs.contains("reason=\"certificate: ")
            && rs.contains("`upstream.extra_ca_file`"),
        "{rs}"
    );
    assert_eq!(
        origin.count("https", "/robots.txt"),
        0,
        "the handshake failed: no request reached the origin"
    );
    proxy.stop_cleanly();
    let lines = audit_lines(&data);
    assert!(
        lines[0]["robots_warning"].as_str().unwrap_or("").starts_with("certificate: "),
        "{}",
        lines[0]
    );

    let proxy = Proxy::start_with_config(&data, &config(Some(&ca)), &[]);
    let r = get(&proxy, &format!("{https}/page"));
    assert_eq!(
        (r.status, r.text()),
        (200, "page".to_string()),
        "the first request after the restart: {}",
        r.describe()
    );
    let rs = r.header("robots-status").unwrap_or("").to_string();
    assert!(
        rs.starts_with("allowed; sha256=") && rs.ends_with("disposition=fetched"),
        "it waited for the retry: {rs}"
    );
    let r = get(&proxy, &format!("{https}/private/x"));
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(r.text().contains("rule `Disallow: /private/` (line 2)"), "{}", r.text());
    assert_eq!(origin.count("https", "/robots.txt"), 1);
    assert_eq!(origin.count("https", "/private/x"), 0);
}

/// The refusal names the cause of an unavailable robots.txt: a refused
/// connection ("connection: ... the origin is unreachable"), a 5xx or 429
/// (the status the origin answered).
#[test]
fn an_unavailable_robots_txt_names_its_cause() {
    let dir = TestDir::new("robots-restart-causes");
    let proxy = Proxy::start_with_config(&dir.subdir("data"), &config(None), &[]);
    let r = proxy.get(&format!("http://127.0.0.1:{}/page", free_port()), &UA);
    assert_eq!(r.status, 403, "{}", r.describe());
    assert!(
        r.text().contains("(connection: ") && r.text().contains("the origin is unreachable"),
        "{}",
        r.text()
    );
    assert!(
        r.header("robots-status").unwrap_or("").contains("reason=\"connection: "),
        "{}",
        r.describe()
    );
    for (status, said) in [
        (503, "the origin answered 503 (server error)"),
        (500, "the origin answered 500 (server error)"),
        (429, "the origin answered 429"),
    ] {
        let origin = Origin::start(move |req| match req.path() {
            "/robots.txt" => Reply::new(status, &[], b"no"),
            _ => Reply::ok(&[], b"page"),
        });
        let r = proxy.get(&origin.url("/page"), &UA);
        assert_eq!(r.status, 403, "{status}: {}", r.describe());
        assert!(r.text().contains(&format!("(status: {said}")), "{status}: {}", r.text());
        assert!(
            r.header("robots-status").unwrap_or("").contains(&format!("reason=\"status: {said}")),
            "{status}: {}",
            r.describe()
        );
    }
}
