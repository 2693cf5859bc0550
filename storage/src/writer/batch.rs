//! One batch, one transaction: `BEGIN IMMEDIATE`, every op, COMMIT (or
//! ROLLBACK of the whole batch), then the commit consumer's events, then
//! the replies.
//!
//! An op's own failure (a constraint, an unknown delivery) leaves nothing
//! of that op in the transaction: the rest of the batch still commits and
//! that op's reply carries its error. A failure of the transaction itself
//! (BEGIN, COMMIT, SQLite rolling back on an I/O error, a fail point) fails
//! every op of the batch, and the batch has no events.
//!
//! How an op's failure leaves nothing behind, in two runs. The first runs
//! every op without a savepoint: SQLite undoes a failed statement's own
//! changes by itself, so an op that fails at its first write, or before
//! writing, has left nothing. Only an op that fails after one of its
//! statements has written (a transition's UPDATE done, its outbox INSERT
//! refused) leaves changes, which the connection's change count shows. Then
//! the whole transaction is rolled back and the batch runs a second time
//! with every op in a savepoint of its own, which is rolled back on the
//! op's failure. Why not a savepoint per op always: opening one made SQLite
//! copy every page the op then touched into the savepoint's journal (the
//! table's and each index's leaf, every op again), about a tenth of the
//! writer's time per leased call with its webhook, for a failure that a
//! correct op sees only on a full disk or a broken invariant.
//!
//! Not for: deciding what goes into a batch or when (see the loop in
//! `writer`), or running one op (see `op`).

use super::inserts::touch_key;
use super::op::{OpRunner, Outcome, Step};
use super::replies::HeldReply;
use crate::committed::{CommitSink, CommittedBatch};
use crate::error::{Result, StorageError};
use crate::failpoints::{FailPoints, Point};
use crate::ops::WriteOp;
use crate::stats::Counters;
use crate::wal_vfs;
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

/// Last-use times by key, written once per key just before COMMIT.
type Touches = HashMap<i64, UnixMillis>;

/// Runs `batch` (emptying it) in one transaction, hands its events to the
/// commit sink and calls every reply. Returns whether a COMMIT happened.
pub(super) fn run_batch(conn: &Connection, ctx: &BatchContext, batch: &mut Vec<WriteOp>) -> bool {
    let runner = OpRunner {
        conn,
        failpoints: &ctx.failpoints,
        events_wanted: ctx.commit_sink.is_some(),
    };
    let started = std::time::Instant::now();
    let (committed, mut replies, events) = match execute(conn, ctx, &runner, batch) {
        Ok(outcomes) => {
            ctx.counters
                .committed_batch(batch.len() as u64, started.elapsed());
            let (replies, events) = settle(&runner, batch, outcomes);
            (true, replies, events)
        }
        Err(e) => {
            rollback(conn);
            let replies = batch
                .drain(..)
                .map(|op| HeldReply::skipped(op, &e))
                .collect();
            (false, replies, Vec::new())
        }
    };
    count(&ctx.counters, committed, &replies);
    if committed {
        // The rows are stored whatever this fail point does to the
        // replies, so the events still go out.
        if let Err(e) = ctx.failpoints.check(Point::WriterAfterCommit) {
            replies = replies.into_iter().map(|r| r.fail(&e)).collect();
        }
        if let Some(sink) = &ctx.commit_sink {
            sink.hand_over(events, &ctx.counters);
        }
    }
    // After COMMIT (or rollback) and after the events, never before: a
    // reply means the outcome is final and the consumer can see it.
    for reply in replies {
        reply.answer();
    }
    committed
}

/// Pairs each op (emptying `batch`) with its outcome: the held replies and
/// the events, in op order.
fn settle(
    runner: &OpRunner<'_>,
    batch: &mut Vec<WriteOp>,
    outcomes: Vec<Outcome>,
) -> (Vec<HeldReply>, CommittedBatch) {
    let mut replies = Vec::with_capacity(batch.len());
    let mut events = Vec::new();
    let mut outcomes = outcomes.into_iter();
    for op in batch.drain(..) {
        let (reply, event) = match outcomes.next() {
            Some(outcome) => runner.finish(op, outcome),
            // `execute` leaves one outcome per op; every reply is called
            // all the same.
            None => (HeldReply::skipped(op, &no_outcome()), None),
        };
        replies.push(reply);
        events.extend(event);
    }
    (replies, events)
}

