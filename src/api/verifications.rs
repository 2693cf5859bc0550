//! The three verification endpoints: create, read and cancel.

use super::Api;
use super::{texts, webhook_guard};
use crate::http::{Request, Response};
use crate::openapi::{NoNumberAvailable, Verification};
use crate::shared::metrics::Metrics;
use crate::shared::wait::{failure_text, read_failure_text, wait_for, wait_until_applied};
use dialproof_engine::ids::{VerificationId, VerificationKey};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::{
    media_type, parse_create, CreateError, CreateRequest, FieldErrors,
};
use dialproof_engine::verification::{Event, Status};
use dialproof_engine::verification_start;
use dialproof_storage::{KeyRow, NewRejection, VerificationRow, WriteOp};
use std::time::Duration;

/// How long a request waits for its commit or read. The writer commits in
/// milliseconds; this bounds the wait if the disk stalls.
const STORAGE_WAIT: Duration = Duration::from_secs(30);

/// The spec's Verification object for `row`, as the response body.
pub fn render(row: &VerificationRow) -> String {
    let completed = row.status == Status::Completed;
    let body = Verification {
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
    };
    // A struct of strings and integers always serialises.
    serde_json::to_string(&body).unwrap_or_default()
}

fn server_error(ctx: &Api) -> Response {
    Metrics::inc(&ctx.metrics.storage_errors);
    Response::detail(500, texts::SERVER_ERROR)
}

/// Writes the 503's rejection row through the writer and waits for its
/// COMMIT, like a create: the spec counts every rejection in the dashboard,
/// so the 503 is sent only once its row is stored. A row that did not commit
/// (or is not known to have) answers the DRF 500 instead, which tells the
/// client as truthfully that nothing was created.
fn record_rejection(ctx: &Api, rejection: NewRejection) -> Result<(), Response> {
    let mut refused = None;
    let committed = wait_for(STORAGE_WAIT, |reply| {
        if let Err(e) = ctx
            .store
            .submit(WriteOp::InsertRejection { rejection, reply })
        {
            refused = Some(e);
        }
    });
    let committed = match refused {
        Some(e) => Some(Err(e)),
        None => committed,
    };
    match committed {
        Some(Ok(())) => Ok(()),
        other => {
            tracing::error!(error = %failure_text(other), "rejection row not committed");
            Err(server_error(ctx))
        }
    }
}

pub fn create(ctx: &Api, req: &Request, key: &KeyRow, now: UnixMillis) -> Response {
    if let Err(detail) = media_type::check_json(req.header("content-type"), req.body.len()) {
        Metrics::inc(&ctx.metrics.creates_invalid);
        return Response::detail(415, &detail);
    }
    let input = match validated(ctx, req, key) {
        Ok(input) => input,
        Err(answer) => return answer,
    };
    let Some((dial_number, generation)) = ctx.leases.lease(input.pool, key.company_id) else {
        return reject_no_number(ctx, key, &input, now);
    };
    let id = VerificationKey::new(now, rand::random::<u128>()).id();
    let started = verification_start::start(input, (dial_number, generation), now);
    let row = VerificationRow::new(id.as_str().to_owned(), key.company_id, key.id, started);
    commit_created(ctx, key, row)
}

/// The body parsed once and every field checked, the webhook URL against
/// the SSRF guard too; else the 400 answer.
fn validated(ctx: &Api, req: &Request, key: &KeyRow) -> Result<CreateRequest, Response> {
    let company = ctx.keys.company(key.company_id);
    let webhook_error = |url: &str| webhook_guard::check(ctx, company.as_ref(), url).err();
    match parse_create(&req.body) {
        Ok(input) => match webhook_error(&input.webhook_url) {
            Some(msg) => {
                let mut errors = FieldErrors::default();
                errors.add("webhook_url", msg);
                Err(invalid(ctx, &errors))
            }
            None => Ok(input),
        },
        Err(CreateError::Json(detail)) => {
            Metrics::inc(&ctx.metrics.creates_invalid);
            Err(Response::detail(400, &detail))
        }
        Err(CreateError::Fields {
            mut errors,
            webhook_url,
        }) => {
            // DRF reports every field's errors together: when the URL itself
            // passed its field checks, the SSRF guard still runs on it.
            if let Some(msg) = webhook_url.as_deref().and_then(webhook_error) {
                errors.add_in_field_order("webhook_url", msg);
            }
            Err(invalid(ctx, &errors))
        }
    }
}

