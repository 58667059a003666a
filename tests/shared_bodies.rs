//! Every body is stored once (SPEC section 3, field case C53 in
//! docs/CASES.md): the same bytes under many URLs take one copy on disk,
//! summaries count them once, purging a URL frees bytes only when no other
//! URL serves them, and compaction gives a body's space back once its last
//! reference went. Through the proxy and the `cache` commands, as a user
//! sees it.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};

const CMD_LIMIT: Duration = Duration::from_secs(120);

/// Bytes of the files under `dir` (their lengths; 0 when it is missing).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => bytes_under(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Bytes the store keeps bodies and entry records in: `packs/` and `bodies/`.
fn store_bytes(data: &Path) -> u64 {
    bytes_under(&data.join("packs")) + bytes_under(&data.join("bodies"))
}

/// Whether any pack segment or body file under `data` contains `needle`.
fn store_contains(data: &Path, needle: &[u8]) -> bool {
    fn walk(dir: &Path, needle: &[u8]) -> bool {
        let Ok(rd) = fs::read_dir(dir) else { return false };
        rd.flatten().any(|e| {
            let p = e.path();
            if p.is_dir() {
                walk(&p, needle)
            } else {
                fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            }
        })
    }
    walk(&data.join("packs"), needle) || walk(&data.join("bodies"), needle)
}

fn cli(args: &[&str]) -> (String, String) {
    let out = crawlcache_cmd(args, CMD_LIMIT);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "crawlcache {}: {}\n{stdout}\n{stderr}",
        args.join(" "),
        out.status
    );
    (stdout, stderr)
}

const ROBOTS_OFF: &str = "[robots]\nmode = \"off\"\n";

/// What `cache ls --json` lists: (responses, body bytes, distinct bodies,
/// their bytes each counted once).
fn ls_totals(data: &std::path::Path) -> (u64, u64, u64, u64) {
    let (out, _) = cli(&["cache", "ls", "--json", "--data-dir", data.to_str().unwrap()]);
    let mut distinct = std::collections::BTreeMap::new();
    let (mut rows, mut bytes) = (0, 0);
    for line in out.lines() {
        let row: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let len = row["bytes"].as_u64().unwrap_or_else(|| panic!("no bytes in {line}"));
        rows += 1;
        bytes += len;
        distinct.insert(row["body_sha256"].as_str().unwrap_or_default().to_string(), len);
    }
    (rows, bytes, distinct.len() as u64, distinct.values().sum())
}

/// Must-show 1 of issue 29: 2,000 URLs serving one 10,000-byte body.
#[test]
fn two_thousand_urls_of_one_body_take_one_copy_and_the_last_purge_frees_it_c53() {
    let body: Vec<u8> = (0..10_000u32)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[(i % 36) as usize] ^ (i / 997) as u8)
        .collect();
    let served = body.clone();
    let origin = Origin::start(move |_| {
        Reply::ok(&[("Content-Type", "text/html"), ("Cache-Control", "max-age=600")], &served)
    });
    let dir = TestDir::new("shared-2000");
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, ROBOTS_OFF, &[]);
    let url =
        |i: usize| if i < 1999 { origin.url(&format!("/a/{i}")) } else { origin.url("/b/last") };
    for i in 0..2000 {
        let resp = proxy.get(&url(i), &[]);
        assert_eq!(resp.status, 200, "{}: {}", url(i), resp.describe());
        assert_eq!(resp.body, body);
    }
    assert_eq!(
        ls_totals(&data),
        (2000, 20_000_000, 1, 10_000),
        "responses, body bytes, distinct bodies, bytes stored"
    );
    assert_eq!(proxy.metric("crawlcache_store_bytes"), 10_000);
    assert_eq!(proxy.metric("crawlcache_store_referenced_bytes"), 20_000_000);
    let proxy = proxy.restart(&[]); // every record on disk
    let on_disk = store_bytes(&data);
    let per_entry = on_disk.saturating_sub(2 * 10_000) / 2000;
    eprintln!("2,000 entries of one 10,000-byte body: {on_disk} bytes under packs/ and bodies/, {per_entry} bytes of pack per entry beyond two copies");
    // One copy in the shared body record, one in the first entry's record
    // until compaction; then a record per entry (its key, its stored head,
    // 68 bytes of framing) and a hint.
    assert!(on_disk <= 2 * 10_000 + 2000 * 250, "{on_disk} bytes on disk ({per_entry} per entry)");

    // Purge all but the last: it is still a hit with every byte.
    let origin_url = origin.url("/a/");
    let (out, _) = cli(&[
        "cache",
        "purge",
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
        "--prefix",
        &origin_url,
    ]);
    assert!(out.contains("\"entries\":1999,") && out.contains("\"freed\":0,"), "{out}");
    let last = proxy.get(&url(1999), &[]);
    assert_eq!(last.body, body);
    assert!(last.cache_status().unwrap_or_default().contains("hit"), "{}", last.describe());
    let requests_before = origin.request_count();
    // Purge the last one: its body is freed, and compaction takes it off the disk.
    let (out, _) =
        cli(&["cache", "purge", "--json", "--data-dir", data.to_str().unwrap(), &url(1999)]);
    assert!(out.contains("\"entries\":1,") && out.contains("\"freed\":10000,"), "{out}");
    assert!(
        store_contains(&data, &body[..2000]),
        "the bytes are still in the pack before compaction"
    );
    let (out, _) = cli(&["cache", "compact", "--data-dir", data.to_str().unwrap()]);
    assert!(out.contains("cache compact: pack"), "{out}");
    proxy.stop_cleanly();
    assert!(
        !store_contains(&data, &body[..2000]),
        "after compaction no byte of the body is left under packs/ or bodies/"
    );
    assert!(store_bytes(&data) < 10_000, "{} bytes left", store_bytes(&data));
    assert_eq!(origin.request_count(), requests_before);
    assert_cache_verifies(&data);
}

