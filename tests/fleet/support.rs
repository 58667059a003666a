//! The fleet fixture: one origin, one Redis, optionally one bucket, three
//! crawlcache nodes configured for them; helpers to send concurrent
//! requests across the nodes and to read the nodes' fleet counters.

use crate::common::*;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// The fleet tests run one at a time: they stop servers and measure
/// request spacing.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Three nodes sharing `redis` (and `s3`, when given).
pub struct Fleet {
    pub nodes: Vec<Proxy>,
    pub redis: RedisServer,
    pub s3: Option<S3Server>,
    _dir: TestDir,
}

/// The `[fleet]` (and any `extra`) configuration of node `name`;
/// `redis_url` is the TOML value (a string, or a list for a cluster).
pub fn node_config(redis_url: &str, s3: Option<&S3Server>, name: &str, extra: &str) -> String {
    let mut c = format!(
        "{extra}\n[fleet]\nredis_url = {redis_url}\nnode = \"{name}\"\ntimeout = \"500ms\"\n"
    );
    if let Some(s) = s3 {
        c.push_str(&format!(
            "s3_endpoint = \"{}\"\ns3_bucket = \"{}\"\ns3_region = \"{}\"\n",
            s.endpoint(),
            s.bucket(),
            s.region()
        ));
    }
    c
}

impl Fleet {
    /// Starts Redis, the bucket when `with_bucket`, and three nodes with
    /// `extra` configuration (TOML tables before `[fleet]`).
    pub fn start(label: &str, with_bucket: bool, extra: &str) -> Fleet {
        let redis = RedisServer::start();
        let s3 = with_bucket.then(|| S3Server::start("crawlcache-fleet"));
        let dir = TestDir::new(label);
        let nodes = ["a", "b", "c"]
            .iter()
            .map(|n| {
                Proxy::start_with_config_env(
                    &dir.subdir(n),
                    &node_config(&format!("\"{}\"", redis.url()), s3.as_ref(), n, extra),
                    &TEST_CREDENTIALS,
                )
            })
            .collect();
        Fleet { nodes, redis, s3, _dir: dir }
    }

    /// `GET url` through every node `i % 3` for `i in 0..n` at once (one
    /// thread each, the request made by `url(i)`); the responses in order.
    pub fn burst(
        &self,
        n: usize,
        url: impl Fn(usize) -> String,
        timeout: Duration,
    ) -> Vec<Response> {
        let addrs: Vec<_> = self.nodes.iter().map(|p| p.addr()).collect();
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (addr, u) = (addrs[i % addrs.len()], url(i));
                thread::spawn(move || {
                    let mut c = Conn::open(addr);
                    c.set_timeout(timeout);
                    c.send(
                        "GET",
                        &u,
                        &[("Connection", "close"), ("User-Agent", "FleetBot/1.0")],
                        b"",
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("a request thread panicked")))
            .collect()
    }

    /// `GET url` through node `i`.
    pub fn get(&self, i: usize, url: &str) -> Response {
        self.nodes[i].get(url, &[("User-Agent", "FleetBot/1.0")])
    }

    /// Node `i`'s fleet counter `name` (from `/stats`, `fleet.counters`).
    pub fn counter(&self, i: usize, name: &str) -> u64 {
        let stats = self.nodes[i].admin("/stats");
        assert_eq!(stats.status, 200, "{}", stats.describe());
        let v: serde_json::Value = serde_json::from_slice(&stats.body)
            .unwrap_or_else(|e| panic!("/stats is not JSON: {e}"));
        v["fleet"]["counters"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("no fleet counter {name} in /stats: {}", stats.text()))
    }

    /// Node `i`'s `/stats` `fleet` object.
    pub fn fleet_stats(&self, i: usize) -> serde_json::Value {
        let stats = self.nodes[i].admin("/stats");
        let v: serde_json::Value = serde_json::from_slice(&stats.body)
            .unwrap_or_else(|e| panic!("/stats is not JSON: {e}"));
        v["fleet"].clone()
    }

    /// Waits (up to `limit`) until node `i`'s counter `name` reaches `at_least`.
    pub fn wait_counter(&self, i: usize, name: &str, at_least: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let v = self.counter(i, name);
            if v >= at_least {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {i}: fleet counter {name} is {v}, expected at least {at_least} within {limit:?}\n{}",
                self.nodes[i].stderr_tail(30)
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The origin requests whose path is `path`.
pub fn requests_for(origin: &Origin, path: &str) -> Vec<RecordedRequest> {
    origin.requests().into_iter().filter(|r| r.path() == path).collect()
}
