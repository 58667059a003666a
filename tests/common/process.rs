//! Free ports, bounded child processes, log tails and tool lookup.

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// How long a process may take to exit after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);

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
pub(crate) fn port_is_free(port: u16) -> bool {
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
pub fn find_tool(
    name: &str,
    override_var: &str,
    fallbacks: &[&str],
    install_hint: &str,
) -> PathBuf {
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
pub(crate) fn terminate(child: &mut Child, limit: Duration) -> Result<ExitStatus, String> {
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
                return Err(format!(
                    "process {pid} did not exit within {limit:?} after SIGTERM; killed it"
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for process {pid}: {e}")),
        }
    }
}
