//! `POST /api/v1/verifications/`: the create, in the spec's order of
//! checks once the caller is admitted (see `super`): the `Idempotency-Key`
//! header, the media type, the body's fields, the key's earlier answer,
//! the SSRF guard, a number, then the commit that makes it a 201.
//!
//! With a key (see `super::idempotent`), the create claims it before it
//! leases anything, so concurrent retries of one key never lease a second
//! number; the key and the exact 201 body are stored in the verification's
//! own transaction, and a retry gets that body again.
//!
//! Not for: reading or cancelling (`super::verifications`), or any
//! decision (validation, the lease, the new row and the idempotency rules
//! are the engine's).

use super::idempotent::{self, Keyed};
use super::verifications::{render, server_error, STORAGE_WAIT};
use super::Api;
use super::{texts, webhook_guard};
use crate::http::{Request, Response};
use crate::openapi::NoNumberAvailable;
use crate::shared::metrics::Metrics;
use crate::shared::wait::{Committing, Outcome};
use dialproof_engine::ids::VerificationKey;
use dialproof_engine::test_pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::{
    media_type, parse_create, CreateError, CreateRequest, FieldErrors,
};
use dialproof_engine::verification_start;
use dialproof_storage::{Inserted, KeyRow, NewRejection, VerificationRow, WriteOp};

pub fn create(ctx: &Api, req: &Request, key: &KeyRow, now: UnixMillis) -> Response {
    let idempotency_key = match idempotent::header(req) {
        Ok(k) => k,
        Err(answer) => {
            Metrics::inc(&ctx.metrics.creates_invalid);
            return answer;
        }
    };
    if let Err(detail) = media_type::check_json(req.header("content-type"), req.body.len()) {
        Metrics::inc(&ctx.metrics.creates_invalid);
        return Response::detail(415, &detail);
    }
    let input = match parsed(ctx, req, key) {
        Ok(input) => input,
        Err(answer) => return answer,
    };
    // Before the SSRF guard's lookup and before any lease: a replay costs
    // neither, and a retry racing its original never takes a number.
    let keyed = match idempotency_key {
        Some(k) => match idempotent::begin(ctx, key, k, &input, now) {
            Ok(keyed) => Some(keyed),
            Err(answer) => return answer,
        },
        None => None,
    };
    if let Some(answer) = ssrf_refusal(ctx, key, &input.webhook_url) {
        return answer;
    }
    let Some((dial_number, generation)) = lease(ctx, key, &input) else {
        if let Some(answer) = keyed.and_then(|k| idempotent::stored(ctx, k)) {
            return answer;
        }
        return reject_no_number(ctx, key, &input, now);
    };
    let id = VerificationKey::new(now, rand::random::<u128>()).id();
    let started = verification_start::start(input, (dial_number, generation), now);
    let mut row = VerificationRow::new(id.as_str().to_owned(), key.company_id, key.id, started);
    row.livemode = key.livemode;
    row.idempotency_key = keyed.as_ref().map(|k| k.key().as_str().to_owned());
    commit_created(ctx, key, row, keyed)
}

/// A number for the create: a live key's from the live pools, a test
/// key's from its company's test pool of the phone's kind (the magic phone
/// never gets one: its create is the 503 a client must learn to handle).
fn lease(ctx: &Api, key: &KeyRow, input: &CreateRequest) -> Option<(String, u32)> {
    if key.livemode {
        return ctx.leases.lease(input.pool, key.company_id);
    }
    if input.phone == test_pool::MAGIC_NO_NUMBER_PHONE {
        return None;
    }
    let size = ctx
        .keys
        .company(key.company_id)
        .and_then(|c| c.test_pool_size)
        .unwrap_or(test_pool::POOL_SIZE_DEFAULT);
    ctx.leases.lease_test(input.pool, key.company_id, size)
}

/// The body parsed and every field checked (and, when some field is
/// invalid, the webhook URL against the SSRF guard too, since DRF reports
/// every field's errors together); else the 400.
fn parsed(ctx: &Api, req: &Request, key: &KeyRow) -> Result<CreateRequest, Response> {
    match parse_create(&req.body) {
        Ok(input) => Ok(input),
        Err(CreateError::Json(detail)) => {
            Metrics::inc(&ctx.metrics.creates_invalid);
            Err(Response::detail(400, &detail))
        }
        Err(CreateError::Fields {
            mut errors,
            webhook_url,
        }) => {
            let company = ctx.keys.company(key.company_id);
            let refused = webhook_url
                .as_deref()
                .and_then(|url| webhook_guard::check(ctx, company.as_deref(), url).err());
            if let Some(msg) = refused {
                errors.add_in_field_order("webhook_url", msg);
            }
            Err(invalid(ctx, &errors))
        }
    }
}

