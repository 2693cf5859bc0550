//! Per-key request windows: one sliding window per API key prefix, shared by
//! the three endpoints.
//!
//! The windows outlive key-cache reloads (they are keyed by prefix, not held
//! in the cache), so a limit change or a revocation elsewhere never resets a
//! key's history. Each window has its own mutex, held for the few
//! nanoseconds of a check, so keys never contend with each other.
//!
//! Not for: the window arithmetic itself (`dialproof_engine::ratelimit`).

use dialproof_engine::ratelimit::{Decision, KeyWindow};
use dialproof_engine::time::UnixMillis;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// A key's `last_used_at` is written at most this often.
const TOUCH_INTERVAL_MS: i64 = 1000;

#[derive(Default)]
pub struct RateLimiters {
    windows: RwLock<HashMap<String, Arc<Mutex<KeyWindow>>>>,
    /// Key id to the last time its `last_used_at` was written.
    touched: Mutex<HashMap<i64, i64>>,
}

impl RateLimiters {
    pub fn check(&self, prefix: &str, now: UnixMillis, limit_per_minute: u32) -> Decision {
        let existing = self.windows.read().get(prefix).cloned();
        let window = match existing {
            Some(w) => w,
            None => self
                .windows
                .write()
                .entry(prefix.to_owned())
                .or_insert_with(|| Arc::new(Mutex::new(KeyWindow::new())))
                .clone(),
        };
        let decision = window.lock().check(now, limit_per_minute);
        decision
    }

    /// Whether to write this key's `last_used_at` now: at most once per
    /// [`TOUCH_INTERVAL_MS`], so a busy key costs the writer one row update a
    /// second, not one per request.
    pub fn should_touch(&self, key_id: i64, now: UnixMillis) -> bool {
        let mut touched = self.touched.lock();
        let last = touched.entry(key_id).or_insert(i64::MIN);
        if now.0.saturating_sub(*last) >= TOUCH_INTERVAL_MS {
            *last = now.0;
            true
        } else {
            false
        }
    }
}
