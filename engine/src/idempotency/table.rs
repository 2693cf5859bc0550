//! The idempotency decisions for creates, in memory: which key is being
//! created right now, which was created and with what answer, and what a
//! request carrying a key gets.
//!
//! A create with a key [`Table::begin`]s: the first one claims the key
//! (`Claimed`) and runs; until its verification commits, a retry gets
//! `InFlight` (the 409 `conflict` with `Retry-After: 1`), or `Mismatch` if
//! its body differs. Once the commit consumer reports the commit
//! ([`Table::record`]), a retry with the same fingerprint gets `Replay` with
//! the stored 201 body and one with another body `Mismatch` (the 409
//! `idempotency_conflict`). A claim whose create took no number, failed or
//! was refused is [`Table::abandon`]ed, so the next retry runs again.
//!
//! The table is a cache of what is durable, not the truth: answers older
//! than the retention, or beyond [`Limits`] (the oldest go first), leave
//! memory, and a key that this table does not know may still be stored
//! (created before a restart, or evicted). So a claim is only "not known
//! here"; the write that stores the verification checks the stored keys in
//! its own transaction, and the binary records what it finds there. What
//! keeps a second verification out is the database's key, in the same
//! transaction as the row; this table only makes the common retries cheap
//! and keeps concurrent retries of one key from leasing a second number.
//!
//! Not for: parsing the header ([`super::key`]), the fingerprint
//! ([`super::fingerprint`]), or anything durable (storage's
//! `idempotency_keys` table).

use super::fingerprint::Fingerprint;
use super::key::IdempotencyKey;
use crate::time::UnixMillis;
use crate::CompanyId;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The default retention of a key (the `[api] idempotency_key_hours`
/// setting), and its bounds.
pub const RETENTION_HOURS_DEFAULT: u32 = 24;
pub const RETENTION_HOURS_MIN: u32 = 1;
pub const RETENTION_HOURS_MAX: u32 = 168;

/// What memory holds of stored answers. Retries come seconds to minutes
/// after the create they repeat, so the newest answers are the ones worth
/// keeping; older ones are read from the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Answers (created verifications with a key) held at most.
    pub answers_max: usize,
    /// Bytes of answer bodies held at most (a body is at most about 4 KiB:
    /// the create's fields are bounded).
    pub answer_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            answers_max: 65_536,
            answer_bytes_max: 32 * 1024 * 1024,
        }
    }
}

/// A stored 201: the request's fingerprint, the exact body, and when the
/// verification was created (the retention runs from then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub fingerprint: Fingerprint,
    /// The verification's id (for the replay's `Location`).
    pub verification_id: Arc<str>,
    pub body: Arc<str>,
    pub created_at: UnixMillis,
}

/// What a create carrying a key should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Begin {
    /// Not known here: the caller holds the claim and runs the create; it
    /// must end with [`Table::record`] (by the commit consumer) or
    /// [`Table::abandon`].
    Claimed,
    /// Same key and body within the retention: answer this 201 again.
    Replay(Answer),
    /// Same key, another body: the 409 `idempotency_conflict`.
    Mismatch,
    /// Same key and body, its first request still between its lease and
    /// its commit: the 409 `conflict`, to retry in a second.
    InFlight,
}

#[derive(Clone, Debug)]
enum Entry {
    InFlight(Fingerprint),
    Done(Answer),
}

/// Whose keys a key is unique among: one company's, in one mode (a test
/// key's create never replays a live one's answer, nor the reverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Space {
    pub company: CompanyId,
    pub livemode: bool,
}

/// A bare company is its live space.
impl From<CompanyId> for Space {
    fn from(company: CompanyId) -> Space {
        Space {
            company,
            livemode: true,
        }
    }
}

type Scope = (Space, IdempotencyKey);

fn retention_ms(hours: u32) -> i64 {
    i64::from(hours.clamp(RETENTION_HOURS_MIN, RETENTION_HOURS_MAX)) * 3_600_000
}

