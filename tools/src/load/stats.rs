//! What one event-loop thread measured (counts, statuses, failures and
//! latency histograms per operation), merged across threads at the end;
//! and the live counters the progress line reads every second.
//!
//! Latencies are microseconds in hdrhistogram (1 µs to 60 s, three
//! significant digits). An operation's histogram holds its successful
//! answers; `all_responses` holds every HTTP answer whatever its status
//! (what wrk reports), so the two tools can be compared.
//!
//! Not for: presenting the figures (see [`super::report`]).

use super::conn::Failure;
use super::ops::Op;
use crate::sip_caller::new_histogram;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One operation's figures.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Requests written to a connection.
    pub sent: u64,
    /// Answers with the operation's success status.
    pub ok: u64,
    /// Every HTTP status answered, successes included.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that got no HTTP answer, by kind.
    pub failures: BTreeMap<Failure, u64>,
    /// Successful creates whose body did not have the Verification fields.
    pub bad_bodies: u64,
    /// Latency of successful answers, microseconds.
    pub latency_us: Histogram<u64>,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            sent: 0,
            ok: 0,
            statuses: BTreeMap::new(),
            failures: BTreeMap::new(),
            bad_bodies: 0,
            latency_us: new_histogram(),
        }
    }

    /// Answers that were not successes (a create whose body was bad
    /// included) plus requests without an answer.
    pub fn errors(&self) -> u64 {
        let answered: u64 = self.statuses.values().sum();
        answered - self.ok.min(answered) + self.failures.values().sum::<u64>()
    }

    fn merge(&mut self, other: &OpStats) {
        self.sent += other.sent;
        self.ok += other.ok;
        self.bad_bodies += other.bad_bodies;
        for (k, v) in &other.statuses {
            *self.statuses.entry(*k).or_default() += v;
        }
        for (k, v) in &other.failures {
            *self.failures.entry(*k).or_default() += v;
        }
        let _ = self.latency_us.add(&other.latency_us);
    }
}

/// One thread's figures (or all threads' after [`Stats::merge`]).
#[derive(Debug, Clone)]
pub struct Stats {
    pub ops: [OpStats; 5],
    /// Every HTTP answer's latency, microseconds.
    pub all_responses_us: Histogram<u64>,
    /// Reads or cancels sent as creates for want of ids.
    pub substituted: u64,
    /// Open loop: requests due by the schedule but never sent (no
    /// connection was free before the end).
    pub unsent_at_end: u64,
    /// Created verifications not called because the call queue was full.
    pub calls_not_queued: u64,
    /// Open loop: how late each request left after it was due (waiting
    /// for a free connection or for this thread; included in every
    /// latency), microseconds.
    pub send_lag_us: Histogram<u64>,
    /// Connections that failed with no request on them (while opening
    /// before the start, or reopening an idle one), by kind.
    pub idle_failures: BTreeMap<Failure, u64>,
    /// `--prefill`: creates answered 201 before the timed run.
    pub prefill_created: u64,
    /// `--prefill`: creates sent before the timed run that failed, or
    /// were never sent within the prefill's time bound.
    pub prefill_failed: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            ops: [
                OpStats::new(),
                OpStats::new(),
                OpStats::new(),
                OpStats::new(),
                OpStats::new(),
            ],
            all_responses_us: new_histogram(),
            substituted: 0,
            unsent_at_end: 0,
            calls_not_queued: 0,
            idle_failures: BTreeMap::new(),
            send_lag_us: new_histogram(),
            prefill_created: 0,
            prefill_failed: 0,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

impl Stats {
    pub fn op(&mut self, op: Op) -> &mut OpStats {
        &mut self.ops[op.index()]
    }

    /// An HTTP answer to `op` after `latency`; `ok` when it is a success.
    pub fn answered(&mut self, op: Op, status: u16, ok: bool, latency: Duration) {
        let us = micros(latency);
        let _ = self.all_responses_us.record(us);
        let s = self.op(op);
        *s.statuses.entry(status).or_default() += 1;
        if ok {
            s.ok += 1;
            let _ = s.latency_us.record(us);
        }
    }

