//! One sub-pool's bitmaps: which numbers are leased, which are issuable now,
//! and the next-fit search that claims a free issuable bit.
//!
//! Not for: generations, numbers or lines (see the parent module); this file
//! only knows bit positions. Bit `i` of the sub-pool is bit `i % 64` of word
//! `i / 64`; bits past the sub-pool's length are never issuable, so the search
//! needs no bounds check for them.

use super::{AtomicU64, AtomicUsize, Ordering, Slot};
use crate::pool::Pool;
use crate::CompanyId;

/// Bits per bitmap word.
pub(super) const WORD_SIZE_BITS: usize = u64::BITS as usize;

/// Keeps the hot, written-on-every-lease cursor off the cache line that holds
/// the read-only fields (the `Box` pointers every search reads). 128 bytes
/// because adjacent-line prefetch pairs 64-byte lines on x86.
#[repr(align(128))]
struct CachePadded<T>(T);

/// Word index and single-bit mask of bit `bit`.
#[inline]
pub(super) fn word_and_mask(bit: usize) -> (usize, u64) {
    (bit / WORD_SIZE_BITS, 1u64 << (bit % WORD_SIZE_BITS))
}

pub(super) struct SubPool {
    pub(super) pool: Pool,
    /// `None` for the pool's shared sub-pool.
    pub(super) dedicated_to: Option<CompanyId>,
    /// Bit position to slot.
    slots: Box<[Slot]>,
    /// Set while a number is claimed: leased, or for an instant between a
    /// claim and its undo (see [`SubPool::claim_next`]) or between a release
    /// and the bit clear.
    leased: Box<[AtomicU64]>,
    /// Number active AND line active AND line up (registered now).
    issuable: Box<[AtomicU64]>,
    /// Next-fit start: one past the bit issued last. A hint only: racing
    /// leasers may store it out of order, which at worst starts a search a
    /// few bits early or late. Kept modulo the length on load, not on store.
    cursor_bit: CachePadded<AtomicUsize>,
}

