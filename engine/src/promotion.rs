//! A promoted standby's rule for the numbers the old primary's lost tail
//! may have leased.
//!
//! Replication ships the primary's commits with a delay, so when the
//! primary dies its last commits (the "lost tail") may never reach the
//! replica. Their verifications got a 201 and a dial number on the old
//! primary and are unknown to the standby; a user may still call such a
//! number for up to the longest TTL. The standby must not issue those
//! numbers to new verifications in the meantime, or one call would complete
//! the wrong one.
//!
//! The rotation makes them predictable: each sub-pool (a pool's shared
//! numbers, or one company's dedicated numbers of a pool) issues from a
//! cyclic cursor one past the number it issued last, so the lost tail's
//! leases are the next free numbers after the last lease the replica
//! committed in that sub-pool. How many: no more than the sub-pool issued
//! in the busiest stretch of the same length in the history it kept.
//!
//! `held = SAFETY x peak(L) + MARGIN` per sub-pool, where `L` is the lost
//! window (from the newest committed moment to its end, at least 1 s) and
//! `peak(L)` the most creates the sub-pool committed within any `L` in
//! the [`PEAK_HISTORY_MS`] before the newest committed moment. They are
//! held until [`TTL_SECONDS_MAX`] after the window's end.
//!
//! Not for: reading the rows (storage), holding the numbers (the lease
//! table's `hold_following`) or timing the release (the binary).

use crate::lease::Slot;
use crate::time::UnixMillis;
use crate::verification::TTL_SECONDS_MAX;
use std::collections::VecDeque;

/// How far back the busiest stretch is looked for.
pub const PEAK_HISTORY_MS: i64 = 3_600_000;
/// Multiplier on the observed peak: the lost tail may have been busier
/// than anything the replica holds.
pub const SAFETY: usize = 2;
/// Numbers held in every sub-pool on top, so that a sub-pool idle in the
/// history still covers a few creates in the lost window.
pub const MARGIN: usize = 8;
/// The shortest lost window the peak is measured over: the heartbeat's
/// period, within which the newest committed moment is known.
pub const LOST_WINDOW_MIN_MS: i64 = 1_000;

/// The moments that bound the lost window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostWindow {
    /// The newest moment the replica holds a commit of (a row's own
    /// timestamp or the heartbeat).
    pub last_committed: UnixMillis,
    /// When the old primary stopped committing: the operator's word, or
    /// the standby's start.
    pub end: UnixMillis,
}

impl LostWindow {
    /// `L`, at least [`LOST_WINDOW_MIN_MS`].
    pub fn length_ms(&self) -> i64 {
        (self.end.0 - self.last_committed.0).max(LOST_WINDOW_MIN_MS)
    }

    /// Until when the held numbers stay held: a lost verification lives
    /// at most the longest TTL after it was created.
    pub fn hold_until(&self) -> UnixMillis {
        UnixMillis(self.end.0.max(self.last_committed.0)).plus_seconds(TTL_SECONDS_MAX)
    }
}

/// What to hold in one sub-pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubPoolHold {
    pub sub_pool: usize,
    /// The sub-pool's newest committed lease: the hold starts after it.
    pub after: Option<Slot>,
    pub count: usize,
}

/// Collects the committed leases newest first and plans the hold.
#[derive(Debug)]
pub struct HoldPlanner {
    window: LostWindow,
    /// Per sub-pool: the newest lease's slot, and the creation moments
    /// within the history, newest first.
    newest: Vec<Option<Slot>>,
    created: Vec<Vec<UnixMillis>>,
    newest_missing: usize,
}

impl HoldPlanner {
    /// `sub_pool_sizes[i]` is how many numbers sub-pool `i` has: an empty
    /// one never leased anything, so reading does not wait for its newest
    /// lease (which would read the whole table).
    pub fn new(window: LostWindow, sub_pool_sizes: &[usize]) -> HoldPlanner {
        let sub_pools = sub_pool_sizes.len();
        HoldPlanner {
            window,
            newest: vec![None; sub_pools],
            created: vec![Vec::new(); sub_pools],
            newest_missing: sub_pool_sizes.iter().filter(|len| **len > 0).count(),
        }
    }

    /// Feeds one committed lease, newest first. Returns false once older
    /// rows cannot change the plan (every sub-pool's newest lease is known
    /// and the history is covered), so the caller can stop reading.
    pub fn visit(&mut self, sub_pool: usize, slot: Slot, created_at: UnixMillis) -> bool {
        let Some(newest) = self.newest.get_mut(sub_pool) else {
            return true;
        };
        if newest.is_none() {
            *newest = Some(slot);
            self.newest_missing = self.newest_missing.saturating_sub(1);
        }
        let in_history = created_at.0 >= self.window.last_committed.0 - PEAK_HISTORY_MS;
        if in_history {
            self.created[sub_pool].push(created_at);
        }
        in_history || self.newest_missing > 0
    }

