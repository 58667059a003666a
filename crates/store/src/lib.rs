//! The body store and its metadata index (SPEC section 3), store format 4.
//!
//! Every body is named by its SHA-256 and stored once, whatever its size,
//! however many entries reference it; a body's bytes are given back only
//! when its last reference goes.
//!
//! Where things live (under the store directory):
//! - `packs/NNNNNNNN.pack`: append-only segments with one record per
//!   stored version of an entry: its key, its metadata (the stored response
//!   head) and its body — inline for a body shorter than `inline_max` bytes
//!   (32 KiB in the default configuration) that no other entry has, else a
//!   reference by SHA-256 — plus one shared body record per short body that
//!   several entries reference (`packs.rs`); beside each segment its hints,
//!   the inline bodies it holds by hash (`hints.rs`);
//! - `bodies/ab/cd/abcd...`: one content-addressed file per distinct larger
//!   body, named by the lower-case hex SHA-256 of its bytes and shared by
//!   every entry with that body (reference counted) (`blobs.rs`);
//! - `index/`: sled, one tree mapping each entry key to its current record
//!   (a few bytes per entry), plus reference counts of body files and of
//!   shared short bodies, the store's totals and the commit checkpoint
//!   (`index.rs`, which also says how a body goes from inline to shared);
//! - `format`: the store format number (`format.rs`); `tmp/`: bodies being
//!   written.
//!
//! Finding a stored short body by its hash without reading the disk on
//! every miss: a Bloom filter of the fingerprints of every stored short
//! body (the filter of stored bodies, sized from `store.memory_ceiling`,
//! `presence.rs`) answers "certainly not stored" for a new body, which then
//! goes inline into its entry's record; only a "maybe" (a body seen before,
//! or about 1 % of new ones) looks at the reference-count rows, the hints
//! and the record a hint names.
//!
//! The store knows nothing about HTTP: an entry is addressed by a primary key
//! (a string chosen by the cache layer) and a secondary key (bytes chosen by
//! the cache layer from `Vary`), and carries opaque metadata bytes plus a
//! reference to at most one body.
//!
//! Miss path: [`BodyWriter`] keeps a short body in memory, or streams a long
//! one into `tmp/` and renames it into place; [`Store::insert`] appends the
//! entry's record to the pack and puts its index row in the in-memory
//! overlay. Nothing on it waits for the disk: no fsync, no sled write. The
//! background committer (`maintenance.rs`, "Group commit") syncs what was
//! written every [`COMMIT_INTERVAL`], then writes the overlay to sled in one
//! batch with a checkpoint; a crash loses at most the changes made since the
//! last commit, and never leaves an entry pointing at a torn body (every
//! record carries a CRC, every body its SHA-256, and start-up re-checks
//! what was written after the checkpoint).
//!
//! Life cycle of a body file, and why a committed entry never points at a
//! deleted file:
//! 1. [`BodyWriter::finish`] renames the file into place (or finds it there)
//!    under the lock stripe of its hash and *pins* it in memory.
//! 2. [`Store::insert`] writes the entry, the reference count and the totals
//!    together (one overlay change, one sled batch at the commit), then
//!    drops the pin.
//! 3. A change that drops a count to zero only queues the hash. The queue is
//!    reaped by the background thread (promptly, or at the latest within a
//!    second; [`Store::flush`] and close reap too): under the stripe locks,
//!    hashes that are still unreferenced and unpinned are deleted, after a
//!    commit made the zero count durable.
//!
//! LRU and budget: `max_size` bounds the bytes of bodies (inline and files;
//! metadata and the index are not counted). When an insert goes over it,
//! the records at the log's tail are examined in the order they were
//! written: an entry used since its record was written (a hit, a
//! freshening) gets a second chance (its record is copied to the head of
//! the log), any other is evicted. This CLOCK approximation of LRU keeps no
//! per-entry structure in memory; a hit only records a stamp in memory
//! ([`Store::touch`]), written in batches by the background thread. The
//! same tail walk copies live records forward to reclaim the space of dead
//! ones when the pack holds more dead bytes than live (`budget.rs`).
//! A body larger than the whole budget is refused with
//! [`StoreError::TooLarge`] (already while it is written).
//!
//! Memory: the sled cache is sized from [`StoreOptions::index_cache`]; pending
//! touches are bounded ([`TOUCH_BATCH`]); nothing else grows with the number
//! of entries.
//!
//! Files (tests/architecture.rs keeps each one under 800 lines):
//! - the handle and what it hands out: `store.rs` ([`Store`] and its public
//!   operations), `types.rs` (entries, bodies, counters, options), `error.rs`,
//!   `scan.rs` (iterating entries), `inner.rs` (the state every handle and
//!   writer share), `open.rs` (opening sled);
//! - a body on its way in: `body_writer.rs` ([`BodyWriter`]: hashed as it
//!   arrives, spilled to a file when long), `body_plan.rs` (how a new
//!   record carries its body: its own, a reference, or shared);
//! - where bytes live: `packs.rs` (pack segments and their records),
//!   `segment_files.rs` (the names of segment and hints files, listing),
//!   `hints.rs` (which short bodies a segment holds), `blobs.rs` (body
//!   files and their pins), `record_cache.rs` (records read recently),
//!   `hash.rs` (SHA-256 names), `fsops.rs` (file operations that name their
//!   path in errors);
//! - the index: `index.rs` (the store's tree and how a body is kept),
//!   `kv.rs` (the ordered key-value engine under it: sled's tree, or
//!   fjall's with the `index-fjall` feature, for measuring), `rows.rs`
//!   (every row's encoding), `apply.rs` (changes as `Op`s applied under
//!   the index lock), `presence.rs` (the Bloom filters: of primary keys, and of stored short bodies),
//!   `stamp.rs` (the store's hybrid clock);
//! - work no caller waits for: `budget.rs` (touches, eviction, compaction),
//!   `maintenance.rs` (group commit, crash recovery, the background thread,
//!   the close), `verify.rs` (the invariant check);
//! - formats: `format.rs` (the format number), `migrate.rs` (migration of
//!   older stores) and `legacy.rs` (reading them).

mod apply;
mod blobs;
mod body_plan;
mod body_writer;
mod budget;
mod error;
pub mod format;
mod fsops;
mod hash;
mod hints;
mod index;
mod inner;
mod kv;
mod legacy;
mod maintenance;
mod migrate;
mod open;
mod packs;
mod presence;
mod record_cache;
mod rows;
mod scan;
mod segment_files;
mod stamp;
mod store;
mod types;
mod verify;

pub use body_writer::BodyWriter;
pub use budget::TOUCH_BATCH;
pub use error::StoreError;
pub use maintenance::COMMIT_INTERVAL;
pub use scan::{Page, PageCursor, Scan};
pub use stamp::clock_micros;
pub use store::Store;
pub use types::{
    BodyData, BodyReader, CommittedBody, Compaction, Entry, LookupVersion, Removal, StoreOptions,
    StoreStats,
};
pub use verify::VerifyReport;

#[cfg(test)]
mod tests;
