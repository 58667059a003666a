//! `--host` of `cache ls`, `cache purge` and `export` (issue 32): a host,
//! `host:port` and a URL's authority all select what a user means, on a
//! stopped store and through a running proxy alike; a filter that matches
//! nothing says so on stderr; `--help` names the spellings.

use super::common::*;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn site(req: &RecordedRequest) -> Reply {
    match req.path() {
        "/robots.txt" => Reply::new(404, &[], b""),
        p => Reply::ok(
            &[("Cache-Control", "max-age=3600"), ("Content-Type", "text/plain")],
            format!("page {p}").as_bytes(),
        ),
    }
}

fn run(args: &[&str], data: &Path) -> Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--data-dir", data.to_str().unwrap()]);
    crawlcache_cmd(&all, LIMIT)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output, what: &str) -> Output {
    assert!(o.status.success(), "{what}: exit {}\n{}\n{}", o.status, stdout(&o), stderr(&o));
    o
}

/// The URLs `cache ls --host HOST` lists, sorted.
fn ls_host(data: &Path, host: &str) -> (Vec<String>, String) {
    let o = ok(run(&["cache", "ls", "--host", host], data), &format!("cache ls --host {host}"));
    let mut urls: Vec<String> =
        stdout(&o).lines().map(|l| l.split('\t').next().unwrap_or("").to_string()).collect();
    urls.sort();
    (urls, stderr(&o))
}

fn spellings(running: bool) {
    let a = Origin::start(site);
    let b = Origin::start(site);
    let dir = TestDir::new(&format!("host-filter-{running}"));
    let data = dir.subdir("data");
    let proxy = Proxy::start(&data, &[]);
    for o in [&a, &b] {
        for p in ["/x", "/y"] {
            assert_eq!(proxy.get(&o.url(p), &[]).status, 200);
        }
    }
    std::thread::sleep(Duration::from_millis(400));
    let proxy = if running {
        Some(proxy)
    } else {
        proxy.stop_cleanly();
        None
    };
    let a_urls = vec![a.url("/x"), a.url("/y")];
    let mut all = vec![a.url("/x"), a.url("/y"), b.url("/x"), b.url("/y")];
    all.sort();

    // host: every port of it.
    assert_eq!(ls_host(&data, "127.0.0.1").0, all);
    // host:port, as it appears in every URL.
    let (urls, err) = ls_host(&data, &format!("127.0.0.1:{}", a.port()));
    assert_eq!(urls, a_urls, "{err}");
    assert!(err.contains("cache ls: 2 responses"), "{err}");
    // A URL's authority (path and scheme are not part of the filter).
    assert_eq!(ls_host(&data, &format!("http://127.0.0.1:{}/elsewhere?q=1", a.port())).0, a_urls);
    // Nothing matches: said on stderr, exit 0.
    let (urls, err) = ls_host(&data, "127.0.0.1:1");
    assert!(urls.is_empty(), "{urls:?}");
    assert!(err.contains("nothing stored matches --host 127.0.0.1:1"), "{err}");
    // A value that is no host is an error naming the spellings.
    let o = run(&["cache", "ls", "--host", "127.0.0.1:http"], &data);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("host:port"), "{}", stderr(&o));

    // export --host host:port writes only that origin's exchanges.
    let warc = dir.join("a.warc.gz");
    let o = ok(
        run(
            &[
                "export",
                "--warc",
                warc.to_str().unwrap(),
                "--host",
                &format!("127.0.0.1:{}", a.port()),
            ],
            &data,
        ),
        "export --host",
    );
    assert!(stderr(&o).contains("export: 2 exchanges"), "{}", stderr(&o));
    let o = ok(
        run(
            &[
                "export",
                "--warc",
                dir.join("none.warc.gz").to_str().unwrap(),
                "--host",
                "example.org",
            ],
            &data,
        ),
        "export of nothing",
    );
    assert!(
        stderr(&o).contains("export: nothing stored matches --host example.org"),
        "{}",
        stderr(&o)
    );

    // purge --host URL removes that origin's entries only.
    let o = ok(run(&["cache", "purge", "--host", &b.url("/")], &data), "purge --host URL");
    assert!(stdout(&o).contains("removed 2 entries"), "{}", stdout(&o));
    assert_eq!(ls_host(&data, "127.0.0.1").0, a_urls);
    let o = ok(
        run(&["cache", "purge", "--host", &format!("127.0.0.1:{}", b.port())], &data),
        "purge of nothing",
    );
    assert!(stdout(&o).contains("removed 0 entries"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(&format!("nothing stored matches --host 127.0.0.1:{}", b.port())),
        "{}",
        stderr(&o)
    );
    if let Some(p) = proxy {
        p.stop_cleanly();
    }
}

#[test]
fn host_host_port_and_a_url_select_on_a_stopped_store() {
    spellings(false);
}

#[test]
fn host_host_port_and_a_url_select_through_a_running_proxy() {
    spellings(true);
}

#[test]
fn help_names_the_three_spellings() {
    for cmd in
        [&["cache", "ls", "--help"][..], &["cache", "purge", "--help"], &["export", "--help"]]
    {
        let o = crawlcache_cmd(cmd, LIMIT);
        let text = stdout(&o);
        assert!(
            text.contains("host:port") && text.contains("127.0.0.1:8080") && text.contains("URL"),
            "{cmd:?}:\n{text}"
        );
    }
}
