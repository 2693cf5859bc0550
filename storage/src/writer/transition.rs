//! Applying the engine's state machine inside the writer's transaction: load
//! the verification, ask `dialproof_engine::verification::apply` what the
//! event does to it, store the new status and, when the change emits a
//! webhook, its outbox row, in the batch's transaction as one op (see
//! `batch` for how an op that fails half-way leaves nothing behind).
//!
//! Because one writer runs every transition, whichever of a call, a cancel
//! or an expiry reaches the queue first wins, and the unique outbox index
//! makes a second webhook for one verification impossible.
//!
//! Not for: deciding (the engine does), sending the webhook (the binary
//! sends committed rows only), or giving the lease back (the commit
//! consumer does, from the `Transitioned` event).

use crate::committed::{Committed, Transitioned};
use crate::error::Result;
use crate::rows::{
    first_row, verification_columns, verification_from_row, DeliveryRow, DeliveryState, Owner,
    ReleasedLease, TransitionResult, VerificationRow,
};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{apply, Decision, Event, EventType, State};
use dialproof_engine::webhook::{payload_json, PayloadFields};
use dialproof_engine::CompanyId;
use rusqlite::{params, Connection, OptionalExtension};

/// A transition as applied in the open transaction.
pub(super) struct Applied {
    /// What the requester is told.
    pub(super) result: TransitionResult,
    /// The outbox row written with the change, if any (`result` carries
    /// only its id).
    pub(super) delivery: Option<DeliveryRow>,
}

impl Applied {
    /// No such verification (or another company's, or none pending on the
    /// number): nothing changed and nothing to show.
    fn nothing() -> Applied {
        Applied::unchanged(None)
    }

    fn unchanged(row: Option<VerificationRow>) -> Applied {
        Applied {
            result: TransitionResult {
                row,
                changed: false,
                released: None,
                delivery_id: None,
            },
            delivery: None,
        }
    }

    /// The commit consumer's event. Only a change has consequences outside
    /// the database, so an unchanged transition has none.
    pub(super) fn event(&self) -> Option<Committed> {
        if !self.result.changed {
            return None;
        }
        Some(Committed::Transitioned(Transitioned {
            row: self.result.row.clone()?,
            released: self.result.released.clone(),
            delivery: self.delivery.clone().map(Box::new),
        }))
    }
}

/// [`WriteOp::Transition`](crate::WriteOp::Transition): applies `event` to
/// verification `id`, scoped to `owner` (company and mode) if given.
pub(super) fn transition(
    conn: &Connection,
    id: &str,
    owner: Option<Owner>,
    event: &Event,
) -> Result<Applied> {
    match scoped_row(conn, id, owner)? {
        Some(row) => apply_to(conn, row, event),
        None => Ok(Applied::nothing()),
    }
}

/// Applies `event` to `row`, as read in this transaction: the new status
/// and, when the change emits a webhook, its outbox row.
fn apply_to(conn: &Connection, mut row: VerificationRow, event: &Event) -> Result<Applied> {
    let decision = apply(
        State {
            status: row.status,
            expires_at: row.expires_at,
        },
        event,
    );
    if !decision.changed {
        return Ok(Applied::unchanged(Some(row)));
    }
    let (webhook, release_lease) = (decision.webhook, decision.release_lease);
    take_decision(&mut row, decision);
    store_status(conn, &row)?;
    let delivery = match webhook {
        Some((kind, moment)) if wants_webhook(conn, row.company_id, kind)? => {
            Some(insert_delivery(conn, &row, kind, moment, event_at(event))?)
        }
        _ => None,
    };
    let released = release_lease.then(|| ReleasedLease {
        dial_number: row.dial_number.clone(),
        generation: row.lease_generation,
    });
    Ok(Applied {
        result: TransitionResult {
            row: Some(row),
            changed: true,
            released,
            delivery_id: delivery.as_ref().map(|d| d.id),
        },
        delivery,
    })
}

