//! Changing the index: the changes ([`Op`]) and [`Index::apply`], which
//! works out their new rows (reference counts and totals with them) under
//! the index lock and keeps them in the overlay for the next commit
//! (`index.rs`).

use std::collections::HashMap;

use crawlcache_base::locks::lock;

use crate::error::StoreError;
use crate::hash::Hash;
use crate::index::{corrupt, Index, Mem, SPILL_ROWS};
use crate::packs::{Loc, Pos};
use crate::rows::{primary_key_bytes, refs_key, Place, RefRow, Slot, SlotBody, State};

/// One change for [`Index::apply`].
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `key` now has the record `slot.loc` (written just before, stamped
    /// `slot.stamp`). With `expect`, only if its current record is there.
    /// A `Ref` body takes a reference on its [`RefRow`]; when there is none,
    /// `create` says where the body is (a new row counting this entry),
    /// else the op is not done (the body is gone: the caller stores it
    /// anew).
    Put { key: Vec<u8>, slot: Slot, expect: Option<Loc>, create: Option<Place> },
    /// Makes the inline body of `owner` (whose current record must be
    /// `owner_loc`, with an `Inline` body of `len` bytes) a shared one: the
    /// body `hash`, now also in the shared body record at `body` (written
    /// just before), gets a [`RefRow`] counting `owner`, whose row says
    /// `Ref` from now on. When `hash` already has a row (another entry
    /// shared it first) `owner` is counted there instead and `body` is dead
    /// space; its inline copy is no longer counted either way. Not done when
    /// `owner`'s row is not as expected.
    Share { owner: Vec<u8>, owner_loc: Loc, hash: Hash, len: u64, body: Loc },
    /// The shared body record of `hash` moved from `from` to `to` (the
    /// tail walk copied it); only if its row still names `from`.
    MoveShared { hash: Hash, from: Loc, to: Loc },
    /// Removes `key`; with `expect`, only if its current record is there.
    Remove { key: Vec<u8>, expect: Option<Loc> },
    /// Marks `key` used at `stamp` (if it exists and is not used later).
    Touch { key: Vec<u8>, stamp: u64 },
    /// Moves the log's tail.
    Tail(Pos),
}

/// What [`Index::apply`] did.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Per op: whether it took effect.
    pub done: Vec<bool>,
    /// Entries removed.
    pub removed: u64,
    /// Body files whose reference count reached zero: their files may be
    /// deleted once the batch is durable.
    pub zero: Vec<Hash>,
    /// Bytes of bodies whose last reference went (inline bodies, shared
    /// body records, body files): what the store gives back. A body other
    /// entries still reference frees nothing.
    pub freed: u64,
}

