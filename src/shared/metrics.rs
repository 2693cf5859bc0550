//! Counters and latency histograms at every stage of the flow, read by the
//! shutdown log and the ops listener's `/metrics` (`crate::ops`).
//!
//! Plain relaxed atomics: a counter increment must never cost a lock on the
//! request path. Not for: exposition formats (`crate::ops::exposition`).

use dialproof_engine::verification::Status;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the latency buckets, in seconds.
pub const LATENCY_BUCKETS_SECONDS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// A latency histogram with fixed buckets ([`LATENCY_BUCKETS_SECONDS`]).
#[derive(Default)]
pub struct Histogram {
    /// Observations at or below each bound (not cumulative; the exposition
    /// adds them up), and the ones above every bound.
    buckets: [AtomicU64; LATENCY_BUCKETS_SECONDS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, elapsed: std::time::Duration) {
        let seconds = elapsed.as_secs_f64();
        let i = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(LATENCY_BUCKETS_SECONDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Cumulative counts per bound (the last is `+Inf`, the total) and the
    /// sum in seconds.
    pub fn snapshot(&self) -> (Vec<u64>, f64) {
        let mut total = 0;
        let counts = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Ordering::Relaxed);
                total
            })
            .collect();
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        (counts, sum)
    }
}

/// The API routes timed separately.
pub const ROUTES: [&str; 8] = [
    "create",
    "read",
    "cancel",
    "schema",
    "login",
    "docs",
    "other",
    "simulate_call",
];

/// Outcomes of one webhook attempt, as labelled in the exposition: a 2xx in
/// time, an answer that is not a delivery (not 2xx, or too late), no answer
/// at all (refused address, connect error, timeout).
pub const WEBHOOK_OUTCOMES: [&str; 3] = ["delivered", "failed_answer", "no_answer"];

/// The webhook pipeline: attempts, their time, and the gauges the driver
/// keeps current.
#[derive(Default)]
pub struct WebhookMetrics {
    /// Attempts per [`WEBHOOK_OUTCOMES`] entry.
    pub attempts: [AtomicU64; WEBHOOK_OUTCOMES.len()],
    /// Live deliveries given up after their last attempt.
    pub dead: AtomicU64,
    /// Test-mode deliveries given up (apart: a client's CI receiver that
    /// went away is not an operator's problem).
    pub test_dead: AtomicU64,
    /// One attempt's HTTP exchange.
    pub attempt_duration: Histogram,
    /// From the event's commit to the 2xx that delivered it.
    pub delivery_latency: Histogram,
    /// Gauge: attempts queued for the senders.
    pub queued: AtomicU64,
    /// Gauge: attempts dispatched and not yet recorded.
    pub in_flight: AtomicU64,
    /// Gauge: live outbox rows still pending (refreshed every few seconds).
    pub undelivered: AtomicU64,
    /// Gauge: commit time (Unix ms) of the oldest pending live row; 0 for
    /// none.
    pub oldest_undelivered_at_ms: AtomicU64,
    /// Gauge: test-mode outbox rows still pending.
    pub test_undelivered: AtomicU64,
}

impl WebhookMetrics {
    /// Counts one attempt: `outcome` indexes [`WEBHOOK_OUTCOMES`].
    pub fn attempt(&self, outcome: usize, took: std::time::Duration) {
        if let Some(c) = self.attempts.get(outcome) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.attempt_duration.observe(took);
    }
}

/// Replication and promotion (see `super::heartbeat`, `super::promotion`).
#[derive(Default)]
pub struct ReplicationMetrics {
    /// Gauge: the newest heartbeat the writer committed (Unix ms); 0
    /// without replication.
    pub heartbeat_committed_ms: AtomicU64,
    /// Gauge: numbers held back after a promotion, until `hold_until_ms`.
    pub held_numbers: AtomicU64,
    pub hold_until_ms: AtomicU64,
}

#[derive(Default)]
pub struct Metrics {
    /// Request latency per route of [`ROUTES`], from the parsed request to
    /// the response handed to the connection.
    pub latency: [Histogram; ROUTES.len()],
    pub http_requests: AtomicU64,
    pub creates_ok: AtomicU64,
    /// 503s, per pool (`Pool::index`).
    pub creates_rejected_no_number: [AtomicU64; 2],
    /// Test mode's creates: 201s and 503s, counted apart so a client's CI
    /// (the magic phone, a full test pool) never looks like live numbers
    /// running out to the operator's alerts.
    pub test_creates_ok: AtomicU64,
    pub test_creates_rejected_no_number: AtomicU64,
    pub creates_invalid: AtomicU64,
    /// Creates answered with a key's stored 201.
    pub creates_replayed: AtomicU64,
    /// The 409 `idempotency_conflict`: a key reused with another body.
    pub idempotency_mismatches: AtomicU64,
    /// The 409 `conflict`: a key's create still running.
    pub idempotency_in_flight: AtomicU64,
    /// Stored keys purged after their retention.
    pub idempotency_keys_purged: AtomicU64,
    /// GETs of one verification answered from the held rows
    /// (`crate::shared::held_rows`) and from SQLite.
    pub reads_held: AtomicU64,
    pub reads_stored: AtomicU64,
    pub auth_failures: AtomicU64,
    pub throttled: AtomicU64,
    pub completed: AtomicU64,
    pub expired: AtomicU64,
    pub failed: AtomicU64,
    pub storage_errors: AtomicU64,
    pub webhooks: WebhookMetrics,
    /// Shared with the heartbeat thread, which takes only this part.
    pub replication: std::sync::Arc<ReplicationMetrics>,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn transition(&self, to: Status) {
        match to {
            Status::Completed => Self::inc(&self.completed),
            Status::Expired => Self::inc(&self.expired),
            Status::Failed => Self::inc(&self.failed),
            Status::Pending => {}
        }
    }

    /// `name value` lines, for the shutdown log and the ops listener.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "http_requests {}\ncreates_ok {}\ncreates_rejected_no_number {}\n\
             creates_invalid {}\nauth_failures {}\nthrottled {}\ncompleted {}\n\
             expired {}\nfailed {}\nstorage_errors {}\n",
            get(&self.http_requests),
            get(&self.creates_ok),
            self.creates_rejected_no_number.iter().map(get).sum::<u64>(),
            get(&self.creates_invalid),
            get(&self.auth_failures),
            get(&self.throttled),
            get(&self.completed),
            get(&self.expired),
            get(&self.failed),
            get(&self.storage_errors),
        )
    }
}