/// The spec's 503: no number qualifies. The rejection is recorded as a row
/// for the dashboard's totals (stored before the answer), and logged at
/// WARNING.
fn reject_no_number(ctx: &Api, key: &KeyRow, input: &CreateRequest, now: UnixMillis) -> Response {
    Metrics::inc(&ctx.metrics.creates_rejected_no_number[input.pool.index()]);
    tracing::warn!(
        key = %key.prefix,
        company_id = key.company_id,
        pool = input.pool.as_str(),
        "no dial number available; create rejected with 503"
    );
    let rejection = NewRejection {
        company_id: key.company_id,
        api_key_id: key.id,
        phone: input.phone.clone(),
        pool: input.pool,
        reason: texts::NO_NUMBER_REASON.to_owned(),
        at: now,
    };
    if let Err(resp) = record_rejection(ctx, rejection) {
        return resp;
    }
    let body = NoNumberAvailable {
        error: texts::NO_NUMBER_CODE,
        message: texts::NO_NUMBER_MESSAGE,
        retry_after: texts::NO_NUMBER_RETRY_AFTER_SECONDS,
    };
    let body = serde_json::to_string(&body).unwrap_or_default();
    Response::json(503, body).with_header(
        "Retry-After",
        texts::NO_NUMBER_RETRY_AFTER_SECONDS.to_string(),
    )
}

/// Submits the row and answers 201 only after its COMMIT. Its expiry is
/// scheduled by the commit consumer when the row commits (also after a
/// timed-out wait here), never for a row that did not.
fn commit_created(ctx: &Api, key: &KeyRow, row: VerificationRow) -> Response {
    let body = render(&row);
    let (id, dial_number, generation) = (
        row.id.clone(),
        row.dial_number.clone(),
        row.lease_generation,
    );
    let mut refused = None;
    let committed = wait_for(STORAGE_WAIT, |reply| {
        if let Err(e) = ctx.store.submit(WriteOp::InsertVerification { row, reply }) {
            refused = Some(e);
        }
    });
    // A refused write surely failed (its reply was dropped uncalled), like
    // one the writer answered with an error.
    let committed = match refused {
        Some(e) => Some(Err(e)),
        None => committed,
    };
    match committed {
        Some(Ok(())) => {}
        other => {
            // Not committed (or not known to be): give the number back only
            // when the write surely failed; after a timeout the row may still
            // commit, and then its expiry releases it.
            if matches!(other, Some(Err(_))) {
                ctx.leases.release(&dial_number, generation);
            }
            tracing::error!(verification_id = %id, error = %failure_text(other),
                "create not committed");
            return server_error(ctx);
        }
    }
    Metrics::inc(&ctx.metrics.creates_ok);
    tracing::info!(verification_id = %id, key = %key.prefix, %dial_number, "verification created");
    Response::json(201, body).with_header("Location", format!("/api/v1/verifications/{id}/"))
}

fn invalid(ctx: &Api, errors: &FieldErrors) -> Response {
    Metrics::inc(&ctx.metrics.creates_invalid);
    Response::json(400, errors.to_json())
}

/// How long a GET waits for the commit consumer before it reads SQLite
/// instead of the held rows.
const HELD_ROWS_WAIT: Duration = Duration::from_millis(50);

pub fn read(ctx: &Api, key: &KeyRow, id: &str) -> Response {
    let Some(id) = VerificationId::parse(id) else {
        return Response::detail(404, texts::NOT_FOUND);
    };
    let company = key.company_id;
    // What was committed before this request came (a call whose final the
    // caller already heard, a cancel already answered) is in the held rows
    // first: the commit consumer trails the writer by microseconds, so
    // this rarely waits; if it ever waits too long, SQLite answers.
    let held = wait_until_applied(&ctx.commits, HELD_ROWS_WAIT)
        .then(|| ctx.recent.get(id.as_str(), company))
        .flatten();
    if let Some(body) = held {
        return Response::json(200, body.as_bytes().to_vec());
    }
    let row = wait_for(STORAGE_WAIT, |reply| {
        ctx.store
            .read(move |r| r.verification(id.as_str(), company), reply)
    });
    match row {
        Some(Ok(Ok(Some(row)))) => Response::json(200, render(&row)),
        Some(Ok(Ok(None))) => Response::detail(404, texts::NOT_FOUND),
        other => {
            tracing::error!(error = %read_failure_text(other), "read failed");
            server_error(ctx)
        }
    }
}

pub fn cancel(ctx: &Api, key: &KeyRow, id: &str, now: UnixMillis) -> Response {
    let Some(id) = VerificationId::parse(id) else {
        return Response::detail(404, texts::NOT_FOUND);
    };
    let result = wait_for(STORAGE_WAIT, |reply| {
        let op = WriteOp::Transition {
            id: id.as_str().to_owned(),
            company_id: Some(key.company_id),
            event: Event::Cancel { at: now },
            reply: Some(reply),
        };
        if let Err(e) = ctx.store.submit(op) {
            tracing::error!(error = %e, "cancel not queued");
        }
    });
    match result {
        // The release of the number is the commit consumer's.
        Some(Ok(t)) => match t.row {
            Some(row) => {
                let body = render(&row);
                // Before the answer: the canceller's next GET must not find
                // the row as it was before the cancel, and the spec releases
                // the number "at once" (the commit consumer does it; wait
                // for it, so the next create can be issued that number).
                if row.status != Status::Pending {
                    ctx.recent.ended(&row.id, row.company_id, body.clone());
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
            tracing::error!(error = %failure_text(other), "cancel failed");
            server_error(ctx)
        }
    }
}
