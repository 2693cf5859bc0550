//! When a webhook is sent again, and what counts as delivered.
//!
//! The delivery rules of the spec, as pure functions of their inputs: an
//! attempt succeeds only with a 2xx status answered within
//! [`RESPONSE_TIMEOUT_MS`]; any other status (3xx included, since redirects
//! are never followed), a network error, a refused address or a timeout is a
//! failure. After a failure the next attempt is due after the schedule's
//! delay for that attempt, varied by a jitter computed from a random value
//! the caller passes in; after the last attempt of the schedule the delivery
//! is dead.
//!
//! The default schedule ([`DELAYS_SECONDS_DEFAULT`]) is in the class of the
//! best webhook senders: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
//! 10 h, each delay varied by ±[`JITTER_PERCENT_DEFAULT`] %. That is 8
//! attempts over about 27.6 hours, so a receiver that is down for a day
//! still gets the event, and the jitter spreads a burst of failures (a
//! receiver that was down for everyone) instead of retrying it in lockstep.
//!
//! A manual retry (the operator's) is one more attempt: if it fails and the
//! automatic schedule is already used up, the delivery is dead again.
//!
//! Not for: sending, timers or storage. Time comes in as `now`, randomness
//! as a number; nothing here reads a clock.

use crate::time::UnixMillis;

/// A 2xx must arrive within this long for the attempt to count (spec:
/// "answered within 10 seconds"). The sender uses it as its total timeout.
pub const RESPONSE_TIMEOUT_MS: i64 = 10_000;
/// The delay before each attempt, in seconds, the first one counted from
/// the commit of the event (0: at once), each later one from the end of the
/// attempt before it.
pub const DELAYS_SECONDS_DEFAULT: [u32; 8] = [0, 5, 300, 1800, 7200, 18_000, 36_000, 36_000];
/// Each delay is varied by up to this many percent either way.
pub const JITTER_PERCENT_DEFAULT: u8 = 10;
/// The longest schedule accepted (a typo should not schedule a year of
/// retries).
pub const ATTEMPTS_MAX: usize = 32;
/// The longest single delay accepted: two days.
pub const DELAY_SECONDS_MAX: u32 = 2 * 24 * 3600;
/// Jitter above half the delay could reorder attempts of one delivery with
/// nothing gained.
pub const JITTER_PERCENT_MAX: u8 = 50;

/// The retry schedule: how many attempts, and the delay before each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    delays_ms: Vec<i64>,
    jitter_percent: u8,
}

/// Why a schedule was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    Empty,
    TooManyAttempts(usize),
    DelayTooLong(u32),
    JitterTooLarge(u8),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::Empty => f.write_str("the retry schedule needs at least one attempt"),
            ScheduleError::TooManyAttempts(n) => {
                write!(f, "at most {ATTEMPTS_MAX} attempts, got {n}")
            }
            ScheduleError::DelayTooLong(s) => {
                write!(f, "a delay may be at most {DELAY_SECONDS_MAX} s, got {s}")
            }
            ScheduleError::JitterTooLarge(p) => {
                write!(f, "jitter may be at most {JITTER_PERCENT_MAX} %, got {p}")
            }
        }
    }
}

impl std::error::Error for ScheduleError {}

impl Default for Schedule {
    fn default() -> Self {
        // The constants are within every limit.
        Schedule::new(&DELAYS_SECONDS_DEFAULT, JITTER_PERCENT_DEFAULT)
            .unwrap_or_else(|_| unreachable!("the default schedule is valid"))
    }
}

impl Schedule {
    /// `delays_seconds[i]` is the delay before attempt `i + 1`; its length
    /// is the number of automatic attempts.
    pub fn new(delays_seconds: &[u32], jitter_percent: u8) -> Result<Schedule, ScheduleError> {
        if delays_seconds.is_empty() {
            return Err(ScheduleError::Empty);
        }
        if delays_seconds.len() > ATTEMPTS_MAX {
            return Err(ScheduleError::TooManyAttempts(delays_seconds.len()));
        }
        if let Some(&d) = delays_seconds.iter().find(|&&d| d > DELAY_SECONDS_MAX) {
            return Err(ScheduleError::DelayTooLong(d));
        }
        if jitter_percent > JITTER_PERCENT_MAX {
            return Err(ScheduleError::JitterTooLarge(jitter_percent));
        }
        Ok(Schedule {
            delays_ms: delays_seconds
                .iter()
                .map(|&d| i64::from(d) * 1000)
                .collect(),
            jitter_percent,
        })
    }

