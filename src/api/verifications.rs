//! Reading and cancelling a verification, and the Verification object
//! every endpoint answers with.
//!
//! Not for: the create (`super::create`), routing or admission (`super`).

use super::texts;
use super::Api;
use crate::http::Response;
use crate::openapi::{Moment, Verification};
use crate::shared::held_rows::HeldCopy;
use crate::shared::metrics::Metrics;
use crate::shared::wait::{wait_until_applied, Committing, Outcome};
use dialproof_engine::ids::{VerificationId, VerificationKey};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{KeyRow, Owner, VerificationView, WriteOp};
use std::time::Duration;

/// How long a request waits for its commit or read. The writer commits in
/// milliseconds; this bounds the wait if the disk stalls.
pub(super) const STORAGE_WAIT: Duration = Duration::from_secs(30);

/// Bytes a rendered Verification object usually fits in (about 600 with
/// the longest `info`s under 300 bytes), so the body is allocated once.
const BODY_CAPACITY: usize = 768;

/// The spec's Verification object for `row`, as the response body.
pub fn render(row: VerificationView<'_>) -> String {
    let mut body = Vec::with_capacity(BODY_CAPACITY);
    // A struct of strings, integers and booleans always serialises, and
    // serde_json writes only UTF-8.
    let _ = serde_json::to_writer(&mut body, &verification_object(row));
    String::from_utf8(body).unwrap_or_default()
}

/// The spec's Verification object for `row`.
pub(super) fn verification_object(row: VerificationView<'_>) -> Verification<'_> {
    let completed = row.status == Status::Completed;
    Verification {
        verification_id: row.id,
        phone: row.phone,
        dial_number: row.dial_number,
        client_ref: row.client_ref,
        info: row.info,
        status: row.status.as_str(),
        ttl_seconds: row.ttl_seconds,
        created_at: Moment(row.created_at),
        expires_at: Moment(row.expires_at),
        completed_at: if completed {
            row.completed_at.map(Moment)
        } else {
            None
        },
        caller_id_received: if completed { row.caller_id } else { "" },
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
    // A pending verification is answered from the held rows, once they
    // reflect every commit made before this request came (a call whose
    // final the caller already heard takes its row out, so SQLite answers
    // with `completed`). The commit consumer trails the writer by
    // microseconds, so this rarely waits; if it ever waits too long, or
    // the row is not held (ended, dropped past the bound, created before
    // the last start), SQLite answers.
    let key = VerificationKey::parse(id.as_str());
    let held = wait_until_applied(&ctx.commits, HELD_ROWS_WAIT)
        .then_some(key)
        .flatten()
        .and_then(|key| ctx.held.render(key, owner, render));
    if let Some(body) = held {
        Metrics::inc(&ctx.metrics.reads_held);
        return Response::json(200, body);
    }
    // A primary-key lookup, on this worker's own connection: cheaper than
    // the hand-off to a reader thread and back. The body is rendered from
    // SQLite's buffers, without decoding the row into owned strings. A
    // pending row read here is offered back to the held rows, so that the
    // client's next poll of it is answered from memory; the mark, taken
    // before the read, lets them refuse a copy a change may have outdated.
    let mark = key.map(|key| (key, ctx.held.read_mark(key)));
    let read = ctx.store.read_here(|r| {
        r.owned_verification_view(id.as_str(), owner, |view| {
            let copy = mark.and_then(|(key, _)| HeldCopy::of(key, owner, &view));
            (render(view), copy)
        })
    });
    match read {
        Ok(Some((body, copy))) => {
            if let (Some(copy), Some((_, mark))) = (copy, mark) {
                ctx.held.keep_read(copy, mark);
            }
            Metrics::inc(&ctx.metrics.reads_stored);
            Response::json(200, body)
        }
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
                let body = render(row.view());
                // Before the answer: the canceller's next GET must not find
                // the row as it was before the cancel, and the spec releases
                // the number "at once". The commit consumer does both (it
                // takes the row out of the held ones and frees the number);
                // wait for it, so the next create can be issued that number.
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

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_engine::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
    use serde_json::json;

    fn view(status: Status) -> VerificationView<'static> {
        VerificationView {
            id: "ver_01JD8X5Q2M3N4P5R6S7T8V9W0X",
            phone: "+79123456789",
            dial_number: "+74950000001",
            client_ref: "ref \"q\" \\",
            info: "тариф\nA",
            status,
            ttl_seconds: 60,
            created_at: UnixMillis(1_800_000_000_123),
            expires_at: UnixMillis(1_800_000_060_123),
            completed_at: Some(UnixMillis(1_800_000_005_000)),
            caller_id: "+79161234567",
            caller_evidence: Some(CallerEvidence {
                source: CallerIdSource::PAssertedIdentity,
                trust: CallerIdTrust::Asserted,
            }),
            livemode: true,
        }
    }

    fn rendered(status: Status) -> serde_json::Value {
        serde_json::from_str(&render(view(status))).expect("the body is JSON")
    }

    #[test]
    fn a_completed_verification_shows_its_call_and_its_moments_in_rfc_3339() {
        assert_eq!(
            rendered(Status::Completed),
            json!({
                "verification_id": "ver_01JD8X5Q2M3N4P5R6S7T8V9W0X",
                "phone": "+79123456789",
                "dial_number": "+74950000001",
                "client_ref": "ref \"q\" \\",
                "info": "тариф\nA",
                "status": "completed",
                "ttl_seconds": 60,
                "created_at": "2027-01-15T08:00:00.123Z",
                "expires_at": "2027-01-15T08:01:00.123Z",
                "completed_at": "2027-01-15T08:00:05.000Z",
                "caller_id_received": "+79161234567",
                "caller_id_source": "p_asserted_identity",
                "caller_id_trust": "asserted",
                "livemode": true,
            })
        );
    }

    #[test]
    fn any_other_status_hides_the_call() {
        let body = rendered(Status::Expired);
        assert_eq!(body["status"], "expired");
        assert_eq!(body["completed_at"], serde_json::Value::Null);
        assert_eq!(body["caller_id_received"], "");
        assert_eq!(body["caller_id_source"], serde_json::Value::Null);
        assert_eq!(body["caller_id_trust"], serde_json::Value::Null);
    }
}
