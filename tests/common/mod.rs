//! Helpers shared by crawlcache's integration tests.
//!
//! Everything here talks to real processes over loopback only (127.0.0.1):
//! - [`Proxy`] spawns the `crawlcache` binary, waits for `GET /stats` to answer
//!   200, and stops it with SIGTERM when dropped;
//! - [`Nginx`] runs a throw-away nginx (no daemon, no master, every path in a
//!   temporary folder) serving a directory, with an access log to count origin hits;
//! - [`Origin`] is a scriptable raw-TCP origin: a closure gets each parsed request
//!   and returns a [`Reply`] made of byte writes, pauses and closes, so a test can
//!   send any header, a 304, a truncated chunked body or a slow response;
//! - [`Conn`], [`send_request`] and [`proxy_get`] are a small HTTP/1.1 client
//!   that reports multi-valued fields and whether the body arrived whole.
//!
//! The tests compile against nothing but the binary (they spawn it), so this file
//! uses only std and tokio. Every wait is bounded; every failure message says what
//! was being done and shows the relevant log. Temporary folders live under
//! `CARGO_TARGET_TMPDIR` and are kept (and their path printed) when a test fails.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a spawned crawlcache may take to answer `GET /stats` with 200.
pub const PROXY_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a process may take to exit after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Read/write timeout of the test HTTP client, per socket operation.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Temporary folders, ports, bounded commands
// ---------------------------------------------------------------------------

