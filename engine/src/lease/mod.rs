//! The lease table: which dial number a new verification is given, and when
//! that number may be given out again.
//!
//! Every configured number has a [`Slot`] (its index in the `numbers` vector
//! given to [`LeaseTable::new`], or its place in the order of
//! [`TableBuilder::push`]). Numbers are kept packed, 8 bytes each (see
//! `numbers.rs`; a number costs the table 48 bytes in all). Numbers are
//! grouped into sub-pools keyed by (pool, dedicated company or shared). A
//! sub-pool is two bitmaps of atomic 64-bit words: `leased`, and `issuable`
//! (number active AND line active AND line registered now). A number can be
//! leased when it is issuable and not leased; leasing claims its bit with a
//! CAS on the `leased` word. No lock is taken, so a worker never waits, or
//! parks, behind another one preempted in the middle of a lease, and a line
//! losing registration withholds all its numbers with a few word RMWs. It is
//! not about raw speed: uncontended, a lease + release pair costs about what
//! it costs under a mutex (see `benches/lease_table.rs`).
//!
//! - Rotation: each sub-pool searches from a cyclic next-fit cursor (like
//!   Linux `idr_alloc_cyclic`), so a just-released number is issued again
//!   only after every other free number of its sub-pool (see
//!   `bitmap::SubPool::claim_next` for why).
//! - Generations: each slot counts its leases. A [`Lease`] names the slot and
//!   the generation, and only that exact lease can release the slot, so a
//!   stale expiry or a late call cannot free a newer lease of the same number.
//! - Dedicated numbers: a company's dedicated sub-pool is tried before the
//!   shared one; no other company can reach it. A company without dedicated
//!   numbers pays one bit test (see `dedicated_filter_bit`), and rarely a
//!   binary search over the few dedicated companies; never a hash.
//!
//! Not for: deciding when a lease ends (expiry and call handling release it);
//! persistence (storage keeps each pending verification's number and
//! generation and hands them back through [`LeaseTable::restore`]); reading
//! configuration or tracking SIP registration (the IO layer calls
//! [`LeaseTable::set_line_up`]). The table's shape is fixed: adding, removing
//! or (un)dedicating a number means building a new table and carrying
//! [`LeaseTable::leases`] over into it.

mod bitmap;
mod build;
mod hold;
mod numbers;
mod stats;

pub use build::TableBuilder;
pub use stats::{LineStats, PoolStats};
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::pool::Pool;
use crate::CompanyId;
use bitmap::{SubPool, WORD_SIZE_BITS};
use numbers::NumberIndex;
use std::fmt;

/// Index of a SIP line in the configuration order.
pub type LineId = u32;

/// Most numbers one table holds. Slots, bit positions and sub-pool indexes
/// then fit in `u32`, the bitmaps of a full table are 256 KiB, and a lease
/// that has to scan a whole full sub-pool reads 16 Ki words (~10 us). Real
/// deployments have hundreds to a few thousand numbers.
pub const NUMBERS_COUNT_MAX: usize = 1 << 20;

/// The bit of `company` in [`LeaseTable::dedicated_filter`]: its id modulo
/// 64. Company ids are row ids, so consecutive companies get distinct bits
/// and a handful of dedicated companies leave most bits clear.
fn dedicated_filter_bit(company: CompanyId) -> u64 {
    1u64 << (company as u64 % u64::BITS as u64)
}

/// Marks a pool without a dedicated sub-pool in [`LeaseTable::dedicated`].
const SUB_POOL_NONE: u32 = u32::MAX;

/// A slot's state word: the generation in the low 32 bits and this bit set
/// while the lease of that generation is live (issued, not yet released).
///
/// Why one word and not a bare generation counter beside the `leased` bit: a
/// lease claims the bit first and only then moves the generation, and a
/// release checks the generation and only then clears the bit. With two
/// separate atomics a stale release of the previous lease could match the
/// not-yet-moved generation of a slot just claimed by a new lease and free
/// it. Here "live with generation g" is a single value, so the release's CAS
/// on it is the one ownership test, and `current`/`leases` never report a
/// lease that is half issued or half released.
const STATE_LIVE_BIT: u64 = 1 << 32;
/// A fresh slot: generation 0, not live; its first lease carries 1.
const STATE_INITIAL: u64 = 0;

