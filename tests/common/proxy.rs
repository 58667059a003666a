//! [`Proxy`]: the crawlcache binary, spawned on a free loopback port and
//! stopped with SIGTERM; [`start_with_origin`], the fixture of the HTTP and
//! robots tests (a scripted origin plus a proxy with a given configuration);
//! and one-shot `crawlcache` commands.

use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::client::{proxy_get, send_request, Conn, Response};
use super::dirs::TestDir;
use super::origin::{Origin, RecordedRequest, Reply};
use super::process::{
    free_port, port_is_free, run_bounded, tail, tail_file, terminate, STOP_TIMEOUT,
};

/// How long a spawned crawlcache may take to answer `GET /stats` with 200.
pub const PROXY_READY_TIMEOUT: Duration = Duration::from_secs(20);

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
    /// A folder that must outlive the process (the one holding its data
    /// directory): removed only after the proxy has stopped, and carried
    /// over by [`Proxy::restart`].
    work_dir: Option<TestDir>,
}

/// The fixture of the HTTP and robots tests: a scripted [`Origin`] answering
/// with `handler`, then a crawlcache started with `config_toml` on a fresh
/// data directory inside a [`TestDir`] labelled `label`. The proxy owns that
/// folder: it is removed after the proxy has stopped when the test passes,
/// and kept when it fails.
pub fn start_with_origin(
    label: &str,
    config_toml: &str,
    handler: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
) -> (Origin, Proxy) {
    let dir = TestDir::new(label);
    let origin = Origin::start(handler);
    let proxy = Proxy::start_with_config(&dir.subdir("data"), config_toml, &[]).owning(dir);
    (origin, proxy)
}

