//! How a new entry record carries its body: the plan (a body of its own,
//! a reference, or a body shared with another entry, `index.rs` "How a
//! body is kept") and the writes that carry it out under the log's lock.

use std::sync::Arc;

use crawlcache_base::locks::lock;

use crate::apply::{Applied, Op};
use crate::error::StoreError;
use crate::index::{Hash, Place, Slot, SlotBody};
use crate::inner::Inner;
use crate::packs::{Loc, RecBody};
use crate::{hints, presence};

/// A build of the filter of stored bodies in progress
/// ([`Inner::build_body_filter_step`]).
pub(crate) struct BodyFilterBuild {
    fresh: presence::Building,
    /// The segments whose hints go in, and the next one.
    segments: Vec<u32>,
    next: usize,
    /// The last reference-count row added (`None`: from the first).
    refs_after: Option<Vec<u8>>,
}

/// How a new entry record is to carry its body (see `index.rs`, "How a
/// body is kept").
pub(crate) enum Plan {
    /// No body.
    None,
    /// The bytes in the entry's own record: no stored entry has them.
    Owner { hash: Hash, bytes: Arc<Vec<u8>> },
    /// A reference to a body with a reference-count row, or with `create`
    /// a body that gets its first (a body file).
    Ref { hash: Hash, len: u64, create: Option<Place>, bytes: Option<Arc<Vec<u8>>> },
    /// The bytes are the inline body of the entry `owner` (its record at
    /// `owner_loc`): both come to share them.
    Share { hash: Hash, bytes: Arc<Vec<u8>>, owner: Vec<u8>, owner_loc: Loc },
}

impl Inner {
    /// Whether the short body `hash` may be stored already ("maybe"), by
    /// the filter of stored bodies; `false` is certain.
    pub(crate) fn body_maybe_stored(&self, hash: &Hash) -> bool {
        self.body_filter.may_contain(&hints::fingerprint(hash).to_le_bytes())
    }

    /// Notes that the short body `hash` is stored (before its record can be
    /// found), the log's lock held: every write or copy of an inline body
    /// and every new shared body.
    pub(crate) fn note_body_stored(&self, hash: &Hash) {
        self.body_filter.add(&hints::fingerprint(hash).to_le_bytes());
    }

    /// One step of building the filter of stored bodies (the background
    /// thread runs one per round while it lasts): the first step starts it,
    /// each then adds the hints of one segment, and the last ones the
    /// hashes of the reference-count rows (8,192 a step). Bodies noted
    /// meanwhile ([`Inner::note_body_stored`], always under the log's lock,
    /// as the start and the end of the build are) go into the new filter
    /// as well. Errors: `Index` (the
    /// build is given up; the filter answers as before).
    pub(crate) fn build_body_filter_step(
        &self,
        build: &mut Option<BodyFilterBuild>,
    ) -> Result<(), StoreError> {
        if build.is_none() {
            let _log = lock(&self.log_lock);
            let Some(fresh) = self.body_filter.start_build() else { return Ok(()) };
            *build = Some(BodyFilterBuild {
                fresh,
                segments: self.hints.segments(),
                next: 0,
                refs_after: None,
            });
            return Ok(());
        }
        let Some(b) = build.as_mut() else { return Ok(()) };
        if let Some(&seg) = b.segments.get(b.next) {
            self.hints
                .for_each_fingerprint(seg, |fp| presence::add_to(&b.fresh, &fp.to_le_bytes()));
            b.next += 1;
            return Ok(());
        }
        let step = self
            .index
            .spill()
            .and_then(|()| self.index.ref_hashes_step(b.refs_after.as_deref(), 8192));
        let (hashes, after) = match step {
            Ok(found) => found,
            Err(e) => {
                self.body_filter.abandon_build();
                *build = None;
                return Err(e);
            }
        };
        for h in &hashes {
            presence::add_to(&b.fresh, &hints::fingerprint(h).to_le_bytes());
        }
        b.refs_after = after;
        if b.refs_after.is_none() {
            if let Some(done) = build.take() {
                // Under the log's lock, as every body is noted: a body
                // noted while the filters change places is in the new one.
                let _log = lock(&self.log_lock);
                self.body_filter.finish_build(done.fresh);
            }
        }
        Ok(())
    }

