//! [`Nginx`]: a private, foreground nginx serving a folder on a free
//! loopback port, with an access log to count origin hits.

use std::fs;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::dirs::TestDir;
use super::process::{find_tool, free_port, port_is_free, tail_file, terminate, STOP_TIMEOUT};

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
            fs::write(&conf_path, conf)
                .unwrap_or_else(|e| panic!("writing {}: {e}", conf_path.display()));
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
                .stderr(Stdio::from(fs::File::create(dir.join("stderr.log")).unwrap_or_else(|e| {
                    panic!("creating nginx stderr log in {}: {e}", dir.path().display())
                })))
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
                    panic!("nginx on {addr} did not accept connections within 10 s\n--- error.log ---\n{}", tail_file(&error_log, 30));
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!(
            "nginx could not listen on a free port in 5 attempts; last failure:\n{last_failure}"
        );
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