/// See the module docs.
#[derive(Debug)]
pub struct Table {
    retention_ms: i64,
    limits: Limits,
    entries: HashMap<Scope, Entry>,
    /// Answers in the order they were recorded, for eviction. An item whose
    /// entry changed since (replaced, expired and claimed again) is stale
    /// and skipped when it comes up.
    order: VecDeque<(Scope, UnixMillis)>,
    answer_bytes: usize,
    in_flight: usize,
}

impl Table {
    pub fn new(retention_hours: u32, limits: Limits) -> Table {
        Table {
            retention_ms: retention_ms(retention_hours),
            limits,
            entries: HashMap::new(),
            order: VecDeque::new(),
            answer_bytes: 0,
            in_flight: 0,
        }
    }

    /// A new retention (a configuration reload): held answers are judged
    /// by it from now on.
    pub fn set_retention_hours(&mut self, hours: u32) {
        self.retention_ms = retention_ms(hours);
    }

    /// The moment before which a key created is no longer honoured: keys
    /// created at or before it are treated as unknown and may be purged.
    pub fn expired_before(&self, now: UnixMillis) -> UnixMillis {
        UnixMillis(now.0 - self.retention_ms)
    }

    fn live(&self, answer: &Answer, now: UnixMillis) -> bool {
        answer.created_at > self.expired_before(now)
    }

    /// What a request with `key` and `fingerprint` for `company` gets at
    /// `now`; see [`Begin`].
    pub fn begin(
        &mut self,
        company: impl Into<Space>,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
        now: UnixMillis,
    ) -> Begin {
        let scope = (company.into(), key.clone());
        let decided = match self.entries.get(&scope) {
            Some(Entry::InFlight(f)) if *f == fingerprint => Some(Begin::InFlight),
            Some(Entry::InFlight(_)) => Some(Begin::Mismatch),
            Some(Entry::Done(a)) if !self.live(a, now) => None,
            Some(Entry::Done(a)) if a.fingerprint == fingerprint => Some(Begin::Replay(a.clone())),
            Some(Entry::Done(_)) => Some(Begin::Mismatch),
            None => None,
        };
        if let Some(decided) = decided {
            return decided;
        }
        // Only an absent or expired entry gets here.
        if let Some(Entry::Done(old)) = self.entries.insert(scope, Entry::InFlight(fingerprint)) {
            self.answer_bytes -= old.body.len();
        }
        self.in_flight += 1;
        Begin::Claimed
    }

    /// A key's create is stored (reported by the commit consumer), or a
    /// stored one was read back: its answer replaces whatever is here.
    pub fn record(&mut self, company: impl Into<Space>, key: &IdempotencyKey, answer: Answer) {
        let at = answer.created_at;
        self.answer_bytes += answer.body.len();
        let scope = (company.into(), key.clone());
        match self.entries.insert(scope.clone(), Entry::Done(answer)) {
            Some(Entry::Done(old)) => self.answer_bytes -= old.body.len(),
            Some(Entry::InFlight(_)) => self.in_flight -= 1,
            None => {}
        }
        self.order.push_back((scope, at));
        self.compact_order();
        while self.answers() > self.limits.answers_max
            || self.answer_bytes > self.limits.answer_bytes_max
        {
            if !self.evict_oldest() {
                break;
            }
        }
    }

    /// A claim's create ended without a stored verification: the key is
    /// free again. An answer already recorded for it stays.
    pub fn abandon(&mut self, company: impl Into<Space>, key: &IdempotencyKey) {
        let scope = (company.into(), key.clone());
        if matches!(self.entries.get(&scope), Some(Entry::InFlight(_))) {
            self.entries.remove(&scope);
            self.in_flight -= 1;
        }
    }

    /// Drops the answers that the retention has ended. Called from the
    /// service's periodic work; `begin` never honours one anyway.
    pub fn expire(&mut self, now: UnixMillis) {
        let cutoff = self.expired_before(now);
        while let Some((_, at)) = self.order.front() {
            if *at > cutoff {
                break;
            }
            self.evict_oldest();
        }
    }