    pub fn plan(&self) -> Vec<SubPoolHold> {
        let length = self.window.length_ms();
        (0..self.newest.len())
            .map(|sub_pool| SubPoolHold {
                sub_pool,
                after: self.newest[sub_pool],
                count: SAFETY * peak_within(&self.created[sub_pool], length) + MARGIN,
            })
            .collect()
    }
}

/// The most moments of `newest_first` within any span of `length_ms`
/// (both ends included). The moments need not be strictly ordered (rows of
/// one commit batch may be stamped out of order by a few milliseconds), so
/// they are sorted first.
pub fn peak_within(newest_first: &[UnixMillis], length_ms: i64) -> usize {
    let mut moments: Vec<i64> = newest_first.iter().map(|m| m.0).collect();
    moments.sort_unstable();
    let mut window = VecDeque::new();
    let mut peak = 0;
    for m in moments {
        window.push_back(m);
        while window.front().is_some_and(|first| m - first > length_ms) {
            window.pop_front();
        }
        peak = peak.max(window.len());
    }
    peak
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_800_000_000_000;

    fn at(ms: i64) -> UnixMillis {
        UnixMillis(T + ms)
    }

    #[test]
    fn peak_counts_the_busiest_span() {
        let m = [at(0), at(100), at(900), at(1_000), at(1_050), at(5_000)];
        assert_eq!(peak_within(&m, 1_000), 4);
        assert_eq!(peak_within(&m, 100), 2);
        assert_eq!(peak_within(&m, 10_000), 6);
        assert_eq!(peak_within(&[], 1_000), 0);
        // Out of order by a few milliseconds still counts right.
        assert_eq!(peak_within(&[at(10), at(0), at(5)], 5), 2);
    }

    #[test]
    fn the_window_is_at_least_a_second_and_the_hold_one_ttl_past_its_end() {
        let w = LostWindow {
            last_committed: at(0),
            end: at(300),
        };
        assert_eq!(w.length_ms(), LOST_WINDOW_MIN_MS);
        assert_eq!(w.hold_until(), at(300 + 600_000));
        let w = LostWindow {
            last_committed: at(0),
            end: at(7_500),
        };
        assert_eq!(w.length_ms(), 7_500);
        // An operator's end before the newest commit cannot shorten it.
        let w = LostWindow {
            last_committed: at(0),
            end: at(-5_000),
        };
        assert_eq!(w.hold_until(), at(600_000));
    }

    #[test]
    fn the_plan_holds_twice_the_peak_plus_a_margin_after_the_newest_lease() {
        let window = LostWindow {
            last_committed: at(10_000),
            end: at(12_000),
        };
        let mut p = HoldPlanner::new(window, &[100, 600, 10]);
        // Sub-pool 0: 10 creates a second for the last 10 s (newest first).
        let mut more = true;
        for n in (0..100).rev() {
            more = p.visit(0, Slot(n), at(n as i64 * 100));
        }
        assert!(more, "sub-pools 1 and 2 have no newest lease yet");
        // Sub-pool 1: one old lease, outside the history.
        assert!(p.visit(1, Slot(500), at(-PEAK_HISTORY_MS - 1)));
        let plan = p.plan();
        // L = 2 s: the busiest 2 s (both ends) hold 21 creates.
        assert_eq!(
            plan[0],
            SubPoolHold {
                sub_pool: 0,
                after: Some(Slot(99)),
                count: 2 * 21 + MARGIN
            }
        );
        assert_eq!(plan[1].after, Some(Slot(500)));
        assert_eq!(plan[1].count, MARGIN);
        assert_eq!(plan[2].after, None);
        assert_eq!(plan[2].count, MARGIN);
    }

    #[test]
    fn reading_stops_once_every_newest_lease_is_known_and_history_covered() {
        // Sub-pool 2 is empty: reading never waits for it.
        let window = LostWindow {
            last_committed: at(0),
            end: at(0),
        };
        let mut p = HoldPlanner::new(window, &[10, 10, 0]);
        assert!(p.visit(0, Slot(1), at(0)));
        assert!(p.visit(1, Slot(2), at(-10)));
        assert!(p.visit(0, Slot(3), at(-PEAK_HISTORY_MS)));
        assert!(!p.visit(0, Slot(4), at(-PEAK_HISTORY_MS - 1)));
        // The newest lease of a sub-pool stays the first one seen.
        assert_eq!(p.plan()[0].after, Some(Slot(1)));
        // An unknown sub-pool is ignored.
        assert!(p.visit(7, Slot(9), at(0)));
    }
}