/// A fresh folder under `CARGO_TARGET_TMPDIR`, removed on drop unless the
/// thread is panicking (then it is kept and its path printed, for diagnosis).
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    /// Creates `<CARGO_TARGET_TMPDIR>/crawlcache-tests/<label>-<pid>-<n>`.
    pub fn new(label: &str) -> TestDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("crawlcache-tests")
            .join(format!("{label}-{}-{n}-{nanos}", std::process::id()));
        fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("creating test folder {}: {e}", path.display()));
        TestDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path().join(rel)`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// Creates the sub-folder `rel` (and parents) and returns its path.
    pub fn subdir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.path.join(rel);
        fs::create_dir_all(&p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()));
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!("[harness] test failed: keeping {} for diagnosis", self.path.display());
        } else {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read
/// the port, close). Another process can take it before it is used: callers
/// that spawn a server on it retry with a new port when the bind fails.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("binding 127.0.0.1:0 to find a free port: {e}"));
    listener
        .local_addr()
        .unwrap_or_else(|e| panic!("reading the port of a listener on 127.0.0.1:0: {e}"))
        .port()
}

/// True when nothing listens on 127.0.0.1:`port` and it can be bound.
fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// Runs `cmd` with stdout and stderr captured, killing it and panicking if it
/// has not exited within `limit`. `what` names the command in messages.
pub fn run_bounded(cmd: &mut Command, limit: Duration, what: &str) -> Output {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("starting {what} ({cmd:?}): {e}"));
    let mut out = child.stdout.take().expect("stdout was piped");
    let mut err = child.stderr.take().expect("stderr was piped");
    let out_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    };
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = out_reader.join().unwrap_or_default();
            let stderr = err_reader.join().unwrap_or_default();
            panic!(
                "{what} did not finish within {limit:?} and was killed\n--- stdout (tail) ---\n{}\n--- stderr (tail) ---\n{}",
                tail(&String::from_utf8_lossy(&stdout), 40),
                tail(&String::from_utf8_lossy(&stderr), 40)
            );
        }
    };
    Output {
        status,
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last `n` lines of the file at `path`, or a note saying it is
/// unreadable. When a Rust panic message lies before those lines (a long
/// backtrace followed it), its first lines are shown first.
pub fn tail_file(path: &Path, n: usize) -> String {
    let text = match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut out = String::new();
    if let Some(p) = lines[..start].iter().position(|l| l.contains("panicked at")) {
        out.push_str(&lines[p..(p + 3).min(start)].join("\n"));
        out.push_str("\n[...]\n");
    }
    out.push_str(&lines[start..].join("\n"));
    out
}

/// Finds an executable: `$override_var` if set, else `name` on PATH, else the
/// first existing `fallbacks` entry (for tools in /usr/sbin, off a non-root
/// PATH). Panics with `install_hint` when it is nowhere.
pub fn find_tool(name: &str, override_var: &str, fallbacks: &[&str], install_hint: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(override_var) {
        return PathBuf::from(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    for f in fallbacks {
        if Path::new(f).is_file() {
            return PathBuf::from(f);
        }
    }
    panic!("`{name}` was not found on PATH nor in {fallbacks:?} (or set {override_var}). {install_hint}");
}

/// Sends SIGTERM to `child` and waits up to `limit`; kills it (SIGKILL) after
/// that. Returns the exit status, or `Err` with a message on timeout.
fn terminate(child: &mut Child, limit: Duration) -> Result<ExitStatus, String> {
    if let Ok(Some(status)) = child.try_wait() {
        return Ok(status);
    }
    let pid = child.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(sent, Ok(s) if s.success()) {
        let _ = child.kill();
    }
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("process {pid} did not exit within {limit:?} after SIGTERM; killed it"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for process {pid}: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------
// crawlcache
// ---------------------------------------------------------------------------

/// Path of the crawlcache binary: `$CRAWLCACHE_TEST_BIN` when set (to run
/// the tests against another build), else the one cargo built for them.
pub fn crawlcache_bin() -> PathBuf {
    match std::env::var_os("CRAWLCACHE_TEST_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_crawlcache")),
    }
}

/// A running `crawlcache serve`, stopped with SIGTERM on drop.
pub struct Proxy {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    logs: TestDir,
    config_dir: Option<TestDir>,
}

impl Proxy {
    /// Spawns `crawlcache serve --listen 127.0.0.1:PORT --data-dir DATA_DIR
    /// EXTRA_ARGS...` on a free port and waits (up to [`PROXY_READY_TIMEOUT`])
    /// until origin-form `GET /stats` answers 200. stdout and stderr go to files
    /// in a separate folder (never into the data directory). Retries on a new
    /// port when the chosen one was taken meanwhile. Panics, showing stderr,
    /// when the binary exits early or never becomes ready.
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> Proxy {
        Proxy::start_program(&crawlcache_bin(), data_dir, extra_args)
    }

    /// [`Proxy::start`] with another program in place of crawlcache (the
    /// harness self-tests use a stub).
    pub fn start_program(program: &Path, data_dir: &Path, extra_args: &[&str]) -> Proxy {
        let logs = TestDir::new("proxy-logs");
        let stderr_path = logs.join("stderr.log");
        let mut last_failure = String::new();
        for _attempt in 1..=5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let open = |p: PathBuf| {
                fs::File::create(&p).unwrap_or_else(|e| panic!("creating {}: {e}", p.display()))
            };
            let mut cmd = Command::new(program);
            cmd.arg("serve")
                .arg("--listen")
                .arg(addr.to_string())
                .arg("--data-dir")
                .arg(data_dir)
                .args(extra_args)
                .env("RUST_BACKTRACE", "1")
                .stdin(Stdio::null())
                .stdout(open(logs.join("stdout.log")))
                .stderr(open(stderr_path.clone()));
            for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
                cmd.env_remove(var);
            }
            let mut child = cmd
                .spawn()
                .unwrap_or_else(|e| panic!("spawning {} serve: {e}", program.display()));
            let mut what = format!("{} serve --listen {addr} --data-dir {}", program.display(), data_dir.display());
            for a in extra_args {
                what.push(' ');
                what.push_str(a);
            }
            match wait_ready(&mut child, addr, &what, &stderr_path) {
                Ok(()) => {
                    return Proxy { child: Some(child), addr, data_dir: data_dir.to_path_buf(), logs, config_dir: None }
                }
                Err(ReadyError::PortTaken(msg)) => last_failure = msg,
                Err(ReadyError::Fatal(msg)) => {
                    let _ = terminate(&mut child, STOP_TIMEOUT);
                    panic!("{msg}");
                }
            }
        }
        panic!("crawlcache could not listen on a free port in 5 attempts; last failure:\n{last_failure}");
    }

    /// Like [`Proxy::start`], with `config_toml` written to a file (outside
    /// the data directory) and passed as `--config FILE`.
    pub fn start_with_config(data_dir: &Path, config_toml: &str, extra_args: &[&str]) -> Proxy {
        let dir = TestDir::new("proxy-config");
        let path = dir.join("crawlcache.toml");
        fs::write(&path, config_toml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        let path_str = path.to_str().unwrap_or_else(|| panic!("config path {} is not UTF-8", path.display())).to_owned();
        let mut args: Vec<&str> = vec!["--config", &path_str];
        args.extend_from_slice(extra_args);
        let mut proxy = Proxy::start(data_dir, &args);
        proxy.config_dir = Some(dir);
        proxy
    }

    /// Stops this proxy cleanly (exit 0 required) and starts a new one on the
    /// same data directory with exactly `extra_args` (e.g. `&["--offline"]`;
    /// earlier arguments and `--config` are not carried over), on a new port.
    pub fn restart(self, extra_args: &[&str]) -> Proxy {
        let data_dir = self.data_dir.clone();
        self.stop_cleanly();
        Proxy::start(&data_dir, extra_args)
    }

    /// The proxy's listening address (127.0.0.1:PORT).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`, the value for `http_proxy` / `HTTP_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Where the proxy's stderr is written.
    pub fn stderr_path(&self) -> PathBuf {
        self.logs.join("stderr.log")
    }

    /// The proxy's stderr so far.
    pub fn stderr(&self) -> String {
        fs::read(self.stderr_path()).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }

    /// The last `n` lines of stderr, for failure messages.
    pub fn stderr_tail(&self, n: usize) -> String {
        tail_file(&self.stderr_path(), n)
    }

    /// Proxied `GET url` (absolute-form) with extra request `headers`.
    pub fn get(&self, url: &str, headers: &[(&str, &str)]) -> Response {
        proxy_get(self.addr, url, headers)
    }

    /// Origin-form request to the proxy itself (`/stats`, `/metrics`, ...).
    pub fn admin(&self, path: &str) -> Response {
        send_request(self.addr, "GET", path, &[], b"")
    }

    /// Stops the proxy with SIGTERM and returns its exit status. Panics (with
    /// stderr) if it does not exit within [`STOP_TIMEOUT`].
    pub fn stop(mut self) -> ExitStatus {
        self.stop_in_place()
    }

    /// Stops the proxy with SIGTERM and panics, showing stderr, unless it exits
    /// with status 0 (a graceful shutdown).
    pub fn stop_cleanly(mut self) {
        let status = self.stop_in_place();
        assert!(
            status.success(),
            "crawlcache on {} exited with {status} after SIGTERM (a graceful shutdown exits 0)\n--- stderr (tail) ---\n{}",
            self.addr,
            self.stderr_tail(60)
        );
    }

    fn stop_in_place(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("proxy child present until stopped");
        match terminate(&mut child, STOP_TIMEOUT) {
            Ok(status) => status,
            Err(msg) => panic!("stopping crawlcache on {}: {msg}\n--- stderr (tail) ---\n{}", self.addr, self.stderr_tail(60)),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Err(msg) = terminate(&mut child, STOP_TIMEOUT) {
                eprintln!("[harness] {msg}");
            }
            if thread::panicking() {
                eprintln!(
                    "[harness] crawlcache on {} stderr (tail):\n{}",
                    self.addr,
                    self.stderr_tail(40)
                );
            }
        }
    }
}

