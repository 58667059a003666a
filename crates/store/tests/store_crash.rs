//! Crash safety of the store (SPEC section 3): a process killed at any moment
//! leaves either the old state or the new one, and the next start cleans up
//! what the crash left (temporary files, bodies renamed but never indexed,
//! the torn end of a pack segment). The mixed load shares short bodies
//! between URLs (the same bytes under several of them, then purged from
//! some and stored again) while it is killed: no entry may point at a
//! missing or torn shared body, and each body stays stored once.
//!
//! The crashing process is this test binary run again in "child" mode (the
//! `child_process` test below does nothing unless the environment asks it
//! to); the child is killed with SIGKILL, no destructor runs.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crawlcache_store::Store;
use sha2::{Digest, Sha256};

const CHILD_MODE: &str = "CRAWLCACHE_STORE_TEST_CHILD";
const CHILD_DIR: &str = "CRAWLCACHE_STORE_TEST_DIR";
const BUDGET: u64 = 40 * 1024;
/// The budget of the mixed-load rounds (their large bodies need room).
const MIXED_BUDGET: u64 = 1024 * 1024;

fn kill_self() -> ! {
    let _ = Command::new("kill").arg("-KILL").arg(std::process::id().to_string()).status();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn put(store: &Store, url: &str, bytes: &[u8]) {
    let mut w = store.begin_body().unwrap();
    for chunk in bytes.chunks(1000) {
        w.write(chunk).unwrap();
    }
    let body = w.finish().unwrap();
    store.insert(url, b"", url.as_bytes(), Some(&body)).unwrap();
}

/// Stores `bytes` under `url`, saying on stdout what it is about to store
/// (`WRITING url sha256`, the SHA-256 of the bytes meant, computed here)
/// and then that it is stored (`STORED url sha256`): from that line on,
/// the child has answered that the body is stored.
fn put_meta(store: &Store, url: &str, meta: &str, bytes: &[u8]) {
    let meant = hex::encode(Sha256::digest(bytes));
    println!("WRITING {url} {meant}");
    let mut w = store.begin_body().unwrap();
    for chunk in bytes.chunks(16 * 1024) {
        w.write(chunk).unwrap();
    }
    let body = w.finish().unwrap();
    assert_eq!(body.sha256, meant, "the store names a body by the SHA-256 of its bytes");
    store.insert(url, b"", meta.as_bytes(), Some(&body)).unwrap();
    println!("STORED {url} {meant}");
}

/// The bytes of a stored body (a file, or in the pack), as the store reads
/// them back.
fn read_stored(store: &Store, sha256: &str) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut store.open_body(sha256).unwrap(), &mut out).unwrap();
    out
}

/// The long bodies of these tests are files of their own (4096 bytes and
/// more), the short ones live in pack records.
fn long(text: &str) -> Vec<u8> {
    text.as_bytes().iter().copied().cycle().take(5000).collect()
}

