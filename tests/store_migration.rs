//! Stores written by earlier releases (SPEC section 3): the store of format
//! 2 in `tests/fixtures/store-format-2` was written by crawlcache at commit
//! 7238623, the store of format 3 in `tests/fixtures/store-format-3` at
//! commit 738cd51 (each folder's `make.sh` regenerates it); opened by this
//! release each is migrated to format 4 and every entry it held is read
//! back and served, byte for byte, with the short bodies several entries
//! held in copies of their own now stored once. A format-1 store (the
//! release before the `format` file) is the format-2 store without that
//! file and without the commit checkpoint.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use crawlcache_policy::cache::StoredResponse;
use crawlcache_store::Store;
use sha2::{Digest, Sha256};

/// One line of the fixture's manifest.
struct Expected {
    url: String,
    accept_encoding: Option<String>,
    sha256: String,
    len: u64,
}

fn fixture() -> PathBuf {
    fixture_of(2)
}

fn fixture_of(format: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/store-format-{format}"))
}

fn manifest() -> Vec<Expected> {
    manifest_of(2)
}

fn manifest_of(format: u32) -> Vec<Expected> {
    let text = fs::read_to_string(fixture_of(format).join("manifest.tsv"))
        .expect("the fixture's manifest");
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 4, "manifest line {l:?}");
            Expected {
                url: f[0].to_string(),
                accept_encoding: (f[1] != "-").then(|| f[1].to_string()),
                sha256: f[2].to_string(),
                len: f[3].parse().expect("a length"),
            }
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A copy of the format-2 fixture in `dir/data`.
fn format_2_store(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    copy_dir(&fixture().join("data"), &data);
    assert_eq!(fs::read_to_string(data.join("format")).unwrap().trim(), "2");
    data
}

fn read_all(store: &Store, sha256: &str) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut store.open_body(sha256).expect("open body"), &mut out)
        .expect("read body");
    out
}