enum ReadyError {
    /// The process exited and its port is now in use by someone else: retry.
    PortTaken(String),
    Fatal(String),
}

/// Polls `child` until origin-form `GET /stats` on `addr` answers 200.
fn wait_ready(child: &mut Child, addr: SocketAddr, what: &str, stderr_path: &Path) -> Result<(), ReadyError> {
    let deadline = Instant::now() + PROXY_READY_TIMEOUT;
    let mut last_probe;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let msg = format!(
                    "`{what}` exited with {status} before answering GET /stats with 200\n--- stderr (tail) ---\n{}",
                    tail_file(stderr_path, 60)
                );
                return Err(if port_is_free(addr.port()) { ReadyError::Fatal(msg) } else { ReadyError::PortTaken(msg) });
            }
            Ok(None) => {}
            Err(e) => return Err(ReadyError::Fatal(format!("waiting for `{what}`: {e}"))),
        }
        let probe = Conn::try_open(addr, Duration::from_millis(500)).and_then(|mut c| {
            c.set_timeout(Duration::from_secs(2));
            c.try_send("GET", "/stats", &[("Connection", "close")], b"")
        });
        match probe {
            Ok(resp) if resp.status == 200 => return Ok(()),
            Ok(resp) => last_probe = format!("GET /stats answered {} {}", resp.status, resp.reason),
            Err(e) => last_probe = e,
        }
        if Instant::now() >= deadline {
            return Err(ReadyError::Fatal(format!(
                "`{what}` was not ready within {PROXY_READY_TIMEOUT:?} (last probe: {last_probe})\n--- stderr (tail) ---\n{}",
                tail_file(stderr_path, 60)
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `crawlcache ARGS...` to completion (bounded by `limit`).
pub fn crawlcache_cmd(args: &[&str], limit: Duration) -> Output {
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args(args).env("RUST_BACKTRACE", "1");
    run_bounded(&mut cmd, limit, &format!("crawlcache {}", args.join(" ")))
}

/// Runs `crawlcache cache verify --data-dir DATA_DIR` and panics, with its
/// output, unless it exits 0.
pub fn assert_cache_verifies(data_dir: &Path) {
    let dir = data_dir.to_str().unwrap_or_else(|| panic!("data dir {} is not UTF-8", data_dir.display()));
    let out = crawlcache_cmd(&["cache", "verify", "--data-dir", dir], Duration::from_secs(120));
    assert!(
        out.status.success(),
        "`crawlcache cache verify --data-dir {dir}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        tail(&String::from_utf8_lossy(&out.stdout), 60),
        tail(&String::from_utf8_lossy(&out.stderr), 60)
    );
}

// ---------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------

/// Path of the nginx binary: `$CRAWLCACHE_TEST_NGINX`, PATH, or /usr/sbin.
pub fn nginx_bin() -> PathBuf {
    find_tool(
        "nginx",
        "CRAWLCACHE_TEST_NGINX",
        &["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"],
        "Run the tests with `bash tests/run.sh`, which installs it (apt-get install nginx-light), or install nginx yourself.",
    )
}

/// The access log format of [`Nginx`]: nginx's `combined`, then the
/// conditional and proxy request fields a cache test wants to see.
pub const NGINX_LOG_FORMAT: &str = r#"'$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" inm="$http_if_none_match" ims="$http_if_modified_since" via="$http_via"'"#;

/// A private nginx serving a directory on 127.0.0.1:PORT, stopped on drop.
///
/// Runs in the foreground (`daemon off; master_process off`), so as root it
/// keeps root's rights (it can read files under /root) and as a normal user
/// it needs no privileged path: config, pid, logs and temp folders all live in
/// its own [`TestDir`].
pub struct Nginx {
    child: Option<Child>,
    addr: SocketAddr,
    dir: TestDir,
}

impl Nginx {
    /// Serves `root` (a directory) on a free loopback port.
    pub fn start(root: &Path) -> Nginx {
        Nginx::start_with(root, "")
    }

    /// Serves `root` with `server_extra` (nginx directives, e.g.
    /// `"expires 1h;"` or `location /x { ... }`) added to the `server` block.
    /// Panics, showing nginx's error log, if it does not accept connections
    /// within 10 s.
    pub fn start_with(root: &Path, server_extra: &str) -> Nginx {
        let bin = nginx_bin();
        assert!(root.is_dir(), "nginx root {} is not a directory", root.display());
        let dir = TestDir::new("nginx");
        let mut last_failure = String::new();
        for _attempt in 1..=5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let conf = nginx_config(dir.path(), root, addr, server_extra);
            let conf_path = dir.join("nginx.conf");
            fs::write(&conf_path, conf).unwrap_or_else(|e| panic!("writing {}: {e}", conf_path.display()));
            let error_log = dir.join("error.log");
            let _ = fs::remove_file(&error_log);
            let mut child = Command::new(&bin)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(&conf_path)
                .arg("-e")
                .arg(&error_log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(
                    fs::File::create(dir.join("stderr.log"))
                        .unwrap_or_else(|e| panic!("creating nginx stderr log in {}: {e}", dir.path().display())),
                ))
                .spawn()
                .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(status)) => {
                        last_failure = format!(
                            "nginx on {addr} exited with {status}\n--- error.log ---\n{}\n--- stderr ---\n{}",
                            tail_file(&error_log, 30),
                            tail_file(&dir.join("stderr.log"), 30)
                        );
                        if port_is_free(addr.port()) {
                            panic!("{last_failure}");
                        }
                        break; // port race: try another port
                    }
                    Ok(None) => {}
                    Err(e) => panic!("waiting for nginx: {e}"),
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return Nginx { child: Some(child), addr, dir };
                }
                if Instant::now() >= deadline {
                    let _ = terminate(&mut child, STOP_TIMEOUT);
                    panic!(
                        "nginx on {addr} did not accept connections within 10 s\n--- error.log ---\n{}",
                        tail_file(&error_log, 30)
                    );
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("nginx could not listen on a free port in 5 attempts; last failure:\n{last_failure}");
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT{path}`; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn access_log_path(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    pub fn error_log_path(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    /// Lines of the access log, one per request nginx has finished.
    pub fn access_log_lines(&self) -> Vec<String> {
        match fs::read(self.access_log_path()) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("reading {}: {e}", self.access_log_path().display()),
        }
    }

    /// The access log lines once they stop changing: nginx writes a line
    /// just after it sends the last byte, so a client that has its response
    /// may look a moment too early. Waits until the count is unchanged for
    /// 300 ms (at most 5 s).
    pub fn settled_access_log_lines(&self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut lines = self.access_log_lines();
        let mut stable_since = Instant::now();
        while Instant::now() < deadline && stable_since.elapsed() < Duration::from_millis(300) {
            thread::sleep(Duration::from_millis(50));
            let now = self.access_log_lines();
            if now.len() != lines.len() {
                stable_since = Instant::now();
            }
            lines = now;
        }
        lines
    }

    /// Stops nginx (SIGTERM, fast shutdown) and waits for it. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Err(msg) = terminate(&mut child, STOP_TIMEOUT) {
                panic!("stopping nginx on {}: {msg}", self.addr);
            }
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Err(msg) = terminate(&mut child, STOP_TIMEOUT) {
                eprintln!("[harness] nginx: {msg}");
            }
        }
    }
}

/// An nginx configuration for [`Nginx`]: foreground, single process, every
/// path inside `dir`, listening on `addr` only, serving `root`.
pub fn nginx_config(dir: &Path, root: &Path, addr: SocketAddr, server_extra: &str) -> String {
    let d = dir.display();
    let mime = if Path::new("/etc/nginx/mime.types").is_file() {
        "include /etc/nginx/mime.types;".to_owned()
    } else {
        "types { text/html html htm; text/css css; application/javascript js; application/json json; \
         image/svg+xml svg; image/png png; font/woff2 woff2; text/plain txt; }"
            .to_owned()
    };
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid "{d}/nginx.pid";
error_log "{d}/error.log" warn;
events {{ worker_connections 512; }}
http {{
    {mime}
    default_type application/octet-stream;
    log_format crawl {NGINX_LOG_FORMAT};
    access_log "{d}/access.log" crawl;
    client_body_temp_path "{d}/tmp_body";
    proxy_temp_path "{d}/tmp_proxy";
    fastcgi_temp_path "{d}/tmp_fastcgi";
    uwsgi_temp_path "{d}/tmp_uwsgi";
    scgi_temp_path "{d}/tmp_scgi";
    sendfile on;
    keepalive_timeout 30s;
    server {{
        listen {addr};
        server_name localhost;
        root "{root}";
        {server_extra}
    }}
}}
"#,
        root = root.display()
    )
}

// ---------------------------------------------------------------------------
// HTTP/1.1 message parsing shared by the client and the scripted origin
// ---------------------------------------------------------------------------

/// Header fields in the order received; a name may repeat.
pub type Fields = Vec<(String, String)>;

/// First value of field `name` (case-insensitive).
pub fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Every value of field `name` (case-insensitive), one per field line, in order.
pub fn field_all<'a>(fields: &'a Fields, name: &str) -> Vec<&'a str> {
    fields.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
}

/// Whether a comma-separated field (e.g. `Connection`, `Transfer-Encoding`)
/// contains `token`, over all its lines.
fn field_has_token(fields: &Fields, name: &str, token: &str) -> bool {
    field_all(fields, name).iter().any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

fn find_subslice(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits a message head (without the final CRLF CRLF) into its start line and
/// fields. Obsolete line folding is not supported.
fn parse_head(head: &[u8]) -> Result<(String, Fields), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let start = lines.next().unwrap_or_default().to_owned();
    let mut fields = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("malformed field line {line:?} in head {text:?}"))?;
        fields.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    Ok((start, fields))
}

/// An incremental decoder of the chunked transfer coding (RFC 9112 §7.1).
#[derive(Default)]
struct ChunkedDecoder {
    body: Vec<u8>,
    state: ChunkedState,
}

#[derive(Default, PartialEq)]
enum ChunkedState {
    #[default]
    Size,
    Data(usize),
    DataEnd,
    Trailer,
    Done,
}

impl ChunkedDecoder {
    /// Consumes what it can from the front of `buf`; leaves the rest (the
    /// next message, or an incomplete line) in place.
    fn feed(&mut self, buf: &mut Vec<u8>) -> Result<(), String> {
        let mut pos = 0;
        loop {
            match self.state {
                ChunkedState::Size => {
                    let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { break };
                    let line = String::from_utf8_lossy(&buf[pos..pos + eol]).into_owned();
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .map_err(|e| format!("bad chunk size line {line:?}: {e}"))?;
                    pos += eol + 2;
                    self.state = if size == 0 { ChunkedState::Trailer } else { ChunkedState::Data(size) };
                }
                ChunkedState::Data(remaining) => {
                    let take = remaining.min(buf.len() - pos);
                    if take == 0 {
                        break;
                    }
                    self.body.extend_from_slice(&buf[pos..pos + take]);
                    pos += take;
                    self.state =
                        if take == remaining { ChunkedState::DataEnd } else { ChunkedState::Data(remaining - take) };
                }
                ChunkedState::DataEnd => {
                    if buf.len() - pos < 2 {
                        break;
                    }
                    if &buf[pos..pos + 2] != b"\r\n" {
                        return Err(format!("chunk data not followed by CRLF: {:?}", &buf[pos..pos + 2]));
                    }
                    pos += 2;
                    self.state = ChunkedState::Size;
                }
                ChunkedState::Trailer => {
                    let Some(eol) = find_subslice(&buf[pos..], b"\r\n") else { break };
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = ChunkedState::Done;
                    }
                }
                ChunkedState::Done => break,
            }
        }
        buf.drain(..pos);
        Ok(())
    }

    fn done(&self) -> bool {
        self.state == ChunkedState::Done
    }
}

/// Encodes `chunks` in the chunked transfer coding; with `last_chunk` the
/// terminating `0\r\n\r\n` is appended, without it the body is truncated.
pub fn chunked_body(chunks: &[&[u8]], last_chunk: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks.iter().filter(|c| !c.is_empty()) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    if last_chunk {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    out
}

/// An HTTP date (IMF-fixdate, RFC 9110 §5.6.7) for `t`, e.g.
/// `Sun, 06 Nov 1994 08:49:37 GMT`.
pub fn http_date(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// A response as the test client received it.
#[derive(Debug, Clone)]
pub struct Response {
    /// e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Every field line, in order; names as sent.
    pub headers: Fields,
    /// The body after removing the chunked coding (as much as arrived).
    pub body: Vec<u8>,
    /// False when the connection ended before the framing said the body was
    /// over (Content-Length short, or chunked without its last chunk).
    pub complete: bool,
}

impl Response {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.headers, name)
    }

    /// Every value of header `name`, one per field line, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        field_all(&self.headers, name)
    }

    /// The `Cache-Status` field (RFC 9211), all lines joined with ", ".
    pub fn cache_status(&self) -> Option<String> {
        let all = self.header_all("Cache-Status");
        (!all.is_empty()).then(|| all.join(", "))
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A short description for assertion messages: status line, fields, and
    /// the start of the body.
    pub fn describe(&self) -> String {
        let mut s = format!("{} {} {}\n", self.version, self.status, self.reason);
        for (n, v) in &self.headers {
            let _ = writeln!(s, "{n}: {v}");
        }
        let text = self.text();
        let cut: String = text.chars().take(300).collect();
        let _ = write!(
            s,
            "\n{cut}{}{}",
            if cut.len() < text.len() { "…" } else { "" },
            if self.complete { "" } else { "\n(body incomplete: connection closed early)" }
        );
        s
    }
}

/// One client connection that can carry several requests (keep-alive).
pub struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to `addr` (5 s connect timeout, [`IO_TIMEOUT`] per read/write).
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr, Duration::from_secs(5)).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_open(addr: SocketAddr, connect_timeout: Duration) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, connect_timeout)
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let conn = Conn { stream, peer: addr, buf: Vec::new() };
        conn.set_timeout(IO_TIMEOUT);
        let _ = conn.stream.set_nodelay(true);
        Ok(conn)
    }

    /// Sets the read and write timeout of the socket.
    pub fn set_timeout(&self, t: Duration) {
        let _ = self.stream.set_read_timeout(Some(t));
        let _ = self.stream.set_write_timeout(Some(t));
    }

    /// Sends a request and reads one response. `target` is absolute-form
    /// (`http://host/path`, for the proxy) or origin-form (`/path`). A `Host`
    /// field is added unless `headers` has one; `Content-Length` is added
    /// for a non-empty `body`. Panics with the cause on I/O or parse errors.
    pub fn send(&mut self, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        self.try_send(method, target, headers, body)
            .unwrap_or_else(|e| panic!("{method} {target} via {}: {e}", self.peer))
    }

    pub fn try_send(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        let mut req = format!("{method} {target} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            let host = match target.split_once("://") {
                Some((_, rest)) => rest.split(['/', '?', '#']).next().unwrap_or("").to_owned(),
                None => self.peer.to_string(),
            };
            let _ = write!(req, "Host: {host}\r\n");
        }
        for (n, v) in headers {
            let _ = write!(req, "{n}: {v}\r\n");
        }
        let has_framing = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding"));
        if !body.is_empty() && !has_framing {
            let _ = write!(req, "Content-Length: {}\r\n", body.len());
        }
        req.push_str("\r\n");
        let mut raw = req.into_bytes();
        raw.extend_from_slice(body);
        self.try_send_raw(&raw, method.eq_ignore_ascii_case("HEAD"))
    }

    /// Writes `raw` as is and reads one response; `head_request` says the
    /// response has no body whatever its fields say.
    pub fn try_send_raw(&mut self, raw: &[u8], head_request: bool) -> Result<Response, String> {
        self.stream.write_all(raw).map_err(|e| format!("writing the request: {e}"))?;
        self.read_response(head_request)
    }

    /// Reads more bytes into the buffer; Ok(0) at end of stream.
    fn fill(&mut self) -> Result<usize, String> {
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(format!("timed out reading the response ({} bytes buffered)", self.buf.len()))
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted) => Ok(0),
            Err(e) => Err(format!("reading the response: {e}")),
        }
    }

    fn read_response(&mut self, head_request: bool) -> Result<Response, String> {
        loop {
            let head_end = loop {
                if let Some(i) = find_subslice(&self.buf, b"\r\n\r\n") {
                    break i;
                }
                if self.buf.len() > 1 << 20 {
                    return Err("response head larger than 1 MiB".into());
                }
                if self.fill()? == 0 {
                    return Err(format!(
                        "connection closed before a complete response head (got {:?})",
                        String::from_utf8_lossy(&self.buf)
                    ));
                }
            };
            let head: Vec<u8> = self.buf.drain(..head_end + 4).collect();
            let (start, headers) = parse_head(&head[..head_end])?;
            let mut parts = start.splitn(3, ' ');
            let version = parts.next().unwrap_or_default().to_owned();
            let status: u16 = parts
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("malformed status line {start:?}"))?;
            let reason = parts.next().unwrap_or_default().to_owned();
            if (100..200).contains(&status) && status != 101 {
                continue; // interim response: the final one follows
            }
            let mut resp = Response { version, status, reason, headers, body: Vec::new(), complete: true };
            if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
                return Ok(resp);
            }
            if field_has_token(&resp.headers, "Transfer-Encoding", "chunked") {
                let mut dec = ChunkedDecoder::default();
                loop {
                    dec.feed(&mut self.buf)?;
                    if dec.done() {
                        break;
                    }
                    if self.fill()? == 0 {
                        resp.complete = false;
                        break;
                    }
                }
                resp.body = dec.body;
            } else if let Some(cl) = field(&resp.headers, "Content-Length") {
                let n: usize = cl.parse().map_err(|e| format!("bad Content-Length {cl:?}: {e}"))?;
                while self.buf.len() < n {
                    if self.fill()? == 0 {
                        resp.complete = false;
                        break;
                    }
                }
                let take = n.min(self.buf.len());
                resp.body = self.buf.drain(..take).collect();
            } else {
                while self.fill()? != 0 {}
                resp.body = std::mem::take(&mut self.buf);
            }
            return Ok(resp);
        }
    }
}

