//! The body store as the proxy and `crawlcache cache ...` rely on it
//! (SPEC section 3): content addressing, reference counts, the LRU (CLOCK)
//! budget, persistence across restarts, leftovers, verify and repair.
//!
//! Bodies shorter than 4096 bytes (the default `store.inline_max_bytes`)
//! live in their entry's pack record, longer ones in files of their own;
//! tests about body files use [`long`] bodies.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Barrier};

#[path = "../../../tests/common/tmpfs.rs"]
mod tmpfs;

use crawlcache_store::{CommittedBody, Store, StoreError};
use sha2::{Digest, Sha256};

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A body long enough to get a file of its own: `seed` repeated to 5000 bytes.
fn long(seed: &[u8]) -> Vec<u8> {
    seed.iter().copied().cycle().take(5000).collect()
}

/// The bytes of a stored body, whether a file or in the pack.
fn read_stored(store: &Store, sha256: &str) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut store.open_body(sha256).expect("open body"), &mut out)
        .expect("read body");
    out
}

/// Streams `bytes` into the store in 7-byte chunks and finishes the body.
fn put_body(store: &Store, bytes: &[u8]) -> CommittedBody {
    let mut w = store.begin_body().expect("begin body");
    for chunk in bytes.chunks(7) {
        w.write(chunk).expect("write chunk");
    }
    w.finish().expect("finish body")
}

/// Stores `bytes` as the body of `url` (no `Vary`).
fn store_url(store: &Store, url: &str, bytes: &[u8]) -> CommittedBody {
    let body = put_body(store, bytes);
    store.insert(url, b"", format!("meta of {url}").as_bytes(), Some(&body)).expect("insert");
    body
}

/// Bytes the budget counts for `url` stored by [`store_url`] with a short
/// body of `len` bytes (its pack record: framing, key, metadata, body),
/// as a store with room to spare counts it. URLs of one length make
/// records of one length, so a budget of `n * slot(..)` holds `n` of them.
fn slot(url: &str, len: usize) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    store_url(&store, url, &vec![9u8; len]);
    let st = store.stats();
    assert!(st.budget_bytes > len as u64, "the record's framing is counted: {st:?}");
    st.budget_bytes
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(files_in(&e.path()));
            } else {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}

fn urls(store: &Store) -> Vec<String> {
    let mut v: Vec<String> =
        store.entries().expect("entries").into_iter().map(|e| e.primary_key).collect();
    v.sort();
    v
}

#[test]
fn a_finished_body_is_named_by_its_sha256_and_fanned_out() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let data = b"<html>hello, crawler</html>".repeat(1000);
    let body = put_body(&store, &data);
    let hash = sha256_hex(&data);
    assert_eq!(body, CommittedBody { sha256: hash.clone(), len: data.len() as u64 });
    let path = dir.path().join("bodies").join(&hash[..2]).join(&hash[2..4]).join(&hash);
    assert_eq!(store.body_path(&hash), path);
    assert_eq!(fs::read(&path).unwrap(), data);
    assert!(files_in(&dir.path().join("tmp")).is_empty(), "no temporary file survives finish");
    store.insert("http://example.com/", b"", b"head", Some(&body)).unwrap();
    let mut read = Vec::new();
    std::io::Read::read_to_end(&mut store.open_body(&hash).unwrap(), &mut read).unwrap();
    assert_eq!(read, data);
}

#[test]
fn an_empty_body_is_a_body_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1000).unwrap();
    let body = store.begin_body().unwrap().finish().unwrap();
    assert_eq!(body.sha256, sha256_hex(b""));
    store.insert("http://example.com/empty", b"", b"", Some(&body)).unwrap();
    assert!(store.open_body(&body.sha256).is_ok());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn identical_bodies_are_stored_once_and_deleted_with_their_last_reference() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let data = &long(b"same bytes from two URLs");
    let a = store_url(&store, "http://a.example/1", data);
    let b = store_url(&store, "http://b.example/2", data);
    assert_eq!(a, b);
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (2, 1, data.len() as u64));
    assert_eq!(files_in(&dir.path().join("bodies")).len(), 1);

    assert_eq!(store.remove("http://a.example/1").unwrap(), 1);
    store.flush().unwrap();
    assert!(store.body_path(&a.sha256).exists(), "still referenced by the other URL");
    assert_eq!(store.stats().bodies, 1);

    assert!(store.remove_variant("http://b.example/2", b"").unwrap());
    store.flush().unwrap();
    assert!(!store.body_path(&a.sha256).exists(), "deleted with its last reference");
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (0, 0, 0));
    assert!(store.verify(false).unwrap().is_clean());
}

