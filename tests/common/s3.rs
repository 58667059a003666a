//! [`S3Server`]: a throw-away Garage (a real S3-compatible object store,
//! `cargo install garage --locked`) on free loopback ports for the fleet
//! tests: one node, its metadata and data in a [`TestDir`], configured the
//! way an operator would (a one-node layout, an access key, a bucket the
//! key may read and write), stopped on drop. [`S3Server::stop`] and
//! [`S3Server::start_again`] take it away and bring it back on the same
//! S3 port, empty (a new node with the same key and bucket), which is how
//! the fault tests lose a body. [`S3Server::put_object`] overwrites an
//! object with a request signed as AWS Signature Version 4, to damage a
//! body the way a broken store would.
//!
//! Garage replaced moto (a mock of S3 written in Python): every fault the
//! fleet tests inject (the bucket gone, back empty, an object overwritten
//! with other bytes) Garage can do, so nothing runs on moto any more.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::client::{send_request, Conn};
use super::dirs::TestDir;
use super::process::{find_tool, free_port, run_bounded, tail_file, terminate, STOP_TIMEOUT};

/// What to install when Garage is missing.
pub const GARAGE_HINT: &str =
    "The fleet tests run Garage, an S3-compatible object store: install it with `cargo install garage --locked` (tests/run.sh does this when it is missing).";

/// The region the test Garage answers for (what crawlcache signs with).
pub const TEST_REGION: &str = "us-east-1";

/// The access key the harness imports into Garage and gives crawlcache
/// (Garage's key IDs are `GK` and 24 hex digits, secrets 64 hex digits).
pub const TEST_CREDENTIALS: [(&str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", "GK0123456789abcdef01234567"),
    ("AWS_SECRET_ACCESS_KEY", "5bb0a6bb4e0f6e4b3fd1c2d7b7e3c5e1c0a9f8e7d6c5b4a39281706f5e4d3c2b"),
];

/// The RPC secret of the test nodes (one node: nothing else ever joins).
const RPC_SECRET: &str = "3a6f1e2d4c5b6a79808f9e8d7c6b5a4938271605f4e3d2c1b0a9f8e7d6c5b4a3";

/// How long Garage may take to answer after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The `garage` binary: `$CRAWLCACHE_GARAGE`, else `garage` on PATH, else
/// `~/.cargo/bin/garage`. Panics naming what to install when it is none.
pub fn garage_bin() -> PathBuf {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|d| d.join("bin").join("garage"))
        .unwrap_or_default();
    let fallback = cargo_bin.to_string_lossy().into_owned();
    find_tool(
        "garage",
        "CRAWLCACHE_GARAGE",
        &[fallback.as_str(), "/usr/local/bin/garage"],
        GARAGE_HINT,
    )
}

/// A running one-node Garage on 127.0.0.1 with one bucket.
pub struct S3Server {
    child: Option<Child>,
    port: u16,
    rpc_port: u16,
    bucket: String,
    dir: TestDir,
    bin: PathBuf,
    /// Starts so far (each in fresh metadata and data folders).
    starts: u32,
}

