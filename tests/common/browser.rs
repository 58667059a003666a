//! [`Chromium`]: Debian's headless Chromium driven over the DevTools
//! protocol on a pair of pipes (`--remote-debugging-pipe`: Chromium reads
//! commands from its descriptor 3 and writes answers and events to 4,
//! each message one JSON object ended by a NUL byte), so no WebSocket
//! client, no Node.js and no downloaded browser are needed. [`Page`]: one
//! tab with a window size, for evaluating JavaScript and taking
//! screenshots. The browser is killed on drop; its profile is a fresh
//! folder.
//!
//! The flags are the ones this machine needs (no sandbox as root, no GPU,
//! no QUIC, no background connections to Google's hosts, which the closed
//! network refuses) and `--no-proxy-server` (the page is on loopback)
//! unless the test gives its own proxy flags ([`Chromium::start_with`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::dirs::TestDir;
use super::process::find_tool;

/// What to install when Chromium is missing.
pub const CHROMIUM_HINT: &str =
    "The status page test drives headless Chromium: install it with `apt-get install chromium` (tests/run.sh does this when it is missing).";

/// How long one DevTools command may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A headless Chromium, killed on drop.
pub struct Chromium {
    child: Child,
    to_browser: File,
    from_browser: mpsc::Receiver<Value>,
    next_id: u64,
    /// Answers read while waiting for another one.
    pending: HashMap<u64, Value>,
    profile: TestDir,
}

/// One tab: its DevTools session.
pub struct Page {
    pub session: String,
    pub target: String,
}

/// A pipe whose two ends are moved to descriptors of 10 and up, both
/// close-on-exec: (read end, write end).
fn pipe_high() -> (RawFd, RawFd) {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    assert_eq!(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
        0,
        "pipe2: {}",
        std::io::Error::last_os_error()
    );
    let moved = fds.map(|fd| {
        // SAFETY: fd is a descriptor this process just opened.
        let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        assert!(high >= 10, "fcntl(F_DUPFD_CLOEXEC): {}", std::io::Error::last_os_error());
        // SAFETY: closing the original, which nothing else holds.
        unsafe { libc::close(fd) };
        high
    });
    (moved[0], moved[1])
}

impl Chromium {
    /// Starts `chromium` (or `$CRAWLCACHE_CHROMIUM`) headless with a fresh
    /// profile and no proxy. Panics naming what to install when it is
    /// missing.
    pub fn start() -> Chromium {
        Chromium::start_with(&["--no-proxy-server"])
    }

    /// [`Chromium::start`] with `extra` flags in place of
    /// `--no-proxy-server` (e.g. `--proxy-server=...`).
    pub fn start_with(extra: &[&str]) -> Chromium {
        let bin = find_tool(
            "chromium",
            "CRAWLCACHE_CHROMIUM",
            &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
            CHROMIUM_HINT,
        );
        let profile = TestDir::new("chromium-profile");
        // Commands: our write end -> Chromium's descriptor 3.
        let (cmd_read, cmd_write) = pipe_high();
        // Answers: Chromium's descriptor 4 -> our read end.
        let (ans_read, ans_write) = pipe_high();
        let log = File::create(profile.join("chromium.log")).expect("creating the Chromium log");
        let mut cmd = Command::new(&bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--mute-audio",
            "--remote-debugging-pipe",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.join("profile").display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log);
        for var in
            ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
        {
            cmd.env_remove(var);
        }
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(cmd_read, 3) < 0 || libc::dup2(ans_write, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}. {CHROMIUM_HINT}", bin.display()));
        // SAFETY: the descriptors are ours; Chromium has its own copies now.
        unsafe {
            libc::close(cmd_read);
            libc::close(ans_write);
        }
        // SAFETY: each descriptor is owned by exactly one File from here on.
        let to_browser = unsafe { File::from_raw_fd(cmd_write) };
        let mut reader = unsafe { File::from_raw_fd(ans_read) };
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 64 * 1024];
            loop {
                let n = match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut c = Chromium {
            child,
            to_browser,
            from_browser: rx,
            next_id: 0,
            pending: HashMap::new(),
            profile,
        };
        let v = c.call(None, "Browser.getVersion", json!({}));
        eprintln!("[browser] {}", v["product"].as_str().unwrap_or("?"));
        c
    }

    /// The last lines Chromium wrote to its log.
    pub fn log_tail(&self) -> String {
        super::process::tail_file(&self.profile.join("chromium.log"), 20)
    }

