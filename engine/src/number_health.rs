//! Number health: which of our numbers stopped ringing. A DID the provider
//! stopped routing (a lapsed order, a carrier block, a broken trunk) keeps
//! being leased, and every verification on it expires uncalled. This state
//! machine counts, per number, leases issued, completed, expired without a
//! single INVITE, INVITEs that came while it was not leased (stray calls)
//! and the last completion, and decides when a number is quarantined.
//!
//! The rule (tools/deploy/README.md, "Number health"): a number whose last K leases
//! all expired without an INVITE is quarantined, where p is its pool's
//! completion share over the last hour and K is the smallest count with
//! `(1-p)^K < 1e-4 / L`, L the leases the pool issues in a day at the last
//! hour's rate. A healthy number's lease goes uncalled with probability
//! 1-p, so a run of K starts by chance with probability under 1e-4 / L per
//! lease: across the whole pool, under 1e-4 false quarantines a day. (The
//! bare `(1-p)^K < 1e-4` per run would quarantine a few healthy numbers of
//! 10,000 every day at p = 0.6.) K is at least [`K_MIN`]; a K above
//! [`K_MAX`], or fewer than [`ENDED_LEASES_MIN`] leases ended in the pool's
//! last hour, means no decision: p is too low, or too uncertain, to tell a
//! dead number from chance.
//!
//! Any INVITE to the number (leased or not, whatever its caller) proves it
//! rings and ends its run. Leases that end by a cancel or a line failure
//! tell nothing and leave the run as it is.
//!
//! Not for: withholding a quarantined number (the lease table is rebuilt
//! without it), storing the quarantine, or logging; the caller does those
//! with what [`NumberHealth::on_end`] returns.

use crate::pool::Pool;
use crate::time::UnixMillis;
use std::collections::{HashMap, VecDeque};

/// A healthy pool's false quarantines a day stay under this.
pub const FALSE_QUARANTINES_PER_DAY: f64 = 1e-4;
/// The fewest uncalled leases in a row that quarantine a number.
pub const K_MIN: u32 = 8;
/// The most; a pool that would need more makes no decision.
pub const K_MAX: u32 = 60;
/// The window p and the lease rate are measured over.
pub const WINDOW_MS: i64 = 3_600_000;
/// Ended leases the window must hold before p is trusted.
pub const ENDED_LEASES_MIN: usize = 30;
const DAY_MS: f64 = 86_400_000.0;

/// How a lease ended, as far as health goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// A call completed the verification.
    Completed,
    /// The TTL ran out.
    Expired,
    /// Cancelled, or failed with its line: says nothing about the number.
    Neutral,
}

/// One number's counters, as `dialproof number health` shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub leases: u64,
    pub completed: u64,
    pub expired_uncalled: u64,
    pub stray_calls: u64,
    pub last_completion: Option<UnixMillis>,
    /// Leases in a row that expired without an INVITE.
    pub uncalled_in_a_row: u32,
    pub quarantined_since: Option<UnixMillis>,
}

/// A pool's current rule: p, the daily lease rate and K (`None`: no
/// decision now).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    pub p: f64,
    pub leases_per_day: f64,
    pub k: Option<u32>,
}

/// A quarantine just decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Quarantined {
    pub number: String,
    pub pool: Pool,
    pub uncalled_in_a_row: u32,
    pub threshold: Threshold,
}

#[derive(Default)]
struct Number {
    counters: Counters,
    /// An INVITE arrived during the current lease.
    invited: bool,
}

#[derive(Default)]
struct PoolWindow {
    /// Ended (completed or expired) leases: when, and whether completed.
    ended: VecDeque<(UnixMillis, bool)>,
    completed: usize,
    issued: VecDeque<UnixMillis>,
}

impl PoolWindow {
    fn trim(&mut self, now: UnixMillis) {
        let since = now.0 - WINDOW_MS;
        while self.ended.front().is_some_and(|(at, _)| at.0 < since) {
            if let Some((_, true)) = self.ended.pop_front() {
                self.completed -= 1;
            }
        }
        while self.issued.front().is_some_and(|at| at.0 < since) {
            self.issued.pop_front();
        }
    }
}

/// The health of every number that was leased or called since the start
/// (or restored as quarantined), and each pool's window. A number enters
/// on its first event, so a million configured numbers cost nothing until
/// used.
#[derive(Default)]
pub struct NumberHealth {
    numbers: HashMap<String, Number>,
    pools: HashMap<Pool, PoolWindow>,
}

