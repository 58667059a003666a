//! The `crawlcache` command: parses the command line and hands it to
//! [`crawlcache::cli::run`], where every subcommand lives.

use clap::Parser;
use std::process::ExitCode;

/// mimalloc instead of the system allocator. Measured with benches/load.sh
/// (server CPU per request, same commit, back to back): 16 KiB misses 210 ->
/// 145 us, revalidations 120-136 -> 52-56 us, 1 KiB misses 90 -> 79 us. The
/// request path allocates short-lived buffers of every size on one thread
/// and frees some on another (the origin connection's head parser alone
/// took 144 KiB per response for `upstream.max_head_fields = 3000`, before
/// heads were parsed with room for 256 fields first);
/// glibc's per-thread arenas spend that time consolidating and trimming.
/// Built without transparent huge pages (`no_thp`): with them resident
/// memory at 300,000 entries in benches/scale.sh was 141 MiB, without 96
/// (glibc 74), against the 256 MiB budget of `store.memory_ceiling`.
/// `--features system-allocator` leaves the system allocator in place, for
/// heap profilers that interpose malloc.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = crawlcache::cli::Cli::parse();
    crawlcache::cli::run(cli.command)
}
