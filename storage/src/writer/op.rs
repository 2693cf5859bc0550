//! Running one op inside the batch's open transaction, then pairing what it
//! did with its reply. [`OpRunner::run`] takes the op by reference and
//! returns its [`Outcome`], so that an op can run twice when its batch runs
//! again (see `batch`); [`OpRunner::finish`] consumes the op: its reply gets
//! the outcome and the commit consumer's event is built.
//!
//! Not for: the transaction around the ops and when an op runs in a
//! savepoint (see `batch`), or the SQL of each op (see `inserts`,
//! `transition`, `deliveries`, `users`).

use super::inserts::{insert_created, insert_rejection};
use super::replies::HeldReply;
use super::transition::{transition, transition_by_number, Applied};
use crate::committed::Committed;
use crate::deliveries;
use crate::error::{Result, StorageError};
use crate::failpoints::{FailPoints, Point};
use crate::idempotency::{self, Inserted, KeyedCreate, StoredKey};
use crate::ops::{Reply, WriteOp};
use crate::replica;
use crate::rows::{DeliveryRow, TransitionResult, VerificationRow};
use crate::users;
use dialproof_engine::time::UnixMillis;
use rusqlite::Connection;
use std::collections::HashMap;

/// Runs ops on the writer's connection while a transaction is open.
pub(super) struct OpRunner<'a> {
    pub(super) conn: &'a Connection,
    pub(super) failpoints: &'a FailPoints,
    /// Whether a commit consumer exists; without one no event is built (a
    /// transition's event clones its row).
    pub(super) events_wanted: bool,
}

/// How one run of an op goes.
#[derive(Clone, Copy)]
pub(super) struct Step {
    /// Inside a savepoint of its own, so that a failure half-way leaves
    /// nothing of the op behind (the batch's second run).
    pub(super) guarded: bool,
    /// Checks the `writer.op` fail point first. An op the batch's first run
    /// already checked is not checked again: a point armed for N firings
    /// counts each op once.
    pub(super) check_failpoint: bool,
}

/// What one run of an op did, without its reply. Each op gets the variant
/// of its own kind (see [`OpRunner::run`]).
// One per op of a batch, in a Vec; boxing the large variant would add an
// allocation per transition.
#[allow(clippy::large_enum_variant)]
pub(super) enum Outcome {
    Inserted(Result<Inserted>),
    Count(Result<usize>),
    Applied(Result<Applied>),
    /// A recorded attempt and its delivery as it left it (read back only
    /// when a commit consumer wants the event).
    Attempt(Result<Option<DeliveryRow>>),
    Unit(Result<()>),
}

impl Outcome {
    pub(super) fn is_err(&self) -> bool {
        match self {
            Outcome::Inserted(r) => r.is_err(),
            Outcome::Count(r) => r.is_err(),
            Outcome::Applied(r) => r.is_err(),
            Outcome::Attempt(r) => r.is_err(),
            Outcome::Unit(r) => r.is_err(),
        }
    }
}