    /// How a new record of the entry `key` is to carry the body `hash` of
    /// `len` bytes: a body file, a body with a reference-count row, the
    /// inline body of another entry (shared), or new bytes of its own.
    /// The bytes come from the pin [`BodyWriter::finish`] left (taken here)
    /// or from a stored copy. May read the index, hints and records (never
    /// for a short body the filter says is new).
    /// Errors: `MissingBody` when the body is neither pinned nor stored.
    pub(crate) fn plan_body(&self, key: &[u8], hash: &Hash, len: u64) -> Result<Plan, StoreError> {
        let pinned = self.blobs.take_small(hash);
        if pinned.is_none()
            && (len >= self.inline_max || self.blobs.path(hash).is_file())
            && self.hold_for_insert(hash).is_ok()
        {
            return Ok(Plan::Ref { hash: *hash, len, create: Some(Place::File), bytes: None });
        }
        let bytes = match pinned.or_else(|| self.packed_bytes(hash)) {
            Some(b) if b.len() as u64 == len => b,
            _ => {
                // A body only a reference-count row knows (shared).
                return match self.index.ref_row_of(hash)? {
                    Some(r) if r.len == len => {
                        Ok(Plan::Ref { hash: *hash, len, create: None, bytes: None })
                    }
                    _ => Err(StoreError::MissingBody(hex::encode(hash))),
                };
            }
        };
        if !self.body_maybe_stored(hash) {
            return Ok(Plan::Owner { hash: *hash, bytes });
        }
        if self.index.ref_row_of(hash)?.is_some_and(|r| r.len == len) {
            return Ok(Plan::Ref { hash: *hash, len, create: None, bytes: Some(bytes) });
        }
        match self.find_owner(key, hash, len, false)? {
            Some((owner, owner_loc)) => Ok(Plan::Share { hash: *hash, bytes, owner, owner_loc }),
            None => Ok(Plan::Owner { hash: *hash, bytes }),
        }
    }

    /// Another entry (not `key`) whose current record holds the short body
    /// `hash` of `len` bytes inline, unshared: its key and record. Looks at
    /// the location seen last and at the hints (only those in memory with
    /// `memory_only`), reading each candidate record. Errors: `Index` when
    /// the index cannot be read.
    pub(crate) fn find_owner(
        &self,
        key: &[u8],
        hash: &Hash,
        len: u64,
        memory_only: bool,
    ) -> Result<Option<(Vec<u8>, Loc)>, StoreError> {
        let recent = lock(&self.recent).get(hash).copied();
        let mut tried = Vec::new();
        for loc in recent.into_iter().chain(self.hints.candidates(hash, memory_only)) {
            if tried.contains(&loc) {
                continue;
            }
            tried.push(loc);
            let Ok(rec) = self.read_record(&loc) else { continue };
            let RecBody::Inline { hash: h, bytes } = &rec.body else { continue };
            if h != hash || bytes.len() as u64 != len || rec.key.is_empty() || rec.key == key {
                continue;
            }
            if let Some(slot) = self.index.get(&rec.key)? {
                if slot.loc == loc && slot.body == (SlotBody::Inline { len }) {
                    return Ok(Some((rec.key.clone(), loc)));
                }
            }
        }
        Ok(None)
    }

