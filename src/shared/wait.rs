//! Bridging work on other threads back to a waiting coroutine (or thread).
//!
//! SQLite and DNS block the thread that runs them, so they run on their own
//! threads. A coroutine that needs the answer passes a [`Reply`] and parks on
//! a may channel, which parks only the coroutine, not the worker thread; the
//! same call also works from a plain thread (the control and timer threads).
//!
//! Not for: fire-and-forget work, which needs no reply.

use dialproof_storage::{Reply, StorageError};
use std::time::Duration;

/// Why a waited-for storage answer was not what the caller needed, for a
/// log line: `timed out`, or the storage error's text.
pub fn failure_text<T>(result: Option<Result<T, StorageError>>) -> String {
    match result {
        None => "timed out".to_owned(),
        Some(Err(e)) => e.to_string(),
        Some(Ok(_)) => "unexpected answer".to_owned(),
    }
}

/// [`failure_text`] of a read, whose job has an error of its own.
pub fn read_failure_text<T>(
    result: Option<Result<Result<T, StorageError>, StorageError>>,
) -> String {
    failure_text(result.map(|r| r.and_then(|inner| inner)))
}

/// Runs `start` with a reply callback and waits up to `timeout` for it to be
/// called. `None` on timeout or if the callback was dropped without a call.
pub fn wait_for<T: Send + 'static>(timeout: Duration, start: impl FnOnce(Reply<T>)) -> Option<T> {
    let (tx, rx) = may::sync::mpsc::channel();
    start(Box::new(move |value| {
        // The receiver may have timed out and gone; nothing to do then.
        let _ = tx.send(value);
    }));
    rx.recv_timeout(timeout).ok()
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