impl Index {
    /// Applies `ops` in order (see the module comment): the new rows go to
    /// the overlay, to reach sled with the next commit. Errors: `Index` when
    /// sled cannot be read or a reference count is corrupt; then nothing was
    /// applied.
    pub fn apply(&self, ops: &[Op]) -> Result<Applied, StoreError> {
        let mut mem = lock(&self.mem);
        let mut state = mem.state;
        let mut slots: HashMap<Vec<u8>, Option<Slot>> = HashMap::new();
        let mut refs: HashMap<Hash, Option<RefRow>> = HashMap::new();
        let mut applied = Applied::default();
        for op in ops {
            let done = match op {
                Op::Put { key, slot, expect, create } => {
                    let old = self.current(&mem, &mut slots, key)?;
                    // The expected record is checked before the body is acquired.
                    if (expect.is_some() && old.map(|s| s.loc) != *expect)
                        || !self.acquire(&mem, &mut refs, &mut state, &slot.body, *create)?
                    {
                        false
                    } else {
                        state.referenced += slot.body.len();
                        match old {
                            Some(o) => {
                                self.release(&mem, &mut refs, &mut state, &o, &mut applied)?
                            }
                            None => {
                                state.entries += 1;
                                // A new key, before its row can be read
                                // (crates/store/src/presence.rs).
                                if let Some(p) = primary_key_bytes(key) {
                                    self.presence.add(p);
                                }
                            }
                        }
                        state.pack_live += slot.loc.len as u64;
                        state.max_stamp = state.max_stamp.max(slot.stamp);
                        state.log_end = state.log_end.max(Pos {
                            seg: slot.loc.seg,
                            off: slot.loc.off + slot.loc.len as u64,
                        });
                        slots.insert(key.clone(), Some(*slot));
                        true
                    }
                }
                Op::Share { owner, owner_loc, hash, len, body } => match self
                    .current(&mem, &mut slots, owner)?
                {
                    Some(o)
                        if o.loc == *owner_loc && o.body == (SlotBody::Inline { len: *len }) =>
                    {
                        let row = match self.ref_row(&mem, &mut refs, hash)? {
                            None => {
                                state.pack_live += body.len as u64;
                                state.log_end = state
                                    .log_end
                                    .max(Pos { seg: body.seg, off: body.off + body.len as u64 });
                                RefRow { count: 1, len: *len, place: Place::Packed(*body) }
                            }
                            Some(r) => {
                                // Its own copy was a distinct body until now.
                                state.bodies = state.bodies.saturating_sub(1);
                                state.bytes = state.bytes.saturating_sub(*len);
                                RefRow { count: r.count + 1, ..r }
                            }
                        };
                        refs.insert(*hash, Some(row));
                        slots.insert(
                            owner.clone(),
                            Some(Slot { body: SlotBody::Ref { hash: *hash, len: *len }, ..o }),
                        );
                        true
                    }
                    _ => false,
                },
                Op::MoveShared { hash, from, to } => match self.ref_row(&mem, &mut refs, hash)? {
                    Some(r) if r.place == Place::Packed(*from) => {
                        state.pack_live =
                            state.pack_live.saturating_sub(from.len as u64) + to.len as u64;
                        state.log_end =
                            state.log_end.max(Pos { seg: to.seg, off: to.off + to.len as u64 });
                        refs.insert(*hash, Some(RefRow { place: Place::Packed(*to), ..r }));
                        true
                    }
                    _ => false,
                },
                Op::Remove { key, expect } => match self.current(&mem, &mut slots, key)? {
                    Some(o) if expect.is_none_or(|e| e == o.loc) => {
                        self.release(&mem, &mut refs, &mut state, &o, &mut applied)?;
                        state.entries = state.entries.saturating_sub(1);
                        applied.removed += 1;
                        slots.insert(key.clone(), None);
                        true
                    }
                    _ => false,
                },
                Op::Touch { key, stamp } => match self.current(&mem, &mut slots, key)? {
                    Some(mut s) if s.stamp < *stamp => {
                        s.stamp = *stamp;
                        state.max_stamp = state.max_stamp.max(*stamp);
                        slots.insert(key.clone(), Some(s));
                        true
                    }
                    _ => false,
                },
                Op::Tail(pos) => {
                    state.tail = *pos;
                    true
                }
            };
            applied.done.push(done);
        }
        self.publish(&mut mem, slots, refs, state)?;
        Ok(applied)
    }

    /// Makes what [`Self::apply`] worked out visible: the changed rows go
    /// to the overlay and the counters to `mem`, while the lock is held;
    /// the overlay spills to sled when it has grown past `SPILL_ROWS`.
    /// Errors: `Index` when the spill cannot write to sled.
    fn publish(
        &self,
        mem: &mut Mem,
        slots: HashMap<Vec<u8>, Option<Slot>>,
        refs: HashMap<Hash, Option<RefRow>>,
        state: State,
    ) -> Result<(), StoreError> {
        // Counters move while the lock is held, before the rows change: a
        // reader that sees the new value reads the rows after the lock is
        // released. (Rows only read by the ops are left alone.)
        for (k, v) in &slots {
            if mem.active.slots.get(k.as_slice()) != Some(v) {
                self.changed(k);
            }
        }
        mem.active.slots.extend(slots);
        mem.active.refs.extend(refs);
        mem.state = state;
        // Not while a commit writes to sled (it ends within milliseconds;
        // the next apply spills).
        if mem.active.slots.len() + mem.active.refs.len() > SPILL_ROWS && !mem.committing {
            self.spill_locked(mem)?;
        }
        Ok(())
    }

    /// The slot of `key` as the ops being applied see it.
    fn current(
        &self,
        mem: &Mem,
        slots: &mut HashMap<Vec<u8>, Option<Slot>>,
        key: &[u8],
    ) -> Result<Option<Slot>, StoreError> {
        if let Some(s) = slots.get(key) {
            return Ok(*s);
        }
        let over = mem
            .active
            .slots
            .get(key)
            .copied()
            .or_else(|| mem.flushing.as_ref().and_then(|f| f.slots.get(key).copied()));
        if let Some(s) = over {
            return Ok(s);
        }
        // A key never stored (a new entry, the common case) has no row to read.
        if primary_key_bytes(key).is_some_and(|p| !self.presence.may_contain(p)) {
            slots.insert(key.to_vec(), None);
            return Ok(None);
        }
        let s = match self.tree.get(key)? {
            None => None,
            Some(v) => match Slot::decode(&v) {
                Some(s) => Some(s),
                None => {
                    // Replaced or removed as if absent; verify reports what it referenced.
                    tracing::warn!(key = ?String::from_utf8_lossy(key), "an undecodable index row is overwritten");
                    None
                }
            },
        };
        slots.insert(key.to_vec(), s);
        Ok(s)
    }

