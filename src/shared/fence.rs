//! The fence: once set, this service may no longer act as the primary
//! (automatic failover, `crate::ha`). Creates, cancels and SIP completions
//! answer 503, `/readyz` fails, the registered lines un-register and no
//! webhook goes out any more (the new primary owns deliveries); reads
//! still answer. It is never lifted: a fenced node comes back only as a
//! new process over a restored replica.
//!
//! Set in-process, at once, by the supervisor's word or its silence
//! (`crate::runtime::ha_child`); read by the API, the SIP side and the
//! operators' listener.
//!
//! Not for: deciding when to fence (`dialproof_engine::ha`).

use dialproof_engine::time::UnixMillis;
use std::sync::atomic::{AtomicI64, Ordering};

/// `Retry-After` of a fenced service's 503, in seconds: about what an
/// automatic failover takes (a lease TTL, a restore and a start).
pub const FENCED_RETRY_AFTER_SECONDS: u64 = 10;
/// The 503's message.
pub const FENCED_MESSAGE: &str =
    "Узел больше не основной; повторите запрос к основному узлу позже.";

#[derive(Debug, Default)]
pub struct Fence {
    /// When the fence was set (Unix ms); 0 while not fenced.
    fenced_at: AtomicI64,
}

impl Fence {
    /// Sets the fence at `now`; true the first time.
    pub fn fence(&self, now: UnixMillis) -> bool {
        let at = now.0.max(1);
        self.fenced_at
            .compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced_at.load(Ordering::Acquire) != 0
    }

    pub fn fenced_at(&self) -> Option<UnixMillis> {
        match self.fenced_at.load(Ordering::Acquire) {
            0 => None,
            at => Some(UnixMillis(at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_is_set_once_and_never_lifted() {
        let f = Fence::default();
        assert!(!f.is_fenced());
        assert!(f.fence(UnixMillis(1_000)));
        assert!(!f.fence(UnixMillis(2_000)));
        assert_eq!(f.fenced_at(), Some(UnixMillis(1_000)));
        assert!(f.is_fenced());
    }
}
