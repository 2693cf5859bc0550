//! The queue from the webhook driver to the sender threads: bounded, one
//! producer (the driver), many consumers (the senders), and a consumer
//! that finds it empty parks at once.
//!
//! Why not a crossbeam channel here: its receive spins and then yields the
//! CPU several times before it parks, and every sender goes back to the
//! queue after each attempt. With a pool of senders taking one job each,
//! that spinning was about a quarter of the senders' CPU on a two-core
//! machine (`perf` of a saturated `tools/sip-bench.sh` run), and the
//! yields hand the core around rather than to useful work. A mutex and a
//! condition variable cost one wake per job and nothing while idle.
//!
//! Not for: the driver's own inputs (commit wakes and recorded attempts
//! arrive on channels it selects over) or deciding what to send.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Why [`Producer::try_send`] gave the item back.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused<T> {
    /// The queue holds its capacity.
    Full(T),
    /// Every consumer is gone.
    Gone(T),
}

struct State<T> {
    items: VecDeque<T>,
    consumers: usize,
    /// The producer is gone: consumers finish the queue, then stop.
    closed: bool,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    capacity: usize,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A consumer that panicked while holding the lock left the queue
        // itself consistent (every change is one push or pop).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The driver's end.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
}

/// A sender's end; clone one per sender thread.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
}

/// A queue of at most `capacity` items.
pub fn handoff<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::with_capacity(capacity),
            consumers: 1,
            closed: false,
        }),
        ready: Condvar::new(),
        capacity,
    });
    (
        Producer {
            shared: shared.clone(),
        },
        Consumer { shared },
    )
}

impl<T> Producer<T> {
    /// Queues `item` unless the queue is full or no consumer is left.
    pub fn try_send(&self, item: T) -> Result<(), Refused<T>> {
        let mut state = self.shared.lock();
        if state.consumers == 0 {
            return Err(Refused::Gone(item));
        }
        if state.items.len() >= self.shared.capacity {
            return Err(Refused::Full(item));
        }
        state.items.push_back(item);
        drop(state);
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Items queued and not yet taken.
    pub fn len(&self) -> usize {
        self.shared.lock().items.len()
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
    }
}

impl<T> Consumer<T> {
    /// The next item, waiting for one; `None` once the producer is gone
    /// and the queue is empty.
    pub fn recv(&self) -> Option<T> {
        let mut state = self.shared.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self
                .shared
                .ready
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl<T> Clone for Consumer<T> {
    fn clone(&self) -> Self {
        self.shared.lock().consumers += 1;
        Consumer {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.shared.lock().consumers -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::{handoff, Refused};

    #[test]
    fn bounded_in_order_and_ends_when_either_side_is_gone() {
        let (producer, consumer) = handoff(2);
        producer.try_send(1).unwrap();
        producer.try_send(2).unwrap();
        assert_eq!(producer.try_send(3), Err(Refused::Full(3)));
        assert_eq!(producer.len(), 2);
        let other = consumer.clone();
        let taker = std::thread::spawn(move || {
            let mut got = Vec::new();
            while let Some(item) = other.recv() {
                got.push(item);
            }
            got
        });
        assert_eq!(consumer.recv(), Some(1));
        producer.try_send(4).unwrap();
        drop(producer);
        let mut rest = taker.join().unwrap();
        rest.extend(std::iter::from_fn(|| consumer.recv()));
        rest.sort();
        assert_eq!(rest, [2, 4], "every item is taken once, then both stop");
        let (producer, consumer) = handoff(2);
        drop(consumer);
        assert_eq!(producer.try_send(1), Err(Refused::Gone(1)));
    }
}
