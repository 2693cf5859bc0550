//! The service's one clock, handed to every part that needs the time.
//!
//! Every decision the service makes with a moment in it (a lease's expiry,
//! a rate window, a webhook retry, the moment of a call) takes `now` from a
//! [`Clock`], so the time the engine's machines see comes from one seam: the
//! system clock in production, another source where something builds the
//! service in-process.
//!
//! Not for: timeouts of IO (socket reads, waits on channels), which are
//! durations on the monotonic clock of the thread that waits.

use dialproof_engine::time::UnixMillis;
use std::sync::Arc;

/// A source of the current time, cheap to clone.
#[derive(Clone)]
pub struct Clock {
    now: Arc<dyn Fn() -> UnixMillis + Send + Sync>,
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock {
            now: Arc::new(|| {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                UnixMillis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
        }
    }

    /// A clock that reads `now` (a test's virtual time, for one).
    pub fn from_fn(now: impl Fn() -> UnixMillis + Send + Sync + 'static) -> Clock {
        Clock { now: Arc::new(now) }
    }

    pub fn now(&self) -> UnixMillis {
        (self.now)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};

    #[test]
    fn a_clock_reads_its_source() {
        let t = Arc::new(AtomicI64::new(5));
        let source = t.clone();
        let clock = Clock::from_fn(move || UnixMillis(source.load(Ordering::Relaxed)));
        assert_eq!(clock.now(), UnixMillis(5));
        t.store(9, Ordering::Relaxed);
        assert_eq!(clock.clone().now(), UnixMillis(9));
        assert!(Clock::system().now().0 > 1_700_000_000_000);
    }
}
