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

use crate::checkpoint::Checkpointer;
use crate::ops::{WriteOp, WriterMsg};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use rusqlite::Connection;

/// The writer thread's state; `run` is the thread body.
pub(crate) struct Writer {
    pub(crate) conn: Connection,
    /// Rung after each commit for the checkpoint thread (see
    /// `checkpoint`); capacity 1, so a ring already waiting is enough.
    /// Dropped with the writer, which tells that thread the last batch is
    /// done.
    pub(crate) doorbell: Sender<()>,
    /// The forced checkpoint when the WAL has grown (see `checkpoint`).
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
                // Full: a ring is already waiting; gone: nothing to tell.
                let _ = self.doorbell.try_send(());
                self.checkpointer.force_if_grown(&self.conn);
                self.checkpointer.publish(&self.context.counters);
            }
            if stopping {
                break;
            }
        }
    }

    /// Blocks for the next message; `None` when every sender is gone.
    fn next_message(&mut self) -> Option<WriterMsg> {
        self.rx.recv().ok()
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
}
