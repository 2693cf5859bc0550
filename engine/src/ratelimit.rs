//! The per-key request limit: a one-minute sliding window and a temporary
//! block for keys that ignore it.
//!
//! Window (the spec's Limits section, with DRF `SimpleRateThrottle`
//! semantics): a key keeps a log of the times of its *allowed* requests in
//! the window `(now - 60 s, now]`. A request is allowed, and recorded, while
//! the log holds fewer entries than the limit (default
//! [`LIMIT_PER_MINUTE_DEFAULT`] = 120); otherwise it is refused and not
//! recorded, with `Retry-After` = whole seconds (rounded up, at least 1)
//! until the oldest recorded request leaves the window. So a 121st request
//! within 60 s is refused even if the first 120 came within 10 s, and
//! capacity then returns one request at a time as old ones age out. Every
//! allowed request consumes quota, whatever its response (4xx, 503, ...):
//! callers check once per request, before doing any work.
//!
//! Block: a key that keeps sending while refused is blocked. When its
//! refusals within the last 60 s reach [`block_after_refusals`] (the
//! per-minute limit, but at least [`BLOCK_AFTER_REFUSALS_MIN`] = 20; 120 at
//! the default limit), it is blocked for [`BLOCK_SECONDS`] = 300 s (5
//! minutes). While blocked, every request is refused with `blocked: true`
//! and `Retry-After` = the seconds left in the block; requests during a
//! block neither extend it nor count toward anything. A client that honours
//! `Retry-After` is refused about once per wait and is never blocked.
//!
//! Limits from [`LIMIT_PER_MINUTE_MIN`] to [`LIMIT_PER_MINUTE_MAX`] are
//! supported (others are clamped into that range), and a key's limit may
//! change between calls. Memory per key is bounded by its limit: the log
//! never holds more entries than the current limit (a lowered limit drops
//! the oldest entries, which decides exactly as keeping them would, see
//! [`KeyWindow::check`]), and the refusal log never more than the block
//! threshold.
//!
//! Not for: finding a key's window (the binary keeps one per key prefix),
//! reading the clock (callers pass `now`), or the 429 response itself beyond
//! its `detail` text.

use crate::time::UnixMillis;
use std::collections::VecDeque;

/// The spec's request rate per API key.
pub const LIMIT_PER_MINUTE_DEFAULT: u32 = 120;
/// The smallest per-minute limit; a configured 0 is treated as 1.
pub const LIMIT_PER_MINUTE_MIN: u32 = 1;
/// The largest per-minute limit; it bounds a key's log at 100k entries.
pub const LIMIT_PER_MINUTE_MAX: u32 = 100_000;
/// The sliding window's length.
pub const WINDOW_MILLIS: i64 = 60_000;
/// The window in whole seconds, the cap on a window refusal's Retry-After.
const WINDOW_SECONDS: u64 = 60;
/// The fewest refusals within a window that start a block, so that keys
/// with tiny limits are not blocked for a handful of early retries.
pub const BLOCK_AFTER_REFUSALS_MIN: u32 = 20;
/// How long a block lasts.
pub const BLOCK_SECONDS: u32 = 300;
const BLOCK_MILLIS: i64 = BLOCK_SECONDS as i64 * 1000;
/// Logs start this small and grow on demand, so an idle key costs little
/// even under a large limit.
const LOG_CAPACITY_INITIAL: usize = 8;

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Answer 429 with `Retry-After: retry_after_seconds` (always >= 1).
    /// `blocked` says the key is in a temporary block, not merely over the
    /// window's limit.
    Refuse {
        retry_after_seconds: u64,
        blocked: bool,
    },
}

/// Refusals within one window that start a block, for a per-minute limit.
pub fn block_after_refusals(limit_per_minute: u32) -> u32 {
    clamp_limit(limit_per_minute).max(BLOCK_AFTER_REFUSALS_MIN)
}

fn clamp_limit(limit_per_minute: u32) -> u32 {
    limit_per_minute.clamp(LIMIT_PER_MINUTE_MIN, LIMIT_PER_MINUTE_MAX)
}