/// The K for completion share `p` and `leases_per_day` (see the module
/// doc), or `None` when no K up to [`K_MAX`] is safe.
pub fn k_for(p: f64, leases_per_day: f64) -> Option<u32> {
    if p <= 0.0 {
        return None;
    }
    if p >= 1.0 {
        return Some(K_MIN);
    }
    let target = FALSE_QUARANTINES_PER_DAY / leases_per_day.max(1.0);
    let k = (target.ln() / (1.0 - p).ln()).floor() + 1.0;
    // k is positive and finite here: both logs are negative.
    (k <= f64::from(K_MAX)).then(|| (k as u32).max(K_MIN))
}

/// `number`'s entry, made on its first event.
fn entry<'a>(numbers: &'a mut HashMap<String, Number>, number: &str) -> &'a mut Number {
    if !numbers.contains_key(number) {
        numbers.insert(number.to_owned(), Number::default());
    }
    // Inserted just above when missing.
    numbers.get_mut(number).expect("entry present")
}

impl NumberHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// A number's counters as stored before a restart.
    pub fn restore(&mut self, number: &str, counters: Counters) {
        entry(&mut self.numbers, number).counters = counters;
    }

    /// `number` of `pool` was leased at `now`.
    pub fn on_lease(&mut self, number: &str, pool: Pool, now: UnixMillis) {
        let n = entry(&mut self.numbers, number);
        n.counters.leases += 1;
        n.invited = false;
        let window = self.pools.entry(pool).or_default();
        window.issued.push_back(now);
        window.trim(now);
    }

    /// An INVITE for `number`, which was `leased` or not when it came.
    pub fn on_invite(&mut self, number: &str, leased: bool) {
        let n = entry(&mut self.numbers, number);
        if leased {
            n.invited = true;
        } else {
            n.counters.stray_calls += 1;
        }
        n.counters.uncalled_in_a_row = 0;
    }

    /// A lease of `number` of `pool` ended; returns the quarantine it
    /// decided, if any.
    pub fn on_end(
        &mut self,
        number: &str,
        pool: Pool,
        ending: Ending,
        now: UnixMillis,
    ) -> Option<Quarantined> {
        let n = entry(&mut self.numbers, number);
        let c = &mut n.counters;
        match ending {
            Ending::Neutral => return None,
            Ending::Completed => {
                c.completed += 1;
                c.last_completion = Some(now);
                c.uncalled_in_a_row = 0;
            }
            Ending::Expired if n.invited => c.uncalled_in_a_row = 0,
            Ending::Expired => {
                c.expired_uncalled += 1;
                c.uncalled_in_a_row += 1;
            }
        }
        let window = self.pools.entry(pool).or_default();
        window.ended.push_back((now, ending == Ending::Completed));
        window.completed += usize::from(ending == Ending::Completed);
        let (run, quarantined) = (c.uncalled_in_a_row, c.quarantined_since.is_some());
        if ending != Ending::Expired || quarantined || run < K_MIN {
            return None;
        }
        let threshold = self.threshold(pool, now);
        if threshold.k.is_none_or(|k| run < k) {
            return None;
        }
        let n = self.numbers.get_mut(number)?;
        n.counters.quarantined_since = Some(now);
        Some(Quarantined {
            number: number.to_owned(),
            pool,
            uncalled_in_a_row: run,
            threshold,
        })
    }

    /// The pool's rule as of `now`.
    pub fn threshold(&mut self, pool: Pool, now: UnixMillis) -> Threshold {
        let window = self.pools.entry(pool).or_default();
        window.trim(now);
        let ended = window.ended.len();
        let p = if ended == 0 {
            0.0
        } else {
            window.completed as f64 / ended as f64
        };
        let leases_per_day = window.issued.len() as f64 * DAY_MS / WINDOW_MS as f64;
        let k = (ended >= ENDED_LEASES_MIN)
            .then(|| k_for(p, leases_per_day))
            .flatten();
        Threshold {
            p,
            leases_per_day,
            k,
        }
    }

    /// Ends a quarantine (the operator's `number release`); its run starts
    /// again from zero. False if it was not quarantined.
    pub fn release(&mut self, number: &str) -> bool {
        let Some(n) = self.numbers.get_mut(number) else {
            return false;
        };
        n.counters.uncalled_in_a_row = 0;
        n.counters.quarantined_since.take().is_some()
    }

    pub fn counters(&self, number: &str) -> Option<&Counters> {
        self.numbers.get(number).map(|n| &n.counters)
    }

    /// Every number seen, with its counters, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Counters)> {
        self.numbers.iter().map(|(k, n)| (k.as_str(), &n.counters))
    }

    /// The quarantined numbers.
    pub fn quarantined(&self) -> impl Iterator<Item = &str> {
        self.iter()
            .filter(|(_, c)| c.quarantined_since.is_some())
            .map(|(n, _)| n)
    }
}

#[cfg(test)]
#[path = "number_health_tests.rs"]
mod tests;