/// [`WriteOp::TransitionByNumber`](crate::WriteOp::TransitionByNumber):
/// finds the pending row by its number (the `verifications_pending_dial`
/// partial index) and applies `event`.
pub(super) fn transition_by_number(
    conn: &Connection,
    dial_number: &str,
    generation: Option<u32>,
    event: &Event,
) -> Result<Applied> {
    // A number is leased to at most one pending verification; the newest
    // wins should recovery ever have left two. The whole row in one query
    // (not its id, then the row by id): one index search less per call.
    // A literal text: the statement cache finds it without a text built
    // per call.
    let mut select = conn.prepare_cached(concat!(
        "SELECT ",
        verification_columns!(),
        " FROM verifications WHERE dial_number = ?1 \
         AND status = 'pending' AND (?2 IS NULL OR lease_generation = ?2) \
         ORDER BY created_at DESC LIMIT 1"
    ))?;
    match first_row(
        &mut select,
        params![dial_number, generation],
        verification_from_row,
    )? {
        Some(row) => apply_to(conn, row, event),
        None => Ok(Applied::nothing()),
    }
}

/// The verification `id`; another company's (or mode's) is
/// indistinguishable from none.
fn scoped_row(
    conn: &Connection,
    id: &str,
    owner: Option<Owner>,
) -> Result<Option<VerificationRow>> {
    let mut select = conn.prepare_cached(concat!(
        "SELECT ",
        verification_columns!(),
        " FROM verifications WHERE id = ?1"
    ))?;
    let row = first_row(&mut select, [id], verification_from_row)?;
    Ok(row.filter(|r| owner.is_none_or(|o| o.owns(r))))
}

/// Copies what the engine decided into the row.
fn take_decision(row: &mut VerificationRow, decision: Decision) {
    row.status = decision.status;
    if let Some((at, caller, evidence)) = decision.completion {
        row.completed_at = Some(at);
        row.caller_id = caller;
        row.caller_evidence = Some(evidence);
    }
    row.failure_reason = decision.failure_reason;
}

fn store_status(conn: &Connection, row: &VerificationRow) -> Result<()> {
    conn.prepare_cached(
        "UPDATE verifications SET status = ?2, completed_at = ?3, caller_id = ?4, \
         failure_reason = ?5, caller_id_source = ?6, caller_id_trust = ?7 WHERE id = ?1",
    )?
    .execute(params![
        row.id,
        row.status.as_str(),
        row.completed_at.map(|t| t.0),
        row.caller_id,
        row.failure_reason,
        row.caller_evidence.map(|e| e.source.as_str()),
        row.caller_evidence.map(|e| e.trust.as_str()),
    ])?;
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
/// `completed_at`; `due` is when the first attempt may start. Returns the
/// row as stored, so the commit consumer need not read it back.
fn insert_delivery(
    conn: &Connection,
    row: &VerificationRow,
    kind: EventType,
    moment: UnixMillis,
    due: UnixMillis,
) -> Result<DeliveryRow> {
    let payload = payload_json(&PayloadFields {
        event: kind,
        verification_id: &row.id,
        phone: &row.phone,
        dial_number: &row.dial_number,
        client_ref: &row.client_ref,
        info: &row.info,
        caller_id: Some(&row.caller_id),
        caller_evidence: row.caller_evidence,
        completed_at: moment,
        livemode: row.livemode,
    });
    conn.prepare_cached(
        "INSERT INTO webhook_deliveries (verification_id, company_id, event_type, url, payload, \
         state, attempts, next_attempt_at, created_at, updated_at, livemode) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6, ?6, ?7)",
    )?
    .execute(params![
        row.id,
        row.company_id,
        kind.as_str(),
        row.webhook_url,
        payload,
        due.0,
        row.livemode
    ])?;
    Ok(DeliveryRow {
        id: conn.last_insert_rowid(),
        verification_id: row.id.clone(),
        company_id: row.company_id,
        event_type: kind,
        url: row.webhook_url.clone(),
        payload,
        state: DeliveryState::Pending,
        attempts: 0,
        next_attempt_at: Some(due),
        created_at: due,
        updated_at: due,
        livemode: row.livemode,
    })
}
