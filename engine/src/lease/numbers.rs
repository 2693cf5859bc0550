//! The table's numbers, 24 bytes each: every number packed in a `u64`
//! ([`PackedNumber`], `crate::e164`) once per slot, and once more beside its slot in a
//! sorted index that a binary search reads to find the slot of a number.
//!
//! Why not strings and a `HashMap<Box<str>, Slot>`: a pool may hold a
//! million numbers (config's `RANGE_COUNT_MAX`), and two heap strings plus a
//! hash map's buckets cost ~150 B per number of resident memory, against the
//! 64 B the operators' target allows for everything a number costs.
//!
//! Not for: validating that a number is dialable (config checks the E.164
//! shape, `crate::sip` the region rules); this file only stores and finds
//! what the table was given.

use super::{Slot, TableError};
use crate::e164::PackedNumber;

/// Every number of a table: by slot, and sorted for lookups by number.
pub(super) struct NumberIndex {
    /// The number of each slot, at the slot's index.
    by_slot: Box<[PackedNumber]>,
    /// (number, slot), sorted by number, each number once.
    sorted: Box<[(PackedNumber, Slot)]>,
}

impl NumberIndex {
    /// The index of `by_slot` (slot `i` has `by_slot[i]`); the error names
    /// the lowest number listed twice.
    pub(super) fn new(by_slot: Box<[PackedNumber]>) -> Result<NumberIndex, TableError> {
        let mut sorted: Vec<(PackedNumber, Slot)> = by_slot
            .iter()
            .enumerate()
            // Slots are below NUMBERS_COUNT_MAX, checked by the caller.
            .map(|(index, number)| (*number, Slot(index as u32)))
            .collect();
        sorted.sort_unstable();
        if let Some(pair) = sorted.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(TableError::DuplicateNumber(pair[0].0.to_string()));
        }
        Ok(NumberIndex {
            by_slot,
            sorted: sorted.into_boxed_slice(),
        })
    }

    /// The slot of `number`; `None` if it is not in the table or not a
    /// number at all (`+` and 1 to 15 digits).
    pub(super) fn slot_of(&self, number: &str) -> Option<Slot> {
        let packed = PackedNumber::parse(number)?;
        let index = self
            .sorted
            .binary_search_by_key(&packed, |(number, _)| *number)
            .ok()?;
        Some(self.sorted[index].1)
    }

    /// The number of `slot`; `None` for a slot not of this table.
    pub(super) fn get(&self, slot: Slot) -> Option<PackedNumber> {
        self.by_slot.get(slot.0 as usize).copied()
    }

    /// Every number in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = PackedNumber> + '_ {
        self.by_slot.iter().copied()
    }

    pub(super) fn len(&self) -> usize {
        self.by_slot.len()
    }

    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.by_slot) + std::mem::size_of_val(&*self.sorted)
    }
}
