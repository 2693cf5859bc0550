//! The expiry schedule: when each pending verification's TTL runs out, which
//! expiries go to the writer now, and what happens to one that did not get
//! through.
//!
//! Sans-IO, like [`crate::sip::server`]. The binary feeds it new leases
//! ([`ExpiryQueue::schedule`], one entry from a create or recovery's whole
//! backlog in one batch), the writer's answers ([`ExpiryQueue::handle_done`],
//! [`ExpiryQueue::handle_failed`]) and the time; it answers what is due
//! ([`ExpiryQueue::poll_due`]) and when to look again
//! ([`ExpiryQueue::poll_timeout`]).
//!
//! An expiry must happen, so nothing here refuses or drops one: `schedule`
//! always takes the entries (the heap grows to hold them), and an expiry the
//! writer refused or failed is scheduled again [`EXPIRY_RETRY_DELAY_MS`]
//! later. What bounds the work instead is back-pressure: at most
//! [`EXPIRY_IN_FLIGHT_MAX`] expiries are out with the writer and not yet
//! answered, so a backlog of a million due expiries enters the writer's queue
//! a slice at a time and leaves room in it for creates and calls.
//!
//! Entries are never removed early: a completed or cancelled verification's
//! entry simply comes out when due and the state machine ignores the stale
//! expiry (a terminal state never changes). That keeps completion and cancel
//! O(1) with no shared index, at the price of holding an entry per
//! verification created within the longest TTL rather than per pending one.
//!
//! An entry is its key alone, 16 bytes. Why: the queue holds one entry per
//! pending verification, and a heap of `(due, key)` took 24 bytes each, 7 MB
//! at 300,000. A key carries the moment it was issued, and a verification
//! expires its TTL after that moment, so entries are kept in runs, one per
//! lifetime (due minus issued): in issue order, a run's first key is its
//! earliest, and the queue only compares the runs' first keys. A run is a
//! chain of [`RUN_BLOCK`]-key blocks, each freed once drained, so what a
//! run holds stays resident as keys and never as a ring's slack. What does
//! not fit a run goes to a heap of `(due, key)` as before, exact too:
//! retries, a key issued before its run's last (commits can reach the
//! queue a millisecond out of issue order), a lifetime below zero, and
//! lifetimes beyond the first [`RUNS_MAX`] (so a client spreading its
//! TTLs over every value cannot make the blocks' slack grow without
//! bound).
//!
//! Not for: deciding whether an expiry applies (see
//! [`crate::verification::apply`]), clocks, threads or locks (the binary's
//! expiry thread owns those).

use crate::ids::VerificationKey;
use crate::time::UnixMillis;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

/// Most expiries one [`ExpiryQueue::poll_due`] hands out. It also bounds how
/// long the binary holds the queue's lock to pop them (~20 comparisons an
/// entry at a million entries).
pub const EXPIRY_BATCH_MAX: usize = 1024;
/// Most expiries handed out and not yet answered. The writer's queue holds
/// 65,536 ops; an expiry backlog takes at most this share of it.
pub const EXPIRY_IN_FLIGHT_MAX: usize = 8192;
/// How long after a refusal or failure an expiry is tried again: long enough
/// for a full writer queue to drain, short against the shortest TTL (30 s).
pub const EXPIRY_RETRY_DELAY_MS: i64 = 1000;
/// Keys a run's block holds: 2 KiB of 16-byte keys, so a run's slack (a
/// block being drained, a block being filled) is at most 4 KiB.
pub const RUN_BLOCK: usize = 128;
/// Most runs (distinct lifetimes) at once: 4,096 covers every TTL the API
/// accepts (1 to 3,600 whole seconds); the blocks' slack stays under
/// 16 MiB even if all are in use.
pub const RUNS_MAX: usize = 4096;

/// A key that knows when it was issued, so that a run can derive each
/// entry's due moment from it.
pub trait Issued: Copy + Ord {
    fn issued_at(self) -> UnixMillis;
}

