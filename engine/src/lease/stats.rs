//! Counts of the lease table for the operators: per sub-pool and per line.
//!
//! Snapshots read word by word while leases may change: each count is exact
//! for some instant during the read, not necessarily the same one.
//!
//! Not for: leasing or releasing (`super`).

use super::{CompanyId, LeaseTable, LineId, Pool};
use std::sync::atomic::Ordering;

/// Counts of one sub-pool, read word by word (a snapshot, not a transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    pub pool: Pool,
    /// `None` for the pool's shared sub-pool.
    pub dedicated_to: Option<CompanyId>,
    /// Numbers in the sub-pool, whatever their state.
    pub total: usize,
    /// Numbers that may be issued now (number active, line active and up),
    /// leased or not.
    pub issuable: usize,
    /// Numbers leased now, issuable or not (a restored lease on a down line
    /// counts here).
    pub leased: usize,
}

/// One line's numbers, as [`LeaseTable::line_stats`] counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineStats {
    pub line: LineId,
    /// Numbers of the line, whatever their state.
    pub total: usize,
    /// Numbers that may be issued now: active, on an active line that is up.
    pub issuable: usize,
    /// Leased numbers among the line's active ones.
    pub leased: usize,
}

impl LeaseTable {
    /// Per sub-pool counts, ordered by pool, then shared before dedicated,
    /// then by company. Both pools' shared sub-pools are always listed.
    pub fn stats(&self) -> Vec<PoolStats> {
        let mut stats: Vec<PoolStats> = self
            .sub_pools
            .iter()
            .map(|sub_pool| {
                let (issuable, leased) = sub_pool.counts();
                PoolStats {
                    pool: sub_pool.pool,
                    dedicated_to: sub_pool.dedicated_to,
                    total: sub_pool.len(),
                    issuable,
                    leased,
                }
            })
            .collect();
        stats.sort_by_key(|s| (s.pool, s.dedicated_to));
        stats
    }

    /// Per line counts, in line order. Costs one word read per 64 of the
    /// line's numbers, not a walk over the numbers.
    pub fn line_stats(&self) -> Vec<LineStats> {
        self.lines
            .iter()
            .enumerate()
            .map(|(i, state)| {
                let (mut active, mut leased) = (0, 0);
                for &(sub_pool, word, mask) in state.issuable_words.iter() {
                    active += mask.count_ones() as usize;
                    leased += self.sub_pools[sub_pool as usize].claimed_in(word as usize, mask);
                }
                let up = state.up.load(Ordering::SeqCst);
                LineStats {
                    line: LineId::try_from(i).unwrap_or(LineId::MAX),
                    total: state.numbers,
                    issuable: if up { active } else { 0 },
                    leased,
                }
            })
            .collect()
    }
}
