//! `POST /api/v1/verifications/{id}/simulate-call/`: test mode's phone
//! call. A test key's verification is called by `caller_id` (or by a
//! withheld caller, `null`) without any telephony, and what happens is what
//! a real INVITE to its number would do: the same decision order
//! (`dialproof_engine::simulated_call`), the same `Event::Call`, committed
//! by the same write (`WriteOp::call`, which the SIP call path submits
//! too), so the same state machine decides, the same outbox row is written
//! and the commit consumer releases the number, schedules the signed
//! webhook and updates the held rows as for any call.
//!
//! The order of checks: a live key, an id that is not a verification id,
//! and a verification this key may not see are the same 404; then the
//! media type (415), the body (400 in the envelope, code
//! `invalid_request`); then the call. The 200 names the call's outcome
//! (`completed`, `caller_withheld`, `no_pending_verification`) and carries
//! the verification as it is after the call.
//!
//! Not for: deciding (the engine) or who the caller is (`super::auth`).

use super::envelope::envelope;
use super::verifications::{owner, server_error, verification_object, STORAGE_WAIT};
use super::{texts, Api};
use crate::http::{Request, Response};
use crate::openapi::SimulatedCall;
use crate::shared::wait::{wait_until_applied, Committing, Outcome};
use dialproof_engine::ids::VerificationId;
use dialproof_engine::simulated_call::{self, BodyError};
use dialproof_engine::sip::outcome::CallOutcome;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::media_type;
use dialproof_storage::{KeyRow, VerificationRow, WriteOp};
use serde_json::json;

pub fn simulate(ctx: &Api, req: &Request, key: &KeyRow, id: &str, now: UnixMillis) -> Response {
    let row = match test_row(ctx, key, id) {
        Ok(row) => row,
        Err(answer) => return answer,
    };
    if let Err(detail) = media_type::check_json(req.header("content-type"), req.body.len()) {
        return Response::detail(415, &detail);
    }
    let region = ctx.test_regions[row.pool.index()];
    let caller = match simulated_call::parse_body(&req.body)
        .and_then(|c| simulated_call::read_caller(c, region))
    {
        Ok(caller) => caller,
        Err(e) => return invalid(e),
    };
    let leased = ctx.leases.test_lease(&row.dial_number) == Some(row.lease_generation);
    let event = match simulated_call::decide(leased, caller, now) {
        Ok(event) => event,
        Err(outcome) => return answer(outcome, &row),
    };
    let (dial_number, generation) = (row.dial_number.clone(), row.lease_generation);
    let result = ctx.store.commit(STORAGE_WAIT, |reply| {
        WriteOp::call(dial_number, generation, event, reply)
    });
    match result {
        Outcome::Done(t) if t.changed => {
            let after = t.row.unwrap_or(row);
            // Like a cancel: the caller's next GET, and the next create
            // that wants this number, see the call's consequences.
            if !wait_until_applied(&ctx.commits, STORAGE_WAIT) {
                tracing::warn!(verification_id = %after.id,
                    "simulated call answered before its consequences were applied");
            }
            tracing::info!(verification_id = %after.id, caller = %after.caller_id,
                "simulated call completed a verification");
            answer(CallOutcome::Completed, &after)
        }
        Outcome::Done(t) => answer(CallOutcome::NoPendingVerification, &t.row.unwrap_or(row)),
        other => {
            tracing::error!(error = %other, "simulated call not recorded");
            server_error(ctx)
        }
    }
}

/// The verification `id` if `key` is a test key that may see it; else the
/// 404 an unknown id gets (a live key cannot tell the endpoint exists).
fn test_row(ctx: &Api, key: &KeyRow, id: &str) -> Result<VerificationRow, Response> {
    let not_found = || Response::detail(404, texts::NOT_FOUND);
    if key.livemode {
        return Err(not_found());
    }
    let id = VerificationId::parse(id).ok_or_else(not_found)?;
    match ctx
        .store
        .read_here(|r| r.owned_verification(id.as_str(), owner(key)))
    {
        Ok(Some(row)) => Ok(row),
        Ok(None) => Err(not_found()),
        Err(e) => {
            tracing::error!(error = %e, "simulated call's verification not read");
            Err(server_error(ctx))
        }
    }
}

/// The 400 for a body that names no caller: the envelope, with the
/// `caller_id` field's message when the field is what is wrong.
fn invalid(e: BodyError) -> Response {
    let fields = e.is_field().then(|| json!({ "caller_id": [e.message()] }));
    let message = if e.is_field() {
        "caller_id is invalid."
    } else {
        e.message()
    };
    envelope(400, "invalid_request", message, fields)
}

fn answer(outcome: CallOutcome, row: &VerificationRow) -> Response {
    let body = SimulatedCall {
        outcome: outcome.code(),
        verification: verification_object(row.view()),
    };
    // A struct of strings, integers and booleans always serialises.
    Response::json(200, serde_json::to_string(&body).unwrap_or_default())
}
