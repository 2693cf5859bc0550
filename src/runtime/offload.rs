//! A small pool of plain threads for CPU-heavy work (password hashing), so a
//! worker thread never spends milliseconds on one request while its other
//! coroutines wait. The waiting coroutine parks on a may channel.
//!
//! Not for: IO (storage and DNS have their own threads).

use crate::runtime::wait::wait_for;
use crossbeam_channel::{bounded, Sender, TrySendError};
use std::time::Duration;

/// Threads of the pool; hashing is rare (logins, user creation).
pub const OFFLOAD_THREADS: usize = 2;
/// Jobs queued beyond the running ones; more are refused at once.
pub const OFFLOAD_QUEUE_MAX: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Clone)]
pub struct Offload {
    jobs: Sender<Job>,
}

impl Offload {
    pub fn start() -> std::io::Result<Offload> {
        let (tx, rx) = bounded::<Job>(OFFLOAD_QUEUE_MAX);
        for i in 0..OFFLOAD_THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("offload-{i}"))
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })?;
        }
        Ok(Offload { jobs: tx })
    }

    /// Runs `f` on the pool; `None` when the pool is full or `timeout` ends.
    pub fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        wait_for(timeout, |reply| {
            let job: Job = Box::new(move || reply(f()));
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                self.jobs.try_send(job)
            {
                tracing::warn!("offload pool full; job refused");
            }
        })
    }
}