/// SPEC section 3: short bodies are content-addressed too (field case C53).
#[test]
fn identical_short_bodies_are_stored_once_and_stay_while_an_entry_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let data = b"same short bytes from two URLs";
    let a = store_url(&store, "http://a.example/1", data);
    let b = store_url(&store, "http://b.example/2", data);
    assert_eq!(a, b, "the same content address");
    assert!(files_in(&dir.path().join("bodies")).is_empty(), "no file: the body lives in the pack");
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (2, 1, data.len() as u64));
    assert_eq!(stats.bytes_referenced, 2 * data.len() as u64);
    assert_eq!(read_stored(&store, &a.sha256), data);
    let gone = store.remove_variant_freeing("http://a.example/1", b"").unwrap();
    assert_eq!((gone.entries, gone.freed), (1, 0), "the other entry still has the body");
    let e = store.lookup("http://b.example/2").unwrap().pop().unwrap();
    assert_eq!(e.body.as_ref(), Some(&b));
    assert_eq!(read_stored(&store, &b.sha256), data);
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (1, 1, data.len() as u64));
    assert!(store.verify(false).unwrap().is_clean());
    let gone = store.remove_variant_freeing("http://b.example/2", b"").unwrap();
    assert_eq!((gone.entries, gone.freed), (1, data.len() as u64), "its last reference");
    assert_eq!(store.stats().bodies, 0);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn replacing_a_variant_releases_its_old_body() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let old = store_url(&store, "http://example.com/page", &long(b"version one"));
    let new = store_url(&store, "http://example.com/page", &long(b"version two, longer"));
    store.flush().unwrap();
    assert!(!store.body_path(&old.sha256).exists());
    assert!(store.body_path(&new.sha256).exists());
    let entries = store.lookup("http://example.com/page").unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].body.as_ref(), Some(&new));
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (1, 1, new.len));

    // Replacing with the very same body keeps it.
    store_url(&store, "http://example.com/page", &long(b"version two, longer"));
    store.flush().unwrap();
    assert!(store.body_path(&new.sha256).exists());
    assert_eq!(store.stats().bodies, 1);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn variants_of_one_uri_coexist_and_are_removed_together_or_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let gz = put_body(&store, &long(b"gzip bytes"));
    let br = put_body(&store, b"br bytes");
    store.insert("http://example.com/x", b"accept-encoding: gzip", b"m1", Some(&gz)).unwrap();
    store.insert("http://example.com/x", b"accept-encoding: br", b"m2", Some(&br)).unwrap();
    store.insert("http://example.com/xy", b"", b"m3", None).unwrap();

    let mut found = store.lookup("http://example.com/x").unwrap();
    found.sort_by(|a, b| a.secondary_key.cmp(&b.secondary_key));
    assert_eq!(found.len(), 2, "a URI that prefixes another one does not see its entries");
    assert_eq!(found[0].secondary_key, b"accept-encoding: br");
    assert_eq!(found[0].meta, b"m2");
    assert_eq!(found[1].body.as_ref(), Some(&gz));
    assert_eq!(store.lookup("http://example.com/xy").unwrap()[0].body, None);
    assert!(store.lookup("http://example.com/").unwrap().is_empty());

    assert!(store.remove_variant("http://example.com/x", b"accept-encoding: br").unwrap());
    assert!(!store.remove_variant("http://example.com/x", b"accept-encoding: br").unwrap());
    assert_eq!(store.remove("http://example.com/x").unwrap(), 1);
    assert_eq!(store.remove("http://example.com/x").unwrap(), 0);
    assert_eq!(urls(&store), vec!["http://example.com/xy".to_string()]);
    store.flush().unwrap();
    assert!(!store.body_path(&gz.sha256).exists());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn update_meta_freshens_the_head_and_keeps_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let body = store_url(&store, "http://example.com/", b"payload");
    let before = store.lookup("http://example.com/").unwrap()[0].last_used;
    assert!(store.update_meta("http://example.com/", b"", b"freshened by a 304").unwrap());
    let e = &store.lookup("http://example.com/").unwrap()[0];
    assert_eq!(e.meta, b"freshened by a 304");
    assert_eq!(e.body.as_ref(), Some(&body));
    assert!(e.last_used > before, "a 304 marks the entry used");
    assert!(!store.update_meta("http://example.com/gone", b"", b"x").unwrap());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn a_dropped_writer_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let mut w = store.begin_body().unwrap();
    w.write(b"the origin hung up half way").unwrap();
    assert_eq!(w.len(), 27);
    assert!(files_in(&dir.path().join("tmp")).is_empty(), "a short body is held in memory");
    w.write(&long(b"and then sent more")).unwrap();
    assert!(files_in(&dir.path().join("tmp")).is_empty(), "so is a body file of up to 64 KiB");
    w.write(&[b'x'; 64 * 1024]).unwrap();
    assert_eq!(
        files_in(&dir.path().join("tmp")).len(),
        1,
        "a longer one spills to a temporary file"
    );
    drop(w);
    assert!(files_in(&dir.path().join("tmp")).is_empty());
    assert!(files_in(&dir.path().join("bodies")).is_empty());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn a_body_larger_than_the_whole_budget_is_refused_without_evicting_anything() {
    let dir = tempfile::tempdir().unwrap();
    let budget = slot("http://example.com/small", 60);
    assert!(budget < 240, "{budget}");
    let store = Store::open(dir.path(), budget).unwrap();
    store_url(&store, "http://example.com/small", &[1u8; 60]);
    let mut w = store.begin_body().unwrap();
    w.write(&[2u8; 120]).unwrap();
    match w.write(&[2u8; 120]) {
        Err(StoreError::TooLarge { len: 240, max_size }) if max_size == budget => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(w.write(b"more").is_err(), "a failed writer stays failed");
    assert!(w.finish().is_err());
    assert!(files_in(&dir.path().join("tmp")).is_empty());
    assert_eq!(urls(&store), vec!["http://example.com/small".to_string()]);
    assert_eq!(store.stats().evictions, 0);
}

#[test]
fn entries_not_used_since_they_were_stored_are_evicted_first_to_fit_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    // Room for three entries stored by store_url with bodies of 100 bytes.
    let store = Store::open(dir.path(), 3 * slot("http://e/a", 100)).unwrap();
    store_url(&store, "http://e/a", &[b'a'; 100]);
    store_url(&store, "http://e/b", &[b'b'; 100]);
    store_url(&store, "http://e/c", &[b'c'; 100]);
    store.touch("http://e/a", b""); // a is used, b and c are not
    let body = put_body(&store, &[b'd'; 100]);
    assert_eq!(store.insert("http://e/d", b"", b"", Some(&body)).unwrap(), 1);
    assert_eq!(
        urls(&store),
        vec!["http://e/a", "http://e/c", "http://e/d"],
        "the oldest unused entry went"
    );

    // A body that needs two slots evicts the two oldest unused entries (c,
    // then d); a had its second chance when b went, and stays this time.
    let body = put_body(&store, &[b'e'; 200]);
    assert_eq!(store.insert("http://e/e", b"", b"", Some(&body)).unwrap(), 2);
    assert_eq!(urls(&store), vec!["http://e/a", "http://e/e"]);
    let stats = store.stats();
    assert_eq!(stats.bytes_stored, 300);
    assert_eq!(stats.evictions, 3);
    // Not used again, a is next.
    store_url(&store, "http://e/f", &[b'f'; 100]);
    assert_eq!(urls(&store), vec!["http://e/e", "http://e/f"]);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn a_shared_body_is_freed_only_when_its_last_entry_is_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 12_500).unwrap();
    store_url(&store, "http://e/1", &long(&[1u8]));
    store_url(&store, "http://e/2", &long(&[1u8])); // same body: still 5000 bytes
    store_url(&store, "http://e/3", &long(&[3u8]));
    assert_eq!(store.stats().bytes_stored, 10_000);
    // 5000 more bytes: evicting /1 frees nothing (shared), /2 frees the body.
    let body = put_body(&store, &long(&[4u8]));
    assert_eq!(store.insert("http://e/4", b"", b"", Some(&body)).unwrap(), 2);
    assert_eq!(urls(&store), vec!["http://e/3", "http://e/4"]);
    assert_eq!(store.stats().bytes_stored, 10_000);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn entries_and_lru_order_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 3 * slot("http://e/a", 100);
    {
        let store = Store::open(dir.path(), budget).unwrap();
        store_url(&store, "http://e/a", &[b'a'; 100]);
        store_url(&store, "http://e/b", &[b'b'; 100]);
        store_url(&store, "http://e/c", &[b'c'; 100]);
        store.touch("http://e/a", b"");
        store.touch("http://e/b", b"");
        store.flush().unwrap();
    }
    let store = Store::open(dir.path(), budget).unwrap();
    assert_eq!(urls(&store), vec!["http://e/a", "http://e/b", "http://e/c"]);
    assert_eq!(store.lookup("http://e/b").unwrap()[0].meta, b"meta of http://e/b");
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (3, 3, 300));
    // c is the only entry not used since it was stored; a and b get their
    // second chance, and new stamps continue after the old ones.
    store_url(&store, "http://e/d", &[b'd'; 100]);
    assert_eq!(urls(&store), vec!["http://e/a", "http://e/b", "http://e/d"]);
    store_url(&store, "http://e/e", &[b'e'; 100]);
    assert_eq!(urls(&store), vec!["http://e/a", "http://e/b", "http://e/e"]);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn touches_are_kept_by_a_close_without_an_explicit_flush() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 2 * slot("http://e/a", 100);
    {
        let store = Store::open(dir.path(), budget).unwrap();
        store_url(&store, "http://e/a", &[b'a'; 100]);
        store_url(&store, "http://e/b", &[b'b'; 100]);
        store.touch("http://e/a", b"");
    }
    let store = Store::open(dir.path(), budget).unwrap();
    store_url(&store, "http://e/c", &[b'c'; 100]);
    assert_eq!(urls(&store), vec!["http://e/a", "http://e/c"]);
}

