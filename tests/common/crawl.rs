//! Crawls: the Rust book from the toolchain's rust-docs, `wget -r`, and
//! byte-for-byte comparison of file trees.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::process::{find_tool, run_bounded, tail};

/// `$(rustc --print sysroot)/share/doc/rust/html`, checked to contain the
/// Rust book (`book/index.html`, from the rust-docs component). Panics with
/// how to install it when it is missing.
pub fn rust_docs_html_dir() -> PathBuf {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = run_bounded(
        Command::new(&rustc).args(["--print", "sysroot"]),
        Duration::from_secs(60),
        "rustc --print sysroot",
    );
    assert!(
        out.status.success(),
        "`{rustc} --print sysroot` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let html = sysroot.join("share/doc/rust/html");
    let index = html.join("book/index.html");
    assert!(
        index.is_file(),
        "the Rust book is not installed: {} is missing. This test serves it from nginx as a real site to crawl. \
         Install the rust-docs component of the toolchain: `rustup component add rust-docs`",
        index.display()
    );
    html
}

/// Path of wget, or a panic saying how to get it.
pub fn wget_bin() -> PathBuf {
    find_tool(
        "wget",
        "CRAWLCACHE_TEST_WGET",
        &["/usr/bin/wget", "/usr/local/bin/wget"],
        "Run the tests with `bash tests/run.sh`, which installs it (apt-get install wget).",
    )
}

/// What one `wget -r` run did.
pub struct Mirror {
    pub out_dir: PathBuf,
    pub elapsed: Duration,
    /// wget's stderr (its `--no-verbose` log, plus `-S` response headers).
    pub log: String,
}

impl Mirror {
    /// Values of `Cache-Status` in the server responses wget printed (`-S`),
    /// one per response that had the field.
    pub fn cache_statuses(&self) -> Vec<String> {
        self.log
            .lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("cache-status").then(|| value.trim().to_owned())
            })
            .collect()
    }

    /// Number of response status lines wget printed (`-S`).
    pub fn response_count(&self) -> usize {
        self.log.lines().filter(|l| l.trim_start().starts_with("HTTP/1.")).count()
    }
}

/// `wget -r -np -nH -e robots=off --no-verbose -S` of `start_url` into
/// `out_dir`, through `proxy` (an `http://host:port` URL) or directly when
/// `None`. wget's own config files and the environment's proxy settings are
/// ignored. Bounded by `limit`; panics, with wget's log tail, unless wget
/// exits 0 (exit 8 means some response was an error status).
pub fn wget_mirror(
    start_url: &str,
    proxy: Option<&str>,
    out_dir: &Path,
    limit: Duration,
    what: &str,
) -> Mirror {
    fs::create_dir_all(out_dir).unwrap_or_else(|e| panic!("creating {}: {e}", out_dir.display()));
    let mut cmd = Command::new(wget_bin());
    cmd.args(["--no-config", "-r", "-np", "-nH", "-e", "robots=off", "--no-verbose", "-S"])
        .args(["--tries=1", "--timeout=30"])
        .arg("-P")
        .arg(out_dir);
    for var in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "no_proxy",
        "NO_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ] {
        cmd.env_remove(var);
    }
    match proxy {
        Some(p) => {
            cmd.args(["-e", "use_proxy=on", "-e", &format!("http_proxy={p}")]).env("http_proxy", p);
        }
        None => {
            cmd.arg("--no-proxy");
        }
    }
    cmd.arg(start_url);
    let started = Instant::now();
    let out = run_bounded(&mut cmd, limit, &format!("wget -r ({what})"));
    let elapsed = started.elapsed();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "wget -r {start_url} ({what}, proxy {proxy:?}) exited with {} (8 = an error response, 4 = network failure)\n--- wget log (tail) ---\n{}",
        out.status,
        tail(&log, 40)
    );
    Mirror { out_dir: out_dir.to_path_buf(), elapsed, log }
}

/// Every regular file under `root`, by path relative to `root`, with its bytes.
pub fn read_tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let entries =
            fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
            let path = entry.path();
            let ty = entry.file_type().unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
            if ty.is_dir() {
                walk(root, &path, out);
            } else if ty.is_file() {
                let bytes =
                    fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
                let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                out.insert(rel, bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Panics, listing missing, extra and differing files (at most 10 of each),
/// unless the two trees hold the same paths with byte-identical contents.
pub fn assert_trees_equal(
    expected: &BTreeMap<PathBuf, Vec<u8>>,
    actual: &BTreeMap<PathBuf, Vec<u8>>,
    what: &str,
) {
    let missing: Vec<_> = expected.keys().filter(|k| !actual.contains_key(*k)).collect();
    let extra: Vec<_> = actual.keys().filter(|k| !expected.contains_key(*k)).collect();
    let differing: Vec<_> = expected
        .iter()
        .filter_map(|(k, v)| actual.get(k).filter(|a| *a != v).map(|a| (k, v.len(), a.len())))
        .collect();
    if missing.is_empty() && extra.is_empty() && differing.is_empty() {
        return;
    }
    let mut msg = format!(
        "{what}: file trees differ ({} expected files, {} actual): {} missing, {} extra, {} with different bytes\n",
        expected.len(),
        actual.len(),
        missing.len(),
        extra.len(),
        differing.len()
    );
    for m in missing.iter().take(10) {
        let _ = writeln!(msg, "  missing: {}", m.display());
    }
    for x in extra.iter().take(10) {
        let _ = writeln!(msg, "  extra:   {}", x.display());
    }
    for (k, el, al) in differing.iter().take(10) {
        let _ = writeln!(msg, "  differs: {} ({el} bytes expected, {al} bytes got)", k.display());
    }
    panic!("{msg}");
}
