//! A map from a number to a small value, held as one sorted array plus a
//! few recent additions: what number health keeps for every number it has
//! seen.
//!
//! Why not a `HashMap`: at 48 bytes an entry (number health's entries
//! then; 40 since), a hash map held about 86 bytes per number (its load
//! factor and power-of-two capacity), and every
//! number a service leases gets an entry, so at 600,000 numbers that is
//! 23 MB more than the entries themselves. Here the array is allocated to
//! its exact length at each merge and the recent additions are at most an
//! eighth of it, so a number costs its entry and a few bytes.
//!
//! Lookups search the array guided by the number's value
//! ([`crate::guided_search`]): numbers are configured in ranges, so a
//! guess lands within a few entries of the right one. An addition goes to
//! a small hash map; when that holds more than an eighth of the array, the
//! two are merged into a new exact-size array (each entry is copied about
//! nine times over the map's growth). The price is paid once per number,
//! as numbers are first seen: 600,000 first seen in random order took
//! 0.47 s in all against a hash map's 0.15 s, and the largest merge held
//! its caller (number health's lock) for about 20 ms (`cargo bench --bench
//! number_health`, benches/README.md). A lookup is faster than the hash
//! map's: 0.4-0.7 of its time at 600,000 numbers.
//!
//! Not for: deciding anything about a number (`crate::number_health`).

use crate::e164::PackedNumber;
use crate::guided_search;
use std::collections::HashMap;

/// Recent additions may reach this many before a merge, whatever the
/// array's length (merging a tiny array on every addition would be waste).
const RECENT_MIN: usize = 1024;
/// ... or the array's length divided by this.
const RECENT_SHARE: usize = 8;

pub struct NumberMap<V> {
    /// Sorted by number, allocated to its length.
    sorted: Vec<(PackedNumber, V)>,
    /// Numbers added since the last merge; none of them is in `sorted`.
    recent: HashMap<PackedNumber, V>,
}

impl<V> Default for NumberMap<V> {
    fn default() -> Self {
        NumberMap {
            sorted: Vec::new(),
            recent: HashMap::new(),
        }
    }
}

impl<V: Copy + Default> NumberMap<V> {
    pub fn len(&self) -> usize {
        self.sorted.len() + self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn position(&self, number: PackedNumber) -> Result<usize, usize> {
        let sorted = &self.sorted;
        guided_search::position(sorted.len(), |i| sorted[i].0, number, PackedNumber::ordinal)
    }

    pub fn get(&self, number: PackedNumber) -> Option<&V> {
        match self.position(number) {
            Ok(at) => Some(&self.sorted[at].1),
            Err(_) => self.recent.get(&number),
        }
    }

    pub fn get_mut(&mut self, number: PackedNumber) -> Option<&mut V> {
        match self.position(number) {
            Ok(at) => Some(&mut self.sorted[at].1),
            Err(_) => self.recent.get_mut(&number),
        }
    }

    /// `number`'s value, a default one added if it had none.
    pub fn entry(&mut self, number: PackedNumber) -> &mut V {
        if let Ok(at) = self.position(number) {
            return &mut self.sorted[at].1;
        }
        // Full, and this number would be one more: merge first (the
        // hash lookup only when full).
        if self.recent.len() >= RECENT_MIN.max(self.sorted.len() / RECENT_SHARE)
            && !self.recent.contains_key(&number)
        {
            self.merge();
        }
        self.recent.entry(number).or_default()
    }

    /// Moves the recent additions into a new array of exactly the length
    /// of both. Taken, not drained: a drained map keeps its buckets.
    fn merge(&mut self) {
        let mut recent: Vec<(PackedNumber, V)> =
            std::mem::take(&mut self.recent).into_iter().collect();
        recent.sort_unstable_by_key(|(number, _)| *number);
        let old = std::mem::take(&mut self.sorted);
        let mut merged = Vec::with_capacity(old.len() + recent.len());
        let (mut old, mut recent) = (old.into_iter().peekable(), recent.into_iter().peekable());
        loop {
            let take_old = match (old.peek(), recent.peek()) {
                (Some(a), Some(b)) => a.0 < b.0,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            // The peek just above saw an item on the side taken.
            merged.extend(if take_old { old.next() } else { recent.next() });
        }
        self.sorted = merged;
    }

    /// Every number and its value: the array's in order, then the recent
    /// additions in no order.
    pub fn iter(&self) -> impl Iterator<Item = (PackedNumber, &V)> + '_ {
        let sorted = self.sorted.iter().map(|(number, v)| (*number, v));
        sorted.chain(self.recent.iter().map(|(number, v)| (*number, v)))
    }

    /// Bytes the map holds on the heap, as far as it can tell (the hash
    /// map's control bytes and slack estimated from its capacity).
    #[cfg(test)]
    fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(PackedNumber, V)>();
        self.sorted.capacity() * entry + self.recent.capacity() * (entry + 1)
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
        assert!(map.sorted.len() > map.recent.len(), "merges happened");
        assert!(
            map.sorted.windows(2).all(|w| w[0].0 < w[1].0),
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

    /// The reason for the map: about an entry's size per number, not the
    /// hash map's 86 bytes.
    #[test]
    fn a_number_costs_little_more_than_its_entry() {
        let mut map: NumberMap<[u32; 8]> = NumberMap::default();
        let count = 200_000;
        for i in 0..count {
            map.entry(number(i));
        }
        let per_number = map.heap_bytes() / count as usize;
        assert!(
            per_number <= 40 + 40 / RECENT_SHARE + 2,
            "{per_number} B per number"
        );
    }
}
