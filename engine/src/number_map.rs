//! A map from a number to a small value, held as two sorted arrays (the
//! numbers, and their values in the same order) plus a few recent
//! additions: what number health keeps for every number it has seen.
//!
//! Why not a `HashMap`: at 48 bytes an entry (number health's entries
//! then), a hash map held about 86 bytes per number (its load factor and
//! power-of-two capacity), and every number a service leases gets an
//! entry, so at 600,000 numbers that is 23 MB more than the entries
//! themselves. Here the arrays are allocated to their exact length at
//! each merge and the recent additions are at most an eighth of them, so
//! a number costs its entry and a few bytes. Why two arrays and not one of
//! pairs: a pair of an 8-byte number and a 4-byte value is padded to 16
//! bytes; apart they take 12.
//!
//! Lookups search the numbers guided by their value
//! ([`crate::guided_search`]): numbers are configured in ranges, so a
//! guess lands within a few entries of the right one. An addition goes to
//! a small hash map; when that holds more than an eighth of the arrays,
//! the two are merged into new exact-size arrays (each entry is copied
//! about nine times over the map's growth). The price is paid once per
//! number, as numbers are first seen (`cargo bench --bench
//! number_health`, benches/README.md); a map known in full at once (a
//! restart's stored state) is built with one sort instead
//! ([`NumberMap::from_entries`]). A lookup is faster than the hash map's:
//! 0.4-0.7 of its time at 600,000 numbers.
//!
//! Not for: deciding anything about a number (`crate::number_health`).

use crate::e164::PackedNumber;
use crate::guided_search;
use crate::word_hash::BuildWordHasher;
use std::collections::HashMap;

/// Recent additions may reach this many before a merge, whatever the
/// array's length (merging a tiny array on every addition would be waste).
const RECENT_MIN: usize = 1024;
/// ... or the array's length divided by this.
const RECENT_SHARE: usize = 8;

pub struct NumberMap<V> {
    /// Ascending, no repeats, allocated to its length.
    numbers: Vec<PackedNumber>,
    /// `numbers[i]`'s value at `values[i]`; the same length.
    values: Vec<V>,
    /// Numbers added since the last merge; none of them is in `numbers`.
    recent: HashMap<PackedNumber, V, BuildWordHasher>,
}

impl<V> Default for NumberMap<V> {
    fn default() -> Self {
        NumberMap {
            numbers: Vec::new(),
            values: Vec::new(),
            recent: HashMap::default(),
        }
    }
}

