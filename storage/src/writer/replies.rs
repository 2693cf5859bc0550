//! The replies of one batch, held until the batch's fate is known.
//!
//! An op's reply may be called only once its outcome is final: after COMMIT
//! (success or the op's own error) or after the rollback of the whole batch
//! (the batch's error). [`HeldReply`] keeps the reply and the op's result
//! side by side until then, and calls the reply so that a panicking callback
//! cannot take the writer down.
//!
//! Not for: the commit consumer's events (see `committed`), which are built
//! as ops run and handed over by the batch before any reply is called.

use crate::error::{Result, StorageError};
use crate::idempotency::Inserted;
use crate::ops::{Reply, WriteOp};
use crate::rows::TransitionResult;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An op's reply and result, held until the batch's fate is known.
// These live in one Vec per batch; boxing the large variant would only add
// an allocation per transition.
#[allow(clippy::large_enum_variant)]
pub(super) enum HeldReply {
    /// An op answered with a unit result: a rejection insert, a recorded
    /// webhook attempt, a stored session, a heartbeat.
    Unit(Reply<Result<()>>, Result<()>),
    /// A verification insert.
    Inserted(Reply<Result<Inserted>>, Result<Inserted>),
    /// A purge, with the number of rows it deleted.
    Count(Reply<Result<usize>>, Result<usize>),
    /// A transition, by id or by number; its reply is optional.
    Transition(
        Option<Reply<Result<TransitionResult>>>,
        Result<TransitionResult>,
    ),
    /// A fire-and-forget op (a key touch); the name is for the
    /// log line its failure gets instead of a reply.
    Unanswered(&'static str, Result<()>),
}

impl HeldReply {
    pub(super) fn is_ok(&self) -> bool {
        match self {
            HeldReply::Unit(_, r) | HeldReply::Unanswered(_, r) => r.is_ok(),
            HeldReply::Inserted(_, r) => r.is_ok(),
            HeldReply::Count(_, r) => r.is_ok(),
            HeldReply::Transition(_, r) => r.is_ok(),
        }
    }

    /// The reply of an op that never ran because the batch had failed.
    pub(super) fn skipped(op: WriteOp, e: &StorageError) -> HeldReply {
        let name = op.name();
        match op {
            WriteOp::InsertVerification { reply, .. } => HeldReply::Inserted(reply, Err(e.clone())),
            WriteOp::PurgeIdempotencyKeys { reply, .. } | WriteOp::PurgeTestRows { reply, .. } => {
                HeldReply::Count(reply, Err(e.clone()))
            }
            WriteOp::RecordAttempt { reply, .. }
            | WriteOp::InsertSession { reply, .. }
            | WriteOp::Heartbeat { reply, .. }
            | WriteOp::SaveNumberHealth { reply, .. } => HeldReply::Unit(reply, Err(e.clone())),
            WriteOp::InsertRejection { reply, .. } => HeldReply::Unit(reply, Err(e.clone())),
            WriteOp::Transition { reply, .. } | WriteOp::TransitionByNumber { reply, .. } => {
                HeldReply::Transition(reply, Err(e.clone()))
            }
            WriteOp::TouchKey { .. } => HeldReply::Unanswered(name, Err(e.clone())),
        }
    }

    /// Replaces the result by `e` (the batch did not commit after all, or
    /// its acknowledgement is lost at the `writer.after_commit` fail point).
    pub(super) fn fail(self, e: &StorageError) -> HeldReply {
        match self {
            HeldReply::Unit(reply, _) => HeldReply::Unit(reply, Err(e.clone())),
            HeldReply::Inserted(reply, _) => HeldReply::Inserted(reply, Err(e.clone())),
            HeldReply::Count(reply, _) => HeldReply::Count(reply, Err(e.clone())),
            HeldReply::Transition(reply, _) => HeldReply::Transition(reply, Err(e.clone())),
            HeldReply::Unanswered(name, _) => HeldReply::Unanswered(name, Err(e.clone())),
        }
    }

    /// Calls the reply, or logs the failure of an op without one.
    pub(super) fn answer(self) {
        match self {
            HeldReply::Unit(reply, r) => call_reply(reply, r),
            HeldReply::Inserted(reply, r) => call_reply(reply, r),
            HeldReply::Count(reply, r) => call_reply(reply, r),
            HeldReply::Transition(Some(reply), r) => call_reply(reply, r),
            HeldReply::Transition(None, Err(e)) => {
                tracing::warn!(error = %e, "transition without reply failed");
            }
            HeldReply::Transition(None, Ok(_)) => {}
            HeldReply::Unanswered(name, Err(e)) => {
                tracing::warn!(op = name, error = %e, "fire-and-forget write failed");
            }
            HeldReply::Unanswered(_, Ok(())) => {}
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