    pub fn lag(&mut self, lag: Duration) {
        let _ = self.send_lag_us.record(micros(lag));
    }

    pub fn failed(&mut self, op: Op, failure: Failure) {
        *self.op(op).failures.entry(failure).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Stats) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        let _ = self.all_responses_us.add(&other.all_responses_us);
        self.substituted += other.substituted;
        self.unsent_at_end += other.unsent_at_end;
        self.calls_not_queued += other.calls_not_queued;
        self.prefill_created += other.prefill_created;
        self.prefill_failed += other.prefill_failed;
        let _ = self.send_lag_us.add(&other.send_lag_us);
        for (k, v) in &other.idle_failures {
            *self.idle_failures.entry(*k).or_default() += v;
        }
    }

    pub fn sent(&self) -> u64 {
        self.ops.iter().map(|o| o.sent).sum()
    }

    pub fn ok(&self) -> u64 {
        self.ops.iter().map(|o| o.ok).sum()
    }

    /// HTTP answers of any status.
    pub fn answered_total(&self) -> u64 {
        self.ops
            .iter()
            .map(|o| o.statuses.values().sum::<u64>())
            .sum()
    }

    /// Request errors plus idle connection failures.
    pub fn errors(&self) -> u64 {
        self.ops.iter().map(OpStats::errors).sum::<u64>() + self.idle_failures.values().sum::<u64>()
    }

    /// Errors by kind across operations: `http_<status>` for answers that
    /// were not a success, then the failure kinds.
    pub fn errors_by_kind(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for op in Op::COUNTED {
            let s = &self.ops[op.index()];
            for (status, n) in &s.statuses {
                if !op.is_success(*status) {
                    *out.entry(format!("http_{status}")).or_default() += n;
                }
            }
            for (f, n) in &s.failures {
                *out.entry(f.as_str().to_owned()).or_default() += n;
            }
            if s.bad_bodies > 0 {
                *out.entry("bad_body".to_owned()).or_default() += s.bad_bodies;
            }
        }
        for (f, n) in &self.idle_failures {
            *out.entry(f.as_str().to_owned()).or_default() += n;
        }
        out
    }
}

/// Live counters of one thread, read by the progress line. Each thread
/// has its own (cache-line aligned), so counting costs no contention.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Counters {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn add_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add_done(&self, ok: bool) {
        if ok {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Sums of all threads' counters: (sent, ok, errors).
pub fn totals(all: &[std::sync::Arc<Counters>]) -> (u64, u64, u64) {
    all.iter().fold((0, 0, 0), |(s, o, e), c| {
        (
            s + c.sent.load(Ordering::Relaxed),
            o + c.ok.load(Ordering::Relaxed),
            e + c.errors.load(Ordering::Relaxed),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_statuses_and_failures() {
        let mut a = Stats::default();
        a.op(Op::Create).sent = 3;
        a.answered(Op::Create, 201, true, Duration::from_millis(2));
        a.answered(Op::Create, 503, false, Duration::from_millis(1));
        a.failed(Op::Create, Failure::Timeout);
        let mut b = Stats::default();
        b.answered(Op::Get, 404, true, Duration::from_micros(100));
        b.failed(Op::Read, Failure::Tls);
        a.merge(&b);
        assert_eq!((a.ok(), a.errors(), a.answered_total()), (2, 3, 3));
        let kinds = a.errors_by_kind();
        assert_eq!(kinds["http_503"], 1);
        assert_eq!(kinds["timeout"], 1);
        assert_eq!(kinds["tls"], 1);
        assert!(!kinds.contains_key("http_404"));
        assert_eq!(a.all_responses_us.len(), 3);
        assert_eq!(a.ops[Op::Create.index()].latency_us.len(), 1);
    }
}
