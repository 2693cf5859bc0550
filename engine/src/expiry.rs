//! A queue of pending verifications ordered by their expiry moment.
//!
//! The timer thread in the binary pushes every new lease here and polls with
//! the current time; the queue hands back what is due. Entries are never
//! removed early: a completed or cancelled verification's entry simply comes
//! out later and the state machine ignores the stale expiry (a terminal state
//! never changes). That keeps completion and cancel O(1) with no shared index.
//!
//! Not for: deciding whether an expiry applies (see
//! [`crate::verification::apply`]).

use crate::time::UnixMillis;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Default)]
pub struct ExpiryQueue<K: Ord> {
    heap: BinaryHeap<Reverse<(UnixMillis, K)>>,
}

impl<K: Ord> ExpiryQueue<K> {
    pub fn new() -> Self {
        ExpiryQueue {
            heap: BinaryHeap::new(),
        }
    }

    pub fn push(&mut self, expires_at: UnixMillis, key: K) {
        self.heap.push(Reverse((expires_at, key)));
    }

    /// Removes and returns up to `max` entries due at `now` (expires_at <= now),
    /// earliest first. The bound keeps one poll from starving other work.
    pub fn pop_due(&mut self, now: UnixMillis, max: usize) -> Vec<(UnixMillis, K)> {
        let mut due = Vec::new();
        while due.len() < max {
            match self.heap.peek() {
                Some(Reverse((at, _))) if *at <= now => {}
                _ => break,
            }
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry);
            }
        }
        due
    }

    /// The earliest expiry still queued, to know how long to sleep.
    pub fn next_due(&self) -> Option<UnixMillis> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_due_entries_in_order_over_virtual_time() {
        let mut q = ExpiryQueue::new();
        q.push(UnixMillis(3000), "c");
        q.push(UnixMillis(1000), "a");
        q.push(UnixMillis(2000), "b");
        assert!(q.pop_due(UnixMillis(999), 10).is_empty());
        assert_eq!(q.next_due(), Some(UnixMillis(1000)));
        assert_eq!(
            q.pop_due(UnixMillis(2000), 10),
            vec![(UnixMillis(1000), "a"), (UnixMillis(2000), "b")]
        );
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop_due(UnixMillis(10_000), 10).len(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn pop_is_bounded() {
        let mut q = ExpiryQueue::new();
        for i in 0..100 {
            q.push(UnixMillis(i), i);
        }
        assert_eq!(q.pop_due(UnixMillis(1000), 7).len(), 7);
        assert_eq!(q.len(), 93);
    }
}