impl S3Server {
    /// Starts Garage on free ports with `bucket` created and the test key
    /// allowed to read and write it. Panics naming what to install when
    /// Garage is missing.
    pub fn start(bucket: &str) -> S3Server {
        let bin = garage_bin();
        let mut s = S3Server {
            child: None,
            port: free_port(),
            rpc_port: free_port(),
            bucket: bucket.to_string(),
            dir: TestDir::new("garage"),
            bin,
            starts: 0,
        };
        s.start_again();
        s
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The region to sign for.
    pub fn region(&self) -> &str {
        TEST_REGION
    }

    /// Stops the server (SIGTERM); clients see connections refused.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Err(e) = terminate(&mut c, STOP_TIMEOUT) {
                eprintln!("[harness] garage: {e}");
            }
        }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("garage.toml")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("garage-{}.log", self.starts))
    }

    /// Starts the server (again) on the same S3 port, empty: new metadata
    /// and data folders, a one-node layout, the test key imported, the
    /// bucket created and allowed to the key. Waits (up to 60 s) until the
    /// S3 API answers.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "garage is already running");
        self.starts += 1;
        let run = self.dir.subdir(format!("run-{}", self.starts));
        let config = format!(
            "metadata_dir = \"{meta}\"\ndata_dir = \"{data}\"\ndb_engine = \"sqlite\"\nreplication_factor = 1\n\
             metadata_fsync = false\ndata_fsync = false\n\
             rpc_bind_addr = \"127.0.0.1:{rpc}\"\nrpc_public_addr = \"127.0.0.1:{rpc}\"\nrpc_secret = \"{RPC_SECRET}\"\n\
             [s3_api]\ns3_region = \"{TEST_REGION}\"\napi_bind_addr = \"127.0.0.1:{s3}\"\nroot_domain = \".s3.garage.localhost\"\n",
            meta = run.join("meta").display(),
            data = run.join("data").display(),
            rpc = self.rpc_port,
            s3 = self.port,
        );
        std::fs::write(self.config_path(), config)
            .unwrap_or_else(|e| panic!("writing {}: {e}", self.config_path().display()));
        let log = self.log_path();
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let err = file.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(self.config_path())
            .arg("server")
            .env("RUST_LOG", "garage=warn")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting {} server: {e}. {GARAGE_HINT}", self.bin.display())
            });
        self.child = Some(child);
        // `node id` only reads the node's key from its metadata folder, so it
        // can answer before the RPC port listens; `status` goes through the
        // RPC port, so the layout commands after it find the node up.
        let deadline = Instant::now() + READY_TIMEOUT;
        let node_id = loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "garage exited with {status} before answering\n--- log ---\n{}",
                    tail_file(&log, 30)
                );
            }
            let id = self.try_cli(&["node", "id", "-q"]).and_then(|out| {
                out.trim().split('@').next().filter(|id| id.len() >= 16).map(str::to_string)
            });
            if let Some(id) = id.filter(|_| self.try_cli(&["status"]).is_some()) {
                break id;
            }
            assert!(Instant::now() < deadline, "garage did not answer `node id` and `status` within {READY_TIMEOUT:?}\n--- log ---\n{}", tail_file(&log, 30));
            thread::sleep(Duration::from_millis(200));
        };
        self.cli(&["layout", "assign", "-z", "dc1", "-c", "1G", &node_id]);
        self.cli(&["layout", "apply", "--version", "1"]);
        let (key_id, secret) = (TEST_CREDENTIALS[0].1, TEST_CREDENTIALS[1].1);
        self.cli(&["key", "import", "--yes", "-n", "crawlcache-test", key_id, secret]);
        self.cli(&["bucket", "create", &self.bucket.clone()]);
        self.cli(&[
            "bucket",
            "allow",
            "--read",
            "--write",
            "--owner",
            &self.bucket.clone(),
            "--key",
            key_id,
        ]);
        // The S3 API answers (an anonymous request is refused with an S3
        // error: any HTTP answer will do).
        let addr = ([127, 0, 0, 1], self.port).into();
        loop {
            let up = Conn::try_open(addr, Duration::from_millis(300))
                .and_then(|mut c| c.try_send("GET", "/", &[("Connection", "close")], b""))
                .is_ok();
            if up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "garage's S3 API on port {} did not answer within {READY_TIMEOUT:?}\n--- log ---\n{}",
                self.port,
                tail_file(&log, 30)
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// `garage -c CONFIG ARGS...`, its stdout when it succeeds.
    fn try_cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new(&self.bin)
            .arg("-c")
            .arg(self.config_path())
            .args(args)
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `garage -c CONFIG ARGS...` (bounded, 60 s); panics with its output
    /// when it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c").arg(self.config_path()).args(args).env("RUST_LOG", "error");
        let out =
            run_bounded(&mut cmd, Duration::from_secs(60), &format!("garage {}", args.join(" ")));
        assert!(
            out.status.success(),
            "garage {args:?} failed ({}):\n{}{}\n--- log ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            tail_file(&self.log_path(), 20)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Overwrites object `key` with `bytes` (a PUT signed with the test key,
    /// AWS Signature Version 4), to damage a body the way a broken store
    /// would.
    pub fn put_object(&self, key: &str, bytes: &[u8]) {
        let addr = ([127, 0, 0, 1], self.port).into();
        let host = format!("127.0.0.1:{}", self.port);
        let path = format!("/{}/{key}", self.bucket);
        // `2026-12-03T17:51:23.000Z` -> `20261203`, `20261203T175123Z`.
        let now: String = crawlcache_base::time::format_rfc3339(std::time::SystemTime::now())
            .chars()
            .filter(|c| c.is_ascii_digit())
            .collect();
        let date = now[..8].to_string();
        let amz_date = format!("{date}T{}Z", &now[8..14]);
        let payload = hex::encode(Sha256::digest(bytes));
        let auth = sigv4_authorization(
            "PUT",
            &path,
            &host,
            &payload,
            &amz_date,
            &date,
            TEST_REGION,
            TEST_CREDENTIALS[0].1,
            TEST_CREDENTIALS[1].1,
        );
        let headers = [
            ("Host", host.as_str()),
            ("x-amz-content-sha256", payload.as_str()),
            ("x-amz-date", amz_date.as_str()),
            ("Authorization", auth.as_str()),
        ];
        let r = send_request(addr, "PUT", &path, &headers, bytes);
        assert_eq!(r.status, 200, "PUT {key}: {}", r.describe());
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
        if thread::panicking() {
            eprintln!("[harness] garage log (tail):\n{}", tail_file(&self.log_path(), 20));
        }
    }
}

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The `Authorization` value of an S3 request (AWS Signature Version 4,
/// path-style, no query, signing `host`, `x-amz-content-sha256` and
/// `x-amz-date`).
#[allow(clippy::too_many_arguments)]
fn sigv4_authorization(
    method: &str,
    path: &str,
    host: &str,
    payload_sha256: &str,
    amz_date: &str,
    date: &str,
    region: &str,
    key_id: &str,
    secret: &str,
) -> String {
    let signed = "host;x-amz-content-sha256;x-amz-date";
    let canonical = format!("{method}\n{path}\n\nhost:{host}\nx-amz-content-sha256:{payload_sha256}\nx-amz-date:{amz_date}\n\n{signed}\n{payload_sha256}");
    let scope = format!("{date}/{region}/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    );
    let k = hmac_sha256(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k = hmac_sha256(&k, region.as_bytes());
    let k = hmac_sha256(&k, b"s3");
    let k = hmac_sha256(&k, b"aws4_request");
    let signature = hex::encode(hmac_sha256(&k, to_sign.as_bytes()));
    format!("AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={signed}, Signature={signature}")
}
