//! The command line of the real binary (issue 10, items 10 and 13): `ca`
//! never creates a CA unless told to (`ca init`), `ca bundle` writes the
//! system roots plus the CA for clients whose `--cacert` replaces their trust
//! store, `config defaults` prints the embedded defaults, configuration
//! errors point at it, and `completions` prints a completion script; and
//! the inspection and maintenance commands `cache ls|cat|purge|prune`
//! (`inspect.rs`), with `cache ls` at scale (`scale.rs`). Issue 46: one
//! grammar, the old flag forms kept with a warning, examples in every
//! `--help` (`grammar.rs`); output for people and `--json` for programs,
//! the same whether the proxy runs or not (`output.rs`); `config
//! check|show`, environment overrides, `--listen PORT`, durations such as
//! `1h30m` (`configuration.rs`).

#[path = "../common/mod.rs"]
mod common;
mod configuration;
mod grammar;
mod host_filter;
mod inspect;
mod output;
mod scale;

use common::tls::test_pki;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use crawlcache::tls::CertificateAuthority;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

const CMD_LIMIT: Duration = Duration::from_secs(30);

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap_or_else(|| panic!("{} is not UTF-8", p.display()))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn describe(out: &Output) -> String {
    format!("exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}", out.status, stdout(out), stderr(out))
}

/// `crawlcache ARGS...` with `SSL_CERT_FILE` set to `ssl_cert_file`, or
/// removed when `None`.
fn crawlcache_with_ssl_cert_file(args: &[&str], ssl_cert_file: Option<&Path>) -> Output {
    let mut cmd = Command::new(crawlcache_bin());
    cmd.args(args).env("RUST_BACKTRACE", "1");
    match ssl_cert_file {
        Some(p) => cmd.env("SSL_CERT_FILE", p),
        None => cmd.env_remove("SSL_CERT_FILE"),
    };
    run_bounded(&mut cmd, CMD_LIMIT, &format!("crawlcache {}", args.join(" ")))
}

/// `crawlcache ca init --data-dir DATA`: the printed path, checked to be
/// the CA certificate of DATA.
fn ca_init(data: &Path) -> PathBuf {
    let out = crawlcache_cmd(&["ca", "init", "--data-dir", path_str(data)], CMD_LIMIT);
    assert!(out.status.success(), "ca init: {}", describe(&out));
    let path = PathBuf::from(stdout(&out).trim());
    assert_eq!(
        path,
        std::fs::canonicalize(CertificateAuthority::cert_path_in(data)).unwrap(),
        "{}",
        describe(&out)
    );
    path
}

/// Every certificate of a PEM file.
fn certs_in(path: &Path) -> Vec<CertificateDer<'static>> {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    rustls::pki_types::CertificateDer::pem_slice_iter(&text[..])
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn root_store(certs: &[CertificateDer<'static>]) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for c in certs {
        roots.add(c.clone()).expect("a usable root certificate");
    }
    Arc::new(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS handshake in memory between `server` and a client trusting `roots`
/// that names the server `host`. Returns the client's verdict.
fn handshake(
    server: Arc<ServerConfig>,
    roots: Arc<RootCertStore>,
    host: &str,
) -> Result<(), rustls::Error> {
    let client_config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_string()).unwrap();
    let mut client = ClientConnection::new(Arc::new(client_config), name)?;
    let mut server = ServerConnection::new(server).unwrap();
    for _ in 0..20 {
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        server.read_tls(&mut &buf[..]).unwrap();
        // A server-side error is the client's alert; the client reports it.
        let _ = server.process_new_packets();
        let mut buf = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        client.read_tls(&mut &buf[..]).unwrap();
        client.process_new_packets()?;
    }
    panic!("the handshake with {host} did not finish");
}

// ---------------------------------------------------------------------------
// ca: never a silent second CA
// ---------------------------------------------------------------------------

#[test]
fn ca_without_a_ca_says_where_it_looked_and_how_to_create_one_and_creates_nothing() {
    let dir = TestDir::new("cli-ca-none");
    // A data directory that does not exist, and an empty one.
    let absent = dir.join("absent");
    let empty = dir.subdir("empty");
    for data in [&absent, &empty] {
        for args in [
            &["ca"][..],
            &["ca", "path"],
            &["ca", "path", "--pem"],
            &["ca", "bundle", path_str(&dir.join("bundle.pem"))],
            &["ca", "install"],
        ] {
            let mut args = args.to_vec();
            args.extend(["--data-dir", path_str(data)]);
            let out = crawlcache_cmd(&args, CMD_LIMIT);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
            assert_eq!(stdout(&out), "", "{args:?}");
            let err = stderr(&out);
            let expected = std::path::absolute(data.join("ca/ca.pem")).unwrap();
            assert!(
                err.contains(&format!("no CA certificate at {}", expected.display())),
                "{args:?}: {err}"
            );
            assert!(
                err.contains(&format!("`crawlcache serve --data-dir {}`", path_str(data))),
                "{args:?}: {err}"
            );
            assert!(
                err.contains(&format!("`crawlcache ca init --data-dir {}`", path_str(data))),
                "{args:?}: {err}"
            );
        }
    }
    assert!(!absent.exists(), "`ca` created the data directory");
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "`ca` wrote into the empty data directory"
    );
    assert!(!dir.join("bundle.pem").exists());
}

