//! Running one op inside the batch's open transaction: its savepoint, the
//! reply it leaves to be called after COMMIT, and the event it leaves for
//! the commit consumer.
//!
//! Not for: the transaction around the ops (see `batch`) or the SQL of
//! each op (see `inserts`, `transition`, `deliveries`, `users`).

use super::inserts::{insert_created, insert_rejection};
use super::replies::HeldReply;
use super::transition::{transition, transition_by_number, Applied};
use crate::committed::Committed;
use crate::deliveries::{self, NewAttempt};
use crate::error::Result;
use crate::failpoints::{FailPoints, Point};
use crate::idempotency::{self, Inserted, KeyedCreate, StoredKey};
use crate::ops::{Reply, WriteOp};
use crate::replica;
use crate::rows::{TransitionResult, VerificationRow};
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

impl OpRunner<'_> {
    /// Runs `op` and returns its held reply and its event, if it has one.
    /// Touches are only collected into `touches`, so several of one key
    /// become one UPDATE.
    pub(super) fn run(
        &self,
        op: WriteOp,
        touches: &mut HashMap<i64, UnixMillis>,
    ) -> (HeldReply, Option<Committed>) {
        match op {
            WriteOp::InsertVerification { row, keyed, reply } => {
                let result = if keyed.is_none() && row.idempotency_key.is_none() {
                    self.one_statement(|c| insert_created(c, &row, None))
                } else {
                    self.guarded(|c| insert_created(c, &row, keyed.as_deref()))
                };
                let event = match (&result, self.events_wanted) {
                    (Ok(Inserted::Created), true) => {
                        let key = keyed.map(|k| Box::new(stored_key(&row, *k)));
                        Some(Committed::Created(row, key))
                    }
                    _ => None,
                };
                (HeldReply::Inserted(reply, result), event)
            }
            WriteOp::PurgeIdempotencyKeys {
                expired_before,
                reply,
            } => {
                let result = self.guarded(|c| {
                    idempotency::purge(c, expired_before, idempotency::PURGE_BATCH_MAX)
                });
                (HeldReply::Count(reply, result), None)
            }
            WriteOp::PurgeTestRows { before, reply } => {
                let result = self.guarded(|c| {
                    crate::test_rows::purge(c, before, crate::test_rows::TEST_PURGE_BATCH_MAX)
                });
                (HeldReply::Count(reply, result), None)
            }
            WriteOp::Transition {
                id,
                owner,
                event,
                reply,
            } => self.held_transition(reply, self.guarded(|c| transition(c, &id, owner, &event))),
            WriteOp::TransitionByNumber {
                dial_number,
                generation,
                event,
                reply,
            } => self.held_transition(
                reply,
                self.guarded(|c| transition_by_number(c, &dial_number, generation, &event)),
            ),
            WriteOp::RecordAttempt { attempt, reply } => self.record_attempt(&attempt, reply),
            WriteOp::InsertSession { session, reply } => {
                let result = self.guarded(|c| users::insert_session(c, &session));
                (HeldReply::Unit(reply, result), None)
            }
            WriteOp::SaveNumberHealth {
                rows,
                quarantines,
                reply,
            } => {
                let result = self.guarded(|c| crate::number_health::save(c, &rows, &quarantines));
                (HeldReply::Unit(reply, result), None)
            }
            WriteOp::InsertRejection { rejection, reply } => {
                let result = self.one_statement(|c| insert_rejection(c, &rejection));
                (HeldReply::Unit(reply, result), None)
            }
            WriteOp::Heartbeat { at, reply } => {
                let result = self.guarded(|c| replica::write_heartbeat(c, at));
                (HeldReply::Unit(reply, result), None)
            }
            WriteOp::TouchKey { key_id, at } => {
                let latest = touches.entry(key_id).or_insert(at);
                *latest = (*latest).max(at);
                (HeldReply::Unanswered("touch_key", Ok(())), None)
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

    fn record_attempt(
        &self,
        attempt: &NewAttempt,
        reply: Reply<Result<()>>,
    ) -> (HeldReply, Option<Committed>) {
        let recorded = self.guarded(|c| {
            deliveries::record_attempt(c, attempt)?;
            if !self.events_wanted {
                return Ok(None);
            }
            // Read back inside the savepoint: the row as this attempt (and
            // any manual retry that landed before it) left it.
            deliveries::delivery(c, attempt.delivery_id)
        });
        match recorded {
            Ok(row) => (
                HeldReply::Unit(reply, Ok(())),
                row.map(Committed::AttemptRecorded),
            ),
            Err(e) => (HeldReply::Unit(reply, Err(e)), None),
        }
    }

    /// Runs an op that is a single SQL statement, without a savepoint of
    /// its own: SQLite undoes a failed statement's own changes by itself
    /// and the batch's transaction goes on (with a statement journal only
    /// when that statement needs one). Why: a savepoint per op copied every
    /// page the op touched into the savepoint's journal (the table's and
    /// each index's leaf, per create), which was most of the writer's
    /// allocations under creates.
    fn one_statement<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.failpoints.check(Point::WriterOp)?;
        op(self.conn)
    }

    /// Runs one op inside a savepoint, so that an op failing half-way (a
    /// transition's UPDATE done, its outbox INSERT refused) leaves nothing
    /// behind while the rest of the batch still commits.
    fn guarded<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.conn;
        self.failpoints.check(Point::WriterOp)?;
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