fn no_outcome() -> StorageError {
    StorageError::Invalid("the batch left an op without an outcome".into())
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
    // This thread's counts are this store's: only the writer thread writes
    // through its connection. Before the replies, like the counts above.
    let wal = wal_vfs::thread_wal_writes();
    counters
        .wal_writes_asked
        .store(wal.asked, Ordering::Relaxed);
    counters
        .wal_writes_issued
        .store(wal.issued, Ordering::Relaxed);
}

/// BEGIN, every op (a second time, each in a savepoint, when one failed
/// after writing), COMMIT. Returns one outcome per op, in op order; an
/// error fails the whole batch.
fn execute(
    conn: &Connection,
    ctx: &BatchContext,
    runner: &OpRunner<'_>,
    batch: &[WriteOp],
) -> Result<Vec<Outcome>> {
    ctx.failpoints.check(Point::WriterBegin)?;
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let mut touches = Touches::new();
    if let Some(failed_at) = first_run(conn, runner, batch, &mut outcomes, &mut touches)? {
        ctx.counters.batches_rerun.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            op = batch[failed_at].name(),
            ops = batch.len(),
            "an op failed after writing; the batch runs again with a savepoint per op"
        );
        conn.prepare_cached("ROLLBACK")?.execute([])?;
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        touches.clear();
        second_run(conn, runner, batch, failed_at, &mut outcomes, &mut touches)?;
    }
    for (key_id, at) in touches.drain() {
        if let Err(e) = touch_key(conn, key_id, at) {
            tracing::warn!(key_id, error = %e, "touch_key failed");
        }
    }
    ctx.failpoints.check(Point::WriterBeforeCommit)?;
    conn.prepare_cached("COMMIT")?.execute([])?;
    Ok(outcomes)
}

/// Every op without a savepoint, pushing its outcome. Stops at the first op
/// that failed after one of its statements had written (its changes are
/// in the transaction) and returns its index, without its outcome.
fn first_run(
    conn: &Connection,
    runner: &OpRunner<'_>,
    batch: &[WriteOp],
    outcomes: &mut Vec<Outcome>,
    touches: &mut Touches,
) -> Result<Option<usize>> {
    let step = Step {
        guarded: false,
        check_failpoint: true,
    };
    for (at, op) in batch.iter().enumerate() {
        let changes = conn.total_changes();
        let outcome = runner.run(op, step, touches);
        still_open(conn)?;
        // A failed statement's own changes are undone and not counted.
        if outcome.is_err() && conn.total_changes() != changes {
            return Ok(Some(at));
        }
        outcomes.push(outcome);
    }
    Ok(None)
}

/// The batch again, after the first run was rolled back because the op at
/// `failed_at` failed after writing: each op in a savepoint of its own.
/// An op the first run saw fail without writing keeps that outcome (a
/// fail point fired for it is not fired again); the fail point is checked
/// only for the ops the first run did not reach.
fn second_run(
    conn: &Connection,
    runner: &OpRunner<'_>,
    batch: &[WriteOp],
    failed_at: usize,
    outcomes: &mut Vec<Outcome>,
    touches: &mut Touches,
) -> Result<()> {
    for (at, op) in batch.iter().enumerate() {
        if outcomes.get(at).is_some_and(Outcome::is_err) {
            continue;
        }
        let step = Step {
            guarded: true,
            check_failpoint: at > failed_at,
        };
        let outcome = runner.run(op, step, touches);
        still_open(conn)?;
        match outcomes.get_mut(at) {
            Some(first) => *first = outcome,
            None => outcomes.push(outcome),
        }
    }
    Ok(())
}

/// SQLite rolls the whole transaction back by itself on some errors (a
/// full disk, an I/O error): nothing before is committed either, so the
/// batch fails.
fn still_open(conn: &Connection) -> Result<()> {
    if conn.is_autocommit() {
        return Err(StorageError::Sqlite(
            "the transaction was rolled back by SQLite during the batch".into(),
        ));
    }
    Ok(())
}

fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!(error = %e, "ROLLBACK failed");
        }
    }
}