    fn is_current(&self, scope: &Scope, at: UnixMillis) -> bool {
        matches!(self.entries.get(scope), Some(Entry::Done(a)) if a.created_at == at)
    }

    /// Keeps the eviction order from filling with stale items when keys
    /// are recorded again and again (it never holds more than twice the
    /// answers it may keep).
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.limits.answers_max.max(1) {
            let order = std::mem::take(&mut self.order);
            self.order = order
                .into_iter()
                .filter(|(scope, at)| self.is_current(scope, *at))
                .collect();
        }
    }

    /// Removes the oldest recorded answer if it is still current; `false`
    /// when there is none left.
    fn evict_oldest(&mut self) -> bool {
        while let Some((scope, at)) = self.order.pop_front() {
            if self.is_current(&scope, at) {
                if let Some(Entry::Done(a)) = self.entries.remove(&scope) {
                    self.answer_bytes -= a.body.len();
                }
                return true;
            }
        }
        false
    }

    /// Answers held (for the metrics).
    pub fn answers(&self) -> usize {
        self.entries.len() - self.in_flight
    }

    /// Claims whose create has not ended yet (for the metrics).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Bytes of answer bodies held (for the metrics).
    pub fn answer_bytes(&self) -> usize {
        self.answer_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    fn key(s: &str) -> IdempotencyKey {
        super::super::key::parse_value(s).unwrap()
    }

    fn fp(n: u8) -> Fingerprint {
        Fingerprint([n; 32])
    }

    fn answer(n: u8, body: &str, at: i64) -> Answer {
        Answer {
            fingerprint: fp(n),
            verification_id: Arc::from(format!("ver_{n}")),
            body: Arc::from(body),
            created_at: UnixMillis(at),
        }
    }

    /// The body a `Replay` carries, or a panic naming what came instead.
    fn replayed(b: Begin) -> String {
        match b {
            Begin::Replay(a) => a.body.to_string(),
            other => panic!("expected a replay, got {other:?}"),
        }
    }

    fn table() -> Table {
        Table::new(24, Limits::default())
    }

    #[test]
    fn first_claims_then_retries_wait_then_replay_or_conflict() {
        let mut t = table();
        let k = key("k1");
        assert_eq!(t.begin(1, &k, fp(1), UnixMillis(0)), Begin::Claimed);
        assert_eq!(t.in_flight(), 1);
        assert_eq!(t.begin(1, &k, fp(1), UnixMillis(5)), Begin::InFlight);
        assert_eq!(t.begin(1, &k, fp(2), UnixMillis(5)), Begin::Mismatch);
        t.record(1, &k, answer(1, "{\"a\":1}", 0));
        assert_eq!((t.in_flight(), t.answers()), (0, 1));
        assert_eq!(replayed(t.begin(1, &k, fp(1), UnixMillis(10))), "{\"a\":1}");
        assert_eq!(t.begin(1, &k, fp(2), UnixMillis(10)), Begin::Mismatch);
    }

    #[test]
    fn keys_are_scoped_per_company() {
        let mut t = table();
        let k = key("shared");
        assert_eq!(t.begin(1, &k, fp(1), UnixMillis(0)), Begin::Claimed);
        assert_eq!(t.begin(2, &k, fp(1), UnixMillis(0)), Begin::Claimed);
        t.record(1, &k, answer(1, "one", 0));
        assert_eq!(t.begin(2, &k, fp(1), UnixMillis(1)), Begin::InFlight);
        assert_eq!(replayed(t.begin(1, &k, fp(1), UnixMillis(1))), "one");
    }

    #[test]
    fn an_abandoned_claim_frees_the_key_but_never_drops_an_answer() {
        let mut t = table();
        let k = key("k");
        assert_eq!(t.begin(1, &k, fp(1), UnixMillis(0)), Begin::Claimed);
        t.abandon(1, &k);
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.begin(1, &k, fp(2), UnixMillis(1)), Begin::Claimed);
        // The commit consumer may record before the requester's reply
        // drops its claim: the answer must survive that abandon.
        t.record(1, &k, answer(2, "body", 1));
        t.abandon(1, &k);
        assert_eq!(replayed(t.begin(1, &k, fp(2), UnixMillis(2))), "body");
    }

    #[test]
    fn a_commit_recorded_after_its_claim_was_abandoned_still_counts() {
        // A timed-out create whose write still commits: the claim went, the
        // consumer's record comes later and must be honoured.
        let mut t = table();
        let k = key("late");
        assert_eq!(t.begin(1, &k, fp(1), UnixMillis(0)), Begin::Claimed);
        t.abandon(1, &k);
        t.record(1, &k, answer(1, "late body", 0));
        assert_eq!(replayed(t.begin(1, &k, fp(1), UnixMillis(1))), "late body");
    }

    #[test]
    fn retention_ends_at_its_edge_on_the_clock_given() {
        let mut t = table();
        let k = key("r");
        t.begin(1, &k, fp(1), UnixMillis(0));
        t.record(1, &k, answer(1, "b", 0));
        let edge = 24 * HOUR;
        assert_eq!(replayed(t.begin(1, &k, fp(1), UnixMillis(edge - 1))), "b");
        // At the edge the key is unknown again: a new create may claim it,
        // even with another body.
        assert_eq!(t.begin(1, &k, fp(9), UnixMillis(edge)), Begin::Claimed);
        assert_eq!(t.answer_bytes(), 0);
    }

    #[test]
    fn retention_hours_are_clamped_into_their_bounds() {
        let t = Table::new(0, Limits::default());
        assert_eq!(
            t.expired_before(UnixMillis(10 * HOUR)),
            UnixMillis(9 * HOUR)
        );
        let t = Table::new(10_000, Limits::default());
        assert_eq!(
            t.expired_before(UnixMillis(200 * HOUR)),
            UnixMillis(32 * HOUR)
        );
    }

    #[test]
    fn expire_drops_old_answers_from_memory() {
        let mut t = table();
        for i in 0..10u8 {
            let k = key(&format!("k{i}"));
            t.begin(1, &k, fp(i), UnixMillis(i64::from(i) * HOUR));
            t.record(1, &k, answer(i, "xx", i64::from(i) * HOUR));
        }
        t.expire(UnixMillis(24 * HOUR + 4 * HOUR));
        // k0..=k4 are at or before the cutoff (4 h).
        assert_eq!(t.answers(), 5);
        assert_eq!(t.answer_bytes(), 10);
    }

    #[test]
    fn bounds_evict_the_oldest_answers_first() {
        let limits = Limits {
            answers_max: 3,
            answer_bytes_max: 1_000,
        };
        let mut t = Table::new(24, limits);
        for i in 0..5u8 {
            let k = key(&format!("k{i}"));
            t.begin(1, &k, fp(i), UnixMillis(i64::from(i)));
            t.record(1, &k, answer(i, "body", i64::from(i)));
        }
        assert_eq!(t.answers(), 3);
        assert_eq!(t.begin(1, &key("k0"), fp(0), UnixMillis(9)), Begin::Claimed);
        assert_eq!(
            replayed(t.begin(1, &key("k4"), fp(4), UnixMillis(9))),
            "body"
        );
        let limits = Limits {
            answers_max: 100,
            answer_bytes_max: 10,
        };
        let mut t = Table::new(24, limits);
        for i in 0..5u8 {
            let k = key(&format!("b{i}"));
            t.record(1, &k, answer(i, "1234", i64::from(i)));
        }
        assert!(t.answer_bytes() <= 10, "{}", t.answer_bytes());
        assert_eq!(t.answers(), 2);
    }

    #[test]
    fn recording_one_key_again_and_again_keeps_the_order_bounded() {
        let limits = Limits {
            answers_max: 4,
            answer_bytes_max: 1_000,
        };
        let mut t = Table::new(24, limits);
        let k = key("same");
        for i in 0..100 {
            t.record(1, &k, answer(1, "b", i));
        }
        assert!(t.order.len() <= 8, "{}", t.order.len());
        assert_eq!(t.answers(), 1);
        assert_eq!(t.answer_bytes(), 1);
    }
}
