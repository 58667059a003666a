//! [`S3Server`]: a throw-away S3-compatible server on a free loopback port
//! for the fleet tests: moto's server (`pip install "moto[server]"`, run as
//! `python3 -m moto.server`), in memory, with one bucket created; stopped on
//! drop. [`S3Server::stop`] and [`S3Server::start_again`] take it away and
//! bring it back (empty, bucket created again) on the same port.
//!
//! moto is used because it installs from PyPI without a compiler (pure
//! Python; about two minutes into a fresh venv, mostly download) and
//! speaks the S3 REST protocol object_store's client uses (SigV4-signed
//! path-style requests, multipart uploads); it accepts any credentials.

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::client::send_request;
use super::dirs::TestDir;
use super::process::{free_port, tail_file, terminate, STOP_TIMEOUT};

/// What to install when moto is missing.
pub const MOTO_HINT: &str = "The fleet tests start an S3-compatible server: install it with `python3 -m pip install \"moto[server]\"` (tests/run.sh does this when it is missing).";

/// The credentials the tests give crawlcache (moto accepts any).
pub const TEST_CREDENTIALS: [(&str, &str); 2] = [("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")];

/// A running moto S3 server on 127.0.0.1 with one bucket.
pub struct S3Server {
    child: Option<Child>,
    port: u16,
    bucket: String,
    dir: TestDir,
}

impl S3Server {
    /// Starts moto on a free port with `bucket` created. Panics naming what
    /// to install when moto is missing.
    pub fn start(bucket: &str) -> S3Server {
        let ok = Command::new("python3").args(["-c", "import moto.server, flask, werkzeug"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        assert!(matches!(ok, Ok(s) if s.success()), "python3 cannot import moto.server. {MOTO_HINT}");
        let mut s = S3Server { child: None, port: free_port(), bucket: bucket.to_string(), dir: TestDir::new("s3") };
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

    /// Stops the server (its objects are gone with it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Err(e) = terminate(&mut c, STOP_TIMEOUT) {
                eprintln!("[harness] moto: {e}");
            }
        }
    }

    /// Starts the server (again) on the same port, waits (up to 30 s) until
    /// it answers, and creates the bucket.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "moto is already running");
        let log = self.dir.join("moto.log");
        let file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let err = file.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting python3 -m moto.server: {e}. {MOTO_HINT}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = ([127, 0, 0, 1], self.port).into();
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("moto exited with {status} before answering\n--- log ---\n{}", tail_file(&log, 30));
            }
            let up = super::client::Conn::try_open(addr, Duration::from_millis(300))
                .and_then(|mut c| c.try_send("GET", "/", &[("Connection", "close")], b""))
                .is_ok_and(|r| r.status == 200);
            if up {
                break;
            }
            assert!(Instant::now() < deadline, "moto on port {} did not answer within 30 s\n--- log ---\n{}", self.port, tail_file(&log, 30));
            thread::sleep(Duration::from_millis(100));
        }
        let r = send_request(addr, "PUT", &format!("/{}", self.bucket), &[], b"");
        assert_eq!(r.status, 200, "creating bucket {}: {}", self.bucket, r.describe());
    }

    /// Overwrites object `key` with `bytes`, to damage a body the way a
    /// broken store would. The request names the test credentials' access
    /// key in its `Authorization` (moto checks no signature, but refuses an
    /// anonymous overwrite of an object another principal wrote).
    pub fn put_object(&self, key: &str, bytes: &[u8]) {
        let addr = ([127, 0, 0, 1], self.port).into();
        let auth = format!("AWS4-HMAC-SHA256 Credential={}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00", TEST_CREDENTIALS[0].1);
        let r = send_request(addr, "PUT", &format!("/{}/{key}", self.bucket), &[("Authorization", &auth)], bytes);
        assert_eq!(r.status, 200, "PUT {key}: {}", r.describe());
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