    /// The number of automatic attempts.
    pub fn attempts(&self) -> u32 {
        // At most ATTEMPTS_MAX, checked in `new`.
        self.delays_ms.len() as u32
    }

    /// When attempt `attempt_no` (1-based) is due, if the attempt before it
    /// ended at `previous_end`. `random` is any uniformly random number; the
    /// same inputs always give the same answer. `None` past the schedule.
    pub fn due_at(
        &self,
        attempt_no: u32,
        previous_end: UnixMillis,
        random: u64,
    ) -> Option<UnixMillis> {
        let index = usize::try_from(attempt_no.checked_sub(1)?).ok()?;
        let delay = *self.delays_ms.get(index)?;
        Some(previous_end.plus_millis(delay + self.jitter(delay, random)))
    }

    /// A deterministic offset in `[-spread, +spread]`, `spread` being the
    /// jitter share of `delay_ms`.
    fn jitter(&self, delay_ms: i64, random: u64) -> i64 {
        let spread = delay_ms * i64::from(self.jitter_percent) / 100;
        if spread <= 0 {
            return 0;
        }
        // `spread` is at most half of DELAY_SECONDS_MAX in ms, far below
        // u64 range; the modulo bias over a u64 is negligible.
        let width = (2 * spread + 1) as u64;
        (random % width) as i64 - spread
    }

    /// What follows attempt `attempt_no` (1-based), which ended at `now`
    /// with `verdict`.
    pub fn after_attempt(
        &self,
        attempt_no: u32,
        verdict: Verdict,
        now: UnixMillis,
        random: u64,
    ) -> Next {
        if verdict == Verdict::Delivered {
            return Next::Delivered;
        }
        match attempt_no
            .checked_add(1)
            .and_then(|next| self.due_at(next, now, random))
        {
            Some(at) => Next::RetryAt(at),
            None => Next::Dead,
        }
    }
}

/// How one attempt ended, as the sender saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The receiver answered with `status` after `elapsed_ms`.
    Response { status: u16, elapsed_ms: i64 },
    /// No usable answer: a refused or unresolvable address, a connection
    /// or TLS failure, a timeout.
    Error,
}

/// Whether an attempt delivered the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    Failed,
}

/// The spec's rule: a 2xx within [`RESPONSE_TIMEOUT_MS`] and nothing else.
pub fn classify(outcome: &AttemptOutcome) -> Verdict {
    match outcome {
        AttemptOutcome::Response { status, elapsed_ms }
            if (200..300).contains(status) && *elapsed_ms <= RESPONSE_TIMEOUT_MS =>
        {
            Verdict::Delivered
        }
        _ => Verdict::Failed,
    }
}

