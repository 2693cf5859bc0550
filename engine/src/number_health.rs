//! Number health: which of our numbers stopped ringing. A DID the provider
//! stopped routing (a lapsed order, a carrier block, a broken trunk) keeps
//! being leased, and every verification on it expires uncalled. This state
//! machine counts, per number, leases issued, completed, expired without a
//! single INVITE, INVITEs that came while it was not leased (stray calls)
//! and the last completion, and decides when a number is quarantined.
//!
//! The rule (tools/deploy/README.md, "Number health"): a number whose last K leases
//! all expired without an INVITE is quarantined, where p is its pool's
//! completion share over the last hour (counted per [`WINDOW_SLICE_MS`])
//! and K is the smallest count with
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
//! Memory keeps, per number, only what the rule reads: the run, whether an
//! INVITE came during the current lease, and whether it is quarantined
//! (4 bytes). The lifetime counts (`dialproof number health` shows them)
//! live in the database: this machine counts what changed since the
//! caller last took the changes ([`NumberHealth::take_changes`]), the
//! caller adds them to the stored row and gives back what it could not
//! store ([`NumberHealth::put_back`]). With every count in memory a number
//! took 40 bytes; at 600,000 numbers, each leased once since the start,
//! that was 24 MB.
//!
//! Not for: withholding a quarantined number (the lease table is rebuilt
//! without it), storing the quarantine, or logging; the caller does those
//! with what [`NumberHealth::on_end`] returns.

use crate::e164::PackedNumber;
use crate::number_map::NumberMap;
use crate::pool::Pool;
use crate::time::UnixMillis;
use crate::word_hash::BuildWordHasher;
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
/// The window is kept as counts per slice of this length: the oldest slice
/// leaves whole, so the window spans between one hour and one hour plus a
/// slice. Why not each lease's moment: a busy pool issues millions of
/// leases an hour, 24 bytes each held for the hour.
pub const WINDOW_SLICE_MS: i64 = 10_000;
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

/// One number's counts since the changes were last taken, which the
/// caller adds to its stored row, and its run as of the take, which
/// replaces the stored one. Counts saturate at `u32::MAX` (a number is
/// not leased four billion times between two takes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Change {
    pub leases: u32,
    pub completed: u32,
    pub expired_uncalled: u32,
    pub stray_calls: u32,
    /// The latest completion among the counted ones.
    pub last_completion: Option<UnixMillis>,
    /// Leases in a row that expired without an INVITE, now.
    pub uncalled_in_a_row: u32,
}

impl Change {
    /// Adds `other`'s counts; the later completion stays.
    fn add(&mut self, other: &Change) {
        self.leases = self.leases.saturating_add(other.leases);
        self.completed = self.completed.saturating_add(other.completed);
        self.expired_uncalled = self.expired_uncalled.saturating_add(other.expired_uncalled);
        self.stray_calls = self.stray_calls.saturating_add(other.stray_calls);
        self.last_completion = self.last_completion.max(other.last_completion);
    }
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

/// What memory keeps of one number, in one word (12 bytes with its number
/// in the map): whether an INVITE arrived during the current lease
/// ([`INVITED`]), whether it is quarantined ([`QUARANTINED`]), and in the
/// low bits the leases in a row that expired without an INVITE,
/// saturating at [`RUN_MAX`]. The default is a number before its first
/// event: no run, no INVITE, not quarantined.
#[derive(Clone, Copy, Default)]
struct Number(u32);

// The size the memory figures rest on, checked when compiling.
const _: () = assert!(std::mem::size_of::<Number>() == 4);

/// [`Number`]'s flag: an INVITE arrived during the current lease.
const INVITED: u32 = 1 << 31;
/// [`Number`]'s flag: quarantined.
const QUARANTINED: u32 = 1 << 30;
/// Most leases in a row a [`Number`] counts (a billion uncalled leases in
/// a row is past any service's life).
const RUN_MAX: u32 = QUARANTINED - 1;

impl Number {
    fn uncalled_in_a_row(self) -> u32 {
        self.0 & RUN_MAX
    }

    fn set_uncalled_in_a_row(&mut self, run: u32) {
        self.0 = (self.0 & !RUN_MAX) | run.min(RUN_MAX);
    }

    fn flag(self, flag: u32) -> bool {
        self.0 & flag != 0
    }

