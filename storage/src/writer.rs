//! The single writer thread and its group commit.
//!
//! Every write of the service goes through one bounded queue to one thread
//! with one connection. The thread blocks for the first operation, takes
//! whatever else is already queued (up to `batch_max` in all), runs the lot
//! in one `BEGIN IMMEDIATE` transaction, COMMITs, and only then calls the
//! replies, on this thread. So a reply means "durable against a process
//! crash", and one fsync-free WAL commit is shared by many requests.
//!
//! One writer also serialises verification transitions: the state machine
//! (`dialproof_engine::verification::apply`) runs inside the transaction, so
//! whichever of a call and a cancel reaches the queue first wins, and a
//! verification can never emit both a `completed` and an `expired` webhook.
//!
//! Not for: reads (see `reader`), clocks (every time comes in the op), or
//! sending webhooks (a transition only writes the outbox row).

use crate::checkpoint::{Checkpointer, CHECKPOINT_WHEN_IDLE};
use crate::error::{Result, StorageError};
use crate::failpoints::{FailPoints, Point};
use crate::rows::{
    first_row, verification_from_row, NewRejection, TransitionResult, VerificationRow,
    VERIFICATION_COLUMNS,
};
use crate::store::Stats;
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{apply, Event, EventType, State};
use dialproof_engine::webhook::{payload_json, PayloadFields};
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A callback the writer (or a reader) calls exactly once with the outcome.
/// It runs on the storage thread: it must only hand the value over (wake a
/// coroutine, send on a channel), never block.
pub type Reply<T> = Box<dyn FnOnce(T) + Send + 'static>;

