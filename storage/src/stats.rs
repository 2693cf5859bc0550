//! The store's counters: live atomics the storage threads bump, and the
//! snapshot [`StoreStats`] that `Store::stats` hands out.
//!
//! A module of its own so that the writer (which counts) and the store
//! (which reads) both depend on it instead of on each other.
//!
//! Not for: rendering metrics (the binary does) or anything a decision
//! depends on (counters are `Relaxed` and only ever approximately current).

use std::sync::atomic::AtomicU64;

/// Counters shared with the storage threads.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) batches_committed: AtomicU64,
    pub(crate) batches_failed: AtomicU64,
    pub(crate) ops_committed: AtomicU64,
    pub(crate) ops_failed: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    /// Whether the writer's latest transaction failed as a whole (readiness:
    /// the store is not taking writes right now).
    pub(crate) last_batch_failed: std::sync::atomic::AtomicBool,
    /// Committed batches handed to the commit consumer and not yet taken by
    /// it, as last seen by the writer (see `committed`).
    pub(crate) committed_batches_queued: AtomicU64,
}

/// A snapshot of the store's counters (for tests and metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Transactions committed by the writer.
    pub batches_committed: u64,
    /// Transactions rolled back as a whole (failed BEGIN/COMMIT, fail point).
    pub batches_failed: u64,
    /// Ops that succeeded in a committed transaction.
    pub ops_committed: u64,
    /// Ops whose reply (or log line) was an error.
    pub ops_failed: u64,
    /// WAL checkpoints run by the writer.
    pub checkpoints: u64,
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
}
