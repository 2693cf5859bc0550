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
//! Files: this one is the thread and its loop (when a batch starts, when the
//! WAL is checkpointed); `batch` runs one transaction; `op` runs one op in
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

use crate::checkpoint::{Checkpointer, CHECKPOINT_WHEN_IDLE};
use crate::ops::{WriteOp, WriterMsg};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use rusqlite::Connection;
use std::sync::atomic::Ordering;

/// The writer thread's state; `run` is the thread body.
pub(crate) struct Writer {
    pub(crate) conn: Connection,
    /// Created with `conn` (it turns SQLite's own checkpoints off there).
    pub(crate) checkpointer: Checkpointer,
    pub(crate) rx: Receiver<WriterMsg>,
    /// Most ops in one transaction (at least 1).
    pub(crate) batch_max: usize,
    pub(crate) context: BatchContext,
}

impl Writer {
    /// The thread body: runs until `Stop` arrives or every sender is gone,
    /// having committed and answered everything queued before that.
    pub(crate) fn run(mut self) {
        let mut batch: Vec<WriteOp> = Vec::with_capacity(self.batch_max);
        while let Some(first) = self.next_message() {
            match first {
                WriterMsg::Op(op) => batch.push(*op),
                WriterMsg::Stop => break,
            }
            let stopping = self.take_queued(&mut batch);
            if batch::run_batch(&self.conn, &self.context, &mut batch) {
                self.checkpointer.after_commit(&self.conn);
                self.publish_checkpoints();
            }
            if stopping {
                break;
            }
        }
        self.checkpointer.on_shutdown(&self.conn);
        self.publish_checkpoints();
    }

    /// Blocks for the next message. While commits wait for a checkpoint it
    /// wakes after [`CHECKPOINT_WHEN_IDLE`] of quiet to run one. `None` when
    /// every sender is gone.
    fn next_message(&mut self) -> Option<WriterMsg> {
        loop {
            if !self.checkpointer.dirty() {
                return self.rx.recv().ok();
            }
            match self.rx.recv_timeout(CHECKPOINT_WHEN_IDLE) {
                Ok(msg) => return Some(msg),
                Err(RecvTimeoutError::Timeout) => {
                    self.checkpointer.when_idle(&self.conn);
                    self.publish_checkpoints();
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Adds what is already queued to `batch`, without waiting: a batch is
    /// what arrived while the previous one was committing. Returns whether
    /// `Stop` was among it (the batch still runs first).
    fn take_queued(&self, batch: &mut Vec<WriteOp>) -> bool {
        while batch.len() < self.batch_max {
            match self.rx.try_recv() {
                Ok(WriterMsg::Op(op)) => batch.push(*op),
                Ok(WriterMsg::Stop) => return true,
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => return false,
            }
        }
        false
    }

    fn publish_checkpoints(&self) {
        self.context
            .counters
            .checkpoints
            .store(self.checkpointer.runs, Ordering::Relaxed);
    }
}
