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
//! Not for: withholding a quarantined number (the lease table is rebuilt
//! without it), storing the quarantine, or logging; the caller does those
//! with what [`NumberHealth::on_end`] returns.

use crate::e164::PackedNumber;
use crate::number_map::NumberMap;
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

/// One number's counters, packed: 32 bytes (40 with its number as a map
/// entry), against 80 for [`Counters`] and the flag. Every number ever
/// leased has one, so at a million numbers the difference is tens of
/// megabytes. Counts are `u32` (four billion leases of one number is past
/// any service's life) and saturate; moments are [`Moment`]s. The
/// alignment is 4 (no `u64` field), so the entry beside an 8-byte number
/// has no padding.
#[derive(Clone, Copy)]
struct Number {
    leases: u32,
    completed: u32,
    expired_uncalled: u32,
    stray_calls: u32,
    /// Leases in a row that expired without an INVITE (the low 31 bits,
    /// saturating at [`RUN_MAX`]) and, in [`INVITED`], whether an INVITE
    /// arrived during the current lease: one word, so the moments fit.
    run: u32,
    last_completion: Moment,
    quarantined_since: Moment,
}

// The sizes the memory figures rest on, checked when compiling: before,
// a `String` key and unpacked counters took 104 bytes plus the key's heap
// block, then 48 with 64-bit moments.
const _: () = assert!(std::mem::size_of::<Number>() == 32);
const _: () = assert!(std::mem::size_of::<(PackedNumber, Number)>() == 40);

/// [`Number::run`]'s flag: an INVITE arrived during the current lease.
const INVITED: u32 = 1 << 31;
/// Most leases in a row [`Number::run`] counts (two billion uncalled
/// leases in a row is past any service's life).
const RUN_MAX: u32 = INVITED - 1;

/// A moment in 48 bits: its milliseconds, two's complement, as three
/// `u16` so that [`Number`] keeps an alignment of 4. Moments within about
/// 4,460 years of 1970 are exact; one beyond (only a corrupt stored row
/// could hold one) is clamped to the edge of that range.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Moment([u16; 3]);

/// The largest millisecond count a [`Moment`] holds exactly either side of
/// 1970; the 48-bit minimum, one below its negation, is [`Moment::NONE`].
const MOMENT_MAX: i64 = (1 << 47) - 1;

impl Moment {
    /// No moment: the one 48-bit value [`Moment::pack`] never makes.
    const NONE: Moment = Moment::raw(-MOMENT_MAX - 1);

    const fn raw(millis: i64) -> Moment {
        // Two's complement: the low 48 bits, which `get` sign-extends.
        let bits = millis as u64;
        Moment([bits as u16, (bits >> 16) as u16, (bits >> 32) as u16])
    }

    fn pack(at: Option<UnixMillis>) -> Moment {
        at.map_or(Moment::NONE, |at| {
            Moment::raw(at.0.clamp(-MOMENT_MAX, MOMENT_MAX))
        })
    }

    fn get(self) -> Option<UnixMillis> {
        if self == Moment::NONE {
            return None;
        }
        let [low, middle, high] = self.0.map(u64::from);
        let bits = low | middle << 16 | high << 32;
        // Shift the 48 bits to the top and back: arithmetic, so the sign
        // comes back.
        Some(UnixMillis(((bits << 16) as i64) >> 16))
    }
}

fn packed_count(count: u64) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// A number before its first event: nothing counted, no moments.
impl Default for Number {
    fn default() -> Number {
        Number {
            leases: 0,
            completed: 0,
            expired_uncalled: 0,
            stray_calls: 0,
            run: 0,
            last_completion: Moment::NONE,
            quarantined_since: Moment::NONE,
        }
    }
}

impl Number {
    fn restore(&mut self, c: &Counters) {
        self.leases = packed_count(c.leases);
        self.completed = packed_count(c.completed);
        self.expired_uncalled = packed_count(c.expired_uncalled);
        self.stray_calls = packed_count(c.stray_calls);
        self.set_uncalled_in_a_row(c.uncalled_in_a_row);
        self.last_completion = Moment::pack(c.last_completion);
        self.quarantined_since = Moment::pack(c.quarantined_since);
    }

    fn counters(&self) -> Counters {
        Counters {
            leases: u64::from(self.leases),
            completed: u64::from(self.completed),
            expired_uncalled: u64::from(self.expired_uncalled),
            stray_calls: u64::from(self.stray_calls),
            last_completion: self.last_completion.get(),
            uncalled_in_a_row: self.uncalled_in_a_row(),
            quarantined_since: self.quarantined_since.get(),
        }
    }

