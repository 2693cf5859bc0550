//! One batch, one transaction: `BEGIN IMMEDIATE`, every op in its own
//! savepoint, COMMIT (or ROLLBACK of the whole batch), then the commit
//! consumer's events, then the replies.
//!
//! An op's own failure (a constraint, an unknown delivery) rolls back only
//! its savepoint: the rest of the batch still commits and that op's reply
//! carries its error. A failure of the transaction itself (BEGIN, COMMIT,
//! SQLite rolling back on an I/O error, a fail point) fails every op of the
//! batch, and the batch has no events.
//!
//! Not for: deciding what goes into a batch or when (see the loop in
//! `writer`), or running one op (see `op`).

use super::inserts::touch_key;
use super::op::OpRunner;
use super::replies::HeldReply;
use crate::committed::{CommitSink, CommittedBatch};
use crate::error::{Result, StorageError};
use crate::failpoints::{FailPoints, Point};
use crate::ops::WriteOp;
use crate::stats::Counters;
use dialproof_engine::time::UnixMillis;
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What a batch needs besides the connection.
pub(crate) struct BatchContext {
    pub(crate) failpoints: FailPoints,
    pub(crate) counters: Arc<Counters>,
    /// Where committed events go; `None` builds no events at all.
    pub(crate) commit_sink: Option<CommitSink>,
}

/// What the ops of one batch left behind, in op order.
struct Ran {
    replies: Vec<HeldReply>,
    events: CommittedBatch,
    /// Last-use times by key, written once per key just before COMMIT.
    touches: HashMap<i64, UnixMillis>,
}

/// Runs `batch` (emptying it) in one transaction, hands its events to the
/// commit sink and calls every reply. Returns whether a COMMIT happened.
pub(super) fn run_batch(conn: &Connection, ctx: &BatchContext, batch: &mut Vec<WriteOp>) -> bool {
    let mut ran = Ran {
        replies: Vec::with_capacity(batch.len()),
        events: Vec::new(),
        touches: HashMap::new(),
    };
    let started = std::time::Instant::now();
    let committed = match execute(conn, ctx, batch, &mut ran) {
        Ok(()) => {
            let ops = ran.replies.len() as u64;
            ctx.counters.committed_batch(ops, started.elapsed());
            true
        }
        Err(e) => {
            rollback(conn);
            ran.replies = ran.replies.into_iter().map(|r| r.fail(&e)).collect();
            ran.events.clear();
            false
        }
    };
    count(&ctx.counters, committed, &ran.replies);
    if committed {
        // The rows are stored whatever this fail point does to the
        // replies, so the events still go out.
        if let Err(e) = ctx.failpoints.check(Point::WriterAfterCommit) {
            ran.replies = ran.replies.into_iter().map(|r| r.fail(&e)).collect();
        }
        if let Some(sink) = &ctx.commit_sink {
            sink.hand_over(std::mem::take(&mut ran.events), &ctx.counters);
        }
    }
    // After COMMIT (or rollback) and after the events, never before: a
    // reply means the outcome is final and the consumer can see it.
    for reply in ran.replies {
        reply.answer();
    }
    committed
}

fn count(counters: &Counters, committed: bool, replies: &[HeldReply]) {
    let ops = replies.len() as u64;
    counters
        .last_batch_failed
        .store(!committed, Ordering::Relaxed);
    if committed {
        let ok = replies.iter().filter(|r| r.is_ok()).count() as u64;
        counters.batches_committed.fetch_add(1, Ordering::Relaxed);
        counters.ops_committed.fetch_add(ok, Ordering::Relaxed);
        counters.ops_failed.fetch_add(ops - ok, Ordering::Relaxed);
    } else {
        counters.batches_failed.fetch_add(1, Ordering::Relaxed);
        counters.ops_failed.fetch_add(ops, Ordering::Relaxed);
    }
}

/// BEGIN, every op, COMMIT. An error here fails the whole batch; an op's
/// own error is in its reply and does not stop the others. Every op of
/// `batch` leaves a reply in `ran`, whatever fails, so that every reply is
/// called.
fn execute(
    conn: &Connection,
    ctx: &BatchContext,
    batch: &mut Vec<WriteOp>,
    ran: &mut Ran,
) -> Result<()> {
    let mut aborted: Option<StorageError> = ctx
        .failpoints
        .check(Point::WriterBegin)
        .and_then(|()| Ok(conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?))
        .err();
    let runner = OpRunner {
        conn,
        failpoints: &ctx.failpoints,
        events_wanted: ctx.commit_sink.is_some(),
    };
    for op in batch.drain(..) {
        let reply = match &aborted {
            Some(e) => HeldReply::skipped(op, e),
            None => {
                let (reply, event) = runner.run(op, &mut ran.touches);
                ran.events.extend(event);
                reply
            }
        };
        ran.replies.push(reply);
        // A failure that ended the transaction (SQLite rolls back by
        // itself on some I/O errors) fails the whole batch: nothing
        // before it will be committed either.
        if aborted.is_none() && conn.is_autocommit() {
            aborted = Some(StorageError::Sqlite(
                "the transaction was rolled back by SQLite during the batch".into(),
            ));
        }
    }
    if let Some(e) = aborted {
        return Err(e);
    }
    for (key_id, at) in ran.touches.drain() {
        if let Err(e) = touch_key(conn, key_id, at) {
            tracing::warn!(key_id, error = %e, "touch_key failed");
        }
    }
    ctx.failpoints.check(Point::WriterBeforeCommit)?;
    conn.prepare_cached("COMMIT")?.execute([])?;
    Ok(())
}

fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!(error = %e, "ROLLBACK failed");
        }
    }
}