impl Issued for VerificationKey {
    fn issued_at(self) -> UnixMillis {
        VerificationKey::issued_at(self)
    }
}

/// Pending expiries ordered by due moment, plus the count handed out.
pub struct ExpiryQueue<K: Issued> {
    /// Entries due at their key's issue moment plus the map's key (a
    /// lifetime in milliseconds), in issue order.
    runs: HashMap<i64, Run<K>>,
    /// Each run's first entry: `(due, lifetime)`.
    firsts: BTreeSet<(UnixMillis, i64)>,
    /// Entries that fit no run (see the module doc), few.
    others: BinaryHeap<Reverse<(UnixMillis, K)>>,
    /// Entries queued in runs and in `others`.
    len: usize,
    /// Handed out by `poll_due`, not yet answered by `handle_done` or
    /// `handle_failed`. At most [`EXPIRY_IN_FLIGHT_MAX`].
    in_flight: usize,
}

/// Keys in issue order, in blocks of [`RUN_BLOCK`]; never empty while in
/// the queue's map.
struct Run<K> {
    blocks: VecDeque<Vec<K>>,
    /// Keys of the first block already taken.
    taken: usize,
}

impl<K: Issued> Run<K> {
    fn new() -> Self {
        Run {
            blocks: VecDeque::new(),
            taken: 0,
        }
    }

    fn first(&self) -> Option<K> {
        self.blocks.front()?.get(self.taken).copied()
    }

    fn last(&self) -> Option<K> {
        self.blocks.back()?.last().copied()
    }

    fn push(&mut self, key: K) {
        match self.blocks.back_mut() {
            Some(block) if block.len() < RUN_BLOCK => block.push(key),
            _ => {
                let mut block = Vec::with_capacity(RUN_BLOCK);
                block.push(key);
                self.blocks.push_back(block);
            }
        }
    }

    /// Takes the first key; a drained block is freed at once.
    fn take(&mut self) -> Option<K> {
        let key = self.first()?;
        self.taken += 1;
        if self.blocks.front().is_some_and(|b| self.taken == b.len()) {
            self.blocks.pop_front();
            self.taken = 0;
        }
        Some(key)
    }
}

impl<K: Issued> Default for ExpiryQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Issued> ExpiryQueue<K> {
    pub fn new() -> Self {
        ExpiryQueue {
            runs: HashMap::new(),
            firsts: BTreeSet::new(),
            others: BinaryHeap::new(),
            len: 0,
            in_flight: 0,
        }
    }

    /// Adds expiries: `(expires_at, key)`. Never refuses. A batch (one
    /// create, or recovery's whole backlog) is put in issue order first,
    /// so its keys join their runs. Returns true when the earliest due
    /// moment moved earlier, i.e. a poller sleeping until the old one
    /// should look again now.
    pub fn schedule(&mut self, entries: impl IntoIterator<Item = (UnixMillis, K)>) -> bool {
        let before = self.next_due();
        let mut entries: Vec<(UnixMillis, K)> = entries.into_iter().collect();
        // Recovery reads in commit order, nearly issue order: checked in
        // one pass, sorted (in place, no buffer) only if it is not.
        if !entries.is_sorted_by_key(|&(_, key)| key.issued_at()) {
            entries.sort_unstable_by_key(|&(_, key)| key.issued_at());
        }
        let mut others = Vec::new();
        for (at, key) in entries {
            if !self.join_run(at, key) {
                others.push(Reverse((at, key)));
            }
        }
        self.len += others.len();
        // `BinaryHeap::extend` appends, then rebuilds or sifts whichever is
        // cheaper for the number appended.
        self.others.extend(others);
        match (before, self.next_due()) {
            (Some(old), Some(new)) => new < old,
            (None, Some(_)) => true,
            (_, None) => false,
        }
    }

