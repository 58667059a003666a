//! [`RedisServer`]: a throw-away `redis-server` on a free loopback port (no
//! persistence, no daemon, its folder in a [`TestDir`]), stopped on drop;
//! [`RedisServer::stop`] and [`RedisServer::start_again`] take it away and
//! bring it back on the same port, for fault tests; [`RedisServer::cli`]
//! runs `redis-cli` against it. [`RedisCluster`]: three of them joined into
//! a Redis Cluster (`redis-cli --cluster create`, no replicas).

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::dirs::TestDir;
use super::process::{find_tool, free_port, run_bounded, tail_file, terminate, STOP_TIMEOUT};

/// What to install when `redis-server` is missing.
pub const REDIS_HINT: &str = "The fleet tests start a real Redis: install it with `apt-get install redis-server` (tests/run.sh does this when it is missing).";

/// A running `redis-server` on 127.0.0.1.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TestDir,
    bin: PathBuf,
    extra_args: Vec<String>,
}

impl RedisServer {
    /// Starts `redis-server` on a free port and waits (up to 10 s) until it
    /// answers PING. Panics naming what to install when it is missing.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// [`RedisServer::start`] with extra `redis-server` arguments.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        let bin = find_tool(
            "redis-server",
            "CRAWLCACHE_REDIS_SERVER",
            &["/usr/bin/redis-server", "/usr/sbin/redis-server"],
            REDIS_HINT,
        );
        let extra_args = extra_args.iter().map(|a| a.to_string()).collect();
        let mut r = RedisServer {
            child: None,
            port: free_port(),
            dir: TestDir::new("redis"),
            bin,
            extra_args,
        };
        r.start_again();
        r
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (SIGTERM; nothing is saved): clients see it gone.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Err(e) = terminate(&mut c, STOP_TIMEOUT) {
                eprintln!("[harness] redis-server: {e}");
            }
        }
    }

    /// Starts the server (again) on the same port, empty, and waits for PING.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "redis-server is already running");
        let log = self.dir.join("redis.log");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let child = Command::new(&self.bin)
                .args([
                    "--port",
                    &self.port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args([
                    "--daemonize",
                    "no",
                    "--protected-mode",
                    "no",
                    "--logfile",
                    log.to_str().unwrap_or("redis.log"),
                ])
                .args(&self.extra_args)
                .arg("--dir")
                .arg(self.dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("starting {}: {e}", self.bin.display()));
            self.child = Some(child);
            // Bounded wait for PING.
            while Instant::now() < deadline {
                if self.cli_try(&["PING"]).is_some_and(|o| o.trim() == "PONG") {
                    return;
                }
                if let Some(c) = self.child.as_mut() {
                    if let Ok(Some(_)) = c.try_wait() {
                        break;
                    }
                }
                thread::sleep(Duration::from_millis(50));
            }
            // Exited (port taken by someone else meanwhile?) or never ready.
            self.stop();
            if Instant::now() >= deadline {
                panic!(
                    "redis-server on port {} did not answer PING within 10 s\n--- log ---\n{}",
                    self.port,
                    tail_file(&log, 30)
                );
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn cli_try(&self, args: &[&str]) -> Option<String> {
        let out = Command::new(self.bin.with_file_name("redis-cli"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `redis-cli ARGS...` against the server (bounded, 10 s) and
    /// returns its output. Panics when it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(self.bin.with_file_name("redis-cli"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]).args(args);
        let out = run_bounded(
            &mut cmd,
            Duration::from_secs(10),
            &format!("redis-cli {}", args.join(" ")),
        );
        assert!(
            out.status.success(),
            "redis-cli {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The keys matching `pattern`, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .cli(&["--scan", "--pattern", pattern])
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect();
        v.sort();
        v
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        if thread::panicking() {
            let log = self.dir.join("redis.log");
            if let Ok(text) = fs::read_to_string(&log) {
                eprintln!(
                    "[harness] redis-server log (tail):\n{}",
                    super::process::tail(&text, 20)
                );
            }
        }
    }
}

/// Three `redis-server`s joined into a Redis Cluster (16384 slots over three
/// primaries, no replicas), stopped on drop.
pub struct RedisCluster {
    pub servers: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them and waits (up to
    /// 20 s) until every one reports `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        let servers: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ])
            })
            .collect();
        let addrs: Vec<String> =
            servers.iter().map(|s| format!("127.0.0.1:{}", s.port())).collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        servers[0].cli(&args);
        let deadline = Instant::now() + Duration::from_secs(20);
        for s in &servers {
            while !s.cli(&["cluster", "info"]).contains("cluster_state:ok") {
                assert!(
                    Instant::now() < deadline,
                    "the Redis Cluster did not reach cluster_state:ok within 20 s"
                );
                thread::sleep(Duration::from_millis(100));
            }
        }
        RedisCluster { servers }
    }

    /// The seed list for `fleet.redis_url`, as TOML: `["redis://...", ...]`.
    pub fn urls_toml(&self) -> String {
        let v: Vec<String> =
            self.servers.iter().map(|s| format!("\"redis://127.0.0.1:{}\"", s.port())).collect();
        format!("[{}]", v.join(", "))
    }

    /// Keys matching `pattern` over all primaries, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut v: Vec<String> = self.servers.iter().flat_map(|s| s.keys(pattern)).collect();
        v.sort();
        v
    }
}