fn state_live(generation: u32) -> u64 {
    STATE_LIVE_BIT | u64::from(generation)
}

fn state_free(generation: u32) -> u64 {
    u64::from(generation)
}

fn state_is_live(state: u64) -> bool {
    state & STATE_LIVE_BIT != 0
}

fn state_generation(state: u64) -> u32 {
    // Truncation intended: the generation is the low half.
    state as u32
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineSpec {
    /// The operator's switch: an inactive line never issues numbers.
    pub active: bool,
    /// Registered with its provider now (or an always-up trunk).
    pub up: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumberSpec {
    /// E.164: `+` and 1 to 15 digits, unique across the table.
    pub number: String,
    pub pool: Pool,
    pub line: LineId,
    pub active: bool,
    /// Issued only to this company when set.
    pub dedicated_to: Option<CompanyId>,
}

/// A number's position in the table: its index in the `numbers` vector the
/// table was built from (the order of [`TableBuilder::push`]). Only
/// meaningful for that table; a rebuilt table may number differently, so
/// carry leases over by number (see [`LeaseTable::leases`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

/// One issue of one number. The generation tells this lease apart from
/// every earlier and later lease of the same slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    pub slot: Slot,
    pub generation: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    DuplicateNumber(String),
    UnknownLine {
        number: String,
        line: LineId,
    },
    /// The number count given; the limit is [`NUMBERS_COUNT_MAX`].
    TooManyNumbers(usize),
    /// Not `+` and 1 to 15 digits.
    NotE164(String),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::DuplicateNumber(number) => write!(f, "number {number} is listed twice"),
            TableError::UnknownLine { number, line } => {
                write!(f, "number {number} is on line {line}, which does not exist")
            }
            TableError::TooManyNumbers(count) => write!(
                f,
                "{count} numbers configured, at most {NUMBERS_COUNT_MAX} are supported"
            ),
            TableError::NotE164(number) => {
                write!(f, "number {number:?} is not E.164 (+ and 1 to 15 digits)")
            }
        }
    }
}

impl std::error::Error for TableError {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreError {
    UnknownNumber(String),
    AlreadyLeased(String),
}

impl fmt::Display for RestoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreError::UnknownNumber(number) => write!(f, "number {number} is not in the table"),
            RestoreError::AlreadyLeased(number) => write!(f, "number {number} is already leased"),
        }
    }
}

impl std::error::Error for RestoreError {}

/// Where a slot sits; its number is in the table's `numbers` at the same
/// index. 12 bytes: with the number (8), the state word (8) and the
/// sub-pool's bit-to-slot entry (4), a slot costs 32 bytes plus its index
/// entry (see `numbers.rs`).
struct SlotInfo {
    line: LineId,
    sub_pool: u32,
    bit: u32,
}

struct LineState {
    /// As last set; [`LeaseTable::set_line_up`] re-applies it until stable.
    up: AtomicBool,
    /// Numbers of the line, active or not.
    numbers: usize,
    /// (sub-pool, word, mask) of this line's active numbers, one entry per
    /// word. Empty for an inactive line, which never issues anything.
    issuable_words: Box<[(u32, u32, u64)]>,
}

pub struct LeaseTable {
    slots: Box<[SlotInfo]>,
    /// Each slot's number, and the lookup from number to slot.
    numbers: NumberIndex,
    /// Per slot, see [`STATE_LIVE_BIT`]. Kept apart from `slots` so the
    /// written words are dense and the read-only info is not invalidated.
    states: Box<[AtomicU64]>,
    /// The shared sub-pool of each pool at `Pool::index()`, then the
    /// dedicated sub-pools in (pool, company) order.
    sub_pools: Box<[SubPool]>,
    /// Companies with dedicated numbers, sorted, with their sub-pool index per
    /// `Pool::index()` or [`SUB_POOL_NONE`]. Usually empty or a handful.
    dedicated: Box<[(CompanyId, [u32; 2])]>,
    /// OR of [`dedicated_filter_bit`] over `dedicated`: a clear bit proves a
    /// company has no dedicated numbers without searching.
    dedicated_filter: u64,
    lines: Box<[LineState]>,
}