    /// Appends `key` to the run of its lifetime if it keeps the run in
    /// issue order; false if it belongs in `others`.
    fn join_run(&mut self, at: UnixMillis, key: K) -> bool {
        let lifetime = at.0.saturating_sub(key.issued_at().0);
        if lifetime < 0 {
            return false;
        }
        let room = self.runs.len() < RUNS_MAX;
        match self.runs.get_mut(&lifetime) {
            Some(run) => {
                if run
                    .last()
                    .is_some_and(|last| last.issued_at() > key.issued_at())
                {
                    return false;
                }
                run.push(key);
            }
            None if room => {
                let mut run = Run::new();
                run.push(key);
                self.runs.insert(lifetime, run);
                self.firsts.insert((at, lifetime));
            }
            None => return false,
        }
        self.len += 1;
        true
    }

    /// Takes the earliest entry if it is due at `now`.
    fn take_due(&mut self, now: UnixMillis) -> Option<K> {
        let due = self.next_due()?;
        if due > now {
            return None;
        }
        // The earliest is a run's first entry, or else the heap's top (a
        // run's is taken first when both are due at once).
        let Some((at, lifetime)) = self.firsts.first().copied().filter(|&(at, _)| at == due) else {
            self.len -= 1;
            return self.others.pop().map(|Reverse((_, key))| key);
        };
        self.firsts.remove(&(at, lifetime));
        let run = self.runs.get_mut(&lifetime)?;
        let key = run.take()?;
        match run.first() {
            Some(next) => {
                let next_at = next.issued_at().plus_millis(lifetime);
                self.firsts.insert((next_at, lifetime));
            }
            None => {
                self.runs.remove(&lifetime);
            }
        }
        self.len -= 1;
        Some(key)
    }

    /// Removes and returns the keys due at `now` (expires_at <= now),
    /// earliest first: at most [`EXPIRY_BATCH_MAX`], and only as many as
    /// leave the expiries in flight within [`EXPIRY_IN_FLIGHT_MAX`]. Each
    /// key returned is in flight until answered.
    pub fn poll_due(&mut self, now: UnixMillis) -> Vec<K> {
        let room = EXPIRY_IN_FLIGHT_MAX
            .saturating_sub(self.in_flight)
            .min(EXPIRY_BATCH_MAX);
        let mut due = Vec::new();
        while due.len() < room {
            match self.take_due(now) {
                Some(key) => due.push(key),
                None => break,
            }
        }
        self.in_flight += due.len();
        due
    }

    /// When to call `poll_due` next: the earliest due moment, or `None` when
    /// nothing is queued or the in-flight limit is reached (then only an
    /// answer from the writer can make progress; see `handle_done`).
    pub fn poll_timeout(&self) -> Option<UnixMillis> {
        if self.in_flight >= EXPIRY_IN_FLIGHT_MAX {
            return None;
        }
        self.next_due()
    }

    /// The writer answered one expiry handed out (applied or found stale:
    /// either way it is done). Returns true when this reopened room under
    /// the in-flight limit, so a poller waiting for room should look again.
    pub fn handle_done(&mut self) -> bool {
        let was_full = self.in_flight >= EXPIRY_IN_FLIGHT_MAX;
        self.answered();
        was_full
    }

    /// The writer refused (full queue) or failed (SQLite error) the expiry
    /// of `key` handed out: it is due again at `now` +
    /// [`EXPIRY_RETRY_DELAY_MS`]. Returns true when a poller should look
    /// again (room reopened, or this is now the earliest entry).
    pub fn handle_failed(&mut self, now: UnixMillis, key: K) -> bool {
        let was_full = self.in_flight >= EXPIRY_IN_FLIGHT_MAX;
        self.answered();
        let earlier = self.schedule([(now.plus_millis(EXPIRY_RETRY_DELAY_MS), key)]);
        was_full || earlier
    }

