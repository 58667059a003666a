//! A configuration that helps (issue 46): `config check FILE` names the
//! key, its line and the nearest known key; `config show` gives every
//! effective value and where it came from; `CRAWLCACHE_SECTION__KEY`
//! variables set keys for containers; `--listen 3130` and `:3130` listen on
//! loopback; durations such as `1h30m` and `1w` are read everywhere; a data
//! directory under a regular file is reported as such.

use super::common::*;
use super::{describe, path_str, stderr, stdout, CMD_LIMIT};
use std::io::BufRead;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `crawlcache ARGS...` with `envs` added to its environment.
fn with_env(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args(args).envs(envs.iter().copied());
    run_bounded(&mut cmd, CMD_LIMIT, &format!("crawlcache {}", args.join(" ")))
}

#[test]
fn config_check_names_the_key_its_line_and_the_nearest_key() {
    let dir = TestDir::new("cli-config-check");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[server]\nlog = \"info\"\n\n[cache]\nmax_sise = \"1GiB\"\n").unwrap();
    let out = crawlcache_cmd(&["config", "check", path_str(&bad)], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{}:5: unknown key `cache.max_sise`; did you mean `cache.max_size`?",
            path_str(&bad)
        )),
        "{err}"
    );
    assert!(err.contains("`crawlcache config defaults` prints every key"), "{err}");

    // A value of the wrong shape: the key and its line.
    std::fs::write(&bad, "# my settings\n[cache]\nmax_size = \"lots\"\n").unwrap();
    let out = crawlcache_cmd(&["config", "check", path_str(&bad)], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!("{}:3: bad value for key `cache.max_size`", path_str(&bad))),
        "{}",
        describe(&out)
    );

    // A valid file, with a duration in weeks and a port alone.
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[server]\nlisten = 3130\n[audit]\nkeep = \"1w\"\n[cache]\nheuristic_max = \"1d12h\"\n",
    )
    .unwrap();
    let out = crawlcache_cmd(&["config", "check", path_str(&good)], CMD_LIMIT);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), format!("{}: ok\n", path_str(&good)));
}

#[test]
fn config_show_says_where_each_value_came_from() {
    let dir = TestDir::new("cli-config-show");
    let file = dir.join("my.toml");
    std::fs::write(&file, "[server]\nlog = \"debug\"\nadmin_token = \"s3cret\"\n").unwrap();
    let args = ["config", "show", "--config", path_str(&file), "--data-dir", "/srv/crawl"];
    let out = with_env(&args, &[("CRAWLCACHE_SERVER__THREADS", "3")]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
            .to_string()
    };
    assert!(
        line("log").starts_with("log = \"debug\"")
            && line("log").ends_with(&format!("# file {}:2", path_str(&file))),
        "{text}"
    );
    assert!(
        line("threads").starts_with("threads = 3")
            && line("threads").ends_with("# environment CRAWLCACHE_SERVER__THREADS"),
        "{text}"
    );
    assert!(
        line("data_dir").starts_with("data_dir = \"/srv/crawl\"")
            && line("data_dir").ends_with("# flag --data-dir"),
        "{text}"
    );
    assert!(
        line("listen").starts_with("listen = \"127.0.0.1:3128\"")
            && line("listen").ends_with("# default"),
        "{text}"
    );
    assert!(
        line("admin_token").starts_with("admin_token = \"***\""),
        "the token is not printed: {text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    // What it prints is a configuration file.
    let parsed: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed["server"]["threads"].as_integer(), Some(3));

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = with_env(&json_args, &[("CRAWLCACHE_SERVER__THREADS", "3")]);
    assert!(out.status.success(), "{}", describe(&out));
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    assert_eq!(v["version"], 1);
    let key = |k: &str| {
        v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == k)
            .unwrap_or_else(|| panic!("no {k} in {v}"))
            .clone()
    };
    assert_eq!(
        key("server.threads"),
        serde_json::json!({"key": "server.threads", "value": 3, "source": "environment", "from": "CRAWLCACHE_SERVER__THREADS"})
    );
    assert_eq!(key("server.log")["from"], format!("{}:2", path_str(&file)));
    assert_eq!(
        (key("server.data_dir")["source"].as_str(), key("cache.max_size")["source"].as_str()),
        (Some("flag"), Some("default"))
    );
}

