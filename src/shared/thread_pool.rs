//! A small pool of named plain threads for blocking jobs whose callers must
//! not block: password hashing (`crate::offload`) and DNS lookups
//! (`crate::shared::resolve`).
//!
//! A caller hands the pool a job and parks on a may channel until the answer
//! comes. In a coroutine that parks only the coroutine, so its worker thread
//! goes on serving the other connections; on a plain thread (the webhook
//! senders) it parks the thread, as any blocking call would.
//!
//! The queue is bounded, and a full queue refuses a job at once
//! ([`PoolError::Busy`]) instead of making the caller wait for room: waiting
//! on a full crossbeam queue would block a coroutine's worker thread, the very
//! stall the pool is for. The refusal is the back-pressure: the caller turns
//! it into an answer its own client sees (a 503 with `Retry-After`, an error
//! in the delivery log). A caller that stops waiting (timeout) does not
//! cancel its job; the job runs and its answer is dropped.
//!
//! Not for: work nobody waits for, SQLite (the storage writer and readers own
//! their threads) or long-running loops (each holds a pool thread for good).

use crossbeam_channel::{bounded, Sender, TrySendError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

/// Why a job gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolError {
    /// The queue was full: the job was refused and never ran.
    Busy,
    /// No answer within the caller's timeout (the job may still run).
    TimedOut,
    /// The job panicked, or the pool's threads are gone.
    Failed,
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PoolError::Busy => "busy",
            PoolError::TimedOut => "timed out",
            PoolError::Failed => "failed",
        })
    }
}

/// A handle to the pool; clones share its threads. The threads end when
/// the last handle is dropped and the queue is empty.
#[derive(Clone)]
pub struct ThreadPool {
    name: &'static str,
    jobs: Sender<Job>,
}

impl ThreadPool {
    /// Starts `threads` threads named `<name>-<i>`, with room for
    /// `queue_max` jobs beyond the running ones.
    pub fn start(name: &'static str, threads: usize, queue_max: usize) -> std::io::Result<Self> {
        assert!(threads > 0, "a pool needs a thread");
        assert!(queue_max > 0, "a zero-length queue would refuse every job");
        let (tx, rx) = bounded::<Job>(queue_max);
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    for job in rx {
                        // A panicking job must not take its thread with it.
                        // Its reply sender is dropped while unwinding, which
                        // the waiting caller sees as `Failed`.
                        if catch_unwind(AssertUnwindSafe(job)).is_err() {
                            tracing::error!(pool = name, "a pool job panicked");
                        }
                    }
                })?;
        }
        Ok(ThreadPool { name, jobs: tx })
    }

    /// Runs `job` on the pool and waits up to `timeout` for its value,
    /// parking the calling coroutine (or thread) meanwhile.
    pub fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        let (tx, rx) = may::sync::mpsc::channel();
        let boxed: Job = Box::new(move || {
            // The caller may have timed out and gone; nothing to do then.
            let _ = tx.send(job());
        });
        match self.jobs.try_send(boxed) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                tracing::warn!(pool = self.name, "pool queue full; job refused");
                return Err(PoolError::Busy);
            }
            Err(TrySendError::Disconnected(_)) => return Err(PoolError::Failed),
        }
        rx.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => PoolError::TimedOut,
            RecvTimeoutError::Disconnected => PoolError::Failed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{PoolError, ThreadPool};
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn a_coroutine_gets_the_jobs_value_from_a_named_thread() {
        let pool = ThreadPool::start("test-pool", 2, 4).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        crate::coroutine::spawn(move || {
            let answer = pool.run(WAIT, || std::thread::current().name().map(str::to_owned));
            let _ = tx.send(answer);
        });
        let name = rx.recv_timeout(WAIT).unwrap().unwrap().unwrap();
        assert!(name.starts_with("test-pool-"), "{name}");
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_the_pool_recovers() {
        let pool = ThreadPool::start("test-full", 1, 1).unwrap();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        // Occupy the only thread until the gate opens; a zero timeout
        // returns at once and leaves the job running.
        let blocker = pool.run(Duration::ZERO, move || {
            started_tx.send(()).unwrap();
            let _ = gate_rx.recv();
        });
        assert_eq!(blocker, Err(PoolError::TimedOut));
        started_rx.recv_timeout(WAIT).unwrap();
        // Fill the one queue slot.
        let (ran_tx, ran_rx) = std::sync::mpsc::channel();
        let filler = pool.run(Duration::ZERO, move || ran_tx.send(()).unwrap());
        assert_eq!(filler, Err(PoolError::TimedOut));
        // The next job finds no room, and says so without waiting.
        assert_eq!(pool.run(WAIT, || 1), Err(PoolError::Busy));
        // Once the queue drains, jobs are taken again.
        gate_tx.send(()).unwrap();
        ran_rx.recv_timeout(WAIT).unwrap();
        assert_eq!(pool.run(WAIT, || 2), Ok(2));
    }

    #[test]
    fn a_panicking_job_fails_its_caller_and_keeps_the_thread() {
        let pool = ThreadPool::start("test-panic", 1, 4).unwrap();
        let r: Result<(), _> = pool.run(WAIT, || panic!("deliberate test panic"));
        assert_eq!(r, Err(PoolError::Failed));
        assert_eq!(pool.run(WAIT, || 3), Ok(3));
    }
}
