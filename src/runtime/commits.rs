//! The one owner of what a commit means outside the database.
//!
//! The storage writer reports every committed change as an event
//! (`dialproof_storage::Committed`) on one unbounded queue; this thread
//! takes them in commit order and turns each into its consequences, once:
//! - a created verification: its expiry is scheduled, its row held for
//!   GETs while pending (`crate::shared::held_rows`), and the answer of the
//!   idempotency key it was created with recorded for retries;
//! - a status change: the lease it ended goes back to the lease table, the
//!   held row is taken out (SQLite answers for it now), the webhook driver
//!   is woken for the outbox row written with it, the transition is
//!   counted and logged ("verification ended").
//!
//! Nothing else does these things: request handlers, the SIP call path,
//! the expiry thread and line failures only submit writes and answer their
//! own requester from the reply. So a reply that nobody waits for any more
//! (a timed-out cancel whose transition still commits) loses nothing, and
//! no work runs on the writer thread.
//!
//! Not for: deciding anything (the engine's state machine decided in the
//! writer), or answering requests (replies do).

use crate::runtime::app::App;
use dialproof_engine::idempotency::{Answer, IdempotencyKey, Space};
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::number_health::Ending;
use dialproof_engine::verification::Status;
use dialproof_storage::{CommitReceiver, Committed, StoredKey, Transitioned};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Starts the consumer. It ends by itself after the writer's last batch, so
/// join it after `Store::shutdown` to know every commit was applied.
pub fn spawn(app: Arc<App>, commits: CommitReceiver) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("commits".into())
        .spawn(move || {
            while let Some(batch) = commits.recv() {
                for event in batch {
                    apply(&app, event);
                }
                commits.applied_one();
            }
        })
}

fn apply(app: &App, event: Committed) {
    match event {
        Committed::Created(row, stored_key) => match VerificationKey::parse(&row.id) {
            Some(key) => {
                app.expiries.schedule([(row.expires_at, key)]);
                if row.livemode {
                    app.health
                        .on_lease(&row.dial_number, row.pool, row.created_at);
                }
                app.held.created(key, &row);
                if let Some(stored) = stored_key {
                    record_key(app, *stored);
                }
            }
            // Every id this service writes is a canonical ULID.
            None => tracing::error!(verification_id = %row.id,
                "created verification has an id this service does not issue; no expiry"),
        },
        Committed::Transitioned(t) => transitioned(app, t),
        // The webhook driver learns each attempt from its sender's report,
        // and the database (which it polls) is its schedule's truth.
        Committed::AttemptRecorded(_) => {}
    }
}

/// A keyed create committed: retries of its key now replay its answer.
fn record_key(app: &App, stored: StoredKey) {
    let Some(key) = IdempotencyKey::from_stored(&stored.key) else {
        // The API parsed it before it was written; it cannot fail.
        tracing::error!(verification_id = %stored.verification_id,
            "committed idempotency key does not parse; retries will read it from storage");
        return;
    };
    let answer = Answer {
        fingerprint: stored.fingerprint,
        verification_id: Arc::from(stored.verification_id.as_str()),
        body: Arc::from(stored.response_body.as_str()),
        created_at: stored.created_at,
    };
    let space = Space {
        company: stored.company_id,
        livemode: stored.livemode,
    };
    app.idempotency.record(space, &key, answer);
}

/// How a lease ended, for number health: an expiry is told from a cancel
/// (both `expired`) by its webhook, which only the TTL's end sends.
fn health_ending(t: &Transitioned) -> Ending {
    match t.row.status {
        Status::Completed => Ending::Completed,
        Status::Expired if t.delivery.is_some() => Ending::Expired,
        _ => Ending::Neutral,
    }
}

fn transitioned(app: &App, t: Transitioned) {
    // First: the webhook this change wakes must not reach a client before
    // a GET shows the change.
    app.held.ended(&t.row.id);
    if let Some(lease) = &t.released {
        // A test number is no line's: its health means nothing.
        if t.row.livemode {
            app.health
                .on_end(&lease.dial_number, t.row.pool, health_ending(&t), app.now());
        }
        if !app.leases.release(&lease.dial_number, lease.generation) {
            // A stale generation: the number was already released (e.g.
            // carried over a reload); nothing to undo.
            tracing::debug!(dial_number = %lease.dial_number, generation = lease.generation,
                "lease already released");
        }
    }
    // The outbox row is committed: send it now rather than at the
    // driver's next poll.
    // With its row, so that the driver need not read it back.
    if let Some(delivery) = t.delivery {
        app.webhook_waker.committed(delivery);
    }
    app.metrics.transition(t.row.status);
    tracing::info!(
        verification_id = %t.row.id,
        status = t.row.status.as_str(),
        dial_number = %t.row.dial_number,
        "verification ended"
    );
}