#[test]
fn leftover_temporary_files_are_swept_at_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), 1000).unwrap());
    fs::write(dir.path().join("tmp").join("4242-7.tmp"), b"half a body").unwrap();
    let store = Store::open(dir.path(), 1000).unwrap();
    assert!(files_in(&dir.path().join("tmp")).is_empty());
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn verify_reports_leftover_temporary_files_but_not_those_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1000).unwrap();
    let mut live = store.begin_body().unwrap();
    live.write(b"in flight").unwrap();
    assert!(store.verify(false).unwrap().is_clean(), "a live writer is not a leftover");
    fs::write(dir.path().join("tmp").join("stale.tmp"), b"x").unwrap();
    let report = store.verify(false).unwrap();
    assert_eq!(report.leftover_tmp, vec!["stale.tmp".to_string()]);
    assert!(store.verify(true).unwrap().repaired);
    assert!(store.verify(false).unwrap().is_clean());
    let body = live.finish().unwrap();
    assert_eq!(body.sha256, sha256_hex(b"in flight"));
}

#[test]
fn verify_detects_and_repairs_a_corrupted_body() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let bad = store_url(&store, "http://e/bad", &long(b"original bytes"));
    store_url(&store, "http://e/good", &long(b"other bytes"));
    fs::write(store.body_path(&bad.sha256), long(b"flipped bytes!")).unwrap();

    let report = store.verify(false).unwrap();
    assert_eq!(report.corrupt_bodies, vec![bad.sha256.clone()]);
    assert!(!report.is_clean());
    assert_eq!(report.entries_checked, 2);
    assert_eq!(report.bodies_checked, 2);

    let report = store.verify(true).unwrap();
    assert!(report.repaired);
    assert_eq!(urls(&store), vec!["http://e/good"], "the entry of a corrupt body is dropped");
    assert!(!store.body_path(&bad.sha256).exists());
    assert!(store.verify(false).unwrap().is_clean());
    assert_eq!(store.stats().bodies, 1);
}