impl OpRunner<'_> {
    /// Runs `op` as `step` says. Touches are only collected into
    /// `touches`, so several of one key become one UPDATE.
    pub(super) fn run(
        &self,
        op: &WriteOp,
        step: Step,
        touches: &mut HashMap<i64, UnixMillis>,
    ) -> Outcome {
        match op {
            WriteOp::InsertVerification { row, keyed, .. } => {
                Outcome::Inserted(self.step(step, |c| insert_created(c, row, keyed.as_deref())))
            }
            WriteOp::PurgeIdempotencyKeys { expired_before, .. } => {
                Outcome::Count(self.step(step, |c| {
                    idempotency::purge(c, *expired_before, idempotency::PURGE_BATCH_MAX)
                }))
            }
            WriteOp::PurgeTestRows { before, .. } => Outcome::Count(self.step(step, |c| {
                crate::test_rows::purge(c, *before, crate::test_rows::TEST_PURGE_BATCH_MAX)
            })),
            WriteOp::Transition {
                id, owner, event, ..
            } => Outcome::Applied(self.step(step, |c| transition(c, id, *owner, event))),
            WriteOp::TransitionByNumber {
                dial_number,
                generation,
                event,
                ..
            } => Outcome::Applied(self.step(step, |c| {
                transition_by_number(c, dial_number, *generation, event)
            })),
            WriteOp::RecordAttempt { attempt, .. } => Outcome::Attempt(self.step(step, |c| {
                deliveries::record_attempt(c, attempt)?;
                if !self.events_wanted {
                    return Ok(None);
                }
                // Read back in the same transaction: the row as this
                // attempt (and any manual retry that landed before it)
                // left it.
                deliveries::delivery(c, attempt.delivery_id)
            })),
            WriteOp::InsertSession { session, .. } => {
                Outcome::Unit(self.step(step, |c| users::insert_session(c, session)))
            }
            WriteOp::SaveNumberHealth {
                changes,
                quarantines,
                ..
            } => Outcome::Unit(self.step(step, |c| {
                crate::number_health::save(c, changes, quarantines)
            })),
            WriteOp::InsertRejection { rejection, .. } => {
                Outcome::Unit(self.step(step, |c| insert_rejection(c, rejection)))
            }
            WriteOp::Heartbeat { at, .. } => {
                Outcome::Unit(self.step(step, |c| replica::write_heartbeat(c, *at)))
            }
            WriteOp::TouchKey { key_id, at } => {
                let latest = touches.entry(*key_id).or_insert(*at);
                *latest = (*latest).max(*at);
                Outcome::Unit(Ok(()))
            }
        }
    }

    /// Hands `outcome` to `op`'s reply (held until the batch's fate is
    /// known) and builds the op's event, if it has one.
    pub(super) fn finish(&self, op: WriteOp, outcome: Outcome) -> (HeldReply, Option<Committed>) {
        match (op, outcome) {
            (WriteOp::InsertVerification { row, keyed, reply }, Outcome::Inserted(result)) => {
                let event = match (&result, self.events_wanted) {
                    (Ok(Inserted::Created), true) => {
                        let key = keyed.map(|k| Box::new(stored_key(&row, *k)));
                        Some(Committed::Created(row, key))
                    }
                    _ => None,
                };
                (HeldReply::Inserted(reply, result), event)
            }
            (
                WriteOp::PurgeIdempotencyKeys { reply, .. } | WriteOp::PurgeTestRows { reply, .. },
                Outcome::Count(result),
            ) => (HeldReply::Count(reply, result), None),
            (
                WriteOp::Transition { reply, .. } | WriteOp::TransitionByNumber { reply, .. },
                Outcome::Applied(applied),
            ) => self.held_transition(reply, applied),
            (WriteOp::RecordAttempt { reply, .. }, Outcome::Attempt(recorded)) => match recorded {
                Ok(row) => (
                    HeldReply::Unit(reply, Ok(())),
                    row.map(Committed::AttemptRecorded),
                ),
                Err(e) => (HeldReply::Unit(reply, Err(e)), None),
            },
            (
                WriteOp::InsertSession { reply, .. }
                | WriteOp::SaveNumberHealth { reply, .. }
                | WriteOp::InsertRejection { reply, .. }
                | WriteOp::Heartbeat { reply, .. },
                Outcome::Unit(result),
            ) => (HeldReply::Unit(reply, result), None),
            (op @ WriteOp::TouchKey { .. }, Outcome::Unit(result)) => {
                (HeldReply::Unanswered(op.name(), result), None)
            }
            (op, _) => {
                // `run` gives every op the outcome of its own kind, so this
                // pairing does not happen; were it to, the op fails, not
                // the writer.
                let e = StorageError::Invalid(format!("{} got another op's outcome", op.name()));
                tracing::error!(error = %e, "writer op and outcome mismatched");
                (HeldReply::skipped(op, &e), None)
            }
        }
    }

    fn held_transition(
        &self,
        reply: Option<Reply<Result<TransitionResult>>>,
        applied: Result<Applied>,
    ) -> (HeldReply, Option<Committed>) {
        match applied {
            Ok(applied) => {
                let event = if self.events_wanted {
                    applied.event()
                } else {
                    None
                };
                (HeldReply::Transition(reply, Ok(applied.result)), event)
            }
            Err(e) => (HeldReply::Transition(reply, Err(e)), None),
        }
    }

    /// Runs one op's SQL, in a savepoint when `step` says so, so that an op
    /// failing half-way (a transition's UPDATE done, its outbox INSERT
    /// refused) leaves nothing behind while the rest of the batch still
    /// commits. Without one, SQLite still undoes a failed statement's own
    /// changes; the batch notices an op that failed after an earlier
    /// statement of it had written and runs again (see `batch`).
    fn step<T>(&self, step: Step, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.conn;
        if step.check_failpoint {
            self.failpoints.check(Point::WriterOp)?;
        }
        if !step.guarded {
            return op(conn);
        }
        conn.prepare_cached("SAVEPOINT op")?.execute([])?;
        match op(conn) {
            Ok(v) => {
                conn.prepare_cached("RELEASE op")?.execute([])?;
                Ok(v)
            }
            Err(e) => {
                if !conn.is_autocommit() {
                    conn.prepare_cached("ROLLBACK TO op")?.execute([])?;
                    conn.prepare_cached("RELEASE op")?.execute([])?;
                }
                Err(e)
            }
        }
    }
}

/// The stored key a keyed create's event carries (the row has its key).
fn stored_key(row: &VerificationRow, keyed: KeyedCreate) -> StoredKey {
    StoredKey {
        company_id: row.company_id,
        livemode: row.livemode,
        key: row.idempotency_key.clone().unwrap_or_default(),
        fingerprint: keyed.fingerprint,
        verification_id: row.id.clone(),
        response_body: keyed.response_body,
        created_at: row.created_at,
    }
}
