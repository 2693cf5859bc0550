//! Reading and cancelling a verification, and the Verification object
//! every endpoint answers with.
//!
//! Not for: the create (`super::create`), routing or admission (`super`).

use super::texts;
use super::Api;
use crate::http::Response;
use crate::openapi::Verification;
use crate::shared::metrics::Metrics;
use crate::shared::wait::{wait_until_applied, Committing, Outcome};
use dialproof_engine::ids::VerificationId;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{KeyRow, Owner, VerificationRow, WriteOp};
use std::time::Duration;

/// How long a request waits for its commit or read. The writer commits in
/// milliseconds; this bounds the wait if the disk stalls.
pub(super) const STORAGE_WAIT: Duration = Duration::from_secs(30);

/// The spec's Verification object for `row`, as the response body.
pub fn render(row: &VerificationRow) -> String {
    // A struct of strings and integers always serialises.
    serde_json::to_string(&verification_object(row)).unwrap_or_default()
}

/// The spec's Verification object for `row`.
pub(super) fn verification_object(row: &VerificationRow) -> Verification {
    let completed = row.status == Status::Completed;
    Verification {
        verification_id: row.id.clone(),
        phone: row.phone.clone(),
        dial_number: row.dial_number.clone(),
        client_ref: row.client_ref.clone(),
        info: row.info.clone(),
        status: row.status.as_str(),
        ttl_seconds: row.ttl_seconds,
        created_at: row.created_at.to_rfc3339(),
        expires_at: row.expires_at.to_rfc3339(),
        completed_at: if completed {
            row.completed_at.map(UnixMillis::to_rfc3339)
        } else {
            None
        },
        caller_id_received: if completed {
            row.caller_id.clone()
        } else {
            String::new()
        },
        caller_id_source: row
            .caller_evidence
            .filter(|_| completed)
            .map(|e| e.source.as_str()),
        caller_id_trust: row
            .caller_evidence
            .filter(|_| completed)
            .map(|e| e.trust.as_str()),
        livemode: row.livemode,
    }
}

/// The DRF 500, counted as a storage error.
pub(super) fn server_error(ctx: &Api) -> Response {
    Metrics::inc(&ctx.metrics.storage_errors);
    Response::detail(500, texts::SERVER_ERROR)
}

/// How long a GET waits for the commit consumer before it reads SQLite
/// instead of the held rows.
const HELD_ROWS_WAIT: Duration = Duration::from_millis(50);

/// Whose rows `key` may see: its company's, in its own mode.
pub(super) fn owner(key: &KeyRow) -> Owner {
    Owner {
        company_id: key.company_id,
        livemode: key.livemode,
    }
}

pub fn read(ctx: &Api, key: &KeyRow, id: &str) -> Response {
    let Some(id) = VerificationId::parse(id) else {
        return Response::detail(404, texts::NOT_FOUND);
    };
    let owner = owner(key);
    // What was committed before this request came (a call whose final the
    // caller already heard, a cancel already answered) is in the held rows
    // first: the commit consumer trails the writer by microseconds, so
    // this rarely waits; if it ever waits too long, SQLite answers.
    let held = wait_until_applied(&ctx.commits, HELD_ROWS_WAIT)
        .then(|| ctx.recent.get(id.as_str(), owner))
        .flatten();
    if let Some(body) = held {
        return Response::json(200, body.as_bytes().to_vec());
    }
    // A primary-key lookup, on this worker's own connection: cheaper than
    // the hand-off to a reader thread and back.
    match ctx
        .store
        .read_here(|r| r.owned_verification(id.as_str(), owner))
    {
        Ok(Some(row)) => Response::json(200, render(&row)),
        Ok(None) => Response::detail(404, texts::NOT_FOUND),
        Err(e) => {
            tracing::error!(error = %e, "read failed");
            server_error(ctx)
        }
    }
}

pub fn cancel(ctx: &Api, key: &KeyRow, id: &str, now: UnixMillis) -> Response {
    let Some(id) = VerificationId::parse(id) else {
        return Response::detail(404, texts::NOT_FOUND);
    };
    let result = ctx.store.commit(STORAGE_WAIT, |reply| WriteOp::Transition {
        id: id.as_str().to_owned(),
        owner: Some(owner(key)),
        event: Event::Cancel { at: now },
        reply: Some(reply),
    });
    match result {
        // The release of the number is the commit consumer's.
        Outcome::Done(t) => match t.row {
            Some(row) => {
                let body = render(&row);
                // Before the answer: the canceller's next GET must not find
                // the row as it was before the cancel, and the spec releases
                // the number "at once" (the commit consumer does it; wait
                // for it, so the next create can be issued that number).
                if row.status != Status::Pending {
                    ctx.recent.ended(&row.id, row.owner(), body.clone());
                }
                if !wait_until_applied(&ctx.commits, STORAGE_WAIT) {
                    tracing::warn!(verification_id = %row.id,
                        "cancel answered before its number's release was applied");
                }
                Response::json(200, body)
            }
            None => Response::detail(404, texts::NOT_FOUND),
        },
        other => {
            tracing::error!(error = %other, "cancel failed");
            server_error(ctx)
        }
    }
}