#[test]
fn verify_detects_and_repairs_a_missing_body() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let gone = store_url(&store, "http://e/1", &long(b"will vanish"));
    store_url(&store, "http://e/2", &long(b"will vanish"));
    store_url(&store, "http://e/3", b"stays");
    fs::remove_file(store.body_path(&gone.sha256)).unwrap();
    assert!(matches!(store.open_body(&gone.sha256), Err(StoreError::MissingBody(_))));

    let report = store.verify(false).unwrap();
    assert_eq!(report.missing_bodies, vec![gone.sha256.clone()]);
    assert!(!report.is_clean());
    assert!(store.verify(true).unwrap().repaired);
    assert_eq!(urls(&store), vec!["http://e/3"]);
    let stats = store.stats();
    assert_eq!((stats.entries, stats.bodies, stats.bytes_stored), (1, 1, 5));
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn verify_detects_and_repairs_orphan_and_stray_files() {
    let dir = tempfile::tempdir().unwrap();
    // A crash between rename and the index transaction leaves a complete,
    // correctly named body that nothing references.
    let orphan = b"renamed into place, never indexed";
    let hash = sha256_hex(orphan);
    {
        let store = Store::open(dir.path(), 1 << 20).unwrap();
        store_url(&store, "http://e/kept", b"kept");
    } // clean close: the next open does not sweep orphans itself
    let path = dir.path().join("bodies").join(&hash[..2]).join(&hash[2..4]).join(&hash);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, orphan).unwrap();
    fs::write(dir.path().join("bodies").join("README"), b"stray").unwrap();

    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let report = store.verify(false).unwrap();
    assert_eq!(report.orphan_bodies.len(), 2, "{report:?}");
    assert_eq!(report.orphan_bodies[0], hash);
    assert!(!report.is_clean());
    assert!(store.verify(true).unwrap().repaired);
    assert!(!path.exists());
    assert!(!dir.path().join("bodies").join("README").exists());
    assert_eq!(urls(&store), vec!["http://e/kept"]);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn a_second_open_of_the_same_directory_says_it_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Store::open(dir.path(), 1000).unwrap();
    let err = Store::open(dir.path(), 1000).expect_err("the index is locked");
    assert!(matches!(err, StoreError::InUse { .. }), "{err:?}");
    assert!(err.to_string().contains("in use by a running crawlcache"), "{err}");
}

