//! Bridging work on other threads back to a waiting coroutine (or thread).
//!
//! SQLite and DNS block the thread that runs them, so they run on their own
//! threads. A coroutine that needs the answer passes a [`Reply`] and parks on
//! a one-shot slot (`reply_slot`), which parks only the coroutine, not the
//! worker thread; the same call also works from a plain thread (the control
//! and timer threads).
//!
//! Not for: fire-and-forget work, which needs no reply.

use crate::shared::reply_slot::{self, Ended};
use dialproof_storage::{Reply, StorageError, Store, WriteOp};
use std::fmt;
use std::time::Duration;

/// How a write (or read) that a request waited for ended.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Committed (or read); the writer's answer.
    Done(T),
    /// Surely not done: the writer refused it, answered with an error, or
    /// dropped it without an answer.
    Failed(StorageError),
    /// No answer within the wait: it may still commit (its consequences are
    /// then the commit consumer's, as for any commit).
    TimedOut,
}

impl<T> fmt::Display for Outcome<T> {
    /// Why the outcome is not what the caller needed, for a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Done(_) => f.write_str("unexpected answer"),
            Outcome::Failed(e) => write!(f, "{e}"),
            Outcome::TimedOut => f.write_str("timed out"),
        }
    }
}

impl<T> Outcome<T> {
    /// The answer, or why there is none as a storage error (a wait that
    /// ended without an answer reads as the store being unavailable), for
    /// callers that pass storage errors on.
    pub fn into_result(self) -> Result<T, StorageError> {
        match self {
            Outcome::Done(v) => Ok(v),
            Outcome::Failed(e) => Err(e),
            Outcome::TimedOut => Err(StorageError::Closed),
        }
    }
}

/// The store, as code that waits for its answers uses it.
pub trait Committing {
    /// Submits the op `make` builds around its reply and waits up to
    /// `timeout` for the writer's answer.
    fn commit<T: Send + 'static>(
        &self,
        timeout: Duration,
        make: impl FnOnce(Reply<Result<T, StorageError>>) -> WriteOp,
    ) -> Outcome<T>;

    /// Like [`Committing::commit`], with `guard` carried inside the reply:
    /// it comes back with the answer, or is dropped wherever the answer is
    /// lost (refused, never answered, or answered after the wait ended), so
    /// whatever its drop does happens exactly once.
    fn commit_holding<T: Send + 'static, G: Send + 'static>(
        &self,
        timeout: Duration,
        guard: G,
        make: impl FnOnce(Reply<Result<T, StorageError>>) -> WriteOp,
    ) -> (Outcome<T>, Option<G>);

    /// Runs `job` on a reader thread and waits up to `timeout` for it.
    fn read_within<T: Send + 'static>(
        &self,
        timeout: Duration,
        job: impl FnOnce(&dialproof_storage::Reader) -> Result<T, StorageError> + Send + 'static,
    ) -> Outcome<T>;
}

impl Committing for Store {
    fn commit<T: Send + 'static>(
        &self,
        timeout: Duration,
        make: impl FnOnce(Reply<Result<T, StorageError>>) -> WriteOp,
    ) -> Outcome<T> {
        self.commit_holding(timeout, (), make).0
    }

    fn commit_holding<T: Send + 'static, G: Send + 'static>(
        &self,
        timeout: Duration,
        guard: G,
        make: impl FnOnce(Reply<Result<T, StorageError>>) -> WriteOp,
    ) -> (Outcome<T>, Option<G>) {
        let (answer, wait) = reply_slot::slot();
        let reply: Reply<Result<T, StorageError>> = Box::new(move |value| {
            // If the waiter is gone, the guard is dropped here, with the
            // value it no longer waits for.
            let _ = answer.send((value, guard));
        });
        if let Err(e) = self.submit(make(reply)) {
            // The op (and the guard inside its reply) was dropped unrun.
            return (Outcome::Failed(e), None);
        }
        match wait.wait(timeout) {
            Ok((Ok(v), guard)) => (Outcome::Done(v), Some(guard)),
            Ok((Err(e), guard)) => (Outcome::Failed(e), Some(guard)),
            Err(Ended::TimedOut) => (Outcome::TimedOut, None),
            // The reply was dropped uncalled (with the guard).
            Err(Ended::Dropped) => (Outcome::Failed(StorageError::Closed), None),
        }
    }

    fn read_within<T: Send + 'static>(
        &self,
        timeout: Duration,
        job: impl FnOnce(&dialproof_storage::Reader) -> Result<T, StorageError> + Send + 'static,
    ) -> Outcome<T> {
        match wait_for(timeout, |reply| self.read(job, reply)) {
            Some(Ok(Ok(v))) => Outcome::Done(v),
            Some(Ok(Err(e))) | Some(Err(e)) => Outcome::Failed(e),
            None => Outcome::TimedOut,
        }
    }
}

/// Runs `start` with a reply callback and waits up to `timeout` for it to be
/// called. `None` on timeout or if the callback was dropped without a call.
fn wait_for<T: Send + 'static>(timeout: Duration, start: impl FnOnce(Reply<T>)) -> Option<T> {
    let (answer, wait) = reply_slot::slot();
    start(Box::new(move |value| {
        // The waiter may have timed out and gone; nothing to do then.
        let _ = answer.send(value);
    }));
    wait.wait(timeout).ok()
}

/// How often [`wait_until_applied`] looks again. The consumer applies a
/// batch in microseconds; this only bounds the spin.
const APPLIED_POLL: Duration = Duration::from_micros(200);

/// Waits (parking the coroutine, up to `timeout`) until the commit consumer
/// has applied every batch handed over so far: called after a write's
/// reply, it returns once that write's consequences (a released number)
/// are done. `false` on timeout.
pub fn wait_until_applied(progress: &dialproof_storage::CommitProgress, timeout: Duration) -> bool {
    let target = progress.handed();
    let started = std::time::Instant::now();
    while progress.applied() < target {
        if started.elapsed() >= timeout {
            return false;
        }
        may::coroutine::sleep(APPLIED_POLL);
    }
    true
}