    /// Writes the record of the entry `key` as `plan` says and its index
    /// row (see [`Inner::write_record`]). A plan overtaken meanwhile (the
    /// shared body went, the owner was replaced, an owner of the same bytes
    /// appeared) is redone under the log's lock, ending in new bytes of the
    /// entry's own when nothing else holds.
    pub(crate) fn write_planned(
        &self,
        key: &[u8],
        meta: &[u8],
        plan: Plan,
    ) -> Result<Applied, StoreError> {
        let _log = lock(&self.log_lock);
        let mut plan = plan;
        // A failed share and the search that finds the owner again take
        // two rounds.
        for _ in 0..6 {
            plan = match plan {
                Plan::None => {
                    return self.write_record_locked(key, meta, &RecBody::None, None, None)
                }
                Plan::Owner { hash, bytes } => {
                    // An owner of the same bytes written since the plan was
                    // made is in the hints held in memory.
                    let len = bytes.len() as u64;
                    if self.body_maybe_stored(&hash) {
                        if let Some((owner, owner_loc)) = self.find_owner(key, &hash, len, true)? {
                            plan = Plan::Share { hash, bytes, owner, owner_loc };
                            continue;
                        }
                    }
                    return self.write_record_locked(
                        key,
                        meta,
                        &RecBody::Inline { hash, bytes },
                        None,
                        None,
                    );
                }
                Plan::Ref { hash, len, create, bytes } => {
                    let applied = self.write_record_locked(
                        key,
                        meta,
                        &RecBody::Ref { hash, len },
                        None,
                        create,
                    )?;
                    match bytes {
                        // The shared body went meanwhile: store the bytes anew.
                        Some(bytes) if applied.done.first() == Some(&false) => {
                            Plan::Owner { hash, bytes }
                        }
                        _ => return Ok(applied),
                    }
                }
                Plan::Share { hash, bytes, owner, owner_loc } => {
                    let len = bytes.len() as u64;
                    self.note_body_stored(&hash);
                    let (_, body_loc) = self.packs.append(
                        &self.next_stamp,
                        b"",
                        b"",
                        &RecBody::Shared { hash, bytes: bytes.clone() },
                    )?;
                    let (stamp, loc) = self.packs.append(
                        &self.next_stamp,
                        key,
                        meta,
                        &RecBody::Ref { hash, len },
                    )?;
                    let put = Op::Put {
                        key: key.to_vec(),
                        slot: Slot { stamp, loc, body: SlotBody::Ref { hash, len } },
                        expect: None,
                        create: None,
                    };
                    let applied = self
                        .index
                        .apply(&[Op::Share { owner, owner_loc, hash, len, body: body_loc }, put])?;
                    match applied.done.as_slice() {
                        [true, true] => {
                            lock(&self.recent).put(hash, body_loc);
                            return Ok(applied);
                        }
                        // The owner went, or shared the body first.
                        [_, true] => return Ok(applied),
                        _ => Plan::Owner { hash, bytes },
                    }
                }
            };
        }
        match plan {
            Plan::Owner { hash, bytes } | Plan::Share { hash, bytes, .. } => {
                self.write_record_locked(key, meta, &RecBody::Inline { hash, bytes }, None, None)
            }
            Plan::Ref { hash, len, create, .. } => {
                self.write_record_locked(key, meta, &RecBody::Ref { hash, len }, None, create)
            }
            Plan::None => self.write_record_locked(key, meta, &RecBody::None, None, None),
        }
    }

    /// Appends a record for `key` and writes its index row (with `expect`,
    /// only if the entry's current record is still there; a reference with
    /// `create` to a body without a row gives it one).
    pub(crate) fn write_record(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &RecBody,
        expect: Option<Loc>,
        create: Option<Place>,
    ) -> Result<Applied, StoreError> {
        let _log = lock(&self.log_lock);
        self.write_record_locked(key, meta, body, expect, create)
    }

    /// [`Inner::write_record`] with the log's lock held. An inline body
    /// that was written is noted in the hints and the filter of stored
    /// bodies.
    pub(crate) fn write_record_locked(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &RecBody,
        expect: Option<Loc>,
        create: Option<Place>,
    ) -> Result<Applied, StoreError> {
        let (stamp, loc) = self.packs.append(&self.next_stamp, key, meta, body)?;
        let slot_body = match body {
            RecBody::None | RecBody::Shared { .. } => SlotBody::None,
            RecBody::Inline { bytes, .. } => SlotBody::Inline { len: bytes.len() as u64 },
            RecBody::Ref { hash, len } => SlotBody::Ref { hash: *hash, len: *len },
        };
        if let RecBody::Inline { hash, .. } = body {
            // Before the row can be read: a body that is stored is never
            // "certainly not" to the filter.
            self.note_body_stored(hash);
        }
        let applied = self.index.apply(&[Op::Put {
            key: key.to_vec(),
            slot: Slot { stamp, loc, body: slot_body },
            expect,
            create,
        }])?;
        if let (RecBody::Inline { hash, .. }, Some(true)) = (body, applied.done.first()) {
            lock(&self.recent).put(*hash, loc);
            self.hints.add(loc, hash);
        }
        Ok(applied)
    }
}