    fn quarantined(&self) -> bool {
        self.quarantined_since != Moment::NONE
    }

    fn uncalled_in_a_row(&self) -> u32 {
        self.run & RUN_MAX
    }

    fn set_uncalled_in_a_row(&mut self, run: u32) {
        self.run = (self.run & INVITED) | run.min(RUN_MAX);
    }

    fn invited(&self) -> bool {
        self.run & INVITED != 0
    }

    fn set_invited(&mut self, invited: bool) {
        self.run = if invited {
            self.run | INVITED
        } else {
            self.run & RUN_MAX
        };
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

/// The health of every number that was leased or called since the start
/// (or restored as quarantined), and each pool's window. A number enters
/// on its first event, so a million configured numbers cost nothing until
/// used; then its packed number and counters: a 40-byte entry in a
/// [`NumberMap`], a few bytes more a number with the map's slack.
/// Numbers are `+` and digits ([`PackedNumber`]): the API takes their text,
/// as its callers hold it.
#[derive(Default)]
pub struct NumberHealth {
    numbers: NumberMap<Number>,
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

/// `number`'s entry, made on its first event. Every number the service
/// leases or answers is `+` and digits (the lease table holds nothing
/// else); any other text has no entry and its events count nowhere.
fn entry<'a>(numbers: &'a mut NumberMap<Number>, number: &str) -> Option<&'a mut Number> {
    let packed = PackedNumber::parse(number)?;
    Some(numbers.entry(packed))
}

impl NumberHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// A number's counters as stored before a restart.
    pub fn restore(&mut self, number: &str, counters: Counters) {
        if let Some(n) = entry(&mut self.numbers, number) {
            n.restore(&counters);
        }
    }

    /// `number` of `pool` was leased at `now`.
    pub fn on_lease(&mut self, number: &str, pool: Pool, now: UnixMillis) {
        if let Some(n) = entry(&mut self.numbers, number) {
            n.leases = n.leases.saturating_add(1);
            n.set_invited(false);
        }
        let window = self.pools.entry(pool).or_default();
        window.issue(now);
        window.trim(now);
    }

    /// An INVITE for `number`, which was `leased` or not when it came.
    pub fn on_invite(&mut self, number: &str, leased: bool) {
        let Some(n) = entry(&mut self.numbers, number) else {
            return;
        };
        if leased {
            n.set_invited(true);
        } else {
            n.stray_calls = n.stray_calls.saturating_add(1);
        }
        n.set_uncalled_in_a_row(0);
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
        let n = entry(&mut self.numbers, number)?;
        match ending {
            Ending::Neutral => return None,
            Ending::Completed => {
                n.completed = n.completed.saturating_add(1);
                n.last_completion = Moment::pack(Some(now));
                n.set_uncalled_in_a_row(0);
            }
            Ending::Expired if n.invited() => n.set_uncalled_in_a_row(0),
            Ending::Expired => {
                n.expired_uncalled = n.expired_uncalled.saturating_add(1);
                n.set_uncalled_in_a_row(n.uncalled_in_a_row().saturating_add(1));
            }
        }
        let (run, quarantined) = (n.uncalled_in_a_row(), n.quarantined());
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
        entry(&mut self.numbers, number)?.quarantined_since = Moment::pack(Some(now));
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
    /// again from zero. False if it was not quarantined.
    pub fn release(&mut self, number: &str) -> bool {
        let Some(n) = PackedNumber::parse(number).and_then(|p| self.numbers.get_mut(p)) else {
            return false;
        };
        n.set_uncalled_in_a_row(0);
        std::mem::replace(&mut n.quarantined_since, Moment::NONE) != Moment::NONE
    }

    pub fn counters(&self, number: &str) -> Option<Counters> {
        let packed = PackedNumber::parse(number)?;
        self.numbers.get(packed).map(Number::counters)
    }

    /// Every number seen, with its counters, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (PackedNumber, Counters)> + '_ {
        self.numbers.iter().map(|(k, n)| (k, n.counters()))
    }

    /// The quarantined numbers.
    pub fn quarantined(&self) -> impl Iterator<Item = PackedNumber> + '_ {
        self.numbers
            .iter()
            .filter(|(_, n)| n.quarantined())
            .map(|(k, _)| k)
    }
}

#[cfg(test)]
#[path = "number_health_tests.rs"]
mod tests;
