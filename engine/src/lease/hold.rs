//! Holding numbers back without a verification: what a promoted standby
//! does with the numbers the old primary's lost tail may have leased (see
//! `crate::promotion`, which decides which and how many).
//!
//! A held number is claimed like a lease (its `leased` bit set, its state
//! live) but keeps its generation, so releasing the returned [`Lease`]
//! leaves the slot exactly as before the hold and its next lease carries
//! the next generation as usual.
//!
//! Not for: deciding what to hold (the promotion planner) or when to let go
//! (the binary releases the leases at the planner's moment).

use super::Lease;
use super::{state_generation, state_live, LeaseTable, Ordering, Slot};

impl LeaseTable {
    /// How many sub-pools the table has: each pool's shared one, then the
    /// dedicated ones. Each has its own rotation cursor.
    pub fn sub_pools_count(&self) -> usize {
        self.sub_pools.len()
    }

    /// How many numbers each sub-pool has, by sub-pool index.
    pub fn sub_pool_sizes(&self) -> Vec<usize> {
        self.sub_pools.iter().map(|p| p.len()).collect()
    }

    /// The sub-pool `slot` belongs to; `None` for a slot not of this table.
    pub fn sub_pool_of(&self, slot: Slot) -> Option<usize> {
        self.slots.get(slot.0 as usize).map(|i| i.sub_pool as usize)
    }

    /// Claims up to `count` free numbers of `sub_pool` in the order its
    /// rotation would issue them after `after` (from its first number when
    /// `None`): cyclically, skipping numbers already leased. Issuable or not
    /// does not matter (the old primary's lines may have been up). Returns
    /// the holds, to be given to [`LeaseTable::release`] later.
    pub fn hold_following(&self, sub_pool: usize, after: Option<Slot>, count: usize) -> Vec<Lease> {
        let Some(pool) = self.sub_pools.get(sub_pool) else {
            return Vec::new();
        };
        let len = pool.len();
        let start = match after.and_then(|s| self.slots.get(s.0 as usize)) {
            Some(info) if info.sub_pool as usize == sub_pool => info.bit as usize + 1,
            _ => 0,
        };
        let mut held = Vec::with_capacity(count.min(len));
        for step in 0..len {
            if held.len() >= count {
                break;
            }
            let bit = (start + step) % len;
            if !pool.claim(bit) {
                continue;
            }
            let slot = pool.slot(bit);
            let state = &self.states[slot.0 as usize];
            // Claimed and not live: as in `lease_in`, no one else writes it.
            let generation = state_generation(state.load(Ordering::Acquire));
            state.store(state_live(generation), Ordering::Release);
            held.push(Lease { slot, generation });
        }
        held
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{LineSpec, NumberSpec};
    use super::*;
    use crate::pool::Pool;
    use std::collections::HashSet;

    fn table(count: usize, dedicated: usize) -> LeaseTable {
        let numbers = (0..count)
            .map(|i| NumberSpec {
                number: format!("+7900{i:07}"),
                pool: Pool::Domestic,
                line: 0,
                active: true,
                dedicated_to: (i < dedicated).then_some(42),
            })
            .collect();
        let line = LineSpec {
            active: true,
            up: true,
        };
        LeaseTable::new(vec![line], numbers).expect("table")
    }

    /// The old primary leases 30 numbers (some released again), the
    /// replica keeps the first 20 commits, the tail of 10 is lost. The
    /// standby restores the pending ones and holds 10 after the newest
    /// committed lease: none of the lost tail's numbers is issued to it
    /// until the holds are released, and then they are.
    #[test]
    fn a_hold_covers_exactly_what_the_rotation_would_issue_next() {
        let primary = table(64, 0);
        let mut committed = Vec::new();
        for n in 0..20 {
            let lease = primary.lease(Pool::Domestic, 1).expect("lease");
            // Every third committed one is completed and released again.
            if n % 3 == 0 {
                assert!(primary.release(lease));
            } else {
                committed.push(lease);
            }
        }
        let newest = primary
            .number(committed.last().expect("some").slot)
            .to_owned();
        let lost: HashSet<String> = (0..10)
            .map(|_| {
                let l = primary.lease(Pool::Domestic, 1).expect("lease");
                primary.number(l.slot).to_owned()
            })
            .collect();

        let standby = table(64, 0);
        for l in &committed {
            standby
                .restore(&primary.number(l.slot), l.generation)
                .expect("restore");
        }
        let after = standby.slot_of(&newest);
        let sub_pool = standby.sub_pool_of(after.expect("slot")).expect("pool");
        let held = standby.hold_following(sub_pool, after, 10);
        let held_numbers: HashSet<String> = held
            .iter()
            .map(|l| standby.number(l.slot).to_owned())
            .collect();
        assert_eq!(held_numbers, lost);

        let issued: Vec<String> = std::iter::from_fn(|| {
            standby
                .lease(Pool::Domestic, 1)
                .map(|l| standby.number(l.slot).to_owned())
        })
        .collect();
        assert!(issued.iter().all(|n| !lost.contains(n)));
        assert_eq!(issued.len(), 64 - committed.len() - 10);
        for l in held {
            assert!(standby.release(l));
        }
        let after_release: HashSet<String> = std::iter::from_fn(|| {
            standby
                .lease(Pool::Domestic, 1)
                .map(|l| standby.number(l.slot).to_owned())
        })
        .collect();
        assert_eq!(after_release, lost);
    }

    #[test]
    fn a_hold_wraps_skips_leased_numbers_and_keeps_generations() {
        let t = table(8, 3);
        // The two shared sub-pools come first; the dedicated one (slots 0..3)
        // is the third.
        assert_eq!(t.sub_pools_count(), 3);
        assert_eq!(t.sub_pool_sizes(), vec![5, 0, 3]);
        assert_eq!(t.sub_pool_of(Slot(1)), Some(2));
        assert_eq!(t.sub_pool_of(Slot(5)), Some(0));
        assert_eq!(t.sub_pool_of(Slot(99)), None);
        let taken = t.restore("+79000000007", 4).expect("restore");
        let shared = t.sub_pool_of(Slot(3)).expect("shared");
        let held = t.hold_following(shared, Some(Slot(6)), 3);
        let slots: Vec<u32> = held.iter().map(|l| l.slot.0).collect();
        assert_eq!(slots, vec![3, 4, 5], "wrapped past the leased slot 7");
        assert!(held.iter().all(|l| l.generation == 0));
        // Asking for more than is free holds what there is.
        assert_eq!(t.hold_following(shared, None, 10).len(), 1);
        assert!(t.lease(Pool::Domestic, 1).is_none());
        // A released hold leaves the slot's next lease at generation 1.
        assert!(t.release(held[0]));
        assert_eq!(
            t.lease(Pool::Domestic, 1).map(|l| (l.slot.0, l.generation)),
            Some((3, 1))
        );
        assert!(t.release(taken));
        // A slot of another sub-pool as `after` starts from the beginning.
        let dedicated = t.sub_pool_of(Slot(0)).expect("dedicated");
        let held = t.hold_following(dedicated, Some(Slot(7)), 1);
        assert_eq!(held[0].slot, Slot(0));
    }
}
