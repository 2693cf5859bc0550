//! The table's numbers, 24 bytes each: every number packed in a `u64`
//! ([`PackedNumber`]) once per slot, and once more beside its slot in a
//! sorted index that a binary search reads to find the slot of a number.
//!
//! Why not strings and a `HashMap<Box<str>, Slot>`: a pool may hold a
//! million numbers (config's `RANGE_COUNT_MAX`), and two heap strings plus a
//! hash map's buckets cost ~150 B per number of resident memory, against the
//! 64 B the operators' target allows for everything a number costs. An
//! E.164 number has at most 15 digits, so its digits fit in 50 bits.
//!
//! Not for: validating that a number is dialable (config checks the E.164
//! shape, `crate::sip` the region rules); this file only stores and finds
//! what the table was given.

use super::{Slot, TableError};
use std::fmt;

/// Most digits of an E.164 number (ITU-T E.164, section 6).
const DIGITS_MAX: usize = 15;
/// Bits holding the digits' value: 10^15 - 1 < 2^50.
const VALUE_BITS: u32 = 50;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;

/// `+` and 1 to 15 ASCII digits, in one word.
///
/// Invariant: the low [`VALUE_BITS`] bits hold the digits read as a decimal
/// value, the bits above them the count of digits, 1..=15, and the value is
/// below 10^count. The count keeps leading zeros (`+0012` and `+12` differ),
/// so rendering gives back exactly the text that was parsed. Only
/// [`PackedNumber::parse`] builds one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct PackedNumber(u64);

impl PackedNumber {
    /// `None` unless `text` is `+` followed by 1 to 15 ASCII digits.
    pub(super) fn parse(text: &str) -> Option<PackedNumber> {
        let digits = text.strip_prefix('+')?.as_bytes();
        if digits.is_empty() || digits.len() > DIGITS_MAX {
            return None;
        }
        let mut value = 0u64;
        for &byte in digits {
            if !byte.is_ascii_digit() {
                return None;
            }
            // At most 15 digits: below 10^15, no overflow.
            value = value * 10 + u64::from(byte - b'0');
        }
        let count = digits.len() as u64; // At most 15.
        Some(PackedNumber(count << VALUE_BITS | value))
    }

    fn digits_count(self) -> usize {
        // At most 15 by the invariant.
        (self.0 >> VALUE_BITS) as usize
    }

    fn value(self) -> u64 {
        self.0 & VALUE_MASK
    }
}

impl fmt::Display for PackedNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{:0width$}", self.value(), width = self.digits_count())
    }
}

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

// 10^15 - 1, the largest 15-digit value, fits the value bits; the count
// (at most 15) fits the 14 bits above them.
const _: () = assert!(10u64.pow(DIGITS_MAX as u32) - 1 <= VALUE_MASK);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn packs_and_renders_exactly_what_was_parsed() {
        for text in [
            "+1",
            "+74950000001",
            "+442030000001",
            "+999999999999999",
            "+000000000000000",
            "+0012",
            "+12",
        ] {
            let packed = PackedNumber::parse(text).expect(text);
            assert_eq!(packed.to_string(), text);
        }
        assert_ne!(PackedNumber::parse("+0012"), PackedNumber::parse("+12"));
    }

    #[test]
    fn refuses_what_is_not_plus_and_one_to_fifteen_digits() {
        for text in [
            "",
            "+",
            "74950000001",
            "+1234567890123456",
            "+7495000000a",
            "+7 495",
            "++7495",
            "+-7495",
            "+٣", // An Arabic-Indic digit: not ASCII.
        ] {
            assert_eq!(PackedNumber::parse(text), None, "{text:?}");
        }
    }
}