impl SubPool {
    /// `issuable_initial[i]` is the starting issuable state of bit `i`.
    pub(super) fn new(
        pool: Pool,
        dedicated_to: Option<CompanyId>,
        slots: Vec<Slot>,
        issuable_initial: &[bool],
    ) -> SubPool {
        debug_assert_eq!(slots.len(), issuable_initial.len());
        let words_count = slots.len().div_ceil(WORD_SIZE_BITS);
        let mut issuable_words = vec![0u64; words_count];
        for (bit, _) in issuable_initial.iter().enumerate().filter(|(_, on)| **on) {
            let (word, mask) = word_and_mask(bit);
            issuable_words[word] |= mask;
        }
        SubPool {
            pool,
            dedicated_to,
            slots: slots.into_boxed_slice(),
            leased: (0..words_count).map(|_| AtomicU64::new(0)).collect(),
            issuable: issuable_words.into_iter().map(AtomicU64::new).collect(),
            cursor_bit: CachePadded(AtomicUsize::new(0)),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the three arrays (bit-to-slot and both bitmaps).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        use std::mem::size_of_val;
        size_of_val(&*self.slots) + size_of_val(&*self.leased) + size_of_val(&*self.issuable)
    }

    #[inline]
    pub(super) fn slot(&self, bit: usize) -> Slot {
        self.slots[bit]
    }

    /// Claims a free issuable bit, searching cyclically from the cursor
    /// (next-fit, like Linux `idr_alloc_cyclic`), and moves the cursor past
    /// it. `None` when no bit is both issuable and free.
    ///
    /// Why next-fit and not lowest-free: a just-released number sits behind
    /// the cursor, so it is issued again only after the search has wrapped
    /// around the whole sub-pool. A late call to a released number then
    /// almost never lands on a new verification (a design-stage measurement:
    /// a median of ~5 minutes from release to re-issue at 50% load with
    /// cyclic cursors, against ~1 s for lowest-free).
    ///
    /// Why one cursor per sub-pool and not one per worker (the first
    /// sketch): `lease` needs no worker id, and the rotation holds whichever
    /// thread leases next; with per-worker cursors another worker's cursor
    /// may sit right on a just-released number. The cost is one more shared
    /// cache line written by every lease, and concurrent leasers start in the
    /// same word (see the two-thread figure of `benches/lease_table.rs`).
    #[inline]
    pub(super) fn claim_next(&self) -> Option<usize> {
        let bits_count = self.slots.len();
        if bits_count == 0 {
            return None;
        }
        let words_count = self.leased.len();
        // The cursor is at most `bits_count` (one past the last bit): wrap
        // with a compare rather than a 64-bit division on the hot path.
        let cursor_bit = self.cursor_bit.0.load(Ordering::Relaxed);
        let start_bit = if cursor_bit < bits_count {
            cursor_bit
        } else {
            0
        };
        let start_word = start_bit / WORD_SIZE_BITS;
        // Bits at or after the cursor in its own word; that word is visited
        // again at the end of the cycle for the bits before the cursor.
        let start_window = u64::MAX << (start_bit % WORD_SIZE_BITS);
        for step in 0..=words_count {
            let window = if step == 0 {
                start_window
            } else if step == words_count {
                !start_window
            } else {
                u64::MAX
            };
            if window == 0 {
                continue;
            }
            let mut word = start_word + step;
            if word >= words_count {
                word -= words_count;
            }
            if let Some(bit_in_word) = self.claim_in_word(word, window) {
                let bit = word * WORD_SIZE_BITS + bit_in_word;
                self.cursor_bit.0.store(bit + 1, Ordering::Relaxed);
                return Some(bit);
            }
        }
        None
    }

    /// Claims the lowest free issuable bit of `word` inside `window`, with a
    /// CAS on the leased word. A failed CAS means another bit of the word
    /// changed: recompute the candidates from the fresh value rather than
    /// retrying the same bit, which another leaser likely took.
    #[inline]
    fn claim_in_word(&self, word: usize, window: u64) -> Option<usize> {
        let leased = &self.leased[word];
        let issuable = &self.issuable[word];
        let mut leased_now = leased.load(Ordering::Relaxed);
        loop {
            let candidates = issuable.load(Ordering::Acquire) & !leased_now & window;
            if candidates == 0 {
                return None;
            }
            let bit_in_word = candidates.trailing_zeros() as usize;
            let mask = 1u64 << bit_in_word;
            // Acquire on success pairs with the Release of the previous
            // holder's bit clear, so its generation update is visible.
            match leased.compare_exchange(
                leased_now,
                leased_now | mask,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Re-check: the line may have gone down between the
                    // issuable load and the claim. Undoing shrinks the window
                    // in which a number of a line just taken down can still
                    // be issued to the claim instruction itself.
                    if issuable.load(Ordering::Acquire) & mask != 0 {
                        return Some(bit_in_word);
                    }
                    leased_now = leased.fetch_and(!mask, Ordering::Release) & !mask;
                }
                Err(actual) => leased_now = actual,
            }
        }
    }

    /// Claims `bit` regardless of issuable (restore). False if already set.
    pub(super) fn claim(&self, bit: usize) -> bool {
        let (word, mask) = word_and_mask(bit);
        self.leased[word].fetch_or(mask, Ordering::AcqRel) & mask == 0
    }

    /// Clears a bit claimed by [`SubPool::claim`] or [`SubPool::claim_next`].
    /// Release pairs with the next claimer's Acquire.
    #[inline]
    pub(super) fn unclaim(&self, bit: usize) {
        let (word, mask) = word_and_mask(bit);
        let before = self.leased[word].fetch_and(!mask, Ordering::Release);
        debug_assert!(before & mask != 0, "unclaim of a bit not claimed");
    }

    /// Sets or clears the issuable bits `mask` of `word` in one RMW.
    pub(super) fn set_issuable(&self, word: usize, mask: u64, on: bool) {
        // AcqRel: a racing `set_line_up` for the same line that applies its
        // value after ours must see our `up` flag store (see the parent's
        // reconcile loop).
        if on {
            self.issuable[word].fetch_or(mask, Ordering::AcqRel);
        } else {
            self.issuable[word].fetch_and(!mask, Ordering::AcqRel);
        }
    }

    /// Claimed bits of `word` under `mask`.
    pub(super) fn claimed_in(&self, word: usize, mask: u64) -> usize {
        self.leased.get(word).map_or(0, |w| {
            (w.load(Ordering::Relaxed) & mask).count_ones() as usize
        })
    }

    /// (issuable, claimed) bit counts. A snapshot: words are read one by one.
    pub(super) fn counts(&self) -> (usize, usize) {
        let count = |words: &[AtomicU64]| -> usize {
            words
                .iter()
                .map(|w| w.load(Ordering::Relaxed).count_ones() as usize)
                .sum()
        };
        (count(&self.issuable), count(&self.leased))
    }
}
