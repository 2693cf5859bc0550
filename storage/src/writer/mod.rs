//! The single writer thread and its group commit.
//!
//! Every write of the service goes through one bounded queue to one thread
//! with one connection. The thread blocks for the first operation, takes
//! whatever else is already queued (up to `batch_max` in all), runs the lot
//! in one `BEGIN IMMEDIATE` transaction, COMMITs, and only then reports:
//! first the batch's events to the commit consumer, if the store has one
//! (see `committed`), then each op's reply, on this thread. So a reply
//! means "durable against a process crash", and one fsync-free WAL commit
//! is shared by many requests.
//!
//! Two ways out, for two jobs. A reply answers the one request that waits
//! (a create gets its 201 only after COMMIT); it must only hand the value
//! over. The events carry what must follow a commit whether or not anyone
//! still waits (releasing a number, waking the webhook driver, logging);
//! the binary handles them on one consumer, off this thread.
//!
//! One writer also serialises verification transitions: the state machine
//! (`dialproof_engine::verification::apply`) runs inside the transaction, so
//! whichever of a call and a cancel reaches the queue first wins, and a
//! verification can never emit both a `completed` and an `expired` webhook.
//!
//! Files: this one is the thread and its loop (when a batch starts; the
//! WAL is checkpointed by another thread, see `checkpoint`); `batch` runs one transaction; `op` runs one op in
//! it; `replies` holds the replies until the batch's fate is known;
//! `transition` applies the state machine; `inserts` holds the plain row
//! writes.
//!
//! Not for: reads (see `reader`), clocks (every time comes in the op),
//! sending webhooks (a transition only writes the outbox row), or the
//! consequences of a commit (the binary's commit consumer).

mod batch;
mod inserts;
mod op;
mod replies;
mod transition;

pub(crate) use batch::BatchContext;

use crate::checkpoint::{Checkpointer, CHECKPOINT_EVERY_BATCHES};
use crate::handoff::{Receiver, Taken};
use crate::ops::WriteOp;
use crossbeam_channel::Sender;
use rusqlite::Connection;
use std::sync::atomic::Ordering;

/// The writer thread's state; `run` is the thread body.
pub(crate) struct Writer {
    pub(crate) conn: Connection,
    /// Rung every [`CHECKPOINT_EVERY_BATCHES`] commits for the checkpoint
    /// thread (see `checkpoint`), the only commits at which it has work;
    /// capacity 1, so a ring already waiting is enough. Dropped with the
    /// writer, which tells that thread the last batch is done.
    pub(crate) doorbell: Sender<()>,
    /// The forced checkpoint when the WAL has grown (see `checkpoint`).
    pub(crate) checkpointer: Checkpointer,
    /// The intake: ops boxed, so that a long queue holds a pointer per op
    /// rather than a whole `WriteOp`. It ends when the store shuts down
    /// (after every accepted op) or the last `Store` is dropped.
    pub(crate) rx: Receiver<Box<WriteOp>>,
    /// Most ops in one transaction (at least 1).
    pub(crate) batch_max: usize,
    pub(crate) context: BatchContext,
}

impl Writer {
    /// The thread body: runs until the intake ends, having committed and
    /// answered everything queued before that.
    pub(crate) fn run(mut self) {
        let mut batch: Vec<WriteOp> = Vec::with_capacity(self.batch_max);
        // A batch is what arrived while the previous one was committing
        // (up to `batch_max`), taken under one lock; the thread parks only
        // when the intake is empty.
        while self.rx.take(self.batch_max, None, |op| batch.push(*op)) == Taken::Some {
            if batch::run_batch(&self.conn, &self.context, &mut batch) {
                self.after_commit();
            }
        }
    }

    /// The WAL's upkeep after a commit: the forced checkpoint if it grew,
    /// and the checkpoint thread's ring when it has a checkpoint to run.
    fn after_commit(&mut self) {
        let batches = self
            .context
            .counters
            .batches_committed
            .load(Ordering::Relaxed);
        if batches.is_multiple_of(u64::from(CHECKPOINT_EVERY_BATCHES)) {
            // Full: a ring is already waiting; gone: nothing to tell.
            let _ = self.doorbell.try_send(());
        }
        self.checkpointer.force_if_grown(&self.conn);
        self.checkpointer.publish(&self.context.counters);
    }
}