impl LeaseTable {
    /// A table of `numbers` (slot `i` is `numbers[i]`) on `lines`. For a
    /// million numbers prefer [`TableBuilder`], which never holds all their
    /// strings at once.
    pub fn new(lines: Vec<LineSpec>, numbers: Vec<NumberSpec>) -> Result<Self, TableError> {
        let mut builder = TableBuilder::new(lines);
        for spec in numbers {
            builder.push(spec);
        }
        builder.build()
    }

    /// Leases a number of `pool` for `company`: from the company's dedicated
    /// numbers of that pool first, else from the pool's shared numbers.
    /// `None` when neither has an issuable free number (the API's 503).
    #[inline]
    pub fn lease(&self, pool: Pool, company: CompanyId) -> Option<Lease> {
        // Fast path: one bit test. The filter is 0 without any dedication,
        // and most bits are clear with a few dedicated companies.
        if self.dedicated_filter & dedicated_filter_bit(company) != 0 {
            if let Some(sub_pool) = self.dedicated_sub_pool(pool, company) {
                if let Some(lease) = self.lease_in(sub_pool) {
                    return Some(lease);
                }
            }
        }
        self.lease_in(pool.index())
    }

    #[inline]
    fn dedicated_sub_pool(&self, pool: Pool, company: CompanyId) -> Option<usize> {
        let index = self
            .dedicated
            .binary_search_by_key(&company, |(c, _)| *c)
            .ok()?;
        let sub_pool = self.dedicated[index].1[pool.index()];
        (sub_pool != SUB_POOL_NONE).then_some(sub_pool as usize)
    }

    #[inline]
    fn lease_in(&self, sub_pool_index: usize) -> Option<Lease> {
        let sub_pool = &self.sub_pools[sub_pool_index];
        let bit = sub_pool.claim_next()?;
        let slot = sub_pool.slot(bit);
        let state = &self.states[slot.0 as usize];
        // We hold the claim and the state is not live, so no other thread
        // writes it until we publish (a release's CAS expects "live"). The
        // claim's Acquire made the previous release's state visible.
        let generation = state_generation(state.load(Ordering::Acquire)).wrapping_add(1);
        state.store(state_live(generation), Ordering::Release);
        Some(Lease { slot, generation })
    }