/// One request on a fresh connection (`Connection: close` is added).
pub fn send_request(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if !all.iter().any(|(n, _)| n.eq_ignore_ascii_case("connection")) {
        all.push(("Connection", "close"));
    }
    Conn::open(addr).send(method, target, &all, body)
}

/// `GET url` (absolute-form, e.g. `http://127.0.0.1:8080/a`) through the
/// proxy at `proxy`, on a fresh connection.
pub fn proxy_get(proxy: SocketAddr, url: &str, headers: &[(&str, &str)]) -> Response {
    assert!(url.starts_with("http://"), "proxy_get wants an absolute http:// URL, got {url:?}");
    send_request(proxy, "GET", url, headers, b"")
}

// ---------------------------------------------------------------------------
// Scriptable origin
// ---------------------------------------------------------------------------

/// A request as the scripted origin received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target as sent (origin-form from a proxy: `/path?q`).
    pub target: String,
    pub version: String,
    pub headers: Fields,
    /// The body with any chunked coding removed.
    pub body: Vec<u8>,
    /// The raw head, request line to the empty line included.
    pub head_raw: Vec<u8>,
    /// Index of the TCP connection it came on (0, 1, ...): equal numbers
    /// mean the client reused a connection.
    pub connection: usize,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        field(&self.headers, name)
    }

    pub fn header_all(&self, name: &str) -> Vec<&str> {
        field_all(&self.headers, name)
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

/// One action of a scripted reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Pause.
    Sleep(Duration),
    /// Close the connection now (FIN), whatever was promised.
    Close,
}