    fn set_flag(&mut self, flag: u32, on: bool) {
        self.0 = if on { self.0 | flag } else { self.0 & !flag };
    }
}

/// A pool's leases issued and ended in one slice of the window.
#[derive(Clone, Copy)]
struct Slice {
    start: i64,
    issued: u32,
    ended: u32,
    completed: u32,
}

/// A pool's last hour, as counts per [`WINDOW_SLICE_MS`] (at most 361
/// slices however many leases), with running totals.
#[derive(Default)]
struct PoolWindow {
    slices: VecDeque<Slice>,
    issued: u64,
    ended: u64,
    completed: u64,
}

impl PoolWindow {
    /// The slice `now` falls in, made if it is not the newest.
    fn slice(&mut self, now: UnixMillis) -> &mut Slice {
        let start = now.0 - now.0.rem_euclid(WINDOW_SLICE_MS);
        // A moment earlier than the newest slice (a clock step back) is
        // counted in the newest: the window only needs the count.
        if self.slices.back().is_none_or(|s| s.start < start) {
            self.slices.push_back(Slice {
                start,
                issued: 0,
                ended: 0,
                completed: 0,
            });
        }
        // Pushed just above when there was none.
        self.slices.back_mut().expect("a slice")
    }

    fn issue(&mut self, now: UnixMillis) {
        self.slice(now).issued += 1;
        self.issued += 1;
    }

    fn end(&mut self, now: UnixMillis, completed: bool) {
        let slice = self.slice(now);
        slice.ended += 1;
        slice.completed += u32::from(completed);
        self.ended += 1;
        self.completed += u64::from(completed);
    }

    /// Drops the slices that end before the last hour began.
    fn trim(&mut self, now: UnixMillis) {
        let since = now.0 - WINDOW_MS;
        while self
            .slices
            .front()
            .is_some_and(|s| s.start + WINDOW_SLICE_MS <= since)
        {
            if let Some(old) = self.slices.pop_front() {
                self.issued -= u64::from(old.issued);
                self.ended -= u64::from(old.ended);
                self.completed -= u64::from(old.completed);
            }
        }
    }
}

/// The state of every number that was leased or called since the start
/// (or restored with a run or a quarantine), the counts changed since the
/// last take, and each pool's window. A number enters on its first event,
/// so a million configured numbers cost nothing until used; then its
/// packed number and [`Number`]: 12 bytes in a [`NumberMap`], a few more
/// with the map's slack. Numbers are `+` and digits ([`PackedNumber`]):
/// the API takes their text, as its callers hold it.
#[derive(Default)]
pub struct NumberHealth {
    numbers: NumberMap<Number>,
    /// The numbers with an event since the last take, and its counts
    /// (bounded by the numbers leased or called between two takes).
    changed: HashMap<PackedNumber, Change, BuildWordHasher>,
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

/// `number`'s state and its changes since the last take, both made on its
/// first event. Every number the service leases or answers is `+` and
/// digits (the lease table holds nothing else); any other text has no
/// entry and its events count nowhere.
fn entry<'a>(
    numbers: &'a mut NumberMap<Number>,
    changed: &'a mut HashMap<PackedNumber, Change, BuildWordHasher>,
    number: &str,
) -> Option<(&'a mut Number, &'a mut Change)> {
    let packed = PackedNumber::parse(number)?;
    Some((numbers.entry(packed), changed.entry(packed).or_default()))
}

impl NumberHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// The state stored before a restart: each number's run and whether it
    /// is quarantined, in any order. A number with neither needs no entry
    /// (it is one before its first event). Nothing restored is a change.
    pub fn restored(numbers: impl IntoIterator<Item = (PackedNumber, u32, bool)>) -> Self {
        let entries = numbers
            .into_iter()
            .map(|(packed, run, quarantined)| {
                let mut n = Number::default();
                n.set_uncalled_in_a_row(run);
                n.set_flag(QUARANTINED, quarantined);
                (packed, n)
            })
            .collect();
        NumberHealth {
            numbers: NumberMap::from_entries(entries),
            ..Self::default()
        }
    }

