//! What callers queue for the writer ([`WriteOp`]), and the [`Reply`]
//! callback both storage queues answer a single request with.
//!
//! A module of its own because the store (which queues) and the writer
//! (which runs) both need these types, and neither should import the other
//! for them.
//!
//! Not for: running the ops (see `writer`) or what follows a commit beyond
//! the one requester's answer (see `committed`).

use crate::deliveries::NewAttempt;
use crate::error::StorageError;
use crate::idempotency::{Inserted, KeyedCreate};
use crate::rows::{NewRejection, TransitionResult, VerificationRow};
use crate::users::NewSession;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Event;

/// A callback the writer (or a reader) calls exactly once with the outcome
/// of one request. It runs on the storage thread: it must only hand the
/// value over to whoever waits for it (wake a coroutine, send on a
/// channel), never block, and never carry the consequences of a commit
/// (releasing a number, waking the webhook driver): those belong to the
/// commit consumer (see `committed`), which also sees commits whose
/// requester stopped waiting.
pub type Reply<T> = Box<dyn FnOnce(T) + Send + 'static>;

/// One write, as queued by `Store::submit`.
pub enum WriteOp {
    /// Store a new verification; the reply comes after COMMIT (the 201).
    /// With `keyed` (exactly when `row.idempotency_key` is set), the key and
    /// its answer are stored in the same transaction, or, if the key is
    /// already stored for the company within its retention, nothing is
    /// written and the reply carries the stored answer.
    InsertVerification {
        row: VerificationRow,
        keyed: Option<Box<KeyedCreate>>,
        reply: Reply<Result<Inserted, StorageError>>,
    },
    /// Apply `event` to verification `id` (scoped to `owner`, its company
    /// and mode, if given), persist the result and its outbox row, then
    /// reply.
    Transition {
        id: String,
        owner: Option<crate::rows::Owner>,
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
    /// Record a 503 rejection; the reply comes after COMMIT, so the 503 is
    /// answered only once its dashboard row exists (the spec counts every
    /// rejection in the totals).
    InsertRejection {
        rejection: NewRejection,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Move a key's `last_used_at` forward to `at` (never backward).
    /// Fire-and-forget; touches of one key in a batch become one UPDATE.
    TouchKey { key_id: i64, at: UnixMillis },
    /// Record a finished webhook attempt and move its delivery on (state,
    /// attempt count, next attempt time) in one transaction; reply after
    /// COMMIT. See `deliveries`.
    RecordAttempt {
        attempt: NewAttempt,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Store a dashboard session at login; reply after COMMIT (the cookie is
    /// handed out only once the session exists).
    InsertSession {
        session: NewSession,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Delete up to `idempotency::PURGE_BATCH_MAX` idempotency keys
    /// created at or before `expired_before`; the reply carries how many.
    PurgeIdempotencyKeys {
        expired_before: UnixMillis,
        reply: Reply<Result<usize, StorageError>>,
    },
    /// Delete up to `test_rows::TEST_PURGE_BATCH_MAX` ended test-mode
    /// verifications (with their outbox rows) and as many test rejections
    /// created before `before`; the reply carries how many rows went.
    PurgeTestRows {
        before: UnixMillis,
        reply: Reply<Result<usize, StorageError>>,
    },
    /// Store number health: add `changes` to the stored counters and add
    /// `quarantines` (see `number_health`); reply after COMMIT.
    SaveNumberHealth {
        changes: Vec<crate::NumberHealthChange>,
        quarantines: Vec<crate::Quarantine>,
        reply: Reply<Result<(), StorageError>>,
    },
    /// Move the heartbeat moment forward to `at` (never backward), so a
    /// replica knows how recent it is without traffic (see `replica`);
    /// reply after COMMIT.
    Heartbeat {
        at: UnixMillis,
        reply: Reply<Result<(), StorageError>>,
    },
}

impl WriteOp {
    /// The op's name, for log lines about an op that has no reply.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            WriteOp::InsertVerification { .. } => "insert_verification",
            WriteOp::Transition { .. } => "transition",
            WriteOp::TransitionByNumber { .. } => "transition_by_number",
            WriteOp::InsertRejection { .. } => "insert_rejection",
            WriteOp::TouchKey { .. } => "touch_key",
            WriteOp::RecordAttempt { .. } => "record_attempt",
            WriteOp::InsertSession { .. } => "insert_session",
            WriteOp::Heartbeat { .. } => "heartbeat",
            WriteOp::SaveNumberHealth { .. } => "save_number_health",
            WriteOp::PurgeIdempotencyKeys { .. } => "purge_idempotency_keys",
            WriteOp::PurgeTestRows { .. } => "purge_test_rows",
        }
    }
}

impl WriteOp {
    /// An inbound call to `dial_number` while it is leased with
    /// `generation`: what a real INVITE and test mode's simulated call both
    /// submit, so both are decided by the same transition.
    pub fn call(
        dial_number: String,
        generation: u32,
        event: Event,
        reply: Reply<Result<TransitionResult, StorageError>>,
    ) -> WriteOp {
        WriteOp::TransitionByNumber {
            dial_number,
            generation: Some(generation),
            event,
            reply: Some(reply),
        }
    }
}
