//! One grammar (issue 46): verbs are subcommands (`ca init`, `ca bundle
//! FILE`), the flags that were verbs keep working with a warning naming
//! their replacement, `robots check --exit-code` lets a script branch on a
//! verdict, and every command's `--help` ends with examples.

use super::common::*;
use super::{describe, path_str, stderr, stdout, CMD_LIMIT};
use clap::CommandFactory;

/// The old `ca` flags still do what they did, on stdout exactly as the
/// new subcommands, and each says on stderr which subcommand replaces it.
#[test]
fn old_ca_flags_keep_working_and_name_the_subcommand_that_replaces_them() {
    let dir = TestDir::new("cli-ca-old-flags");
    let data = dir.join("data");
    let d = path_str(&data);
    let warned = |out: &std::process::Output, old: &str, new: &str| {
        let want = format!(
            "crawlcache: warning: `crawlcache {old}` is deprecated; use `crawlcache {new}`"
        );
        assert!(stderr(out).contains(&want), "no `{want}` in:\n{}", describe(out));
    };
    let old = crawlcache_cmd(&["ca", "--init", "--data-dir", d], CMD_LIMIT);
    assert!(old.status.success(), "{}", describe(&old));
    warned(&old, "ca --init", "ca init");
    let new = crawlcache_cmd(&["ca", "path", "--data-dir", d], CMD_LIMIT);
    assert_eq!(stdout(&old), stdout(&new), "the same path");
    assert_eq!(stderr(&new), "", "the new form warns of nothing");

    let old = crawlcache_cmd(&["ca", "--pem", "--data-dir", d], CMD_LIMIT);
    warned(&old, "ca --pem", "ca path --pem");
    assert_eq!(
        stdout(&old),
        stdout(&crawlcache_cmd(&["ca", "path", "--pem", "--data-dir", d], CMD_LIMIT))
    );
    assert!(stdout(&old).starts_with("-----BEGIN CERTIFICATE-----"), "{}", describe(&old));

    let roots = dir.join("roots.pem");
    std::fs::write(&roots, super::common::tls::test_pki(&["bank.test"]).ca_pem).unwrap();
    let bundle = dir.join("bundle.pem");
    let old = crawlcache_cmd(
        &["ca", "--bundle", path_str(&bundle), "--roots", path_str(&roots), "--data-dir", d],
        CMD_LIMIT,
    );
    assert!(old.status.success() && bundle.is_file(), "{}", describe(&old));
    warned(
        &old,
        "ca --bundle FILE",
        &format!("ca bundle {} --roots {}", path_str(&bundle), path_str(&roots)),
    );
}

/// `robots check` exits 0 whatever the verdicts (unchanged), and with
/// `--exit-code` 1 when any URL is disallowed, so `check && fetch` works.
#[test]
fn robots_check_exit_code_is_1_when_a_url_is_disallowed() {
    let dir = TestDir::new("cli-robots-exit-code");
    let robots = dir.join("robots.txt");
    std::fs::write(&robots, "User-agent: *\nDisallow: /private\n").unwrap();
    let check = |extra: &[&str], urls: &[&str]| {
        let mut args =
            vec!["robots", "check", "--robots", path_str(&robots), "--agent", "ExampleBot"];
        args.extend_from_slice(extra);
        args.extend_from_slice(urls);
        crawlcache_cmd(&args, CMD_LIMIT)
    };
    let plain = check(&[], &["/public", "/private/x"]);
    assert_eq!(
        plain.status.code(),
        Some(0),
        "without --exit-code a verdict is not an error: {}",
        describe(&plain)
    );
    let strict = check(&["--exit-code"], &["/public", "/private/x"]);
    assert_eq!(strict.status.code(), Some(1), "{}", describe(&strict));
    assert_eq!(stdout(&strict), stdout(&plain), "the same report either way");
    assert!(
        stdout(&strict)
            .lines()
            .any(|l| l.starts_with("disallowed") && l.contains("Disallow: /private (line 2)")),
        "{}",
        describe(&strict)
    );
    let allowed = check(&["--exit-code"], &["/public", "/robots.txt"]);
    assert_eq!(allowed.status.code(), Some(0), "{}", describe(&allowed));
}

/// Every command's `--help`, as the binary prints it, ends with examples
/// of that command (clap's `after_help`; the man pages show the same).
#[test]
fn every_help_ends_with_examples_of_its_command() {
    fn paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let mut p = prefix.to_vec();
            p.push(sub.get_name().to_string());
            out.push(p.clone());
            paths(sub, &p, out);
        }
    }
    let mut all = vec![vec![]];
    paths(&crawlcache::cli::Cli::command(), &[], &mut all);
    assert!(all.len() > 30, "{all:?}");
    for path in all {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = crawlcache_cmd(&args, CMD_LIMIT);
        assert!(out.status.success(), "{}", describe(&out));
        let help = stdout(&out);
        let examples = help
            .split("\nExamples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("crawlcache {}: no examples in\n{help}", args.join(" ")));
        let first = examples.lines().next().unwrap_or("").trim_start();
        let command = ["crawlcache"]
            .into_iter()
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            examples.contains(&command),
            "crawlcache {}: the examples do not show `{command}`:\n{examples}",
            args.join(" ")
        );
        assert!(!first.is_empty(), "{help}");
    }
}

/// `import --help` no longer tells users to stop the proxy: a running
/// proxy imports through its admin endpoint.
#[test]
fn import_help_does_not_ask_to_stop_the_proxy() {
    let out = crawlcache_cmd(&["import", "--help"], CMD_LIMIT);
    assert!(out.status.success(), "{}", describe(&out));
    let help = stdout(&out);
    assert!(!help.contains("must be stopped"), "{help}");
    assert!(help.contains("whether or not the proxy runs"), "{help}");
}