impl<V: Copy + Default> NumberMap<V> {
    /// The map of `entries`, in any order; of a number given twice, the
    /// last value is kept.
    pub fn from_entries(mut entries: Vec<(PackedNumber, V)>) -> Self {
        // Stable, so that of equal numbers the later stays later.
        entries.sort_by_key(|(number, _)| *number);
        let mut numbers = Vec::with_capacity(entries.len());
        let mut values: Vec<V> = Vec::with_capacity(entries.len());
        for (number, value) in entries {
            if numbers.last() == Some(&number) {
                // The same number just pushed: both vectors have a last.
                if let Some(last) = values.last_mut() {
                    *last = value;
                }
                continue;
            }
            numbers.push(number);
            values.push(value);
        }
        numbers.shrink_to_fit();
        values.shrink_to_fit();
        NumberMap {
            numbers,
            values,
            recent: HashMap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.numbers.len() + self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn position(&self, number: PackedNumber) -> Result<usize, usize> {
        let numbers = &self.numbers;
        guided_search::position(numbers.len(), |i| numbers[i], number, PackedNumber::ordinal)
    }

    pub fn get(&self, number: PackedNumber) -> Option<&V> {
        match self.position(number) {
            Ok(at) => Some(&self.values[at]),
            Err(_) => self.recent.get(&number),
        }
    }

    pub fn get_mut(&mut self, number: PackedNumber) -> Option<&mut V> {
        match self.position(number) {
            Ok(at) => Some(&mut self.values[at]),
            Err(_) => self.recent.get_mut(&number),
        }
    }

    /// `number`'s value, a default one added if it had none.
    pub fn entry(&mut self, number: PackedNumber) -> &mut V {
        if let Ok(at) = self.position(number) {
            return &mut self.values[at];
        }
        // Full, and this number would be one more: merge first (the
        // hash lookup only when full).
        if self.recent.len() >= RECENT_MIN.max(self.numbers.len() / RECENT_SHARE)
            && !self.recent.contains_key(&number)
        {
            self.merge();
        }
        self.recent.entry(number).or_default()
    }

    /// Moves the recent additions into new arrays of exactly the length of
    /// both. Taken, not drained: a drained map keeps its buckets.
    fn merge(&mut self) {
        let mut recent: Vec<(PackedNumber, V)> =
            std::mem::take(&mut self.recent).into_iter().collect();
        recent.sort_unstable_by_key(|(number, _)| *number);
        let len = self.numbers.len() + recent.len();
        let (mut numbers, mut values) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let old_numbers = std::mem::take(&mut self.numbers);
        let old_values = std::mem::take(&mut self.values);
        let mut old = old_numbers.into_iter().zip(old_values).peekable();
        let mut recent = recent.into_iter().peekable();
        loop {
            let take_old = match (old.peek(), recent.peek()) {
                (Some(a), Some(b)) => a.0 < b.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            // The peek just above saw an item on the side taken.
            let next = if take_old { old.next() } else { recent.next() };
            if let Some((number, value)) = next {
                numbers.push(number);
                values.push(value);
            }
        }
        self.numbers = numbers;
        self.values = values;
    }

    /// Every number and its value: the arrays' in order, then the recent
    /// additions in no order.
    pub fn iter(&self) -> impl Iterator<Item = (PackedNumber, &V)> + '_ {
        let sorted = self.numbers.iter().copied().zip(self.values.iter());
        sorted.chain(self.recent.iter().map(|(number, v)| (*number, v)))
    }

    /// Bytes the map holds on the heap, as far as it can tell (the hash
    /// map's control bytes and slack estimated from its capacity).
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        let (number, value) = (
            std::mem::size_of::<PackedNumber>(),
            std::mem::size_of::<V>(),
        );
        let pair = std::mem::size_of::<(PackedNumber, V)>();
        self.numbers.capacity() * number
            + self.values.capacity() * value
            + self.recent.capacity() * (pair + 1)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sip::rng::SplitMix64;

    fn number(i: u64) -> PackedNumber {
        // Two ranges of two lengths, so the guesses meet a jump.
        let text = if i.is_multiple_of(3) {
            format!("+4420{i:07}")
        } else {
            format!("+7495{i:08}")
        };
        PackedNumber::parse(&text).expect("a number")
    }

    /// Against a `HashMap` doing the same, through merges: every value
    /// found, nothing invented, counts kept across the merges.
    #[test]
    fn keeps_what_a_hash_map_keeps_across_merges() {
        let mut rng = SplitMix64::new(11);
        let mut map: NumberMap<u32> = NumberMap::default();
        let mut want: HashMap<PackedNumber, u32> = HashMap::new();
        for _ in 0..60_000 {
            let n = number(rng.below(20_000));
            *map.entry(n) += 1;
            *want.entry(n).or_default() += 1;
        }
        assert_eq!(map.len(), want.len());
        assert!(map.numbers.len() > map.recent.len(), "merges happened");
        assert_eq!(map.numbers.len(), map.values.len());
        assert!(
            map.numbers.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
        for (n, count) in &want {
            assert_eq!(map.get(*n), Some(count), "{n}");
        }
        let seen: HashMap<PackedNumber, u32> = map.iter().map(|(n, v)| (n, *v)).collect();
        assert_eq!(seen, want);
        for i in 20_000..20_100 {
            assert_eq!(map.get(number(i)), None, "never added");
        }
        if let Some(v) = map.get_mut(number(0)) {
            *v = 99;
        }
        assert_eq!(
            map.get(number(0)).copied(),
            want.get(&number(0)).map(|_| 99)
        );
    }

    /// The reason for the map: about an entry's size per number (12 bytes
    /// for number health's 4-byte value), not the hash map's 86 bytes.
    #[test]
    fn a_number_costs_little_more_than_its_entry() {
        let mut map: NumberMap<u32> = NumberMap::default();
        let count = 200_000;
        for i in 0..count {
            map.entry(number(i));
        }
        let per_number = map.heap_bytes() / count as usize;
        // The recent additions are at most an eighth of the numbers, in
        // at most twice as many slots of 17 bytes (a padded pair and a
        // control byte).
        assert!(
            per_number <= 12 + 2 * 17 / RECENT_SHARE,
            "{per_number} B per number"
        );
    }

    /// A map built at once: unsorted input, a repeated number's last
    /// value, exact-size arrays, and additions after it as usual.
    #[test]
    fn a_map_built_from_its_entries_keeps_the_last_value_of_a_repeat() {
        let entries = vec![
            (number(5), 1u32),
            (number(2), 2),
            (number(5), 3),
            (number(9), 4),
        ];
        let mut map = NumberMap::from_entries(entries);
        assert_eq!(map.len(), 3);
        assert_eq!(map.numbers.capacity(), 3);
        assert_eq!(map.values.capacity(), 3);
        assert_eq!(map.get(number(5)), Some(&3), "the later of the two");
        assert_eq!(map.get(number(2)), Some(&2));
        assert_eq!(map.get(number(7)), None);
        *map.entry(number(7)) += 6;
        assert_eq!((map.get(number(7)), map.len()), (Some(&6), 4));
    }
}