/// What the origin does for one request: steps run in order; then the
/// connection stays open for the next request unless `close` is set, a step
/// closed it, or the request asked for `Connection: close`.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub steps: Vec<Step>,
    pub close: bool,
}

/// The reason phrase for the status codes tests use.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn status_and_fields(status: u16, headers: &[(&str, &str)]) -> String {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (n, v) in headers {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    head
}

impl Reply {
    /// A complete response: `Content-Length` is added unless `headers` has a
    /// `Content-Length` or `Transfer-Encoding` (then `body` is sent as is).
    /// For 304 and 204 no body or length is sent.
    pub fn new(status: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut head = status_and_fields(status, headers);
        let framed = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding"));
        let bodiless = status == 304 || status == 204 || (100..200).contains(&status);
        if !framed && !bodiless {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if !bodiless {
            bytes.extend_from_slice(body);
        }
        Reply { steps: vec![Step::Send(bytes)], close: false }
    }

    /// `200 OK` with `headers` and `body`.
    pub fn ok(headers: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply::new(200, headers, body)
    }

    /// `304 Not Modified` with `headers` (no body).
    pub fn not_modified(headers: &[(&str, &str)]) -> Reply {
        Reply::new(304, headers, b"")
    }

    /// A chunked response, one chunk per element of `chunks`. Without
    /// `last_chunk` the connection is closed after the data: a truncated body.
    pub fn chunked(status: u16, headers: &[(&str, &str)], chunks: &[&[u8]], last_chunk: bool) -> Reply {
        let mut head = status_and_fields(status, headers);
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&chunked_body(chunks, last_chunk));
        let mut reply = Reply { steps: vec![Step::Send(bytes)], close: false };
        if !last_chunk {
            reply.steps.push(Step::Close);
        }
        reply
    }