    /// Frees the slot if `lease` is its live lease. A stale lease (released
    /// already, or superseded by a newer lease of the same slot) or a slot
    /// not of this table returns false and changes nothing.
    #[inline]
    pub fn release(&self, lease: Lease) -> bool {
        let index = lease.slot.0 as usize;
        let (Some(info), Some(state)) = (self.slots.get(index), self.states.get(index)) else {
            return false;
        };
        // The one ownership test: only the holder of exactly this generation
        // turns the state from live to free, so of two racing releases of the
        // same lease one wins.
        if state
            .compare_exchange(
                state_live(lease.generation),
                state_free(lease.generation),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        // Only after the state is free: the next claimer must see it so.
        self.sub_pools[info.sub_pool as usize].unclaim(info.bit as usize);
        true
    }

    /// Re-marks `number` leased with a stored `generation`, on restart or when
    /// carrying leases into a rebuilt table. Works whether or not the number
    /// is issuable now (its line may be down). The next lease of the number
    /// after this one is released carries `generation + 1`.
    ///
    /// Meant for a table not yet serving leases (or whose slot for `number`
    /// has never been leased): restoring an old generation into a slot that
    /// has issued newer ones could repeat a generation.
    pub fn restore(&self, number: &str, generation: u32) -> Result<Lease, RestoreError> {
        let slot = self
            .slot_of(number)
            .ok_or_else(|| RestoreError::UnknownNumber(number.to_owned()))?;
        let info = &self.slots[slot.0 as usize];
        if !self.sub_pools[info.sub_pool as usize].claim(info.bit as usize) {
            return Err(RestoreError::AlreadyLeased(number.to_owned()));
        }
        // Claimed and not live: as in `lease_in`, we are the only writer.
        self.states[slot.0 as usize].store(state_live(generation), Ordering::Release);
        Ok(Lease { slot, generation })
    }

    /// The slot of `number`; `None` if the table does not hold it. A binary
    /// search over the sorted numbers (see `numbers.rs` for why not a hash).
    pub fn slot_of(&self, number: &str) -> Option<Slot> {
        self.numbers.slot_of(number)
    }

    /// The number of `slot` (`+` and digits); empty for a slot not of this
    /// table. Rendered from its packed form on each call.
    pub fn number(&self, slot: Slot) -> String {
        self.numbers
            .get(slot)
            .map_or_else(String::new, |number| number.to_string())
    }

    /// The line of `slot`; `LineId::MAX` for a slot not of this table.
    pub fn line_of(&self, slot: Slot) -> LineId {
        self.slots
            .get(slot.0 as usize)
            .map_or(LineId::MAX, |info| info.line)
    }

    /// The live lease of `slot`, if it is leased.
    #[inline]
    pub fn current(&self, slot: Slot) -> Option<Lease> {
        let state = self.states.get(slot.0 as usize)?.load(Ordering::Acquire);
        state_is_live(state).then(|| Lease {
            slot,
            generation: state_generation(state),
        })
    }

    /// Marks `line` registered (`up`) or not: its active numbers become
    /// issuable or withheld at once (an inactive line stays withheld). Leases
    /// already taken on the line stay leased. Unknown lines are ignored.
    ///
    /// Lock-free and safe to race with itself: the flag is stored first and
    /// re-applied until it did not change during the pass, so once all calls
    /// have returned every word of the line agrees with the last call.
    pub fn set_line_up(&self, line: LineId, up: bool) {
        let Some(state) = self.lines.get(line as usize) else {
            return;
        };
        state.up.store(up, Ordering::SeqCst);
        loop {
            let want = state.up.load(Ordering::SeqCst);
            for &(sub_pool, word, mask) in state.issuable_words.iter() {
                self.sub_pools[sub_pool as usize].set_issuable(word as usize, mask, want);
            }
            if state.up.load(Ordering::SeqCst) == want {
                return;
            }
        }
    }

    /// Whether `line` is registered as last set; `None` for an unknown line.
    pub fn line_up(&self, line: LineId) -> Option<bool> {
        self.lines
            .get(line as usize)
            .map(|state| state.up.load(Ordering::SeqCst))
    }

    /// Bytes of the table's arrays, from their lengths: what a table of this
    /// size keeps resident (allocator rounding aside).
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        use std::mem::size_of_val;
        let lines: usize = self
            .lines
            .iter()
            .map(|line| size_of_val(&*line.issuable_words))
            .sum();
        let sub_pools: usize = self.sub_pools.iter().map(SubPool::heap_bytes).sum();
        size_of_val(&*self.slots)
            + self.numbers.heap_bytes()
            + size_of_val(&*self.states)
            + size_of_val(&*self.sub_pools)
            + sub_pools
            + size_of_val(&*self.dedicated)
            + size_of_val(&*self.lines)
            + lines
    }

    /// Every live lease as (number, generation), in slot order: what a
    /// rebuilt table needs to [`LeaseTable::restore`]. Read slot by slot;
    /// take it while no lease or release runs on this table if it must be
    /// complete.
    pub fn leases(&self) -> Vec<(String, u32)> {
        self.numbers
            .iter()
            .zip(self.states.iter())
            .filter_map(|(number, state)| {
                let state = state.load(Ordering::Acquire);
                state_is_live(state).then(|| (number.to_string(), state_generation(state)))
            })
            .collect()
    }
}

impl fmt::Debug for LeaseTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseTable")
            .field("numbers", &self.numbers.len())
            .field("lines", &self.lines.len())
            .field("stats", &self.stats())
            .finish()
    }
}

// Compile-time: a full table's bit positions fit the u32 fields above.
const _: () = assert!(NUMBERS_COUNT_MAX < u32::MAX as usize - 2);
const _: () = assert!(WORD_SIZE_BITS == 64);