/// Must-show 3 of issue 29, field case C53 as reported: three URLs with
/// one 14-byte body, one of them changed at the origin, one purged.
#[test]
fn purging_a_url_whose_body_another_url_serves_frees_nothing_c53() {
    let changed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = changed.clone();
    let origin = Origin::start(move |req| {
        let body: &[u8] = if req.path() == "/u1" && flag.load(std::sync::atomic::Ordering::SeqCst) {
            b"u1 has changed now"
        } else {
            b"shared body!!\n"
        };
        Reply::ok(&[("Cache-Control", "max-age=600")], body)
    });
    let dir = TestDir::new("shared-purge");
    let data = dir.subdir("data");
    let proxy = Proxy::start_with_config(&data, ROBOTS_OFF, &[]);
    for u in ["/u1", "/u2", "/u3"] {
        assert_eq!(proxy.get(&origin.url(u), &[]).body, b"shared body!!\n");
    }
    changed.store(true, std::sync::atomic::Ordering::SeqCst);
    let u1 = proxy.get(&origin.url("/u1"), &[("Cache-Control", "no-cache")]);
    assert_eq!(u1.body, b"u1 has changed now", "{}", u1.describe());
    assert_eq!(proxy.metric("crawlcache_store_bodies"), 2);
    assert_eq!(proxy.metric("crawlcache_store_bytes"), 14 + 18);
    let (out, _) =
        cli(&["cache", "purge", "--data-dir", data.to_str().unwrap(), &origin.url("/u3")]);
    assert!(out.contains("removed 1 entry (14 B of bodies); 0 B freed"), "{out}");
    let u2 = proxy.get(&origin.url("/u2"), &[]);
    assert_eq!(u2.body, b"shared body!!\n", "every byte: {}", u2.describe());
    assert!(u2.cache_status().unwrap_or_default().contains("hit"), "{}", u2.describe());
    assert_eq!(proxy.metric("crawlcache_store_bytes"), 14 + 18);
    // Its last reference: the bytes are freed.
    let (out, _) =
        cli(&["cache", "purge", "--data-dir", data.to_str().unwrap(), &origin.url("/u2")]);
    assert!(out.contains("removed 1 entry (14 B of bodies); 14 B freed"), "{out}");
    assert_eq!(proxy.metric("crawlcache_store_bytes"), 18);
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}

/// Must-show 2 of issue 29: the Rust book crawled from two origins that
/// serve the same files (a mirror) is stored once.
#[test]
fn a_mirror_of_the_book_under_a_second_origin_adds_no_body_bytes() {
    let html = rust_docs_html_dir();
    let work = TestDir::new("shared-mirror");
    let data = work.subdir("data");
    let first = Nginx::start(&html);
    let mirror = Nginx::start(&html);
    let proxy = Proxy::start_with_config(&data, ROBOTS_OFF, &[]);
    let limit = Duration::from_secs(300);
    let run1 = wget_mirror(
        &first.url("/book/"),
        Some(&proxy.url()),
        &work.join("run1"),
        limit,
        "first origin",
    );
    let files = read_tree(&run1.out_dir);
    let stored_once = proxy.metric("crawlcache_store_bytes");
    let referenced_once = proxy.metric("crawlcache_store_referenced_bytes");
    let entries_once = proxy.metric("crawlcache_store_entries");
    let distinct: std::collections::BTreeMap<String, u64> =
        files.values().map(|b| (hex::encode(Sha256::digest(b)), b.len() as u64)).collect();
    let run2 = wget_mirror(
        &mirror.url("/book/"),
        Some(&proxy.url()),
        &work.join("run2"),
        limit,
        "the mirror",
    );
    assert_trees_equal(&files, &read_tree(&run2.out_dir), "the mirror serves the same files");
    assert_eq!(
        proxy.metric("crawlcache_store_entries"),
        2 * entries_once,
        "every URL of both origins is stored"
    );
    let stored_twice = proxy.metric("crawlcache_store_bytes");
    assert_eq!(stored_twice, stored_once, "the mirror's bodies are the first origin's: one copy");
    let referenced = proxy.metric("crawlcache_store_referenced_bytes");
    assert_eq!(referenced, 2 * referenced_once, "each origin's entries reference a full copy");
    assert!(
        stored_once >= distinct.values().sum::<u64>(),
        "{stored_once} stored for {} distinct files",
        distinct.len()
    );
    let (_, listed_bytes, _, listed_once) = ls_totals(&data);
    assert_eq!(
        (listed_bytes, listed_once),
        (referenced, stored_once),
        "cache ls: body bytes, and each distinct body once"
    );
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}