/// Milliseconds to whole seconds, rounded up.
fn ceil_seconds(millis: i64) -> u64 {
    u64::try_from(millis.max(0)).unwrap_or(0).div_ceil(1000)
}

/// One key's window, refusal count and block.
#[derive(Debug, Default)]
pub struct KeyWindow {
    /// Times of allowed requests still in the window, oldest first.
    allowed: VecDeque<UnixMillis>,
    /// Times of refused (non-blocked) requests still in the window.
    refused: VecDeque<UnixMillis>,
    /// The end of the current block, if one is running.
    blocked_until: Option<UnixMillis>,
    /// The latest `now` seen. Times are clamped to never go below it, so a
    /// clock that steps back cannot reorder the logs or stretch a wait.
    latest: Option<UnixMillis>,
}

impl KeyWindow {
    pub fn new() -> Self {
        KeyWindow::default()
    }

    /// Decide one request at `now` under `limit_per_minute`, recording it if
    /// it is allowed.
    ///
    /// A limit lowered since earlier calls refuses while the log holds at
    /// least the new limit. The log then keeps only its newest `limit`
    /// entries: a request is allowed once fewer than `limit` entries remain
    /// in the window, i.e. once the entry `limit` places from the newest has
    /// left it, and that entry is exactly the oldest one kept. (Should the
    /// limit rise again within the minute, the dropped entries no longer
    /// count: a lenient error, never a strict one.)
    pub fn check(&mut self, now: UnixMillis, limit_per_minute: u32) -> Decision {
        let now = self.advance(now);
        let limit = clamp_limit(limit_per_minute) as usize;

        if let Some(until) = self.blocked_until {
            if now < until {
                return Decision::Refuse {
                    retry_after_seconds: ceil_seconds(until.0.saturating_sub(now.0))
                        .clamp(1, u64::from(BLOCK_SECONDS)),
                    blocked: true,
                };
            }
            self.blocked_until = None;
        }

        let cutoff = UnixMillis(now.0.saturating_sub(WINDOW_MILLIS));
        drop_until(&mut self.allowed, cutoff);
        drop_until(&mut self.refused, cutoff);
        while self.allowed.len() > limit {
            self.allowed.pop_front();
        }
        shrink_for(&mut self.allowed, limit);

        if self.allowed.len() < limit {
            if self.allowed.capacity() == 0 {
                self.allowed.reserve_exact(limit.min(LOG_CAPACITY_INITIAL));
            }
            self.allowed.push_back(now);
            debug_assert!(self.allowed.len() <= limit);
            return Decision::Allow;
        }

        // Full: wait for the oldest entry to leave the window. The log holds
        // `limit` >= 1 entries here, so there is a front.
        let oldest = self.allowed.front().copied().unwrap_or(now);
        let leaves_at = oldest.0.saturating_add(WINDOW_MILLIS);
        let retry_after_seconds =
            ceil_seconds(leaves_at.saturating_sub(now.0)).clamp(1, WINDOW_SECONDS);

        let threshold = block_after_refusals(limit_per_minute) as usize;
        self.refused.push_back(now);
        if self.refused.len() >= threshold {
            self.blocked_until = Some(UnixMillis(now.0.saturating_add(BLOCK_MILLIS)));
            self.refused.clear();
            shrink_for(&mut self.refused, 0);
            return Decision::Refuse {
                retry_after_seconds: u64::from(BLOCK_SECONDS),
                blocked: true,
            };
        }
        Decision::Refuse {
            retry_after_seconds,
            blocked: false,
        }
    }

    /// Decide one request at `now` under `limit` per window of
    /// `window_millis` (at least one second), recording it if allowed:
    /// the same sliding log as [`KeyWindow::check`] over another length, and
    /// no block (the dashboard's key creation, 10 per hour per user, whose
    /// refusals already wait up to an hour). Use one window per bucket with
    /// one length; `Retry-After` is the wait for the oldest entry to leave.
    /// ([`KeyWindow::is_idle`] judges by the one-minute window, so a caller
    /// that prunes idle windows may forget such a log early: lenient, never
    /// strict.)
    pub fn check_window(&mut self, now: UnixMillis, limit: u32, window_millis: i64) -> Decision {
        let now = self.advance(now);
        let window = window_millis.max(1000);
        let limit = clamp_limit(limit) as usize;
        drop_until(&mut self.allowed, UnixMillis(now.0.saturating_sub(window)));
        while self.allowed.len() > limit {
            self.allowed.pop_front();
        }
        if self.allowed.len() < limit {
            self.allowed.push_back(now);
            return Decision::Allow;
        }
        // Full, so `limit` >= 1 entries are there.
        let oldest = self.allowed.front().copied().unwrap_or(now);
        let wait = oldest.0.saturating_add(window).saturating_sub(now.0);
        Decision::Refuse {
            retry_after_seconds: ceil_seconds(wait).clamp(1, ceil_seconds(window)),
            blocked: false,
        }
    }

