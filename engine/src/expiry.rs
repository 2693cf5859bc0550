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
//! Not for: deciding whether an expiry applies (see
//! [`crate::verification::apply`]), clocks, threads or locks (the binary's
//! expiry thread owns those).

use crate::time::UnixMillis;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// Pending expiries ordered by due moment, plus the count handed out.
pub struct ExpiryQueue<K: Ord> {
    heap: BinaryHeap<Reverse<(UnixMillis, K)>>,
    /// Handed out by `poll_due`, not yet answered by `handle_done` or
    /// `handle_failed`. At most [`EXPIRY_IN_FLIGHT_MAX`].
    in_flight: usize,
}

impl<K: Ord> Default for ExpiryQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord> ExpiryQueue<K> {
    pub fn new() -> Self {
        ExpiryQueue {
            heap: BinaryHeap::new(),
            in_flight: 0,
        }
    }

    /// Adds expiries: `(expires_at, key)`. Never refuses. A large batch
    /// (recovery) is heapified in O(n), a single entry sifted in O(log n).
    /// Returns true when the earliest due moment moved earlier, i.e. a poller
    /// sleeping until the old one should look again now.
    pub fn schedule(&mut self, entries: impl IntoIterator<Item = (UnixMillis, K)>) -> bool {
        let before = self.next_due();
        // `BinaryHeap::extend` appends, then rebuilds or sifts whichever is
        // cheaper for the number appended.
        self.heap.extend(entries.into_iter().map(Reverse));
        match (before, self.next_due()) {
            (Some(old), Some(new)) => new < old,
            (None, Some(_)) => true,
            (_, None) => false,
        }
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
            match self.heap.peek() {
                Some(Reverse((at, _))) if *at <= now => {}
                _ => break,
            }
            if let Some(Reverse((_, key))) = self.heap.pop() {
                due.push(key);
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
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Entries queued (not counting those in flight).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_due_entries_in_order_over_virtual_time() {
        let mut q = ExpiryQueue::new();
        assert!(q.schedule([(UnixMillis(3000), "c")]));
        assert!(q.schedule([(UnixMillis(1000), "a")]));
        assert!(!q.schedule([(UnixMillis(2000), "b")]));
        assert!(q.poll_due(UnixMillis(999)).is_empty());
        assert_eq!(q.poll_timeout(), Some(UnixMillis(1000)));
        assert_eq!(q.poll_due(UnixMillis(2000)), vec!["a", "b"]);
        assert_eq!((q.len(), q.in_flight()), (1, 2));
        assert!(!q.handle_done() && !q.handle_done());
        assert_eq!(q.poll_due(UnixMillis(10_000)), vec!["c"]);
        assert!(q.is_empty());
    }

    /// More entries than any fixed queue held before (issue 12), scheduled
    /// in one batch: all are kept and all come out, in order, a batch at a
    /// time and never more in flight than the limit.
    #[test]
    fn a_large_backlog_is_kept_whole_and_drained_under_the_in_flight_limit() {
        const N: u32 = 100_000;
        let mut q = ExpiryQueue::new();
        // Due times in reverse of key order, so the heap has work to do.
        q.schedule((0..N).map(|k| (UnixMillis(i64::from(N - k)), k)));
        assert_eq!(q.len(), N as usize);

        let now = UnixMillis(i64::from(N));
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
        let expected: Vec<u32> = (0..N).rev().collect();
        assert_eq!(out, expected);
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