    /// A response whose `Content-Length` promises `promised` bytes but only
    /// `body` is sent before the connection is closed.
    pub fn short_content_length(status: u16, headers: &[(&str, &str)], body: &[u8], promised: usize) -> Reply {
        let mut head = status_and_fields(status, headers);
        let _ = write!(head, "Content-Length: {promised}\r\n\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        Reply { steps: vec![Step::Send(bytes), Step::Close], close: true }
    }

    /// Bytes written exactly as given (a hand-written response).
    pub fn raw(bytes: &[u8]) -> Reply {
        Reply { steps: vec![Step::Send(bytes.to_vec())], close: false }
    }

    /// Close the connection without answering.
    pub fn hang_up() -> Reply {
        Reply { steps: vec![Step::Close], close: true }
    }

    /// Wait `d` before anything else of this reply.
    pub fn delayed(mut self, d: Duration) -> Reply {
        self.steps.insert(0, Step::Sleep(d));
        self
    }

    /// Append a pause.
    pub fn then_sleep(mut self, d: Duration) -> Reply {
        self.steps.push(Step::Sleep(d));
        self
    }

    /// Append bytes to write.
    pub fn then_send(mut self, bytes: &[u8]) -> Reply {
        self.steps.push(Step::Send(bytes.to_vec()));
        self
    }

    /// Close the connection once the steps are done.
    pub fn closing(mut self) -> Reply {
        self.close = true;
        self
    }
}

type Handler = dyn Fn(&RecordedRequest) -> Reply + Send + Sync + 'static;

struct OriginLog {
    requests: Mutex<Vec<RecordedRequest>>,
    arrived: Condvar,
}

/// A scriptable HTTP/1.1 origin on 127.0.0.1:PORT, over raw TCP on its own
/// tokio runtime thread. Every request is parsed, recorded, then answered
/// with the [`Reply`] the handler returns. Usable from sync and async tests.
/// Stopped (listener closed, connections dropped) on drop.
pub struct Origin {
    addr: SocketAddr,
    log: Arc<OriginLog>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Origin {
    /// Starts an origin whose replies come from `handler`. The handler runs
    /// on the origin's thread: keep it quick (use [`Step::Sleep`] for delays)
    /// and free of assertions (a panic there only drops that connection;
    /// assert on [`Origin::requests`] instead).
    pub fn start<F>(handler: F) -> Origin
    where
        F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    {
        let std_listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("scripted origin: binding 127.0.0.1:0: {e}"));
        let addr = std_listener
            .local_addr()
            .unwrap_or_else(|e| panic!("scripted origin: reading its address: {e}"));
        std_listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("scripted origin: set_nonblocking: {e}"));
        let log = Arc::new(OriginLog { requests: Mutex::new(Vec::new()), arrived: Condvar::new() });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handler: Arc<Handler> = Arc::new(handler);
        let thread_log = log.clone();
        let thread = thread::Builder::new()
            .name(format!("origin-{}", addr.port()))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("[harness] scripted origin: building a tokio runtime: {e}");
                        return;
                    }
                };
                rt.block_on(origin_accept_loop(std_listener, handler, thread_log, rx));
                // Dropping the runtime cancels the connection tasks.
            })
            .unwrap_or_else(|e| panic!("scripted origin: spawning its thread: {e}"));
        Origin { addr, log, shutdown: Some(tx), thread: Some(thread) }
    }

    /// An origin that answers every request with a clone of `reply`.
    pub fn fixed(reply: Reply) -> Origin {
        Origin::start(move |_| reply.clone())
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT{path}`; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn request_count(&self) -> usize {
        self.log.requests.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Waits until at least `n` requests have arrived (for background
    /// revalidation), panicking after `timeout` with what did arrive.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut guard = self.log.requests.lock().unwrap_or_else(|p| p.into_inner());
        while guard.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let seen: Vec<String> = guard.iter().map(|r| format!("{} {}", r.method, r.target)).collect();
                panic!("scripted origin {}: expected {n} requests within {timeout:?}, got {}: {seen:?}", self.addr, guard.len());
            }
            guard = self.log.arrived.wait_timeout(guard, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        guard.clone()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn origin_accept_loop(
    std_listener: TcpListener,
    handler: Arc<Handler>,
    log: Arc<OriginLog>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(std_listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("[harness] scripted origin: registering the listener: {e}");
            return;
        }
    };
    let mut next_conn = 0usize;
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (h, l, n) = (handler.clone(), log.clone(), next_conn);
                    next_conn += 1;
                    tokio::spawn(async move {
                        if let Err(e) = origin_serve_conn(stream, n, h, l).await {
                            eprintln!("[harness] scripted origin connection {n}: {e}");
                        }
                    });
                }
                Err(e) => {
                    eprintln!("[harness] scripted origin: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
}

async fn origin_serve_conn(
    mut stream: tokio::net::TcpStream,
    connection: usize,
    handler: Arc<Handler>,
    log: Arc<OriginLog>,
) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Head.
        let head_end = loop {
            if let Some(i) = find_subslice(&buf, b"\r\n\r\n") {
                break i;
            }
            if buf.len() > 1 << 20 {
                return Err("request head larger than 1 MiB".into());
            }
            let n = stream.read(&mut chunk).await.map_err(|e| format!("reading a request: {e}"))?;
            if n == 0 {
                return Ok(()); // client closed between requests
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head_raw: Vec<u8> = buf.drain(..head_end + 4).collect();
        let (start, headers) = parse_head(&head_raw[..head_end])?;
        let mut parts = start.split(' ');
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default().to_owned();
        let version = parts.next().unwrap_or_default().to_owned();
        // Body.
        let body = if field_has_token(&headers, "Transfer-Encoding", "chunked") {
            let mut dec = ChunkedDecoder::default();
            loop {
                dec.feed(&mut buf)?;
                if dec.done() {
                    break dec.body;
                }
                let n = stream.read(&mut chunk).await.map_err(|e| format!("reading a chunked request body: {e}"))?;
                if n == 0 {
                    return Err("client closed inside a chunked request body".into());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(cl) = field(&headers, "Content-Length") {
            let n: usize = cl.parse().map_err(|e| format!("bad request Content-Length {cl:?}: {e}"))?;
            while buf.len() < n {
                let got = stream.read(&mut chunk).await.map_err(|e| format!("reading a request body: {e}"))?;
                if got == 0 {
                    return Err("client closed inside a request body".into());
                }
                buf.extend_from_slice(&chunk[..got]);
            }
            buf.drain(..n).collect()
        } else {
            Vec::new()
        };
        let wants_close = field_has_token(&headers, "Connection", "close") || version == "HTTP/1.0";
        let req = RecordedRequest { method, target, version, headers, body, head_raw, connection };
        {
            let mut guard = log.requests.lock().unwrap_or_else(|p| p.into_inner());
            guard.push(req.clone());
            log.arrived.notify_all();
        }
        let reply = handler(&req);
        for step in &reply.steps {
            match step {
                Step::Send(bytes) => {
                    stream.write_all(bytes).await.map_err(|e| format!("writing a reply: {e}"))?;
                    stream.flush().await.map_err(|e| format!("flushing a reply: {e}"))?;
                }
                Step::Sleep(d) => tokio::time::sleep(*d).await,
                Step::Close => {
                    let _ = stream.shutdown().await;
                    return Ok(());
                }
            }
        }
        if reply.close || wants_close {
            let _ = stream.shutdown().await;
            return Ok(());
        }
    }
}

// ---------------------------------------------------------------------------
// Crawls: the Rust book, wget, file trees
// ---------------------------------------------------------------------------

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
pub fn wget_mirror(start_url: &str, proxy: Option<&str>, out_dir: &Path, limit: Duration, what: &str) -> Mirror {
    fs::create_dir_all(out_dir).unwrap_or_else(|e| panic!("creating {}: {e}", out_dir.display()));
    let mut cmd = Command::new(wget_bin());
    cmd.args(["--no-config", "-r", "-np", "-nH", "-e", "robots=off", "--no-verbose", "-S"])
        .args(["--tries=1", "--timeout=30"])
        .arg("-P")
        .arg(out_dir);
    for var in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"] {
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
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
            let path = entry.path();
            let ty = entry.file_type().unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
            if ty.is_dir() {
                walk(root, &path, out);
            } else if ty.is_file() {
                let bytes = fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
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
pub fn assert_trees_equal(expected: &BTreeMap<PathBuf, Vec<u8>>, actual: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
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