    /// Whether the window holds nothing that affects future decisions at
    /// `now` (no request in the window, no block): the caller may drop it
    /// and start afresh later with the same outcome.
    pub fn is_idle(&self, now: UnixMillis) -> bool {
        let now = self.latest.map_or(now, |latest| latest.max(now));
        let cutoff = now.0.saturating_sub(WINDOW_MILLIS);
        let in_window = |log: &VecDeque<UnixMillis>| log.back().is_some_and(|t| t.0 > cutoff);
        let blocked = self.blocked_until.is_some_and(|until| now < until);
        !blocked && !in_window(&self.allowed) && !in_window(&self.refused)
    }

    fn advance(&mut self, now: UnixMillis) -> UnixMillis {
        let now = self.latest.map_or(now, |latest| latest.max(now));
        self.latest = Some(now);
        now
    }
}

/// Drop entries at or before `cutoff` (the window is open on the left).
fn drop_until(log: &mut VecDeque<UnixMillis>, cutoff: UnixMillis) {
    while log.front().is_some_and(|&t| t <= cutoff) {
        log.pop_front();
    }
}

/// Give memory back after a limit was lowered a lot.
fn shrink_for(log: &mut VecDeque<UnixMillis>, limit: usize) {
    let keep = limit.max(LOG_CAPACITY_INITIAL);
    if log.capacity() > keep.saturating_mul(2) {
        log.shrink_to(keep);
    }
}