/// `CRAWLCACHE_SECTION__KEY` reaches every command (here `ca`), over the
/// file; an unknown one is an error naming the variable.
#[test]
fn environment_variables_set_keys_for_every_command() {
    let dir = TestDir::new("cli-config-env");
    let data = dir.join("from-env");
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        format!("[server]\ndata_dir = \"{}\"\n", path_str(&dir.join("from-file"))),
    )
    .unwrap();
    let out = with_env(
        &["ca", "init", "--config", path_str(&file)],
        &[("CRAWLCACHE_SERVER__DATA_DIR", path_str(&data))],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stdout(&out).trim().starts_with(path_str(&data)),
        "the variable wins over the file: {}",
        describe(&out)
    );
    assert!(!dir.join("from-file").exists());

    let out = with_env(&["ca", "path"], &[("CRAWLCACHE_SERVR__DATA_DIR", "x")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("environment variable CRAWLCACHE_SERVR__DATA_DIR: unknown key `servr`; did you mean `server`?"), "{}", describe(&out));
    let out = with_env(&["ca", "path"], &[("CRAWLCACHE_SERVER__THREADS", "many")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(
            "environment variable CRAWLCACHE_SERVER__THREADS: bad value for key `server.threads`"
        ),
        "{}",
        describe(&out)
    );
}

/// The address `serve --print-address ARGS` prints once it listens; the
/// proxy then stops as its standard input closes. `None` when it exited
/// without printing one (the port was taken meanwhile).
fn listening_address(args: &[&str], envs: &[(&str, &str)]) -> Option<String> {
    let dir = TestDir::new("cli-listen");
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args([
        "serve",
        "--print-address",
        "--exit-on-stdin-close",
        "--data-dir",
        path_str(&dir.join("data")),
    ])
    .args(args)
    .envs(envs.iter().copied())
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawning crawlcache serve: {e}"));
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    drop(child.stdin.take());
    for _ in 0..300 {
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = line.trim().to_string();
    (!line.is_empty()).then_some(line)
}

#[test]
fn a_port_alone_listens_on_loopback() {
    for form in ["PORT", ":PORT", "env :PORT", "env PORT"] {
        let mut printed = None;
        for _attempt in 0..3 {
            let port = free_port().to_string();
            let value = form.trim_start_matches("env ").replace("PORT", &port);
            printed = match form.starts_with("env ") {
                true => listening_address(&[], &[("CRAWLCACHE_SERVER__LISTEN", &value)]),
                false => listening_address(&["--listen", &value], &[]),
            };
            if let Some(p) = &printed {
                assert_eq!(p, &format!("http://127.0.0.1:{port}"), "{form}");
                break;
            }
        }
        assert!(printed.is_some(), "{form}: the proxy never listened");
    }
    let out = crawlcache_cmd(&["serve", "--listen", "99999"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("a port is at most 65535"), "{}", describe(&out));
}

#[test]
fn durations_take_several_units_and_weeks() {
    let dir = TestDir::new("cli-durations");
    let data_dir = dir.join("data");
    std::fs::create_dir_all(data_dir.join("audit")).unwrap();
    let data = path_str(&data_dir);
    for since in ["1h30m", "1w", "2d 12h", "90min"] {
        let out =
            crawlcache_cmd(&["audit", "skips", "--since", since, "--data-dir", data], CMD_LIMIT);
        assert!(out.status.success(), "--since {since}: {}", describe(&out));
        assert!(stderr(&out).contains("0 disallowed request(s) since"), "{}", describe(&out));
    }
    let out =
        crawlcache_cmd(&["audit", "skips", "--since", "3 months", "--data-dir", data], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("--since: '3 months'"), "{}", describe(&out));
}

/// A data directory under a regular file: the message names the file,
/// not the system's "File exists" or "Not a directory".
#[test]
fn a_data_directory_under_a_file_is_named_as_such() {
    let dir = TestDir::new("cli-data-dir-file");
    let file = dir.join("file");
    std::fs::write(&file, "not a directory").unwrap();
    let under = file.join("data");
    for args in [
        vec!["ca", "init", "--data-dir", path_str(&under)],
        vec!["cache", "stats", "--data-dir", path_str(&under)],
        vec!["audit", "skips", "--data-dir", path_str(&under)],
        vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", path_str(&under)],
    ] {
        let out = crawlcache_cmd(&args, CMD_LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{} is", path_str(&file))) && err.contains("not a directory"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("File exists") && !err.contains("os error"), "{args:?}: {err}");
    }
    let out = crawlcache_cmd(&["ca", "init", "--data-dir", path_str(&file)], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!(
            "the data directory {} is a file, not a directory",
            path_str(&file)
        )),
        "{}",
        describe(&out)
    );
}

/// `audit.keep` counts UTC days: a bare number is days (the README's "30
/// by default"), and a value that is not whole days is refused by `config
/// check` and by `serve` alike, never read as seconds (which kept one day
/// and deleted every past audit file).
#[test]
fn audit_keep_is_whole_days_and_a_bare_number_means_days() {
    let dir = TestDir::new("cli-audit-keep");
    let file = dir.join("keep.toml");
    for (value, line_ok) in [
        ("30", true),
        ("\"30d\"", true),
        ("\"1w\"", true),
        ("0", true),
        ("\"12h\"", false),
        ("\"30s\"", false),
        ("-1", false),
    ] {
        std::fs::write(&file, format!("[audit]\nkeep = {value}\n")).unwrap();
        let out = crawlcache_cmd(&["config", "check", path_str(&file)], CMD_LIMIT);
        if line_ok {
            assert!(out.status.success(), "keep = {value}: {}", describe(&out));
        } else {
            assert_eq!(out.status.code(), Some(2), "keep = {value}: {}", describe(&out));
            assert!(
                stderr(&out)
                    .contains(&format!("{}:2: bad value for key `audit.keep`", path_str(&file))),
                "keep = {value}: {}",
                describe(&out)
            );
        }
    }
    // From the environment too (src/config.rs tests that a bare 30 is read
    // as thirty days).
    std::fs::write(&file, "[audit]\nkeep = 30\n").unwrap();
    let out = with_env(
        &["config", "show", "--config", path_str(&file)],
        &[("CRAWLCACHE_AUDIT__KEEP", "12h")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("audit.keep"), "{}", describe(&out));
}

/// `audit skips` on a data directory that holds nothing says so (exit 2),
/// as `cache stats` does, rather than "0 disallowed requests".
#[test]
fn audit_skips_on_a_wrong_data_directory_is_an_error() {
    let dir = TestDir::new("cli-audit-wrong-dir");
    let missing = dir.join("no-such-data");
    let out = crawlcache_cmd(&["audit", "skips", "--data-dir", path_str(&missing)], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("no audit log at") && stderr(&out).contains("wrong --data-dir"),
        "{}",
        describe(&out)
    );
}
