//! A queue from many producers to one consumer thread that parks when it
//! finds the queue empty, and is woken only then: the writer's intake
//! (requests to the writer thread) and the commit queue (the writer to the
//! commit consumer).
//!
//! Why not a crossbeam channel here: its receive spins and then yields the
//! CPU several times before it parks, and both consumers go back to their
//! queue after every batch. On a two-core machine under a saturated
//! `tools/sip-bench.sh` run that spinning competes with the threads that
//! do the work, and a wake-up per send costs a `futex` call even when the
//! consumer is busy. Here a push wakes the consumer only if it is parked
//! (one wake per idle-to-busy edge, not per item), and the consumer takes
//! everything it wants under one lock. It parks at once, without a yield
//! first: a yield helped sixteen blocked OS threads in a criterion bench
//! but raised the leased SIP path's p99 (see `benches/README.md`).
//!
//! The queue ends when the producer side is closed (explicitly, or by
//! dropping its [`Sender`]): the consumer still takes every item queued
//! before that, then sees the end. A consumer that is gone (its
//! [`Receiver`] dropped) makes every later push fail, so nothing is queued
//! that nobody will take.
//!
//! Not for: the readers' queue (many consumers; see `reader`), or deciding
//! what is queued (`store`, `committed`).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Why a push gave the item back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused<T> {
    /// The queue holds its capacity.
    Full(T),
    /// The queue was closed, or its consumer is gone.
    Closed(T),
}

/// What [`Receiver::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// At least one item was handed over.
    Some,
    /// The deadline passed with the queue empty.
    TimedOut,
    /// The queue is closed and empty: no item will ever come.
    Ended,
}

struct State<T> {
    items: VecDeque<T>,
    /// No push will be accepted any more; the consumer finishes the queue.
    closed: bool,
    /// The consumer is gone; pushes fail.
    consumer_gone: bool,
    /// The consumer waits on `ready`: the next push must wake it.
    parked: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Every change under the lock is a single push, pop or flag, so a
        // panic elsewhere while it was held left the state consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The producers' end. Not `Clone`: it is shared by reference (every
/// clone of a store uses its one sender), and dropping it ends the queue.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The one consumer's end.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// A queue of at most `capacity` items (`usize::MAX`: unbounded).
pub(crate) fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            closed: false,
            consumer_gone: false,
            parked: false,
        }),
        ready: Condvar::new(),
        capacity,
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// Queues `item` unless the queue is full, closed or its consumer gone.
    /// Returns the number of items queued, this one included.
    pub(crate) fn try_send(&self, item: T) -> Result<usize, Refused<T>> {
        let mut state = self.shared.lock();
        if state.closed || state.consumer_gone {
            return Err(Refused::Closed(item));
        }
        if state.items.len() >= self.shared.capacity {
            return Err(Refused::Full(item));
        }
        state.items.push_back(item);
        let queued = state.items.len();
        let wake = std::mem::replace(&mut state.parked, false);
        drop(state);
        if wake {
            self.shared.ready.notify_one();
        }
        Ok(queued)
    }

    /// Accepts no more items; the consumer takes what is queued, then
    /// sees the end.
    pub(crate) fn close(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        state.parked = false;
        drop(state);
        self.shared.ready.notify_one();
    }

    /// Items queued and not yet taken.
    pub(crate) fn len(&self) -> usize {
        self.shared.lock().items.len()
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // One sender per queue in this crate (the store's, the writer's):
        // when it goes, nothing more will be queued.
        self.close();
    }
}

impl<T> Receiver<T> {
    /// Waits (until `deadline`, if any) for at least one item, then moves
    /// up to `max` of them, in order, into `each`.
    pub(crate) fn take(
        &self,
        max: usize,
        deadline: Option<Instant>,
        mut each: impl FnMut(T),
    ) -> Taken {
        let mut state = self.shared.lock();
        loop {
            if !state.items.is_empty() {
                let n = state.items.len().min(max.max(1));
                for item in state.items.drain(..n) {
                    each(item);
                }
                return Taken::Some;
            }
            if state.closed {
                return Taken::Ended;
            }
            state.parked = true;
            state = match deadline {
                None => self
                    .shared
                    .ready
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        state.parked = false;
                        return Taken::TimedOut;
                    }
                    self.shared
                        .ready
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
            // Woken, timed out or spurious: a push that comes while we
            // look again need not wake us.
            state.parked = false;
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.lock().consumer_gone = true;
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("handoff::Sender").finish_non_exhaustive()
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("handoff::Receiver").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::{queue, Refused, Taken};
    use std::time::{Duration, Instant};

    fn take_all(rx: &super::Receiver<u32>, max: usize) -> (Taken, Vec<u32>) {
        let mut got = Vec::new();
        let taken = rx.take(max, Some(Instant::now()), |i| got.push(i));
        (taken, got)
    }

    #[test]
    fn bounded_in_order_batched_and_finished_after_close() {
        let (tx, rx) = queue(3);
        assert_eq!(tx.try_send(1), Ok(1));
        assert_eq!(tx.try_send(2), Ok(2));
        assert_eq!(tx.try_send(3), Ok(3));
        assert_eq!(tx.try_send(4), Err(Refused::Full(4)), "capacity 3");
        assert_eq!(take_all(&rx, 2), (Taken::Some, vec![1, 2]), "at most max");
        tx.close();
        assert_eq!(tx.try_send(5), Err(Refused::Closed(5)));
        assert_eq!(
            take_all(&rx, 8),
            (Taken::Some, vec![3]),
            "queued before close"
        );
        assert_eq!(take_all(&rx, 8), (Taken::Ended, vec![]));
    }

    #[test]
    fn a_parked_consumer_is_woken_and_a_deadline_ends_the_wait() {
        let (tx, rx) = queue(usize::MAX);
        assert_eq!(take_all(&rx, 8), (Taken::TimedOut, vec![]));
        let pusher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.try_send(7).unwrap();
            tx
        });
        let mut got = Vec::new();
        assert_eq!(rx.take(8, None, |i| got.push(i)), Taken::Some);
        assert_eq!(got, [7]);
        drop(pusher.join().unwrap());
        assert_eq!(
            rx.take(8, None, |_| {}),
            Taken::Ended,
            "dropping the sender ends the queue"
        );
        let (tx, rx) = queue::<u32>(4);
        drop(rx);
        assert_eq!(tx.try_send(1), Err(Refused::Closed(1)), "consumer gone");
    }
}
