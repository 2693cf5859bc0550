//! The expiry schedule's shared home: [`Expiries`] is the one way to
//! register an expiry (the commit consumer adds one when a row commits,
//! recovery adds its whole backlog in one call). It keeps the engine's
//! [`ExpiryQueue`] behind a mutex, so registering takes the lock for a heap
//! push and nothing else: it never waits for the expiry thread and can never
//! be refused. (A bounded channel stood here before. It refused the 65,537th
//! expiry, so a restart with more pending verifications failed, and a
//! running service left such a number leased until the next restart: issue
//! 12.)
//!
//! Not for: the thread that submits due expiries (`crate::runtime::expiry`), or what
//! is due and when a failed one is retried (the engine's queue decides).

use super::clock::Clock;
use dialproof_engine::expiry::ExpiryQueue;
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::time::UnixMillis;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest the thread sleeps without looking (also its stop latency).
const IDLE_WAKE: Duration = Duration::from_millis(500);

/// The expiry schedule, shared by the create path, recovery, the expiry
/// thread and the writer's replies. Cheap to clone.
#[derive(Clone, Default)]
pub struct Expiries {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<ExpiryQueue<VerificationKey>>,
    /// The expiry thread waits here for an earlier entry or reopened room.
    poller: Condvar,
    /// [`Expiries::wait_settled`] waits here for the last answer in flight.
    settled: Condvar,
}

impl Expiries {
    /// Registers expiries, `(expires_at, key)`: one from a create, or
    /// recovery's whole backlog at once (heapified in O(n)). Never refuses
    /// and never waits for the expiry thread.
    pub fn schedule(&self, entries: impl IntoIterator<Item = (UnixMillis, VerificationKey)>) {
        if self.shared.queue.lock().schedule(entries) {
            self.shared.poller.notify_one();
        }
    }

    /// Blocks the calling thread until no expiry due at `at` is queued or in
    /// flight; false if `timeout` passed first. For the start, before any
    /// listener exists: never call it from a coroutine.
    pub fn wait_settled(&self, at: UnixMillis, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut queue = self.shared.queue.lock();
        while !queue.is_settled(at) {
            if self
                .shared
                .settled
                .wait_until(&mut queue, deadline)
                .timed_out()
            {
                return queue.is_settled(at);
            }
        }
        true
    }

    /// Entries queued and in flight, for the log.
    pub fn counts(&self) -> (usize, usize) {
        let queue = self.shared.queue.lock();
        (queue.len(), queue.in_flight())
    }

    /// Waits until expiries are due and takes them (they are in flight from
    /// then on); empty once the service is stopping.
    pub fn next_due(&self, clock: &Clock, stop: &AtomicBool) -> Vec<VerificationKey> {
        let mut queue = self.shared.queue.lock();
        loop {
            if stop.load(Ordering::Acquire) {
                return Vec::new();
            }
            let now = clock.now();
            let due = queue.poll_due(now);
            if !due.is_empty() {
                return due;
            }
            let wait = queue
                .poll_timeout()
                .map_or(IDLE_WAKE, |at| millis_until(now, at))
                .min(IDLE_WAKE);
            self.shared.poller.wait_for(&mut queue, wait);
        }
    }

    /// The writer answered one expiry in flight.
    pub fn done(&self) {
        let mut queue = self.shared.queue.lock();
        let wake = queue.handle_done();
        self.after_answer(queue, wake);
    }

    /// The writer refused or failed these expiries in flight: they are due
    /// again after the engine's retry delay.
    pub fn failed(&self, now: UnixMillis, keys: impl IntoIterator<Item = VerificationKey>) {
        let mut queue = self.shared.queue.lock();
        let mut wake = false;
        for key in keys {
            wake |= queue.handle_failed(now, key);
        }
        self.after_answer(queue, wake);
    }

    fn after_answer(
        &self,
        queue: parking_lot::MutexGuard<'_, ExpiryQueue<VerificationKey>>,
        wake_poller: bool,
    ) {
        let idle = queue.in_flight() == 0;
        drop(queue);
        if wake_poller {
            self.shared.poller.notify_one();
        }
        if idle {
            self.shared.settled.notify_all();
        }
    }
}

fn millis_until(now: UnixMillis, at: UnixMillis) -> Duration {
    Duration::from_millis(u64::try_from(at.0.saturating_sub(now.0)).unwrap_or(0))
}