    fn answered(&mut self) {
        debug_assert!(self.in_flight > 0, "an answer for an expiry not handed out");
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// True when nothing due at `at` is left: none queued with
    /// expires_at <= `at` and none in flight. Recovery waits for this before
    /// the service takes requests, so what ran out while it was down reads
    /// as expired from the first request on.
    pub fn is_settled(&self, at: UnixMillis) -> bool {
        self.in_flight == 0 && self.next_due().is_none_or(|due| due > at)
    }

    /// The earliest expiry still queued.
    pub fn next_due(&self) -> Option<UnixMillis> {
        let first = self.firsts.first().map(|&(at, _)| at);
        let other = self.others.peek().map(|Reverse((at, _))| *at);
        match (first, other) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Entries queued (not counting those in flight).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries queued outside the runs (see the module doc): what the tests
    /// check lands in the heap.
    #[cfg(test)]
    fn outside_runs(&self) -> usize {
        self.others.len()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issued at `.0`, told apart by `.1`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Key(i64, u32);

    impl Issued for Key {
        fn issued_at(self) -> UnixMillis {
            UnixMillis(self.0)
        }
    }

    /// Issued at 0: every due moment is a lifetime of its own.
    impl Issued for u32 {
        fn issued_at(self) -> UnixMillis {
            UnixMillis(0)
        }
    }

    #[test]
    fn pops_only_due_entries_in_order_over_virtual_time() {
        let (a, b, c) = (Key(0, 1), Key(0, 2), Key(0, 3));
        let mut q = ExpiryQueue::new();
        assert!(q.schedule([(UnixMillis(3000), c)]));
        assert!(q.schedule([(UnixMillis(1000), a)]));
        assert!(!q.schedule([(UnixMillis(2000), b)]));
        assert!(q.poll_due(UnixMillis(999)).is_empty());
        assert_eq!(q.poll_timeout(), Some(UnixMillis(1000)));
        assert_eq!(q.poll_due(UnixMillis(2000)), vec![a, b]);
        assert_eq!((q.len(), q.in_flight()), (1, 2));
        assert!(!q.handle_done() && !q.handle_done());
        assert_eq!(q.poll_due(UnixMillis(10_000)), vec![c]);
        assert!(q.is_empty());
    }

    /// Verifications of two TTLs created in turn: every entry is a key in
    /// a run (none in the heap), and they come out by due moment, the two
    /// runs interleaved.
    #[test]
    fn keys_in_issue_order_live_in_runs_and_come_out_by_due_moment() {
        let mut q = ExpiryQueue::new();
        let mut expected = Vec::new();
        for i in 0..1000i64 {
            let ttl = if i % 2 == 0 { 30_000 } else { 600 };
            let key = Key(i * 10, i as u32);
            q.schedule([(UnixMillis(i * 10 + ttl), key)]);
            expected.push((i * 10 + ttl, key));
        }
        assert_eq!((q.len(), q.outside_runs()), (1000, 0));
        expected.sort();
        let mut out = Vec::new();
        let mut now = 0;
        while !q.is_empty() {
            now = q.poll_timeout().expect("entries queued").0;
            for key in q.poll_due(UnixMillis(now)) {
                out.push((now, key));
                q.handle_done();
            }
        }
        assert_eq!(out, expected, "each at its own due moment, in order");
        assert_eq!(now, 998 * 10 + 30_000, "the last even one is the last due");
    }

    /// A commit that reaches the queue after a later-issued key's, and a
    /// retry: both go to the heap, and each still comes out exactly when
    /// due, before the run's later entries.
    #[test]
    fn an_entry_out_of_issue_order_and_a_retry_are_exact_too() {
        let mut q = ExpiryQueue::new();
        let late = Key(5, 1);
        q.schedule([(UnixMillis(10 + 1000), Key(10, 0))]);
        q.schedule([(UnixMillis(5 + 1000), late)]);
        q.schedule([(UnixMillis(20 + 1000), Key(20, 2))]);
        assert_eq!(q.outside_runs(), 1, "issued before its run's last key");
        assert_eq!(q.next_due(), Some(UnixMillis(1005)));
        assert!(q.poll_due(UnixMillis(1004)).is_empty());
        assert_eq!(q.poll_due(UnixMillis(1005)), vec![late]);
        assert_eq!(q.poll_due(UnixMillis(1010)), vec![Key(10, 0)]);
        q.handle_done();
        // The writer refused `late`: due again a retry delay from now.
        assert!(!q.handle_failed(UnixMillis(1010), late));
        assert_eq!(q.poll_due(UnixMillis(1020)), vec![Key(20, 2)]);
        assert_eq!(q.next_due(), Some(UnixMillis(1010 + EXPIRY_RETRY_DELAY_MS)));
        assert_eq!(q.poll_due(UnixMillis(2010)), vec![late]);
        assert!(q.is_empty());
    }

    /// A drained block is freed as soon as its last key is taken, so a run
    /// never holds more than the blocks its keys fill and one being filled.
    #[test]
    fn a_run_frees_each_block_it_has_drained() {
        let mut run = Run::new();
        for i in 0..(3 * RUN_BLOCK as u32 + 5) {
            run.push(i);
        }
        assert_eq!(run.blocks.len(), 4);
        for i in 0..RUN_BLOCK as u32 {
            assert_eq!(run.take(), Some(i));
        }
        assert_eq!(
            run.blocks.len(),
            3,
            "the first block went with its last key"
        );
        while run.take().is_some() {}
        assert!(run.blocks.is_empty());
        run.push(7);
        assert_eq!((run.first(), run.last()), (Some(7), Some(7)));
    }

    /// Past RUNS_MAX distinct lifetimes, entries go to the heap, and all
    /// come out in due order.
    #[test]
    fn lifetimes_beyond_the_runs_bound_are_kept_in_the_heap() {
        let mut q = ExpiryQueue::new();
        let n = RUNS_MAX as u32 + 100;
        q.schedule((0..n).map(|k| (UnixMillis(i64::from(n - k)), k)));
        assert_eq!((q.len(), q.outside_runs()), (n as usize, 100));
        let mut out = Vec::new();
        while !q.is_empty() {
            let due = q.poll_due(UnixMillis(i64::from(n)));
            out.extend(due.iter().copied());
            due.iter().for_each(|_| {
                q.handle_done();
            });
        }
        let expected: Vec<u32> = (0..n).rev().collect();
        assert_eq!(out, expected);
    }

    /// Random schedules, refusals and polls against a plain heap of
    /// `(due, key)`: the same keys come out at the same moments.
    #[test]
    fn matches_a_plain_heap_under_random_use() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut q = ExpiryQueue::new();
        let mut plain: BinaryHeap<Reverse<(UnixMillis, Key)>> = BinaryHeap::new();
        let mut now = 0i64;
        for tag in 0..20_000u32 {
            now += next(3) as i64;
            // Issued up to 2 ms ago (commits out of order), one of 5 TTLs.
            let key = Key(now - next(3) as i64, tag);
            let at = UnixMillis(key.0 + 1000 * (1 + next(5) as i64));
            q.schedule([(at, key)]);
            plain.push(Reverse((at, key)));
            let mut expect = Vec::new();
            while let Some(Reverse((at, key))) = plain.peek().copied() {
                if at.0 > now || expect.len() == EXPIRY_BATCH_MAX {
                    break;
                }
                plain.pop();
                expect.push((at, key));
            }
            let mut got = q.poll_due(UnixMillis(now));
            // Equal due moments may come out in either order.
            got.sort();
            let mut want: Vec<Key> = expect.iter().map(|&(_, key)| key).collect();
            want.sort();
            assert_eq!(got, want, "at {now}");
            for key in got {
                if next(10) == 0 {
                    q.handle_failed(UnixMillis(now), key);
                    plain.push(Reverse((UnixMillis(now + EXPIRY_RETRY_DELAY_MS), key)));
                } else {
                    q.handle_done();
                }
            }
            assert_eq!(q.len(), plain.len());
            assert_eq!(q.next_due(), plain.peek().map(|Reverse((at, _))| *at));
        }
    }

    /// More entries than any fixed queue held before (issue 12), scheduled
    /// in one batch: all are kept and all come out, in order, a batch at a
    /// time and never more in flight than the limit.
    #[test]
    fn a_large_backlog_is_kept_whole_and_drained_under_the_in_flight_limit() {
        const N: i64 = 100_000;
        let mut q = ExpiryQueue::new();
        // Issued in reverse of due order over two lifetimes, so the batch
        // is put in issue order and split over runs.
        q.schedule((0..N).map(|k| (UnixMillis(N - k + 1000 * (k % 2)), Key(N - k, k as u32))));
        assert_eq!((q.len(), q.outside_runs()), (N as usize, 0));

        let now = UnixMillis(N + 1000);
        let mut out = Vec::new();
        let mut unanswered = std::collections::VecDeque::new();
        let mut reached_limit = false;
        while !q.is_settled(now) {
            let due = q.poll_due(now);
            assert!(due.len() <= EXPIRY_BATCH_MAX);
            out.extend_from_slice(&due);
            unanswered.extend(due);
            assert!(q.in_flight() <= EXPIRY_IN_FLIGHT_MAX);
            let full = q.poll_timeout().is_none() && !q.is_empty();
            if full {
                // Nothing more until the writer answers.
                reached_limit = true;
                assert!(q.poll_due(now).is_empty());
            }
            // The writer commits half a batch between two polls.
            let answered = unanswered.len().min(EXPIRY_BATCH_MAX / 2);
            for i in 0..answered {
                unanswered.pop_front();
                // Only the first answer at the limit reopens room.
                assert_eq!(q.handle_done(), full && i == 0);
            }
        }
        assert!(reached_limit, "the backlog outgrew the in-flight limit");
        let dues: Vec<i64> = out
            .iter()
            .map(|k| k.0 + 1000 * (i64::from(k.1) % 2))
            .collect();
        assert!(dues.windows(2).all(|w| w[0] <= w[1]), "in due order");
        assert_eq!(out.len(), N as usize);
    }

    #[test]
    fn a_refused_expiry_comes_back_after_the_retry_delay() {
        let mut q = ExpiryQueue::new();
        q.schedule([(UnixMillis(1000), 1u32), (UnixMillis(5000), 2)]);
        let now = UnixMillis(1500);
        assert_eq!(q.poll_due(now), vec![1]);
        assert!(!q.is_settled(now), "in flight");
        // Refused: due again one retry delay after the refusal, which is now
        // the earliest entry.
        assert!(q.handle_failed(now, 1));
        let retry_at = now.plus_millis(EXPIRY_RETRY_DELAY_MS);
        assert_eq!(q.poll_timeout(), Some(retry_at));
        assert!(q.poll_due(UnixMillis(retry_at.0 - 1)).is_empty());
        assert_eq!(q.poll_due(retry_at), vec![1]);
        q.handle_done();
        assert!(q.is_settled(retry_at));
        assert_eq!(q.len(), 1, "the later entry is untouched");
    }

    #[test]
    fn settled_only_when_nothing_due_is_queued_or_in_flight() {
        let mut q = ExpiryQueue::new();
        assert!(q.is_settled(UnixMillis(0)));
        q.schedule([(UnixMillis(10), 1u32), (UnixMillis(20), 2)]);
        assert!(q.is_settled(UnixMillis(9)));
        assert!(!q.is_settled(UnixMillis(10)));
        assert_eq!(q.poll_due(UnixMillis(10)), vec![1]);
        assert!(!q.is_settled(UnixMillis(10)));
        q.handle_done();
        assert!(q.is_settled(UnixMillis(10)));
        assert!(!q.is_settled(UnixMillis(20)));
    }
}