#[test]
fn opening_a_missing_body_is_a_missing_body_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1000).unwrap();
    assert!(matches!(store.open_body(&"0".repeat(64)), Err(StoreError::MissingBody(_))));
    assert!(matches!(store.open_body("../../etc/passwd"), Err(StoreError::MissingBody(_))));
    let body = CommittedBody { sha256: "1".repeat(64), len: 3 };
    assert!(matches!(
        store.insert("http://e/", b"", b"", Some(&body)),
        Err(StoreError::MissingBody(_))
    ));
    assert_eq!(store.stats().entries, 0);
}

#[test]
fn concurrent_inserts_and_removals_of_one_body_stay_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let threads = 8;
    let rounds = 40;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for r in 0..rounds {
                    // Every thread writes the same shared body and, now and
                    // then, one of its own; entries come and go so the shared
                    // count keeps dropping to zero while others finish it.
                    let url = format!("http://e/{t}/{}", r % 3);
                    let shared = put_body(&store, &long(b"the one body everybody fetches"));
                    store.insert(&url, b"", b"", Some(&shared)).unwrap();
                    store.touch(&url, b"");
                    if r % 4 == 0 {
                        let own = put_body(&store, format!("own body {t} {r}").as_bytes());
                        store.insert(&format!("http://e/{t}/own"), b"", b"", Some(&own)).unwrap();
                    }
                    if r % 2 == 1 {
                        store.remove(&url).unwrap();
                    }
                    // Every stored entry can be read.
                    for e in store.lookup(&url).unwrap() {
                        if let Some(b) = e.body {
                            store.open_body(&b.sha256).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    store.flush().unwrap();
    let report = store.verify(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let entries = store.entries().unwrap();
    let shared = sha256_hex(&long(b"the one body everybody fetches"));
    let sharing =
        entries.iter().filter(|e| e.body.as_ref().map(|b| &b.sha256) == Some(&shared)).count();
    assert!(sharing > 0);
    assert_eq!(store.stats().entries, entries.len() as u64);
    for e in &entries {
        let b = e.body.as_ref().unwrap();
        assert_eq!(sha256_hex(&read_stored(&store, &b.sha256)), b.sha256);
    }
}

#[test]
fn concurrent_inserts_under_a_tight_budget_respect_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 2000).unwrap();
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for r in 0..30 {
                    store_url(
                        &store,
                        &format!("http://e/{t}/{r}"),
                        format!("{t}-{r}").repeat(50).as_bytes(),
                    );
                    store.touch(&format!("http://e/{t}/{}", r / 2), b"");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = store.stats();
    assert!(stats.budget_bytes <= 2000, "records and bodies within the budget: {stats:?}");
    assert!(stats.evictions > 0);
    store.flush().unwrap();
    let held: u64 =
        store.entries().unwrap().iter().map(|e| e.body.as_ref().map_or(0, |b| b.len)).sum();
    assert_eq!(held, stats.bytes_stored, "the kept total is what the entries hold");
    let report = store.verify(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

/// ENOSPC for real: the store lives on a tiny tmpfs (needs root to mount,
/// as CI has; elsewhere it prints `SKIPPED: ...` — the unit tests inject the
/// same error).
#[test]
fn a_full_disk_while_writing_leaves_nothing_behind() {
    let mnt = tempfile::tempdir().unwrap();
    let Some(_tmpfs) =
        tmpfs::mount_or_skip("a_full_disk_while_writing_leaves_nothing_behind", mnt.path(), "8m")
    else {
        return;
    };
    let dir = mnt.path().join("store");
    {
        let store = Store::open(&dir, 1 << 30).unwrap();
        store_url(&store, "http://e/before", b"stored before the disk filled up");
        let mut w = store.begin_body().unwrap();
        let chunk = vec![7u8; 256 * 1024];
        let err = loop {
            if let Err(e) = w.write(&chunk) {
                break e;
            }
            assert!(w.len() < 64 << 20, "an 8 MiB tmpfs never filled up");
        };
        match &err {
            StoreError::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(28), "{err}"),
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(files_in(&dir.join("tmp")).is_empty(), "the partial body is removed at once");
        drop(w);
        // The space is back: the store keeps working.
        store_url(&store, "http://e/after", b"stored after");
        assert_eq!(urls(&store), vec!["http://e/after", "http://e/before"]);
        assert!(store.verify(false).unwrap().is_clean());
    }
}

#[test]
fn a_store_of_an_unknown_format_is_refused_with_a_message_saying_how() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), 1 << 20).unwrap());
    fs::write(dir.path().join("format"), "5\n").unwrap();
    let err = Store::open(dir.path(), 1 << 20).unwrap_err();
    assert!(matches!(err, StoreError::Format(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("format 5") && msg.contains("move the directory aside"), "{msg}");
    fs::write(dir.path().join("format"), "garbage").unwrap();
    assert!(matches!(Store::open(dir.path(), 1 << 20), Err(StoreError::Format(_))));
}
