//! The three verification endpoints: create, read and cancel.

use super::{texts, webhook_guard};
use crate::http::{Request, Response};
use crate::openapi::{NoNumberAvailable, Verification};
use crate::runtime::app::App;
use crate::runtime::metrics::Metrics;
use crate::runtime::wait::{failure_text, read_failure_text, wait_for};
use dialproof_engine::ids::{VerificationId, VerificationKey};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::{media_type, parse_create, CreateError, FieldErrors};
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{KeyRow, NewRejection, StorageError, Store, VerificationRow, WriteOp};
use std::time::Duration;

/// How long a request waits for its commit or read. The writer commits in
/// milliseconds; this bounds the wait if the disk stalls.
const STORAGE_WAIT: Duration = Duration::from_secs(30);

fn render(row: &VerificationRow) -> String {
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

fn server_error(app: &App) -> Response {
    Metrics::inc(&app.metrics.storage_errors);
    Response::detail(500, texts::SERVER_ERROR)
}

pub fn create(app: &App, req: &Request, key: &KeyRow, now: UnixMillis) -> Response {
    if let Err(detail) = media_type::check_json(req.header("content-type"), req.body.len()) {
        Metrics::inc(&app.metrics.creates_invalid);
        return Response::detail(415, &detail);
    }
    let company = app.keys.company(key.company_id);
    let parsed = parse_create(&req.body);
    let webhook_error = |url: &str| webhook_guard::check(app, company.as_ref(), url).err();
    let input = match parsed {
        Ok(input) => {
            if let Some(msg) = webhook_error(&input.webhook_url) {
                let mut errors = FieldErrors::default();
                errors.add("webhook_url", msg);
                return invalid(app, &errors);
            }
            input
        }
        Err(CreateError::Json(detail)) => {
            Metrics::inc(&app.metrics.creates_invalid);
            return Response::detail(400, &detail);
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
            return invalid(app, &errors);
        }
    };

    let Some((dial_number, generation)) = app.leases.lease(input.pool, key.company_id) else {
        return no_number(
            &app.store,
            &app.metrics,
            key,
            (&input.phone, input.pool),
            now,
        );
    };

    let id = VerificationKey::new(now, rand::random::<u128>()).id();
    let row = VerificationRow {
        id: id.as_str().to_owned(),
        company_id: key.company_id,
        api_key_id: key.id,
        phone: input.phone,
        dial_number: dial_number.clone(),
        pool: input.pool,
        client_ref: input.client_ref,
        info: input.info,
        webhook_url: input.webhook_url,
        ttl_seconds: input.ttl_seconds,
        status: Status::Pending,
        created_at: now,
        expires_at: now.plus_seconds(input.ttl_seconds),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: generation,
        failure_reason: None,
    };
    let body = render(&row);
    let mut refused = None;
    let committed = wait_for(STORAGE_WAIT, |reply| {
        if let Err(e) = app.store.submit(WriteOp::InsertVerification { row, reply }) {
            refused = Some(e);
        }
    });
    // A refused write surely failed (its reply was dropped uncalled), like
    // one the writer answered with an error.
    let committed = match refused {
        Some(e) => Some(Err(e)),
        None => committed,
    };
    // Its expiry is scheduled by the commit consumer when the row commits
    // (also after a timed-out wait here), never for a row that did not.
    match committed {
        Some(Ok(())) => {}
        other => {
            // Not committed (or not known to be): give the number back only
            // when the write surely failed; after a timeout the row may still
            // commit, and then its expiry (scheduled above) releases it.
            if matches!(other, Some(Err(_))) {
                app.leases.release(&dial_number, generation);
            }
            tracing::error!(verification_id = %id, error = %failure_text(other),
                "create not committed");
            return server_error(app);
        }
    }
    Metrics::inc(&app.metrics.creates_ok);
    tracing::info!(verification_id = %id, key = %key.prefix, %dial_number, "verification created");
    Response::json(201, body).with_header(
        "Location",
        format!("/api/v1/verifications/{}/", id.as_str()),
    )
}

/// No qualifying number is free: the 503, recorded as a rejection row
/// first.
fn no_number(
    store: &Store,
    metrics: &Metrics,
    key: &KeyRow,
    (phone, pool): (&str, Pool),
    now: UnixMillis,
) -> Response {
    Metrics::inc(&metrics.creates_rejected_no_number);
    tracing::warn!(
        key = %key.prefix,
        company_id = key.company_id,
        pool = pool.as_str(),
        "no dial number available; create rejected with 503"
    );
    let rejection = NewRejection {
        company_id: key.company_id,
        api_key_id: key.id,
        phone: phone.to_owned(),
        pool,
        reason: texts::NO_NUMBER_REASON.to_owned(),
        at: now,
    };
    // The 503 goes out only once its row is stored (README, "503").
    let mut refused = None;
    let stored = wait_for(STORAGE_WAIT, |reply| {
        if let Err(e) = store.submit(WriteOp::InsertRejection { rejection, reply }) {
            refused = Some(e);
        }
    });
    match (refused, stored) {
        (None, Some(Ok(()))) => {}
        (Some(e), _) => return rejection_not_stored(metrics, Some(Err(e))),
        (None, other) => return rejection_not_stored(metrics, other),
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

/// A 503 whose rejection row did not commit is not answered as a 503 (it
/// would be an acknowledged rejection with no row): the DRF 500 instead.
fn rejection_not_stored(metrics: &Metrics, result: Option<Result<(), StorageError>>) -> Response {
    tracing::error!(error = %failure_text(result), "503 rejection not stored");
    Metrics::inc(&metrics.storage_errors);
    Response::detail(500, texts::SERVER_ERROR)
}

fn invalid(app: &App, errors: &FieldErrors) -> Response {
    Metrics::inc(&app.metrics.creates_invalid);
    Response::json(400, errors.to_json())
}

pub fn read(app: &App, key: &KeyRow, id: &str) -> Response {
    let Some(id) = VerificationId::parse(id) else {
        return Response::detail(404, texts::NOT_FOUND);
    };
    let company = key.company_id;
    let row = wait_for(STORAGE_WAIT, |reply| {
        app.store
            .read(move |r| r.verification(id.as_str(), company), reply)
    });
    match row {
        Some(Ok(Ok(Some(row)))) => Response::json(200, render(&row)),
        Some(Ok(Ok(None))) => Response::detail(404, texts::NOT_FOUND),
        other => {
            tracing::error!(error = %read_failure_text(other), "read failed");
            server_error(app)
        }
    }
}

pub fn cancel(app: &App, key: &KeyRow, id: &str, now: UnixMillis) -> Response {
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
        if let Err(e) = app.store.submit(op) {
            tracing::error!(error = %e, "cancel not queued");
        }
    });
    match result {
        // The release of the number is the commit consumer's.
        Some(Ok(t)) => match t.row {
            Some(row) => Response::json(200, render(&row)),
            None => Response::detail(404, texts::NOT_FOUND),
        },
        other => {
            tracing::error!(error = %failure_text(other), "cancel failed");
            server_error(app)
        }
    }
}