    /// Sends `method` with `params` (to `session`, or the browser) and
    /// returns its `result`. Panics on an error answer, or after
    /// [`COMMAND_TIMEOUT`].
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_string());
        }
        let mut bytes = serde_json::to_vec(&msg).expect("a JSON message");
        bytes.push(0);
        self.to_browser
            .write_all(&bytes)
            .unwrap_or_else(|e| panic!("sending {method} to Chromium: {e}\n{}", self.log_tail()));
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            if let Some(v) = self.pending.remove(&id) {
                return self.result_of(method, v);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let v = match self.from_browser.recv_timeout(left) {
                Ok(v) => v,
                Err(_) => panic!(
                    "Chromium did not answer {method} within {COMMAND_TIMEOUT:?}\n{}",
                    self.log_tail()
                ),
            };
            match v["id"].as_u64() {
                Some(got) if got == id => return self.result_of(method, v),
                Some(other) => {
                    self.pending.insert(other, v);
                }
                // An event: not waited for.
                None => {}
            }
        }
    }

    fn result_of(&self, method: &str, v: Value) -> Value {
        if let Some(e) = v.get("error") {
            panic!("Chromium refused {method}: {e}\n{}", self.log_tail());
        }
        v["result"].clone()
    }

    /// A new tab of `width` x `height` CSS pixels (a phone when `mobile`:
    /// touch, meta viewport honoured) showing `url`.
    pub fn open(&mut self, url: &str, width: u32, height: u32, mobile: bool) -> Page {
        let target = self.call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            ["targetId"]
            .as_str()
            .expect("a target id")
            .to_string();
        let session = self.call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
        )["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        let page = Page { session, target };
        self.set_size(&page, width, height, mobile);
        self.call(Some(&page.session), "Page.enable", json!({}));
        let nav = self.call(Some(&page.session), "Page.navigate", json!({ "url": url }));
        assert!(nav.get("errorText").is_none(), "navigating to {url}: {nav}");
        page
    }

    /// Sets the tab's window size (CSS pixels, device scale 1).
    pub fn set_size(&mut self, page: &Page, width: u32, height: u32, mobile: bool) {
        self.call(
            Some(&page.session),
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        );
    }

    /// The value of the JavaScript expression `expr` in `page` (promises
    /// awaited). Panics when it throws.
    pub fn eval(&mut self, page: &Page, expr: &str) -> Value {
        let r = self.call(
            Some(&page.session),
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("evaluating {expr}: {e}");
        }
        r["result"]["value"].clone()
    }

    /// The value of `expr`, or the exception it threw.
    pub fn try_eval(&mut self, page: &Page, expr: &str) -> Result<Value, Value> {
        let r = self.call(
            Some(&page.session),
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        match r.get("exceptionDetails") {
            Some(e) => Err(e.clone()),
            None => Ok(r["result"]["value"].clone()),
        }
    }

    /// Waits (up to `limit`) until `expr` is true in `page` (while the page
    /// loads, an exception counts as false); panics with `what` and the
    /// last value otherwise.
    pub fn wait_for(&mut self, page: &Page, expr: &str, limit: Duration, what: &str) {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.try_eval(page, expr).unwrap_or_else(|e| e);
            if v == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: `{expr}` was not true within {limit:?} (last: {v})\n{}",
                self.log_tail()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Saves a PNG of the whole page (the window made as tall as the
    /// content) at `width` CSS pixels to `path`.
    pub fn screenshot(&mut self, page: &Page, width: u32, mobile: bool, path: &Path) {
        self.screenshot_at_most(page, width, mobile, 8000, path);
    }

    /// [`Chromium::screenshot`] of the page's top `max_height` CSS pixels
    /// at most (a small PNG for the documentation).
    pub fn screenshot_at_most(
        &mut self,
        page: &Page,
        width: u32,
        mobile: bool,
        max_height: u32,
        path: &Path,
    ) {
        let height = self
            .eval(page, "Math.ceil(document.documentElement.scrollHeight)")
            .as_u64()
            .unwrap_or(800)
            .clamp(200, max_height.max(200) as u64) as u32;
        self.set_size(page, width, height, mobile);
        let shot =
            self.call(Some(&page.session), "Page.captureScreenshot", json!({ "format": "png" }));
        let data = shot["data"].as_str().expect("screenshot data");
        let png = data_encoding::BASE64.decode(data.as_bytes()).expect("base64 screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        std::fs::write(path, &png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!(
            "[browser] screenshot {} ({width} x {height} CSS pixels, {} bytes)",
            path.display(),
            png.len()
        );
    }
}

impl Drop for Chromium {
    /// Asks Chromium to close (it then ends its helper processes), and
    /// kills it when it has not exited within 5 s.
    fn drop(&mut self) {
        let mut bytes = serde_json::to_vec(
            &json!({ "id": u64::MAX / 2, "method": "Browser.close", "params": {} }),
        )
        .unwrap_or_default();
        bytes.push(0);
        let _ = self.to_browser.write_all(&bytes);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `target/`: where the screenshots go (beside `CARGO_TARGET_TMPDIR`).
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}