#[test]
fn a_relative_data_dir_is_reported_as_a_full_path() {
    let dir = TestDir::new("cli-ca-relative");
    let out = run_bounded(
        Command::new(crawlcache_bin()).current_dir(dir.path()).args(["ca", "--data-dir", "data"]),
        CMD_LIMIT,
        "crawlcache ca --data-dir data",
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let expected = std::path::absolute(dir.join("data/ca/ca.pem")).unwrap();
    assert!(
        stderr(&out).contains(&format!("no CA certificate at {}\n", expected.display())),
        "{}",
        describe(&out)
    );
}

#[test]
fn ca_init_creates_the_ca_once_and_ca_then_prints_it() {
    let dir = TestDir::new("cli-ca-init");
    let data = dir.join("data");
    let out = crawlcache_cmd(&["ca", "init", "--data-dir", path_str(&data)], CMD_LIMIT);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("created a new local CA"), "{}", describe(&out));
    let path = PathBuf::from(stdout(&out).trim());
    assert!(path.is_file(), "{}", describe(&out));
    let pem = std::fs::read_to_string(&path).unwrap();

    // `ca path` (and plain `ca`) now print the same path, `--pem` the same certificate.
    for args in [&["ca", "path"][..], &["ca"]] {
        let mut args = args.to_vec();
        args.extend(["--data-dir", path_str(&data)]);
        let out = crawlcache_cmd(&args, CMD_LIMIT);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        assert_eq!(PathBuf::from(stdout(&out).trim()), path);
        assert_eq!(stderr(&out), "", "{args:?}");
    }
    let out = crawlcache_cmd(&["ca", "path", "--pem", "--data-dir", path_str(&data)], CMD_LIMIT);
    assert_eq!(stdout(&out), pem, "{}", describe(&out));

    // A second `ca init` keeps the CA.
    assert_eq!(ca_init(&data), path);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), pem, "ca init replaced an existing CA");
}

// ---------------------------------------------------------------------------
// ca --bundle: system roots plus the CA
// ---------------------------------------------------------------------------

