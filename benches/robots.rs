//! robots.txt parse time and checks per second, crawlcache against the
//! texting_robots crate, on the bench files in `benches/data/robots/`:
//! a 13 KB and a 40 KB robots.txt with hundreds of wildcard rules in several
//! groups, and 10,000 URLs.
//!
//! Both libraries answer the same question: may `agent` fetch each URL?
//! texting_robots compiles one agent's rules per parse (`Robot::new(agent,
//! body)`), crawlcache compiles every group once (`RobotsTxt::parse(body)`)
//! and takes the agent per check. Checks are measured per 10,000-URL pass;
//! criterion's throughput line gives checks per second.
//!
//! Run: `cargo bench --bench robots`.

#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use crawlcache_robots::RobotsTxt;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::Duration;

const BENCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/data/robots");
const FILES: [&str; 2] = ["robots-13k.txt", "robots-40k.txt"];
/// A token with its own group in both files, and one that falls back to `*`.
const AGENTS: [&str; 2] = ["Googlebot", "ExampleBot"];

fn read(name: &str) -> Vec<u8> {
    let path = format!("{BENCH}/{name}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read bench file {path}: {e}"))
}

fn urls() -> Vec<String> {
    let text =
        String::from_utf8(read("urls-10k.txt")).unwrap_or_else(|e| panic!("urls-10k.txt: {e}"));
    text.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("robots_parse");
    for file in FILES {
        let body = read(file);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::new("crawlcache", file), &body, |b, body| {
            b.iter(|| RobotsTxt::parse(black_box(body)))
        });
        g.bench_with_input(BenchmarkId::new("texting_robots", file), &body, |b, body| {
            b.iter(|| texting_robots::Robot::new(black_box(AGENTS[0]), black_box(body)).ok())
        });
    }
    g.finish();
}

fn check(c: &mut Criterion) {
    let urls = urls();
    let mut g = c.benchmark_group("robots_check_10k_urls");
    g.throughput(Throughput::Elements(urls.len() as u64));
    g.measurement_time(Duration::from_secs(4));
    for file in FILES {
        let body = read(file);
        let ours = RobotsTxt::parse(&body);
        for agent in AGENTS {
            let theirs = texting_robots::Robot::new(agent, &body)
                .unwrap_or_else(|e| panic!("texting_robots cannot parse {file}: {e}"));
            // Both must agree here, or the comparison would be meaningless.
            let disagree =
                urls.iter().filter(|u| ours.is_allowed(agent, u) != theirs.allowed(u)).count();
            eprintln!(
                "{file} {agent}: crawlcache and texting_robots disagree on {disagree} of {} URLs",
                urls.len()
            );

            let id = format!("{file}/{agent}");
            g.bench_with_input(BenchmarkId::new("crawlcache_check", &id), &urls, |b, urls| {
                b.iter(|| urls.iter().filter(|u| ours.check(black_box(agent), u).allowed).count())
            });
            g.bench_with_input(BenchmarkId::new("crawlcache_is_allowed", &id), &urls, |b, urls| {
                b.iter(|| urls.iter().filter(|u| ours.is_allowed(black_box(agent), u)).count())
            });
            g.bench_with_input(BenchmarkId::new("texting_robots", &id), &urls, |b, urls| {
                b.iter(|| urls.iter().filter(|u| theirs.allowed(black_box(u))).count())
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = parse, check
}
criterion_main!(benches);