/// Opens `data` with this release and checks every manifest entry.
fn open_and_check(data: &Path) {
    let expected = manifest();
    let store = Store::open(data, 1 << 30).expect("the old store opens");
    assert_eq!(
        fs::read_to_string(data.join("format")).unwrap().trim(),
        "4",
        "migrated to format 4"
    );
    let mut seen = 0;
    for exp in &expected {
        let entries = store.lookup(&exp.url).unwrap();
        let e = entries
            .iter()
            .find(|e| e.body.as_ref().map(|b| b.sha256 == exp.sha256).unwrap_or(false))
            .unwrap_or_else(|| {
                panic!("{} (Accept-Encoding {:?}) was kept", exp.url, exp.accept_encoding)
            });
        let body = e.body.as_ref().unwrap();
        assert_eq!(body.len, exp.len);
        let head =
            StoredResponse::from_bytes(&e.meta).expect("the stored head of format 2 still decodes");
        assert_eq!(head.status, 200);
        let bytes = read_all(&store, &body.sha256);
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            exp.sha256,
            "{}: body byte-identical",
            exp.url
        );
        seen += 1;
    }
    assert_eq!(store.stats().entries, seen, "no entry more, none less");
    // Short bodies moved into the pack; the long one is still a file.
    for exp in &expected {
        assert_eq!(store.body_path(&exp.sha256).exists(), exp.len >= 4096, "{}", exp.url);
    }
    let report = store.verify(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_store_of_format_2_is_migrated_on_open_and_its_entries_read_back() {
    let dir = TestDir::new("migrate-format-2");
    let data = format_2_store(dir.path());
    open_and_check(&data);
    // And again: nothing left to migrate, nothing lost.
    open_and_check(&data);
}

#[test]
fn a_store_of_format_1_is_migrated_on_open_and_its_entries_read_back() {
    let dir = TestDir::new("migrate-format-1");
    let data = format_2_store(dir.path());
    fs::remove_file(data.join("format")).unwrap();
    {
        let db = sled::open(data.join("index")).unwrap();
        db.open_tree("counters").unwrap().remove(b"checkpoint").unwrap();
        db.flush().unwrap();
    }
    open_and_check(&data);
}

#[test]
fn a_format_2_store_left_by_a_crash_is_migrated_without_its_damaged_bodies() {
    let dir = TestDir::new("migrate-format-2-crash");
    let data = format_2_store(dir.path());
    // Unclean: no marker; one long body damaged, one short body gone.
    fs::remove_file(data.join("clean-shutdown")).unwrap();
    let expected = manifest();
    let long = expected.iter().find(|e| e.len >= 4096).unwrap();
    let path = |h: &str| data.join("bodies").join(&h[..2]).join(&h[2..4]).join(h);
    fs::write(path(&long.sha256), vec![0u8; long.len as usize]).unwrap();
    let short = expected.iter().find(|e| e.url.ends_with("/three-k.txt")).unwrap();
    fs::remove_file(path(&short.sha256)).unwrap();
    {
        // As if every entry was stored after the last checkpoint.
        let db = sled::open(data.join("index")).unwrap();
        db.open_tree("counters").unwrap().insert(b"checkpoint", &0u64.to_be_bytes()[..]).unwrap();
        db.flush().unwrap();
    }
    let store = Store::open(&data, 1 << 30).unwrap();
    assert!(store.lookup(&long.url).unwrap().is_empty(), "the damaged body's entry is dropped");
    assert!(store.lookup(&short.url).unwrap().is_empty(), "the missing body's entry is dropped");
    assert_eq!(store.stats().entries, expected.len() as u64 - 2);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn the_proxy_serves_every_entry_of_a_migrated_store() {
    let dir = TestDir::new("migrate-serve");
    let data = format_2_store(dir.path());
    let proxy = Proxy::start_with_config(&data, "[robots]\nmode = \"off\"\n", &["--offline"]);
    assert!(
        proxy.log_shows("migrated to store format 4", std::time::Duration::from_secs(5)),
        "progress on stderr:\n{}",
        proxy.stderr()
    );
    for exp in manifest() {
        let headers: Vec<(&str, &str)> = exp
            .accept_encoding
            .as_deref()
            .map(|ae| vec![("Accept-Encoding", ae)])
            .unwrap_or_default();
        let resp = proxy.get(&exp.url, &headers);
        assert_eq!(resp.status, 200, "{}: {}", exp.url, resp.describe());
        assert!(resp.complete);
        assert_eq!(
            hex::encode(Sha256::digest(&resp.body)),
            exp.sha256,
            "{}: served byte-identical",
            exp.url
        );
        let cs = resp.cache_status().unwrap_or_default();
        assert!(cs.contains("hit"), "{}: answered from the cache: {cs}", exp.url);
    }
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}

/// A copy of the format-3 fixture in `dir/data`.
fn format_3_store(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    copy_dir(&fixture_of(3).join("data"), &data);
    assert_eq!(fs::read_to_string(data.join("format")).unwrap().trim(), "3");
    data
}

/// Must-show 4 of issue 29 (field case C53): a store of format 3 kept a
/// copy of a short body in every entry that had it; migrated, each body is
/// stored once, every entry reads back byte for byte, and a compaction
/// gives the copies' space back.
#[test]
fn a_store_of_format_3_is_migrated_with_its_duplicate_bodies_merged() {
    let dir = TestDir::new("migrate-format-3");
    let data = format_3_store(dir.path());
    let expected = manifest_of(3);
    let distinct: std::collections::BTreeMap<&str, u64> =
        expected.iter().map(|e| (e.sha256.as_str(), e.len)).collect();
    let store = Store::open(&data, 1 << 30).expect("the format-3 store opens");
    assert_eq!(
        fs::read_to_string(data.join("format")).unwrap().trim(),
        "4",
        "migrated to format 4"
    );
    let st = store.stats();
    assert_eq!(st.entries, expected.len() as u64);
    assert_eq!(st.bodies, distinct.len() as u64, "one body per distinct SHA-256: {st:?}");
    assert_eq!(st.bytes_stored, distinct.values().sum::<u64>(), "{st:?}");
    assert_eq!(st.bytes_referenced, expected.iter().map(|e| e.len).sum::<u64>(), "{st:?}");
    for exp in &expected {
        let entries = store.lookup(&exp.url).unwrap();
        let e = entries
            .iter()
            .find(|e| e.body.as_ref().is_some_and(|b| b.sha256 == exp.sha256))
            .unwrap_or_else(|| {
                panic!("{} (Accept-Encoding {:?}) was kept", exp.url, exp.accept_encoding)
            });
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut store.read_body(e).unwrap().into_reader(), &mut bytes)
            .unwrap();
        assert_eq!(hex::encode(Sha256::digest(&bytes)), exp.sha256, "{}: byte-identical", exp.url);
    }
    assert!(store.verify(false).unwrap().is_clean());
    let c = store.compact().unwrap();
    // Three copies of 10,000 bytes and three of 14 became one each.
    assert!(c.pack_bytes_before - c.pack_bytes_after >= 2 * 10_000, "{c:?}");
    assert!(store.verify(false).unwrap().is_clean());
    drop(store);
    // Served as hits by the proxy afterwards.
    let proxy = Proxy::start_with_config(&data, "[robots]\nmode = \"off\"\n", &["--offline"]);
    for exp in &expected {
        let headers: Vec<(&str, &str)> = exp
            .accept_encoding
            .as_deref()
            .map(|ae| vec![("Accept-Encoding", ae)])
            .unwrap_or_default();
        let resp = proxy.get(&exp.url, &headers);
        assert_eq!(resp.status, 200, "{}: {}", exp.url, resp.describe());
        assert_eq!(
            hex::encode(Sha256::digest(&resp.body)),
            exp.sha256,
            "{}: served byte-identical",
            exp.url
        );
        assert!(resp.cache_status().unwrap_or_default().contains("hit"), "{}: a hit", exp.url);
    }
    proxy.stop_cleanly();
    assert_cache_verifies(&data);
}

/// The same migration when the proxy opens the store: progress on stderr.
#[test]
fn the_proxy_migrates_a_format_3_store_and_says_so() {
    let dir = TestDir::new("migrate-format-3-proxy");
    let data = format_3_store(dir.path());
    let proxy = Proxy::start_with_config(&data, "[robots]\nmode = \"off\"\n", &["--offline"]);
    assert!(
        proxy.log_shows("migrated to store format 4", std::time::Duration::from_secs(5)),
        "{}",
        proxy.stderr()
    );
    let err = proxy.stderr();
    assert!(err.contains("sharing duplicate short bodies"), "progress on stderr:\n{err}");
    proxy.stop_cleanly();
}
