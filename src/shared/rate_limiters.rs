//! Per-caller request windows: one sliding window per API key prefix (shared
//! by every verification endpoint, test mode's simulated call included), per
//! dashboard user, and per address for logins.
//!
//! The windows outlive key-cache reloads (they are keyed by prefix, not held
//! in the cache), so a limit change or a revocation elsewhere never resets a
//! key's history. Each window has its own mutex, held for the few
//! nanoseconds of a check, so callers never contend with each other; the map
//! itself is only write-locked to add a caller or to prune idle ones.
//!
//! Not for: the window arithmetic itself (`dialproof_engine::ratelimit`).

use dialproof_engine::ratelimit::{Decision, KeyWindow};
use dialproof_engine::time::UnixMillis;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A key's use is noted for its `last_used_at` at most this often (the
/// note is written later, with all keys', by `crate::shared::key_uses`).
const TOUCH_INTERVAL_MS: i64 = 1000;
/// Callers tracked before idle windows are pruned. Login windows are keyed
/// by client address, which outsiders choose, so the map must be bounded.
pub const WINDOWS_MAX: usize = 100_000;

#[derive(Default)]
struct Caller {
    window: Mutex<KeyWindow>,
    /// When this caller's use was last noted (keys only).
    last_touch_ms: AtomicI64,
}

#[derive(Default)]
pub struct RateLimiters {
    callers: RwLock<HashMap<String, Arc<Caller>>>,
}

impl RateLimiters {
    fn caller(&self, bucket: &str, now: UnixMillis) -> Arc<Caller> {
        if let Some(c) = self.callers.read().get(bucket) {
            return c.clone();
        }
        let mut callers = self.callers.write();
        if callers.len() >= WINDOWS_MAX && !callers.contains_key(bucket) {
            // Forgetting an idle window changes no future decision.
            callers.retain(|_, c| !c.window.lock().is_idle(now));
        }
        callers
            .entry(bucket.to_owned())
            .or_insert_with(|| {
                Arc::new(Caller {
                    last_touch_ms: AtomicI64::new(i64::MIN),
                    ..Caller::default()
                })
            })
            .clone()
    }

    pub fn check(&self, bucket: &str, now: UnixMillis, limit_per_minute: u32) -> Decision {
        let caller = self.caller(bucket, now);
        let decision = caller.window.lock().check(now, limit_per_minute);
        decision
    }

    /// Like [`RateLimiters::check`] over a window of `window_millis` and
    /// without a block (see `KeyWindow::check_window`). A bucket must always
    /// be checked with the same window, so give it a name of its own.
    pub fn check_window(
        &self,
        bucket: &str,
        now: UnixMillis,
        limit: u32,
        window_millis: i64,
    ) -> Decision {
        let caller = self.caller(bucket, now);
        let decision = caller.window.lock().check_window(now, limit, window_millis);
        decision
    }

    /// Whether to note this key's use now: at most once per
    /// [`TOUCH_INTERVAL_MS`], so a busy key takes the notes' lock once a
    /// second, not on every request.
    pub fn should_touch(&self, bucket: &str, now: UnixMillis) -> bool {
        let caller = self.caller(bucket, now);
        let last = caller.last_touch_ms.load(Ordering::Relaxed);
        now.0.saturating_sub(last) >= TOUCH_INTERVAL_MS
            && caller
                .last_touch_ms
                .compare_exchange(last, now.0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touches_at_most_once_a_second_per_caller() {
        let l = RateLimiters::default();
        assert!(l.should_touch("AAAAAAAA", UnixMillis(10_000)));
        assert!(!l.should_touch("AAAAAAAA", UnixMillis(10_999)));
        assert!(l.should_touch("BBBBBBBB", UnixMillis(10_999)));
        assert!(l.should_touch("AAAAAAAA", UnixMillis(11_000)));
    }

    #[test]
    fn idle_windows_are_pruned_when_the_map_is_full() {
        let l = RateLimiters::default();
        let t0 = UnixMillis(1_000_000);
        for i in 0..WINDOWS_MAX {
            l.check(&format!("login:{i}"), t0, 10);
        }
        // A minute later every window is idle: a new caller prunes them.
        let later = t0.plus_seconds(61);
        l.check("login:new", later, 10);
        assert_eq!(l.callers.read().len(), 1);
        // A caller still in its window survives pruning and keeps its count.
        for _ in 0..3 {
            l.check("busy", later, 3);
        }
        assert!(matches!(l.check("busy", later, 3), Decision::Refuse { .. }));
    }
}