/// DRF's throttle text: `Запрос был проигнорирован. Expected available in N seconds.`
///
/// DRF's Russian catalogue translates the first sentence only; the second
/// stays English, singular for exactly 1 second.
pub fn throttled_detail(retry_after_seconds: u64) -> String {
    let unit = if retry_after_seconds == 1 {
        "second"
    } else {
        "seconds"
    };
    format!("Запрос был проигнорирован. Expected available in {retry_after_seconds} {unit}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hourly_window_allows_its_limit_then_waits_for_the_oldest() {
        let hour = 3_600_000;
        let mut w = KeyWindow::new();
        for i in 0..10 {
            assert_eq!(
                w.check_window(UnixMillis(i * 1000), 10, hour),
                Decision::Allow
            );
        }
        assert_eq!(
            w.check_window(UnixMillis(60_000), 10, hour),
            Decision::Refuse {
                retry_after_seconds: 3540,
                blocked: false
            }
        );
        assert_eq!(w.check_window(UnixMillis(hour), 10, hour), Decision::Allow);
        assert!(matches!(
            w.check_window(UnixMillis(hour + 1), 10, hour),
            Decision::Refuse { .. }
        ));
    }

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    fn at(millis: i64) -> UnixMillis {
        UnixMillis(T0.0 + millis)
    }

    fn refuse(retry_after_seconds: u64) -> Decision {
        Decision::Refuse {
            retry_after_seconds,
            blocked: false,
        }
    }

    fn blocked(retry_after_seconds: u64) -> Decision {
        Decision::Refuse {
            retry_after_seconds,
            blocked: true,
        }
    }

    /// 120 requests spread over the first 10 s (one every 84 ms).
    fn burst_of_120(w: &mut KeyWindow) {
        for i in 0..120 {
            assert_eq!(w.check(at(i * 84), 120), Decision::Allow, "request {i}");
        }
    }

    #[test]
    fn the_121st_request_within_a_minute_is_refused_even_after_a_10s_burst() {
        let mut w = KeyWindow::new();
        burst_of_120(&mut w);
        // At 10 s the oldest (0 s) leaves the window at 60 s: 50 s to wait.
        assert_eq!(w.check(at(10_000), 120), refuse(50));
        // Rounded up: at 10.001 s there are 49.999 s left, so 50.
        assert_eq!(w.check(at(10_001), 120), refuse(50));
        assert_eq!(w.check(at(10_999), 120), refuse(50));
        assert_eq!(w.check(at(11_000), 120), refuse(49));
        // Never below 1 while refused.
        assert_eq!(w.check(at(59_999), 120), refuse(1));
    }

    #[test]
    fn capacity_returns_one_request_at_a_time_and_refusals_are_not_recorded() {
        let mut w = KeyWindow::new();
        burst_of_120(&mut w);
        for s in 10..20 {
            assert!(matches!(
                w.check(at(s * 1000), 120),
                Decision::Refuse { blocked: false, .. }
            ));
        }
        // The window is (now - 60 s, now]: the 0 s entry is out at exactly 60 s.
        assert_eq!(w.check(at(59_999), 120), refuse(1));
        assert_eq!(w.check(at(60_000), 120), Decision::Allow);
        // That freed one slot only; the 84 ms entry leaves at 60.084 s.
        assert_eq!(w.check(at(60_000), 120), refuse(1));
        assert_eq!(w.check(at(60_083), 120), refuse(1));
        assert_eq!(w.check(at(60_084), 120), Decision::Allow);
        assert_eq!(w.check(at(60_100), 120), refuse(1)); // 168 ms entry: 0.068 s left
        assert_eq!(w.check(at(60_168), 120), Decision::Allow);
        // Had refusals been recorded, the window would still be full long
        // after the burst; instead the whole burst has aged out by 70 s.
        let mut allowed = 0;
        for i in 0..200 {
            if w.check(at(70_000 + i), 120) == Decision::Allow {
                allowed += 1;
            }
        }
        // 3 requests from 60-60.168 s are still in the window.
        assert_eq!(allowed, 117);
    }

    #[test]
    fn steady_client_at_the_limit_is_never_refused() {
        let mut w = KeyWindow::new();
        // 2 per second is exactly 120 per minute.
        for i in 0..10_000 {
            assert_eq!(w.check(at(i * 500), 120), Decision::Allow, "request {i}");
        }
        assert!(w.allowed.len() <= 120);
    }

    #[test]
    fn a_key_ignoring_retry_after_is_blocked_for_five_minutes() {
        let mut w = KeyWindow::new();
        burst_of_120(&mut w);
        assert_eq!(block_after_refusals(120), 120);
        // 119 refusals, one every 100 ms from 10 s: still only refused.
        for i in 0..119 {
            let d = w.check(at(10_000 + i * 100), 120);
            assert!(
                matches!(d, Decision::Refuse { blocked: false, .. }),
                "{i}: {d:?}"
            );
        }
        // The 120th refusal within the window starts the block.
        let start = 10_000 + 119 * 100;
        assert_eq!(w.check(at(start), 120), blocked(300));
        // During the block: seconds left, rounded up; not extended.
        assert_eq!(w.check(at(start + 1), 120), blocked(300));
        assert_eq!(w.check(at(start + 1000), 120), blocked(299));
        for i in 0..1000 {
            w.check(at(start + 2000 + i), 120);
        }
        assert_eq!(w.check(at(start + 299_000), 120), blocked(1));
        assert_eq!(w.check(at(start + 299_999), 120), blocked(1));
        // The block ends exactly 300 s later with a fresh window.
        for i in 0..120 {
            assert_eq!(
                w.check(at(start + 300_000 + i), 120),
                Decision::Allow,
                "{i}"
            );
        }
        assert_eq!(w.check(at(start + 300_120), 120), refuse(60));
    }

    #[test]
    fn refusals_older_than_a_minute_do_not_count_toward_a_block() {
        let mut w = KeyWindow::new();
        // Limit 1: threshold is the minimum, 20 refusals in a window.
        assert_eq!(block_after_refusals(1), BLOCK_AFTER_REFUSALS_MIN);
        let mut t = 0;
        for _ in 0..50 {
            // One allowed, then 19 refusals, then quiet until it frees up.
            assert_eq!(w.check(at(t), 1), Decision::Allow);
            for i in 1..=19 {
                assert!(matches!(
                    w.check(at(t + i), 1),
                    Decision::Refuse { blocked: false, .. }
                ));
            }
            t += 61_000;
        }
        // The 20th refusal inside one window blocks.
        assert_eq!(w.check(at(t), 1), Decision::Allow);
        for i in 1..=19 {
            w.check(at(t + i), 1);
        }
        assert_eq!(w.check(at(t + 20), 1), blocked(300));
    }

    #[test]
    fn a_lowered_limit_refuses_until_the_log_drops_below_it() {
        let mut w = KeyWindow::new();
        for i in 0..100 {
            assert_eq!(w.check(at(i * 100), 1000), Decision::Allow);
        }
        // Now at 10 s the limit drops to 10: 100 entries in the window.
        // A slot frees when the 10th-newest (9.0 s) leaves, at 69.0 s.
        assert_eq!(w.check(at(10_000), 10), refuse(59));
        assert!(w.allowed.len() <= 10);
        assert_eq!(w.check(at(68_999), 10), refuse(1));
        assert_eq!(w.check(at(69_000), 10), Decision::Allow);
        assert_eq!(w.check(at(69_000), 10), refuse(1));
        // Raised again: room at once.
        assert_eq!(w.check(at(69_001), 20), Decision::Allow);
    }

    #[test]
    fn a_raised_limit_allows_more_immediately() {
        let mut w = KeyWindow::new();
        for i in 0..5 {
            assert_eq!(w.check(at(i), 5), Decision::Allow);
        }
        assert_eq!(w.check(at(5), 5), refuse(60));
        assert_eq!(w.check(at(6), 6), Decision::Allow);
    }

    #[test]
    fn limits_are_clamped_and_extremes_work() {
        let mut w = KeyWindow::new();
        // 0 acts as 1.
        assert_eq!(w.check(at(0), 0), Decision::Allow);
        assert_eq!(w.check(at(1), 0), refuse(60));
        let mut big = KeyWindow::new();
        let max = LIMIT_PER_MINUTE_MAX as i64;
        for i in 0..max {
            assert_eq!(big.check(at(i / 2), u32::MAX), Decision::Allow);
        }
        // The oldest entry (0 s) leaves at 60 s; it is 50 s now.
        assert_eq!(big.check(at(max / 2), u32::MAX), refuse(10));
        assert_eq!(big.allowed.len(), LIMIT_PER_MINUTE_MAX as usize);
        // Memory follows the limit down.
        assert_eq!(big.check(at(max / 2 + 1), 10), refuse(60));
        assert!(big.allowed.capacity() <= 2 * LOG_CAPACITY_INITIAL.max(10));
    }

    #[test]
    fn a_clock_stepping_back_never_stretches_the_wait() {
        let mut w = KeyWindow::new();
        assert_eq!(w.check(at(100_000), 1), Decision::Allow);
        // The clock jumps back 10 minutes: treated as "no time passed".
        assert_eq!(w.check(at(-500_000), 1), refuse(60));
        assert_eq!(w.check(at(160_000), 1), Decision::Allow);
    }

    #[test]
    fn idle_windows_can_be_dropped() {
        let mut w = KeyWindow::new();
        assert!(w.is_idle(at(0)));
        w.check(at(0), 1);
        assert!(!w.is_idle(at(59_999)));
        assert!(w.is_idle(at(60_000)));
        for i in 1..=20 {
            w.check(at(i), 1);
        }
        assert!(!w.is_idle(at(200_000))); // blocked until 300.02 s
        assert!(w.is_idle(at(300_020)));
    }

    #[test]
    fn throttled_detail_is_drfs_text() {
        assert_eq!(
            throttled_detail(37),
            "Запрос был проигнорирован. Expected available in 37 seconds."
        );
        assert_eq!(
            throttled_detail(1),
            "Запрос был проигнорирован. Expected available in 1 second."
        );
        assert_eq!(
            throttled_detail(300),
            "Запрос был проигнорирован. Expected available in 300 seconds."
        );
    }
}