/// The SSRF guard's 400 for a body whose fields are otherwise valid.
fn ssrf_refusal(ctx: &Api, key: &KeyRow, url: &str) -> Option<Response> {
    let company = ctx.keys.company(key.company_id);
    let msg = webhook_guard::check(ctx, company.as_deref(), url).err()?;
    let mut errors = FieldErrors::default();
    errors.add("webhook_url", msg);
    Some(invalid(ctx, &errors))
}

fn invalid(ctx: &Api, errors: &FieldErrors) -> Response {
    Metrics::inc(&ctx.metrics.creates_invalid);
    Response::json(400, errors.to_json())
}

/// The spec's 503: no number qualifies. The rejection is recorded as a row
/// for the dashboard's totals (stored before the answer), and logged at
/// WARNING.
fn reject_no_number(ctx: &Api, key: &KeyRow, input: &CreateRequest, now: UnixMillis) -> Response {
    if key.livemode {
        Metrics::inc(&ctx.metrics.creates_rejected_no_number[input.pool.index()]);
        tracing::warn!(
            key = %key.prefix,
            company_id = key.company_id,
            pool = input.pool.as_str(),
            "no dial number available; create rejected with 503"
        );
    } else {
        // A test pool (or the magic phone) is the client's business, not a
        // live number shortage: its own counter, and no WARNING.
        Metrics::inc(&ctx.metrics.test_creates_rejected_no_number);
        tracing::info!(key = %key.prefix, company_id = key.company_id,
            pool = input.pool.as_str(), "test mode: no test number; create answered 503");
    }
    let rejection = NewRejection {
        company_id: key.company_id,
        api_key_id: key.id,
        phone: input.phone.clone(),
        pool: input.pool,
        reason: texts::NO_NUMBER_REASON.to_owned(),
        at: now,
        livemode: key.livemode,
    };
    // Stored before the answer, like a create: the spec counts every
    // rejection in the dashboard. One that did not commit (or is not known
    // to have) answers the DRF 500 instead, which tells the client as
    // truthfully that nothing was created.
    let outcome = ctx
        .store
        .commit(STORAGE_WAIT, |reply| WriteOp::InsertRejection {
            rejection,
            reply,
        });
    if !matches!(outcome, Outcome::Done(())) {
        tracing::error!(error = %outcome, "rejection row not committed");
        return server_error(ctx);
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

/// Submits the row (with its key, if any) and answers 201 only after its
/// COMMIT. Its expiry, and the key's answer for later retries, are the
/// commit consumer's (also after a timed-out wait here), never for a row
/// that did not commit.
fn commit_created(ctx: &Api, key: &KeyRow, row: VerificationRow, keyed: Option<Keyed>) -> Response {
    let body = render(row.view());
    let (id, dial_number, generation) = (
        row.id.clone(),
        row.dial_number.clone(),
        row.lease_generation,
    );
    let stored = keyed.as_ref().map(|k| Box::new(k.stored_with(&body)));
    let claim = keyed.map(Keyed::into_claim);
    let (outcome, claim) =
        ctx.store
            .commit_holding(STORAGE_WAIT, claim, |reply| WriteOp::InsertVerification {
                row,
                keyed: stored,
                reply,
            });
    match outcome {
        Outcome::Done(Inserted::Created) => {
            if let Some(claim) = claim.flatten() {
                claim.committed();
            }
        }
        Outcome::Done(Inserted::KeyTaken(taken)) => {
            // Stored before this process knew it (a restart, or evicted
            // from memory): nothing was written, so the number goes back.
            ctx.leases.release(&dial_number, generation);
            return idempotent::answer_stored(ctx, claim.flatten(), taken);
        }
        other => {
            // Not committed (or not known to be): give the number back only
            // when the write surely failed; after a timeout the row may still
            // commit, and then its expiry releases it. (A claim comes back
            // only with an answer; dropping it frees the key.)
            if matches!(other, Outcome::Failed(_)) {
                ctx.leases.release(&dial_number, generation);
            }
            tracing::error!(verification_id = %id, error = %other, "create not committed");
            return server_error(ctx);
        }
    }
    Metrics::inc(if key.livemode {
        &ctx.metrics.creates_ok
    } else {
        &ctx.metrics.test_creates_ok
    });
    tracing::info!(verification_id = %id, key = %key.prefix, %dial_number, "verification created");
    idempotent::created(body, &id)
}