#[test]
fn the_bundle_verifies_public_hosts_and_intercepted_ones() {
    let dir = TestDir::new("cli-ca-bundle");
    let data = dir.join("data");
    // Two "public" roots, each with a leaf for a host the proxy would tunnel
    // untouched (tls.bypass_hosts).
    let public = test_pki(&["bank.test"]);
    let other = test_pki(&["other.test"]);
    let roots_file = dir.join("public.pem");
    std::fs::write(&roots_file, format!("{}{}", public.ca_pem, other.ca_pem)).unwrap();
    let ca_path = ca_init(&data);

    let bundle = dir.join("bundle.pem");
    let out = crawlcache_cmd(
        &[
            "ca",
            "bundle",
            path_str(&bundle),
            "--roots",
            path_str(&roots_file),
            "--data-dir",
            path_str(&data),
        ],
        CMD_LIMIT,
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(PathBuf::from(stdout(&out).trim()), bundle, "{}", describe(&out));
    assert!(stderr(&out).contains("wrote 2 root certificate(s)"), "{}", describe(&out));

    // Every root of the roots file, and the CA.
    let in_bundle = certs_in(&bundle);
    let ca_cert = certs_in(&ca_path).remove(0);
    let public_roots = certs_in(&roots_file);
    assert_eq!(public_roots.len(), 2);
    for c in public_roots.iter().chain([&ca_cert]) {
        assert!(in_bundle.contains(c), "a certificate is missing from the bundle");
    }
    assert_eq!(in_bundle.len(), 3);

    // A client trusting the bundle verifies a leaf of the public root...
    let roots = root_store(&in_bundle);
    let verifier =
        WebPkiServerVerifier::builder_with_provider(roots.clone(), provider()).build().unwrap();
    let name = ServerName::try_from("bank.test").unwrap();
    verifier
        .verify_server_cert(&public.leaf, &[], &name, &[], UnixTime::now())
        .expect("the public leaf verifies with the bundle");
    let name = ServerName::try_from("other.test").unwrap();
    verifier
        .verify_server_cert(&other.leaf, &[], &name, &[], UnixTime::now())
        .expect("the other public leaf verifies");
    handshake(public.server_config(), roots.clone(), "bank.test")
        .expect("a handshake with the public host");

    // ...and one minted by crawlcache's CA for an intercepted host.
    let ca = CertificateAuthority::load_or_create(&data).unwrap();
    handshake(ca.server_config_for("example.test").unwrap(), roots, "example.test")
        .expect("a handshake with an intercepted host");

    // What --cacert with the CA alone, or the public roots alone, would give.
    let err = handshake(public.server_config(), root_store(&[ca_cert]), "bank.test").unwrap_err();
    assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err:?}");
    let err = handshake(
        ca.server_config_for("example.test").unwrap(),
        root_store(&public_roots),
        "example.test",
    )
    .unwrap_err();
    assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err:?}");

    // Written again over itself (SSL_CERT_FILE pointing at the bundle): the CA
    // is not added twice.
    let out = crawlcache_with_ssl_cert_file(
        &["ca", "bundle", path_str(&bundle), "--data-dir", path_str(&data)],
        Some(&bundle),
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(certs_in(&bundle), in_bundle);
}

#[test]
fn bundle_roots_come_from_ssl_cert_file_and_are_checked() {
    let dir = TestDir::new("cli-ca-bundle-env");
    let data = dir.join("data");
    let ca_path = ca_init(&data);
    let public = test_pki(&["bank.test"]);
    let roots_file = dir.join("env-roots.pem");
    std::fs::write(&roots_file, &public.ca_pem).unwrap();
    let bundle = dir.join("bundle.pem");
    let bundle_args = ["ca", "bundle", path_str(&bundle), "--data-dir", path_str(&data)];

    let out = crawlcache_with_ssl_cert_file(&bundle_args, Some(&roots_file));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(certs_in(&bundle).len(), 2);
    std::fs::remove_file(&bundle).unwrap();

    // SSL_CERT_FILE naming a file that is not there.
    let missing = dir.join("missing.pem");
    let out = crawlcache_with_ssl_cert_file(&bundle_args, Some(&missing));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!("{} (from SSL_CERT_FILE)", missing.display())),
        "{}",
        describe(&out)
    );

    // SSL_CERT_FILE naming crawlcache's own CA: a bundle without one public
    // root would be useless.
    let out = crawlcache_with_ssl_cert_file(&bundle_args, Some(&ca_path));
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains("holds no root certificate besides crawlcache's own CA"),
        "{}",
        describe(&out)
    );

    // --roots naming a file without certificates.
    let junk = dir.join("junk.pem");
    std::fs::write(&junk, "no certificates here\n").unwrap();
    let out = crawlcache_cmd(
        &[
            "ca",
            "bundle",
            path_str(&bundle),
            "--roots",
            path_str(&junk),
            "--data-dir",
            path_str(&data),
        ],
        CMD_LIMIT,
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!("{} holds no root certificate", junk.display())),
        "{}",
        describe(&out)
    );
    assert!(!bundle.exists(), "a failed --bundle wrote the file");
}