/// Not a test of its own: the body of the child processes, which run this
/// binary with `--ignored child_process`. Ignored in a normal run, where it
/// would pass without checking anything.
#[test]
#[ignore = "the body of the child processes of the other tests; not a test of its own"]
fn child_process() {
    let Ok(mode) = std::env::var(CHILD_MODE) else { return };
    let dir = PathBuf::from(std::env::var(CHILD_DIR).unwrap());
    // finish-then-crash writes a body past what a writer holds in memory (64 KiB).
    let budget = if mode == "mixed" || mode == "finish-then-crash" { MIXED_BUDGET } else { BUDGET };
    // The parent may have closed the store a moment ago: sled lets go of
    // its lock from background threads that can outlive the close briefly.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let store = loop {
        match Store::open(&dir, budget) {
            Err(crawlcache_store::StoreError::InUse { .. })
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => break other.unwrap(),
        }
    };
    match mode.as_str() {
        "finish-then-crash" => {
            let mut w = store.begin_body().unwrap();
            w.write(&long("renamed into place, then the power went out")).unwrap();
            w.finish().unwrap();
            let mut half = store.begin_body().unwrap();
            // Past the 64 KiB a writer holds in memory: a temporary file.
            half.write(&long("half a body").repeat(14)).unwrap();
            kill_self();
        }
        "churn" => {
            println!("READY");
            let seed = std::process::id() as usize;
            for i in 0usize.. {
                let n = i.wrapping_mul(2654435761).wrapping_add(seed);
                let url = format!("http://e/{}", n % 40);
                match n % 7 {
                    0 => {
                        store.remove(&url).unwrap();
                    }
                    1 => store.touch(&url, b""),
                    2 => {
                        // A writer abandoned mid-body (a dropped connection).
                        let mut w = store.begin_body().unwrap();
                        w.write(&vec![9u8; 5000]).unwrap();
                    }
                    // Bodies shared by several URLs, replaced, evicted.
                    _ => put(&store, &url, &vec![(n % 23) as u8; 1000 + (n % 23) * 400]),
                }
            }
        }
        "uncommitted-then-crash" => {
            put(&store, "http://e/committed", b"committed before the power went out");
            store.flush().unwrap();
            store.pause_commits_for_tests();
            // Two long bodies (files), then two short ones (pack records).
            for i in 0..4 {
                put(&store, &format!("http://e/late{i}"), &late_body(i));
            }
            store.flush().unwrap(); // the index holds them; their records and bodies were never synced
            println!("READY");
            kill_self();
        }
        "mixed" => {
            println!("READY");
            let seed = std::process::id() as usize;
            for i in 0usize.. {
                let n = i.wrapping_mul(2654435761).wrapping_add(seed);
                let url = format!("http://e/{}", n % 60);
                match n % 11 {
                    0 => {
                        store.remove(&url).unwrap();
                    }
                    1 | 2 => store.touch(&url, b""),
                    3 | 4 => {
                        // A 304 freshening: new metadata, same body.
                        let _ = store
                            .update_meta(&url, b"", format!("{url}#fresh{i}").as_bytes())
                            .unwrap();
                    }
                    5 => {
                        let mut w = store.begin_body().unwrap();
                        w.write(&vec![9u8; 5000]).unwrap();
                    }
                    6 => {
                        // A large body, written in many chunks.
                        let big: Vec<u8> = (0..200_000u32)
                            .map(|j| (j.wrapping_mul(31) ^ n as u32) as u8)
                            .collect();
                        put_meta(&store, &url, &format!("{url}#big"), &big);
                    }
                    7 => {
                        // One short body under three URLs (shared), then
                        // two of them purged: the third keeps it.
                        let trio: Vec<String> =
                            (0..3).map(|k| format!("http://e/{}", (n + k * 20) % 60)).collect();
                        let bytes = vec![(n % 5) as u8 + 100; 700 + (n % 5) * 300];
                        for u in &trio {
                            put_meta(&store, u, &format!("{u}#trio{i}"), &bytes);
                        }
                        store.remove(&trio[0]).unwrap();
                        store.remove(&trio[1]).unwrap();
                    }
                    _ => put_meta(
                        &store,
                        &url,
                        &format!("{url}#new{i}"),
                        &vec![(n % 23) as u8; 100 + (n % 23) * 400],
                    ),
                }
            }
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// The body of `http://e/late{i}`: files for 0 and 1, pack records for 2 and 3.
fn late_body(i: usize) -> Vec<u8> {
    let text = format!("late body {i}, never synced. ");
    if i < 2 {
        long(&text)
    } else {
        text.repeat(20).into_bytes()
    }
}

/// The start of every record in a pack segment (the layout is documented in
/// `crates/store/src/packs.rs`: the record's total length is the big-endian u32 at
/// offset 4).
fn record_starts(segment: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= segment.len() {
        out.push(at);
        at += u32::from_be_bytes(segment[at + 4..at + 8].try_into().unwrap()) as usize;
    }
    out
}

/// The pack segment written last.
fn last_segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> =
        std::fs::read_dir(dir.join("packs")).unwrap().map(|e| e.unwrap().path()).collect();
    segs.sort();
    segs.pop().expect("a pack segment")
}

fn child(mode: &str, dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(CHILD_DIR, dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(files_in(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn a_crash_between_rename_and_index_leaves_an_orphan_swept_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let status = child("finish-then-crash", dir.path()).wait().unwrap();
    assert!(!status.success());
    let hash = hex::encode(Sha256::digest(long("renamed into place, then the power went out")));
    let orphan = dir.path().join("bodies").join(&hash[..2]).join(&hash[2..4]).join(&hash);
    assert!(orphan.exists(), "the child got as far as the rename");
    assert_eq!(files_in(&dir.path().join("tmp")).len(), 1, "and left a temporary file");

    let store = Store::open(dir.path(), BUDGET).unwrap();
    assert!(!orphan.exists(), "an unclean shutdown makes open sweep orphans");
    assert!(files_in(&dir.path().join("tmp")).is_empty());
    let report = store.verify(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn a_process_killed_at_any_moment_leaves_a_consistent_store() {
    let dir = tempfile::tempdir().unwrap();
    for (round, ms) in [5u64, 40, 120, 300, 17, 600].into_iter().enumerate() {
        let mut c = child("churn", dir.path());
        let _out = wait_ready(&mut c);
        std::thread::sleep(Duration::from_millis(ms));
        c.kill().unwrap();
        c.wait().unwrap();

        let store = Store::open(dir.path(), BUDGET).unwrap();
        let report = store.verify(false).unwrap();
        assert!(report.is_clean(), "round {round} (killed after {ms} ms): {report:?}");
        let stats = store.stats();
        assert!(stats.budget_bytes <= BUDGET, "{stats:?}");
        eprintln!("round {round}: killed after {ms} ms: {stats:?}");
        for e in store.entries().unwrap() {
            assert_eq!(e.meta, e.primary_key.as_bytes(), "an entry is never half written");
            let body = e.body.unwrap();
            let bytes = read_stored(&store, &body.sha256);
            assert_eq!(hex::encode(Sha256::digest(&bytes)), body.sha256);
        }
    }
}

/// Reads the child's output until it says READY; returns the reader, for
/// what it says after.
fn wait_ready(c: &mut std::process::Child) -> BufReader<std::process::ChildStdout> {
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("READY") {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            panic!("child exited before it was ready: {:?}", c.wait());
        }
    }
    out
}

#[test]
fn after_a_power_loss_entries_whose_bodies_were_not_synced_are_dropped_never_served_torn() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = child("uncommitted-then-crash", dir.path());
    wait_ready(&mut c);
    c.wait().unwrap();
    // Simulate what a power loss may do to what was never synced: a body
    // file cut short, a body file holding other bytes, the pack segment
    // ending in the middle of its last record.
    let late: Vec<String> = (0..4).map(|i| hex::encode(Sha256::digest(late_body(i)))).collect();
    let path = |h: &str| dir.path().join("bodies").join(&h[..2]).join(&h[2..4]).join(h);
    let full = std::fs::read(path(&late[0])).unwrap();
    std::fs::write(path(&late[0]), &full[..full.len() / 2]).unwrap();
    std::fs::write(path(&late[1]), vec![0u8; full.len()]).unwrap();
    let seg = last_segment(dir.path());
    let bytes = std::fs::read(&seg).unwrap();
    let starts = record_starts(&bytes);
    let last = *starts.last().unwrap();
    std::fs::write(&seg, &bytes[..last + 30]).unwrap();

    let store = Store::open(dir.path(), BUDGET).unwrap();
    let mut kept: Vec<String> =
        store.entries().unwrap().into_iter().map(|e| e.primary_key).collect();
    kept.sort();
    assert_eq!(
        kept,
        ["http://e/committed", "http://e/late2"],
        "torn bodies and the torn record dropped their entries"
    );
    let report = store.verify(false).unwrap();
    assert!(report.is_clean(), "{report:?}");
    for e in store.entries().unwrap() {
        let body = e.body.unwrap();
        assert_eq!(hex::encode(Sha256::digest(read_stored(&store, &body.sha256))), body.sha256);
    }
    // The store goes on from the cut.
    put(&store, "http://e/after", b"stored after the power came back");
    drop(store);
    let store = Store::open(dir.path(), BUDGET).unwrap();
    assert_eq!(store.lookup("http://e/after").unwrap().len(), 1);
    assert!(store.verify(false).unwrap().is_clean());
}

#[test]
fn twenty_sigkills_at_random_moments_under_mixed_load_leave_verify_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut seed = std::process::id() as u64 | 1;
    // Over all rounds so far, by URL: the SHA-256 of every body the child
    // set out to store under it, and of every body it answered as stored.
    let mut meant: HashMap<String, HashSet<String>> = HashMap::new();
    let mut answered: HashMap<String, HashSet<String>> = HashMap::new();
    let mut survived_total = 0;
    for round in 0..20 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let ms = seed % 400;
        let mut c = child("mixed", dir.path());
        let mut out = wait_ready(&mut c);
        // What the child said, in order: (WRITING | STORED, URL, SHA-256).
        let reader = std::thread::spawn(move || {
            let mut said: Vec<(bool, String, String)> = Vec::new();
            let mut line = String::new();
            while out.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() == 3 && (f[0] == "STORED" || f[0] == "WRITING") {
                    said.push((f[0] == "STORED", f[1].to_string(), f[2].to_string()));
                }
                line.clear();
            }
            said
        });
        std::thread::sleep(Duration::from_millis(ms));
        c.kill().unwrap();
        c.wait().unwrap();
        let mut answered_now = 0;
        for (stored, url, sha) in reader.join().unwrap() {
            if stored {
                answered_now += 1;
                answered.entry(url).or_default().insert(sha);
            } else {
                meant.entry(url).or_default().insert(sha);
            }
        }

        let store = Store::open(dir.path(), MIXED_BUDGET).unwrap();
        let report = store.verify(false).unwrap();
        assert!(report.is_clean(), "round {round} (killed after {ms} ms): {report:?}");
        let stats = store.stats();
        assert!(stats.budget_bytes <= MIXED_BUDGET, "{stats:?}");
        let mut identical = 0;
        for e in store.entries().unwrap() {
            let meta = String::from_utf8(e.meta.clone()).unwrap();
            assert!(
                meta.starts_with(&format!("{}#", e.primary_key)),
                "an entry is never half written: {meta}"
            );
            let body = e.body.clone().unwrap();
            let bytes = read_stored(&store, &body.sha256);
            assert_eq!(
                hex::encode(Sha256::digest(&bytes)),
                body.sha256,
                "round {round}: bodies byte-identical"
            );
            assert_eq!(bytes.len() as u64, body.len);
            // Read the way the proxy serves it, too.
            let served = match store.read_body(&e).unwrap() {
                crawlcache_store::BodyData::Bytes(b) => b,
                crawlcache_store::BodyData::File(mut f) => {
                    let mut b = Vec::new();
                    std::io::Read::read_to_end(&mut f, &mut b).unwrap();
                    b
                }
            };
            assert_eq!(served, bytes, "round {round}: {} served as stored", e.primary_key);
            // The body under a URL is one the child wrote for that URL,
            // whole: never another URL's, never bytes it did not mean.
            assert!(
                meant.get(&e.primary_key).is_some_and(|s| s.contains(&body.sha256)),
                "round {round}: {} holds body {} the child never wrote for it",
                e.primary_key,
                body.sha256
            );
            if answered.get(&e.primary_key).is_some_and(|s| s.contains(&body.sha256)) {
                identical += 1;
            }
        }
        // Each body is stored once however many entries have it.
        let distinct: HashSet<String> =
            store.entries().unwrap().into_iter().filter_map(|e| e.body.map(|b| b.sha256)).collect();
        assert_eq!(
            stats.bodies as usize,
            distinct.len(),
            "round {round}: one stored body per distinct SHA-256: {stats:?}"
        );
        survived_total += identical;
        eprintln!("round {round}: killed after {ms} ms: {stats:?}, {answered_now} bodies answered as stored this round, {identical} indexed entries hold a body answered as stored, byte-identical");
    }
    // A crash may lose the last few milliseconds of answers, not all of
    // them: bodies answered as stored in earlier rounds are still there.
    assert!(survived_total > 0, "no body answered as stored survived any of the 20 kills");
}