/// The value of `name` (a metric's name, with its labels when it has any:
/// `crawlcache_client_connections{thread="0"}`) in `text`, a `/metrics`
/// answer (Prometheus text format). Panics, showing `text`, when the metric
/// is absent or its value is not a whole number.
pub fn metric_in(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("metric {name} missing from /metrics:\n{text}"))
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
        Proxy::start_program_on(
            program,
            IpAddr::from([127, 0, 0, 1]),
            data_dir,
            extra_args,
            &[],
            &[],
        )
    }

    /// Like [`Proxy::start_with_config`], listening on `ip` (another
    /// loopback address, e.g. 127.0.0.2) and probing readiness with
    /// `probe_headers` added to `GET /stats` (e.g. an `Authorization` for
    /// `server.admin_token`). Panics when `ip` cannot be bound at all.
    pub fn start_on(
        ip: IpAddr,
        data_dir: &Path,
        config_toml: &str,
        probe_headers: &[(&str, &str)],
    ) -> Proxy {
        let dir = TestDir::new("proxy-config");
        let path = dir.join("crawlcache.toml");
        fs::write(&path, config_toml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        let path_str = path
            .to_str()
            .unwrap_or_else(|| panic!("config path {} is not UTF-8", path.display()))
            .to_owned();
        let mut proxy = Proxy::start_program_on(
            &crawlcache_bin(),
            ip,
            data_dir,
            &["--config", &path_str],
            probe_headers,
            &[],
        );
        proxy.config_dir = Some(dir);
        proxy
    }

    /// Like [`Proxy::start_with_config`], with `envs` added to the
    /// process's environment (e.g. the bucket credentials of fleet mode).
    pub fn start_with_config_env(
        data_dir: &Path,
        config_toml: &str,
        envs: &[(&str, &str)],
    ) -> Proxy {
        let dir = TestDir::new("proxy-config");
        let path = dir.join("crawlcache.toml");
        fs::write(&path, config_toml).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        let path_str = path
            .to_str()
            .unwrap_or_else(|| panic!("config path {} is not UTF-8", path.display()))
            .to_owned();
        let mut proxy = Proxy::start_program_on(
            &crawlcache_bin(),
            IpAddr::from([127, 0, 0, 1]),
            data_dir,
            &["--config", &path_str],
            &[],
            envs,
        );
        proxy.config_dir = Some(dir);
        proxy
    }

    fn start_program_on(
        program: &Path,
        ip: IpAddr,
        data_dir: &Path,
        extra_args: &[&str],
        probe_headers: &[(&str, &str)],
        envs: &[(&str, &str)],
    ) -> Proxy {
        let logs = TestDir::new("proxy-logs");
        let stderr_path = logs.join("stderr.log");
        let mut last_failure = String::new();
        for _attempt in 1..=5 {
            let addr = SocketAddr::new(ip, free_port());
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
            for var in
                ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
            {
                cmd.env_remove(var);
            }
            cmd.envs(envs.iter().copied());
            let mut child =
                cmd.spawn().unwrap_or_else(|e| panic!("spawning {} serve: {e}", program.display()));
            let mut what = format!(
                "{} serve --listen {addr} --data-dir {}",
                program.display(),
                data_dir.display()
            );
            for a in extra_args {
                what.push(' ');
                what.push_str(a);
            }
            match wait_ready(&mut child, addr, &what, &stderr_path, probe_headers) {
                Ok(()) => {
                    return Proxy {
                        child: Some(child),
                        addr,
                        data_dir: data_dir.to_path_buf(),
                        logs,
                        config_dir: None,
                        work_dir: None,
                    }
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
        let path_str = path
            .to_str()
            .unwrap_or_else(|| panic!("config path {} is not UTF-8", path.display()))
            .to_owned();
        let mut args: Vec<&str> = vec!["--config", &path_str];
        args.extend_from_slice(extra_args);
        let mut proxy = Proxy::start(data_dir, &args);
        proxy.config_dir = Some(dir);
        proxy
    }

    /// Stops this proxy cleanly (exit 0 required) and starts a new one on the
    /// same data directory with exactly `extra_args` (e.g. `&["--offline"]`;
    /// earlier arguments and `--config` are not carried over), on a new port.
    pub fn restart(mut self, extra_args: &[&str]) -> Proxy {
        let data_dir = self.data_dir.clone();
        let work_dir = self.work_dir.take();
        self.stop_cleanly();
        let mut proxy = Proxy::start(&data_dir, extra_args);
        proxy.work_dir = work_dir;
        proxy
    }

    /// Keeps `dir` (e.g. the folder holding the data directory) until this
    /// proxy has stopped, so that it is never removed under a running proxy.
    pub fn owning(mut self, dir: TestDir) -> Proxy {
        self.work_dir = Some(dir);
        self
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
        fs::read(self.stderr_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Whether `needle` shows up in stderr within `limit`. Log lines go
    /// through a writer thread (`tracing_appender::non_blocking`), so a line
    /// logged while answering a request may land after the answer: tests
    /// that look for one wait for it, bounded, instead of reading once.
    pub fn log_shows(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.stderr().contains(needle) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The proxy's standard output so far.
    pub fn stdout(&self) -> String {
        fs::read(self.logs.join("stdout.log"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Sends the running proxy the signal `name` (`HUP`, `USR1`, ... as
    /// kill(1) spells it). Panics when `kill` fails.
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("proxy running").id().to_string();
        let sent =
            Command::new("kill").args([&format!("-{name}"), &pid]).stdin(Stdio::null()).status();
        assert!(matches!(sent, Ok(s) if s.success()), "kill -{name} {pid}: {sent:?}");
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

    /// The value of metric `name` in `/metrics` now (see [`metric_in`]).
    pub fn metric(&self, name: &str) -> u64 {
        metric_in(&self.admin("/metrics").text(), name)
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
            Err(msg) => panic!(
                "stopping crawlcache on {}: {msg}\n--- stderr (tail) ---\n{}",
                self.addr,
                self.stderr_tail(60)
            ),
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
fn wait_ready(
    child: &mut Child,
    addr: SocketAddr,
    what: &str,
    stderr_path: &Path,
    probe_headers: &[(&str, &str)],
) -> Result<(), ReadyError> {
    let deadline = Instant::now() + PROXY_READY_TIMEOUT;
    let mut last_probe;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let msg = format!("`{what}` exited with {status} before answering GET /stats with 200\n--- stderr (tail) ---\n{}", tail_file(stderr_path, 60));
                return Err(if port_is_free(addr.port()) {
                    ReadyError::Fatal(msg)
                } else {
                    ReadyError::PortTaken(msg)
                });
            }
            Ok(None) => {}
            Err(e) => return Err(ReadyError::Fatal(format!("waiting for `{what}`: {e}"))),
        }
        let probe = Conn::try_open(addr, Duration::from_millis(500)).and_then(|mut c| {
            c.set_timeout(Duration::from_secs(2));
            let mut headers = vec![("Connection", "close")];
            headers.extend_from_slice(probe_headers);
            c.try_send("GET", "/stats", &headers, b"")
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
    let dir =
        data_dir.to_str().unwrap_or_else(|| panic!("data dir {} is not UTF-8", data_dir.display()));
    let out = crawlcache_cmd(&["cache", "verify", "--data-dir", dir], Duration::from_secs(120));
    assert!(
        out.status.success(),
        "`crawlcache cache verify --data-dir {dir}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        tail(&String::from_utf8_lossy(&out.stdout), 60),
        tail(&String::from_utf8_lossy(&out.stderr), 60)
    );
}