#[test]
fn roots_without_bundle_and_pem_with_bundle_are_usage_errors() {
    let out = crawlcache_cmd(&["ca", "--roots", "/etc/ssl/cert.pem"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(stderr(&out).contains("--bundle"), "{}", describe(&out));
    let out = crawlcache_cmd(&["ca", "--pem", "--bundle", "b.pem"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let out = crawlcache_cmd(&["ca", "path", "--roots", "/etc/ssl/cert.pem"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let out = crawlcache_cmd(&["ca", "bundle"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "`ca bundle` needs its FILE: {}", describe(&out));
}

// ---------------------------------------------------------------------------
// config defaults and the configuration error hint
// ---------------------------------------------------------------------------

#[test]
fn config_defaults_prints_the_embedded_file() {
    let out = crawlcache_cmd(&["config", "defaults"], CMD_LIMIT);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stderr(&out), "");
    let file = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/crawlcache.toml"))
        .unwrap();
    assert!(out.stdout == file, "`config defaults` differs from config/crawlcache.toml");
    // The old spelling prints the same, and says which replaces it.
    let old = crawlcache_cmd(&["config", "--defaults"], CMD_LIMIT);
    assert!(old.status.success() && old.stdout == file, "{}", describe(&old));
    assert!(
        stderr(&old).contains(
            "`crawlcache config --defaults` is deprecated; use `crawlcache config defaults`"
        ),
        "{}",
        describe(&old)
    );
    // Without a subcommand, the help says what there is.
    let out = crawlcache_cmd(&["config"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    for sub in ["defaults", "check", "show"] {
        assert!(stderr(&out).contains(sub), "{}", describe(&out));
    }
}

#[test]
fn configuration_errors_mention_config_defaults() {
    let dir = TestDir::new("cli-config-errors");
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[cache]\nmax_sise = \"1GiB\"\n").unwrap();
    let missing = dir.join("missing.toml");
    for file in [&bad, &missing] {
        let out = crawlcache_cmd(
            &["ca", "--config", path_str(file), "--data-dir", path_str(&dir.join("data"))],
            CMD_LIMIT,
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let err = stderr(&out);
        assert!(err.contains(path_str(file)), "{err}");
        assert!(err.contains("`crawlcache config defaults`"), "{err}");
        assert!(!err.contains("config/crawlcache.toml"), "a path binary users do not have: {err}");
    }
}

// ---------------------------------------------------------------------------
// completions
// ---------------------------------------------------------------------------

#[test]
fn completions_print_a_script_for_each_shell() {
    let out = crawlcache_cmd(&["completions", "bash"], CMD_LIMIT);
    assert!(out.status.success(), "{}", describe(&out));
    let script = stdout(&out);
    assert!(script.contains("crawlcache"), "{script}");
    for sub in ["serve", "cache", "robots", "audit", "ca", "config", "completions"] {
        assert!(script.contains(sub), "no {sub} in the bash script");
    }
    for shell in ["zsh", "fish"] {
        let out = crawlcache_cmd(&["completions", shell], CMD_LIMIT);
        assert!(out.status.success(), "{}", describe(&out));
        assert!(
            stdout(&out).contains("crawlcache") && stdout(&out).contains("serve"),
            "{shell}: {}",
            describe(&out)
        );
    }
    let out = crawlcache_cmd(&["completions", "tcsh"], CMD_LIMIT);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}