    /// The reference-count row of `hash` as the ops being applied see it.
    fn ref_row(
        &self,
        mem: &Mem,
        refs: &mut HashMap<Hash, Option<RefRow>>,
        hash: &Hash,
    ) -> Result<Option<RefRow>, StoreError> {
        if let Some(r) = refs.get(hash) {
            return Ok(*r);
        }
        let over = mem
            .active
            .refs
            .get(hash)
            .copied()
            .or_else(|| mem.flushing.as_ref().and_then(|f| f.refs.get(hash).copied()));
        if let Some(r) = over {
            return Ok(r);
        }
        let r = match self.tree.get(&refs_key(hash))? {
            None => None,
            Some(v) => Some(RefRow::decode(&v).ok_or_else(|| {
                corrupt(format!("the reference count of body {} is corrupt", hex::encode(hash)))
            })?),
        };
        refs.insert(*hash, r);
        Ok(r)
    }

    /// Counts a new reference to `body`: false (nothing changed) when it is
    /// a reference to a body without a row and `create` does not say where
    /// that body is.
    fn acquire(
        &self,
        mem: &Mem,
        refs: &mut HashMap<Hash, Option<RefRow>>,
        state: &mut State,
        body: &SlotBody,
        create: Option<Place>,
    ) -> Result<bool, StoreError> {
        match body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                state.bodies += 1;
                state.bytes += len;
            }
            SlotBody::Ref { hash, len } => {
                let row = match (self.ref_row(mem, refs, hash)?, create) {
                    (Some(r), _) => RefRow { count: r.count + 1, ..r },
                    (None, Some(place)) => {
                        state.bodies += 1;
                        state.bytes += len;
                        match place {
                            Place::Packed(loc) => {
                                state.pack_live += loc.len as u64;
                                state.log_end = state
                                    .log_end
                                    .max(Pos { seg: loc.seg, off: loc.off + loc.len as u64 });
                            }
                            Place::File => state.file_bytes += len,
                        }
                        RefRow { count: 1, len: *len, place }
                    }
                    (None, None) => return Ok(false),
                };
                refs.insert(*hash, Some(row));
            }
        }
        Ok(true)
    }

    /// Drops the reference (and the record) of the entry `old`; a body
    /// whose last reference this was is counted in `applied.freed` (and a
    /// body file in `applied.zero`).
    fn release(
        &self,
        mem: &Mem,
        refs: &mut HashMap<Hash, Option<RefRow>>,
        state: &mut State,
        old: &Slot,
        applied: &mut Applied,
    ) -> Result<(), StoreError> {
        state.pack_live = state.pack_live.saturating_sub(old.loc.len as u64);
        state.referenced = state.referenced.saturating_sub(old.body.len());
        match old.body {
            SlotBody::None => {}
            SlotBody::Inline { len } => {
                state.bodies = state.bodies.saturating_sub(1);
                state.bytes = state.bytes.saturating_sub(len);
                applied.freed += len;
            }
            SlotBody::Ref { hash, .. } => match self.ref_row(mem, refs, &hash)? {
                None => {
                    tracing::warn!(body = %hex::encode(hash), "releasing a body that has no reference count");
                    applied.zero.push(hash);
                }
                Some(r) if r.count <= 1 => {
                    refs.insert(hash, None);
                    state.bodies = state.bodies.saturating_sub(1);
                    state.bytes = state.bytes.saturating_sub(r.len);
                    applied.freed += r.len;
                    match r.place {
                        Place::File => {
                            state.file_bytes = state.file_bytes.saturating_sub(r.len);
                            applied.zero.push(hash)
                        }
                        Place::Packed(loc) => {
                            state.pack_live = state.pack_live.saturating_sub(loc.len as u64)
                        }
                    }
                }
                Some(r) => {
                    refs.insert(hash, Some(RefRow { count: r.count - 1, ..r }));
                }
            },
        }
        Ok(())
    }
}
