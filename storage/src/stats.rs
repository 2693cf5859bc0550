//! The store's counters: live atomics the storage threads bump, and the
//! snapshot [`StoreStats`] that `Store::stats` hands out.
//!
//! A module of its own so that the writer (which counts) and the store
//! (which reads) both depend on it instead of on each other.
//!
//! Not for: rendering metrics (the binary does) or anything a decision
//! depends on (counters are `Relaxed` and only ever approximately current).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the batch-size histogram, in ops per transaction.
pub const BATCH_OPS_BUCKETS: [u64; 8] = [1, 4, 16, 64, 256, 1024, 4096, 16384];
/// Upper bounds of the transaction-time histogram (BEGIN to COMMIT), in
/// seconds.
pub const COMMIT_SECONDS_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Per-bucket counts (not cumulative), the last past every bound, and the
/// sum of the observed values.
#[derive(Debug)]
pub(crate) struct Buckets<const N: usize> {
    counts: [AtomicU64; N],
    sum: AtomicU64,
}

impl<const N: usize> Default for Buckets<N> {
    fn default() -> Self {
        Buckets {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
        }
    }
}

impl<const N: usize> Buckets<N> {
    /// Counts `value` in bucket `index` (clamped to the last).
    fn observe(&self, index: usize, value: u64) {
        self.counts[index.min(N - 1)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Cumulative counts per bound (the last is the total) and the sum.
    pub(crate) fn snapshot(&self) -> ([u64; N], u64) {
        let mut total = 0;
        let counts = std::array::from_fn(|i| {
            total += self.counts[i].load(Ordering::Relaxed);
            total
        });
        (counts, self.sum.load(Ordering::Relaxed))
    }
}

/// Counters shared with the storage threads.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) batches_committed: AtomicU64,
    pub(crate) batches_failed: AtomicU64,
    /// Batches run a second time, each op in a savepoint (see the writer's
    /// `batch`).
    pub(crate) batches_rerun: AtomicU64,
    pub(crate) ops_committed: AtomicU64,
    pub(crate) ops_failed: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    /// The writer thread's WAL writes (`wal_vfs`), as of its last commit.
    pub(crate) wal_writes_asked: AtomicU64,
    pub(crate) wal_writes_issued: AtomicU64,
    /// Whether the writer's latest transaction failed as a whole (readiness:
    /// the store is not taking writes right now).
    pub(crate) last_batch_failed: std::sync::atomic::AtomicBool,
    /// Committed batches handed to the commit consumer and not yet taken by
    /// it, as last seen by the writer (see `committed`).
    pub(crate) committed_batches_queued: AtomicU64,
    /// Ops per committed transaction ([`BATCH_OPS_BUCKETS`]).
    pub(crate) batch_ops: Buckets<{ BATCH_OPS_BUCKETS.len() + 1 }>,
    /// Microseconds from BEGIN to COMMIT ([`COMMIT_SECONDS_BUCKETS`]).
    pub(crate) commit_micros: Buckets<{ COMMIT_SECONDS_BUCKETS.len() + 1 }>,
}

impl Counters {
    /// A committed transaction of `ops` ops that took `took`.
    pub(crate) fn committed_batch(&self, ops: u64, took: Duration) {
        let i = BATCH_OPS_BUCKETS.iter().position(|b| ops <= *b);
        self.batch_ops
            .observe(i.unwrap_or(BATCH_OPS_BUCKETS.len()), ops);
        let seconds = took.as_secs_f64();
        let i = COMMIT_SECONDS_BUCKETS.iter().position(|b| seconds <= *b);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.commit_micros
            .observe(i.unwrap_or(COMMIT_SECONDS_BUCKETS.len()), micros);
    }
}

/// A snapshot of the store's counters (for tests and metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Transactions committed by the writer.
    pub batches_committed: u64,
    /// Transactions rolled back as a whole (failed BEGIN/COMMIT, fail point).
    pub batches_failed: u64,
    /// Batches run a second time with a savepoint per op, because an op
    /// failed after one of its statements had written (committed or failed
    /// like any other; rare: a full disk, a broken invariant).
    pub batches_rerun: u64,
    /// Ops that succeeded in a committed transaction.
    pub ops_committed: u64,
    /// Ops whose reply (or log line) was an error.
    pub ops_failed: u64,
    /// WAL checkpoints run (by the checkpoint thread).
    pub checkpoints: u64,
    /// Writes SQLite asked of the writer's WAL file, as of the writer's
    /// last commit: a header and a page for each frame.
    pub wal_writes_asked: u64,
    /// Writes that reached the file: one per commit (`wal_vfs`), more only
    /// for a commit past the largest single write.
    pub wal_writes_issued: u64,
    /// Whether the writer's latest transaction failed as a whole.
    pub last_batch_failed: bool,
    /// Ops waiting in the write queue right now.
    pub write_queue_len: usize,
    /// Jobs waiting in the read queue right now.
    pub read_queue_len: usize,
    /// Committed batches the commit consumer had not yet taken when the
    /// writer last handed one over; 0 without a consumer. A number that keeps
    /// growing means the consumer does not keep up (its queue is unbounded
    /// on purpose, see `CommitSink`).
    pub committed_batches_queued: u64,
    /// Committed transactions by ops, cumulative per [`BATCH_OPS_BUCKETS`]
    /// bound (the last is the total).
    pub batch_ops: [u64; BATCH_OPS_BUCKETS.len() + 1],
    /// Ops in all committed transactions.
    pub batch_ops_sum: u64,
    /// Committed transactions by time from BEGIN to COMMIT, cumulative per
    /// [`COMMIT_SECONDS_BUCKETS`] bound (the last is the total).
    pub commit_seconds: [u64; COMMIT_SECONDS_BUCKETS.len() + 1],
    /// Their summed time, in microseconds.
    pub commit_micros_sum: u64,
}