/// What becomes of a delivery after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Delivered,
    RetryAt(UnixMillis),
    Dead,
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMillis = UnixMillis(1_800_000_000_000);

    /// A tiny deterministic generator so the tests replay exactly.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn classification_follows_the_spec() {
        let ok = |status, elapsed_ms| classify(&AttemptOutcome::Response { status, elapsed_ms });
        assert_eq!(ok(200, 5), Verdict::Delivered);
        assert_eq!(ok(204, 10_000), Verdict::Delivered);
        assert_eq!(ok(299, 1), Verdict::Delivered);
        // Late, redirected, refused or broken: all retried.
        assert_eq!(ok(200, 10_001), Verdict::Failed);
        assert_eq!(ok(301, 1), Verdict::Failed);
        assert_eq!(ok(302, 1), Verdict::Failed);
        assert_eq!(ok(199, 1), Verdict::Failed);
        assert_eq!(ok(400, 1), Verdict::Failed);
        assert_eq!(ok(500, 1), Verdict::Failed);
        assert_eq!(classify(&AttemptOutcome::Error), Verdict::Failed);
    }

    #[test]
    fn success_ends_the_delivery_whatever_the_attempt() {
        let s = Schedule::default();
        for n in 1..=s.attempts() + 3 {
            assert_eq!(
                s.after_attempt(n, Verdict::Delivered, T0, 7),
                Next::Delivered
            );
        }
    }

    /// The whole default schedule over virtual time: a receiver that never
    /// answers 2xx gets 8 attempts over about 27.6 hours, each within its
    /// jitter band, and then the delivery is dead.
    #[test]
    fn default_schedule_over_virtual_time() {
        let s = Schedule::default();
        assert_eq!(s.attempts(), 8);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _run in 0..200 {
            let mut now = T0;
            let mut times = vec![now];
            let mut attempt = 1;
            loop {
                // Each attempt takes between 0 and 10 s of (virtual) time.
                let took = (xorshift(&mut rng) % 10_001) as i64;
                let end = now.plus_millis(took);
                match s.after_attempt(attempt, Verdict::Failed, end, xorshift(&mut rng)) {
                    Next::RetryAt(at) => {
                        let delay = (at.0 - end.0) as f64 / 1000.0;
                        let nominal = f64::from(DELAYS_SECONDS_DEFAULT[attempt as usize]);
                        assert!(
                            (delay - nominal).abs() <= nominal * 0.10 + 0.001,
                            "attempt {} delay {delay} s vs {nominal} s",
                            attempt + 1
                        );
                        now = at;
                        times.push(now);
                        attempt += 1;
                    }
                    Next::Dead => break,
                    Next::Delivered => panic!("a failure never delivers"),
                }
            }
            assert_eq!(times.len(), 8, "8 attempts in all");
            let span_h = (times[7].0 - times[0].0) as f64 / 3_600_000.0;
            // 99 305 s nominal = 27.58 h, ±10 % jitter, plus up to 70 s of
            // attempt time.
            assert!((24.8..30.4).contains(&span_h), "span {span_h} h");
        }
    }

    #[test]
    fn jitter_is_deterministic_bounded_and_spread() {
        let s = Schedule::default();
        let a = s.due_at(3, T0, 12345);
        assert_eq!(a, s.due_at(3, T0, 12345));
        let mut seen_low = false;
        let mut seen_high = false;
        for r in 0..10_000u64 {
            let at = s
                .due_at(3, T0, r.wrapping_mul(0x2545_F491_4F6C_DD1D))
                .unwrap();
            let off = at.0 - T0.0 - 300_000;
            assert!((-30_000..=30_000).contains(&off), "{off}");
            seen_low |= off < -25_000;
            seen_high |= off > 25_000;
        }
        assert!(seen_low && seen_high, "jitter uses its whole band");
        // The first attempt is at once: no jitter on a zero delay.
        assert_eq!(s.due_at(1, T0, u64::MAX), Some(T0));
    }

    #[test]
    fn a_short_test_schedule_and_its_end() {
        let s = Schedule::new(&[0, 1, 2], 0).unwrap();
        assert_eq!(
            s.after_attempt(1, Verdict::Failed, T0, 1),
            Next::RetryAt(T0.plus_millis(1000))
        );
        assert_eq!(
            s.after_attempt(2, Verdict::Failed, T0, 1),
            Next::RetryAt(T0.plus_millis(2000))
        );
        assert_eq!(s.after_attempt(3, Verdict::Failed, T0, 1), Next::Dead);
        // A manual retry past the schedule: one attempt, then dead again.
        assert_eq!(s.after_attempt(9, Verdict::Failed, T0, 1), Next::Dead);
        assert_eq!(
            s.after_attempt(u32::MAX, Verdict::Failed, T0, 1),
            Next::Dead
        );
        assert_eq!(s.due_at(0, T0, 1), None);
    }

    #[test]
    fn limits_are_enforced() {
        assert_eq!(Schedule::new(&[], 0), Err(ScheduleError::Empty));
        assert_eq!(
            Schedule::new(&[0; ATTEMPTS_MAX + 1], 0),
            Err(ScheduleError::TooManyAttempts(ATTEMPTS_MAX + 1))
        );
        assert_eq!(
            Schedule::new(&[0, DELAY_SECONDS_MAX + 1], 0),
            Err(ScheduleError::DelayTooLong(DELAY_SECONDS_MAX + 1))
        );
        assert_eq!(
            Schedule::new(&[0], 51),
            Err(ScheduleError::JitterTooLarge(51))
        );
        assert!(Schedule::new(&[0; ATTEMPTS_MAX], JITTER_PERCENT_MAX).is_ok());
    }
}
