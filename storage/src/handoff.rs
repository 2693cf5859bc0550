//! The service's thread hand-off queue: bounded (or not), from producers
//! to consumer threads that park when they find it empty and are woken
//! only then. Three queues use it: the writer's intake (requests to the
//! writer thread), the commit queue (the writer to the commit consumer)
//! and, in the binary, the webhook driver's jobs to its sender threads.
//!
//! Why not a crossbeam channel here: its receive spins and then yields the
//! CPU several times before it parks, and every one of these consumers
//! goes back to its queue after each batch or job. On a two-core machine
//! under a saturated `tools/sip-bench.sh` run that spinning competes with
//! the threads that do the work (it was about a quarter of the webhook
//! senders' CPU in a `perf` profile), and a wake-up per send costs a
//! `futex` call even when the consumer is busy. Here a push wakes a
//! consumer only if one is parked and no wake is already on its way to
//! each parked one (for one consumer: one wake per idle-to-busy edge, not
//! per item), and a consumer takes everything it wants under one lock. It
//! parks at once, without a yield first: a yield helped sixteen blocked OS
//! threads in a criterion bench but raised the leased SIP path's p99 (see
//! `benches/README.md`).
//!
//! The ends: the [`Sender`] is not `Clone` (each queue has one producer
//! side, shared by reference); the [`Receiver`] is, one clone per consumer
//! thread, and every item is taken by exactly one of them. The queue ends
//! when the producer side is closed (explicitly, or by dropping its
//! `Sender`): the consumers still take every item queued before that, then
//! each sees the end. When every `Receiver` is gone, every later push is
//! refused, so nothing is queued that nobody will take.
//!
//! Why it lives in storage: the store's own two queues are here, the binary
//! depends on this crate, and the engine (no threads, no clock) is no place
//! for a blocking queue.
//!
//! Not for: a thread that waits on several inputs at once (there is no
//! `select`; the webhook driver's own inputs and the readers' queue stay
//! crossbeam channels), async tasks (`take` blocks its thread), events that
//! must not be refused by a bounded queue (give them an unbounded one, as
//! the commit queue is), or deciding what is queued (`store`, `committed`,
//! the webhook driver).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Why [`Sender::try_send`] gave the item back.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused<T> {
    /// The queue holds its capacity.
    Full(T),
    /// The queue was closed, or every consumer is gone.
    Closed(T),
}

/// What [`Receiver::take`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// At least one item was handed over.
    Some,
    /// The deadline passed with the queue empty.
    TimedOut,
    /// The queue is closed and empty: no item will ever come.
    Ended,
}

struct State<T> {
    items: VecDeque<T>,
    /// No push will be accepted any more; the consumers finish the queue.
    closed: bool,
    /// Receivers alive; at zero, pushes are refused.
    consumers: usize,
    /// Consumers waiting on `ready`, each counted from just before its
    /// wait until it holds the lock again.
    parked: usize,
    /// Wakes sent that no parked consumer has come back from yet. A push
    /// wakes only while `parked > waking`: a parked consumer already being
    /// woken needs no second wake. (A consumer that comes back by timeout
    /// may absorb another's wake; that only makes a later push wake again,
    /// never leaves a parked consumer unwoken while `parked > waking`.)
    waking: usize,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Every change under the lock is a push, a pop, a flag or a count,
        // so a panic elsewhere while it was held left the state consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The producers' end. Not `Clone`: it is shared by reference (every clone
/// of a store uses its one sender), and dropping it ends the queue.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// A consumer's end; clone it once per consumer thread.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// A queue of at most `capacity` items (`usize::MAX`: unbounded), with one
/// consumer end (clone it for more).
pub fn queue<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            closed: false,
            consumers: 1,
            parked: 0,
            waking: 0,
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
    /// Queues `item` unless the queue is full, closed or every consumer is
    /// gone. Returns the number of items queued, this one included.
    pub fn try_send(&self, item: T) -> Result<usize, Refused<T>> {
        let mut state = self.shared.lock();
        if state.closed || state.consumers == 0 {
            return Err(Refused::Closed(item));
        }
        if state.items.len() >= self.shared.capacity {
            return Err(Refused::Full(item));
        }
        state.items.push_back(item);
        let queued = state.items.len();
        let wake = state.parked > state.waking;
        if wake {
            state.waking += 1;
        }
        drop(state);
        if wake {
            self.shared.ready.notify_one();
        }
        Ok(queued)
    }

    /// Accepts no more items; the consumers take what is queued, then each
    /// sees the end.
    pub fn close(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        let wake = state.parked > 0;
        state.waking = state.parked;
        drop(state);
        if wake {
            self.shared.ready.notify_all();
        }
    }

    /// Items queued and not yet taken.
    pub fn len(&self) -> usize {
        self.shared.lock().items.len()
    }

    /// No item is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // One sender per queue: when it goes, nothing more will be queued.
        self.close();
    }
}

impl<T> Receiver<T> {
    /// Waits (until `deadline`, if any) for at least one item, then moves
    /// up to `max` of them (at least one), in order, into `each`.
    pub fn take(&self, max: usize, deadline: Option<Instant>, mut each: impl FnMut(T)) -> Taken {
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
            let left = match deadline {
                None => None,
                Some(at) => match at.saturating_duration_since(Instant::now()) {
                    left if left.is_zero() => return Taken::TimedOut,
                    left => Some(left),
                },
            };
            state.parked += 1;
            let ready = &self.shared.ready;
            state = match left {
                None => ready.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(left) => {
                    let waited = ready.wait_timeout(state, left);
                    waited.unwrap_or_else(|e| e.into_inner()).0
                }
            };
            // Woken, timed out or spurious: this consumer looks again with
            // the lock held, so a push from now on need not wake it.
            state.parked -= 1;
            state.waking = state.waking.saturating_sub(1);
        }
    }

    /// The next item, waiting for one; `None` once the queue is closed and
    /// empty.
    pub fn recv(&self) -> Option<T> {
        let mut got = None;
        match self.take(1, None, |item| got = Some(item)) {
            Taken::Some => got,
            Taken::TimedOut | Taken::Ended => None,
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.shared.lock().consumers += 1;
        Receiver {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.lock().consumers -= 1;
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
mod tests;