    /// `number` of `pool` was leased at `now`.
    pub fn on_lease(&mut self, number: &str, pool: Pool, now: UnixMillis) {
        if let Some((n, change)) = entry(&mut self.numbers, &mut self.changed, number) {
            change.leases = change.leases.saturating_add(1);
            n.set_flag(INVITED, false);
            change.uncalled_in_a_row = n.uncalled_in_a_row();
        }
        let window = self.pools.entry(pool).or_default();
        window.issue(now);
        window.trim(now);
    }

    /// An INVITE for `number`, which was `leased` or not when it came.
    pub fn on_invite(&mut self, number: &str, leased: bool) {
        let Some((n, change)) = entry(&mut self.numbers, &mut self.changed, number) else {
            return;
        };
        if leased {
            n.set_flag(INVITED, true);
        } else {
            change.stray_calls = change.stray_calls.saturating_add(1);
        }
        n.set_uncalled_in_a_row(0);
        change.uncalled_in_a_row = 0;
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
        if ending == Ending::Neutral {
            return None;
        }
        let (n, change) = entry(&mut self.numbers, &mut self.changed, number)?;
        if ending == Ending::Completed {
            change.completed = change.completed.saturating_add(1);
            change.last_completion = change.last_completion.max(Some(now));
            n.set_uncalled_in_a_row(0);
        } else if n.flag(INVITED) {
            n.set_uncalled_in_a_row(0);
        } else {
            change.expired_uncalled = change.expired_uncalled.saturating_add(1);
            n.set_uncalled_in_a_row(n.uncalled_in_a_row().saturating_add(1));
        }
        let (run, quarantined) = (n.uncalled_in_a_row(), n.flag(QUARANTINED));
        change.uncalled_in_a_row = run;
        self.pools
            .entry(pool)
            .or_default()
            .end(now, ending == Ending::Completed);
        if ending != Ending::Expired || quarantined || run < K_MIN {
            return None;
        }
        let threshold = self.threshold(pool, now);
        if threshold.k.is_none_or(|k| run < k) {
            return None;
        }
        let packed = PackedNumber::parse(number)?;
        self.numbers.entry(packed).set_flag(QUARANTINED, true);
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
        let ended = window.ended;
        let p = if ended == 0 {
            0.0
        } else {
            window.completed as f64 / ended as f64
        };
        let leases_per_day = window.issued as f64 * DAY_MS / WINDOW_MS as f64;
        let k = (ended >= ENDED_LEASES_MIN as u64)
            .then(|| k_for(p, leases_per_day))
            .flatten();
        Threshold {
            p,
            leases_per_day,
            k,
        }
    }

    /// Ends a quarantine (the operator's `number release`); its run starts
    /// again from zero, which is a change to store. False if it was not
    /// quarantined.
    pub fn release(&mut self, number: &str) -> bool {
        let Some(packed) = PackedNumber::parse(number) else {
            return false;
        };
        let Some(n) = self.numbers.get_mut(packed) else {
            return false;
        };
        let was = n.flag(QUARANTINED);
        n.set_flag(QUARANTINED, false);
        n.set_uncalled_in_a_row(0);
        self.changed.entry(packed).or_default().uncalled_in_a_row = 0;
        was
    }

    /// Every number with an event since the last take, with its counts
    /// since then and its run now (each event notes the run it left); the
    /// counts start again from zero.
    pub fn take_changes(&mut self) -> Vec<(PackedNumber, Change)> {
        // Taken, not drained: a drained map keeps its peak's buckets, and
        // a burst of leases between two takes would keep them for good.
        std::mem::take(&mut self.changed).into_iter().collect()
    }

    /// Taken changes the caller could not store: their counts are added
    /// to the ones counted since, to be taken again, with the run now.
    pub fn put_back(&mut self, changes: Vec<(PackedNumber, Change)>) {
        for (packed, change) in changes {
            let run = self
                .numbers
                .get(packed)
                .map_or(0, |n| n.uncalled_in_a_row());
            let kept = self.changed.entry(packed).or_default();
            kept.add(&change);
            kept.uncalled_in_a_row = run;
        }
    }

    /// The quarantined numbers.
    pub fn quarantined(&self) -> impl Iterator<Item = PackedNumber> + '_ {
        self.numbers
            .iter()
            .filter(|(_, n)| n.flag(QUARANTINED))
            .map(|(k, _)| k)
    }
}

#[cfg(test)]
#[path = "number_health_tests.rs"]
mod tests;
