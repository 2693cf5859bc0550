//! What the writer reports after each COMMIT ([`Committed`]), and the one
//! queue that carries it to the binary's commit consumer.
//!
//! Why: a commit has consequences outside the database (a number goes back
//! to the lease table, the webhook driver should send the new outbox row,
//! an expiry must be scheduled, a log line written). A reply callback is the
//! wrong place for them: it runs on the writer thread, and it is lost when
//! its requester stopped waiting (a timed-out cancel whose transition still
//! commits). So the writer reports every committed batch to one consumer,
//! which owns those consequences; replies only answer their requester.
//!
//! The contract, for a store opened with `Store::open_with_commit_sink`:
//!
//! - Every op that changed something outside its own row gets one event
//!   (`Created`, `Transitioned`, `AttemptRecorded`), in commit order, once.
//!   A transition that changed nothing (a repeated cancel, a late call),
//!   rejection rows, key touches and sessions have no consequence beyond
//!   their reply or their row, and no event.
//! - A batch's events are handed over after its COMMIT and before any of
//!   its replies is called: a requester that has its reply knows that the
//!   consumer can already see the event. A rolled-back batch has no events.
//!   With the `writer.after_commit=error` fail point the replies report an
//!   error but the rows are stored, so the events still go out.
//! - The hand-over never blocks and never drops: the queue is unbounded on
//!   purpose, because the writer must neither wait for the consumer (every
//!   request would wait with it) nor lose a release (the number would stay
//!   leased until a restart). What bounds it is the consumer's speed: its
//!   work per event is a bitmap flip, a channel send and a log line, and
//!   `StoreStats::committed_batches_queued` shows whether it keeps up.
//! - The queue ends when the writer exits: [`CommitReceiver::recv`] returns
//!   `None` only after the last committed batch was taken, so a consumer
//!   that loops until `None` and is joined after `Store::shutdown` has seen
//!   every commit. The only loss is a consumer that drops its receiver
//!   early; the writer logs each batch it could not hand over.
//!
//! Not for: the request/response wait of one request (that is the op's
//! `Reply`), or deciding what a consequence is (the consumer in the binary
//! releases, wakes and logs).

use crate::handoff::{self, Taken};
use crate::idempotency::StoredKey;
use crate::rows::{DeliveryRow, ReleasedLease, VerificationRow};
use crate::stats::Counters;
use crossbeam_channel::RecvTimeoutError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One committed op's consequence outside the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Committed {
    /// `WriteOp::InsertVerification`: the verification is stored; its lease
    /// is live and its expiry should be scheduled. With the key it was
    /// created with and its answer, if any (retries now replay it).
    Created(VerificationRow, Option<Box<StoredKey>>),
    /// A `Transition` or `TransitionByNumber` that changed the status.
    Transitioned(Transitioned),
    /// `WriteOp::RecordAttempt`: the delivery as the attempt left it (a
    /// manual retry that landed meanwhile may have kept it pending and due).
    AttemptRecorded(DeliveryRow),
}

/// A status change, as committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transitioned {
    /// The verification after the change.
    pub row: VerificationRow,
    /// The lease the change ended, to give back to the lease table.
    pub released: Option<ReleasedLease>,
    /// The outbox row written in the same transaction, if the change emits
    /// a webhook. Boxed: most events carry none, and the event stays small.
    pub delivery: Option<Box<DeliveryRow>>,
}

/// The events of one committed transaction, in the order its ops ran.
pub type CommittedBatch = Vec<Committed>;

/// The writer's end of the commit queue; give it to
/// `Store::open_with_commit_sink`.
#[derive(Debug)]
pub struct CommitSink {
    tx: handoff::Sender<CommittedBatch>,
    progress: Arc<CommitProgress>,
}

/// The consumer's end of the commit queue. Not `Clone`: one consumer owns
/// the consequences of commits, so that they happen once and in order.
#[derive(Debug)]
pub struct CommitReceiver {
    rx: handoff::Receiver<CommittedBatch>,
    progress: Arc<CommitProgress>,
}

/// How far the consumer has got: batches handed over by the writer, and
/// batches whose consequences the consumer has applied. A request handler
/// whose reply came after its commit (so after its batch was handed over)
/// can wait until `applied` reaches the `handed` it read, and then knows
/// the consequences of its own change are done (a cancel's number is back
/// in the table before the cancel is answered).
#[derive(Debug, Default)]
pub struct CommitProgress {
    handed: AtomicU64,
    applied: AtomicU64,
}

impl CommitProgress {
    /// Batches handed to the consumer so far.
    pub fn handed(&self) -> u64 {
        self.handed.load(Ordering::Acquire)
    }

    /// Batches the consumer has applied so far.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }
}

impl CommitSink {
    /// A new commit queue (unbounded on purpose; see the module docs).
    pub fn channel() -> (CommitSink, CommitReceiver) {
        let (tx, rx) = handoff::queue(usize::MAX);
        let progress = Arc::new(CommitProgress::default());
        (
            CommitSink {
                tx,
                progress: progress.clone(),
            },
            CommitReceiver { rx, progress },
        )
    }

    /// Hands a committed batch to the consumer. Never blocks; an empty
    /// batch is not sent.
    pub(crate) fn hand_over(&self, batch: CommittedBatch, counters: &Counters) {
        if batch.is_empty() {
            return;
        }
        // Counted before the send: `handed` never trails a batch the
        // consumer may already be applying.
        self.progress.handed.fetch_add(1, Ordering::AcqRel);
        // An unbounded queue refuses only when the receiver is gone. It
        // wakes the consumer only if it is parked: one wake per idle
        // spell, not per batch.
        match self.tx.try_send(batch) {
            Ok(queued) => counters
                .committed_batches_queued
                .store(queued as u64, Ordering::Relaxed),
            Err(handoff::Refused::Full(lost) | handoff::Refused::Closed(lost)) => {
                tracing::error!(
                    events = lost.len(),
                    "the commit consumer is gone; committed events not handed over"
                );
            }
        }
    }
}

impl CommitReceiver {
    /// Waits for the next committed batch. `None` once the writer has
    /// exited and every batch it committed has been taken.
    pub fn recv(&self) -> Option<CommittedBatch> {
        self.rx.recv()
    }

    /// Like [`recv`](Self::recv), waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<CommittedBatch, RecvTimeoutError> {
        let mut got = None;
        let deadline = std::time::Instant::now() + timeout;
        match self.rx.take(1, Some(deadline), |batch| got = Some(batch)) {
            Taken::Some => got.ok_or(RecvTimeoutError::Timeout),
            Taken::TimedOut => Err(RecvTimeoutError::Timeout),
            Taken::Ended => Err(RecvTimeoutError::Disconnected),
        }
    }

    /// Marks one received batch as applied (call after its consequences).
    pub fn applied_one(&self) {
        self.progress.applied.fetch_add(1, Ordering::AcqRel);
    }

    /// The shared progress counters, for handlers that wait for them.
    pub fn progress(&self) -> Arc<CommitProgress> {
        self.progress.clone()
    }

    /// The batches already queued, without waiting.
    pub fn try_iter(&self) -> impl Iterator<Item = CommittedBatch> + '_ {
        let mut queued = Vec::new();
        self.rx
            .take(usize::MAX, Some(std::time::Instant::now()), |batch| {
                queued.push(batch)
            });
        queued.into_iter()
    }
}