/// One write, as queued by `Store::submit`.
pub enum WriteOp {
    /// Store a new verification; the reply comes after COMMIT (the 201).
    InsertVerification {
        row: VerificationRow,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Apply `event` to verification `id` (scoped to `company_id` if given),
    /// persist the result and its outbox row, then reply.
    Transition {
        id: String,
        company_id: Option<CompanyId>,
        event: Event,
        reply: Option<Reply<Result<TransitionResult, StorageError>>>,
    },
    /// Apply `event` to the pending verification holding `dial_number`
    /// (with lease `generation`, if given): how an inbound call finds its
    /// verification, and how a line going down fails its pending ones. The
    /// lookup and the transition share the transaction, so a call racing a
    /// cancel or an expiry sees whichever the writer applied first. Replies
    /// with `row: None` when no pending verification holds the number.
    TransitionByNumber {
        dial_number: String,
        generation: Option<u32>,
        event: Event,
        reply: Option<Reply<Result<TransitionResult, StorageError>>>,
    },
    /// Record a 503 rejection. Fire-and-forget: failures are only logged.
    InsertRejection(NewRejection),
    /// Move a key's `last_used_at` forward to `at` (never backward).
    /// Fire-and-forget; touches of one key in a batch become one UPDATE.
    TouchKey { key_id: i64, at: UnixMillis },
    /// Record a finished webhook attempt and move its delivery on (state,
    /// attempt count, next attempt time) in one transaction; reply after
    /// COMMIT. See `deliveries`.
    RecordAttempt {
        attempt: crate::deliveries::NewAttempt,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Store a dashboard session at login; reply after COMMIT (the cookie is
    /// handed out only once the session exists).
    InsertSession {
        session: crate::users::NewSession,
        reply: Reply<Result<(), StorageError>>,
    },
}

/// What the writer thread receives.
pub(crate) enum WriterMsg {
    /// Boxed because a bounded channel allocates every slot up front: a
    /// pointer per slot instead of a whole `VerificationRow`.
    Op(Box<WriteOp>),
    /// Sent by `Store::shutdown` after the last accepted op.
    Stop,
}

/// An op's outcome, held until the batch's fate is known.
// These live in one Vec per batch; boxing the large variant would only add
// an allocation per transition.
#[allow(clippy::large_enum_variant)]
enum Outcome {
    Insert(Reply<Result<()>>, Result<()>),
    Transition(
        Option<Reply<Result<TransitionResult>>>,
        Result<TransitionResult>,
    ),
    /// A fire-and-forget op; the name is for the log.
    Silent(&'static str, Result<()>),
}

impl Outcome {
    fn is_ok(&self) -> bool {
        match self {
            Outcome::Insert(_, r) | Outcome::Silent(_, r) => r.is_ok(),
            Outcome::Transition(_, r) => r.is_ok(),
        }
    }

    /// The outcome of an op that never ran because the batch had failed.
    fn skipped(op: WriteOp, e: &StorageError) -> Outcome {
        match op {
            WriteOp::InsertVerification { reply, .. } => Outcome::Insert(reply, Err(e.clone())),
            WriteOp::Transition { reply, .. } => Outcome::Transition(reply, Err(e.clone())),
            WriteOp::TransitionByNumber { reply, .. } => Outcome::Transition(reply, Err(e.clone())),
            WriteOp::InsertRejection(_) => Outcome::Silent("insert_rejection", Err(e.clone())),
            WriteOp::TouchKey { .. } => Outcome::Silent("touch_key", Err(e.clone())),
            // Same reply shape as an insert (a unit result): reuse its outcome.
            WriteOp::RecordAttempt { reply, .. } | WriteOp::InsertSession { reply, .. } => {
                Outcome::Insert(reply, Err(e.clone()))
            }
        }
    }

    /// Replaces a success by `e` (the batch did not commit after all).
    fn fail(self, e: &StorageError) -> Outcome {
        match self {
            Outcome::Insert(reply, _) => Outcome::Insert(reply, Err(e.clone())),
            Outcome::Transition(reply, _) => Outcome::Transition(reply, Err(e.clone())),
            Outcome::Silent(name, _) => Outcome::Silent(name, Err(e.clone())),
        }
    }

    fn deliver(self) {
        match self {
            Outcome::Insert(reply, r) => call_reply(reply, r),
            Outcome::Transition(Some(reply), r) => call_reply(reply, r),
            Outcome::Transition(None, Err(e)) => {
                tracing::warn!(error = %e, "transition without reply failed");
            }
            Outcome::Transition(None, Ok(_)) => {}
            Outcome::Silent(name, Err(e)) => {
                tracing::warn!(op = name, error = %e, "fire-and-forget write failed");
            }
            Outcome::Silent(_, Ok(())) => {}
        }
    }
}

/// Calls a reply so that a panicking callback cannot take the writer down
/// with it (every later write would then hang).
fn call_reply<T>(reply: Reply<T>, value: T) {
    if catch_unwind(AssertUnwindSafe(move || reply(value))).is_err() {
        tracing::error!("a storage reply callback panicked");
    }
}

pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) rx: Receiver<WriterMsg>,
    pub(crate) failpoints: FailPoints,
    pub(crate) stats: Arc<Stats>,
    /// Most ops in one transaction (at least 1).
    pub(crate) batch_max: usize,
    /// The database file, to find its `-wal` for checkpoint decisions.
    pub(crate) db_path: std::path::PathBuf,
}

impl Writer {
    /// The thread body: runs until `Stop` arrives or every sender is gone,
    /// having committed and answered everything queued before that.
    pub(crate) fn run(mut self) {
        let mut checkpointer = Checkpointer::new(&self.conn, &self.db_path);
        let mut batch: Vec<WriteOp> = Vec::with_capacity(self.batch_max);
        let mut stopping = false;
        while !stopping {
            let first = if checkpointer.dirty() {
                match self.rx.recv_timeout(CHECKPOINT_WHEN_IDLE) {
                    Ok(msg) => msg,
                    Err(RecvTimeoutError::Timeout) => {
                        checkpointer.when_idle(&self.conn);
                        self.publish_checkpoints(&checkpointer);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match self.rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                }
            };
            match first {
                WriterMsg::Op(op) => batch.push(*op),
                WriterMsg::Stop => break,
            }
            // Take what is already queued, without waiting: a batch is what
            // arrived while the previous one was committing.
            while batch.len() < self.batch_max {
                match self.rx.try_recv() {
                    Ok(WriterMsg::Op(op)) => batch.push(*op),
                    Ok(WriterMsg::Stop) => {
                        stopping = true;
                        break;
                    }
                    Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
                }
            }
            let committed = self.run_batch(&mut batch);
            if committed {
                checkpointer.after_commit(&self.conn);
                self.publish_checkpoints(&checkpointer);
            }
        }
        checkpointer.on_shutdown(&self.conn);
        self.publish_checkpoints(&checkpointer);
    }

    fn publish_checkpoints(&self, c: &Checkpointer) {
        self.stats.checkpoints.store(c.runs, Ordering::Relaxed);
    }

    /// Runs `batch` (emptying it) in one transaction and calls every reply.
    /// Returns whether a COMMIT happened.
    fn run_batch(&mut self, batch: &mut Vec<WriteOp>) -> bool {
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(batch.len());
        let committed = match self.execute(batch, &mut outcomes) {
            Ok(()) => true,
            Err(e) => {
                self.rollback();
                outcomes = outcomes.into_iter().map(|o| o.fail(&e)).collect();
                false
            }
        };
        let ops = outcomes.len() as u64;
        let ok = outcomes.iter().filter(|o| o.is_ok()).count() as u64;
        if committed {
            self.stats.batches_committed.fetch_add(1, Ordering::Relaxed);
            self.stats.ops_committed.fetch_add(ok, Ordering::Relaxed);
            self.stats.ops_failed.fetch_add(ops - ok, Ordering::Relaxed);
            if let Err(e) = self.failpoints.check(Point::WriterAfterCommit) {
                outcomes = outcomes.into_iter().map(|o| o.fail(&e)).collect();
            }
        } else {
            self.stats.batches_failed.fetch_add(1, Ordering::Relaxed);
            self.stats.ops_failed.fetch_add(ops, Ordering::Relaxed);
        }
        // After COMMIT (or rollback), never before: a reply means the
        // outcome is final.
        for outcome in outcomes {
            outcome.deliver();
        }
        committed
    }

    /// BEGIN, every op, COMMIT. An error here fails the whole batch; an
    /// op's own error is in its outcome and does not stop the others.
    /// Every op of `batch` leaves an outcome in `outcomes`, whatever fails,
    /// so that every reply is called.
    fn execute(&mut self, batch: &mut Vec<WriteOp>, outcomes: &mut Vec<Outcome>) -> Result<()> {
        let conn = &self.conn;
        let mut aborted: Option<StorageError> = self
            .failpoints
            .check(Point::WriterBegin)
            .and_then(|()| Ok(conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?))
            .err();
        let mut touches: HashMap<i64, UnixMillis> = HashMap::new();
        for op in batch.drain(..) {
            let outcome = match &aborted {
                Some(e) => Outcome::skipped(op, e),
                None => self.run_op(op, &mut touches),
            };
            outcomes.push(outcome);
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
        for (key_id, at) in touches {
            if let Err(e) = touch_key(conn, key_id, at) {
                tracing::warn!(key_id, error = %e, "touch_key failed");
            }
        }
        self.failpoints.check(Point::WriterBeforeCommit)?;
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    /// Runs one op of the open transaction. Touches are only collected,
    /// so several of one key become one UPDATE.
    fn run_op(&self, op: WriteOp, touches: &mut HashMap<i64, UnixMillis>) -> Outcome {
        let (conn, fp) = (&self.conn, &self.failpoints);
        match op {
            WriteOp::InsertVerification { row, reply } => {
                Outcome::Insert(reply, guarded(conn, fp, |c| insert_verification(c, &row)))
            }
            WriteOp::Transition {
                id,
                company_id,
                event,
                reply,
            } => Outcome::Transition(
                reply,
                guarded(conn, fp, |c| transition(c, &id, company_id, &event)),
            ),
            WriteOp::TransitionByNumber {
                dial_number,
                generation,
                event,
                reply,
            } => Outcome::Transition(
                reply,
                guarded(conn, fp, |c| {
                    transition_by_number(c, &dial_number, generation, &event)
                }),
            ),
            WriteOp::InsertRejection(rejection) => Outcome::Silent(
                "insert_rejection",
                guarded(conn, fp, |c| insert_rejection(c, &rejection)),
            ),
            WriteOp::RecordAttempt { attempt, reply } => Outcome::Insert(
                reply,
                guarded(conn, fp, |c| crate::deliveries::record_attempt(c, &attempt)),
            ),
            WriteOp::InsertSession { session, reply } => Outcome::Insert(
                reply,
                guarded(conn, fp, |c| crate::users::insert_session(c, &session)),
            ),
            WriteOp::TouchKey { key_id, at } => {
                let latest = touches.entry(key_id).or_insert(at);
                *latest = (*latest).max(at);
                Outcome::Silent("touch_key", Ok(()))
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                tracing::error!(error = %e, "ROLLBACK failed");
            }
        }
    }
}

/// Runs one op inside a savepoint, so that an op failing half-way (a
/// transition's UPDATE done, its outbox INSERT refused) leaves nothing
/// behind while the rest of the batch still commits.
fn guarded<T>(
    conn: &Connection,
    failpoints: &FailPoints,
    op: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    failpoints.check(Point::WriterOp)?;
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

fn insert_verification(conn: &Connection, r: &VerificationRow) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
         client_ref, info, webhook_url, ttl_seconds, status, created_at, expires_at, \
         completed_at, caller_id, lease_generation, failure_reason) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    stmt.execute(params![
        r.id,
        r.company_id,
        r.api_key_id,
        r.phone,
        r.dial_number,
        r.pool.as_str(),
        r.client_ref,
        r.info,
        r.webhook_url,
        r.ttl_seconds,
        r.status.as_str(),
        r.created_at.0,
        r.expires_at.0,
        r.completed_at.map(|t| t.0),
        r.caller_id,
        r.lease_generation,
        r.failure_reason,
    ])?;
    Ok(())
}

fn insert_rejection(conn: &Connection, r: &NewRejection) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO rejections (company_id, api_key_id, phone, pool, reason, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    stmt.execute(params![
        r.company_id,
        r.api_key_id,
        r.phone,
        r.pool.as_str(),
        r.reason,
        r.at.0
    ])?;
    Ok(())
}

fn touch_key(conn: &Connection, key_id: i64, at: UnixMillis) -> Result<()> {
    // max(NULL, x) is NULL in SQLite, hence the coalesce.
    let mut stmt = conn.prepare_cached(
        "UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ?2), ?2) WHERE id = ?1",
    )?;
    stmt.execute(params![key_id, at.0])?;
    Ok(())
}

/// The moment an event happened, as the caller passed it.
fn event_at(event: &Event) -> UnixMillis {
    match event {
        Event::Call { at, .. }
        | Event::Cancel { at }
        | Event::Expire { at }
        | Event::Fail { at, .. } => *at,
    }
}

fn transition(
    conn: &Connection,
    id: &str,
    company_id: Option<CompanyId>,
    event: &Event,
) -> Result<TransitionResult> {
    let not_found = TransitionResult {
        row: None,
        changed: false,
        released: None,
        delivery_id: None,
    };
    let mut select = conn.prepare_cached(&format!(
        "SELECT {VERIFICATION_COLUMNS} FROM verifications WHERE id = ?1"
    ))?;
    let Some(mut row) = first_row(&mut select, [id], verification_from_row)? else {
        return Ok(not_found);
    };
    if company_id.is_some_and(|c| c != row.company_id) {
        // Another company's verification is indistinguishable from none.
        return Ok(not_found);
    }
    let decision = apply(
        State {
            status: row.status,
            expires_at: row.expires_at,
        },
        event,
    );
    if !decision.changed {
        return Ok(TransitionResult {
            row: Some(row),
            changed: false,
            released: None,
            delivery_id: None,
        });
    }
    row.status = decision.status;
    if let Some((at, caller)) = decision.completion {
        row.completed_at = Some(at);
        row.caller_id = caller;
    }
    row.failure_reason = decision.failure_reason;
    conn.prepare_cached(
        "UPDATE verifications SET status = ?2, completed_at = ?3, caller_id = ?4, \
         failure_reason = ?5 WHERE id = ?1",
    )?
    .execute(params![
        row.id,
        row.status.as_str(),
        row.completed_at.map(|t| t.0),
        row.caller_id,
        row.failure_reason,
    ])?;
    let delivery_id = match decision.webhook {
        Some((kind, moment)) if wants_webhook(conn, row.company_id, kind)? => {
            Some(insert_delivery(conn, &row, kind, moment, event_at(event))?)
        }
        _ => None,
    };
    let released = decision
        .release_lease
        .then(|| (row.dial_number.clone(), row.lease_generation));
    Ok(TransitionResult {
        row: Some(row),
        changed: true,
        released,
        delivery_id,
    })
}

/// [`WriteOp::TransitionByNumber`]: finds the pending row by its number
/// (the `verifications_pending_dial` partial index) and applies `event`.
fn transition_by_number(
    conn: &Connection,
    dial_number: &str,
    generation: Option<u32>,
    event: &Event,
) -> Result<TransitionResult> {
    // A number is leased to at most one pending verification; the newest
    // wins should recovery ever have left two.
    let id: Option<String> = conn
        .prepare_cached(
            "SELECT id FROM verifications WHERE dial_number = ?1 AND status = 'pending' \
             AND (?2 IS NULL OR lease_generation = ?2) ORDER BY created_at DESC LIMIT 1",
        )?
        .query_row(params![dial_number, generation], |r| r.get(0))
        .optional()?;
    match id {
        Some(id) => transition(conn, &id, None, event),
        None => Ok(TransitionResult {
            row: None,
            changed: false,
            released: None,
            delivery_id: None,
        }),
    }
}

/// `verification.failed` goes out only to companies that asked for it.
fn wants_webhook(conn: &Connection, company_id: CompanyId, kind: EventType) -> Result<bool> {
    if kind != EventType::Failed {
        return Ok(true);
    }
    let enabled: Option<i64> = conn
        .prepare_cached("SELECT send_failed_webhooks FROM companies WHERE id = ?1")?
        .query_row([company_id], |r| r.get(0))
        .optional()?;
    Ok(enabled.unwrap_or(0) != 0)
}

/// Writes the outbox row in the transition's transaction; the webhook
/// thread sends only committed rows. `moment` is what the payload reports as
/// `completed_at`; `due` is when the first attempt may start.
fn insert_delivery(
    conn: &Connection,
    row: &VerificationRow,
    kind: EventType,
    moment: UnixMillis,
    due: UnixMillis,
) -> Result<i64> {
    let payload = payload_json(&PayloadFields {
        event: kind,
        verification_id: &row.id,
        phone: &row.phone,
        dial_number: &row.dial_number,
        client_ref: &row.client_ref,
        info: &row.info,
        caller_id: Some(&row.caller_id),
        completed_at: moment,
    });
    conn.prepare_cached(
        "INSERT INTO webhook_deliveries (verification_id, company_id, event_type, url, payload, \
         state, attempts, next_attempt_at, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6, ?6)",
    )?
    .execute(params![
        row.id,
        row.company_id,
        kind.as_str(),
        row.webhook_url,
        payload,
        due.0
    ])?;
    Ok(conn.last_insert_rowid())
}
