//! The pool for CPU-heavy work (password hashing), so a worker thread never
//! spends tens of milliseconds on one request while its other coroutines
//! wait. The waiting coroutine parks (see `crate::shared::thread_pool`).
//!
//! Not for: IO (storage has its own threads, DNS the `crate::shared::resolve` pool).

use crate::shared::thread_pool::ThreadPool;
use std::time::Duration;

/// Threads of the pool; hashing is rare (logins, user creation).
pub const OFFLOAD_THREADS: usize = 2;
/// Jobs queued beyond the running ones; more are refused at once.
pub const OFFLOAD_QUEUE_MAX: usize = 256;

#[derive(Clone)]
pub struct Offload {
    pool: ThreadPool,
}

impl Offload {
    pub fn start() -> std::io::Result<Offload> {
        Ok(Offload {
            pool: ThreadPool::start("offload", OFFLOAD_THREADS, OFFLOAD_QUEUE_MAX)?,
        })
    }

    /// Runs `f` on the pool; `None` when the pool is full, the job failed
    /// or `timeout` ended (the caller answers 503 then).
    pub fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.pool
            .run(timeout, f)
            .map_err(|e| tracing::warn!(error = %e, "offloaded job gave no answer"))
            .ok()
    }
}
